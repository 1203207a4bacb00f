-- ops/view.lua — Tensor.view: a new shape over the same storage, no kernels.
return require("neusight.rules").view { name = "view", doc = "view: metadata only, no kernels" }
