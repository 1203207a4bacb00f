return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return {}
  end,
}
