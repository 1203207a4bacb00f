return {
  name = "mine", doc = "d", backward = false,
  forward = function(node, gpu)
    return setmetatable({}, { __len = function() return 1.5 end, __index = function() error('x') end })
  end,
}
