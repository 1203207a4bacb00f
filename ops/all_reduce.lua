-- ops/all_reduce.lua — an all-reduce of the node's output over its group (tensor/data parallel), priced by neusight.collectives.
return require("neusight.parallel").rule("all_reduce",
  "all_reduce: ALLREDUCE of the output over attrs.group in the pass attrs.direction names (alpha-beta model)")
