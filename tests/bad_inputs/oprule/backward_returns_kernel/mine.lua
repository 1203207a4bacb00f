return { name = "mine", doc = "d", forward = function() return {} end,
  backward = function() return { kind = "memory", name = "M", flops = 0, bytes = 1 } end }
