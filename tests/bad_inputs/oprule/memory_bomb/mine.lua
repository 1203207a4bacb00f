return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    local t = {} while true do t[#t+1] = ('x'):rep(1e6) end
  end,
}
