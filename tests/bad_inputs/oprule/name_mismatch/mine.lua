return { name = "other", doc = "d", backward = false, forward = function() return {} end }
