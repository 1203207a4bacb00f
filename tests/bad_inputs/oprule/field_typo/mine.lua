return { name = "mine", doc = "d", bakward = false, forward = function() return {} end }
