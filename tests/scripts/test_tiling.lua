-- tests/scripts/test_tiling.lua — tile rules: kernel-name parsing, measured (shape, GPU) → kernel pairs, vector tiles, unseen-architecture fallbacks.
--
-- Expected kernels are rows of the NeuSight micro-benchmarks (file and B,M,N,K noted per case).
-- tests/bench/tile_hits.lua measures the rules on all rows; these pin a few that must keep matching.
local gemm = require "tiling.gemm"
local vec = require "tiling.vec"

local function eq(got, want, what)
  if got ~= want then error(("%s: expected %s, got %s"):format(what, tostring(want), tostring(got)), 2) end
end

-- Asserts that fn(...) raises an error whose message contains `fragment` (plain text).
local function raises(fragment, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("expected an error containing '" .. fragment .. "'", 2) end
  if not tostring(err):find(fragment, 1, true) then
    error(("expected an error containing '%s', got '%s'"):format(fragment, tostring(err)), 2)
  end
end

-- GPU tables carry only the fields the rules read (values from gpus/*.toml). Reading any other field
-- is an error, as with the engine's read-only GPU tables.
local function gpu(fields)
  return setmetatable(fields, {
    __index = function(_, key) error("test gpu has no field '" .. tostring(key) .. "'", 2) end,
    __newindex = function(_, key) error("test gpu is read-only (wrote '" .. tostring(key) .. "')", 2) end,
  })
end

local A100 = gpu { name = "A100-PCIE-40GB", vendor = "nvidia", architecture = "ampere", compute_capability = "8.0", num_sm = 108 }
local V100 = gpu { name = "V100-PCIE-32GB", vendor = "nvidia", architecture = "volta", compute_capability = "7.0", num_sm = 80 }
local T4 = gpu { name = "T4", vendor = "nvidia", architecture = "turing", compute_capability = "7.5", num_sm = 40 }
local P100 = gpu { name = "P100-PCIE-16GB", vendor = "nvidia", architecture = "pascal", compute_capability = "6.0", num_sm = 56 }
local P4 = gpu { name = "P4", vendor = "nvidia", architecture = "pascal", compute_capability = "6.1", num_sm = 20 }
local MI100 = gpu { name = "MI100", vendor = "amd", architecture = "cdna1", compute_capability = "gfx908", num_sm = 120 }
local MI210 = gpu { name = "MI210", vendor = "amd", architecture = "cdna2", compute_capability = "gfx90a", num_sm = 104 }
-- Unseen architectures (no data): the rules must still answer, through their documented family.
local H100 = gpu { name = "H100-SXM5-80GB", vendor = "nvidia", architecture = "hopper", compute_capability = "9.0", num_sm = 132 }
local L4 = gpu { name = "L4", vendor = "nvidia", architecture = "ada", compute_capability = "8.9", num_sm = 58 }
local B200 = gpu { name = "B200", vendor = "nvidia", architecture = "blackwell", compute_capability = "10.0", num_sm = 148 }
local MI300X = gpu { name = "MI300X", vendor = "amd", architecture = "cdna3", compute_capability = "gfx942", num_sm = 304 }

local T = {}

function T.test_parse_real_kernel_names()
  -- { name, tile_m, tile_k }: tile_m = Tile2, tile_k = Tile1 of the library name
  local cases = {
    { "ampere_sgemm_128x128_nn", 128, 128 },
    { "ampere_sgemm_128x64_tn", 64, 128 },
    { "ampere_sgemm_32x128_tn", 128, 32 },
    { "ampere_sgemm_128x32_sliced1x4_tn", 32, 128 },
    { "ampere_sgemm_32x32_sliced1x4_tn", 32, 32 },
    { "volta_sgemm_64x32_sliced1x4_tn", 32, 64 },
    { "volta_sgemm_128x32_nn", 32, 128 },
    { "maxwell_sgemm_128x64_nn", 64, 128 },
    { "maxwell_sgemm_32x128_tn", 128, 32 },
    { "sgemm_128x128x8_NT_vec", 128, 128 },      -- cuBLASLt, P4 test split
    { "sgemm_32x32x32_NN_vec", 32, 32 },         -- P100/P4 bmm `Kernels` column
    -- rocBLAS/Tensile (dataset_amd): macro tile MT<Tile1>x<Tile2>x<DepthU>
    { "Cijk_Ailk_Bljk_SB_MT16x8x32_SE_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE_ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR0_DTLA0_DTLB0_DTVA0_DTVB0_DVO0_ETSP_EPS1_ELFLR0_EMLL0_FSSC10_FL1_GLVWA2_GLVWB2_GRCGA1_GRCGB1_GRPM1_GRVW2_GSU1_GSUASB_GLS0_ISA908_IU1_K1_KLA_LBSPPA0_LBSPPB0_LPA0_LPB2_LDL1_LRVW2_LWPMn1_LDW0_MAC_MIAV0_MDA2_MO40_MMFGLC_MKFGSU256_NTA0_NTB0_NTC0_NTD0_NEPBS0_NLCA1_NLCB1_ONLL1_OPLV0_PK0_PAP0_PGR1_PLR1_SIA1_SS0_SU32_SUM0_SUS256_SCIUI1_SPO0_SRVW0_SSO0_SVW4_SNLL1_TSGRA0_TSGRB0_TT2_2_TLDS0_UMLDSA0_UMLDSB0_U64SL1_USFGRO0_VAW1_VS1_VW2_VWB2_VFLRP0_WSGRA0_WSGRB0_WS64_WG8_4_4_WGM1", 8, 16 },
    { "Cijk_Alik_Bljk_SB_MT128x96x32_MI32x32x2x1_SE_1LDSB1_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS0_ASE_ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR0_DTLA0_DTLB0_DTVA0_DTVB0_DVO0_ETSP_EPS1_ELFLR0_EMLL0_FSSC10_FL0_GLVWA1_GLVWB1_GRCGA1_GRCGB1_GRPM1_GRVW1_GSU1_GSUASB_GLS0_ISA908_IU1_K1_KLA_LBSPPA128_LBSPPB128_LPA2_LPB2_LDL1_LRVW2_LWPMn1_LDW0_MAC_MIAV0_MDA2_MO40_MMFGLC_MKFGSU256_NTA0_NTB0_NTC0_NTD0_NEPBS0_NLCA1_NLCB1_ONLL1_OPLV0_PK0_PAP0_PGR1_PLR17_SIA3_SS0_SU32_SUM0_SUS128_SCIUI1_SPO0_SRVW2_SSO0_SVW4_SNLL0_TSGRA0_TSGRB0_TT1_96_TLDS1_UMLDSA1_UMLDSB1_U64SL1_USFGROn1_VAW1_VSn1_VW1_VWB1_VFLRP0_WSGRA1_WSGRB1_WS64_WG128_2_1_WGM15", 96, 128 },
    -- The reference's lower-case regex spelling, and names the data lacks but the spec names.
    { "Cijk_Alik_Bljk_SB_mt64x32x32_GSU3", 32, 64 },
    { "cutlass_80_simt_sgemm_256x128_8x4_nn_align1", 128, 256 },
    { "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8_warpgroupsize1x1x1_execute_kernel", 64, 128 },
    { "ampere_h16816gemm_256x128_ldg8_stages_32x3_tn", 128, 256 },
  }
  local seen = {}
  for _, c in ipairs(cases) do
    local tm, tk = gemm.parse(c[1])
    eq(tm, c[2], "tile_m of " .. c[1]:sub(1, 40))
    eq(tk, c[3], "tile_k of " .. c[1]:sub(1, 40))
    seen[c[1]] = true
  end
  -- Kernels without a GEMM tile return nil.
  local tm, tk = gemm.parse("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
  eq(tm, nil, "tile_m of an elementwise kernel")
  eq(tk, nil, "tile_k of an elementwise kernel")
  raises("string expected", gemm.parse, 42)
end

-- Names cuBLAS launched on an H200 (torch 2.11.0+cu130, scripts/collect, 2026-11-26; tests/fixtures/collect_h200).
-- The expected frame is the one the launch grids showed (tiling/gemm.lua, parse patterns 3, 4 and 7); the shape
-- and grid of one row per family are noted. Names only: no timing of that held-out GPU is used.
function T.test_parse_hopper_cublas13_names()
  local cases = {
    -- nvjet (linear bf16 m=3074 k=496... persistent; linear fp8 m=48 k=7792: grid 2x61 = ceil(7792/64) x ceil(48/48))
    { "nvjet_sm90_tst_128x184_64x5_1x2_h_bz_coopA_NNT", 184, 128 },
    { "nvjet_sm90_hsh_192x208_64x4_2x1_v_bz_coopB_bias_TNT", 208, 192 },
    { "nvjet_sm90_qqtst_64x48_128x15_2x1_v_bz_algo2_TNT", 48, 64 },
    { "nvjet_sm90_qqtst_64x16_128x16_1x4_h_bz_algo2_splitK_TNT", 16, 64 },
    -- cuBLAS SIMT fp32: tile A runs along the rows (bmm B=59 M=42 K=510, tilesize64x128: grid 1x4x59)
    { "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", 64, 128 },
    { "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", 256, 64 },
    { "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize32x32x64_stage3_warpsize2x2x1_tensor16x8x8_aligna4_alignc4_execute_kernel__5x_cublas", 32, 32 },
    -- the engine's own predicted tensor-core names keep the library frame (no layout field)
    { "sm80_xmma_gemm_bf16_tilesize128x256", 256, 128 },
    -- Hopper xmma (only square tiles seen): library frame as before
    { "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 128, 128 },
    -- CUTLASS tensor-core kernels with the dtype after "gemm_" (bmm bf16 B=59 M=42 K=510, 256x64: grid 2x1x59)
    { "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x64_64x3_nn_align2>(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x64_64x3_nn_align2::Params)", 64, 256 },
    { "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_nn_align1>(cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_nn_align1::Params)", 128, 256 },
    { "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_f16_128x256_64x3_tn_align2>(cutlass_80_tensorop_f16_s16816gemm_f16_128x256_64x3_tn_align2::Params)", 256, 128 },
    { "void cutlass::Kernel2<cutlass_75_wmma_tensorop_f16_s161616gemm_f16_32x32_128x1_tn_align1>(cutlass_75_wmma_tensorop_f16_s161616gemm_f16_32x32_128x1_tn_align1::Params)", 32, 32 },
    { "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_64x2_nn_align2>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_64x2_nn_align2::Params)", 16, 16 },
    -- tf32 CUTLASS (no dtype field) as before
    { "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x256_16x4_nn_align1>(cutlass_80_tensorop_s1688gemm_64x256_16x4_nn_align1::Params)", 256, 64 },
  }
  for _, c in ipairs(cases) do
    local tm, tk = gemm.parse(c[1])
    eq(tm, c[2], "tile_m of " .. c[1]:sub(1, 60))
    eq(tk, c[3], "tile_k of " .. c[1]:sub(1, 60))
  end
  -- Names that carry no output tile: the rule's tile is used instead (nil here).
  for _, name in ipairs {
    "void gemmSN_NN_kernel<float, 128, 2, 4, 8, 3, 4, false, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float> >(cublasGemmSmallNParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>)",
    "void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, int, int, int, int, int, int, float const*, float const*, float, float, int, int, int*, int*)",
    "void magma_sgemmEx_kernel<float, float, float, false, false, 6, 3, 5, 3, 3>(int, int, int, BatchedTensor, int, BatchedTensor, int, BatchedTensor, int, BatchedTensor, int, int, int, float const*, float const*, float, float, int, cublasLtEpilogue_t, int, void const*, long)",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
  } do
    local tm, tk = gemm.parse(name)
    eq(tm, nil, "tile_m of " .. name:sub(1, 40))
    eq(tk, nil, "tile_k of " .. name:sub(1, 40))
  end
end

-- select() on (shape, GPU) pairs whose measured kernel the rules reproduce.
local function check_select(g, family, b, m, n, k, kernel, source)
  local t = gemm.select({ family = family, b = b, m = m, n = n, k = k, dtype = "fp32" }, g)
  local tm, tk = gemm.parse(kernel)
  local what = ("%s %s (%d,%d,%d,%d) [%s]"):format(g.name, family, b, m, n, k, source)
  eq(t.tile_m, tm, what .. " tile_m")
  eq(t.tile_k, tk, what .. " tile_k")
  -- NVIDIA predictions spell the measured kernel exactly; Tensile names only up to the macro tile.
  if kernel:match("^Cijk_") then
    eq(kernel:sub(1, #t.kernel), t.kernel, what .. " kernel prefix")
  else
    eq(t.kernel, kernel, what .. " kernel")
  end
end

function T.test_select_ampere()
  check_select(A100, "bmm", 3072, 1024, 1024, 64, "ampere_sgemm_128x128_nn", "test/bmm.csv")
  check_select(A100, "bmm", 580, 968, 781, 218, "ampere_sgemm_128x128_nn", "train A100")
  check_select(A100, "linear", 1, 16384, 8192, 2048, "ampere_sgemm_128x64_tn", "test/linear.csv")
  check_select(A100, "linear", 1, 2048, 50272, 1600, "ampere_sgemm_128x32_sliced1x4_tn", "test/linear.csv")
  check_select(A100, "linear", 1, 1536, 8192, 30522, "ampere_sgemm_128x32_tn", "test/linear.csv")
  check_select(A100, "linear", 1, 146, 81, 7686, "ampere_sgemm_128x32_tn", "train A100")
  check_select(A100, "linear", 1, 1980, 110, 757, "ampere_sgemm_32x128_tn", "train A100")
  check_select(A100, "linear", 1, 126, 115, 72, "ampere_sgemm_32x32_sliced1x4_tn", "train A100")
end

function T.test_select_volta_turing()
  check_select(V100, "bmm", 192, 512, 512, 64, "volta_sgemm_32x128_nn", "test/bmm.csv")
  check_select(V100, "bmm", 96, 512, 64, 512, "volta_sgemm_64x64_nn", "test/bmm.csv")
  check_select(V100, "linear", 1, 2048, 50272, 2560, "volta_sgemm_128x128_tn", "test/linear.csv")
  check_select(T4, "bmm", 192, 256, 3072, 3072, "volta_sgemm_128x64_nn", "test/bmm.csv")
  check_select(T4, "bmm", 80, 96, 3072, 3072, "volta_sgemm_128x32_nn", "test/bmm.csv")
  check_select(T4, "linear", 1, 32768, 2048, 6144, "volta_sgemm_128x128_tn", "test/linear.csv")
end

function T.test_select_pascal()
  check_select(P100, "linear", 1, 8192, 30522, 2048, "maxwell_sgemm_32x128_tn", "test/linear.csv")
  check_select(P100, "bmm", 160, 4096, 4096, 128, "maxwell_sgemm_128x64_nn", "test/bmm.csv")
  check_select(P4, "linear", 1, 512, 50272, 1536, "maxwell_sgemm_128x128_tn", "test P4 (model shapes)")
  check_select(P4, "bmm", 476, 726, 924, 858, "maxwell_sgemm_128x64_nn", "train P4")
end

function T.test_select_cdna()
  check_select(MI210, "bmm", 256, 4096, 4096, 256, "Cijk_Ailk_Bljk_SB_MT64x64x32_MI16x16x4x1_SN_1LDSB0", "amd MI210 bmm")
  check_select(MI210, "linear", 1, 65536, 2048, 30522, "Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB1", "amd MI210 linear")
  check_select(MI100, "bmm", 3072, 1024, 1024, 256, "Cijk_Ailk_Bljk_SB_MT64x64x32_MI32x32x2x1_SE_1LDSB0", "amd MI100 bmm")
  check_select(MI100, "linear", 1, 65536, 1024, 50272, "Cijk_Alik_Bljk_SB_MT128x96x32_MI32x32x2x1_SE_1LDSB1", "amd MI100 linear")
end

-- Tiles a library could plausibly launch: both sides a multiple of 8 in [8, 256].
local function sane(t, what)
  for _, side in ipairs { "tile_m", "tile_k" } do
    local v = t[side]
    if math.type(v) ~= "integer" or v < 8 or v > 256 or v % 8 ~= 0 then
      error(("%s: implausible %s %s"):format(what, side, tostring(v)), 2)
    end
  end
end

function T.test_unseen_architectures_follow_their_family()
  local shapes = {
    { "bmm", 32, 2048, 80, 2048 }, { "bmm", 32, 2048, 2048, 80 }, { "bmm", 1, 7, 3, 5 },
    { "linear", 1, 2048, 2560, 7680 }, { "linear", 1, 2048, 10240, 2560 }, { "linear", 1, 2048, 2560, 50257 },
    { "linear", 1, 8, 64, 16 }, { "linear", 1, 512, 65536, 1024 },
  }
  for _, g in ipairs { H100, L4, B200, MI300X } do
    for _, s in ipairs(shapes) do
      local t = gemm.select({ family = s[1], b = s[2], m = s[3], n = s[4], k = s[5] }, g)
      sane(t, g.name .. " " .. s[1])
    end
  end
  -- hopper/ada/blackwell use the ampere rule (and ampere kernel spelling); cdna3 uses cdna2's.
  local k = { family = "linear", b = 1, m = 2048, n = 2560, k = 7680 }
  eq(gemm.select(k, H100).kernel, "ampere_sgemm_128x64_tn", "H100 QKV projection")
  eq(gemm.select({ family = "bmm", b = 32, m = 2048, n = 80, k = 2048 }, H100).kernel, "ampere_sgemm_128x128_nn", "H100 QKᵀ")
  eq(gemm.select(k, MI300X).kernel, gemm.select(k, MI210).kernel, "MI300X follows MI210")
  -- The ampere occupancy threshold scales with SM count: 1000x700 outputs (0.7 M) fill L4's 58 SMs
  -- with 32x128 tiles but count as small (32x32 sliced) on a 108-SM A100.
  local mid = { family = "linear", b = 1, m = 1000, n = 512, k = 700 }
  eq(gemm.select(mid, A100).kernel, "ampere_sgemm_32x32_sliced1x4_tn", "A100 mid-size")
  eq(gemm.select(mid, L4).kernel, "ampere_sgemm_32x128_tn", "L4 mid-size")
end

-- The architectures a GPU file may name are the tile rules' list (M.vendors, each with its vendor; the engine asks
-- architecture_problem when it loads the file): every rule table's architecture is in it, an architecture not in it
-- is named with the list and the nearest, one of the other vendor with the vendor's line.
function T.test_architecture_list_and_problem()
  for _, rules in ipairs { "families", "tc_families", "no_tensor_cores" } do
    for arch in pairs(gemm[rules]) do
      assert(gemm.vendors[arch], ("M.%s names '%s', which M.vendors lacks"):format(rules, arch))
    end
  end
  eq(gemm.architecture_problem("hopper", "nvidia", 4), nil, "hopper on NVIDIA")
  eq(gemm.architecture_problem("cdna3", "amd", 4), nil, "cdna3 on AMD")
  eq(gemm.architecture_problem("ampere", "amd", 4), 'architecture \'ampere\' is an NVIDIA architecture, but vendor = "amd" '
    .. "(line 4)", "ampere on AMD")
  eq(gemm.architecture_problem("cdna2", "nvidia"), 'architecture \'cdna2\' is an AMD architecture, but vendor = "nvidia"',
    "no line known")
  local unknown = gemm.architecture_problem("hoper", "nvidia", 4)
  assert(unknown:find("architecture 'hoper' is not one the tile rules know (scripts/tiling/gemm.lua M.vendors knows "
    .. "ada, ampere, blackwell, cdna1, cdna2, cdna3, hopper, kepler, maxwell, pascal, turing, volta) (did you mean "
    .. "'hopper'?)", 1, true), unknown)
end

function T.test_select_errors()
  local unknown = gpu { name = "X", vendor = "nvidia", architecture = "rubin", compute_capability = "11.0", num_sm = 1 }
  raises("no GEMM tile rule for architecture 'rubin'", gemm.select, { family = "bmm", b = 1, m = 1, n = 1, k = 1 }, unknown)
  raises("unknown family 'conv'", gemm.select, { family = "conv", b = 1, m = 1, n = 1, k = 1 }, A100)
  raises("k.n must be a positive integer", gemm.select, { family = "linear", b = 1, m = 8, n = 0, k = 8 }, A100)
end

function T.test_vec_from_grid()
  -- add, A100 train row: B=127, H=168, grid 42x1x1 → ceil(21336/42) = 508 → 512
  eq(vec.from_grid(127, 168, 42, 1, 1), 512, "from_grid A100 add")
  -- add, A100 test row over 2 GiB: B=131072, H=8192, grid 1048576 (one of two 32-bit halves) → 1024
  eq(vec.from_grid(131072, 8192, 1048576, 1, 1), 1024, "from_grid 4 GiB add")
  -- fewer elements than one block: the block count is 1, the tile is numel rounded up to a power of two
  eq(vec.from_grid(1, 100, 1, 1, 1), 128, "from_grid tiny")
  raises("bad argument #4 to 'from_grid'", vec.from_grid, 1, 1, 1, 0, 1)
end

function T.test_vec_select()
  local add = function(rows, hidden) return { family = "elementwise", op = "add", rows = rows, hidden = hidden } end
  eq(vec.select(add(127, 168), A100).elems, 512, "NVIDIA: 128 threads x 4")
  eq(vec.select(add(2048, 2560), H100).elems, 512, "H100 (unseen) uses the CUDA kernel's block")
  eq(vec.select(add(32768, 1600), MI210).elems, 1024, "AMD: 256 threads x 4")
  eq(vec.select(add(32768, 1600), MI300X).elems, 1024, "cdna3 (unseen) uses the ROCm kernel's block")
  eq(vec.select(add(1, 100), A100).elems, 128, "tensor smaller than a block")
  eq(vec.select(add(65536, 8192), A100).elems, 512, "exactly 2 GiB still fits 32-bit indexing")
  eq(vec.select(add(131072, 8192), A100).elems, 1024, "4 GiB: two halves")
  eq(vec.select(add(131072, 16384), A100).elems, 2048, "8 GiB: four quarters")
  local half = { family = "elementwise", op = "mul", rows = 131072, hidden = 8192, dtype = "fp16" }
  eq(vec.select(half, A100).elems, 512, "2 GiB of fp16 fits 32-bit indexing")
  eq(vec.select({ family = "softmax", op = "softmax", rows = 65536, hidden = 2048 }, A100).elems, 2048, "softmax row")
  eq(vec.select({ family = "layernorm", op = "ln", rows = 2048, hidden = 2560 }, MI210).elems, 2560, "layernorm row")
  raises("unknown family 'conv'", vec.select, { family = "conv", rows = 1, hidden = 1 }, A100)
end

-- Tensor-core GEMMs (bf16/fp16/tf32/fp8 on NVIDIA): the documented tile-set rule with split-K.
local function tc(g, b, m, n, k, dtype)
  return gemm.select({ family = b > 1 and "bmm" or "linear", b = b, m = m, n = n, k = k, dtype = dtype or "bf16" }, g)
end

-- A tile set's tiles and longest unsplit reduction are one table (gemm.tc_sets): a family naming a set it lacks, or a
-- set without both, is an error naming the set and the file, not Lua's "attempt to compare number with nil".
function T.test_tensor_core_tile_set_is_one_table()
  local fam, set = gemm.tc_families.hopper, gemm.tc_sets.wgmma
  local function refused(want)
    local ok, err = pcall(tc, H100, 1, 1, 4096, 4096)
    eq(ok, false, "refused") eq(tostring(err):find(want, 1, true) ~= nil, true, tostring(err))
  end
  local ok, err = pcall(function()
    gemm.tc_families.hopper = { set = "wgmma2", prefix = fam.prefix }
    refused("scripts/tiling/gemm.lua: M.tc_families.hopper names the tile set 'wgmma2', which TC_SETS (its tiles and "
      .. "unsplit_k) does not have (sets: mma_sync, umma, wgmma)")
    gemm.tc_families.hopper = fam
    gemm.tc_sets.wgmma = { tiles = set.tiles }
    refused("names the tile set 'wgmma', which TC_SETS (its tiles and unsplit_k) has without both")
  end)
  gemm.tc_families.hopper, gemm.tc_sets.wgmma = fam, set -- the module's tables, shared with the other tests
  if not ok then error(err, 0) end
  eq(tc(H100, 1, 1, 4096, 4096).split, 2, "restored")
end

function T.test_tensor_core_tiles()
  -- A large GEMM fills the GPU many times over with the largest tiles and needs no split.
  local big = tc(H100, 1, 8192, 8192, 8192)
  eq(big.split, 1, "large bf16 GEMM: no split-K")
  eq(big.tile_m * big.tile_k >= 128 * 128, true, "large bf16 GEMM: a large tile")
  eq(big.kernel:match("^sm90_xmma_gemm_bf16_tilesize") ~= nil, true, "hopper kernel name " .. big.kernel)
  -- The predicted name parses back to the same tile (library order: out-features first).
  local pm, pk = gemm.parse(big.kernel)
  eq(pm, big.tile_m, "parse(tile_m)")
  eq(pk, big.tile_k, "parse(tile_k)")
  -- Decode-shaped GEMM (one token, 4096 x 4096): too few output tiles for 132 SMs and a reduction longer than the
  -- longest the data runs unsplit (tc_sets.wgmma.unsplit_k), so it is split into slices no longer than that.
  local gemv = tc(H100, 1, 1, 4096, 4096)
  local tiles = math.ceil(1 / gemv.tile_m) * math.ceil(4096 / gemv.tile_k)
  eq(gemv.split, 2, "decode GEMM is split-K, into slices of at most tc_sets.wgmma.unsplit_k")
  eq(tiles * gemv.split <= 132, true, "split-K never exceeds one wave")
  eq(gemv.kernel:find("_splitk" .. gemv.split, 1, true) ~= nil, true, "split in the kernel name")
  eq(tc(H100, 1, 1, 16384, 4096).split, 8, "K 16384: 8 slices of 2048")
  -- A short reduction is never split.
  eq(tc(H100, 1, 1, 256, 4096).split, 1, "n = 256: no split")
  -- Up to the longest unsplit reduction of the tile set (the data: K 2048 on the datacenter Blackwells, 1536 on the
  -- L40S / RTX PRO 6000) a small output is not split, so a longer reduction is a longer per-block reduction: Qwen3-
  -- 30B-A3B's expert gate (K 2048) and down projection (K 768) at 64 rows are not the same CTAs (split 8 and 3 gave
  -- both 96 blocks of 256-element slices).
  local RTXs = gpu { name = "RTX", vendor = "nvidia", architecture = "blackwell", compute_capability = "12.0", num_sm = 188 }
  local L40S = gpu { name = "L40S", vendor = "nvidia", architecture = "ada", compute_capability = "8.9", num_sm = 142 }
  for _, c in ipairs { { H100, 2048 }, { B200, 2048 }, { RTXs, 1536 }, { L40S, 1536 }, { A100, 1536 } } do
    for _, m in ipairs { 1, 32, 64, 128 } do
      for _, out in ipairs { 768, 2048 } do
        for K = 256, c[2], 256 do
          eq(tc(c[1], 1, m, K, out).split, 1, ("%s m %d K %d out %d: no split"):format(c[1].name, m, K, out))
        end
        eq(tc(c[1], 1, m, c[2] + 512, out).split > 1, true, ("%s m %d K %d: split"):format(c[1].name, m, c[2] + 512))
      end
    end
  end
  eq(tc(H100, 1, 64, 2048, 768).split, 1, "Qwen3 expert gate at 64 rows: no split")
  eq(tc(H100, 1, 64, 768, 2048).split, 1, "Qwen3 expert down projection at 64 rows: no split")
  -- fp8 keeps the fill-the-SMs split (slices of at least tc_min_slice): never splitting cost a leave-one-GPU-out fold
  -- 11.7 points (weights/PARTIAL_WAVE_RULE.md, run D), so only the 16-bit dtypes split as the data do.
  local f8 = tc(H100, 1, 1, 4096, 4096, "fp8")
  local f8tiles = math.ceil(1 / f8.tile_m) * math.ceil(4096 / f8.tile_k)
  eq(f8.split, math.min(132 // f8tiles, 4096 // gemm.tc_min_slice), "fp8 decode GEMM fills the SMs")
  eq(f8.split > 2, true, "fp8 splits further than bf16 (slices of tc_min_slice, not unsplit_k)")
  local gate = tc(H100, 1, 64, 2048, 768, "fp8")
  eq(gate.split, math.min(132 // (math.ceil(64 / gate.tile_m) * math.ceil(768 / gate.tile_k)), 2048 // gemm.tc_min_slice),
    "fp8 at K 2048 (no bf16 split there) still split to fill the SMs")
  eq(gate.split > 1, true, "fp8 Qwen3 gate shape is split")
  eq(tc(B200, 1, 1, 512, 1024, "fp8").split, 2, "fp8 K 512: two slices of 256")
  -- Per architecture: Ampere/Ada mma.sync, Blackwell datacenter tcgen05, Blackwell cc 12 (RTX) mma.sync.
  eq(tc(A100, 1, 4096, 4096, 4096).kernel:match("^sm80_") ~= nil, true, "ampere name")
  eq(tc(B200, 1, 4096, 4096, 4096).kernel:match("^sm100_") ~= nil, true, "blackwell cc 10 name")
  local RTX = gpu { name = "RTX", vendor = "nvidia", architecture = "blackwell", compute_capability = "12.0", num_sm = 188 }
  eq(tc(RTX, 1, 4096, 4096, 4096).kernel:match("^sm120_") ~= nil, true, "blackwell cc 12 name")
  -- Batched (attention-shaped) products use the same rule; fp32 keeps the measured SIMT rules.
  eq(tc(H100, 64, 2048, 128, 2048).split, 1, "bmm with 64 batches")
  eq(gemm.select({ family = "linear", b = 1, m = 4096, n = 4096, k = 4096, dtype = "fp32" }, A100).kernel:match("^ampere_sgemm") ~= nil,
    true, "fp32 stays SIMT")
  -- Model-shaped GEMMs get plausible tiles.
  for _, shape in ipairs { { 2048, 5120, 5120 }, { 4096, 1280, 3840 }, { 512, 8192, 28672 }, { 77, 4096, 11008 } } do
    local t = tc(H100, 1, shape[1], shape[2], shape[3])
    sane(t, ("tc %d,%d,%d"):format(shape[1], shape[2], shape[3]))
  end
  local Volta = gpu { name = "X", vendor = "nvidia", architecture = "kepler", compute_capability = "3.5", num_sm = 15 }
  raises("GEMMs are not modelled: the kepler architecture has no tensor cores", tc, Volta, 1, 64, 64, 64)
  -- an architecture no rule knows (a GPU file's typo): the names known and the nearest
  local Typo = gpu { name = "Y", vendor = "nvidia", architecture = "hoper", compute_capability = "9.0", num_sm = 132 }
  raises("no tensor-core GEMM tile rule for architecture 'hoper' (scripts/tiling/gemm.lua M.tc_families knows ada, "
    .. "ampere, blackwell, hopper, turing, volta) (did you mean 'hopper'?)", tc, Typo, 1, 64, 64, 64)
end

-- FP32 split-K beyond the data's reductions (gemm.lua fp32_split): the measured rows keep one block per output tile;
-- a reduction longer than any measured one is cut into slices of at most fp32_slice, and a small output is split
-- until its blocks fill the SMs (whole waves), as cuBLAS' split-K does.
local function fp32(g, b, m, n, k)
  return gemm.select({ family = b > 1 and "bmm" or "linear", b = b, m = m, n = n, k = k, dtype = "fp32" }, g)
end

function T.test_fp32_split_k_beyond_the_data_only()
  -- Measured rows keep split 1 and their measured kernel names: a V100 row cuBLAS ran with split-K (grid z 120,
  -- dataset/train/collect/linear V100: 1,62,30000,2), the longest test rows (dataset/test/linear.csv n = 65536).
  for _, c in ipairs {
    { V100, 1, 62, 30000, 2, "volta_sgemm_32x32_sliced1x4_tn" }, { A100, 1, 71, 55349, 10, "ampere_sgemm_32x32_sliced1x4_tn" },
    { A100, 1, 8, 65536, 16, "ampere_sgemm_32x32_sliced1x4_tn" }, { MI210, 1, 8, 65536, 16, "Cijk_Alik_Bljk_SB_MT64x32" },
  } do
    local t = fp32(c[1], c[2], c[3], c[4], c[5])
    eq(t.split or 1, 1, c[1].name .. " n = " .. c[4] .. ": no split inside the data")
    eq(t.kernel, c[6], c[1].name .. " n = " .. c[4] .. ": the measured kernel")
  end
  -- A tiny output over a long reduction (an MoE router's dW over 2^24 tokens): split until the SMs are filled, in
  -- whole waves, no slice longer than fp32_slice.
  for _, c in ipairs { { H100, 8, 2 ^ 24, 16 }, { V100, 1024, 524288, 2 }, { T4, 8, 131072, 16 }, { MI300X, 62, 2 ^ 20, 2 } } do
    local g, m, n, k = c[1], c[2], math.tointeger(c[3]), c[4]
    local t = fp32(g, 1, m, n, k)
    local tiles = math.ceil(m / t.tile_m) * math.ceil(k / t.tile_k)
    local what = ("%s %d x %d over %d"):format(g.name, m, k, n)
    eq(tiles < g.num_sm, true, what .. ": a small output")
    eq((t.split or 1) > 1, true, what .. ": split-K")
    eq(tiles * t.split >= g.num_sm, true, what .. ": the blocks fill the SMs")
    eq((tiles * t.split) % ((g.num_sm // tiles) * tiles), 0, what .. ": in whole waves")
    eq(math.ceil(n / t.split) <= gemm.fp32_slice, true, what .. ": slices of at most fp32_slice")
    eq(t.kernel:find((g.vendor == "amd" and "_GSU" or "_splitk") .. t.split, 1, true) ~= nil, true, what .. ": " .. t.kernel)
  end
  eq(gemm.fp32_split_above, 65536, "the longest reduction of the fp32 data")
  -- Just past the data: the first split.
  eq(fp32(A100, 1, 8, 65537, 16).split, 108, "n = 65537 on the A100: one wave of 108 slices")
  -- A large output over a long reduction (a dW of fp32 training over 512k tokens): slices of fp32_slice, which the
  -- wave model prices as the unsplit GEMM; cuBLAS does not split it, and the name says so.
  local big = fp32(A100, 1, 4096, 2 ^ 19, 4096)
  eq(big.split, 2 ^ 19 // gemm.fp32_slice, "4096 x 4096 over 2^19: slices of fp32_slice")
  eq(math.ceil(4096 / big.tile_m) * math.ceil(4096 / big.tile_k) >= A100.num_sm, true, "4096 x 4096 fills the SMs")
  eq(big.kernel:find("split", 1, true), nil, "no split-K in the library's name: " .. big.kernel)
  -- Batched GEMMs alike (the batch counts in the output tiles).
  local bmm = fp32(V100, 4, 16, 2 ^ 20, 16)
  eq(bmm.split > 1 and 4 * bmm.split >= V100.num_sm, true, "a bmm of a small output over 2^20")
end

-- The forecasts of such GEMMs (the engine's predictors: skipped by the standalone runner). Before the split, the tile
-- model priced one block per output tile over the whole reduction: H100 8 x 16 over 2^24 678 s against a 0.48 ms
-- roofline, V100 1024 x 2 over 2^19 145 ms against 2.39 ms, A100 4096 x 4096 over 2^19 43 min against 0.9 s.
function T.test_engine_fp32_long_reduction_forecasts_near_the_roofline()
  local ns = require "neusight"
  local kernels = require "neusight.kernels"
  for _, c in ipairs {
    { "h100", 8, 2 ^ 24, 16 }, { "v100", 1024, 2 ^ 19, 2 }, { "a100-pcie-40gb", 4096, 2 ^ 19, 4096 },
    { "a100-pcie-40gb", 8, 2 ^ 22, 16 }, { "t4", 256, 2 ^ 20, 256 }, { "mi210", 8, 2 ^ 24, 16 },
  } do
    local gpu, m, n, k = c[1], c[2], math.tointeger(c[3]), c[4]
    local full, half = kernels.linear(m, n, k, "fp32"), kernels.linear(m, n // 2, k, "fp32")
    local s = ns.predict({ full, half }, gpu, "neusight")
    local roof = ns.predict({ full }, gpu, "roofline")[1]
    local what = ("%s %d x %d over %d: %.4g ms, roofline %.4g ms"):format(gpu, m, k, n, s[1] * 1e3, roof * 1e3)
    eq(s[1] >= roof and s[1] <= 20 * roof, true, what .. " (within 20x of the roofline)")
    eq(s[2] <= s[1], true, ("%s; half the reduction %.4g ms is not slower"):format(what, s[2] * 1e3))
  end
end

-- Softmax and layer-norm rows longer than any measured (vec.lua M.row_max) are tiles of the longest measured row: the
-- rule's tile stops growing there, rows within it keep their one-row tile, and the forecast grows linearly with the
-- row length instead of falling off the tile model's range (a 128 256-wide fp32 softmax was 14x its roofline on an
-- H100, 36x on an A100).
function T.test_row_kernels_beyond_the_longest_measured_row()
  for _, fam in ipairs { "softmax", "layernorm" } do
    local max = vec.row_max[fam]
    eq(vec.select({ family = fam, rows = 8, hidden = 1024 }, { vendor = "nvidia" }).elems, 1024, fam .. " short row")
    eq(vec.select({ family = fam, rows = 8, hidden = max }, { vendor = "nvidia" }).elems, max, fam .. " longest row")
    eq(vec.select({ family = fam, rows = 8, hidden = 8 * max + 3 }, { vendor = "amd" }).elems, max, fam .. " longer")
  end
end

-- ... and priced so: linear in the row length from the longest measured row on, near the roofline.
function T.test_engine_row_kernels_beyond_the_longest_measured_row_grow_linearly()
  local ns = require "neusight"
  local MAX = 16384 -- the longest measured row (vec.lua M.row_max), written out: the test checks the forecast
  local kernels = require "neusight.kernels"
  for _, gpu in ipairs { "h100", "a100-pcie-40gb" } do
    for _, dt in ipairs { "fp32", "bf16" } do
      local rows, V = 16384, 128256
      local s = ns.predict({ kernels.softmax(rows, V, dt), kernels.softmax(rows, MAX, dt),
        kernels.layernorm(rows, V, dt), kernels.layernorm(rows, MAX, dt) }, gpu, "neusight")
      local roof = ns.predict({ kernels.softmax(rows, V, dt) }, gpu, "roofline")[1]
      local what = ("%s %s softmax %d x %d: %.4g ms, roofline %.4g ms"):format(gpu, dt, rows, V, s[1] * 1e3, roof * 1e3)
      eq(s[1] <= 5 * roof, true, what .. " (within 5x of the roofline)")
      -- about linear in the row length from the longest measured row on: ⌈V / row_max⌉ tiles of it, within 1.5x (the
      -- tile model sees that many times the waves; the shipped predictor gives 1.02-1.26x on these four; 42x before)
      local r = V / MAX
      eq(s[1] <= 1.5 * r * s[2] and s[1] >= r * s[2] / 1.5, true, ("%s; %.4g ms at the longest measured row, x%.2f")
        :format(what, s[2] * 1e3, r))
      eq(s[3] <= 1.5 * r * s[4], true, ("%s layernorm %.4g ms, %.4g ms at the longest row"):format(gpu, s[3] * 1e3,
        s[4] * 1e3))
    end
  end
end

-- The tile switch (weights/TILE_SWITCH_RULE.md): an NVIDIA fp32 GEMM names, besides its rule tile, the tile the rule
-- gives it with twice its rows, rounded up to whole row bands of its rule tile, where that differs (the predictor
-- prices both and takes the lesser); none where the doubling keeps the tile, none for AMD (its rules are not in the
-- rule's evidence), none for tensor-core dtypes. Rows of the same row bands get the same alternative (second round,
-- T3): 1000 rows are the 32 bands of 1024 rows' 128x32 tiles, so both get 128x64 (with 2m alone 1000 rows did not).
function T.test_fp32_gemm_names_the_tile_a_row_doubling_above()
  local function sel(m, g, dtype)
    return gemm.select({ family = "linear", b = 1, m = m, n = 4096, k = 14336, dtype = dtype or "fp32" }, g)
  end
  for _, g in ipairs({ B200, H100, A100 }) do
    local below = sel(2000, g)  -- ampere Linear: 128x32 below 2048 rows with n >= 4096, 128x64 from 2048 on
    eq(below.tile_m .. "x" .. below.tile_k, "32x128", g.name .. " 2000 rows: rule tile")
    eq(below.kernel, "ampere_sgemm_128x32_tn", g.name .. " 2000 rows: the rule's kernel name, not the alternative's")
    eq(below.alt_tile_m, 64, g.name .. " 2000 rows: alt_tile_m")
    eq(below.alt_tile_k, 128, g.name .. " 2000 rows: alt_tile_k")
    eq(below.alt_split, 1, g.name .. " 2000 rows: alt_split")
    eq(sel(2048, g).alt_tile_m, nil, g.name .. " 2048 rows: no alternative (4096 rows keep 128x64)")
    eq(sel(1000, g).alt_tile_m, 64, g.name .. " 1000 rows: 32 row bands of 32 as 1024, 2048 rows take 128x64")
    eq(sel(992, g).alt_tile_m, nil, g.name .. " 992 rows: no alternative (31 row bands, 1984 rows keep 128x32)")
  end
  eq(sel(2000, MI210).alt_tile_m, nil, "MI210: no alternative")
  eq(sel(2000, B200, "bf16").alt_tile_m, nil, "B200 bf16: no alternative")
end

return T
