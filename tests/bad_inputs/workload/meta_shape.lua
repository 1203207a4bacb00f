return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = 'linear', name = 'n1', inputs = { setmetatable({}, { __index = function() error('boom') end, __len = function() error('len') end }) }, output = { 4, 8 } } }
  end,
}
