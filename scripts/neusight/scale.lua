-- scripts/neusight/scale.lua — how a time measured on one GPU moves to another (`neusight scale`).
--
-- The hybrid of issue 6: a measured op time is scaled by the ratio of OUR tile predictor's forecasts for the
-- op's kernels on the two GPUs, so the measurement absorbs what the predictor gets wrong on the origin
-- (Habitat instead divides two MLP outputs trained per destination GPU, which fails on GPUs outside its
-- training set). Edit `route` or `scale` to change the rule; no recompiling.
local M = {}

-- Which rule each kernel family of an op takes. "ratio": measured × predicted(to) / predicted(from).
-- Kernel-varying ops (GEMM/BMM: the library picks a different kernel per GPU) must use the ratio; vector
-- and memory kernels could be wave-scaled when the trace has launch data, which per-op label CSVs lack.
M.route = { gemm = "ratio", bmm = "ratio", elementwise = "ratio", softmax = "ratio", layernorm = "ratio",
            memory = "ratio", none = "keep" }

--- Scaled time of one op in one phase.
---@param op { name: string, op: string, phase: string, family: string, measured_ms: number, from_ms: number, to_ms: number }
---@param from table origin GPU (read-only)
---@param to table destination GPU (read-only)
---@return number milliseconds on the destination
function M.scale(op, from, to)
  local rule = M.route[op.family] or "ratio"
  -- An op without GPU kernels (views, host-side getitem on sizes) costs host time: it does not move.
  if rule == "keep" or op.from_ms <= 0 then return op.measured_ms end
  return op.measured_ms * op.to_ms / op.from_ms
end

-- Measured traces with launch data (Chrome JSON, wavescale): which rule each op kind takes (spec
-- method-habitat.md §1.11). "ratio": kernel-varying ops (cuBLAS/cuDNN pick a different kernel per GPU) — our
-- kernels are built from the op's input shapes and the measured kernel time moves by predicted(to)/predicted(from).
-- "wave": every kernel is wave-scaled (§1.7) and the pass overhead carried over (§1.8). Kinds not listed: "wave".
M.kind_route = {
  ["aten::addmm"] = "ratio", ["aten::mm"] = "ratio", ["aten::bmm"] = "ratio", ["aten::matmul"] = "ratio",
  ["aten::linear"] = "ratio", ["aten::baddbmm"] = "ratio", ["aten::convolution"] = "ratio",
  ["aten::conv2d"] = "ratio", ["aten::_convolution"] = "ratio", ["aten::cudnn_convolution"] = "ratio",
  ["aten::lstm"] = "ratio",
  -- wavescale op names (torch function names)
  addmm = "ratio", mm = "ratio", bmm = "ratio", matmul = "ratio", linear = "ratio", baddbmm = "ratio",
  conv2d = "ratio", lstm = "ratio",
}

--- "ratio" or "wave" for one op kind of a measured trace.
---@param kind string
---@return string
function M.route_of(kind)
  return M.kind_route[kind] or "wave"
end

return M
