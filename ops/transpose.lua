-- ops/transpose.lua — Tensor.transpose: swaps two strides only, no kernels.
return require("neusight.rules").view { name = "transpose", doc = "transpose: strides only, no kernels" }
