-- ops/size.lua — Tensor.size(): reads shape metadata on the host, no kernels.
return require("neusight.rules").view { name = "size", doc = "size: host metadata, no kernels" }
