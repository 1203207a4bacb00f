-- ops/split.lua — Tensor.split: returns views of one storage, no kernels.
return require("neusight.rules").view { name = "split", doc = "split: views, no kernels" }
