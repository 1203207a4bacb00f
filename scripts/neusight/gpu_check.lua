-- scripts/neusight/gpu_check.lua — whether a GPU file's peaks are physically possible for the chip it describes.
--
-- A GPU file is checked for spelling and types when it is parsed (engine/core/gpu_spec.cpp); this checks what its
-- numbers say against each other, so that a typo (peak_bf16_tflops = 2095 for 209.5) or a datasheet's with-sparsity
-- figure (NVIDIA quotes 2× the dense peak: the H100's 1978.9 bf16 TFLOP/s) is an error at its line, not a forecast 4×
-- too fast that no warning flags (the out-of-distribution check compares the peaks with the training GPUs', and a
-- peak far beyond them reads as a new, faster chip). The engine calls M.problem(gpu) for every GPU file it loads
-- (engine/lua/session.cpp gpu_file_check); a `--scripts DIR` with DIR/neusight/gpu_check.lua replaces the rules.
--
-- The rules, from the chips' own arithmetic:
--   * peak_fp32_tflops = num_sm × cores_per_sm × 2 (an FMA) × boost_clock_mhz, within FP32_TOLERANCE: every bundled
--     file agrees within 1.1 % (vendors quote the FP32 peak at the max boost clock).
--   * the dense 16-bit tensor peaks (peak_fp16_tflops, peak_bf16_tflops) at most num_sm × boost_clock_mhz ×
--     TENSOR_FLOPS_PER_CLOCK[compute_capability] × TENSOR_TOLERANCE; tf32 at most half of that, fp8 twice that. The
--     table is each generation's dense FLOPs per clock per SM (per CU on AMD) of its 16-bit matrix path, from the
--     vendors' architecture whitepapers (A100 1024 FMA = 2048 FLOPs, H100 4096, B200 8192, …): a peak above it needs
--     a faster chip than the one the file names. A compute capability not in the table is not checked (a new one:
--     add its line).
--   * mem_bw_gbps within BW_PER_FP32_TFLOP GB/s per fp32 TFLOP/s: the file has no bus width or memory clock to check it
--     against, but every real part lies in 9–107 (L40S 9.4, L4 9.9, RTX 4090 12.2, H100 50, A100-SXM4-80GB 105, B300
--     107), so a dropped or added digit (3350 written 335 or 33500) is out of it on one side at least (tester10 #1:
--     the fp32 predictor is not monotone in bandwidth, so such a typo read 61× slower, not 10×).
--   * mem_gb within MEM_GB_PER_SM GB per SM (per CU on AMD): real parts lie in about 0.15–4 (RTX 3080 10 GB over 68
--     SMs 0.147, RTX 2080 Ti 0.16, RTX 4090 0.19, MI100 0.27, H100 0.61, H200 1.07, B300 1.8, H20 141 GB 1.8, unified
--     memory: DGX Spark 2.7, Jetson AGX Orin 64 GB 4.0), so memory written in MB or MiB (32000 or 32768 for 32) is
--     refused, as is a dropped digit on most parts. mem_gb is an input of the NeuSight MLPs (engine/core/tile_model.cpp), not only the
--     capacity: an RTX 5090 file with mem_gb = 32000 forecast GPT-2 Large inference 260× slower, with no error.
--   * pcie_bw_gbps at most PCIE_SLACK × the x16 rate of its pcie_gen (2^(gen + 1) GB/s per direction: gen3 16, gen4 32,
--     gen5 64, gen6 128; every bundled file gives exactly that) and at least a sixteenth of it (an x1 link), and a GPU
--     link (interconnect not "none") at least pcie_bw_gbps: every real one carries more than the slot (RTX 3090's NVLink
--     bridge 112.5 vs 32, H100 900 vs 64), so TB/s written for GB/s (interconnect_bw_gbps = 0.9: a data-parallel run
--     150× slower) is refused. (A loose test: interconnect_bw_gbps is the link's total of both directions, topology.lua
--     halving it, pcie_bw_gbps one direction; the smallest real links, RTX 2080's NVLink 50 = 25 per direction against
--     gen3's 16, pass either way.)
-- A file describing a hypothetical part says so in words (`what_if = "the H100 with twice the bf16 peak"`): it is not
-- held to these rules. The message of a file that breaks them says that too.
local fmt, type = string.format, type

local M = {}

-- Dense FLOPs per clock per SM (AMD: per compute unit) of the 16-bit tensor / matrix path, by compute capability.
M.TENSOR_FLOPS_PER_CLOCK = {
  ["6.0"] = 256,     -- P100: fp16 at twice the fp32 rate (no tensor cores)
  ["6.1"] = 256,     -- GP10x: fp16 at 1/64 of fp32 on consumer parts (P4: 4); the ceiling is P100's
  ["7.0"] = 1024,    -- V100: 8 tensor cores × 64 FMA
  ["7.2"] = 1024,
  ["7.5"] = 1024,    -- T4, RTX 20: 8 tensor cores × 64 FMA
  ["8.0"] = 2048,    -- A100: 4 tensor cores × 256 FMA
  ["8.6"] = 1024,    -- GA10x (A10G, RTX 30): 4 × 128 FMA (GeForce with fp32 accumulate: half)
  ["8.7"] = 1024,
  ["8.9"] = 1024,    -- Ada (L4, L40S, RTX 40; GeForce with fp32 accumulate: half)
  ["9.0"] = 4096,    -- H100, H200: 4 × 512 FMA
  ["10.0"] = 8192,   -- B200, GB200
  ["10.3"] = 8192,   -- B300, GB300
  ["12.0"] = 1024,   -- GB20x (RTX PRO 6000, RTX 50)
  gfx908 = 1024,     -- MI100 (fp16; bf16 half)
  gfx90a = 1024,     -- MI200
  gfx942 = 2048,     -- MI300X, MI325X
}
M.FP32_TOLERANCE = 0.10   -- |peak_fp32 / (num_sm × cores_per_sm × 2 × boost) − 1| at most this
M.TENSOR_TOLERANCE = 1.10 -- a tensor peak at most this × the ceiling (vendors quote at boost or below)
-- and at least this × the ceiling on a tensor-core part (compute capability 7.0 and later, every AMD CDNA): GeForce
-- parts with fp32 accumulate run at half rate, and vendors quote at a base clock below the boost (the L40S's 362 is
-- 0.49 of its ceiling); a tenth of it is a dropped digit (peak_bf16_tflops = 98.9 for 989.4)
M.TENSOR_FLOOR = 0.30
-- peak_fp32_matrix_tflops against peak_fp32_tflops: NVIDIA has no fp32 matrix path (the same number), CDNA's matrix
-- cores reach 2× (MI100: 46.1 vs 23.1)
M.FP32_MATRIX_RANGE = { 0.9, 2.2 }
-- mem_bw_gbps / peak_fp32_tflops: the range real parts span, with room (see the rules above)
M.BW_PER_FP32_TFLOP = { 6, 250 }
-- mem_gb / num_sm: the range real parts span, with room (see the rules above)
M.MEM_GB_PER_SM = { 0.1, 20 }
-- pcie_bw_gbps over the x16 rate of its generation: at most this (see the rules above)
M.PCIE_SLACK = 1.1

-- The tensor peaks checked, the multiple of the 16-bit ceiling each may reach, and whether M.TENSOR_FLOOR holds it
-- from below: not fp16, which has a SIMT path a file may give instead (the NeuSight reference's GPU specs list the
-- V100's and T4's non-tensor fp16 peaks, tests/fixtures/gpus/reference); bf16, tf32 and fp8 run on tensor cores only.
local TENSOR_KEYS = { { "peak_fp16_tflops", 1, false }, { "peak_bf16_tflops", 1, true },
                      { "peak_tf32_tflops", 0.5, true }, { "peak_fp8_tflops", 2, true } }

local function num(g, key)
  local v = g[key]
  return type(v) == "number" and v > 0 and v or nil
end

-- The message when `key`'s value `v` over another key's value `by` lies outside `range` (real parts' span, with room);
-- nil when it lies inside. `per`: what the ratio is, a format taking `by`; `examples`: real parts' ratios; `hint`: the
-- likely typo.
local function per_unit(key, v, by, per, range, examples, hint)
  local lo, hi = range[1], range[2]
  local ratio = v / by
  if not (ratio < lo or ratio > hi) then return nil end
  return fmt("key '%s' = %g is %.3g " .. per .. ": real GPUs have %g–%g (%s; scripts/neusight/gpu_check.lua): %s (a "
    .. "what-if part: say so, what_if = \"…\")", key, v, ratio, by, lo, hi, examples, hint)
end

--- What is impossible about GPU `g` (its fields as the engine's view has them: num_sm, cores_per_sm, boost_clock_mhz,
--- compute_capability, the peak_*_tflops), and the key it is about: message, key; nil when nothing is.
---@param g table
---@return string|nil message, string|nil key
function M.problem(g)
  -- a what-if part (the file's `what_if = "…"`, saying what was changed) is hypothetical by design
  if type(g.what_if) == "string" and g.what_if ~= "" then
    if not g.what_if:find("%S") then
      return "key 'what_if' must say in words what the part changes (got only blanks)", "what_if"
    end
    return nil
  end
  -- the capability names the table's rows: NVIDIA's major.minor, AMD's gfx target (a new one well formed is not
  -- checked, a malformed one would switch the checks off unseen)
  local cc = g.compute_capability
  if type(cc) == "string" and not (cc:match("^%d+%.%d+$") or cc:match("^gfx%x+$")) then
    return fmt("key 'compute_capability' must be NVIDIA's major.minor (\"9.0\") or AMD's gfx target (\"gfx942\") "
      .. "(got %q)", cc), "compute_capability"
  end
  -- and the vendor's own form: an NVIDIA capability on an AMD file (or a gfx target on an NVIDIA one) would hold its
  -- peaks to the other vendor's row (an MI325X written "9.4" let its 2614.9 with-sparsity bf16 figure through,
  -- forecast 20 % fast; audit19)
  if type(cc) == "string" and (g.vendor == "amd" or g.vendor == "nvidia") then
    local gfx = cc:match("^gfx") ~= nil
    if gfx ~= (g.vendor == "amd") then
      return fmt("key 'compute_capability' = %q is %s, but vendor = %q: an AMD file names its gfx target (\"gfx942\"), "
        .. "an NVIDIA one its major.minor (\"9.0\")", cc, gfx and "an AMD gfx target" or "an NVIDIA major.minor",
        g.vendor), "compute_capability"
    end
  end
  local sm, cores, mhz = num(g, "num_sm"), num(g, "cores_per_sm"), num(g, "boost_clock_mhz")
  local fp32 = num(g, "peak_fp32_tflops")
  if sm and cores and mhz and fp32 then
    local chip = sm * cores * 2 * mhz * 1e6 / 1e12
    local ratio = fp32 / chip
    if math.abs(ratio - 1) > M.FP32_TOLERANCE then
      -- what the usual causes are (tester10 #8): AMD's headline FP32 is the packed rate; a part whose SM count or clock
      -- its maker does not publish was written with a guess
      local amd = type(cc) == "string" and cc:match("^gfx") ~= nil
      local hint = (amd and ratio > 1.8 and ratio < 2.2)
        and "; AMD data sheets quote packed FP32 (two FMAs per lane per clock): peak_fp32_tflops is the non-packed "
          .. "rate, half of it (gpus/mi300x.toml)"
        or "; where the maker publishes no SM count or clock, derive the guessed one from the other two"
      return fmt("key 'peak_fp32_tflops' = %g, but %d SMs × %d cores × 2 FLOPs × %d MHz = %.4g TFLOP/s (%.2f× that; "
        .. "scripts/neusight/gpu_check.lua allows ±%d %%): a typo in one of them?%s (a what-if part: say so, "
        .. "what_if = \"…\")", fp32, sm, cores, mhz, chip, ratio, M.FP32_TOLERANCE * 100, hint),
        "peak_fp32_tflops"
    end
  end
  local bw = num(g, "mem_bw_gbps")
  if fp32 and bw then
    local problem = per_unit("mem_bw_gbps", bw, fp32, "GB/s per fp32 TFLOP/s (peak_fp32_tflops %g)",
      M.BW_PER_FP32_TFLOP, "L40S 9.4, H100 50, B300 107", "a digit dropped or added?")
    if problem then return problem, "mem_bw_gbps" end
  end
  local mem = num(g, "mem_gb")
  if sm and mem then
    local problem = per_unit("mem_gb", mem, sm, "GB per SM (num_sm %d)", M.MEM_GB_PER_SM,
      "RTX 4090 0.19, H100 0.61, B300 1.8", "memory in GB (1e9 bytes), not MB or MiB, with no digit dropped?")
    if problem then return problem, "mem_gb" end
  end
  local gen, pcie = num(g, "pcie_gen"), num(g, "pcie_bw_gbps")
  if gen and pcie then
    local x16 = 2 ^ (gen + 1)
    if pcie > x16 * M.PCIE_SLACK or pcie < x16 / 16 then
      return fmt("key 'pcie_bw_gbps' = %g, but PCIe gen %d carries %g GB/s per direction at x16 (%g at x1; "
        .. "scripts/neusight/gpu_check.lua): GB/s per direction, with pcie_gen right? (a what-if part: say so, "
        .. "what_if = \"…\")", pcie, gen, x16, x16 / 16), "pcie_bw_gbps"
    end
  end
  local link = num(g, "interconnect_bw_gbps")
  if pcie and link and g.interconnect ~= "none" and link < pcie then
    return fmt("key 'interconnect_bw_gbps' = %g is below pcie_bw_gbps (%g): a GPU link (%s) carries more than the PCIe "
      .. "slot (RTX 3090's NVLink 112.5 vs 32, H100 900 vs 64; scripts/neusight/gpu_check.lua): GB/s, not TB/s? (a "
      .. "what-if part: say so, what_if = \"…\")", link, pcie, tostring(g.interconnect)), "interconnect_bw_gbps"
  end
  local matrix = num(g, "peak_fp32_matrix_tflops")
  if fp32 and matrix then
    local lo, hi = M.FP32_MATRIX_RANGE[1], M.FP32_MATRIX_RANGE[2]
    if matrix < lo * fp32 or matrix > hi * fp32 then
      return fmt("key 'peak_fp32_matrix_tflops' = %g is %.2f× peak_fp32_tflops (%g): fp32 matrix units reach %g–%g× "
        .. "it (NVIDIA: the same, no fp32 matrix path; AMD CDNA: up to 2×; scripts/neusight/gpu_check.lua): a typo? "
        .. "(a what-if part: say so, what_if = \"…\")", matrix, matrix / fp32, fp32, lo, hi),
        "peak_fp32_matrix_tflops"
    end
  end
  local per_clock = M.TENSOR_FLOPS_PER_CLOCK[g.compute_capability]
  if sm and mhz and per_clock then
    for _, t in ipairs(TENSOR_KEYS) do
      local key, multiple, floored = t[1], t[2], t[3]
      local v = num(g, key)
      local ceiling = sm * mhz * 1e6 * per_clock * multiple / 1e12
      local tensor_cores = cc:match("^gfx") or tonumber(cc:match("^(%d+)")) >= 7
      if v and floored and tensor_cores and v < ceiling * M.TENSOR_FLOOR then
        return fmt("key '%s' = %g is %.2f× what a compute capability %s chip of %d SMs at %d MHz reaches (%.4g "
          .. "TFLOP/s dense; tensor-core parts quote at least %g× it: scripts/neusight/gpu_check.lua): a dropped digit? (a "
          .. "what-if part: say so, what_if = \"…\")", key, v, v / ceiling, g.compute_capability, sm, mhz, ceiling,
          M.TENSOR_FLOOR), key
      end
      if v and v > ceiling * M.TENSOR_TOLERANCE then
        return fmt("key '%s' = %g is %.1f× what a compute capability %s chip of %d SMs at %d MHz can reach (%d × %d "
          .. "× %g dense FLOPs per clock per SM = %.4g TFLOP/s; scripts/neusight/gpu_check.lua): a typo, or the "
          .. "with-sparsity figure (datasheets quote 2× the dense peak; give the dense one)? (a what-if part: say so, "
          .. "what_if = \"…\")", key, v, v / ceiling,
          g.compute_capability, sm, mhz, sm, mhz, per_clock * multiple, ceiling), key
      end
    end
  end
  return nil
end

return M
