-- scripts/neusight/topology.lua — a validated cluster description (nodes × GPUs, intra/inter-node links) and the α–β link of a communicator group.
--
-- A cluster is two link levels: `intra` (GPU to GPU inside a node: NVLink, Infinity Fabric or PCIe)
-- and `inter` (node to node: the NIC each GPU owns). Each level has a per-direction bandwidth, a
-- per-message latency and an efficiency (the fraction of the datasheet bandwidth a collective
-- actually reaches). neusight/collectives.lua turns them into α (seconds per message step) and β
-- (seconds per byte) for the α–β cost model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005).
local floor, huge, max, min, sort = math.floor, math.huge, math.max, math.min, table.sort
local pairs, type, tostring, error, require = pairs, type, tostring, error, require

local M = {}

-- Latencies: NCCL's own tuning model (NCCL 2.18-2.21, src/graph/tuning.cc), the small-message protocol LL, the one
-- NCCL picks for the few-KB all-reduces of tensor-parallel decode. NCCL prices a collective as
--     baseLat[algorithm][protocol] + steps × hwLat[link][algorithm][protocol]
-- with, in µs:
--     baseLat  Ring { LL 6.6, LL128 14.0, Simple 8.4 }   Tree { LL 6.8, LL128 14.0, Simple 0 }
--     hwLat    NVLINK Ring { LL 0.6, LL128 1.9, Simple 3.4 }   Tree { LL 0.6, LL128 1.25, Simple 4 }
--              PCI    Ring { LL 1.0, LL128 2.5, Simple 5.7 }   Tree { LL 1.0, LL128 1.9,  Simple 4 }
--              NET    Ring { LL 2.7, LL128 4.0, Simple 14.0 }  Tree { LL 5.0, LL128 8.5,  Simple 14 }
-- The α–β model has no protocol: α is the LL ring's hwLat of the link kind (M.LINK_LATENCY_US: NVLink / NVSwitch /
-- Infinity Fabric 0.6, PCIe — P2P through a switch or the host, and a bridged part's groups beyond its bridge — 1.0,
-- the network 2.7 µs per step), and every collective NCCL's tuning prices pays the LL base once (M.base_seconds:
-- ring 6.6, tree 6.8 µs). An assumption, not a fit: calibrate a cluster's latency_us against nccl-tests where known.
M.LINK_LATENCY_US = { nvlink = 0.6, pcie = 1.0, net = 2.7 }
M.BASE_LATENCY_US = { ring = 6.6, tree = 6.8 }
local DEFAULT_INTER_LATENCY_US = M.LINK_LATENCY_US.net

--- Seconds of NCCL's fixed LL cost of one collective run by `algorithm` (M.BASE_LATENCY_US; the ring's for an
--- algorithm NCCL's table does not name, e.g. hierarchical, which NCCL runs as rings).
function M.base_seconds(algorithm)
  return (M.BASE_LATENCY_US[algorithm] or M.BASE_LATENCY_US.ring) * 1e-6
end

-- The intra-node step latency of a GPU file's link: NVLink-class for a GPU-to-GPU link, PCIe for "none".
local function intra_latency_of(gpu)
  if gpu ~= nil and (type(gpu) == "table" or type(gpu) == "userdata") and gpu.interconnect == "none" then
    return M.LINK_LATENCY_US.pcie
  end
  return M.LINK_LATENCY_US.nvlink
end

-- Default efficiencies. 0.72 is the reference's factor on NVLink/2 (method-neusight.md §1.3), kept so
-- a flat intra-node model starts from the reference's bandwidth. 0.8 on the network is our assumption
-- (protocol and NIC overheads), not a measurement: override it when nccl-tests numbers are known.
local DEFAULT_INTRA_EFFICIENCY = 0.72
local DEFAULT_INTER_EFFICIENCY = 0.8

-- One 400 Gb/s InfiniBand NDR NIC per GPU (DGX H100 layout) = 50 GB/s per direction per GPU, at most the GPU's own
-- host link (its file's pcie_bw_gbps): the NIC reaches the GPU over PCIe (GPUDirect RDMA), so an L4's or an A100's
-- PCIe 4.0 x16 (32 GB/s) caps what the network delivers to it. An assumption of the default only (inter_default): a
-- cluster's own inter.bw_gbps is taken as given.
local DEFAULT_INTER_BW_GBPS = 400 / 8

-- The maxima of a link's bw_gbps and latency_us and of gpus_per_node and nodes: a cluster file's (the engine's one
-- source, engine/core/cluster_spec.h), so that a workload's inline cluster takes the same ranges (an inline
-- latency_us = 2^62 forecast 10^11 years; gpus_per_node = 1e308 failed in the parallel report, naming no workload).
local LIMITS = require("neusight").cluster_limits()
local limit_text = require("neusight").limit_text -- "1e6", as the C++ cluster file reader prints it

-- Known keys; also the "did you mean" candidates.
local CLUSTER_KEYS = { gpu = true, gpus_per_node = true, nodes = true, intra = true, inter = true }
local LEVEL_KEYS = { bw_gbps = true, latency_us = true, efficiency = true }
local GROUP_KEYS = { size = true, spans_nodes = true, per_node = true, min_per_node = true, spans_domains = true }

---------------------------------------------------------------------------------------------------
-- "did you mean" suggestions

local did_you_mean = require("neusight").did_you_mean
local gpu_optional = require("neusight").gpu_optional -- a GPU file's optional key, nil when the file leaves it out

--- " (did you mean 'x'?)" or "" for `word` among the string keys of `keys` (shared with collectives).
M.did_you_mean = did_you_mean

---------------------------------------------------------------------------------------------------
-- Validation helpers (errors are raised at level 0 with the field path, like neusight/workload.lua)

--- A value as validation messages quote it: strings quoted, tables and functions by type, the rest by tostring
--- (shared with collectives and the parallel modules).
local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" or type(v) == "function" then return type(v) end
  return tostring(v)
end
M.show = show

--- A positive whole number (1, 2.0), finite: the one count check of the Lua rules.
function M.is_count(v)
  return type(v) == "number" and v >= 1 and v == math.floor(v) and v < math.huge
end

local function check_keys(t, allowed, where)
  local unknown = {}
  for k in pairs(t) do
    if not allowed[k] then unknown[#unknown + 1] = tostring(k) end
  end
  if #unknown > 0 then
    sort(unknown) -- report the same key first on every run (pairs order is unspecified)
    error(("%s: unknown key '%s'%s"):format(where, unknown[1], did_you_mean(unknown[1], allowed)), 0)
  end
end

local function check_count(v, where)
  if type(v) ~= "number" or v ~= floor(v) or v < 1 or v == huge then
    error(("%s: positive integer expected, got %s"):format(where, show(v)), 0)
  end
  return floor(v)
end

local function check_positive(v, where)
  if type(v) ~= "number" or not (v > 0) or v == huge then
    error(("%s: positive number expected, got %s"):format(where, show(v)), 0)
  end
  return v
end

local function check_non_negative(v, where)
  if type(v) ~= "number" or not (v >= 0) or v == huge then
    error(("%s: non-negative number expected, got %s"):format(where, show(v)), 0)
  end
  return v
end

local function check_fraction(v, where)
  if type(v) ~= "number" or not (v > 0 and v <= 1) then
    error(("%s: number in (0, 1] expected, got %s"):format(where, show(v)), 0)
  end
  return v
end

-- Intra-node per-direction bandwidth of a GPU table (gpus/*.toml). interconnect_bw_gbps is the
-- datasheet's total bidirectional figure (H100: 900 = 18 links × 50), so one direction is half of
-- it; PCIe-only parts ("none") talk over pcie_bw_gbps, which the TOMLs already give per direction.
-- Bridged parts (A100 PCIe + NVLink bridge) link only pairs (nvlink_domain_gpus): M.cluster's domain prices beyond.
local function intra_bw_of(gpu)
  if type(gpu) ~= "table" and type(gpu) ~= "userdata" then
    error(("cluster.gpu: GPU table expected, got %s"):format(show(gpu)), 0)
  end
  local kind = gpu.interconnect
  if kind == "none" then
    return check_positive(gpu.pcie_bw_gbps, "cluster.gpu.pcie_bw_gbps")
  elseif type(kind) == "string" then
    return check_positive(gpu.interconnect_bw_gbps, "cluster.gpu.interconnect_bw_gbps") / 2
  end
  error(("cluster.gpu.interconnect: string expected, got %s"):format(show(kind)), 0)
end

-- The default inter-node bandwidth per GPU and direction: DEFAULT_INTER_BW_GBPS, capped by the GPU's host link when
-- the GPU file gives one.
local function inter_default(gpu)
  local host = gpu ~= nil and gpu_optional(gpu, "pcie_bw_gbps") or nil
  if type(host) == "number" and host > 0 then return min(DEFAULT_INTER_BW_GBPS, host) end
  return DEFAULT_INTER_BW_GBPS
end

local function level(spec, where, defaults)
  if spec == nil then spec = {} end
  if type(spec) ~= "table" then error(("%s: table expected, got %s"):format(where, show(spec)), 0) end
  check_keys(spec, LEVEL_KEYS, where)
  local bw = spec.bw_gbps
  if bw == nil then
    bw = defaults.bw_gbps
    if bw == nil then
      error(("%s.bw_gbps: no default without a GPU (give cluster.gpu or %s.bw_gbps)"):format(where, where), 0)
    end
  end
  bw = check_positive(bw, where .. ".bw_gbps")
  if bw > LIMITS.bw_gbps then
    error(("%s.bw_gbps: at most %s (GB/s per direction) expected, got %s"):format(where, limit_text(LIMITS.bw_gbps),
      show(bw)), 0)
  end
  local lat = check_non_negative(spec.latency_us == nil and defaults.latency_us or spec.latency_us, where .. ".latency_us")
  if lat > LIMITS.latency_us then
    error(("%s.latency_us: at most %s (microseconds per message) expected, got %s"):format(where,
      limit_text(LIMITS.latency_us), show(lat)), 0)
  end
  return {
    bw_gbps = bw,
    latency_us = lat,
    efficiency = check_fraction(spec.efficiency == nil and defaults.efficiency or spec.efficiency,
                                where .. ".efficiency"),
  }
end

---------------------------------------------------------------------------------------------------
-- Cluster

--- A validated cluster: { gpus_per_node, nodes, intra = {bw_gbps, latency_us, efficiency}, inter = {…} }.
--- `gpu` (a gpus/*.toml table) supplies the intra bandwidth when intra.bw_gbps is not given; inter
--- defaults to one 400 Gb/s InfiniBand NIC per GPU, at most the GPU's host link (inter_default). Unknown keys are errors with a suggestion. A GPU whose bridge
--- joins fewer GPUs than a node holds (its file's nvlink_domain_gpus) adds domain = { gpus, intra }: the PCIe level
--- of the groups beyond one bridge.
---@param spec table
---@return table
function M.cluster(spec)
  if spec == nil then spec = {} end
  if type(spec) ~= "table" then error(("cluster: table expected, got %s"):format(show(spec)), 0) end
  check_keys(spec, CLUSTER_KEYS, "cluster")
  local intra_default, inter_bw = nil, DEFAULT_INTER_BW_GBPS
  if spec.gpu ~= nil and (type(spec.intra) ~= "table" or spec.intra.bw_gbps == nil) then
    intra_default = intra_bw_of(spec.gpu) -- read only when needed: a GPU view may reject missing fields
  end
  if spec.gpu ~= nil and (type(spec.inter) ~= "table" or spec.inter.bw_gbps == nil) then
    inter_bw = inter_default(spec.gpu)
  end
  local function count_at_most(v, where)
    local n = check_count(v, where)
    if n > LIMITS.count then error(("%s: at most %d expected, got %s"):format(where, LIMITS.count, show(v)), 0) end
    return math.tointeger(n) or n -- (a whole float within the limit has one)
  end
  local c = {
    gpus_per_node = count_at_most(spec.gpus_per_node == nil and 8 or spec.gpus_per_node, "cluster.gpus_per_node"),
    nodes = count_at_most(spec.nodes == nil and 1 or spec.nodes, "cluster.nodes"),
    intra = level(spec.intra, "cluster.intra", {
      bw_gbps = intra_default, latency_us = spec.gpu ~= nil and intra_latency_of(spec.gpu) or M.LINK_LATENCY_US.nvlink, efficiency = DEFAULT_INTRA_EFFICIENCY,
    }),
    inter = level(spec.inter, "cluster.inter", {
      bw_gbps = inter_bw, latency_us = DEFAULT_INTER_LATENCY_US, efficiency = DEFAULT_INTER_EFFICIENCY,
    }),
  }
  -- A bridge that joins fewer GPUs than a node holds (gpus/*.toml nvlink_domain_gpus: the A100 and H100 PCIe cards'
  -- 2-GPU NVLink bridge): its link serves only the groups inside one bridge, and a group beyond it talks over PCIe,
  -- priced as the intra level of a part without a GPU-to-GPU link (pcie_bw_gbps, the level's latency and efficiency).
  -- Only when the GPU gives the intra bandwidth: a cluster's own intra level names the node's links.
  -- (an optional key of the GPU file: the engine's read-only GPU view raises on a field the file leaves out)
  local d = intra_default ~= nil and gpu_optional(spec.gpu, "nvlink_domain_gpus") or nil
  if d ~= nil and check_count(d, "cluster.gpu.nvlink_domain_gpus") < c.gpus_per_node then
    local pcie = { bw_gbps = check_positive(spec.gpu.pcie_bw_gbps, "cluster.gpu.pcie_bw_gbps") }
    if type(spec.intra) == "table" then pcie.latency_us, pcie.efficiency = spec.intra.latency_us, spec.intra.efficiency end
    c.domain = {
      gpus = d,
      intra = level(pcie, "cluster.intra", { latency_us = M.LINK_LATENCY_US.pcie, efficiency = DEFAULT_INTRA_EFFICIENCY }),
    }
  end
  c.is_cluster = true
  return c
end

-- Accepts an already-built cluster or a spec (so callers may pass either).
local function as_cluster(cluster)
  if type(cluster) == "table" and cluster.is_cluster then return cluster end
  return M.cluster(cluster)
end
M.as_cluster = as_cluster

local function alpha_beta(l)
  return l.latency_us * 1e-6, 1 / (l.bw_gbps * 1e9 * l.efficiency)
end

--- α (seconds per message) and β (seconds per byte) of one link level of a cluster.
--- GB/s are decimal (10⁹), as on the datasheets the GPU files quote.
---@param cluster table
---@param which "intra"|"inter"
---@return number alpha, number beta
function M.level(cluster, which)
  cluster = as_cluster(cluster)
  if which ~= "intra" and which ~= "inter" then
    error(("level: 'intra' or 'inter' expected, got %s"):format(show(which)), 0)
  end
  return alpha_beta(cluster[which])
end

---------------------------------------------------------------------------------------------------
-- Communicator groups

--- A validated group { size, spans_nodes, per_node, min_per_node, nodes }. `spans_nodes` defaults to
--- size > gpus_per_node. `per_node` (the most ranks on one node) defaults to filling nodes, except that a
--- group said to span nodes yet small enough for one node has one rank per node (a pipeline
--- send/recv between stages, a data-parallel group of one rank per node). `min_per_node` (the fewest ranks on one
--- of the group's nodes: 12 ranks on 8-GPU nodes are 8 + 4) defaults to what filling nodes in order leaves on the
--- last one, size − (nodes − 1)·per_node; a node with fewer ranks drives fewer NICs. `spans_domains` (a cluster with a
--- bridge smaller than its nodes, cluster.domain): whether ranks on one node sit behind different bridges, so that
--- the node's step runs over PCIe; defaults to per_node > the bridge's GPUs.
---@param cluster table
---@param group table
---@return table
function M.group(cluster, group)
  cluster = as_cluster(cluster)
  if type(group) ~= "table" then error(("group: table expected, got %s"):format(show(group)), 0) end
  check_keys(group, GROUP_KEYS, "group")
  local size = check_count(group.size, "group.size")
  local g = cluster.gpus_per_node
  local spans = group.spans_nodes
  if spans == nil then
    spans = size > g
  elseif type(spans) ~= "boolean" then
    error(("group.spans_nodes: boolean expected, got %s"):format(show(spans)), 0)
  end
  if size > g * cluster.nodes then
    error(("group.size: %d ranks do not fit in %d node(s) of %d GPUs"):format(size, cluster.nodes, g), 0)
  end
  if not spans and size > g then
    error(("group.size: %d ranks do not fit in one node of %d GPUs (set spans_nodes = true)"):format(size, g), 0)
  end
  if spans and cluster.nodes < 2 then
    error("group.spans_nodes: the cluster has a single node", 0)
  end
  local per_node
  if group.per_node ~= nil then
    per_node = check_count(group.per_node, "group.per_node")
    if per_node > g or per_node > size then
      error(("group.per_node: %d exceeds min(group.size, gpus_per_node) = %d"):format(per_node, min(size, g)), 0)
    end
  elseif not spans then
    per_node = size
  else
    per_node = min(size, g)
    if per_node == size then per_node = 1 end
  end
  if spans and per_node == size then
    error(("group.per_node: %d ranks on one node do not span nodes"):format(per_node), 0)
  end
  local nodes = -((-size) // per_node) -- ceil: a last node may hold fewer ranks
  if nodes > cluster.nodes then
    error(("group: %d ranks at %d per node need %d nodes, the cluster has %d"):format(size, per_node, nodes, cluster.nodes), 0)
  end
  local min_per_node = size - (nodes - 1) * per_node
  if group.min_per_node ~= nil then
    min_per_node = check_count(group.min_per_node, "group.min_per_node")
    if min_per_node > per_node then
      error(("group.min_per_node: %d exceeds per_node = %d"):format(min_per_node, per_node), 0)
    elseif nodes == 1 and min_per_node ~= per_node then
      error(("group.min_per_node: %d differs from per_node = %d on one node"):format(min_per_node, per_node), 0)
    end
  end
  local spans_domains = group.spans_domains
  if spans_domains == nil then
    spans_domains = cluster.domain ~= nil and per_node > cluster.domain.gpus
  elseif type(spans_domains) ~= "boolean" then
    error(("group.spans_domains: boolean expected, got %s"):format(show(spans_domains)), 0)
  end
  return { size = size, spans_nodes = spans, per_node = per_node, min_per_node = min_per_node, nodes = nodes,
           spans_domains = spans_domains and cluster.domain ~= nil }
end

-- α and β of the node's link for group g: the bridge's, or PCIe for a group beyond the bridge.
local function intra_link(cluster, g)
  if g.spans_domains then return alpha_beta(cluster.domain.intra) end
  return M.level(cluster, "intra")
end

local function flat_link(cluster, g)
  local a_intra, b_intra = intra_link(cluster, g)
  if not g.spans_nodes then return a_intra, b_intra end
  local a_inter, b_inter = M.level(cluster, "inter")
  return max(a_intra, a_inter), max(b_intra, b_inter)
end

--- Effective α (seconds) and β (seconds per byte) of a flat algorithm over `group`: the intra link
--- inside a node; across nodes the slowest of the two levels, because every step of a flat ring or
--- pairwise exchange waits for its slowest hop.
---@param cluster table
---@param group table
---@return number alpha, number beta
function M.link(cluster, group)
  cluster = as_cluster(cluster)
  return flat_link(cluster, M.group(cluster, group))
end

--- Everything an algorithm may need (see neusight/collectives.lua): the flat link `alpha`, `beta`,
--- each level's { alpha, beta }, and the group's shape (size, spans_nodes, per_node, min_per_node, nodes).
---@param cluster table
---@param group table
---@return table
function M.links(cluster, group)
  cluster = as_cluster(cluster)
  local g = M.group(cluster, group)
  local alpha, beta = flat_link(cluster, g)
  local ai, bi = intra_link(cluster, g)
  local ae, be = M.level(cluster, "inter")
  return {
    alpha = alpha, beta = beta,
    intra = { alpha = ai, beta = bi }, inter = { alpha = ae, beta = be },
    size = g.size, spans_nodes = g.spans_nodes, per_node = g.per_node, min_per_node = g.min_per_node, nodes = g.nodes,
  }
end

return M
