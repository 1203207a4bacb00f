return { name = "mine", doc = "d", backward = false, check = function() error("bad shape") end,
  forward = function() return {} end }
