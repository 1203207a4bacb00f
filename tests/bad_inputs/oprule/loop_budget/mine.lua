return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    while true do end
  end,
}
