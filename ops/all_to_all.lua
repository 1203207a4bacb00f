-- ops/all_to_all.lua — an all-to-all exchange of the node's output (MoE expert parallelism), priced by neusight.collectives.
return require("neusight.parallel").rule("all_to_all",
  "all_to_all: ALLTOALL of the output over attrs.group (expert parallel) in the pass attrs.direction names")
