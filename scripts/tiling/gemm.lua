-- scripts/tiling/gemm.lua — GEMM tile rules: the output tile (and kernel) cuBLAS/rocBLAS picks for a linear or bmm.
--
-- Replaces the reference's nearest-neighbour tile table (method-neusight.md §1.4, §7 item 7) with
-- small per-architecture rules derived from the measured kernel names in the NeuSight data
-- (dataset/train/collect/{bmm,linear}, dataset/test, dataset_amd/test/collect; PyTorch 2.1 + cuBLAS
-- 12.1 on NVIDIA, PyTorch 2.4.1 + rocBLAS/Tensile on AMD, all FP32). tests/bench/tile_hits.lua prints
-- how often each rule matches the measured tile.
--
-- Conventions
--   * Shapes use the data convention: k = { family, b, m, n, k }, A is m×n, B is n×k, n is the
--     reduction, the output is b×m×k; linear is b = 1, m = tokens, n = in-features, k = out-features.
--   * Libraries run column-major, so their "M" is PyTorch's k. A kernel tile "AxB" (cuBLAS
--     sgemm_AxB, Tensile MT<A>x<B>, tilesize<A>x<B>) therefore covers A output columns (along k)
--     and B output rows (along m): tile_k = A, tile_m = B. The launch grids confirm it: grid.x =
--     ceil(k/A), grid.y = ceil(m/B) on every GPU in the data.
--   * Rules below return tiles in the library's own "AxB" order, so they read like kernel names.
--   * The rules were fitted on FP32 (SIMT / FP32-MFMA) kernels; other dtypes reuse them.
local ceil, type, tostring, tonumber, error = math.ceil, type, tostring, tonumber, error
local fmt = string.format

local M = {}

---------------------------------------------------------------------------------------------------
-- Parsing measured kernel names

-- Tried in this order; each captures (A, B) = (Tile1, Tile2) of the library's column-major frame
-- (tile_k = A along the out-features, tile_m = B along the rows) unless marked `rows_first`.
--   1. Tensile macro tile "_MT64x32x16_" (rocBLAS; DepthU, the third number, is the reduction step).
--   2. cuBLAS "sgemm_128x64": maxwell_/volta_/ampere_sgemm_AxB[_sliced1x4]_{nn,tn}, the
--      cuBLASLt "sgemm_128x128x8_NT_vec" and CUTLASS "cutlass_80_simt_sgemm_256x128_8x4_nn_align1"
--      (threadblock MxN in cuBLAS' frame; the "8x4" after it is K-step x stages and is ignored).
--   3. cuBLAS 12.x/13.x Hopper "nvjet_sm90_<types>_AxB_<K-step>x<stages>_<cluster>_…" (nvjet_sm90_tst_128x184_
--      64x5_1x2_h_bz_coopA_NNT, qqtst = fp8, hsh = fp16): library frame. Checked on an H200 (torch 2.11, CUDA 13):
--      every launch grid not capped at a persistent size (120 or 132 CTAs) nor doubled by split-K is
--      ceil(k/A) x ceil(m/B) rounded up to the cluster shape; none fits only the swapped reading.
--   4. cuBLAS' SIMT "sm80_xmma_gemm_<types>_<layouts>_<C layout>_tilesize<A>x<B>x<K>" (fp32 on Ampere and later:
--      sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3_…): rows_first. On the H200 its grid is
--      ceil(m/A) x ceil(k/B) in all 35 rows whose grid tells the two frames apart (none fits the library
--      frame), the opposite of ampere_sgemm. Only names with the layout field: the engine's own predicted tensor-core
--      names (sm80_xmma_gemm_bf16_tilesize<A>x<B>, written by tc_select below) keep the library frame.
--   5. any other "tilesize128x128x8" (Hopper-era sm90_xmma_gemm_* names; frame not checked: the H200 run only
--      launched square sm90_xmma tiles).
--   6. any other "<x>gemm_AxB" (hgemm, h16816gemm, s1688gemm, dgemm …), same frame as cuBLAS.
--   7. "<x>gemm_<dtype>_AxB": CUTLASS tensor-core kernels as cuBLAS launches them on Hopper
--      (cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_nn_align1, cutlass_80_tensorop_f16_s16816gemm_f16_
--      128x256_64x3_tn_align2, cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_32x1_nn_align2): library
--      frame (on the H200 the swizzled grid is (ceil(m/B)·2^s, ceil(ceil(k/A)/2^s)) in every non-square case).
-- Names without a tile (cuBLAS gemmSN_NN_kernel<…>, sgemm_largek_lds64<…>, magma_sgemmEx_kernel<…>, cutlass 3.x
-- device_kernel<…GemmUniversal…>) return nil: --tiles measured falls back to the tile rule for them.
local PATTERNS = {
  { "_[Mm][Tt](%d+)x(%d+)" },
  { "sgemm_(%d+)x(%d+)" },
  { "^nvjet_sm%d+_%a+_(%d+)x(%d+)_" },
  { "sm80_xmma_gemm_[%w_]-_[nt][nt]_[nt]_tilesize(%d+)x(%d+)", rows_first = true },
  { "tilesize(%d+)x(%d+)" },
  { "%wgemm_(%d+)x(%d+)" },
  { "%wgemm_%a+%d*_(%d+)x(%d+)" },
}

--- Output tile of a measured GEMM kernel: tile_m, tile_k (nil if the name carries no tile).
---@param kernel_name string
---@return integer|nil tile_m
---@return integer|nil tile_k
function M.parse(kernel_name)
  if type(kernel_name) ~= "string" then
    error(fmt("bad argument #1 to 'parse' (string expected, got %s)", type(kernel_name)), 2)
  end
  for _, p in ipairs(PATTERNS) do
    local a, b = kernel_name:match(p[1])
    if a then
      if p.rows_first then return tonumber(a), tonumber(b) end
      return tonumber(b), tonumber(a) -- tile_m = Tile2, tile_k = Tile1
    end
  end
  return nil
end

---------------------------------------------------------------------------------------------------
-- Shape helpers shared by the rules

local function cdiv(a, b) return ceil(a / b) end

-- Number of thread blocks a library tile "AxB" launches for the problem (b · ceil(k/A) · ceil(m/B)).
local function ctas(s, a, b) return s.b * cdiv(s.k, a) * cdiv(s.m, b) end

-- Output area the tile pads the problem to (per batch): used where the library visibly avoids waste.
local function padded(s, a, b) return cdiv(s.k, a) * a * cdiv(s.m, b) * b end

-- A tile: library Tile1 (along k), Tile2 (along m), and whether it is a sliced-K kernel (cuBLAS
-- "_sliced1x4": the CTA's warps split the reduction four ways; same output tile).
local function T(a, b, sliced) return { a = a, b = b, sliced = sliced or false } end

---------------------------------------------------------------------------------------------------
-- Per-architecture rules. Each takes the shape view s = { b, m, n, k, out = b·m·k, sm = num_sm,
-- cc = compute_capability } and returns T(A, B[, sliced]). First matching clause wins. The
-- percentages are tile hit rates by rows / by latency over the train and test splits
-- (tests/bench/tile_hits.lua); thresholds are split points read off the data, rounded.

local rules = {}

-- Ampere (A100-40GB: linear 64-75 % / 85-93 %; bmm 99.6-100 % / 100 %).
-- cuBLAS' Ampere SGEMM heuristic is mostly shape-driven: a long reduction switches to sliced-K
-- kernels, a small output to small tiles, and otherwise the tile follows the output's aspect.
rules.ampere = {
  prefix = "ampere_sgemm_",
  linear = function(s)
    -- Occupancy threshold: below ~1.2 waves of 128x64 tiles (2^20 outputs on A100's 108 SMs) cuBLAS
    -- falls back to 32x32 tiles; scaled by SM count for other GPUs.
    local small = 2 ^ 20 * s.sm / 108
    if s.n >= 32768 then -- long reduction: sliced-K kernels, tile grows with the output
      if s.out < 2 ^ 18.6 then return T(32, 32, true) end
      if s.out < small or s.k < 1000 then return T(64, 32, true) end
      return T(128, 32, true)
    end
    if s.out < small then return T(32, 32, true) end
    if s.k < 1200 then -- few output columns: tall tile along m, unless the output is large anyway
      if s.out < 2 ^ 23 then return T(32, 128) end
      return T(128, 64)
    end
    if s.m < 480 then return T(128, 32) end                 -- few rows: flat tile along k
    if s.m < 2048 and s.n >= 4096 then return T(128, 32) end -- deep tiles: more CTAs per row band
    return T(128, 64)
  end,
  -- Batched GEMMs use ampere_sgemm_128x128_nn for every measured shape except a handful of tiny ones.
  bmm = function(s) return T(128, 128) end,
}

-- Volta (V100: linear 63-65 % / 69-85 %; bmm 68-76 % / 76-80 %).
rules.volta = {
  prefix = "volta_sgemm_",
  linear = function(s)
    if s.n >= 57000 then -- very long reduction: sliced-K
      if s.k >= 1000 then return T(128, 32, true) end
      return T(64, 32, true)
    end
    if s.n >= 8192 then -- long reduction: 128x128 unless the output is small
      if s.out < 2 ^ 19 then
        if s.k < 150 then return T(32, 32, true) end
        return T(64, 32, true)
      end
      if s.m < 320 then return T(128, 32) end
      return T(128, 128)
    end
    if s.k < 1000 then
      if s.out < 2 ^ 17.9 then
        if s.k < 470 then return T(32, 32, true) end
        return T(64, 32, true)
      end
      if s.m < 800 then return T(128, 32) end
      return T(32, 128)
    end
    if s.out < 2 ^ 20.3 then
      if s.m < 54 then return T(64, 32, true) end
      return T(128, 32)
    end
    if s.m < 145 then return T(128, 32) end
    return T(128, 64)
  end,
  bmm = function(s)
    if s.k < 100 then -- narrow outputs
      if ctas(s, 128, 128) < 4.5 * s.sm then
        if s.out < 2 ^ 16 then return T(128, 32) end
        return T(64, 64)
      end
      if s.m < 64 then return T(64, 64) end
      return T(32, 128)
    end
    if s.out < 2 ^ 18.24 then return T(128, 32) end
    -- 32x128 and 64x64 launch the same number of CTAs; cuBLAS takes the one that pads less
    -- (a tie is a coin flip in the data: 64x64 is slightly more frequent).
    if padded(s, 32, 128) < padded(s, 64, 64) then return T(32, 128) end
    return T(64, 64)
  end,
}

-- Turing (T4; cuBLAS runs the volta_sgemm kernels with its own heuristic: linear 63-77 % / 58-72 %,
-- bmm 89-91 % / 94 %).
rules.turing = {
  prefix = "volta_sgemm_",
  linear = function(s)
    if s.m < 1000 then
      if s.n >= 37000 then
        if s.m >= 450 then return T(128, 128) end
        return T(128, 64)
      end
      if s.m < 34 then return T(128, 32) end
      if s.k < 84 then return T(32, 128) end
      return T(128, 64)
    end
    if s.k < 32 then return T(32, 128) end
    if s.k < 256 or s.n < 512 then return T(128, 64) end
    if ctas(s, 128, 128) < s.sm then return T(128, 64) end -- under one wave of 128x128 tiles
    if s.m >= 65536 then return T(128, 64) end
    return T(128, 128)
  end,
  bmm = function(s)
    if s.k < 64 then return T(64, 64) end
    -- rows that fit a 32-row band better than a 64-row one (m <= 32, 65..96, 129..160)
    if s.m <= 32 or (s.m < 192 and s.m % 64 > 0 and s.m % 64 <= 32) then return T(128, 32) end
    if s.out < 2 ^ 19.1 then return T(64, 64) end
    return T(128, 64)
  end,
}

-- Pascal (cuBLAS' maxwell_sgemm kernels). GP100 (cc 6.0, P100) and GP10x (cc 6.1, P4) have separate
-- cuBLAS heuristics, so the rule branches on compute capability (P100 linear 83-94 % / 95-100 %;
-- P4 linear follows its model-shaped test split (cuBLASLt 128x128); bmm 99.6-100 %).
rules.pascal = {
  prefix = "maxwell_sgemm_",
  linear = function(s)
    if s.cc == "6.0" then
      if s.out < 2 ^ 18.3 then
        if s.m < 2048 and ctas(s, 64, 64) < 1.25 * s.sm then return T(128, 32) end
        return T(64, 64)
      end
      if s.out < 2 ^ 20.6 or s.m < 460 then return T(64, 64) end
      return T(32, 128)
    end
    -- cc 6.1 (P4). For the same shapes the two splits disagree: the train split (random shapes) ran
    -- cuBLAS' maxwell 64x64 / 32x128, the test split (model shapes, 94 %) cuBLASLt's
    -- sgemm_128x128x8_NT_vec. Forecasts are for models, so we follow the test split; the end-to-end
    -- P4 labels agree (weights/ACCURACY.md).
    return T(128, 128)
  end,
  bmm = function(s)
    -- GP10x switches to 128x128 for large square outputs (P4 test split: m = k = 2048).
    if s.cc ~= "6.0" and s.m >= 2048 and s.k >= 2048 then return T(128, 128) end
    return T(128, 64)
  end,
}

-- CDNA2 (MI210; rocBLAS picks Tensile solutions by nearest benchmarked size, so these rules only
-- capture the dominant tiles: linear 45 % / 73 %, bmm 67 % / 76 %). Linear uses Cijk_Alik_Bljk
-- (A transposed), bmm Cijk_Ailk_Bljk.
rules.cdna2 = {
  prefix = "Cijk_",
  linear = function(s)
    if s.out >= 2 ^ 29.6 then return T(128, 128) end
    if s.out >= 2 ^ 28.2 then return T(96, 96) end
    if s.n >= 2880 then -- long reduction (huge n gets a global split-U, GSU>1, same macro tile)
      if s.out < 2 ^ 20.3 then return T(64, 32) end
      return T(64, 64)
    end
    if s.out < 2 ^ 21.6 then return T(64, 32) end
    if s.out < 2 ^ 26.6 then return T(128, 64) end
    return T(96, 96)
  end,
  bmm = function(s)
    local mk = s.m * s.k -- per-batch output
    if mk < 2 ^ 17 then
      if s.k < 96 and s.n >= 512 then return T(64, 128) end
      if s.n < 384 then return T(16, 64) end
      if s.n < 512 then return T(64, 16) end
      return T(32, 32)
    end
    if s.m < 3000 then return T(64, 32) end
    if s.k < 256 then
      if mk < 2 ^ 18 then return T(64, 32) end
      return T(64, 64)
    end
    if s.n < 4096 then return T(128, 64) end
    return T(64, 64)
  end,
}

-- CDNA1 (MI100: linear 53 % / 83 %, bmm 65 % / 62 %).
rules.cdna1 = {
  prefix = "Cijk_",
  linear = function(s)
    if s.n >= 30000 then -- long reduction
      if s.m >= 65536 then return T(64, 128) end
      if s.m >= 32768 then return T(128, 128) end
      if s.out < 2 ^ 20.6 then return T(64, 64) end
      return T(64, 32) -- with a global split-U (GSU3/5) in the data
    end
    if s.m < 3840 then
      if s.out < 2 ^ 21.6 then return T(64, 64) end
      if s.n < 10000 then return T(64, 128) end
      return T(128, 96)
    end
    if s.out < 2 ^ 23.9 then return T(64, 128) end
    return T(128, 96)
  end,
  bmm = function(s)
    local mk = s.m * s.k
    if mk < 2 ^ 15 then
      if s.m < 196 then
        if s.k < 384 then return T(16, 8) end
        return T(16, 16)
      end
      if s.m < 384 then return T(64, 32) end
      return T(64, 64)
    end
    if mk < 2 ^ 16.58 then
      if s.n < 196 then return T(64, 32) end
      if s.k < 96 then return T(64, 128) end
      return T(16, 16)
    end
    if mk < 2 ^ 17 then
      if s.m < 256 then return T(32, 32) end
      if s.m < 1024 then return T(16, 64) end
      return T(96, 96)
    end
    if mk < 2 ^ 23.17 then return T(64, 64) end
    if s.n < 256 then return T(128, 32) end
    return T(128, 144)
  end,
}
M.rules = rules

-- Architecture (gpus/*.toml `architecture`) → rule family. Architectures absent from the data
-- follow their closest relative by lineage, never by "nearest GPU by specs". These are assumptions
-- (there is no measurement to check them against); edit this table to change them:
--   ada → ampere: public profiles show cuBLAS running ampere_sgemm_* kernels on sm_86/sm_89;
--     the ampere rule's occupancy threshold scales with num_sm, which is what differs on an L4.
--   hopper, blackwell → ampere: FP32 without tensor cores stays on SIMT tiles of the same sizes
--     (Hopper's cuBLAS names them sm90_xmma_gemm_*_tilesize<A>x<B>…, parsed above); the predicted
--     kernel name keeps the ampere_ spelling.
--   cdna3 → cdna2: same rocBLAS/Tensile FP32 MFMA solution families. (MI250 is cdna2 itself: the
--     same gfx90a chip as MI210 with the same 104 CUs per GCD, so the MI210-fitted rule applies.)
-- Cross-architecture transfer is weak in the data (`tile_hits.lua --as ARCH`: e.g. the ampere rule
-- matches 0 % of V100/T4 bmm tiles), so a new architecture deserves its own entry once measured.
-- An architecture missing here is an error: add it with the family it should follow.
M.families = {
  pascal = "pascal", volta = "volta", turing = "turing",
  ampere = "ampere", ada = "ampere", hopper = "ampere", blackwell = "ampere",
  cdna1 = "cdna1", cdna2 = "cdna2", cdna3 = "cdna2",
}

---------------------------------------------------------------------------------------------------
-- Tensor-core GEMMs (bf16, fp16, tf32, fp8): the CTA tile of cuBLAS' / CUTLASS' tensor-core kernels.
--
-- The measurements these predictors are trained on (AIConfigurator, ../shared/data/aiconfigurator) carry
-- no kernel names, so unlike the FP32 rules above this one is not fitted to observed tiles: it is a
-- documented convention that gives the tile model a physically sensible tile and wave count. Each
-- architecture has the CTA tile set its libraries' kernel names show (output rows along m × output
-- columns along the out-features), and the rule picks, like a heuristic of those libraries, the tile that
-- minimises waves × per-tile time, where a tile's time is its MMA work divided by an efficiency that grows
-- with its operand reuse tm·tn/(tm+tn) (a 128×256 tile reuses each loaded element twice as often as a
-- 64×128 one). Ties go to the larger tile (less launch overhead per FLOP).
--   ampere, ada, and Blackwell cc 12.x (RTX PRO / GeForce: mma.sync kernels, sm80_xmma_gemm_*/cutlass_80_tensorop_*):
--     256x128, 128x256, 128x128, 128x64, 64x128, 64x64.
--   hopper (sm90_xmma_gemm_*_tilesize<A>x<B>x64, wgmma m64nNk16: 64- or 128-row CTAs): 128x256, 256x128,
--     128x128, 64x256, 64x128, 64x64.
--   blackwell cc 10.x (tcgen05 UMMA, 1- and 2-SM tiles; a 2-SM 256-row tile is two 128-row tiles, one per
--     SM): 128x256, 256x128, 128x128, 64x256, 64x128, 64x64.
-- Tiles are written { rows along m, columns along out-features } here; kernel names keep the library's
-- "tilesize<A>x<B>" order (A along the out-features), which M.parse reads back.
M.tensor_dtypes = { bf16 = true, fp16 = true, tf32 = true, fp8 = true }

-- Each tile set: its tiles and unsplit_k, the longest reduction its 16-bit GEMMs run unsplit (tc_split_k, below:
-- why these numbers). One table, so a set cannot have one and lack the other.
local TC_SETS = {
  mma_sync = { unsplit_k = 1536,
    tiles = { { 256, 128 }, { 128, 256 }, { 128, 128 }, { 128, 64 }, { 64, 128 }, { 64, 64 } } },
  wgmma = { unsplit_k = 2048,
    tiles = { { 128, 256 }, { 256, 128 }, { 128, 128 }, { 64, 256 }, { 64, 128 }, { 64, 64 } } },
  umma = { unsplit_k = 2048,
    tiles = { { 128, 256 }, { 256, 128 }, { 128, 128 }, { 64, 256 }, { 64, 128 }, { 64, 64 } } },
}
M.tc_sets = TC_SETS

-- Architecture → tensor-core tile set (prefix of the predicted kernel name). An architecture missing here
-- has no tensor-core GEMM rule: an error, as for the FP32 rules.
M.tc_families = {
  volta = { set = "mma_sync", prefix = "volta_h884gemm" }, turing = { set = "mma_sync", prefix = "turing_h1688gemm" },
  ampere = { set = "mma_sync", prefix = "sm80_xmma_gemm" }, ada = { set = "mma_sync", prefix = "sm89_xmma_gemm" },
  hopper = { set = "wgmma", prefix = "sm90_xmma_gemm" },
  blackwell = function(cc)
    if tostring(cc):match("^12") then return { set = "mma_sync", prefix = "sm120_xmma_gemm" } end
    return { set = "umma", prefix = "sm100_xmma_gemm" }
  end,
}

local TC_REUSE_FULL = 256 * 128 / (256 + 128) -- operand reuse at which a tile runs at full efficiency

-- Split-K: when the output tiles cannot fill the SMs, the libraries cut the reduction into slices computed by
-- separate thread blocks (cuBLAS split-K, CUTLASS/cuBLAS stream-K on sm90+) and reduce the partial tiles.
-- We split as far as the SMs are filled, keeping at least TC_MIN_SLICE reduction elements per slice: fp8's tensor-core
-- rule and the FP32 rules' below. The 16-bit tensor-core rule splits as its data do (tc_split_k).
local TC_MIN_SLICE = 256
M.tc_min_slice = TC_MIN_SLICE
local function tc_split(tiles, s)
  if tiles >= s.sm then return 1 end
  return math.max(1, math.min(s.sm // tiles, s.n // TC_MIN_SLICE))
end

-- The tensor-core rule's split-K (tc_select), from the AIConfigurator data (weights/TC_SPLITK_RULE.md): a library
-- splits the reduction K only where it is long. Measured time grows linearly with K, with no step, up to K = 2048 on
-- the datacenter Blackwells (B200 / B300 / GB200 / GB300, bf16, m 32 and 128, out-features 1024 and 4096: B200 m 32 ×
-- 1024 2.84 / 3.56 / 4.30 / 4.92 µs at K 512 / 1024 / 1536 / 2048, then 4.96 at 2560 and a lower slope) and up to
-- K = 1536 on the L40S and RTX PRO 6000 (mma.sync kernels: L40S m 32 × 1024 3.89 / 5.80 / 7.82 µs at 512 / 1024 /
-- 1536, 5.83 at 2048; RTX PRO 6000 7.91 -> 5.00). So per tile set the longest unsplit reduction (TC_SETS unsplit_k): a GEMM
-- whose output tiles leave SMs idle splits only if K is longer, and then into slices no longer than it, as far as
-- the SMs allow. Splitting every small output down to 256-element slices (the rule before) gave Qwen3-30B-A3B's
-- expert gate (K 2048, split 8) and down projection (K 768, split 3) the same 96 CTAs and features, and forecasts
-- that fell between neighbouring m where the data never does. wgmma (Hopper) has no data (held out): it follows the
-- datacenter Blackwells by lineage, an assumption. This split alone, with retrained weights, was worse by
-- leave-one-GPU-out (the tile model priced a few CTAs at their fair share of the bandwidth; the old split also stood
-- in for that); with the tile model's partial-wave base (`partial_wave = 'sm_share'`, the base of gemm_tc16's
-- shipped 'sm_persist', engine/core/tile_model.h) it is adopted for the 16-bit dtypes (variant D3, weights/PARTIAL_WAVE_RULE.md: selected
-- after the information runs, gemm_tc16 LOGO 15.06 -> 13.33, every fold better). fp8 keeps the fill-the-SMs split
-- (tc_split): the data suggest vLLM's CutlassFP8ScaledMMLinearKernel does not split, but never splitting (run D) cost
-- the RTX PRO 6000 fold 11.7 points, so gemm_fp8 keeps its rule and its fair-share base.
M.tc_fill_split = { fp8 = true } -- tensor-core dtypes that keep the fill-the-SMs split (tc_split)
local function tc_split_k(tiles, s, set, dtype)
  if M.tc_fill_split[dtype] then return tc_split(tiles, s) end
  local longest = set.unsplit_k
  if tiles >= s.sm or s.n <= longest then return 1 end
  -- (both at least 1 here: tiles < sm, and n > longest gives 2 slices or more)
  return math.min(s.sm // tiles, cdiv(s.n, longest))
end

-- Architectures without tensor cores: their 16-bit GEMMs are SIMT kernels (Pascal's half2 hgemm), which neither these
-- rules nor the predictors model.
M.no_tensor_cores = { kepler = true, maxwell = true, pascal = true }

-- The engine's module, or nil where these rules run without it (tests/bench/tile_hits.lua, plain lua5.4).
local function engine()
  local ok, ns = pcall(require, "neusight")
  return ok and type(ns) == "table" and ns or nil
end

-- The error of a GPU whose architecture `rules` (M.<name>) has no entry for: the GPU and its file, the names known,
-- did-you-mean (a typo in a GPU file's `architecture`).
local function where(gpu)  -- "GPU 'name' (its file)": `source`, a field a GPU table may leave out
  local ns = engine()
  local source = ns and ns.gpu_optional(gpu, "source")
  return fmt("GPU '%s'%s", tostring(gpu.name), source and fmt(" (%s)", tostring(source)) or "")
end

local function unknown_architecture(gpu, what, rules, name)
  local arch, known = tostring(gpu.architecture), {}
  for a in pairs(rules) do known[#known + 1] = a end
  table.sort(known)
  local ns = engine()
  local near = ns and ns.closest and ns.closest(arch, known)
  error(fmt("%s: no %s tile rule for architecture '%s' (scripts/tiling/gemm.lua M.%s knows %s)%s",
    where(gpu), what, arch, name, table.concat(known, ", "),
    near and fmt(" (did you mean '%s'?)", near) or ""), 0)
end

local function tc_select(s, gpu, dtype)
  local arch = gpu.architecture
  local fam = M.tc_families[arch]
  if type(fam) == "function" then fam = fam(gpu.compute_capability) end
  if not fam then
    if M.no_tensor_cores[arch] then
      error(fmt("%s: %s GEMMs are not modelled: the %s architecture has no tensor cores (its 16-bit GEMMs run as SIMT "
        .. "kernels, which no rule or predictor here covers)%s", where(gpu), tostring(dtype), arch,
        M.families[arch] and "; its fp32 GEMMs are (a run in fp32: --dtype fp32)" or ""), 0)
    end
    unknown_architecture(gpu, "tensor-core GEMM", M.tc_families, "tc_families")
  end
  local set = TC_SETS[fam.set]
  if type(set) ~= "table" or type(set.tiles) ~= "table" or type(set.unsplit_k) ~= "number" then
    local known = {}
    for name in pairs(TC_SETS) do known[#known + 1] = name end
    table.sort(known)
    error(fmt("scripts/tiling/gemm.lua: M.tc_families.%s names the tile set '%s', which TC_SETS (its tiles and "
      .. "unsplit_k) %s (sets: %s)", tostring(arch), tostring(fam.set), set == nil and "does not have"
      or "has without both", table.concat(known, ", ")), 0)
  end
  local best, best_cost, best_split
  for _, t in ipairs(set.tiles) do
    local tm, tn = t[1], t[2]
    local tiles = s.b * cdiv(s.m, tm) * cdiv(s.k, tn)
    local split = tc_split_k(tiles, s, set, dtype)
    local waves = cdiv(tiles * split, s.sm)
    local eff = math.min(1, tm * tn / (tm + tn) / TC_REUSE_FULL)
    local cost = waves * tm * tn * cdiv(s.n, split) / eff
    if not best_cost or cost < best_cost - 1e-9 * best_cost then best, best_cost, best_split = t, cost, split end
  end
  return { tile_m = best[1], tile_k = best[2], split = best_split,
           kernel = fmt("%s_%s_tilesize%dx%d%s", fam.prefix, dtype, best[2], best[1],
             best_split > 1 and fmt("_splitk%d", best_split) or "") }
end

-- Rule family for a GPU table (errors name the offending value).
local function family_of(gpu)
  local arch = gpu.architecture
  local fam = M.families[arch]
  if not fam then unknown_architecture(gpu, "GEMM", M.families, "families") end
  return fam
end

-- Architecture (gpus/*.toml `architecture`) → its vendor (`vendor`): every architecture these rules know, the one
-- list. A GPU file is checked against it when it loads (M.architecture_problem, asked by the engine:
-- engine/lua/session.cpp gpu_architecture_check): an architecture not listed is a typo or one to add here, with its
-- vendor and the rule families above it follows; one of the other vendor is a copy-paste slip (tiles and the
-- fallback's efficiency follow the vendor, the GEMM tile rules the architecture). kepler and maxwell have no rule
-- (M.no_tensor_cores says why their 16-bit GEMMs are not modelled).
M.vendors = {
  kepler = "nvidia", maxwell = "nvidia", pascal = "nvidia", volta = "nvidia", turing = "nvidia", ampere = "nvidia",
  ada = "nvidia", hopper = "nvidia", blackwell = "nvidia",
  cdna1 = "amd", cdna2 = "amd", cdna3 = "amd",
}

local VENDOR_NAMES = { nvidia = "NVIDIA", amd = "AMD" }

--- What is wrong with a GPU file's `architecture` for these rules, given its `vendor` and the line of its vendor key
--- (`vendor_line`, nil: not known), as a message without the file (the engine puts the architecture key's place
--- before it); nil when nothing is.
---@param architecture string
---@param vendor string
---@param vendor_line integer|nil
---@return string|nil
function M.architecture_problem(architecture, vendor, vendor_line)
  local known = M.vendors[architecture]
  if known == nil then
    local names = {}
    for a in pairs(M.vendors) do names[#names + 1] = a end
    table.sort(names)
    local ns = engine()
    local near = ns and ns.closest and ns.closest(tostring(architecture), names)
    return fmt("architecture '%s' is not one the tile rules know (scripts/tiling/gemm.lua M.vendors knows %s)%s; a new "
      .. "one goes there with its vendor and the rule families it follows (M.families, M.tc_families)",
      tostring(architecture), table.concat(names, ", "), near and fmt(" (did you mean '%s'?)", near) or "")
  end
  if known ~= vendor then
    return fmt("architecture '%s' is an %s architecture, but vendor = \"%s\"%s", architecture,
      VENDOR_NAMES[known] or tostring(known), tostring(vendor), vendor_line and fmt(" (line %d)", vendor_line) or "")
  end
  return nil
end

-- Predicted kernel name in the library's spelling, e.g. ampere_sgemm_128x64_tn or
-- Cijk_Alik_Bljk_SB_MT128x96 (Tensile names carry far more fields; only the macro tile is predicted).
-- A split-K launch (`split` > 1, fp32_split below) is named as the tensor-core rule names it (_splitk<s>; Tensile's
-- global split-U, GSU<s>, for rocBLAS).
local function kernel_name(rule, family, t, split)
  if rule.prefix == "Cijk_" then
    return fmt("Cijk_%s_Bljk_SB_MT%dx%d%s", family == "linear" and "Alik" or "Ailk", t.a, t.b,
      split > 1 and fmt("_GSU%d", split) or "")
  end
  return fmt("%s%dx%d%s_%s%s", rule.prefix, t.a, t.b, t.sliced and "_sliced1x4" or "",
    family == "linear" and "tn" or "nn", split > 1 and fmt("_splitk%d", split) or "")
end

-- Split-K of the FP32 rules, beyond the reduction lengths of the data only.
--
-- The rules above return one thread block per output tile, each running the whole reduction n. For a long reduction
-- that is wrong twice over:
--   * a small output leaves most SMs idle while a few blocks stream the reduction serially. cuBLAS does not launch
--     that: it splits the reduction over the grid's z dimension and adds the partial tiles in a splitKreduce_kernel
--     (rocBLAS/Tensile: a global split-U, GSU). The data shows it: 2,266 linear rows of dataset/train/collect name a
--     splitKreduce kernel (grid z = 2 to 144 slices of 56 to 32,032 elements; a median of 1 to 4 blocks per SM on
--     each GPU).
--   * a block's reduction is a feature the tile predictor saw only up to the data's longest one, n <= 65536 in every
--     fp32 row (linear: dataset/test, dataset/train/collect, dataset_amd/test/collect; bmm: n <= 4096), and beyond
--     about 4x that its MLP diverges: an H100 8 x 16 output over n = 2^24 (the dW of an MoE router or a small head over
--     2^24 tokens) was priced 678 s against a 0.48 ms roofline; an A100 4096 x 4096 output over n = 2^19 (a dW of fp32
--     training over 512k tokens) 43 min against 0.9 s; gpt2_large fp32 training at batch 512 x 1024 on an A100 28 h.
-- So beyond FP32_SPLIT_ABOVE the reduction is cut into `split` slices, each a thread block of its own (the tile model
-- counts tiles x split blocks of ceil(n / split): engine/core/tile_model.cpp):
--   1. slices of at most FP32_SLICE = 4096 elements, split >= ceil(n / 4096): the blocks of the data's GEMMs that fill
--      the GPU (4096 is the 90th percentile of the reduction of the rows of two or more waves, and the longest bmm
--      reduction), which the predictor prices in any number of waves (a 4096 x 4096 GEMM of 4096-long blocks stays
--      within 1.1-1.25x of the roofline from 2^14 to 2^24 rows on the A100 and V100). While the output tiles fill the
--      SMs this is neutral for the wave model (s times the blocks, 1/s of the work each), and cuBLAS does not split
--      there: the predicted kernel name has no split;
--   2. while the output tiles leave SMs idle (fewer than num_sm), the library's split-K: as the tensor-core rule
--      splits (tc_split: as many slices as fill the SMs), here rounded up to whole waves of those
--      (a multiple of that count, at least ceil(n / 4096)), named _splitk<s> (GSU<s> for Tensile).
-- The partial tiles' reduction pass (split x the output, written and read once) is not priced, as in the tensor-core
-- rule: a few MB at most where 2. applies.
-- Inside the data's range cuBLAS splits too, and 2. would help there: the 48 linear rows of the four NVIDIA training
-- GPUs with n >= 55,000 and an output below 2^15 are forecast 0.76-25.5x their measurement (median 3.6x) unsplit and
-- 0.08-1.5x (median 0.90x, 43 of them within 0.6-1.5x) split; 2. alone at every n lowers the linear MAPE of the NeuSight
-- rows (train + test) on every NVIDIA GPU (V100 10.3 -> 7.5 %, T4 17.9 -> 12.1 %, P100 11.6 -> 8.8 %, A100 6.4 -> 5.5 %).
-- But in distribution is not on unseen GPUs: 2. inside the data's range (Linears under one wave, folds retrained) was
-- judged by leave-one-GPU-out with a rule written first and not kept (Linear 23.42 -> 26.38 %, weights/FP32_SPLITK_RULE.md),
-- so a small-output GEMM of n just above 65536 is forecast faster than one of n = 65536: the unsplit forecast below the
-- threshold is the slow one.
local FP32_SPLIT_ABOVE = 65536
local FP32_SLICE = 4096
M.fp32_split_above, M.fp32_slice = FP32_SPLIT_ABOVE, FP32_SLICE

-- The thread blocks per output tile (split) the tile model counts for an FP32 GEMM of shape s and rule tile t, and the
-- library's split-K (what the kernel name shows; 1: none).
local function fp32_split(s, t)
  if s.n <= FP32_SPLIT_ABOVE then return 1, 1 end
  local tiles = ctas(s, t.a, t.b)
  local split = cdiv(s.n, FP32_SLICE)
  if tiles >= s.sm then return split, 1 end
  local fill = tc_split(tiles, s)
  split = fill * cdiv(split, fill)
  return split, split
end

-- The rules' shape `s` with its output elements (s.out = b * m * k, data convention: n is the reduction) set: the one
-- formula of them, for select's shape and rows_doubled's.
local function with_out(s)
  s.out = s.b * s.m * s.k
  return s
end

-- The row switches of the NVIDIA fp32 rules (weights/TILE_SWITCH_RULE.md). A rule hands a GEMM of fewer rows another
-- tile at a threshold (ampere Linear: 128x32 below 2048 rows with a reduction >= 4096, 128x64 from 2048 on), and the
-- MLP, beyond its training GPUs, prices the tile below the threshold far above the one above it (B200 fp32 Linear
-- 4096 -> 14336: 2000 rows 5.60 ms with 128x32, 2048 rows 3.85 ms with 128x64; the A100's measurements show the
-- library's own step is ~1.1x). cuBLAS picks among its kernels the one it expects fastest; so an NVIDIA fp32 GEMM
-- also names the tile the same rule gives it with twice its rows rounded up to whole row bands of its rule tile t,
-- 2 * ceil(m / tile_m) * tile_m (`alt_tile_m`, `alt_tile_k`, `alt_split`: fp32_split of the GEMM's own shape, not
-- the doubled one, with that tile) where that tile differs, and the neusight predictor prices the GEMM with both tiles
-- and takes the lesser (engine/core/neusight_predictor.cpp; `alt_kernel`: that tile's kernel name). The reported tile
-- and kernel name are the ones that priced the GEMM (engine/lua/session_hooks.cpp kernel_seconds; JSON tile.rule
-- names the rule's own when the alternative priced it). The
-- rounding (second round, "T3"): with 2m alone, 1024 rows (2048) got the 128x64 alternative and 1000 rows (2000) did
-- not, though both are 32 row bands of 128x32, and llama3_8b fp32 inference on the H100 fell x1/1.156 from 1000 to
-- 1024 tokens; rows of the same row bands now get the same alternative.
local function rows_doubled(s, t)
  local d = {}
  for key, v in pairs(s) do d[key] = v end
  d.m = 2 * cdiv(s.m, t.b) * t.b
  return with_out(d)
end

local function check_dim(k, name)
  local v = k[name]
  if type(v) ~= "number" or v < 1 or v ~= v // 1 then
    error(fmt("scripts/tiling/gemm.lua: select(): k.%s must be a positive integer (got %s)", name, tostring(v)), 3)
  end
  return v
end

--- Tile and kernel the library launches for one GEMM.
---@param k table { family = "bmm"|"linear", b, m, n, k, dtype? } (data convention, n = reduction); tensor-core
---  dtypes on NVIDIA GPUs take the tensor-core rule above
---@param gpu neusight.Gpu read-only GPU table (architecture, num_sm, compute_capability are read)
---@return table { tile_m = integer, tile_k = integer, split = integer, kernel = string, alt_tile_m?, alt_tile_k?,
---  alt_split?, alt_kernel? } (alt_*: an NVIDIA fp32 GEMM's tile a row doubling above, its rows rounded up to whole row bands,
---  where it differs: rows_doubled)
function M.select(k, gpu)
  local family = k.family
  if family ~= "bmm" and family ~= "linear" then
    error(fmt("scripts/tiling/gemm.lua: select(): unknown family '%s' (expected 'bmm' or 'linear')",
      tostring(family)), 2)
  end
  local s = with_out { b = check_dim(k, "b"), m = check_dim(k, "m"), n = check_dim(k, "n"), k = check_dim(k, "k"),
                       sm = gpu.num_sm }
  if M.tensor_dtypes[k.dtype] and gpu.vendor == "nvidia" then return tc_select(s, gpu, k.dtype) end
  local fam = family_of(gpu)
  local rule = rules[fam]
  -- Only the Pascal rule needs to tell GP100 from GP10x; other GPU tables need not carry the field.
  if fam == "pascal" then s.cc = gpu.compute_capability end
  local t = rule[family](s)
  local split, library_split = fp32_split(s, t)
  local out = { tile_m = t.b, tile_k = t.a, split = split, kernel = kernel_name(rule, family, t, library_split) }
  if gpu.vendor == "nvidia" then
    local t2 = rule[family](rows_doubled(s, t))
    if t2.a ~= t.a or t2.b ~= t.b then
      local split2, library_split2 = fp32_split(s, t2)
      out.alt_tile_m, out.alt_tile_k, out.alt_split = t2.b, t2.a, split2
      out.alt_kernel = kernel_name(rule, family, t2, library_split2)
    end
  end
  return out
end

return M
