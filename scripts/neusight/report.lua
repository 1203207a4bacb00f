-- scripts/neusight/report.lua — a single forecast's report: one result table, rendered as JSON, a table and CSV.
--
-- The engine hands over what only it has (engine/lua/session_report.cpp): the forecast's nodes and kernels with their
-- predicted seconds and phase totals (a plain table), the GPU, the predictor's name, the warnings and the figures. The
-- rest comes from the Lua side: what the workload says of itself (M.workload, called when the workload is built, or
-- M.graph for a reference graph, its model state included), the model state (neusight.precision state_report), the memory report
-- (neusight.memory) and a parallel run's report (neusight.parallel.report). M.result puts them into one table whose
-- fields are the JSON document: the engine writes it through its generic Lua → JSON bridge, so a field added here
-- shows up in the JSON without a C++ change. Keys keep the order of HEAD and TAIL (a field not listed follows,
-- sorted); what only the table shows (per-node rows, text lines) sits in the result's `text`, which the JSON leaves
-- out. Before the figures are computed scripts/neusight/pipeline.lua asks M.memory_warnings (the run does not fit) and
-- M.figure_inputs (what neusight.figures compute() gets of the forecast).
local ns = require "neusight"
local fmt, concat, sub = string.format, table.concat, string.sub
local ipairs, pairs, type, tostring, error, setmetatable, getmetatable, tointeger =
  ipairs, pairs, type, tostring, error, setmetatable, getmetatable, math.tointeger

local M = {}

--- JSON null (a table field that must be written as `null`, where nil would leave the key out).
M.null = setmetatable({}, { __json = "null" })
local null = M.null

local function ordered(t, keys) return setmetatable(t, { __order = keys }) end
--- An object even when empty (an empty Lua table is written as []).
local function object(t) return setmetatable(t or {}, { __order = {} }) end

local ms = 1e3

-- The JSON document's fields, in order; the figures a rule puts beside latency_ms go right after it.
local HEAD = { "neusight_version", "source", "model", "gpu", "gpu_file", "predictor", "launch", "mode", "batch", "seq",
  "context", "dtype", "kv_dtype", "weight_dtype", "attention", "fusion", "precision", "precision_convention", "optimizer",
  "optimizer_impl", "lora_rank", "lora_targets", "layers", "latency_ms" }
local TAIL = { "forward_ms", "backward_ms", "grad_accumulate_ms", "optimizer_ms", "flops", "flops_scope", "params",
  "params_scope", "trainable_params",
  "active_params",
  "experts", "router_skew", "router_skew_factor", "state_gb", "memory_gb", "memory", "fits", "kv_cache_gb", "state_bytes_per_param", "optimizer_shards",
  "expert_optimizer_shards", "parallel", "warnings",
  "figures", "ops" }
local OP_KEYS = { "name", "op", "layer", "count", "phase", "kernel", "kind", "dims", "tile", "flops", "bytes", "ms_each",
  "ms", "fused", "fused_capped" }

local function integer(x, what)
  local i = tointeger(x)
  if not i then error(fmt("report: %s must be an integer (got %s)", what, tostring(x)), 0) end
  return i
end

local function number_or_nil(x)
  if type(x) == "number" then return x + 0.0 end
  return nil
end

--- What the report shows of a workload (neusight.workload normalize()'d table `w`) and of its build: called by the
--- engine once the model is built. `facts`: source (the script, or "command line"), model (its name), state
--- (neusight.precision state_report), kv_cache_bytes, active_params, experts (workload.lua build), memory (the
--- neusight.memory report; a parallel run's replaces it once its timeline is made).
---@param w table
---@param facts table
local function kv_default_shown(w)
  if w.mode ~= "prefill" and w.mode ~= "decode" then return nil end
  local d = require("neusight.workload").kv_default(w.dtype)
  return d ~= w.dtype and d or nil
end

local function fusion_shown(v)
  local o = v and require("neusight.fusion").options(v)
  if not o then return "" end
  return o.flash_attention and "flash_attention" or "elementwise"
end

function M.workload(w, facts)
  return {
    source = facts.source, model = facts.model, mode = w.mode, batch = integer(w.batch, "batch"),
    seq = integer(w.seq, "seq"), context = w.context and integer(w.context, "context") or 0, dtype = w.dtype,
    -- the KV cache's dtype: given, else a serving phase's default where it is not the compute dtype (bf16 under fp8:
    -- neusight.workload kv_default), so that the report says it
    kv_dtype = w.kv_dtype or kv_default_shown(w) or "",
    weight_dtype = w.weight_dtype or "", precision = w.precision,
    optimizer = w.optimizer, optimizer_impl = w.optimizer_impl or "", launch = w.launch or "eager",
    state = facts.state, kv_cache_bytes = number_or_nil(facts.kv_cache_bytes),
    active_params = number_or_nil(facts.active_params),
    experts = type(facts.experts) == "string" and facts.experts or "", memory = facts.memory,
    -- the attention implementation the graph ran ("eager" | "sdpa"; "" for an imported graph): its default depends on
    -- the dtype and the model family (neusight.workload sdpa_by_default), and it moves memory and time
    attention = type(facts.attention) == "string" and facts.attention or "",
    -- the torch.compile-style fusion the graph was forecast under (neusight.fusion options of the workload's `fusion`):
    -- "elementwise" (--fusion), "flash_attention" (--flash-attention: attention blocks too), "" without; the ops'
    -- `fused` members say which kernels it made
    fusion = fusion_shown(w.fusion),
    -- each fused node's members' forward kernels, unfused (neusight.fusion apply; not shown): what neusight.pipeline
    -- prices the fused kernel against (neusight.fusion cap), which sets `fused_capped` (by node name) where it binds
    fused_members = type(facts.fused_members) == "table" and facts.fused_members or nil,
    -- LoRA fine-tuning (neusight.workload build's lora: rank, targets, trainable parameters; nil otherwise)
    lora = type(facts.lora) == "table" and facts.lora or nil,
    router_skew = facts.router_skew,  -- mixtures of experts: "uniform", "balanced" or a factor (nil otherwise)
    max_positions = number_or_nil(facts.max_positions),  -- a rotary model's position limit (serve's warning; not shown)
    -- what the model's config file says that the forecast does not read (workload.lua model_warnings; serve's
    -- warnings; not shown: predict's report has them among its warnings)
    model_warnings = type(facts.model_warnings) == "table" and facts.model_warnings or nil,
    -- a sliding-window model's serving phase: the window and its layers' share of the cache per token (workload.lua
    -- kv_cache_window; serve's paged KV accounting; not shown)
    kv_window = number_or_nil(facts.kv_window), kv_window_share = number_or_nil(facts.kv_window_share),
    hook = w.report,  -- the workload's own report fields (workload.lua `report`), added by M.result
    -- whether its graph holds the whole model (no tensor- or expert-parallel sharding asked for: M.model_params)
    whole_model = not (type(w.parallel) == "table" and M.rank_share(w.parallel)),
    -- whether its graph is one rank's microbatch under a parallel plan (workload.lua build's plan): its figures need
    -- the timeline's (M.figure_inputs; not shown)
    planned = type(facts.plan) == "table" or nil,
  }
end

--- The whole model's parameters of a workload's forecast (`f` its report fields, `params` the forecast's count),
--- what a calibration tells the measured model by (neusight.calibration model_warning): nil for a reference graph
--- (its count is the traced graph's, not the model's), a tensor- or expert-parallel layout (one rank's share) and a
--- graph without parameters.
---@param f table
---@param params number
---@return number?
function M.model_params(f, params)
  if f.whole_model ~= true or type(params) ~= "number" or not (params >= 1) then return nil end
  return params
end

--- What the report shows of a reference operator graph (predict --graph): `g` holds source, model, mode, batch, seq,
--- layers and launch. A graph runs fp32 without an optimizer under the default recipe of that (neusight.precision
--- default: pure); its model state is neusight.precision state_report of that state for the graph's `params` on a GPU
--- of `gpu_mem_gb` reporting `reported_gib` GiB in all (its file's mem_reported_gib; nil: none), with no memory report
--- covering it (the line and a warning say when the state alone does not fit neusight.memory's capacity).
---@param g table
---@param params number the graph's parameters
---@param gpu_mem_gb number
---@param reported_gib number?
function M.graph(g, params, gpu_mem_gb, reported_gib)
  local precision = require "neusight.precision"
  local dtype, mode, optimizer = "fp32", g.mode or "", "none"
  local recipe = precision.default(dtype, mode)
  local state = precision.state_of { dtype = dtype, mode = mode, optimizer = optimizer }
  local report = precision.state_report(state, params, recipe, gpu_mem_gb, true, reported_gib)
  -- the parameters are counted from a training graph's gradient accumulation rows; an inference graph has none, so
  -- its model state (and the memory and fits made from it) would read 0 GB that fits: not known (figure_inputs hands
  -- params_known to figures.lua, which says so too)
  local params_known = params > 0
  if not params_known then
    local why = mode == "train" and "its rows carry no gradient accumulation to count them from"
      or "an inference graph has no gradient accumulation to count them from"
    report.line = ("model state            not known (the graph names no parameters: %s)\n"):format(why)
    report.warning = ("the graph names no parameters (%s): its memory is not known (figures.memory_gb and fits are "
      .. "null)"):format(why)
  end
  return {
    source = g.source, model = g.model, mode = g.mode, batch = integer(g.batch, "batch"), seq = integer(g.seq, "seq"),
    context = 0, dtype = dtype, kv_dtype = "", weight_dtype = "", precision = recipe, optimizer = optimizer,
    optimizer_impl = "", launch = g.launch or "eager", layers = integer(g.layers, "layers"),
    state = report, params_known = params_known,
  }
end

-- The dims a kernel of its kind shows.
local function dims_of(k)
  local kind = k.kind
  if kind == "gemm" or kind == "bmm" then
    local d = { b = k.b, m = k.m, n = k.n, k = k.k }
    local keys = { "b", "m", "n", "k" }
    if k.weight_bytes > 0 then d.weight_bytes, keys[5] = k.weight_bytes, "weight_bytes" end  -- weight-only quantisation
    if (k.act_quant or "") ~= "" then d.act_quant, keys[#keys + 1] = k.act_quant, "act_quant" end  -- fp8 activation quantisation
    return ordered(d, keys)
  elseif kind == "attention" then
    local d = { batch = k.b, q_len = k.m, kv_len = k.k, head_dim = k.n, heads = k.rows, kv_heads = k.hidden }
    local keys = { "batch", "q_len", "kv_len", "head_dim", "heads", "kv_heads" }
    if k.kv_dtype ~= "" then d.kv_dtype, keys[7] = k.kv_dtype, "kv_dtype" end  -- a quantised KV cache
    return ordered(d, keys)
  elseif kind == "memory" or kind == "collective" then
    return object()
  end
  return ordered({ rows = k.rows, hidden = k.hidden }, { "rows", "hidden" })
end

-- The library tile a kernel runs, or null: for a GEMM the tile that priced it; where that is the alternative tile of
-- the fp32 tile switch (scripts/tiling/gemm.lua select, weights/TILE_SWITCH_RULE.md), `rule` is the rule's own tile.
local function tile_of(k)
  if k.tile_m > 0 then
    local t = ordered({ m = k.tile_m, k = k.tile_k, split = k.tile_split, library_kernel = k.tile_kernel },
      { "m", "k", "split", "library_kernel", "rule" })
    if k.rule_tile_m then
      t.rule = ordered({ m = k.rule_tile_m, k = k.rule_tile_k, split = k.rule_tile_split,
        library_kernel = k.rule_tile_kernel }, { "m", "k", "split", "library_kernel" })
    end
    return t
  elseif k.tile_elems > 0 then
    return ordered({ elems = k.tile_elems }, { "elems" })
  elseif k.tile_blocks > 0 then
    return ordered({ blocks = k.tile_blocks, flops = k.tile_flops, bytes = k.tile_bytes, library_kernel = k.tile_kernel },
      { "blocks", "flops", "bytes", "library_kernel" })
  end
  return null
end

-- Members of a fused node (attrs.fused, comma-separated, set by neusight.fusion); nil otherwise.
local function fused_members(n)
  if type(n.fused) ~= "string" then return nil end
  local out = {}
  for part in n.fused:gmatch("[^,]+") do out[#out + 1] = part end
  return #out > 0 and out or nil
end

-- The bound neusight.fusion cap put on fused node `name` of a forecast with report fields `f` ({ fused_s, members_s }:
-- the predictor's per-launch seconds of the fused kernel and of its members summed), nil where it did not bind.
local function capped_of(f, name)
  local c = type(f.fused_capped) == "table" and f.fused_capped[name]
  return type(c) == "table" and c or nil
end

-- A memory report's number `key`: a report without it is an error, never a silent 0 GB that "fits".
local function memory_number(memory, key)
  local v = memory[key]
  if type(v) ~= "number" then error(fmt("scripts/neusight/memory.lua report: '%s' must be a number", key), 0) end
  return v + 0.0
end

-- The memory report's `fits`, or whether memory_gb fits in the GPU when the report leaves it out.
local function memory_fits(memory, gpu)
  if memory.fits == nil then return memory_number(memory, "memory_gb") <= gpu.mem_gb end
  if type(memory.fits) ~= "boolean" then error("scripts/neusight/memory.lua report: 'fits' must be a boolean", 0) end
  return memory.fits
end

-- The model state on one GPU: the whole graph's, or in a parallel run the fullest stage's.
local function state_gb(f)
  local par = f.parallel
  return par and par.state_gb + 0.0 or f.state.state_gb + 0.0
end

--- The warnings of a forecast's memory: the memory report's (neusight.memory: the run does not fit), or without one
--- (predict --graph on one GPU) the model state's alone. The table says it in its memory lines; JSON readers need it.
function M.memory_warnings(f)
  local memory = f.memory
  if type(memory) == "table" then
    return { type(memory.warning) == "string" and memory.warning or nil }
  end
  return { f.state.warning }
end

--- The warnings of a parallel run's layout (neusight.parallel.report `warnings`: what the forecast runs that
--- Megatron-LM would not); none for a one-GPU run, or a parallel report without the list.
function M.layout_warnings(f)
  local par = f.parallel
  local out = {}
  if type(par) == "table" and type(par.warnings) == "table" then
    for _, w in ipairs(par.warnings) do
      if type(w) ~= "string" then error("scripts/neusight/parallel/report.lua report: 'warnings' must be strings", 0) end
      out[#out + 1] = w
    end
  end
  return out
end

--- A forecast's time and model FLOPs as the figures (and the roofline floor it is held to) read them, each given to
--- `add(key, value)`: latency_s (a parallel run's iteration, its slowest device's finish; else the kernels' sum),
--- flops_forward, flops_backward and flops_accumulate (the model's gradient accumulation: model_flops_accumulate, each local expert's times ep). `fc` the forecast's totals (total,
--- model_flops_forward, model_flops_backward, model_flops_accumulate), `par` its parallel report (iteration; nil: one GPU). M.figure_inputs and
--- neusight.figures floor_inputs (each layout search ranks, each phase serve forecasts) read them here.
function M.timing_inputs(fc, par, add)
  add("latency_s", par and par.iteration + 0.0 or fc.total)
  -- the model's work (the engine's model_flops_<phase>: the forward and backward FLOPs of the mean expert-parallel
  -- rank's rows where the graph prices the busiest one's, neusight.models.moe; a node every tensor-parallel rank runs
  -- whole once over the tp ranks, neusight.parallel.shard mark_replicated; the accumulation of a local expert's
  -- gradients times ep, neusight.workload: neusight.figures counts the accumulation once per model parameter)
  add("flops_forward", fc.model_flops_forward)
  add("flops_backward", fc.model_flops_backward)
  add("flops_accumulate", fc.model_flops_accumulate)
end

--- A parallel run's layout as the figures read it, by name in name order, each given to `add(key, value)`: its
--- parallel report's `figures` (dp, tp, pp, microbatches, distributed_optimizer, device_floor_s); none for one GPU
--- (`par` nil). M.figure_inputs and neusight.figures floor_inputs (search's layouts, serve's phases) read it here.
function M.layout_inputs(par, add)
  if not par then return end
  local keys = {}
  local figures = par.figures or {} -- a --scripts parallel report may give none
  for k in pairs(figures) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do add(k, figures[k]) end
end

--- What neusight.figures compute() is given of the forecast, as an array of { key, value } (a later key replaces an
--- earlier one): latency, the graph's FLOPs by phase, memory per GPU, the layout. scripts/neusight/pipeline.lua adds
--- the kernel families' times, the dtype's dense peak and the calibration. `fc` the forecast's totals, `gpu` { price_per_hour_usd }.
function M.figure_inputs(f, fc, gpu)
  local par = f.parallel
  if f.planned and par == nil then
    -- the graph is one rank's microbatch: without the timeline the figures would be one GPU's time for the whole
    -- global batch's tokens
    error("a parallel run's figures need its timeline: run.timeline() was not called before them (a pipeline.lua of "
      .. "--scripts may skip it only for a run on one GPU without microbatches or recomputation): the forecast is of "
      .. "one rank's microbatch, not of the global batch", 0)
  end
  local out = {}
  local function add(k, v) out[#out + 1] = { k, v } end
  add("model", f.model)
  add("mode", f.mode)
  add("batch", f.batch)
  add("seq", f.seq)
  add("dtype", f.dtype)
  M.timing_inputs(fc, par, add)
  add("flops_optimizer", fc.flops_optimizer)
  add("state_gb", state_gb(f))
  if f.params_known == false then add("params_known", false) end  -- a graph naming no parameters (M.graph)
  add("parallel", par ~= nil)
  local model_params = M.model_params(f, fc.params)  -- what a calibration's model is told by (nil: not known)
  if model_params then add("model_params", model_params) end
  if f.mode == "decode" then add("context", f.context) end
  if f.kv_cache_bytes then add("kv_cache_gb", f.kv_cache_bytes / 1e9) end
  if gpu.price_per_hour_usd > 0 then add("price_per_hour_usd", gpu.price_per_hour_usd) end
  M.layout_inputs(par, add)
  local memory = f.memory
  if type(memory) == "table" and memory.memory_gb ~= nil then  -- neusight.memory: the fullest GPU
    add("memory_gb", memory_number(memory, "memory_gb"))
    add("fits", memory_fits(memory, gpu))
  end
  return out
end

--- A comparison row's inputs (predict with list-valued flags) by name: the workload as the forecast ran it, its
--- layout 1 x 1 x 1 on one GPU; context only in decode.
function M.row(f, gpu)
  local par = f.parallel and f.parallel.json
  local function layout(k) return par and integer(par[k], "parallel." .. k) or 1 end
  local recompute = par and par.recompute or "none"
  if type(recompute) ~= "string" then error("report: parallel.recompute must be a string", 0) end
  return { model = f.model, gpu = gpu.name, mode = f.mode, dtype = f.dtype, batch = f.batch, seq = f.seq,
    context = f.mode == "decode" and f.context or nil, dp = layout("dp"), tp = layout("tp"), pp = layout("pp"),
    ep = layout("ep"), microbatches = layout("microbatches"), recompute = recompute,
    zero = par and par.zero ~= nil and integer(par.zero, "parallel.zero") or 0 }
end

--- The workload in one line (what a calibration file notes it was fitted on).
function M.summary(f)
  local par = f.parallel and f.parallel.json
  return fmt("%s %s %s batch %d", f.model, f.mode, f.dtype, f.batch)
    .. (f.mode == "decode" and fmt(" context %d", f.context) or fmt(" seq %d", f.seq))
    .. (par and fmt(" dp %d tp %d pp %d", integer(par.dp, "parallel.dp"), integer(par.tp, "parallel.tp"),
      integer(par.pp, "parallel.pp")) or "")
end

--- The share of the model one rank's graph holds under layout `p` (a parallel table or report json: tp, ep, each 1
--- when absent): nil for the whole model (tp = ep = 1), else which tensor- and/or expert-parallel rank it is. The one
--- "tp or ep > 1" rule: the report's whole_model, params_scope and serve's params_scope ask it.
---@param p { tp?: integer, ep?: integer }
---@return string?
function M.rank_share(p)
  local tp, ep = (p.tp or 1) > 1, (p.ep or 1) > 1
  if not tp and not ep then return nil end
  return tp and ep and "one tensor- and expert-parallel rank" or tp and "one tensor-parallel rank"
    or "one expert-parallel rank"
end

--- What a parallel run's `params` counts (`j` its neusight.parallel.report json): "whole model" with tp = ep = 1, else
--- one tensor- and/or expert-parallel rank's share (M.rank_share) summed over all pipeline stages (a stage's own is
--- parallel.devices[i].params).
function M.params_scope(j)
  local share = M.rank_share(j)
  return share and share .. ", all pipeline stages" or "whole model"
end

--- What a parallel run's `flops` counts (`j` its neusight.parallel.report json; `stepped` whether the graph has an
--- optimizer step): its graph's, one microbatch through all pipeline stages of one rank (M.rank_share; the whole model
--- at tp = ep = 1), and that rank's whole optimizer step, not the iteration (figures.model_flops is that).
function M.flops_scope(j, stepped)
  return fmt("one microbatch%s through all pipeline stages, %s%s",
    math.type(j.micro_batch) == "integer" and fmt(" of %d", j.micro_batch) or "", M.rank_share(j) or "whole model",
    stepped and ", and its whole optimizer step" or "")
end
-- A copy of report value `v` (tables copied in depth, raw: no metamethods run; a table met again is the same copy), for
-- the report function's check: what it changes deep inside a field is as much a change as replacing the field.
local function snapshot(v, copies)
  if type(v) ~= "table" then return v end
  if copies[v] then return copies[v] end
  local c = {}
  copies[v] = c
  for k, x in next, v do c[k] = snapshot(x, copies) end
  return c
end

-- The path ("ops[1].ms") of the first difference between a snapshot and the value now, or nil when none.
local function first_change(was, now, path, seen)
  if type(was) ~= "table" or type(now) ~= "table" then
    if was == now or (was ~= was and now ~= now) then return nil end -- NaN stays NaN
    return path
  end
  if seen[now] then return nil end
  seen[now] = true
  local keys = {}
  for k in next, was do keys[#keys + 1] = k end
  for k in next, now do
    if rawget(was, k) == nil then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "number" or type(a) == "string") then return a < b end
    return type(a) < type(b)
  end)
  for _, k in ipairs(keys) do
    local sub = math.type(k) == "integer" and ("%s[%d]"):format(path, k) or path .. "." .. tostring(k)
    local p = first_change(rawget(was, k), rawget(now, k), sub, seen)
    if p then return p end
  end
  return nil
end


-- What neusight.launch's function `fn` says of `vendor`, or `neutral` where the module has no such function (a --scripts
-- launch.lua written before it): the one fallback for launch.lua's vendor words. `launch` the module (default: required).
local function launch_word(fn, neutral, vendor, launch)
  launch = launch or require "neusight.launch"
  return type(launch[fn]) == "function" and launch[fn](vendor) or neutral
end

--- What a graph replay is on a GPU of `vendor`, in the table's launch note: neusight.launch graph_name's words ("a
--- HIP-graph (hipGraph) replay" on AMD); a --scripts launch.lua written before graph_name has none: vendor-neutral.
--- The one wording: the engine's --overhead message reads it here (engine/lua/session_hooks.cpp). `launch` the module
--- (default: required).
---@param vendor string?
---@param launch table?
function M.graph_replay(vendor, launch)
  return launch_word("graph_name", "graph replay", vendor, launch)
end

--- The GPU runtime of `vendor` ("CUDA", "HIP" on AMD), whose context the memory line leaves out
--- (neusight.memory line): neusight.launch runtime_name's word; a --scripts launch.lua written before runtime_name has
--- none: vendor-neutral ("GPU runtime"). `launch` the module (default: required).
---@param vendor string?
---@param launch table?
function M.runtime_name(vendor, launch)
  return launch_word("runtime_name", "GPU runtime", vendor, launch)
end

--- The single forecast's result table: `f` the report fields (M.workload or M.graph, with `parallel` the parallel
--- report when there is one and `memory` the memory report), `fc` the engine's forecast (nodes, kernels, totals in
--- seconds), `x` what the engine adds: gpu { name, vendor, file, mem_gb }, predictor, warnings, figures (an array of
--- { key, value, top }, value nil when not available) and figure_lines.
function M.result(f, fc, x)
  local par = f.parallel
  local keys = {}
  for _, k in ipairs(HEAD) do keys[#keys + 1] = k end
  local r = {
    neusight_version = ns.version, source = f.source, model = f.model, gpu = x.gpu.name, gpu_file = x.gpu.file,
    predictor = x.predictor, mode = f.mode, batch = f.batch, seq = f.seq, dtype = f.dtype, precision = f.precision,
    precision_convention = f.state.convention, optimizer = f.optimizer, optimizer_impl = f.optimizer_impl,
    layers = f.layers,
  }
  -- the launch mode: always in serving phases, elsewhere only when it is not the default
  if f.launch ~= "eager" or f.mode == "prefill" or f.mode == "decode" then r.launch = f.launch end
  if f.mode == "decode" then r.context = f.context end
  if f.kv_dtype ~= "" and f.kv_dtype ~= f.dtype then r.kv_dtype = f.kv_dtype end
  if f.weight_dtype ~= "" then r.weight_dtype = f.weight_dtype end
  if (f.attention or "") ~= "" then r.attention = f.attention end
  if (f.fusion or "") ~= "" then r.fusion = f.fusion end
  -- A parallel run's latency is its iteration on the slowest device; the phase sums are then those of one microbatch
  -- through the whole (tp-sharded) model, serially — the timeline's inputs.
  r.latency_ms = (par and par.iteration or fc.total) * ms
  local figures, figure_keys = {}, {}
  for _, fig in ipairs(x.figures) do  -- the uncertainty band's latency_ms_p10 / p50 / p90 go beside latency_ms
    local v = fig.value
    if v == nil then v = null end
    if fig.top then
      if r[fig.key] == nil then keys[#keys + 1] = fig.key end
      r[fig.key] = v
    else
      if figures[fig.key] == nil then figure_keys[#figure_keys + 1] = fig.key end
      figures[fig.key] = v
    end
  end
  for _, k in ipairs(TAIL) do keys[#keys + 1] = k end
  r.forward_ms = fc.forward * ms
  -- backward_ms includes gradient accumulation (the reference's "bwall"); grad_accumulate_ms is that part.
  r.backward_ms = (fc.backward + fc.accumulate) * ms
  r.grad_accumulate_ms = fc.accumulate * ms
  r.optimizer_ms = fc.optimizer * ms
  r.flops = fc.flops
  r.params = fc.params
  -- A parallel run's graph is one rank's: params counts its tp shard (and, under expert parallelism, its E / ep local
  -- experts) over every pipeline stage. params_scope says which, in every parallel run (a one-GPU run's JSON, whose
  -- params is the whole model, is left as it was: no field means the whole model).
  if par then r.params_scope = M.params_scope(par.json) end
  -- and flops that rank's microbatch (flops_scope; a one-GPU run without a plan: the whole run, no field)
  if par then r.flops_scope = M.flops_scope(par.json, (fc.flops_optimizer or 0) > 0) end
  r.active_params = f.active_params  -- mixtures of experts: a token's share of params
  if f.lora then -- LoRA: its rank, the targeted linears and the adapters' parameters (the rest frozen)
    r.lora_rank, r.lora_targets, r.trainable_params = f.lora.rank, f.lora.targets, f.lora.trainable
  end
  if f.experts ~= "" then r.experts = f.experts end  -- and how their experts ran
  -- and the load imbalance their expert parallelism assumed, in one shape whatever was asked: router_skew is always
  -- a string ("uniform", "balanced" or "factor") and router_skew_factor the number given, with "factor" only (a
  -- script reading the JSON never finds a number in one run and a string in another)
  if f.router_skew ~= nil then
    if type(f.router_skew) == "number" then
      r.router_skew, r.router_skew_factor = "factor", f.router_skew
    else
      r.router_skew = tostring(f.router_skew)
    end
  end
  -- per GPU: in a parallel run the largest pipeline stage's tp shard
  r.state_gb = state_gb(f)
  local memory = f.memory
  if type(memory) == "table" then  -- neusight.memory: the peak of the fullest GPU and its parts, every mode
    r.memory_gb = memory_number(memory, "memory_gb")
    r.memory = memory.memory or object()
    r.fits = memory_fits(memory, x.gpu)
  end
  -- serving phases: the KV cache one GPU holds
  if f.kv_cache_bytes then r.kv_cache_gb = f.kv_cache_bytes / 1e9 end
  -- the recipe's bytes per parameter (neusight.precision); on one GPU state_gb = params x their sum. A parallel run's
  -- state_gb is its fullest GPU's: that stage's parallel.devices[i].params x (weights + gradients + (master +
  -- optimizer_state) / optimizer_shards), the distributed optimizer splitting the last two over dp (written in every
  -- parallel run, as params_scope; an older --scripts parallel report without it: not written). Under expert
  -- parallelism (ep > 1) the stage's parallel.devices[i].expert_params split theirs over expert_optimizer_shards
  -- (dp / ep) instead.
  r.state_bytes_per_param = f.state.bytes_per_param
  if par and math.type(par.optimizer_shards) == "integer" then r.optimizer_shards = par.optimizer_shards end
  if par and math.type(par.expert_optimizer_shards) == "integer" then
    r.expert_optimizer_shards = par.expert_optimizer_shards
  end
  if par then r.parallel = par.json end  -- neusight.parallel.report, as it is
  r.warnings = x.warnings
  r.figures = ordered(figures, figure_keys)
  local ops = {}
  for i, k in ipairs(fc.kernels) do
    local n = fc.nodes[k.node]
    ops[i] = ordered({ name = n.name, op = n.op, layer = n.layer, count = n.count, phase = k.phase, kernel = k.name,
      kind = k.kind, dims = dims_of(k), tile = tile_of(k), flops = k.flops, bytes = k.bytes,
      ms_each = k.seconds_each * ms, ms = k.seconds * ms, fused = fused_members(n),
      -- priced as its members summed, unfused, which the fused kernel's own price exceeded (neusight.fusion cap)
      fused_capped = (k.phase == "forward" and capped_of(f, n.name)) and true or nil }, OP_KEYS)
  end
  r.ops = ops
  -- what only the table shows
  r.text = { nodes = fc.nodes, kernels = fc.kernels, total_ms = fc.total * ms, gpu_file = x.gpu.file, gpu_vendor = x.gpu.vendor,
    fields = f,  -- the fused lines' bound (capped_of)
    state_line = f.state.line, parallel_table = par and par.table, figure_lines = x.figure_lines or {},
    memory_lines = type(memory) == "table" and memory.lines or nil,
    -- and what the JSON alone adds, made when it is written (format_json): a parallel run's op-by-op timeline
    parallel_timeline = par and type(par.timeline) == "function" and par.timeline or nil }
  ordered(r, keys)
  if f.hook then  -- the workload's own fields: after the report's, sorted
    local own, names, before = {}, {}, {}
    for k, v in pairs(r) do own[k], names[#names + 1] = v, k end
    table.sort(names)  -- the first changed field by name: the same message every run
    local copies = {}
    for _, k in ipairs(names) do before[k] = snapshot(own[k], copies) end
    f.hook(r)
    -- it adds fields; one that replaced or removed the report's (latency_ms, warnings, …), or changed what is in one
    -- (r.ops[1].ms = 0), would make the JSON say something else than the forecast and the table
    for _, k in ipairs(names) do
      local path = r[k] ~= own[k] and k or first_change(before[k], own[k], k, {})
      if path then
        error(fmt("%s: the workload's report function changed the report's field '%s': it may only add fields",
          f.source, path), 0)
      end
    end
    -- what it adds is JSON (numbers, strings, booleans, tables of them), checked here so that every format refuses it
    -- with the script's name, not only the JSON writer without it
    local function json_check(v, path, depth)
      local t = type(v)
      if t == "table" then
        if depth > 64 then error(fmt("%s: report.%s nests deeper than 64 tables (a cycle?)", f.source, path), 0) end
        for k2, v2 in pairs(v) do
          if type(k2) ~= "string" and math.type(k2) ~= "integer" then
            error(fmt("%s: report.%s has a %s key: JSON keys are strings (or array indices)", f.source, path, type(k2)), 0)
          end
          json_check(v2, path .. "." .. tostring(k2), depth + 1)
        end
      elseif t ~= "number" and t ~= "string" and t ~= "boolean" then
        error(fmt("%s: report.%s is a %s, not a JSON value (a number, string, boolean or table)", f.source, path, t), 0)
      end
    end
    for k, v in pairs(r) do
      if own[k] == nil then
        if type(k) ~= "string" then
          error(fmt("%s: the workload's report function added a %s key: field names are strings", f.source, type(k)), 0)
        end
        json_check(v, k, 1)
      end
    end
  end
  return r
end

-- Every field of a result but `text`, in the result's order.
local function document(r)
  local doc = {}
  for k, v in pairs(r) do
    if k ~= "text" then doc[k] = v end
  end
  return setmetatable(doc, getmetatable(r))
end

--- The JSON document of a result: every field but `text`, in the result's order, and in a parallel run
--- parallel.timeline (neusight.parallel.report timeline_json: every op's start and end, O(ops), so built here, when
--- the JSON or the --report page asks, and not in the table, the CSV, a comparison or a search), after the plan's
--- other fields.
function M.format_json(r)
  local doc = document(r)
  local timeline = r.text and r.text.parallel_timeline
  if timeline and type(doc.parallel) == "table" then
    local p = {}
    for k, v in pairs(doc.parallel) do p[k] = v end
    p.timeline = timeline()
    local mt = getmetatable(doc.parallel)
    if mt and type(mt.__order) == "table" then -- its keys in their order, then the timeline
      local order = {}
      for i, k in ipairs(mt.__order) do order[i] = k end
      order[#order + 1] = "timeline"
      ordered(p, order)
    end
    doc.parallel = p
  end
  return doc
end

--- A text cell of every CSV the scripts write (report, compare, search, sweep, catalog: each calls this one): quoted,
--- its quotes doubled, when it holds a comma, a quote, a line feed or a carriage return (RFC 4180; a bare \r had ended
--- the row for a reader that takes CRLF or CR as a line end). engine/cli/report.cpp csv_field is the C++ commands' twin.
---@param s any (tostring)
---@return string
local function csv_field(s)
  s = tostring(s)
  if not s:find('[,"\n\r]') then return s end
  return '"' .. s:gsub('"', '""') .. '"'
end
M.csv_field = csv_field

--- A number as every CSV writes it: integers as such, a float in the fewest significant digits (15 to 17) that read
--- back as the same double, the digits the JSON output gives (12.29, not %.17g's 12.289999999999999).
---@param v number
---@return string
local function number_csv(v)
  if math.type(v) == "integer" then return fmt("%d", v) end
  for digits = 15, 16 do
    local s = fmt("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
  return fmt("%.17g", v)
end
M.number_csv = number_csv

--- A table's keys in the order the JSON writer (engine/lua/wrap_json.cpp) writes them: its metatable's __order (those
--- the table has, once each), then the others sorted by tostring.
---@param t table
---@return any[]
function M.keys_in_order(t)
  local mt = getmetatable(t)
  local order = mt and type(mt.__order) == "table" and mt.__order or {}
  local keys, first = {}, {}
  for _, k in ipairs(order) do
    if t[k] ~= nil and not first[k] then keys[#keys + 1], first[k] = k, true end
  end
  local rest = {}
  for k in pairs(t) do
    if not first[k] then rest[#rest + 1] = k end
  end
  table.sort(rest, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(rest) do keys[#keys + 1] = k end
  return keys
end

-- A JSON value `v` at dotted path `path` as the JSON writer (engine/lua/wrap_json.cpp) lays it out, each scalar given
-- to `add(path, value)` in the document's order: an array's items as path.0, path.1, … (0-based, as serve's CSV
-- writes JSON pointers), an object's fields in its __order then sorted, JSON null (M.null, a non-finite number) and an
-- empty array or object as nil.
local function flatten(v, path, add)
  if type(v) == "number" and v ~= v or v == math.huge or v == -math.huge then return add(path, nil) end
  if type(v) ~= "table" then return add(path, v) end
  if v == null then return add(path, nil) end
  local mt = getmetatable(v)
  local order = mt and mt.__order
  local n, count, array = #v, 0, order == nil
  for k in pairs(v) do
    count = count + 1
    if math.type(k) ~= "integer" or k < 1 or k > n then array = false end
  end
  if count == 0 then return add(path, nil) end
  local function at(k) return path == "" and tostring(k) or path .. "." .. tostring(k) end
  if array and count == n then
    for i = 1, n do flatten(v[i], at(i - 1), add) end
    return
  end
  for _, k in ipairs(M.keys_in_order(v)) do flatten(v[k], at(k), add) end
end

-- A summary row's value cell: numbers as number_csv writes them, booleans true/false, nil (JSON null) empty.
local function value_csv(v)
  if v == nil then return "" end
  if type(v) == "number" then return number_csv(v) end
  if type(v) == "boolean" then return v and "true" or "false" end
  return csv_field(v)
end

-- A parallel run's iteration as rows of the `ms` column, each { name, part, ms }: the op rows' sum taken back out
-- (they are one microbatch through every stage of one tp shard and the whole unsharded optimizer step: no GPU's
-- iteration), the critical device's parts (parallel.devices[critical_stage], the busiest: compute, the communication
-- it does not hide (tp_comm less tp_comm_hidden, ep_comm, p2p, dp_exposed), its optimizer step, its bubble; the whole parallel.exposed_comm_ms when the report lists no
-- devices) and what is left of latency_ms (other: 0 but for rounding, or where the parts overlap). Σ ms over the op rows and these is
-- latency_ms. nil for one GPU: the op rows' ms sum to latency_ms.
local function iteration_rows(r, ops_ms)
  local p = r.parallel
  if type(p) ~= "table" then return nil end
  local rows = { { "ops", "ops", -ops_ms } }
  local crit = type(p.devices) == "table" and math.type(p.critical_stage) == "integer" and p.devices[p.critical_stage + 1]
  local parts = crit
    and { { "compute", "compute_ms" }, { "tp_comm", "tp_comm_ms" }, { "tp_comm_hidden", "tp_comm_hidden_ms", -1 },
          { "ep_comm", "ep_comm_ms" }, { "p2p", "p2p_ms" },
          { "dp_exposed", "dp_exposed_ms" }, { "optimizer", "optimizer_ms" }, { "bubble", "bubble_ms" } }
    or { { "compute", "compute_ms" }, { "exposed_comm", "exposed_comm_ms" }, { "optimizer", "optimizer_ms" },
         { "bubble", "bubble_ms" } }
  local from = crit or p
  local prefix = crit and fmt("parallel.devices.%d.", p.critical_stage) or "parallel."
  local sum = 0.0
  for _, part in ipairs(parts) do
    local v = from[part[2]]
    -- tp_comm_hidden_ms: the part of tp_comm_ms under weight-gradient GEMMs, taken back out (negative; no row at 0)
    if part[3] and v == 0 then v = nil end
    if type(v) == "number" then
      v = v * (part[3] or 1)
      rows[#rows + 1] = { prefix .. part[2], part[1], v + 0.0 }
      sum = sum + v
    end
  end
  rows[#rows + 1] = { "other", "other", r.latency_ms - sum }
  return rows
end

local CSV_HEADER = "name,op,layer,count,phase,kernel,kind,b,m,n,k,rows,hidden,flops,bytes,ms_each,ms,section,value\n"

--- The CSV: one line per kernel (section `op`: its node, phase, dims — 0 where the kind has none — and times), then in
--- a parallel run the rows that make its iteration out of them (section `iteration`: iteration_rows above; the `ms`
--- column summed over every line is latency_ms), then every other field of the JSON document, one line each (section
--- `summary`: `name` its dotted path — latency_ms, memory_gb, fits, figures.mfu, parallel.devices.0.bubble_ms,
--- warnings.0 —, `value` its value; 0 in the numeric columns, so the ms column's sum stays the latency).
function M.format_csv(r)
  local out = { CSV_HEADER }
  local nodes = r.text.nodes
  local ops_ms = 0.0
  for _, k in ipairs(r.text.kernels) do
    local n = nodes[k.node]
    out[#out + 1] = fmt("%s,%s,%s,%d,%s,%s,%s,%d,%d,%d,%d,%d,%d,%s,%s,%s,%s,op,\n", csv_field(n.name),
      csv_field(n.op), csv_field(n.layer), n.count, k.phase, csv_field(k.name), k.kind, k.b, k.m, k.n, k.k, k.rows,
      k.hidden, number_csv(k.flops), number_csv(k.bytes), number_csv(k.seconds_each * ms), number_csv(k.seconds * ms))
    ops_ms = ops_ms + k.seconds * ms
  end
  for _, row in ipairs(iteration_rows(r, ops_ms) or {}) do
    local v = number_csv(row[3])
    out[#out + 1] = fmt("%s,%s,,1,,,,0,0,0,0,0,0,0,0,%s,%s,iteration,\n", csv_field(row[1]), row[2], v, v)
  end
  local doc = document(r)
  doc.ops = nil
  flatten(doc, "", function(path, v)
    out[#out + 1] = fmt("%s,,,0,,,,0,0,0,0,0,0,0,0,0,0,summary,%s\n", csv_field(path), value_csv(v))
  end)
  return concat(out)
end

--- What a parallel run's optimizer_ms (the graph's step: one tp rank's parameters over all pipeline stages,
--- unsharded, as its op rows) is next to what each GPU runs (parallel.devices[].optimizer_ms: the timeline's share by
--- its stage's parameters, over optimizer_shards under the distributed optimizer, an expert's over
--- expert_optimizer_shards), for the table's optimizer line:
--- "" when they are the same (one GPU, pp = 1 without the distributed optimizer) or there is no step.
---@param r table M.result's table
function M.step_scope(r)
  local p = r.parallel
  if not (p and r.optimizer_ms > 0 and type(p.devices) == "table" and #p.devices > 0) then return "" end
  -- the layout decides (the devices' shares are the step's time times a ratio, rounded otherwise than the total)
  local shards, pp = r.optimizer_shards or 1, p.pp or 1
  local expert = r.expert_optimizer_shards or shards
  local why = {}
  if pp > 1 then why[#why + 1] = fmt("split over pp %d by its stage's parameters", pp) end
  if shards > 1 then
    why[#why + 1] = fmt("sharded over dp %d%s (distributed optimizer)", shards,
      expert ~= shards and fmt(", the experts' over dp / ep = %d", expert) or "")
  end
  if #why == 0 then return "" end
  local most = 0
  for _, d in ipairs(p.devices) do most = math.max(most, d.optimizer_ms) end
  return fmt("   (the whole step of one tp shard, all stages; each GPU steps %s%.3f ms: %s; "
    .. "parallel.devices[].optimizer_ms)", pp > 1 and "at most " or "", most, concat(why, ", "))
end

--- The table people read: the run, time per node and phase, fused kernels, the phase totals, the layout (parallel),
--- parameters, KV cache, model state, memory and the figures' lines.
function M.format_table(r)
  local t = r.text
  local out = {}
  local function add(s) out[#out + 1] = s end
  add(fmt("model     %s  (%s, batch %d, %s, %s%s%s%s%s)\n", r.model, r.mode, r.batch,
    r.mode == "decode" and fmt("context %d + 1 new token", r.context) or fmt("seq %d", r.seq), r.dtype,
    r.precision == "pure" and "" or " " .. r.precision, (r.attention and ", " .. r.attention .. " attention" or "")
      .. (r.fusion == "flash_attention" and ", fused (torch.compile-style + FlashAttention blocks)"
        or r.fusion == "elementwise" and ", fused (torch.compile-style)" or ""),
    r.mode == "train" and ", optimizer " .. r.optimizer .. (r.optimizer_impl == "" and "" or " (" .. r.optimizer_impl .. ")")
      or "",
    r.layers and fmt(", %d layers", r.layers) or ""))
  add(fmt("gpu       %s  (%s)\n", r.gpu, r.gpu_file))
  add(fmt("predictor %s%s\n\n", r.predictor,
    r.launch == "graph" and "  (launch graph: " .. M.graph_replay(t.gpu_vendor) .. ", scripts/neusight/launch.lua)" or ""))

  -- Per node, in graph order: forward, backward (incl. gradient accumulation) and optimizer-step time.
  local fw, bw, step = {}, {}, {}
  for i = 1, #t.nodes do fw[i], bw[i], step[i] = 0.0, 0.0, 0.0 end
  for _, k in ipairs(t.kernels) do
    local i, s = k.node, k.seconds * ms
    if k.phase == "forward" then fw[i] = fw[i] + s
    elseif k.phase == "optimizer" then step[i] = step[i] + s
    else bw[i] = bw[i] + s end
  end
  local total = t.total_ms
  add(fmt("%-28s %-14s %5s %12s %12s %12s %7s\n", "node", "op", "count", "forward ms", "backward ms", "step ms", "share"))
  for i, n in ipairs(t.nodes) do
    if not (fw[i] == 0 and bw[i] == 0 and step[i] == 0) then
      add(fmt("%-28s %-14s %5d %12.4f %12.4f %12.4f %6.1f%%\n", sub(n.name, 1, 28), n.op, n.count, fw[i], bw[i], step[i],
        total > 0 and 100 * (fw[i] + bw[i] + step[i]) / total or 0.0))
    end
  end
  local fused_header = false
  for _, n in ipairs(t.nodes) do
    local members = fused_members(n)
    if members then
      if not fused_header then add("\nfused kernels (scripts/neusight/fusion.lua)\n") end
      fused_header = true
      local c = capped_of(t.fields or {}, n.name)
      add(fmt("  %s (%s): %s%s\n", n.name, n.op, concat(members, ", "), c
        and fmt("  [capped: priced as its members summed, %.4f ms each, not fused %.4f ms]", c.members_s * ms,
          c.fused_s * ms) or ""))
    end
  end
  add("\n")
  add(fmt("forward          %12.3f ms\n", r.forward_ms))
  add(fmt("backward         %12.3f ms  (of which gradient accumulation %.3f ms)\n", r.backward_ms,
    r.grad_accumulate_ms))
  add(fmt("optimizer        %12.3f ms%s\n", r.optimizer_ms, M.step_scope(r)))
  if r.parallel then
    add(fmt("sum of the above %12.3f ms   (%s; %.3g TFLOP)\n", total,
      r.flops_scope, r.flops / 1e12))
    add(t.parallel_table)  -- layout, stages, memory, state, iteration (neusight.parallel.report)
  else
    add(fmt("end to end       %12.3f ms   (%.3g TFLOP)\n", total, r.flops / 1e12))
  end
  if r.active_params then
    add(fmt("parameters       %12.3f B    of which %.3f B active per token (the routed experts it is sent to; "
      .. "attention, shared experts, embeddings in full)%s%s%s\n", r.params / 1e9, r.active_params / 1e9,
      -- A parallel run's graph is one rank's: what params_scope says (the whole model at tp = ep = 1), and under
      -- expert parallelism its E / ep local experts.
      not r.params_scope and "" or ", " .. r.params_scope
        .. ((r.parallel.ep or 1) > 1 and " (E / ep of the routed experts)" or ""),
      r.experts and "; experts: " .. r.experts or "",
      r.router_skew and "; router skew: " .. tostring(r.router_skew_factor or r.router_skew) or ""))  -- expert-parallel runs (busiest rank)
  end
  if r.kv_cache_gb then
    add(fmt("kv cache         %12.2f GB   per GPU (%s tokens per sequence%s)\n", r.kv_cache_gb,
      r.mode == "decode" and fmt("context %d + 1", r.context) or fmt("%d", r.seq),
      (r.kv_dtype and ", " .. r.kv_dtype or "") .. ((r.mode == "inference" or r.mode == "train") and ", HF's past_key_values" or "")))
  end
  if not r.parallel then  -- a parallel run's memory lines above say it per stage
    add(t.state_line)  -- neusight.precision state_report
    if t.memory_lines then
      for _, line in ipairs(t.memory_lines) do add(line .. "\n") end  -- neusight.memory
    end
  end
  for _, line in ipairs(t.figure_lines) do add(line .. "\n") end
  return concat(out)
end

return M
