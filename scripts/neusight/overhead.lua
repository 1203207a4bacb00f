-- scripts/neusight/overhead.lua — host-side framework overhead of eager PyTorch, applied after kernel prediction.
--
-- Model: every kernel launch is issued by the CPU (Python → ATen dispatch → cudaLaunchKernel). While the
-- GPU is busier than the host, launches queue up and the host cost is hidden; when a kernel is shorter
-- than the host's per-launch cost, the GPU idles. So a launch takes
--     max(gpu_time, launch_s)
-- and kernels that move no data and do no work (views: gpu_time == 0) launch nothing and cost nothing.
-- One parameter per host/GPU, `launch_s`, looked up by GPU name, else `default`.
--
-- How the numbers were obtained: `neusight eval models` on the end-to-end labels of the five training
-- GPUs only (label/{NVIDIA_A100-PCIE-40GB,Tesla_P100-PCIE-16GB,Tesla_P4,Tesla_T4,Tesla_V100-PCIE-32GB}),
-- sweeping `launch_s` over 0, 2, 4, 6, 8, 10, 15, 20, 30, 50 µs and keeping the value with the lowest mean
-- APE over all 38 non-fused, non-distributed labels (see weights/ACCURACY.md, "End-to-end latency").
-- Result: mean APE 9.26 % at 0 µs, rising monotonically (9.78 % at 10 µs, 13.06 % at 50 µs): the fitted
-- value is 0, on the boundary. The labelled workloads are large (0.2–7 s), the configs with many short
-- kernels (switchxl4) are already over-predicted, and the under-predicted ones (P4 throttling, opt_13 /
-- gpt3_xl at batch 8) are GPU-bound, so no non-negative host cost helps. Hence `enabled = false` and
-- launch_s = 0 until labels of small, launch-bound workloads exist. For such workloads, set launch_s to
-- a measured eager-PyTorch per-launch cost (typically 5–10 µs) here or per GPU name, and pass --overhead on.
-- With launch_s 0, --overhead on changes nothing: apply says so (its second result), among the forecast's warnings.
local type, error, tostring = type, error, tostring

local M = {}

M.PARAMS = {
  default = { launch_s = 0 },  -- fitted (see above)
}

--- Whether the overhead is applied when the user does not choose (`--overhead on|off`).
M.enabled = false

--- The parameters for one GPU (the read-only table op rules receive).
function M.params(gpu)
  return M.PARAMS[gpu.name] or M.PARAMS.default
end

--- Why the overhead asked for changes nothing on `gpu` (`p` its M.params, whose launch_s is 0: no kernel is raised to
--- it), in the words of neusight.workload's fields that have no effect.
local function no_effect(gpu, p)
  local named = M.PARAMS[gpu.name] == p
  return ("--overhead on has no effect: scripts/neusight/overhead.lua has no per-launch host cost for %s (%s.launch_s "
    .. "= 0%s), so no kernel launch is raised to it; set launch_s there (a --scripts copy) to a measured eager "
    .. "per-launch cost, or drop it"):format(tostring(gpu.name), named and ("PARAMS[%q]"):format(gpu.name)
      or "PARAMS.default", named and "" or ", the value fitted to the end-to-end labels")
end

--- Per-launch seconds after host overhead. `seconds` is an array of predicted GPU seconds per launch;
--- `mode` is "on", "off" or "default" (M.enabled). Returns a new array, or nil when the overhead is off; and, when
--- it is on and this GPU's launch_s is 0 (the shipped value: every GPU), the warning that it changed nothing.
function M.apply(seconds, gpu, mode)
  if mode == "default" then mode = M.enabled and "on" or "off" end
  if mode == "off" then return nil end
  if mode ~= "on" then error("overhead mode must be \"on\", \"off\" or \"default\" (got " .. tostring(mode) .. ")", 0) end
  local launch = M.params(gpu).launch_s
  if type(launch) ~= "number" or launch < 0 then
    error("scripts/neusight/overhead.lua: launch_s must be a non-negative number (got " .. tostring(launch) .. ")", 0)
  end
  local out = {}
  for i = 1, #seconds do
    local s = seconds[i]
    out[i] = (s > 0 and s < launch) and launch or s
  end
  return out, launch == 0 and no_effect(gpu, M.params(gpu)) or nil
end

return M
