return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return setmetatable({}, { __index = function() error('boom') end, __len = function() error('len') end })
  end,
}
