return require("neusight.rules").elementwise { name = "mine", doc = "d", op = "add", grda = "mem" }
