return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    error({ code = 1 })
  end,
}
