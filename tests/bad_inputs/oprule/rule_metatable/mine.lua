return setmetatable({ name = 'mine', doc = 'd', backward = false },
  { __index = function() error('rule boom') end })
