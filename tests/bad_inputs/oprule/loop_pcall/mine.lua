return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    while true do pcall(function() while true do end end) end
  end,
}
