return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { require("neusight.kernels").mem({ { 4, math.maxinteger, 64 } }, "fp32") }
  end,
}
