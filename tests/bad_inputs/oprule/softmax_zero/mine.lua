return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return { require("neusight.kernels").softmax(0, 64, "fp32") }
  end,
}
