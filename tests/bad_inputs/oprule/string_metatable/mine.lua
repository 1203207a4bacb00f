return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    getmetatable('').__index.rep = nil
    return { { kind = "memory", name = "MEM", flops = 0, bytes = 1e6 } }
  end,
}
