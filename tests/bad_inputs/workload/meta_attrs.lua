return {
  gpu = "h100", mode = "inference", batch = 4, seq = 128,
  model = function(opts)
    return { { op = 'add', name = 'n1', inputs = { { 4, 8 } }, output = { 4, 8 }, attrs = setmetatable({}, { __index = function() error('boom') end, __len = function() error('len') end }) } }
  end,
}
