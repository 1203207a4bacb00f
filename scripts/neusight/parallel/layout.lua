-- scripts/neusight/parallel/layout.lua — the rank layout of a parallel run: the plan (degrees, microbatch, cluster) and its communicator groups.
--
-- Owns where the dp × tp × pp ranks land (Megatron-LM's order: tp fastest, then dp, then pp), the cluster they run
-- on (neusight/topology.lua, from a table or a gpus/clusters/*.toml name) and the shape of each communicator group
-- (tp, dp, ep, edp and the pipeline's pair links) that neusight/collectives.lua prices.
local T = require "neusight.topology"
local precision = require "neusight.precision"
local is_count = require("neusight.parallel.config").is_count
local max, min = math.max, math.min
local ipairs, pairs, type, tostring, error, pcall = ipairs, pairs, type, tostring, error, pcall

local M = {}

-- Shape of a group of `size` ranks `stride` apart, starting at rank `first`, when ranks fill nodes
-- of g GPUs in order: { size, spans_nodes, per_node, min_per_node } for topology.group (the most and the fewest
-- ranks on one of its nodes). With `d`, the GPUs one bridge joins (cluster.domain.gpus), also spans_domains: whether
-- two of its ranks share a node but not a bridge (ranks 0 and 2 of 2-GPU pairs).
local function group_shape(size, stride, first, g, d)
  local on, bridge_of = {}, {}
  local nodes, per_node, spans_domains = 0, 0, false
  for k = 0, size - 1 do
    local rank = first + k * stride
    local node = rank // g
    if not on[node] then on[node], nodes, bridge_of[node] = 0, nodes + 1, d and rank // d end
    on[node] = on[node] + 1
    per_node = max(per_node, on[node])
    if d and rank // d ~= bridge_of[node] then spans_domains = true end
  end
  local min_per_node = per_node
  for _, c in pairs(on) do min_per_node = min(min_per_node, c) end
  local shape = { size = size, spans_nodes = nodes > 1, per_node = per_node, min_per_node = min_per_node }
  if d then shape.spans_domains = spans_domains end
  return shape
end

-- The shape of the slowest of a kind's groups (`size` ranks `stride` apart, one starting at each rank of `firsts`):
-- every group runs its collective at once and the step waits for the last, so the plan prices the one that spans
-- nodes (then the one with the fewest ranks on a node: the fewest NICs; then one beyond a bridge). With nodes of a
-- size its groups do not divide, groups differ: tp 4 on nodes of 6 GPUs keeps ranks 0-3 on a node but puts 4-7 across
-- two, which the first group alone priced over the intra-node links without a word.
local function slowest_shape(size, stride, firsts, g, d)
  local worst
  for _, first in ipairs(firsts) do
    local s = group_shape(size, stride, first, g, d)
    if not worst or (s.spans_nodes and not worst.spans_nodes)
        or (s.spans_nodes == worst.spans_nodes and (s.min_per_node < worst.min_per_node
          or (s.min_per_node == worst.min_per_node and s.spans_domains and not worst.spans_domains))) then
      worst = s
    end
  end
  return worst
end

-- The first ranks of every group of a layout (Megatron order: tp fastest, then dp, then pp; ep over consecutive dp
-- ranks, edp over the dp ranks ep apart), per kind.
local function group_firsts(p)
  local tp, dp, pp, ep = p.tp, p.dp, p.pp, p.ep
  local f = { tp = {}, dp = {}, ep = {}, edp = {} }
  for r = 0, tp * dp * pp - 1, tp do f.tp[#f.tp + 1] = r end
  for s = 0, pp - 1 do
    for j = 0, tp - 1 do
      local base = s * tp * dp + j
      f.dp[#f.dp + 1] = base
      for m = 0, dp // ep - 1 do f.ep[#f.ep + 1] = base + m * tp * ep end
      for e = 0, ep - 1 do f.edp[#f.edp + 1] = base + e * tp end
    end
  end
  return f
end

-- The groups a bridge warning names, in this order (pp's traffic: its pipeline sends; the others' collectives).
local BRIDGE_GROUPS = { tp = 1, dp = 2, ep = 3, pp = 4 }

-- The bridge warnings made, text → { key = the GPU and bridge they are of, groups = { { name, size }, … }, and what
-- bridge_text made them of }: what M.bridge_warnings_merge reads back of them (a command that forecasts many
-- layouts, search, says them as one line).
local BRIDGE_SAID = {}

-- The bridge warning of `groups` ({ { name = "tp", size = 8 }, … }, in BRIDGE_GROUPS order) on the GPU `gpu` whose
-- bridge joins `d` GPUs (cluster.domain), PCIe (`bw_gbps` per direction) beyond it; `any` (several layouts): "the tp
-- 4/8 and dp 2 groups of some layouts" instead of "tp 4 and dp 2". The one text of the rule, for one layout and many.
local function bridge_text(gpu, d, bw_gbps, groups, any)
  local names, sizes, collectives, sends = {}, {}, false, false
  for _, g in ipairs(groups) do
    if not sizes[g.name] then names[#names + 1], sizes[g.name] = g.name, {} end
    local list = sizes[g.name]
    list[#list + 1] = ("%d"):format(g.size)
    if g.name == "pp" then sends = true else collectives = true end
  end
  local traffic = collectives and sends and "collectives and pipeline sends" or sends and "pipeline sends"
    or "collectives"
  local parts = {}
  for i, name in ipairs(names) do parts[i] = name .. " " .. table.concat(sizes[name], "/") end
  local what = #parts == 1 and parts[1] or table.concat(parts, ", ", 1, #parts - 1) .. " and " .. parts[#parts]
  if any then what = ("the %s group%s of some layouts"):format(what, (#groups > 1) and "s" or "") end
  local kind = tostring(gpu.interconnect)
  local bridge = kind:match("^nvlink") and "NVLink" or kind == "infinity_fabric" and "Infinity Fabric" or kind
  local stem = tostring(gpu.source or gpu.name):match("([^/]+)%.toml$") or tostring(gpu.name)
  local tail = (" on %s: its %s bridge joins %d GPUs; %s beyond %s are priced over PCIe (%.4g GB/s per "
    .. "direction); give --cluster for your system"):format(stem, bridge, d, traffic, d == 2 and "a pair"
    or ("%d GPUs"):format(d), bw_gbps)
  local text = what .. tail
  if not BRIDGE_SAID[text] then
    -- warnings of one GPU and bridge merge (the traffic follows from the groups)
    local of = { interconnect = gpu.interconnect, source = gpu.source, name = gpu.name }
    BRIDGE_SAID[text] = { key = table.concat({ stem, bridge, d, bw_gbps }, "\1"), groups = groups,
                          merged = function(all) return bridge_text(of, d, bw_gbps, all, true) end }
  end
  return text
end

-- The warning of a tensor-parallel group of `sizes` ({ { name = "tp", size = 16 }, … }) that spans nodes of `g` GPUs:
-- its collectives (every layer's) are priced over the inter-node network (`inter` GB/s per direction), not the
-- intra-node links (`intra`). Megatron-LM keeps tp within a node (tp divides the GPUs per node); `any` (several layouts):
-- "the tp 16/32 groups of some layouts". The one text of the rule, for one layout and many (M.bridge_warnings_merge).
local function tp_nodes_text(g, intra, inter, sizes, any)
  local list = {}
  for i, s in ipairs(sizes) do list[i] = ("%d"):format(s.size) end
  local what = any and ("the tp %s groups of some layouts span"):format(table.concat(list, "/"))
    or ("tp %s spans"):format(list[1])
  local text = ("parallel: %s nodes of %d GPUs: %s tensor-parallel collectives (every layer's) are priced over the "
    .. "inter-node network (%.4g GB/s per direction), not the intra-node links (%.4g GB/s); Megatron-LM keeps tp within "
    .. "a node: keep tp a divisor of %d, its GPUs per node (--tp; search's --max-tp), or give a --cluster of larger nodes")
    :format(what, g, any and "their" or "its", inter, intra, g)
  if not BRIDGE_SAID[text] then
    BRIDGE_SAID[text] = { key = table.concat({ "tp_nodes", g, intra, inter }, "\1"), groups = sizes,
                          merged = function(all) return tp_nodes_text(g, intra, inter, all, true) end }
  end
  return text
end

-- The warning of the groups priced over PCIe because they reach beyond the GPU's bridge (its file's
-- nvlink_domain_gpus, topology.cluster's domain), or nil: without a cluster the links are guessed from the GPU file,
-- and how a server of bridged cards is wired (which pairs, which PCIe switches) is the user's to say. Every such
-- group is named (tp, dp, ep, then pp: its pipeline sends).
local function domain_warning(plan, gpu, p)
  local d = plan.cluster.domain
  local groups = {}
  for _, name in ipairs { "tp", "dp", "ep" } do
    if plan.groups[name].spans_domains then groups[#groups + 1] = { name = name, size = p[name] } end
  end
  for _, link in ipairs(plan.pp_links) do
    if link.spans_domains then groups[#groups + 1] = { name = "pp", size = p.pp }; break end
  end
  if #groups == 0 then return nil end
  return bridge_text(gpu, d.gpus, d.intra.bw_gbps, groups, false)
end

--- `warnings` (strings) with the bridge warnings this module made (the groups of a layout priced over PCIe beyond
--- the GPU's bridge) of one GPU merged into one, where the first of them was, naming every group size they named
--- ("the tp 4/8, dp 2 and pp 4 groups of some layouts on a100_pcie_80gb: …"): what a command that forecasts many layouts (search,
--- serve --sweep) says once. Its warnings of tp groups spanning nodes (tp_nodes_text) of one cluster merge alike
--- ("the tp 16/32 groups of some layouts span nodes of 8 GPUs: …"). Other warnings, and a single one, are kept as they are.
---@param warnings string[]
---@return string[]
function M.bridge_warnings_merge(warnings)
  local by_key, order = {}, {}
  for _, w in ipairs(warnings) do
    local said = BRIDGE_SAID[w]
    if said then
      local m = by_key[said.key]
      if not m then
        m = { said = said, groups = {}, seen = {}, texts = 0 }
        by_key[said.key], order[#order + 1] = m, m
      end
      m.texts = m.texts + 1
      for _, g in ipairs(said.groups) do
        local k = g.name .. " " .. g.size
        if not m.seen[k] then m.seen[k], m.groups[#m.groups + 1] = true, g end
      end
    end
  end
  local out, done = {}, {}
  for _, w in ipairs(warnings) do
    local said = BRIDGE_SAID[w]
    local m = said and by_key[said.key]
    if not m or m.texts == 1 then
      out[#out + 1] = w
    elseif not done[m] then
      done[m] = true
      table.sort(m.groups, function(a, b)
        if a.name ~= b.name then return BRIDGE_GROUPS[a.name] < BRIDGE_GROUPS[b.name] end
        return a.size < b.size
      end)
      out[#out + 1] = m.said.merged(m.groups)
    end
  end
  return out
end
M.group_shape = group_shape

--- The name of the plan's group (plan.groups) a node's parameters are replicated over, the one rule for it: an
--- expert's weights (attrs.expert) live on their expert-parallel rank only, so their replicas are that rank's
--- expert-data-parallel group "edp" (dp / ep ranks; Megatron-LM's expert_data_parallel, dp·tp / (ep·etp) with etp =
--- tp); every other parameter's are the data-parallel group "dp". The gradient buckets reduce over it
--- (neusight.parallel.timeline) and the distributed optimizer shards the master copies, moments and step over it
--- (neusight.parallel.memory optimizer_shards).
---@param node table a graph node
---@return "dp"|"edp"
function M.replica_group(node)
  local a = node.attrs
  return (type(a) == "table" and a.expert) and "edp" or "dp"
end

--- The warning of a cluster file built for other GPUs (its `gpu` key, an array of names) than the run's, or nil: the run keeps the file's
--- links (a DGX H100's NVLink for an L4 that has none), which a run on another GPU rarely means. `spec` is the cluster
--- as given (its gpus_per_node and nodes), `cluster` as built (topology.cluster).
function M.cluster_gpu_warning(source, cluster_gpu, cluster, gpu, spec)
  local ns = require "neusight"
  for _, n in ipairs(cluster_gpu) do
    if ns.gpu_named(gpu, n) then return nil end
  end
  local built_for = table.concat(cluster_gpu, " or ")
  local name = tostring(gpu.name)
  local own_ok, own = pcall(T.cluster, { gpu = gpu, gpus_per_node = spec.gpus_per_node, nodes = spec.nodes })
  local own_text = own_ok and (" (intra-node %.4g GB/s per direction)"):format(own.intra.bw_gbps) or ""
  return ("parallel.cluster: %s describes nodes of %s, not of the %s this run forecasts; its links price the "
    .. "communication (intra-node %.4g GB/s, inter-node %.4g GB/s per direction). For the %s's own links%s give "
    .. "--cluster none (or drop parallel.cluster from the workload); for nodes of %s, a cluster file of them")
    :format(source, built_for, name, cluster.intra.bw_gbps, cluster.inter.bw_gbps, name, own_text, name)
end

--- The plan of a parallel run: degrees, world size, microbatch size, the cluster (topology.cluster)
--- and the communicator groups { tp, dp, ep, edp } plus one pair group per pipeline device
--- (pp_links[k]: device k−1 → device k mod pp; the last one wraps to the first device, which interleaved
--- chunks and the tied-embedding sync use). Ranks are laid out as Megatron-LM does by default: tp varies fastest, then dp,
--- then pp, so tensor-parallel groups stay inside a node whenever tp ≤ gpus_per_node.
---@param p table normalized parallel table
---@param gpu table GPU view (gpus/*.toml fields)
--- plan.precision is the run's precision recipe (neusight.precision.recipe of w.precision, default by dtype and
--- mode; its "amp" convention is Megatron-LM's with kernels = "megatron", autocast's with "eager"): the timeline
--- reduces gradients and all-gathers parameters in its element sizes.
--- plan.gpu_mem_gb is the GPU's memory (its file's mem_gb), for the memory report's capacity. w.saves_known = false (an
--- imported reference graph, whose nodes do not say what autograd keeps for backward): plan.saves_known false, and the
--- memory report counts no saved activations and says so.
---@param w { batch: integer, dtype: string, mode: string, precision?: string, saves_known?: boolean }
---@return table
function M.plan(p, gpu, w)
  local world = p.dp * p.tp * p.pp
  local per_pipeline = p.dp * p.microbatches
  if w.batch % per_pipeline ~= 0 then
    error(("parallel: the global batch %d is not divisible by dp × microbatches = %d × %d")
      :format(w.batch, p.dp, p.microbatches), 0)
  end
  local spec, cluster_name, cluster_gpu = {}, nil, nil
  local given = p.cluster
  if type(given) == "string" then -- a TOML description: gpus/clusters/<name>.toml or a path
    local ns = require "neusight"
    if type(ns) ~= "table" or not ns.cluster_file then
      error("parallel.cluster: cluster files need the engine (neusight.cluster_file)", 0)
    end
    local file = ns.cluster_file(given)
    if file.none then -- "none" (--cluster none): the GPU's own links, as without a cluster
      given = nil
    else
      cluster_name, cluster_gpu = file.source, file.gpu
      given = { gpus_per_node = file.gpus_per_node, nodes = file.nodes, intra = file.intra, inter = file.inter }
    end
  end
  for k, v in pairs(given or {}) do spec[k] = v end
  if spec.gpu == nil then spec.gpu = gpu end
  if spec.gpus_per_node == nil then spec.gpus_per_node = min(world, 8) end
  if spec.nodes == nil and is_count(spec.gpus_per_node) then spec.nodes = -((-world) // spec.gpus_per_node) end
  local ok, cluster = pcall(T.cluster, spec)
  if not ok then error("parallel." .. tostring(cluster), 0) end
  local capacity = cluster.gpus_per_node * cluster.nodes
  if world > capacity then
    error(("parallel: dp × tp × pp = %d GPUs do not fit the cluster (%d node(s) × %d GPUs)")
      :format(world, cluster.nodes, cluster.gpus_per_node), 0)
  end
  local g = cluster.gpus_per_node
  local d = cluster.domain and cluster.domain.gpus -- a bridge smaller than the node (gpus/*.toml nvlink_domain_gpus)
  local warnings = {}
  if cluster_gpu and (type(gpu) == "table" or type(gpu) == "userdata") then
    warnings[1] = M.cluster_gpu_warning(cluster_name, cluster_gpu, cluster, gpu, spec)
  end
  local firsts = group_firsts(p)
  local plan = {
    dp = p.dp, tp = p.tp, pp = p.pp, microbatches = p.microbatches, schedule = p.schedule,
    virtual_stages = p.virtual_stages, bucket_mb = p.bucket_mb, overlap_grad_reduce = p.overlap_grad_reduce,
    kernels = p.kernels, ep = p.ep, recompute = p.recompute, sequence_parallel = p.sequence_parallel,
    zero = p.zero,
    world = world, micro_batch = w.batch // per_pipeline, training = w.mode == "train",
    dtype = w.dtype, cluster = cluster, cluster_name = cluster_name or "",
    gpu_mem_gb = (type(gpu) == "table" or type(gpu) == "userdata") and gpu.mem_gb or nil,
    saves_known = w.saves_known ~= false,
    precision = precision.recipe(w.precision, w.dtype, precision.convention(p.kernels == "megatron"), w.mode),
    groups = {
      tp = slowest_shape(p.tp, 1, firsts.tp, g, d),
      dp = slowest_shape(p.dp, p.tp, firsts.dp, g, d),
      -- experts over ep consecutive dp ranks; each expert's replicas (dp / ep of them) sync its gradients
      ep = slowest_shape(p.ep, p.tp, firsts.ep, g, d),
      edp = slowest_shape(p.dp // p.ep, p.tp * p.ep, firsts.edp, g, d),
    },
    pp_links = {},
    warnings = warnings, -- what neusight.parallel.report adds to the run's warnings
  }
  for s = 0, p.pp > 1 and p.pp - 1 or -1 do -- first rank of stage s and of the next stage (wrapping)
    local a, b = s * p.tp * p.dp, ((s + 1) % p.pp) * p.tp * p.dp
    plan.pp_links[s + 1] = { size = 2, spans_nodes = a // g ~= b // g }
    if d then plan.pp_links[s + 1].spans_domains = a // g == b // g and a // d ~= b // d end
  end
  if d then warnings[#warnings + 1] = domain_warning(plan, gpu, p) end
  if plan.groups.tp.spans_nodes then -- a tensor-parallel group across nodes, which Megatron-LM does not lay out
    warnings[#warnings + 1] = tp_nodes_text(g, cluster.intra.bw_gbps, cluster.inter.bw_gbps,
                                            { { name = "tp", size = p.tp } }, false)
  end
  return plan
end

return M
