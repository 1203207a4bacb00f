return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    local s = ('a'):rep(300000) return s:find('.-.-.-.-b')
  end,
}
