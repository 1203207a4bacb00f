-- ops/reduce_scatter.lua — a reduce-scatter of the node's (unscattered) output over its group, priced by neusight.collectives.
return require("neusight.parallel").rule("reduce_scatter",
  "reduce_scatter: REDUCESCATTER of the full output over attrs.group in the pass attrs.direction names")
