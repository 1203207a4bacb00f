return { name = "mine", doc = "d", forward = function() return {} end }
