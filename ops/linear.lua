-- ops/linear.lua — nn.Linear y = x·Wᵀ + b: one GEMM forward, dX and dW GEMMs backward, W (and b) grad accumulation.
-- Decomposition (neusight/rules.lua, rules.linear), x = inputs[1], T = numel(x)/I:
--   forward Linear(T, I, O); backward Linear(T, O, I), Linear(O, T, I);
--   accumulate VECadd(1, O·I) and, unless attrs.bias == false, VECadd(1, O).
return require("neusight.rules").linear {
  name = "linear",
  doc = "nn.Linear: Linear(T,I,O); bw Linear(T,O,I)+Linear(O,T,I); acc VECadd(1,O·I) [+ VECadd(1,O) if bias]",
}
