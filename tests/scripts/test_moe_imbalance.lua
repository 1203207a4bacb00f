-- tests/scripts/test_moe_imbalance.lua — load imbalance of the routed experts under expert parallelism
-- (neusight/models/moe.lua: M.expected_max_load, M.busiest_rank_rows, opts.router_skew; workload field `router_skew`):
-- the expected maximum against a Monte-Carlo of top-k routing with a fixed seed, "balanced" reproducing the builder's
-- kernels before router_skew, the default (uniform) and a factor pricing the busiest rank, and the field's errors.
local K = require "neusight.kernels"
local moe = require "neusight.models.moe"
local deepseek = require "neusight.models.deepseek"
local workload = require "neusight.workload"

local t = require("neusight.testing").bind(load_op, make_node)
local eq, raises = t.eq, require("neusight.testing").raises
local tiny = require("neusight.testing").tiny
local TINY_QWEN3, TINY_DS = tiny("qwen3_moe"), tiny("deepseek_v3")

local T = {}

-- A fixed-seed generator of its own (a 64-bit LCG, Knuth's MMIX constants; the high bits), so the Monte-Carlo is the
-- same on every Lua build whatever math.random's algorithm.
local function lcg(seed)
  local x = seed
  return function(m) -- uniform integer in 1..m
    x = x * 6364136223846793005 + 1442695040888963407
    return ((x >> 33) % m) + 1
  end
end

-- The mean over `trials` batches of the busiest rank's rows: `tokens` tokens each pick k distinct experts of E
-- uniformly (a partial Fisher–Yates shuffle), expert e lives on rank ⌈e / (E / ep)⌉.
local function monte_carlo(tokens, k, E, ep, trials, seed)
  local rand, El, sum = lcg(seed), E // ep, 0
  -- one permutation table for all tokens: perm[i] holds this token's entry only where stamp[i] is the token's number
  local perm, stamp, n, load = {}, {}, 0, {}
  for _ = 1, trials do
    for r = 1, ep do load[r] = 0 end
    for _ = 1, tokens do
      n = n + 1
      for j = 1, k do
        local x = j - 1 + rand(E - j + 1)
        local a = stamp[j] == n and perm[j] or j
        local b = stamp[x] == n and perm[x] or x
        perm[j], perm[x], stamp[j], stamp[x] = b, a, n, n
        local r = (b - 1) // El + 1
        load[r] = load[r] + 1
      end
    end
    local m = 0
    for r = 1, ep do m = math.max(m, load[r]) end
    sum = sum + m
  end
  return sum / trials
end

-- The busiest rank's rows against the Monte-Carlo: decode-sized and prefill-sized batches, Mixtral's top 2 of 8 and
-- Qwen3's top 8 of 128, 2 to 8 ranks, within 0.1 σ + 0.05 rows (σ: a rank's standard deviation). Without the
-- correction for dependent counts (independent binomials alone) the ep = 2 case misses by 0.45 rows (0.17 σ), and the
-- mean ("balanced") by 0.8 σ or more: the check can fail.
function T.test_expected_max_against_monte_carlo()
  local cases = { -- tokens over all ranks, k, E, ep, Monte-Carlo trials
    { 16, 2, 8, 2, 4000 }, { 16, 2, 8, 8, 4000 }, { 128, 2, 8, 8, 2000 }, { 512, 2, 8, 4, 1000 },
    { 64, 8, 128, 8, 1000 }, { 2048, 8, 128, 8, 200 },
  }
  for i, c in ipairs(cases) do
    local tokens, k, E, ep, trials = c[1], c[2], c[3], c[4], c[5]
    local mean = tokens * k / ep
    local sigma = math.sqrt(tokens * k / ep * (1 - 1 / ep) * (E - k) / (E - 1))
    -- busiest_rank_rows rounds to the nearest row; its unrounded value from the same parts
    local c2 = math.sqrt(ep / (ep - 1) * (E - k) / (E - 1))
    local f = mean + (moe.expected_max_load(tokens * k, 1 / ep, ep) - mean) * c2
    eq(moe.busiest_rank_rows("uniform", tokens // ep, k, E, ep), math.floor(f + 0.5), "rounded")
    local mc = monte_carlo(tokens, k, E, ep, trials, 1000 + i)
    local what = ("%d tokens, top %d of %d, ep %d: formula %.2f, Monte-Carlo %.2f, mean %.1f, sigma %.2f"):format(
      tokens, k, E, ep, f, mc, mean, sigma)
    assert(math.abs(f - mc) <= 0.1 * sigma + 0.05, "within 0.1 sigma + 0.05 rows: " .. what)
    assert(mc > mean + 0.5 * sigma, "the Monte-Carlo busiest rank is well above the mean: " .. what)
  end
  -- exact limits: one group is the mean; p = 1 puts every row in it; a known small case, max of 2 Binomial(2, 1/2):
  -- P(max = 0) = 1/16, P(max = 1) = (3/4)² − 1/16 = 1/2, P(max = 2) = 7/16 → 1/2 + 7/8 = 11/8
  eq(moe.expected_max_load(32, 0.5, 1), 16.0, "one group: the mean")
  eq(moe.expected_max_load(32, 1, 4), 32, "p = 1")
  assert(math.abs(moe.expected_max_load(2, 0.5, 2) - 11 / 8) < 1e-12, "max of two Binomial(2, 1/2) = 11/8")
end

function T.test_busiest_rank_rows()
  eq(moe.busiest_rank_rows("balanced", 8, 2, 8, 2), 16, "balanced: the mean n·k")
  eq(moe.busiest_rank_rows("uniform", 8, 2, 8, 1), 16, "one rank: no imbalance")
  eq(moe.busiest_rank_rows(nil, 8, 2, 8, 2), moe.busiest_rank_rows("uniform", 8, 2, 8, 2), "default uniform")
  eq(moe.busiest_rank_rows("uniform", 8, 2, 8, 2), 18, "16 tokens, top 2 of 8, ep 2: 18.08 (Monte-Carlo 18.04)")
  eq(moe.busiest_rank_rows(1.25, 8, 2, 8, 2), 20, "a factor: f · n·k")
  eq(moe.busiest_rank_rows(2, 8, 2, 8, 2), 32, "at most what a rank can receive: every token's k rows")
  eq(moe.busiest_rank_rows(4, 8, 2, 8, 8), 64, "one local expert: one row per token of all 8 ranks")
  raises("router_skew 100: the busiest of 2 expert-parallel ranks can receive at most 2 x the mean (each token's 2 picks "
    .. "among that rank's 4 experts); give a factor from 1 to 2", moe.busiest_rank_rows, 100, 8, 2, 8, 2)
  raises("router_skew 4.5: the busiest of 8 expert-parallel ranks can receive at most 4 x the mean (each token's 2 picks "
    .. "among that rank's 1 experts); give a factor from 1 to 4", moe.busiest_rank_rows, 4.5, 8, 2, 8, 8)
  raises("moe: router_skew must be \"uniform\", \"balanced\" or a number >= 1 (got \"unifrom\") (did you mean 'uniform'?)",
    moe.router_skew, "unifrom")
  raises("moe: router_skew must be \"uniform\", \"balanced\" or a number >= 1 (got 0.5)", moe.router_skew, 0.5)
end

local function ep_plan(ep, batch) return require("neusight.testing").ep_plan(ep, nil, batch) end

local function signature(nodes)
  local out = {}
  for _, n in ipairs(nodes) do
    local dims = {}
    for _, x in ipairs(n.inputs) do dims[#dims + 1] = table.concat(x, "x") end
    out[#out + 1] = ("%s %s %s -> %s ×%d"):format(n.op, n.name, table.concat(dims, ","), table.concat(n.output, "x"),
      n.count)
  end
  return table.concat(out, "\n")
end

-- "balanced" is the builder before router_skew: the mean n·k rows on every rank (tests/scripts/test_moe.lua and
-- test_moe_grouped.lua pin those kernels); without expert parallelism every value builds the same graph; the
-- default prices the busiest rank: its local experts and both all-to-alls carry busiest_rank_rows.
function T.test_router_skew_in_the_graph()
  local b, s = 2, 16 -- 8 experts, top 2: 64 routed rows per rank
  for _, cfg in ipairs { TINY_QWEN3, TINY_DS } do
    local build = cfg.arch == "deepseek" and deepseek.build or moe.build
    for _, impl in ipairs { "loop", "grouped" } do
      local plain = signature(build(cfg, { batch = b, seq = s, experts = impl }))
      for _, skew in ipairs { "balanced", "uniform", 3 } do
        eq(signature(build(cfg, { batch = b, seq = s, experts = impl, router_skew = skew })), plain,
          ("one GPU: router_skew %s changes nothing"):format(skew))
      end
      for _, ep in ipairs { 2, 4, 8 } do
        local function a2a_rows(skew)
          local rows = {}
          for _, n in ipairs(build(cfg, { batch = b, seq = s, ep = ep, parallel = ep_plan(ep, b * ep), experts = impl,
              router_skew = skew })) do
            if n.op == "all_to_all" then rows[#rows + 1] = n.output[1] end
          end
          return rows
        end
        local what = ("%s %s ep %d"):format(cfg.arch, impl, ep)
        eq(table.concat(a2a_rows("balanced"), ","), "64,64", what .. ": balanced, the mean")
        local busy = moe.busiest_rank_rows("uniform", b * s, 2, 8, ep)
        assert(busy > 64, what .. ": the busiest rank gets more than the mean")
        eq(table.concat(a2a_rows(nil), ","), busy .. "," .. busy, what .. ": the default is uniform")
        eq(table.concat(a2a_rows(1.5), ","), "96,96", what .. ": a factor")
      end
    end
  end
  -- the busiest rank's local experts: the grouped GEMM's rows and the loop's local expert rows
  local nodes = moe.build(TINY_QWEN3, { batch = b, seq = s, ep = 4, parallel = ep_plan(4, b * 4), experts = "grouped",
    router_skew = 1.5 })
  for _, n in ipairs(nodes) do
    if n.name:match("gate_up_proj$") then
      eq(K.describe_all((t.kernels(n, false))), "BMM(2,48,64,64)", "96 rows over 2 local experts")
    end
  end
  nodes = moe.build(TINY_QWEN3, { batch = b, seq = s, ep = 4, parallel = ep_plan(4, b * 4), router_skew = 1.5 })
  local local_rows = 0
  for _, n in ipairs(nodes) do
    if n.name:match("local_experts%.gate_proj$") then local_rows = local_rows + n.inputs[1][1] * n.attrs.per_layer end
  end
  eq(local_rows, 96, "loop: the local experts' rows add up to the busiest rank's")
end

-- The workload field: validated (a misspelling names the closest value), a factor's string as the command line gives
-- it, passed to the builder, reported where it is priced, and a no-effect warning where it is not.
function T.test_router_skew_field()
  local base = { model = "qwen3_30b_a3b", gpu = "h100", mode = "prefill", batch = 2, seq = 256, dtype = "bf16" }
  local function with(extra)
    local w = {}
    for k, v in pairs(base) do w[k] = v end
    for k, v in pairs(extra) do w[k] = v end
    return w
  end
  raises("workload: field 'router_skew' must be \"uniform\", \"balanced\" or a number >= 1 (got \"balance\") (did you mean 'balanced'?)",
    workload.normalize, with { router_skew = "balance" })
  raises("workload: field 'router_skew' must be a number >= 1 (the busiest rank's rows over the mean; got 0.9)",
    workload.normalize, with { router_skew = 0.9 })
  eq(workload.normalize(base, { router_skew = "1.25" }).router_skew, 1.25, "a factor's string as the CLI gives it")
  raises("workload: field 'router_skew' must be \"uniform\", \"balanced\" or a number >= 1 (got \"1.25\")",
    workload.normalize, with { router_skew = "1.25" }) -- a script's field is taken as written
  raises("workload: --router-skew must be \"uniform\", \"balanced\" or a number >= 1 (got \"0x10\")",
    workload.normalize, base, { router_skew = "0x10" }) -- the command line: plain decimals only, said by the flag
  local ep = with { parallel = { dp = 2, ep = 2 }, router_skew = "balanced" }
  eq(workload.build(ep, { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 }).router_skew,
    "balanced", "reported under expert parallelism")
  eq(workload.build(with {}).router_skew, nil, "not reported where nothing prices it")
  local function says(w, text)
    for _, msg in ipairs(workload.warnings(workload.normalize(w))) do
      if msg:find(text, 1, true) then return true end
    end
    return false
  end
  assert(says(with { router_skew = "uniform" }, "router_skew (--router-skew) has no effect: load imbalance is priced"),
    "one GPU: no effect")
  assert(says({ model = "llama3_8b", gpu = "h100", mode = "prefill", batch = 1, seq = 16, router_skew = 2 },
    "router_skew (--router-skew) has no effect: the llama model builder"), "dense: no effect")
  assert(not says(ep, "has no effect"), "expert parallel: in effect")
end

return T
