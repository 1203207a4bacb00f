return { name = "mine", doc = "d", backward = false }
