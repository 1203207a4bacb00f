-- ops/permute.lua — Tensor.permute: reorders strides only, no kernels (the copy happens in a later 'contiguous').
return require("neusight.rules").view { name = "permute", doc = "permute: strides only, no kernels" }
