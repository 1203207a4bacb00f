-- ops/all_gather.lua — an all-gather whose gathered result is the node's output (sequence/tensor parallel), priced by neusight.collectives.
return require("neusight.parallel").rule("all_gather",
  "all_gather: ALLGATHER of the (gathered) output over attrs.group in the pass attrs.direction names")
