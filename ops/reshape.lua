-- ops/reshape.lua — Tensor.reshape of a contiguous tensor: a view, no kernels (a copying reshape is a 'contiguous' node).
return require("neusight.rules").view { name = "reshape", doc = "reshape: metadata only, no kernels" }
