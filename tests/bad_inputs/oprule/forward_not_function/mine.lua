return { name = "mine", doc = "d", backward = false, forward = "fast" }
