return require("neusight.rules").linear { name = "mine" }
