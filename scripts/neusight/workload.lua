-- scripts/neusight/workload.lua — validates a workload table (plus CLI overrides) and expands its model into op-graph nodes.
--
-- A workload script returns a table such as
--   { model = "gpt3_27", gpu = "H100-SXM5-80GB", mode = "train", batch = 1, seq = 2048 }
-- `model` is a preset name (neusight/models/presets.lua), a config table with `arch` (built by
-- neusight/models/<arch>.lua), or a function(opts) returning the nodes of a custom model. An optional
-- `figures = function(f) … end` adds the workload's own figures to the report (neusight.figures workload_fields);
-- an optional `report = function(r) … end` gets the single forecast's result table (neusight.report) and may add
-- fields to it: they show up in the JSON (after the report's own, sorted).
local K = require "neusight.kernels"
local precision = require "neusight.precision"
local presets = require "neusight.models.presets"
local ipairs, pairs, type, tostring, error, pcall, require, setmetatable =
  ipairs, pairs, type, tostring, error, pcall, require, setmetatable

local M = {}

-- Known fields in display order (also the "did you mean" candidates), and those without a default.
local FIELDS = { "model", "gpu", "mode", "batch", "seq", "context", "optimizer", "optimizer_impl", "dtype", "precision",
  "kv_dtype", "weight_dtype", "attention", "experts", "router_skew", "loss", "fusion", "launch", "parallel", "lora_rank", "lora_targets",
  "description", "figures", "report" }
local REQUIRED = { model = true, gpu = true, mode = true, batch = true, seq = true }
--- The model builders shipped in scripts/neusight/models/ (a config table's `arch`; --scripts DIR may add others).
M.ARCHES = { "bert", "deepseek", "gpt", "llama", "moe", "opt", "switch" } -- the bundled builders (for messages; a
-- --scripts DIR adds its own as DIR/neusight/models/<arch>.lua, which require finds and this list does not name)

--- Where builder `arch` is, for messages: the bundled file's path, or the module's place on the script search path for
--- a builder of your own (--scripts DIR/neusight/models/<arch>.lua: not scripts/, which does not hold it). The one
--- wording (neusight.models.hf's messages too).
function M.builder_file(arch)
  for _, a in ipairs(M.ARCHES) do
    if a == arch then return ("scripts/neusight/models/%s.lua"):format(arch) end
  end
  return ("neusight/models/%s.lua on the script search path"):format(tostring(arch))
end
local builder_file = M.builder_file

---------------------------------------------------------------------------------------------------
-- "did you mean" suggestions

--- Closest candidate to `word` (the engine's one rule, require("neusight").closest: case-insensitive edit distance
--- within max(2, |word| / 3), a shared substring of 3+ characters — "batchsize" → "batch" — counting as 1); nil if
--- none is close.
function M.did_you_mean(word, candidates)
  return require("neusight").closest(word, candidates)
end

--- The hint for an unknown preset name: the presets it begins ("gpt3" → gpt3_13 … gpt3_175b, "llama3" → llama3_8b …),
--- else the closest name (did_you_mean).
function M.preset_hint(word, names)
  word = tostring(word):lower():gsub("[%-%.%s]", "_")
  local starts = {}
  if #word >= 3 then
    for _, n in ipairs(names) do
      if n:sub(1, #word) == word then starts[#starts + 1] = n end
    end
  end
  if #starts == 1 then return (" (did you mean '%s'?)"):format(starts[1]) end
  if #starts > 1 then return (" (did you mean one of %s?)"):format(table.concat(starts, ", ")) end
  local c = M.did_you_mean(word, names)
  return c and (" (did you mean '%s'?)"):format(c) or ""
end

--- The hint for a HuggingFace id ("meta-llama/Meta-Llama-3-8B", or its name after the "/") that a preset names as its
--- source (neusight.catalog SOURCES, the column `neusight models` prints): the preset, suggested rather than taken (a
--- source's "(= Llama-3.1-8B)" and a checkpoint's own config.json may differ from the preset's; the user picks). nil
--- when no source is that id.
function M.source_hint(given)
  local word = tostring(given):lower()
  local found = {}
  for name, source in pairs(require("neusight.catalog").SOURCES) do
    local id = source:match("^(%S+/%S+)")
    if id and (id:lower() == word or id:lower():match("/(.*)$") == word) then found[#found + 1] = name end
  end
  if #found == 0 then return nil end
  table.sort(found)
  return (" (did you mean the preset '%s'? %s is its source; to read the checkpoint's own shapes give its "
    .. "config.json or snapshot directory)"):format(table.concat(found, "' or '"), tostring(given))
end

local function hint(word, candidates)
  local c = M.did_you_mean(word, candidates)
  return c and (" (did you mean '%s'?)"):format(c) or ""
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

---------------------------------------------------------------------------------------------------
-- Validation

local show, is_count = require("neusight.topology").show, require("neusight.topology").is_count

-- Sets attrs[key] = value on node `n` in a copy of its attrs table: builders may share one table between nodes.
local function set_attr(n, key, value)
  local attrs = {}
  for k, v in pairs(n.attrs or {}) do attrs[k] = v end
  attrs[key] = value
  n.attrs = attrs
end

-- batch, seq and context: at most 2^24, so that tokens × features stay exact in a double and no count wraps
local MAX_SIZE = 1 << 24
M.MAX_SIZE = MAX_SIZE -- serve's lengths (neusight.serve length_spec) are bounded by it too
local function size_check(v)
  if not is_count(v) then return ("must be a positive integer (got %s)"):format(show(v)) end
  if v > MAX_SIZE then return ("must be at most %d (got %s)"):format(MAX_SIZE, show(v)) end
end

local function one_of(choices)
  local quoted = {}
  for i, c in ipairs(choices) do quoted[i] = ('"%s"'):format(c) end
  local text = table.concat(quoted, ", ", 1, #quoted - 1) .. " or " .. quoted[#quoted]
  return function(v)
    for _, c in ipairs(choices) do
      if v == c then return nil end
    end
    return ("must be %s (got %s)%s"):format(text, show(v), type(v) == "string" and hint(v, choices) or "")
  end
end

-- What people call the precision recipes elsewhere (--precision mixed: PyTorch's "automatic mixed precision"), each
-- suggested by an error, never taken for the recipe. Names that do not say which recipe is meant get words instead of
-- a guess: "full" precision is fp32 to PyTorch users (the dtype, not the recipe: 'pure' at --dtype bf16 keeps bf16),
-- and "none" may mean the default (amp when training in 16 bits) as well as no mixed precision.
local PRECISION_ALIASES = { mixed = "amp", mixed_precision = "amp", autocast = "amp", fp16_mixed = "amp",
  bf16_mixed = "amp",
  full = "full precision (fp32) is the compute dtype, --dtype fp32 (whose recipe is 'pure'); 'pure' keeps the whole "
    .. "state in the dtype given",
  none = "leave it out for the default (amp when training in fp16, bf16 or fp8, else pure), or 'pure' for no mixed "
    .. "precision" }

-- Field → validator returning an error fragment ("must be …") or nil when the value is fine.
local CHECK = {
  model = function(v)
    if type(v) == "string" then
      if presets[v] then return nil end
      local names = sorted_keys(presets)
      return ("names an unknown model preset %s%s; presets: %s (neusight models lists them)"):format(show(v),
        M.source_hint(v) or M.preset_hint(v, names), table.concat(names, ", "))
    elseif type(v) == "table" then
      -- the name is the report's model name (a table there used to print as "table: 0x…", exit 0)
      if v.name ~= nil and (type(v.name) ~= "string" or v.name == "") then
        return ("table field 'name' must be a non-empty string (got %s)"):format(show(v.name)), "name"
      end
      if type(v.arch) == "string" and v.arch:match("^[%w_]+$") then
        -- a builder that exists ("gtp" used to end in require's "module 'neusight.models.gtp' not found" at
        -- workload.lua's line); one that fails to load raises its own error
        local ok, builder = pcall(require, "neusight.models." .. v.arch)
        if ok and type(builder) == "table" and type(builder.build) == "function" then return nil end
        if not ok and not tostring(builder):find("module 'neusight.models." .. v.arch .. "' not found", 1, true) then
          error(builder, 0)
        end
        if ok then
          return ("table field 'arch' = %q: %s is not a model builder (no build function); bundled builders: %s")
            :format(v.arch, builder_file(v.arch), table.concat(M.ARCHES, ", ")), "arch"
        end
        return ("table field 'arch' = %q names no model builder (no %s)%s; bundled builders: %s")
          :format(v.arch, builder_file(v.arch), hint(v.arch, M.ARCHES), table.concat(M.ARCHES, ", ")), "arch"
      end
      return ("table needs a string 'arch' naming a builder in neusight/models/ (got %s)"):format(show(v.arch)),
        v.arch ~= nil and "arch" or nil
    elseif type(v) == "function" then
      return nil
    end
    return ("must be a preset name, a config table or a function (got %s)"):format(show(v))
  end,
  gpu = function(v)
    if type(v) == "string" and v ~= "" then return nil end
    return ("must be a GPU name string (got %s)"):format(show(v))
  end,
  -- mode: "train" (forward, backward, optimizer step), "inference" (one forward over batch × seq tokens), or a
  -- serving phase (builders that declare M.serving; shared pieces in neusight/nodes.lua): "prefill" (batch prompts
  -- of seq tokens once through the model, writing the KV cache; the LM head on each prompt's last token only) or
  -- "decode" (one new token for each of batch sequences whose KV caches hold `context` tokens: linears on batch rows,
  -- one decode_attention per layer over context + 1 tokens; no loss, no backward).
  mode = one_of { "train", "inference", "prefill", "decode" },
  batch = size_check,
  -- seq: tokens per sequence (the prompt length in prefill). In decode it is the one new token: it defaults to 1
  -- there and any other value is an error (the cache length is `context`).
  seq = size_check,
  -- context: tokens already in each sequence's KV cache, mode "decode" only (required there).
  context = size_check,
  -- optimizer: "none" or an op rule with an `optimizer` field (M.optimizer_rule: the bundled sgd, adam, adamw; a rule
  -- of yours on the --ops path adds one)
  optimizer = function(v) return select(2, M.optimizer_rule(v)) end,
  -- optimizer_impl: how the step runs (ops/adam.lua, adamw.lua, sgd.lua): "fused" (one kernel over all
  -- parameters: torch.optim.*(fused=True), apex/TE FusedAdam) or "foreach" (PyTorch's multi-tensor passes).
  -- Default: "fused" for adamw and under Megatron kernels, "foreach" for adam and sgd otherwise (M.optimizer_impl_default).
  optimizer_impl = one_of { "fused", "foreach" },
  dtype = function(v)
    -- a dtype that is no compute type (fp64, neusight.kernels compute_dtype: it went the fp32 path)
    if K.dtype_name(v) and not K.compute_dtype(v) then
      return ("must be a compute dtype: \"fp32\", \"tf32\", \"fp16\", \"bf16\" or \"fp8\"; double precision is "
        .. "not modelled (no fp64 peaks in the GPU files, no fp64 measurements) (got %s)"):format(show(v))
    end
    if K.dtype_name(v) then return nil end
    -- a weight-only storage type (int8, int4: K.WEIGHT_DTYPES) is no compute dtype: point to its own field
    for _, w in ipairs(K.WEIGHT_DTYPES) do
      if type(v) == "string" and v:lower() == w then
        return ("must be a compute dtype (got %s): %s is a weight storage type, give --weight-dtype %s (workload field "
          .. "weight_dtype) with a compute --dtype such as bf16"):format(show(v), w, w)
      end
    end
    return ("must be a dtype name such as \"fp32\", \"bf16\", \"fp16\", \"tf32\", \"fp8\" (or bfloat16, torch.float16, …) (got %s)"):format(show(v))
  end,
  -- precision: the recipe around the compute dtype (scripts/neusight/precision.lua): "pure" (parameters,
  -- gradients and optimizer state in the dtype) or "amp" (fp32 state, 16-bit compute).
  -- the names other tools give the recipes ("mixed" precision is amp) suggest them
  precision = function(v)
    local problem = one_of(precision.names)(v)
    local alias = type(v) == "string" and PRECISION_ALIASES[v:lower():gsub("[%-%s]", "_")]
    if problem and alias and not problem:find("did you mean", 1, true) then
      local named = one_of(precision.names)(alias) == nil  -- a recipe's name, else the words in its place
      problem = problem .. (named and " (did you mean '%s'?)" or ": %s"):format(alias)
    end
    return problem
  end,
  -- kv_dtype: the KV cache's element type in the serving phases (prefill, decode); default the compute dtype.
  -- Its size is the cache's bytes (kv_cache_gb, memory's KV part, serve's capacity), the prefill's cache writes
  -- and the decode attention's cache reads (neusight.nodes.kv_dtype); FLOPs stay at the compute dtype.
  kv_dtype = one_of(K.KV_DTYPES),
  -- weight_dtype: weight-only quantisation (inference, prefill, decode): the weights' storage type, dequantised
  -- in the GEMM kernels (K.WEIGHT_BYTES); activations and compute stay at the compute dtype.
  weight_dtype = one_of(K.WEIGHT_DTYPES),
  -- attention: how the model's attention runs (builders that declare M.attention = { sdpa = true }): "eager"
  -- (matmul → scale → mask → softmax → dropout → matmul, the kernels HF eager and the NeuSight traces launch) or
  -- "sdpa" (torch scaled_dot_product_attention: one FlashAttention kernel each way, ops/sdpa.lua). Default:
  -- "sdpa" for 16-bit and fp8 dtypes where the builder has it (what HF and Megatron-Core run today), "eager"
  -- for fp32 (the setting the fp32 measurements were taken in).
  attention = one_of { "eager", "sdpa" },
  -- experts: how a mixture of experts' routed experts run (builders that declare M.experts; models without routed
  -- experts ignore it): "loop" (HF eager's per-expert loop of transformers 4.4x–4.5x: gather, three small GEMMs and
  -- a scatter per expert; the default) or "grouped" (Megatron-Core GroupedMLP / vLLM fused_moe: permute, one grouped
  -- GEMM for gate+up, SwiGLU, one for down, unpermute; neusight/models/moe.lua M.grouped_experts). `neusight serve`
  -- defaults to "grouped" (a serving engine).
  experts = one_of { "loop", "grouped" },
  -- router_skew: the load imbalance of the routed experts under expert parallelism (models with routed experts;
  -- others ignore it): "uniform" (the default: the busiest of the ep ranks gets the expected maximum of a uniform
  -- random top-k router's rows), "balanced" (every rank the mean n·k rows) or a number f >= 1 (the busiest rank
  -- gets f times the mean). neusight/models/moe.lua (M.busiest_rank_rows) says why uniform is the default.
  router_skew = function(v)
    if v == "uniform" or v == "balanced" then return nil end
    if math.type(v) then
      if v >= 1 and v < math.huge then return nil end
      return ("must be a number >= 1 (the busiest rank's rows over the mean; got %s)"):format(show(v))
    end
    return ("must be \"uniform\", \"balanced\" or a number >= 1 (got %s)%s"):format(show(v),
      type(v) == "string" and hint(v, { "uniform", "balanced" }) or "")
  end,
  loss = function(v) if type(v) ~= "boolean" then return ("must be a boolean (got %s)"):format(show(v)) end end,
  -- fusion: true (torch.compile-style fusion), "flash_attention" or { flash_attention = true } (also fuse
  -- attention blocks into FlashAttention kernels), false (eager). See scripts/neusight/fusion.lua.
  fusion = function(v)
    if type(v) == "boolean" or v == "flash_attention" then return nil end
    if type(v) == "table" then
      for k, x in pairs(v) do
        if k ~= "flash_attention" then return ("table has an unknown key '%s' (known: flash_attention)"):format(tostring(k)) end
        if type(x) ~= "boolean" then return ("table field 'flash_attention' must be a boolean (got %s)"):format(show(x)) end
      end
      return nil
    end
    return ("must be a boolean, \"flash_attention\" or { flash_attention = true } (got %s)"):format(show(v))
  end,
  -- launch: "eager" (per-kernel times as the predictors give them: PyTorch's one host launch per op) or "graph"
  -- (CUDA-graph replay, as serving engines run: scripts/neusight/launch.lua re-prices the vector kernels).
  launch = one_of { "eager", "graph" },
  description = function(v) if type(v) ~= "string" then return ("must be a string (got %s)"):format(show(v)) end end,
  -- figures: function(f) returning { name = value, … }: the workload's own headline figures, added to the report's
  -- (JSON `figures`, a comparison's columns, the table's lines) by neusight.figures (M.workload_fields).
  figures = function(v)
    if type(v) ~= "function" then
      return ("must be a function(f) returning { name = value, … } (got %s)"):format(show(v))
    end
  end,
  -- report: function(r) adding fields to the single forecast's result table (neusight.report result: the JSON
  -- document's fields, as the JSON shows them); what it returns is ignored.
  report = function(v)
    if type(v) ~= "function" then
      return ("must be a function(r) adding fields to the report (got %s)"):format(show(v))
    end
  end,
  -- lora_rank: LoRA fine-tuning of rank R (mode "train"; scripts/neusight/lora.lua): the base model frozen, adapters
  -- A (in → R) and B (R → out) on each targeted linear trained. lora_targets: the linears' module names (PEFT's
  -- target_modules), a comma-separated string or a list; default q_proj … down_proj (lora.DEFAULT_TARGETS).
  lora_rank = function(v)
    if math.type(v) == "integer" and v >= 1 then return nil end
    return ("must be a positive integer, the adapters' rank (got %s)"):format(show(v))
  end,
  lora_targets = function(v) return select(2, require("neusight.lora").targets(v)) end,
  -- parallel: { dp, tp, pp, microbatches, schedule, … } validated by neusight/parallel.lua (loaded only when given).
  -- (its fields are validated once, by neusight.parallel.normalize in M.normalize)
  parallel = function(v)
    if type(v) ~= "table" then return ("must be a table such as { dp = 4 } (got %s)"):format(show(v)) end
  end,
}

-- What a normalized workload was given that its forecast cannot use, by workload table (weak keys: a copy of the
-- table, as search.lua's probe makes, has none). M.warnings reports them.
local IGNORED = setmetatable({}, { __mode = "k" })
-- Normalized workloads whose dtype is the default (fp32: none given), by workload table (weak keys, as IGNORED):
-- M.warnings says so when the model's config.json names another for its checkpoint (checkpoint_dtype_note).
local DEFAULT_DTYPE = setmetatable({}, { __mode = "k" })
-- The script a normalized workload came from, by workload table (weak keys, as IGNORED): { text, chunkname,
-- overridden(k) }, for the line of an error raised while building it (M.nested_field_line). None for the command line.
local SOURCE = setmetatable({}, { __mode = "k" })

--- The flag that sets workload field `key` on the command line (engine/cli/flags.cpp: the field's name with '-' for
--- '_'; a `parallel` field, "parallel.dp" or "dp", by its own name: --dp; fusion = "flash_attention", the `value` of
--- --flash-attention). One rule, so every message about a value a flag gave names that flag.
function M.flag_of(key, value)
  if key == "fusion" and value == "flash_attention" then return "--flash-attention" end
  return "--" .. tostring(key):gsub("^parallel%.", ""):gsub("_", "-")
end

-- A message about field `k` whose value the command line gave, naming the flag instead: "field 'dtype' must be …" →
-- "--dtype must be …"; the `parallel` table's "field 'parallel' is invalid: parallel.schedule: …" → "--schedule: …"
-- when that field is the flag's (`given(key)`: the value the command line gave "parallel.<field>", or nil), else as it is.
local function flag_words(k, msg, given)
  if k == "parallel" then
    local sub, rest = msg:match("^field 'parallel' is invalid: parallel%.([%w_]+): (.*)$")
    if sub and given("parallel." .. sub) ~= nil then return M.flag_of(sub) .. ": " .. rest end
    return msg
  end
  local prefix = ("field '%s'"):format(k)
  if given(k) ~= nil and msg:sub(1, #prefix) == prefix then return M.flag_of(k, given(k)) .. msg:sub(#prefix + 1) end
  return msg
end

-- Whether a normalized workload runs as a parallel plan (a timeline, a schedule, a cluster, the plan's kernels): more
-- than one GPU or microbatches, a one-GPU training run asking for activation recomputation, which only the
-- timeline models, or a one-GPU run asking for Megatron-LM's kernels (kernels = "megatron": one GPU defaults to
-- "eager", the model's own graph, so only --kernels megatron says it), which only a plan's graph runs: a one-GPU row
-- then compares like with like with a parallel one. graph_of builds the plan; ignored_fields reports what a run
-- without one ignores.
local function planned(w)
  local p = w.parallel
  return p ~= nil and (require("neusight.parallel").active(p) or (w.mode == "train" and (p.recompute or "none") ~= "none")
    or p.kernels == "megatron")
end

-- The bundled optimizers, for did-you-mean (any op rule with an `optimizer` field is one: M.optimizer_rule).
local BUNDLED_OPTIMIZERS = { "none", "sgd", "adam", "adamw" }

--- The op rule of optimizer `name` (its `optimizer` field: moments, impl; engine/lua/prelude.lua check_op), or nil and
--- why `name` names none: "none" (no step) is nil without a reason. An optimizer is an op rule on the op search path
--- (--ops, NEUSIGHT_OPS_PATH, the bundled ops/) whose table has an `optimizer` field, so ops/lion.lua of yours with
--- `optimizer = { moments = 1 }` is --optimizer lion; no list to edit.
---@param name any
---@return table|nil rule, string|nil problem
function M.optimizer_rule(name)
  if name == "none" then return nil, nil end
  local want = 'must be "none" or an optimizer: "sgd", "adam", "adamw" or an op rule of yours with an \'optimizer\' '
    .. "field (README: Operator rules)"
  if type(name) ~= "string" or not name:match("^[%w_]+$") then return nil, ("%s (got %s)"):format(want, show(name)) end
  local rule = require("neusight").op_rule_or_nil(name)
  if rule == nil then
    -- a bundled optimizer the search path leaves out (NEUSIGHT_OPS_PATH without ';;') is said so, not "did you mean"
    -- itself; any other name gets the closest bundled optimizer
    local why = require("neusight").op_bundled_note(name) or hint(name, BUNDLED_OPTIMIZERS)
    return nil, ("%s (got %s: no op rule of that name)%s"):format(want, show(name), why)
  end
  if type(rule.optimizer) ~= "table" then
    return nil, ("%s (got %s: its op rule %s has no 'optimizer' field; it is no optimizer step)"):format(want,
      show(name), require("neusight").op_where(name) or name)
  end
  return rule, nil
end

--- How normalized workload `w`'s optimizer step runs when `optimizer_impl` is not given: "fused" (one kernel over all
--- parameters) where Megatron-LM's kernels run the model (a parallel plan with kernels = "megatron": Megatron-LM's
--- --optimizer adam and sgd are apex / Transformer Engine FusedAdam and FusedSGD, adam with decoupled weight decay);
--- otherwise the rule's `optimizer.impl` (adamw's "fused": torch.optim.AdamW(fused=True), the usual setting), else
--- PyTorch's default "foreach" (multi-tensor passes: adam, sgd).
function M.optimizer_impl_default(w)
  if planned(w) and w.parallel.kernels == "megatron" then return "fused" end
  return M.optimizer_rule(w.optimizer).optimizer.impl or "foreach" -- the rule's own default (adamw's "fused")
end

-- a == b, tables by their contents (kernel lists: tables of numbers, strings, booleans and tables)
local function same_value(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do
    if not same_value(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

--- Whether normalized workload `w`'s optimizer rule prices "fused" and "foreach" differently: its forward over a
--- 2^20-parameter step with each implementation's attrs (the recipe the run uses) gives other kernels. False for a
--- rule that never reads attrs.impl (the README's one-kernel Lion), and for SGD without a master copy (one pass
--- either way), so a given --optimizer-impl is said to have no effect (ignored_fields) instead of being reported as
--- what ran (tester10 #6). A forward that fails here is left to
--- the build to report (true: nothing said).
local function optimizer_impl_matters(w)
  local rule = M.optimizer_rule(w.optimizer)
  if rule == nil then return true end
  local recipe = precision.recipe(w.precision, w.dtype, precision.convention(planned(w) and w.parallel.kernels == "megatron"),
    w.mode)
  local P = 1 << 20
  local function kernels(impl)
    local node = { op = w.optimizer, name = "optimizer." .. w.optimizer, layer = "", phase = "optimizer", inputs = { { P } },
                   output = { P }, dtype = precision.step_dtype(recipe), count = 1, params = 0,
                   attrs = precision.optimizer_attrs(recipe, impl) }
    local ok, out = pcall(rule.forward, node)
    return ok and out or nil
  end
  local fused, foreach = kernels("fused"), kernels("foreach")
  return fused == nil or foreach == nil or not same_value(fused, foreach)
end

--- The config table and builder module of a preset name or config table `model`: cfg, builder; builder nil where the
--- table's arch names no builder that loads (a function model: nil, nil); the warnings ask it, and raise nothing for a
--- builder normalize or the build reports. neusight.search model_facts asks it too.
---@param model string|table|function
function M.model_builder(model)
  local cfg = type(model) == "string" and presets[model] or model
  if type(cfg) ~= "table" or type(cfg.arch) ~= "string" then return nil, nil end
  local ok, builder = pcall(require, "neusight.models." .. cfg.arch)
  return cfg, ok and type(builder) == "table" and builder or nil
end
local model_builder = M.model_builder

-- The position limit of config `cfg` built by `builder` (M.position_limit): its max_position_embeddings (a count) for a
-- builder with rotary positions, else nil.
local function rotary_limit(cfg, builder)
  if not (builder and builder.rotary_positions) then return nil end
  return require("neusight.models.check").count_of(cfg.max_position_embeddings)
end

-- The fields people spell several ways, each with the one name of what is written (nil: none, the field's check refuses
-- it as written): the compute dtype ("bfloat16", "BF16", "torch.bfloat16" → "bf16"; fp64 none, never priced), the
-- KV cache's (K.dtype_name) and weight-only quantisation's (lower case).
local SPELLING = {
  dtype = K.compute_dtype,
  kv_dtype = K.dtype_name,
  weight_dtype = function(v) return type(v) == "string" and v:lower() or nil end,
}
local SPELLED = { "dtype", "kv_dtype", "weight_dtype" }

--- The one name of value `v` of field `key` as the workload reads it (M.normalize): "bf16" for dtype "BF16"; nil where
--- it has none (the field's check refuses it as written) and for a field spelled one way only. A comparison's lists
--- (neusight.compare repeated) resolve their items by it.
function M.spelling(key, v)
  local name = SPELLING[key]
  return name and name(v) or nil
end

--- The KV cache's dtype in a serving phase of compute dtype `dtype` when kv_dtype is not given: the activations' dtype,
--- as vLLM's kv_cache_dtype "auto" keeps it — the dtype itself, but bf16 under fp8 (W8A8: fp8 GEMMs over bf16
--- activations, the K/V projections' outputs bf16; an fp8 cache is kv_dtype fp8, --kv-dtype fp8).
function M.kv_default(dtype)
  return dtype == "fp8" and "bf16" or dtype
end

--- The dtype an fp8 (W8A8) inference graph keeps its embeddings, norms and LM head in, as vLLM loads an FP8 checkpoint
--- (llm-compressor / ModelOpt quantise the decoder's linears only): the LM head runs as a bf16 GEMM and those weights
--- take 2 bytes each in the model state (M.w8a8_unquantised).
M.W8A8_KEPT = "bf16"

-- The storage dtypes of a run in compute dtype `dtype`, spelled (M.spelling) by now: the KV cache's (`kv`) and the
-- weights' (`weight`, weight-only quantisation), each nil where it is not given or names the dtype it has without it
-- (the cache M.kv_default's, the weights the compute dtype: nothing changes), and one "no effect" warning for each
-- given that way. The one rule: M.normalize applies it to its fields, M.storage_dtypes to serve's options.
local function storage_kept(dtype, kv, weight)
  local notes = {}
  local function same(key, flag, v, what, default)
    if v == nil or v ~= default then return v end
    notes[#notes + 1] = ("%s (%s) has no effect: %s is %s, which %s without it; drop it"):format(key,
      flag, v, default == dtype and "the compute dtype" or ("the activations' dtype under dtype " .. tostring(dtype)),
      what)
    return nil
  end
  kv = same("kv_dtype", "--kv-dtype", kv, "the KV cache has", M.kv_default(dtype))
  weight = same("weight_dtype", "--weight-dtype", weight, "the weights have", dtype)
  return kv, weight, notes
end

--- The storage dtypes of a run in compute dtype `dtype` from the KV cache's (`kv_dtype`) and the weights' (`weight_dtype`)
--- as given: spelled (M.spelling), each nil where it is not given or names the compute dtype itself, and the "no effect"
--- warnings of those (M.normalize's rule, for serve's reports).
function M.storage_dtypes(dtype, kv_dtype, weight_dtype)
  return storage_kept(dtype, kv_dtype and (M.spelling("kv_dtype", kv_dtype) or kv_dtype) or nil,
    M.spelling("weight_dtype", weight_dtype) or weight_dtype)
end

--- The fields of normalized workload `w` the user gave (`given`: the `parallel` table as written and overridden, before
--- its defaults; `optimizer`, `optimizer_impl` as given) that change nothing in its forecast, one warning each: the
--- parallel-only fields on one GPU, the training-only ones in inference. What states the default "off" (recompute
--- "none", distributed_optimizer / sequence_parallel false, zero 0, optimizer "none", a degree of 1) asks for nothing and
--- is not reported; every other value given is, even the default's (an explicit --bucket-mb 25 on one GPU is
--- ignored as much as --bucket-mb 50). Warnings, not errors: the run is still the one asked for, and a comparison
--- over modes or degrees (--mode train,inference --optimizer adamw) keeps its other rows. Last, the one note of a
--- field not given: a training pipeline left at one microbatch.
local function ignored_fields(w, given)
  local out = {}
  local function note(key, parallel, why)
    out[#out + 1] = ("%s (%s) has no effect: %s"):format(parallel and "parallel." .. key or key, M.flag_of(key), why)
  end
  local training = w.mode == "train"
  local mode = ("mode is %q"):format(w.mode)
  if given.optimizer ~= nil and given.optimizer ~= "none" and not training then
    note("optimizer", false, ("only training runs an optimizer step (%s); drop it"):format(mode))
  end
  if given.optimizer_impl ~= nil then
    if not training then
      note("optimizer_impl", false, ("only training runs an optimizer step (%s); drop it"):format(mode))
    elseif w.optimizer == "none" then
      note("optimizer_impl", false, "optimizer is \"none\": no optimizer step to run; drop it or name an optimizer")
    elseif not optimizer_impl_matters(w) then
      note("optimizer_impl", false, ("the op rule of optimizer %q (%s) prices \"fused\" and \"foreach\" alike in "
        .. "this run (the same kernels; a rule whose forward never reads attrs.impl, rules.optimizer_impl, always "
        .. "does); drop it")
        :format(w.optimizer, require("neusight").op_where(w.optimizer) or w.optimizer))
    end
  end
  for _, key in ipairs { "experts", "router_skew" } do
    if w[key] ~= nil then -- a preset or config table whose builder has no routed experts (a function model: unknown)
      local cfg, builder = model_builder(w.model)
      if builder and not builder.num_experts then
        note(key, false, ("the %s model builder (%s) has no routed experts; drop it")
          :format(cfg.arch, builder_file(cfg.arch)))
      elseif builder and key == "router_skew" and not builder.router_skew then
        note(key, false, ("the %s model builder (%s) prices its experts' buffers at a fixed "
          .. "capacity, not by the routed load; drop it"):format(cfg.arch, builder_file(cfg.arch)))
      elseif key == "router_skew" and (w.parallel and w.parallel.ep or 1) <= 1 then
        note(key, false, "load imbalance is priced under expert parallelism only (ep > 1: the ranks wait for the "
          .. "busiest); one GPU runs every expert; drop it or give --ep")
      end
    end
  end
  local p, raw = w.parallel, given.parallel
  if type(raw) ~= "table" or not p then return out end
  local gpus = p.dp * p.tp * p.pp
  local has_plan = planned(w)  -- a plan (and so its kernels, a schedule, a cluster) exists as in graph_of
  if raw.recompute ~= nil and raw.recompute ~= "none" and not training then
    note("recompute", true, ("activation recomputation re-runs forwards during the backward pass, and mode %q has none; drop it"):format(w.mode))
  end
  if raw.kernels ~= nil and not has_plan then -- kernels "eager" (a "megatron" one-GPU run is a plan: planned)
    note("kernels", true, "a one-GPU run without microbatches or recomputation builds the model's own graph, the HF "
      .. "eager kernels, already; drop it")
  end
  if raw.schedule ~= nil and p.pp == 1 and p.microbatches == 1 then
    note("schedule", true, "a pipeline schedule orders microbatches over pipeline stages, and this run has pp = 1 and one microbatch; drop it")
  elseif raw.schedule ~= nil and not training then
    local schedule = require "neusight.parallel.schedule"
    -- (an older --scripts schedule.lua without inference_as_gpipe: not said)
    if schedule.inference_as_gpipe and schedule.inference_as_gpipe(p.schedule) then
      note("schedule", true, ("without a backward pass (%s) the gpipe and 1f1b schedules both run each device's "
        .. "forward microbatches in order, the same timeline (scripts/neusight/parallel/schedule.lua); drop it"):format(mode))
    end
  end
  local config = require "neusight.parallel.config"
  -- (an older --scripts config.lua without chunks_of: its normalize refused virtual_stages ≠ 1 itself)
  if raw.virtual_stages ~= nil and config.chunks_of and not config.chunks_of(p.schedule) then
    -- (a --scripts config.lua older than the reason alone prefixes it "parallel.virtual_stages: ")
    local why = config.one_chunk_only(p.schedule):gsub("^parallel%.virtual_stages: ", "")
    note("virtual_stages", true, why .. "; drop it")
  end
  if raw.cluster ~= nil and gpus == 1 then
    -- a named cluster file is read all the same, as a parallel run's plan reads it (neusight.parallel.layout plan):
    -- one that is not there is an error ("<path>: no such file") whatever the layout, not only a run it has no effect on
    if type(raw.cluster) == "string" then
      local ok, ns = pcall(require, "neusight")
      if ok and type(ns) == "table" and ns.cluster_file then ns.cluster_file(raw.cluster) end
    end
    note("cluster", true, "the run is on one GPU (dp = tp = pp = 1): no collective or transfer crosses the cluster; drop it")
  end
  if raw.sequence_parallel == true and p.tp == 1 then
    note("sequence_parallel", true, "it splits each sequence's tokens over the tensor-parallel ranks, and tp = 1; drop it")
  end
  local dp_why = not training and mode or p.dp == 1 and "dp = 1" or nil
  if dp_why then
    if raw.bucket_mb ~= nil then
      note("bucket_mb", true, ("the gradient all-reduce buckets exist in data-parallel training only (%s); drop it"):format(dp_why))
    end
    if raw.overlap_grad_reduce ~= nil then
      note("overlap_grad_reduce", true, ("the gradient all-reduce exists in data-parallel training only (%s); drop it"):format(dp_why))
    end
    if raw.distributed_optimizer == true then
      note("distributed_optimizer", true, ("it shards the optimizer step over data-parallel ranks in training only (%s); drop it"):format(dp_why))
    end
    if raw.zero ~= nil and raw.zero ~= 0 then
      note("zero", true, ("a ZeRO stage shards the model state over data-parallel ranks in training only (%s); drop it")
        :format(dp_why))
    end
  elseif p.zero == 3 then
    -- ZeRO-3 reduce-scatters each unit's gradients after its backward (neusight.parallel.zero), overlapped with the
    -- next unit's, as FSDP does: no gradient buckets to size or to hold back
    for _, key in ipairs { "bucket_mb", "overlap_grad_reduce" } do
      if raw[key] ~= nil then
        note(key, true, "ZeRO-3 (zero = 3) reduce-scatters each layer's gradients after its backward, overlapped with "
          .. "the next one's (scripts/neusight/parallel/zero.lua), in no gradient buckets; drop it")
      end
    end
  end
  -- a pipeline left at its default single microbatch idles most of a training iteration: say so, since the run
  -- forecast is not the one Megatron-LM users run (global batch / (dp × micro batch size) microbatches)
  if training and p.pp > 1 and raw.microbatches == nil then
    out[#out + 1] = ("parallel: pp %d with 1 microbatch (the default; --microbatches, parallel.microbatches): "
      .. "each stage waits for the others most of the iteration (the %s schedule's bubble, (pp - 1) / "
      .. "(microbatches + pp - 1) = %d %% of the pipeline's time); Megatron-LM runs global batch / (dp × micro "
      .. "batch size) microbatches, usually several times pp: give the count you run")
      :format(p.pp, p.schedule, math.floor(100 * (p.pp - 1) / p.pp + 0.5))
  end
  return out
end

-- `text` with its comments and the contents of its strings blanked (newlines kept, so line numbers stay): what is
-- left is code. Strings become "" and long brackets become spaces.
local function code_of(text)
  local out, i, n = {}, 1, #text
  local function blank(from, to) out[#out + 1] = (text:sub(from, to):gsub("[^\n]", " ")) end
  while i <= n do
    local c = text:sub(i, i)
    local long = (c == "[" and text:match("^%[(=*)%[", i)) or (c == "-" and text:match("^%-%-%[(=*)%[", i))
    if long then -- a long string or a long comment: up to its closing bracket of the same level
      local open = c == "[" and i or i + 2
      local close = "]" .. long .. "]"
      local j = text:find(close, open + #long + 2, true)
      local last = j and j + #close - 1 or n
      blank(i, last)
      if c == "[" then out[#out] = '""' .. out[#out]:sub(3) end
      i = last + 1
    elseif c == "-" and text:sub(i + 1, i + 1) == "-" then -- a line comment
      local j = (text:find("\n", i, true) or n + 1) - 1
      blank(i, j)
      i = j + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = text:sub(j, j)
        if d == "\\" then j = j + 2
        elseif d == c or d == "\n" then break
        else j = j + 1 end
      end
      out[#out + 1] = '""'
      blank(i + 2, math.min(j, n))
      i = j + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

--- The line of the workload script `text` that sets top-level field `key` (`key = …` in code, not in a comment or a
--- string), or nil when it cannot be sure: no such line or more than one, or the name is also set another way
--- (`x.key =`, `["key"] =`, `local key`, a function's parameter or a `for` variable of that name) — a wrong line is
--- worse than the file alone.
---@param text? string
---@param key any
---@return integer?
function M.field_line(text, key)
  if type(text) ~= "string" or type(key) ~= "string" or not key:match("^[%a_][%w_]*$") then return nil end
  if text:find("%[%s*[\"']" .. key .. "[\"']%s*%]") then return nil end -- ["key"] = … (checked before blanking)
  local code = code_of(text)
  local found, n = nil, 0
  for line in (code .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local padded = " " .. line .. " "
    if padded:find("%f[%w_]local%f[^%w_][^=]*%f[%w_]" .. key .. "%f[^%w_]") -- local key, local a, key
      or padded:find("%f[%w_]for%f[^%w_][^=]*%f[%w_]" .. key .. "%f[^%w_]") -- for key … / for _, key in
      or padded:find("%f[%w_]function%f[^%w_][^)]*%f[%w_]" .. key .. "%f[^%w_][^)]*%)") then -- a parameter
      return nil
    end
    for at in padded:gmatch("()%f[%w_]" .. key .. "%s*=%f[^=]") do
      if padded:sub(at - 1, at - 1) == "." or padded:sub(1, at - 1):match("%.%s*$") then return nil end -- x.key =
      if found and found ~= n then return nil end
      found = n
    end
  end
  return found
end

--- The line of the workload script `text` that sets field `key` of the table the script writes in place for its
--- top-level field `outer` (`model = { … key = … }`, `parallel = { cluster = { key = … } }`): errors raised while
--- building it about one of its fields ("field 'n_head' must be …", "parallel.cluster.gpus_per_node: …") name it.
--- nil when it cannot be sure, as M.field_line: the script sets `outer` on more than one line or not as a table
--- constructor (a local, a require, a function's result), or `key` is set on more than one line of the script,
--- another way, or anywhere outside that constructor's braces.
---@param text? string
---@param outer string
---@param key any
---@return integer?
function M.nested_field_line(text, outer, key)
  local line = M.field_line(text, outer)
  local at = line and M.field_line(text, key)
  if not at then return nil end
  local code = code_of(text)
  -- the constructor's `{`: on the line that sets outer, right after `outer =`
  local start, n = 1, 1
  while n < line do start, n = code:find("\n", start, true) + 1, n + 1 end
  local stop = code:find("\n", start, true) or #code + 1
  local open
  for s, o in code:gmatch("()%f[%w_]" .. outer .. "%s*=%s*(){") do
    if s >= start and s < stop and code:sub(s - 1, s - 1) ~= "." then
      if open then return nil end
      open = o
    end
  end
  if not open then return nil end
  local depth, close = 0, nil
  for i = open, #code do
    local c = code:sub(i, i)
    if c == "{" then depth = depth + 1
    elseif c == "}" then
      depth = depth - 1
      if depth == 0 then close = i break end
    end
  end
  if not close then return nil end
  -- every assignment of key (M.field_line found them all on line `at`) lies between the braces
  for s in code:gmatch("()%f[%w_]" .. key .. "%s*=%f[^=]") do
    if s < open or s > close then return nil end
  end
  return at
end

--- M.nested_field_line for the model config (`model = { … key = … }`).
function M.model_field_line(text, key) return M.nested_field_line(text, "model", key) end

--- The line of the workload script `text` that writes node `name` (`name = "<name>"` in code, the literal as written,
--- not in a comment), or nil when it cannot be sure: no such line or more than one (a name made in a loop,
--- `name = "fc" .. i`, is on none). With `nth`, the line of the nth of exactly `of` such literals, in the order the
--- script writes them (a name given to `of` nodes: the nth of them), else nil.
---@param text? string
---@param name any
---@param nth? integer
---@param of? integer
---@return integer?
function M.node_line(text, name, nth, of)
  if type(text) ~= "string" or type(name) ~= "string" or name:find("[\\\n]") then return nil end
  local code = code_of(text) -- same length as text: a string literal is "" and blanks there
  local lines, line, last = {}, 1, 1
  for at, q in code:gmatch('()%f[%w_]name%s*=%s*()"') do
    local quote = text:sub(q, q)
    if code:sub(at - 1, at - 1) ~= "." and (quote == '"' or quote == "'")
      and text:sub(q + 1, q + #name) == name and text:sub(q + #name + 1, q + #name + 1) == quote then
      local _, newlines = code:sub(last, at - 1):gsub("\n", "")
      line, last = line + newlines, at
      lines[#lines + 1] = line
    end
  end
  if nth then return #lines == of and lines[nth] or nil end
  for i = 2, #lines do
    if lines[i] ~= lines[1] then return nil end
  end
  return lines[1]
end

-- A router_skew factor as the command line passes it (--router-skew 1.3): its decimal string (a plain decimal, with
-- an exponent or not: 1e30 is a number, refused by its size in neusight.models.moe busiest_rank_rows) as a number;
-- anything else (a name, hex) as it is. M.normalize and M.check_fields (a comparison's values, checked first) alike.
local function cli_router_skew(v)
  if type(v) ~= "string" then return v end
  local mantissa = v:match("^([%d.]+)[eE][+-]?%d+$") or v
  if mantissa:match("^%d+%.?%d*$") or mantissa:match("^%d*%.%d+$") then return tonumber(v) end
  return v
end

--- Validates a workload table after applying `overrides` (CLI values; nil entries are ignored) and
--- returns a new table with defaults filled in: optimizer "adam" for train / "none" for inference,
--- optimizer_impl "fused" for adamw / "foreach" for adam and sgd (nil without an optimizer), dtype "fp32",
--- precision "amp" when training in fp16/bf16/fp8 and "pure" otherwise (neusight.precision.default), loss
--- true. Errors are "<chunkname>: <what>" (raised at level 0), "<chunkname>:<line>: <what>" for a field the script's
--- source `text` sets on one line (M.field_line).
---@param spec table
---@param overrides? table
---@param chunkname? string
---@param text? string
---@return neusight.Workload
function M.normalize(spec, overrides, chunkname, text)
  chunkname = chunkname or "workload"
  local function fail(fmt, ...) error(chunkname .. ": " .. fmt:format(...), 0) end
  -- a field's error names the script's line where the script sets it (not where the command line does)
  local function overridden(k)
    for ok in pairs(overrides or {}) do
      if ok == k or k == "parallel" and type(ok) == "string" and ok:match("^parallel%.") then return true end
    end
    return false
  end
  -- a value a flag gave: said by the flag (--dtype), as the command line's own checks say theirs
  local function given(key) return overrides and overrides[key] end
  local function fail_at(k, fmt, ...)
    local line = not overridden(k) and M.field_line(text, k)
    error(chunkname .. (line and ":" .. line or "") .. ": " .. flag_words(k, fmt:format(...), given), 0)
  end
  -- a field of the model config: the line that sets it inside `model = { … }`, else the line of `model =`
  local function fail_in(k, sub, fmt, ...)
    local line = not overridden(k) and (sub and M.model_field_line(text, sub) or M.field_line(text, k))
    error(chunkname .. (line and ":" .. line or "") .. ": " .. flag_words(k, fmt:format(...), given), 0)
  end

  if type(spec) ~= "table" then fail("a workload must return a table (got %s)", show(spec)) end
  local w = {}
  for k, v in pairs(spec) do w[k] = v end
  for k, v in pairs(overrides or {}) do
    local sub = type(k) == "string" and k:match("^parallel%.(.+)$") -- --dp 4 arrives as "parallel.dp"
    if sub then
      local p = {}
      if type(w.parallel) == "table" then
        for pk, pv in pairs(w.parallel) do p[pk] = pv end
      end
      p[sub] = v
      w.parallel = p
    else
      w[k] = v
    end
  end

  for _, k in ipairs(sorted_keys(w)) do
    if not CHECK[k] then fail_at(k, "unknown field '%s'%s", tostring(k), hint(k, FIELDS)) end
  end
  if w.mode == "decode" and w.seq == nil then w.seq = 1 end -- one new token per sequence
  -- "bfloat16", "BF16" → "bf16" (not fp64: CHECK.dtype refuses it as the user wrote it): M.spelling
  for _, k in ipairs(SPELLED) do
    if w[k] ~= nil then w[k] = M.spelling(k, w[k]) or w[k] end
  end
  -- a router_skew factor as the command line passes it (--router-skew 1.3): its decimal string (a plain decimal only;
  -- a script's field stays as written: "2" there is a string, refused below)
  local cli_skew = overrides and cli_router_skew(overrides.router_skew)
  if type(cli_skew) == "number" then
    w.router_skew = cli_skew
  end
  local missing = {} -- every missing field at once, as flags on the command line
  for _, k in ipairs(FIELDS) do
    if w[k] == nil and REQUIRED[k] then missing[#missing + 1] = k end
  end
  if #missing > 0 then
    local flags = {}
    for i, k in ipairs(missing) do flags[i] = "--" .. k end
    if chunkname == "command line" then
      fail("missing %s (required without a workload script)", table.concat(flags, ", "))
    end
    fail("missing required field%s '%s' (or %s on the command line)", #missing > 1 and "s" or "",
      table.concat(missing, "', '"), table.concat(flags, ", "))
  end
  for _, k in ipairs(FIELDS) do
    if w[k] ~= nil then
      local problem, sub = CHECK[k](w[k])
      if problem then fail_in(k, k == "model" and sub or nil, "field '%s' %s", k, problem) end
    end
  end

  -- given by flags, said by the flags (--seq, --context, --mode); a script's fields by its fields
  if w.mode == "decode" then
    if w.context == nil then
      fail("mode \"decode\" needs field 'context': the tokens already in each sequence's KV cache (--context C)")
    end
    if w.seq ~= 1 and overridden("seq") then
      fail("--seq is the prompt length of --mode prefill (and inference, train); --mode decode runs one new token "
        .. "per sequence over --context tokens of KV cache: drop --seq %s (--context is the cache's length)", show(w.seq))
    elseif w.seq ~= 1 then
      fail_at("seq", "field 'seq' is the one new token per sequence in mode \"decode\" and must be 1 (got %s); the KV-cache length is 'context'", show(w.seq))
    end
  elseif w.context ~= nil and overridden("context") then
    fail("--context applies to --mode decode only (mode is %s): prefill and inference take the prompt length as --seq",
      show(w.mode))
  elseif w.context ~= nil then
    fail_at("context", "field 'context' applies to mode \"decode\" only (mode is %s); prefill and inference take the prompt length as 'seq'", show(w.mode))
  end

  if w.kv_dtype ~= nil and not M.serving(w.mode) then
    fail_at("kv_dtype", "field 'kv_dtype' applies to the serving phases only (mode \"prefill\" or \"decode\"; mode is %s): train and inference hold no KV cache", show(w.mode))
  end
  if w.weight_dtype ~= nil and w.mode == "train" then
    fail_at("weight_dtype", "field 'weight_dtype' (weight-only quantisation) applies to inference, prefill and decode only: training with quantised weights is not modelled (mode is \"train\")")
  end

  if w.lora_targets ~= nil and w.lora_rank == nil then
    fail_at("lora_targets", "field 'lora_targets' needs 'lora_rank' (--lora-rank R): the LoRA adapters' rank")
  end
  if w.lora_rank ~= nil and w.mode ~= "train" then
    fail_at("lora_rank", "field 'lora_rank' (LoRA fine-tuning) applies to mode \"train\" only (mode is %s): "
      .. "inference with merged or unmerged adapters is not modelled", show(w.mode))
  end
  if w.lora_rank ~= nil and w.parallel ~= nil then
    fail_at("lora_rank", "field 'lora_rank' (LoRA fine-tuning) with a parallel table is not modelled (the frozen "
      .. "base's missing gradient all-reduce and sharding are not): forecast one GPU without 'parallel'")
  end
  if w.lora_targets ~= nil then w.lora_targets = require("neusight.lora").targets(w.lora_targets) end

  local given = { parallel = w.parallel, optimizer = w.optimizer, optimizer_impl = w.optimizer_impl }
  if w.parallel ~= nil then
    local ok, p = pcall(require("neusight.parallel").normalize, w.parallel)
    if not ok then fail_at("parallel", "field 'parallel' is invalid: %s", tostring(p)) end
    if w.batch % (p.dp * p.microbatches) ~= 0 then
      fail_at("parallel", "field 'parallel': the global batch %d is not divisible by dp × microbatches = %d × %d",
        w.batch, p.dp, p.microbatches)
    end
    -- Megatron's sequence parallelism scatters the residual stream's sequence dimension over the tp ranks; a decode
    -- step has one token per sequence, so there is nothing to split (serving engines run decode without it).
    if p.sequence_parallel and w.mode == "decode" then
      fail_at("parallel", "field 'parallel': sequence parallelism splits each sequence's tokens over the tp ranks, and mode \"decode\" has one new token per sequence: drop sequence_parallel (--sequence-parallel) for decode; train, inference and prefill take it")
    end
    w.parallel = p
  end

  if w.fusion and w.mode == "train" then
    fail_at("fusion", "field 'fusion' applies to inference only: fused training (torch.compile's backward graphs) is not modelled; use mode = \"inference\" or fusion = false")
  end
  -- the script it came from, for the lines of errors raised while building it (a normalized table normalized again,
  -- as M.build does, keeps it)
  SOURCE[w] = SOURCE[spec] or type(text) == "string" and { text = text, chunkname = chunkname, overridden = overridden }
    or nil
  if w.optimizer == nil then w.optimizer = w.mode == "train" and "adam" or "none" end
  if w.dtype == nil then
    w.dtype = "fp32"
    DEFAULT_DTYPE[w] = true
  elseif DEFAULT_DTYPE[spec] and (overrides or {}).dtype == nil then -- a normalized table normalized again keeps it
    DEFAULT_DTYPE[w] = true
  end
  local storage_notes  -- a KV cache or weights "quantised" to the compute dtype: dropped, with a warning
  w.kv_dtype, w.weight_dtype, storage_notes = storage_kept(w.dtype, w.kv_dtype, w.weight_dtype)
  -- LoRA loads the base model in the compute dtype (HF torch_dtype): no fp32 master state to mix with, so "pure"
  if w.precision == nil then w.precision = w.lora_rank and "pure" or precision.default(w.dtype, w.mode) end
  local problem = precision.check(w.precision, w.dtype)
  if problem then fail_at("precision", "field 'precision' %s", problem) end
  if w.optimizer_impl == nil and w.optimizer ~= "none" then w.optimizer_impl = M.optimizer_impl_default(w) end
  if w.loss == nil then w.loss = true end
  if w.launch == nil then w.launch = "eager" end
  -- a normalized table normalized again (M.build does) keeps its notes: its parallel table has its defaults by now
  if not IGNORED[spec] then
    IGNORED[w] = ignored_fields(w, given)
    for _, note in ipairs(storage_notes) do table.insert(IGNORED[w], note) end
  else
    IGNORED[w] = IGNORED[spec]
  end
  return w
end

--- Checks each top-level field of `fields` on its own (the validators of M.normalize; "parallel.*" keys are left to
--- neusight.parallel): a typo in a value (an unknown preset, a misspelled dtype) raises as normalize would, while what
--- depends on several fields together (precision with dtype, batch divisibility, a builder's limits) is not looked at.
--- A comparison of several values per field runs it before forecasting anything. The fields are the command line's
--- (the engine's workload_check): a value refused is said by its flag (--dtype), as M.normalize says a flag's.
---@param fields table
---@param chunkname? string
function M.check_fields(fields, chunkname)
  chunkname = chunkname or "workload"
  local function given(key) return fields[key] end
  for _, k in ipairs(sorted_keys(fields)) do
    local v = fields[k]
    local pk = type(k) == "string" and k:match("^parallel%.(.+)$")
    if pk then -- a choice field's names (parallel.recompute, .kernels); the rest depends on the other fields
      local ok, err = pcall(require("neusight.parallel").check_choice, pk, v)
      if not ok then
        error(("%s: %s"):format(chunkname, flag_words("parallel", "field 'parallel' is invalid: " .. tostring(err), given)), 0)
      end
    else
      if not CHECK[k] then error(("%s: unknown field '%s'%s"):format(chunkname, tostring(k), hint(k, FIELDS)), 0) end
      if k == "dtype" then v = K.compute_dtype(v) or v end
      if k == "router_skew" then v = cli_router_skew(v) end -- as M.normalize reads the flag
      local problem = CHECK[k](v)
      if problem then error(("%s: %s"):format(chunkname, flag_words(k, ("field '%s' %s"):format(k, problem), given)), 0) end
    end
  end
end

---------------------------------------------------------------------------------------------------
-- Graph construction

-- What a node's field must be, or nil when it is fine; the engine reads the node again (engine/lua/wrap_graph.cpp
-- nodes_read), but the graph's own scripts (memory, fusion, the optimizer's parameter sum) read it first, so a function
-- model's { "1", 0/0 } shape or a string count is refused here, naming the node, instead of failing inside them.
-- An integer value of a number (4.0 → 4), nil for anything else (math.tointeger would take the string "4").
local function int(v) return math.type(v) and math.tointeger(v) or nil end
-- What is wrong with a node's shape (neusight.kernels' one rule, K.shape_check), phrased for a field, or nil.
local function shape_error(s)
  -- a table with a metatable: never run a script's metamethods here (the engine refuses the table)
  if type(s) == "table" and getmetatable(s) ~= nil then return nil end
  local n, e = K.shape_check(s)
  if n then return nil end
  if e.kind == "type" then return ("must be a shape (array of non-negative integers; got %s)"):format(show(s)) end
  if e.kind == "key" then return ("must be a shape (array of non-negative integers; it has key %s)"):format(show(e.key)) end
  if e.kind == "dimension" then
    return ("must be a shape: dimension %d is %s, expected a non-negative integer"):format(e.index, show(e.value))
  end
  return ("must be a shape of at most %s elements"):format(K.MAX_ELEMENTS_TEXT)
end
local function node_error(n)
  if getmetatable(n) ~= nil then return nil end -- the engine refuses it (without running its metamethods)
  local e = shape_error(n.output)
  if e then return "field 'output' " .. e end
  if type(n.inputs) ~= "table" then return ("field 'inputs' must be an array of shapes (got %s)"):format(show(n.inputs)) end
  if getmetatable(n.inputs) ~= nil then return nil end
  for i = 1, #n.inputs do
    e = shape_error(n.inputs[i])
    if e then return ("field 'inputs' #%d %s"):format(i, e) end
  end
  if n.count ~= nil and (not int(n.count) or n.count < 1) then
    return ("field 'count' must be an integer >= 1 (got %s)"):format(show(n.count))
  end

  if n.params ~= nil then
    if math.type(n.params) == nil or n.params ~= n.params or n.params == math.huge or n.params == -math.huge then
      return ("field 'params' must be a finite number (got %s)"):format(show(n.params))
    end
    if n.params < 0 then return ("field 'params' must be >= 0 (got %s)"):format(show(n.params)) end
  end
  if n.dtype ~= nil and not K.dtype_name(n.dtype) then
    return ("field 'dtype' must be a dtype name (got %s)"):format(show(n.dtype))
  end
  if n.dtype ~= nil and not K.compute_dtype(n.dtype) then  -- as the workload's dtype (CHECK.dtype): never priced
    return ("field 'dtype' must be a compute dtype (fp32, tf32, fp16, bf16, fp8); double precision is not modelled "
      .. "(got %s)"):format(show(n.dtype))
  end
  if n.layer ~= nil and type(n.layer) ~= "string" then
    return ("field 'layer' must be a string naming the repeated block (e.g. layer = \"h\", with count = its number of "
      .. "layers), not a layer number (got %s)"):format(show(n.layer))
  end
  if n.attrs ~= nil and type(n.attrs) ~= "table" then return ("field 'attrs' must be a table (got %s)"):format(show(n.attrs)) end
end

-- Where workload `w`'s script writes node i of `nodes`: "<chunkname>:<line>" (M.node_line; a name several nodes have:
-- the line of this one among them), "<chunkname>" where no one line certainly does, nil for a model the script does
-- not write (a preset, a config table, a --model the command line gave, a workload not from a script).
local function node_at(w, nodes, i)
  local src = SOURCE[w]
  if not src or src.overridden("model") or type(w.model) ~= "function" then return nil end
  local name = type(nodes[i]) == "table" and nodes[i].name
  local same, nth = 0, 0
  for j, m in ipairs(nodes) do
    if type(m) == "table" and m.name == name then
      same = same + 1
      if j <= i then nth = same end
    end
  end
  local line
  if same > 1 then line = M.node_line(src.text, name, nth, same) else line = M.node_line(src.text, name) end
  return tostring(src.chunkname) .. (line and ":" .. line or "")
end

--- For the engine's node messages (engine/lua/prelude.lua check_nodes: "<chunkname>: model 'm', node 2 'act'"): a
--- function(i, who) that puts the line of workload `w`'s script that writes node i of `nodes` after the chunk name
--- `who` starts with (node_at), or returns `who` as it is.
---@param w table a normalized workload
---@param nodes table[] its build's nodes
function M.node_located(w, nodes)
  return function(i, who)
    local src, at = SOURCE[w], node_at(w, nodes, i)
    if not (at and src) then return who end
    local chunk = tostring(src.chunkname)
    if who:sub(1, #chunk + 2) ~= chunk .. ": " then return who end
    return at .. who:sub(#chunk + 1)
  end
end

-- Checks every node (node_error; the fields a node may have first: engine/lua/wrap_graph.cpp's list, whose
-- did-you-mean also answers a required field written under another name) and fills the optional node fields a
-- hand-written model may leave out. A node's name is its own: the report's rows and a node's references
-- (attrs.tied) name it. Errors name the line of workload `w`'s script that writes the node (node_at).
local function fill_defaults(nodes, w)
  local fields, names = {}, {}
  for _, k in ipairs(require("neusight").node_fields()) do fields[k] = true end
  local function fail(i, fmt, ...)
    local at = node_at(w, nodes, i)
    error((at and at .. ": " or "") .. fmt:format(...), 0)
  end
  for i, n in ipairs(nodes) do
    if type(n) ~= "table" or type(n.op) ~= "string" or type(n.name) ~= "string" then
      fail(i, "model: node #%d needs string fields 'op' and 'name'", i)
    end
    if getmetatable(n) == nil then -- (the engine refuses a table with a metatable without running its metamethods)
      local unknown = {}
      for k in pairs(n) do
        if type(k) == "string" and not fields[k] then unknown[#unknown + 1] = k end
      end
      if #unknown > 0 then
        table.sort(unknown)
        fail(i, "model: node #%d '%s': unknown field '%s'%s", i, n.name, unknown[1], hint(unknown[1], fields))
      end
    end
    local e = node_error(n)
    if e then fail(i, "model: node #%d '%s': %s", i, n.name, e) end
    if names[n.name] then
      fail(i, "model: node #%d '%s': node #%d has that name too (each node needs a name of its own: the report's rows "
        .. "and attrs.tied name nodes)", i, n.name, names[n.name])
    end
    names[n.name] = i
    -- a node's own dtype as --dtype takes it (node_error refused what is no dtype): the engine reads its names only,
    -- and "bfloat16" stopped the build at scripts/neusight/rules.lua, naming neither the node nor its line
    if n.dtype ~= nil then n.dtype = K.compute_dtype(n.dtype) end
    n.dtype = n.dtype or w.dtype
    n.layer = n.layer or ""
    n.count = n.count or 1
    n.params = n.params or 0
    n.attrs = n.attrs or {}
  end
end

--- Whether attention defaults to sdpa for a compute dtype: 16-bit and fp8 runs are today's stacks (HF's sdpa
--- default, Megatron-Core's flash attention); fp32 keeps the eager graphs the fp32 measurements were traced from
--- (GPT-2, BERT, OPT), except for a builder with M.sdpa_any_dtype (graph_of).
function M.sdpa_by_default(dtype) return dtype == "bf16" or dtype == "fp16" or dtype == "fp8" end

--- Whether a mode is a serving phase ("prefill" or "decode"): builders get it as opts.phase.
function M.serving(mode) return mode == "prefill" or mode == "decode" end

--- Dynamic activation quantisation of an fp8 inference graph (mode inference, prefill or decode): every fp8 linear
--- (and addmm) and the experts' grouped_linear gets attrs.act_quant = "dynamic_tensor", which the op rules put on
--- the forward GEMM (rules.linear, ops/grouped_linear.lua) and gemm_fp8 prices as a stage before it (vLLM's
--- scaled_fp8_quant: absmax over the activations with one atomic per token row on the scale, then the quantising
--- pass; AIConfigurator's fp8 rows include it, engine/core/tile_model.h quant_stage). Training does not get it:
--- Transformer Engine's fp8 training scales with delayed (amax-history) scaling in cast kernels of its own, with
--- no per-row atomic, and its backward GEMMs have no such stage (M.warnings says what that forecast is trained on).
function M.quantise_activations(nodes)
  for _, n in ipairs(nodes) do
    if (n.op == "linear" or n.op == "addmm" or n.op == "grouped_linear") and n.dtype == "fp8" then
      set_attr(n, "act_quant", "dynamic_tensor")
    end
  end
end

--- Whether `name` (a node's, or its kernels') is a model's LM head's: "lm_head" or "<prefix>.lm_head" (also
--- neusight.serve's logits kernels: the one rule).
function M.lm_head_name(name)
  return type(name) == "string" and (name == "lm_head" or name:match("%.lm_head$") ~= nil)
end

-- Whether node `n` is a model's LM head (a linear named lm_head): what quantised checkpoints keep unquantised.
local function lm_head(n)
  return n.op == "linear" and M.lm_head_name(n.name)
end

-- The ops whose parameters are a GEMM's weight (quantised with it), and the weights of experts no token reached (op
-- weight, attrs.expert: they launch nothing but hold the same linears' weights).
local WEIGHT_GEMM_OPS = { linear = true, addmm = true, matmul = true, grouped_linear = true }
local function idle_expert(n) return n.op == "weight" and type(n.attrs) == "table" and n.attrs.expert end
-- The GEMMs that run in fp8 under dtype fp8 (M.fp8_dtypes): the Linear layers' (and the experts' grouped ones). A
-- parameter-holding matmul (MLA's absorbed W_UK / W_UV bmms in decode, neusight/models/deepseek.lua) is not one:
-- vLLM dequantises kv_b_proj's fp8 weight into bf16 W_UK_T / W_UV at load and runs those bmms in bf16.
local FP8_GEMM_OPS = { linear = true, addmm = true, grouped_linear = true }

--- fp8 compute (dtype fp8) as the stacks run it, one rule for training and inference: only the inputs of the Linear
--- layers' GEMMs are fp8, those GEMMs write bf16, and everything between them stays bf16 (M.W8A8_KEPT) — norms,
--- element-wise ops, RoPE, attention, the embedding, the tensor-parallel collectives and the LM head.
---   training: Transformer Engine (and Megatron-LM's --fp8-format, which runs TE's layers) casts the inputs of its
---     Linear GEMMs to fp8 (dgrad and wgrad GEMMs too); fp8 attention is opt-in (NVTE_FP8_DPA); Megatron's output
---     layer is a plain ColumnParallelLinear, HF's an nn.Linear.
---   inference / serving (W8A8, vLLM's CutlassFP8ScaledMMLinearKernel over an FP8 checkpoint): each Linear quantises
---     its bf16 input per call (M.quantise_activations: the gemm_fp8 stage) and returns bf16; attention reads bf16
---     Q/K/V (the cache is bf16 too unless kv_dtype fp8: M.kv_default); the LM head is a ParallelLMHead, which
---     vLLM's Fp8Config leaves unquantised (a bf16 GEMM; llm-compressor / ModelOpt checkpoints keep lm_head bf16).
--- So every fp8 node but a parameter-holding Linear GEMM (FP8_GEMM_OPS: linear, addmm, grouped_linear) other than the
--- LM head runs at M.W8A8_KEPT (a parameter-holding matmul too: its weight dequantised, FP8_GEMM_OPS); a collective is priced again at its bf16 bytes (neusight.parallel retype); a conversion from the
--- activations (the loss's cast of the logits to fp32, cross-entropy's attrs.from) reads bf16; and a KV cache a node
--- holds in its own dtype (neusight.nodes hf_cache: HF's past_key_values in mode inference) is counted at bf16.
--- Before 2026-11-29 every node ran at 1 byte per element: training Llama-3-8B at tp 4 on H100s (batch 4 × 2048)
--- 144.7 ms, with bf16 activations 177.5 (all-reduces 21.5 → 41.7 ms); inference (batch 8 × 1024, H100) 174.6 ms
--- (SDPA 4.76 ms a layer, RoPE and RMSNorm passes at half their bytes, HF's cache 0.54 GB).
---@param nodes table the graph's nodes
---@param plan? table neusight.parallel.plan() of a parallel run
---@param serving? boolean a serving phase (prefill, decode: M.serving), whose KV cache has the dtype kv_dtype gave it
function M.fp8_dtypes(nodes, plan, serving)
  for _, n in ipairs(nodes) do
    if n.dtype == "fp8" and not (FP8_GEMM_OPS[n.op] and (n.params or 0) > 0 and not lm_head(n)) then
      local a = type(n.attrs) == "table" and n.attrs or nil
      if plan and a and a.seconds and plan.groups[a.group] then
        require("neusight.parallel").retype(plan, n, M.W8A8_KEPT) -- a collective: priced again at its bytes
      else
        -- a KV cache in the node's own dtype: in a serving phase the cache kv_dtype made (fp8 only when given: the
        -- builders get M.kv_default's bf16 otherwise), written by a setitem (neusight.nodes kv_cache_write) and read
        -- by decode_attention, which stays fp8; HF's cache in mode inference (neusight.nodes hf_cache) holds the
        -- activations K and V, counted at their bf16
        local kv_cache = a and a.kv_dtype == nil and type(a.kv_cache_bytes) == "number"
        if serving and a and a.kv_dtype == nil and ((kv_cache and n.op == "setitem") or n.op == "decode_attention") then
          set_attr(n, "kv_dtype", n.dtype)
        elseif kv_cache and not serving then
          set_attr(n, "kv_cache_bytes", a.kv_cache_bytes * K.dtype_bytes(M.W8A8_KEPT) / K.dtype_bytes(n.dtype))
        end
        n.dtype = M.W8A8_KEPT
      end
    end
    if type(n.attrs) == "table" and n.attrs.from == "fp8" then n.attrs.from = M.W8A8_KEPT end
  end
end

--- The weights' bytes per parameter of an fp8 (W8A8) inference graph: the parameters of its fp8 GEMMs' weights (the
--- linears, addmms and grouped experts in fp8, the parameter-holding matmuls M.fp8_dtypes dequantised, and experts no
--- token reached) at `fp8_bytes`,
--- the rest (embeddings, norms, the LM head: M.fp8_dtypes) at M.W8A8_KEPT's bytes, as an FP8 checkpoint stores them.
function M.w8a8_weights_per_param(nodes, fp8_bytes)
  -- (a parameter-holding matmul in bf16 is one M.fp8_dtypes dequantised: its checkpoint weight is fp8)
  local quantised, all = M.params_split(nodes, function(n)
    return idle_expert(n) or (WEIGHT_GEMM_OPS[n.op] and n.dtype == "fp8") or (n.op == "matmul" and n.dtype == M.W8A8_KEPT)
  end)
  if all == 0 then return fp8_bytes end
  return (quantised * fp8_bytes + (all - quantised) * K.dtype_bytes(M.W8A8_KEPT)) / all
end

--- Weight-only quantisation of a graph: every linear (and addmm, and the experts' grouped_linear) with parameters reads
--- its weight at `weight_bytes` per element (attrs.weight_bytes, ops' rules.linear → K.linear, ops/grouped_linear.lua).
--- A matmul holding parameters (MLA's absorbed W_UK / W_UV bmms in decode, neusight/models/deepseek.lua) is stored quantised too (the model state counts
--- it so) but its BMM kernel still reads the weight at the compute dtype; so are the weights of experts no token reaches
--- (op weight, attrs.expert: they launch nothing). The LM head is not quantised: AWQ, GPTQ (its default), bitsandbytes,
--- ModelOpt / TensorRT-LLM and vLLM's online fp8 all keep lm_head at the compute dtype (an untied Llama-3-8B int4
--- checkpoint holds 5.7 GB, not 4.8), so it reads its weight and is stored at the compute dtype, as under W8A8
--- (M.fp8_dtypes). Returns the parameters so quantised and all parameters (× count), for the weights' bytes per
--- parameter in the model state.
function M.quantise_weights(nodes, weight_bytes)
  local quantised, all = 0, 0
  for _, n in ipairs(nodes) do
    local p = (n.params or 0) * (n.count or 1)
    all = all + p
    if (WEIGHT_GEMM_OPS[n.op] or idle_expert(n)) and p > 0 and not lm_head(n) then
      set_attr(n, "weight_bytes", weight_bytes)
      quantised = quantised + p
    end
  end
  return quantised, all
end

--- The weights' bytes per parameter with weight-only quantisation: the quantised linears' parameters at
--- `weight_bytes`, the rest (embeddings, norms, the LM head; biases counted with their linear) at `param_bytes`.
--- The parameters (params · count) of the nodes `pick(n)` accepts, and of all nodes: the one loop of the model state's
--- per-parameter averages (weight-only and W8A8 quantisation here, LoRA's trainable share: neusight.lora state).
---@return number picked
---@return number all
function M.params_split(nodes, pick)
  local picked, all = 0, 0
  for _, n in ipairs(nodes) do
    local p = (n.params or 0) * (n.count or 1)
    all = all + p
    if p > 0 and pick(n) then picked = picked + p end
  end
  return picked, all
end

local function weights_per_param(nodes, weight_bytes, param_bytes)
  local quantised, all = M.params_split(nodes, function(n)
    return type(n.attrs) == "table" and n.attrs.weight_bytes ~= nil
  end)
  if all == 0 then return param_bytes end
  return (quantised * weight_bytes + (all - quantised) * param_bytes) / all
end

--- The position limit a model may run beyond, with a warning: a preset name or config table (`model`) of a builder with
--- rotary positions (M.rotary_positions: Llama, Mixtral/Qwen MoE, DeepSeek) and its max_position_embeddings; nil for
--- any other (a learned position table's builder refuses a longer sequence itself; a function model says nothing).
--- A whole-number float (2048.0 in a config.json or a Lua config) is the integer it equals, as the builders' check
--- takes it (neusight.models.check count_of).
---@param model any
---@return integer?
function M.position_limit(model) return rotary_limit(model_builder(model)) end

--- What a model's config file says that its forecast does not read (neusight.models.hf config_warnings: a
--- checkpoint's quantization_config), as warnings: none for a preset name, a function or a config table written in a
--- script. M.warnings starts with them; M.build hands them on (model_warnings) for serve's report.
---@param model any
---@return string[]
function M.model_warnings(model)
  if type(model) ~= "table" then return {} end
  local hf = require "neusight.models.hf"
  -- an older --scripts hf.lua without config_warnings says its warning itself, as it did
  return type(hf.config_warnings) == "function" and hf.config_warnings(model) or {}
end

-- The warning of a workload forecast in the default dtype (none given: fp32, the model as from_pretrained loads it
-- without torch_dtype) whose config.json names another for its checkpoint (torch_dtype "bfloat16"): the file's
-- torch_dtype is not read, and a forecast at 4 bytes per element of a bf16 checkpoint must not pass for one in bf16
-- unsaid (Llama-3-8B decode on an H100: 25.6 ms in fp32, 6.8 in bf16). nil otherwise.
local function checkpoint_dtype_note(w)
  if not DEFAULT_DTYPE[w] or type(w.model) ~= "table" then return nil end
  local hf = require "neusight.models.hf"
  if type(hf.config_dtype) ~= "function" then return nil end -- an older --scripts hf.lua
  local path, key, line, value = hf.config_dtype(w.model)
  local named = value and K.dtype_name(value)
  if value and not named then -- "auto", a quantised "int8": no dtype the forecast could take from it, said not dropped
    return ("%s%s: %s %q names no dtype neusight knows (float32, bfloat16, float16, …): the forecast runs in %s, the "
      .. "default dtype; give --dtype (workload field dtype) to forecast another")
      :format(path, line and ":" .. line or "", key, value, w.dtype)
  end
  if not named or named == w.dtype then return nil end
  return ("%s%s: %s %q is not read: the forecast runs in %s, the default dtype (the model as from_pretrained loads it "
    .. "without torch_dtype); give --dtype %s (workload field dtype) to forecast it in its checkpoint's dtype")
    :format(path, line and ":" .. line or "", key, value, w.dtype, named)
end

--- What a normalized workload's forecast does not know, as warnings (the engine adds them to the report's
--- `warnings`): what its model's config file says that is not read (M.model_warnings), its torch_dtype under the
--- default dtype among it (checkpoint_dtype_note); a sequence beyond a rotary model's max_position_embeddings
--- (M.position_limit; prefill, training and inference count seq, decode context + 1); a quantised KV cache in decode
--- (the attention_decode MLP was trained on bf16 caches only) and weight-only quantisation (no such GEMM kernel in the
--- training data); then each field given that changes nothing
--- (a parallel-only field on one GPU, a training-only one in inference: ignored_fields above).
---@param w neusight.Workload
---@return string[]
function M.warnings(w)
  local out = M.model_warnings(w.model)
  out[#out + 1] = checkpoint_dtype_note(w)
  local limit = M.position_limit(w.model)
  if limit and math.type(w.seq) == "integer" then
    local check = require "neusight.models.check"
    local decode = w.mode == "decode" and math.type(w.context) == "integer"
    local n, text = check.positions(w.seq, decode and w.context or nil)
    out[#out + 1] = check.rotary_positions_warning(text, n, limit)
  end
  if w.kv_dtype ~= nil and w.kv_dtype ~= M.kv_default(w.dtype) and w.mode == "decode" then
    out[#out + 1] = ("kv_dtype %s: the decode attention is forecast as the %s kernel of the same shape reading the cache at %s bytes (%g B per element); the attention_decode predictor was trained on bf16 KV caches only (AIConfigurator's fp8-KV rows are not in its data), so this forecast is outside what it was trained on (on those rows of its own training GPUs it scores 11.7-35.2 %% MAPE: weights/ACCURACY.md, section fp8 KV cache (decode))")
      :format(w.kv_dtype, M.kv_default(w.dtype), w.kv_dtype, K.dtype_bytes(w.kv_dtype)) -- the activations' dtype
  end
  if w.weight_dtype ~= nil then
    out[#out + 1] = ("weight_dtype %s: weight-only GEMM kernels are forecast at the utilisation of the %s GEMM of their shape, over the roofline of %g-byte weights (activations and compute at %s); the GEMM predictors were not trained on weight-only quantised kernels")
      :format(w.weight_dtype, w.dtype, K.WEIGHT_BYTES[w.weight_dtype], w.dtype)
  end
  if w.precision == "amp" and w.mode ~= "train" then
    out[#out + 1] = ("precision amp in mode %s: the weights are kept in fp32 (state_gb counts them) and autocast casts "
      .. "each to %s in every forward; those casts are not priced (the latency is that of weights already in %s, as "
      .. "precision pure)"):format(w.mode, w.dtype, w.dtype)
  end
  -- a recipe no trainer runs (neusight.precision unrealistic: pure fp8 training)
  out[#out + 1] = precision.unrealistic(w.precision, w.dtype, w.mode)
  if w.dtype == "fp8" and w.mode == "train" then
    out[#out + 1] = "dtype fp8 in training: the fp8 GEMMs are forecast by gemm_fp8, trained on vLLM inference GEMMs (AIConfigurator's CutlassFP8ScaledMMLinearKernel rows, without their activation quantisation stage here); Transformer Engine's fp8 training GEMMs and its delayed-scaling casts are not in its data, so this forecast is outside what it was trained on"
  end
  for _, note in ipairs(IGNORED[w] or {}) do out[#out + 1] = note end -- what was given and has no effect
  return out
end

--- The KV cache a GPU holds of `bytes`, what one copy of its graph caches, under `plan` (a parallel plan; nil: one
--- GPU's graph, the whole batch): times its microbatches. A parallel run's graph is one microbatch's (batch / (dp ·
--- microbatches) sequences, one tp rank's heads), and every sequence's cache stays resident across microbatches (each
--- microbatch's sequences have their own): a dp replica's GPUs hold the cache of all its batch / dp sequences, whatever
--- the microbatch count. The one rule: M.kv_cache_bytes (the whole graph's) and neusight.parallel.timeline (each
--- pipeline stage's own layers') apply it.
function M.kv_cache_resident(bytes, plan)
  return bytes * (plan and plan.microbatches or 1)
end

--- KV-cache bytes of a graph, every layer: Σ attrs.kv_cache_bytes · count over its nodes (neusight.nodes.kv_cache_write),
--- as the GPUs of `plan` hold them (M.kv_cache_resident). The one rule for the KV cache a run holds: the report's
--- kv_cache_gb and the memory model's kv_cache part both come from here (a pipeline stage holds its own layers' cache:
--- neusight.parallel.timeline).
function M.kv_cache_bytes(nodes, plan)
  local total = 0
  for _, n in ipairs(nodes) do
    local b = type(n.attrs) == "table" and n.attrs.kv_cache_bytes
    if type(b) == "number" then total = total + b * (n.count or 1) end
  end
  return M.kv_cache_resident(total, plan)
end

--- The sliding window of a serving graph's KV cache (neusight.nodes.kv_cache_write attrs.kv_window and
--- kv_windowed_layers): the window W (tokens) and the share of a cached token's bytes that its windowed layers hold
--- (Σ over the cache writes of bytes per cached token · windowed layers / the same · count), so that a sequence of T
--- tokens caches bytes_per_token · ((1 − share) · T + share · min(T, W)) — the rule the decode graph applies (its windowed
--- layers cache min(context + 1, W) tokens). nil, nil for a graph without windowed layers. One window per graph: a
--- second one is an error (no builder makes one).
function M.kv_cache_window(nodes)
  local window, all, windowed = nil, 0, 0
  for _, n in ipairs(nodes) do
    local a = n.attrs
    local b, tokens = type(a) == "table" and a.kv_cache_bytes, type(a) == "table" and a.kv_cache_tokens
    if type(b) == "number" and type(tokens) == "number" and tokens > 0 then
      local per_token = b / tokens
      all = all + per_token * (n.count or 1)
      local layers = a.kv_windowed_layers
      if type(layers) == "number" and layers > 0 then
        if window and a.kv_window ~= window then
          error(("node '%s': a second sliding window (%s tokens; %d before): one window per graph"):format(
            tostring(n.name), tostring(a.kv_window), window), 0)
        end
        window, windowed = a.kv_window, windowed + per_token * layers
      end
    end
  end
  if not window or not (all > 0) then return nil, nil end
  return window, windowed / all
end

-- A config table's keys against the fields its builder reads (README "Writing a model builder"): a builder lists them
-- in M.FIELDS (name and arch, every config table's, need not be listed), or checks them itself behind
-- M.fields(model_type) (llama, moe, deepseek). The check is neusight.models.check fields, the one the bundled builders'
-- build() also runs (a model function may call a builder directly); here it covers a builder of your own
-- (--scripts DIR/neusight/models/<arch>.lua) whose build() does not, and one that lists no M.FIELDS is refused, since
-- a misspelt field would reach its build() as nil, silently a default.
local function fields_check(cfg, builder)
  local who = ("%s model '%s'"):format(tostring(cfg.arch), tostring(cfg.name or "?"))
  if type(builder.FIELDS) == "table" then
    require("neusight.models.check").fields(who, cfg, builder.FIELDS)
  elseif type(builder.fields) ~= "function" then
    error(("%s: the %s model builder (%s) lists no FIELDS: give it M.FIELDS = { <the config fields build() reads> } "
      .. "so that a misspelt field is an error, not nil"):format(who, cfg.arch, builder_file(cfg.arch)), 0)
  end
end

-- An error raised while building a workload about a field of the table its script writes in place for top-level field
-- `outer` ("model": a builder's error about its config; "parallel": the plan's), with the script's line that sets that
-- field when one line certainly does (M.nested_field_line): "<chunkname>:<line>: <message>". Other errors, errors of a
-- workload not from a script or whose `outer` the command line replaced, and non-string ones are returned as they are.
local function error_at(msg, w, outer)
  local src = SOURCE[w]
  if type(msg) ~= "string" or not src or src.overridden(outer) then return msg end
  local key
  if outer == "model" then
    key = msg:match("^[^\n]-: unknown field '([%a_][%w_]*)'") or msg:match("^[^\n]-: field '([%a_][%w_]*)'")
      or msg:match("^[^\n]-: ([%a_][%w_]*) [^\n]- is not supported") -- "hidden_act \"tanh\" is not supported"
      or msg:match("^[^\n]-: ([%a_][%w_]*)%[%d+%] must be") -- "layer_types[3] must be …"
  else -- "parallel.cluster.gpus_per_node: at most 1048576 expected": the last name
    local path = msg:match("^" .. outer .. "%.([%w_%.]+):")
    key = path and path:match("([%a_][%w_]*)$")
  end
  local line = key and M.nested_field_line(src.text, outer, key)
  if not key then
    -- a message naming no one field: the names in its first line (quoted text left out) that the script sets there,
    -- each on one line ("n_embd (1000) must be divisible by n_head (3)", "48 pipeline stage(s) (pp × virtual_stages)
    -- but …"): their line where they share one, else the line of `outer = {` (the table they are in); none: no line
    local first = msg:match("^[^\n]*"):gsub("'[^']*'", ""):gsub('"[^"]*"', "")
    local seen = {}
    for word in first:gmatch("[%a_][%w_]*") do
      local at = not seen[word] and M.nested_field_line(src.text, outer, word)
      seen[word] = true
      if at and line and at ~= line then line = M.field_line(src.text, outer) break end
      line = line or at
    end
  end
  if not line then return msg end
  return ("%s:%d: %s"):format(tostring(src.chunkname), line, msg)
end

-- An error about top-level field `k` found while building (what a builder cannot run): "<chunkname>:<line>: <message>"
-- with the script's line that sets it (M.field_line), "<chunkname>: <message>" without one, the message alone for a
-- workload not from a script; never a script line for a value the command line gave.
local function field_error(w, k, msg)
  local src = SOURCE[w]
  if not src then return msg end
  local line = not src.overridden(k) and M.field_line(src.text, k)
  return tostring(src.chunkname) .. (line and ":" .. line or "") .. ": " .. msg
end

-- What a model function's graph is made of, as one string: each node's op, name, count and shapes (raw, before the
-- defaults are filled: what the function itself wrote). Two calls that give the same string gave the same graph.
local function graph_signature(nodes)
  -- raw reads only: a table's metamethods are not run here (fill_defaults refuses such a table, naming it)
  local function word(v)
    if type(v) == "table" then return getmetatable(v) == nil and "{}" or "meta" end
    return type(v) == "string" and v or (type(v) == "number" and tostring(v) or type(v))
  end
  local function shape(t)
    if type(t) ~= "table" or getmetatable(t) ~= nil then return word(t) end
    local d = {}
    for i = 1, rawlen(t) do d[i] = word(rawget(t, i)) end
    return "[" .. table.concat(d, ",") .. "]"
  end
  local out = {}
  if type(nodes) ~= "table" or getmetatable(nodes) ~= nil then return word(nodes) end
  for i = 1, rawlen(nodes) do
    local n = rawget(nodes, i)
    if type(n) == "table" and getmetatable(n) == nil then
      local ins, inputs = {}, rawget(n, "inputs")
      if type(inputs) == "table" and getmetatable(inputs) == nil then
        for j = 1, rawlen(inputs) do ins[j] = shape(rawget(inputs, j)) end
      end
      out[#out + 1] = ("%s %s %s %s>%s"):format(word(rawget(n, "op")), word(rawget(n, "name")),
        word(rawget(n, "count")), table.concat(ins, ";"), shape(rawget(n, "output")))
    else
      out[#out + 1] = word(n)
    end
  end
  return table.concat(out, "\n")
end

-- The signature of model function `model`'s graph with `changes` made to a copy of `opts` (a parallel plan's
-- micro_batch follows a changed batch), or nil when the function fails there (what it would give is then not known).
local function graph_signature_at(model, opts, changes)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  for k, v in pairs(changes) do o[k] = v end
  if changes.batch and type(opts.parallel) == "table" then
    local plan = {}
    for k, v in pairs(opts.parallel) do plan[k] = v end
    plan.micro_batch = changes.batch
    o.parallel = plan
  end
  local ok, nodes = pcall(model, o)
  if not ok or type(nodes) ~= "table" then return nil end
  return graph_signature(nodes)
end

--- The KV cache a decode graph without KV-cache writes (neusight.nodes.kv_cache_write's attrs.kv_cache_bytes: a model
--- function's) holds: each decode_attention node's K and V inputs (its cache, context + 1 tokens; one tensor for a
--- latent cache, attrs.latent) at the cache's dtype (attrs.kv_dtype, else the node's), set as the node's
--- attrs.kv_cache_bytes so that M.kv_cache_bytes and the parallel timeline count it as they count a cache write's.
--- A graph that has a cache write, or no decode_attention node, is left alone. `nodes` have their defaults filled.
function M.decode_cache_attrs(nodes)
  for _, n in ipairs(nodes) do
    if type(n.attrs) == "table" and type(n.attrs.kv_cache_bytes) == "number" then return end
  end
  for _, n in ipairs(nodes) do
    if n.op == "decode_attention" and type(n.inputs) == "table" then
      local a = n.attrs
      local k, v = K.shape_check(n.inputs[2]), K.shape_check(n.inputs[3])
      if k and v then
        local elems = a.latent == true and k or k + v
        set_attr(n, "kv_cache_bytes", elems * K.dtype_bytes(a.kv_dtype or n.dtype))
      end
    end
  end
end

-- Whether node `n` adds a parameter gradient in backward (M.fuse_wgrad_accumulation, M.gradient_dtypes): it holds
-- parameters, or shares another node's (attrs.tied: GPT-2's lm_head counts none of its own but adds its gradient into
-- the buffer of the node it shares them with); the optimizer step adds none.
local function adds_gradient(n)
  -- LoRA's frozen base (neusight.lora; a raw read: a model function's attrs are checked later)
  if type(n.attrs) == "table" and rawget(n.attrs, "frozen") then return false end
  return (n.params > 0 or (type(n.attrs) == "table" and n.attrs.tied ~= nil)) and n.phase ~= "optimizer"
end

--- Megatron-LM's gradient-accumulation fusion (--gradient-accumulation-fusion, on by default): a linear layer's
--- weight-gradient GEMM accumulates straight into the fp32 main_grad buffer (fused_weight_gradient_mlp_cuda's
--- wgrad_gemm_accum_fp32, beta = 1), so no separate accumulation kernel runs per microbatch for its weight: every
--- node holding parameters gets attrs.wgrad_fused (neusight.rules node_attrs), which the linear rules read (their
--- weight's VECadd goes; a bias's and a norm's accumulation stay, as Megatron's main_grad hooks add those). The
--- GEMM's read of the fp32 buffer it adds to is not priced (compute-bound for the weights it applies to). Applied by
--- graph_of to a training graph of Megatron kernels (a plan with kernels = "megatron"). A node sharing another's
--- weights (attrs.tied: the output layer of tied embeddings, which Megatron-Core runs on the embedding's weight and its
--- main_grad) is fused too, though it holds no parameters of its own: its wgrad GEMM adds into the shared main_grad.
function M.fuse_wgrad_accumulation(nodes)
  for _, n in ipairs(nodes) do
    if adds_gradient(n) then set_attr(n, "wgrad_fused", true) end
  end
end

--- The loss under mixed precision (precision "amp", training): every convention runs cross-entropy in fp32 —
--- torch.autocast has cross_entropy / log_softmax / nll_loss on its fp32 list (it casts 16-bit logits to fp32 first),
--- Transformer Engine's fp8 runs sit inside it, Megatron-LM's vocab-parallel cross-entropy calls .float(). Each
--- cross_entropy node still in a 2- or 1-byte dtype (BERT's losses: BertForPreTraining calls CrossEntropyLoss on its
--- bf16 scores; a model function's) gets that cast as a node of its own before it (`<name>.to_fp32`, ops/cast.lua:
--- reads the logits' dtype, writes fp32; backward the cast back) and runs in fp32 (attrs.from: the logits' dtype,
--- ops/cross_entropy.lua). A loss already in fp32 is left alone: the causal-LM loss of a 16-bit graph, whose cast is
--- HF's own logits.float() (neusight.nodes.causal_lm_loss), so no cast is counted twice. Precision pure keeps BERT's
--- loss in the dtype, as HF runs it without autocast. Returns the node list (a new one when a cast was inserted).
---@param nodes table the training graph (defaults filled)
function M.autocast_loss(nodes)
  local out, changed = {}, false
  for _, n in ipairs(nodes) do
    if n.op == "cross_entropy" and K.dtype_bytes(n.dtype) < 4 and type(n.inputs) == "table"
        and type(n.inputs[1]) == "table" then
      local logits = n.inputs[1]
      out[#out + 1] = { op = "cast", name = n.name .. ".to_fp32", layer = n.layer, count = n.count, dtype = "fp32",
                        inputs = { logits }, output = logits, params = 0,
                        attrs = { from = n.dtype, note = "torch.autocast's cast of the loss's logits to fp32" } }
      set_attr(n, "from", n.dtype)
      n.dtype = "fp32"
      changed = true
    end
    out[#out + 1] = n
  end
  return changed and out or nodes
end

--- The dtypes the accumulate() kernels add gradients in, by precision recipe (neusight.rules grad_accumulate). Every node
--- holding parameters (or sharing another's: attrs.tied, which adds into the same buffer) gets them as attrs where they
--- differ from the node's dtype:
---   amp, torch.autocast (and fp8's Transformer Engine recipe alike): the parameters are fp32, so are their .grad
---     buffers, and each microbatch's gradient (the 16-bit GEMM's, cast back by ToCopyBackward) is added into them in
---     fp32 — attrs.grad_dtype = fp32, 3 × 4 bytes per element (they moved the compute dtype's, half, beside a state_gb
---     of fp32 gradients).
---   amp, Megatron-LM (bf16 / fp8 compute): the weight gradients of linear layers accumulate inside their wgrad GEMM
---     (attrs.wgrad_fused); the bias, norm and embedding hooks add the parameter's 16-bit .grad (the model parameters'
---     dtype, bf16) into its fp32 main_grad — attrs.grad_dtype = fp32, attrs.grad_from = bf16: 2 + 4 + 4 = 10 bytes
---     per element (they were priced at the compute dtype's 3 × 2). fp16 keeps fp16 main gradients: 3 × 2, as the node says.
---   pure: the gradients are in the compute dtype, as node.dtype says: nothing set.
---@param nodes table the training graph (defaults filled)
---@param recipe table neusight.precision recipe()
function M.gradient_dtypes(nodes, recipe)
  if recipe.name ~= "amp" then return end
  local megatron = recipe.convention == "megatron"
  for _, n in ipairs(nodes) do
    if adds_gradient(n) then
      if n.dtype ~= recipe.grad then set_attr(n, "grad_dtype", recipe.grad) end
      if megatron and recipe.param ~= recipe.grad then set_attr(n, "grad_from", recipe.param) end
    end
  end
end

-- The graph of a normalized workload: model name, nodes (defaults filled, fused), plan (parallel runs), the
-- builder options, the routing of a model with routed experts and the position limit (M.position_limit, of the
-- builder looked up here).
local function graph_of(w, gpu, notes)
  local training = w.mode == "train"
  local opts = { batch = w.batch, seq = w.seq, training = training, dtype = w.dtype, loss = w.loss, notes = notes }
  if M.serving(w.mode) then opts.phase, opts.context, opts.kv_dtype = w.mode, w.context, w.kv_dtype or M.kv_default(w.dtype) end
  local par, plan = nil, nil
  -- Activation recomputation is modelled by the timeline only: a one-GPU training run asking for it is a one-device
  -- plan, as one with microbatches is (it used to be ignored).
  if planned(w) then
    par = require("neusight.parallel")
    if gpu == nil then error("parallel: the GPU is needed to price collectives (build(spec, gpu))", 0) end
    local ok, planned_or_error = pcall(par.plan, w.parallel, gpu, w)
    if not ok then error(error_at(planned_or_error, w, "parallel"), 0) end
    plan = planned_or_error
    opts.batch, opts.tp, opts.parallel = plan.micro_batch, plan.tp, plan
    opts.megatron = plan.kernels == "megatron"
    opts.ep = plan.ep
    opts.sequence_parallel = plan.sequence_parallel
  end

  opts.experts = w.experts
  opts.router_skew = w.router_skew
  -- torch.autocast over fp32 modules (precision amp, autocast convention: eager kernels, fp16 / bf16 training): the
  -- builders that model its dtype flow read this (neusight.nodes autocast_cast; the Llama family's dense and MoE
  -- models, DeepSeek, GPT-2, OPT, BERT)
  opts.autocast = training and w.precision == "amp" and not opts.megatron and (w.dtype == "bf16" or w.dtype == "fp16")
    or nil
  local model, name, nodes, routing, positions, signature = w.model, nil, nil, nil, nil, nil
  if type(model) == "function" then
    opts.attention = w.attention or (M.sdpa_by_default(w.dtype) and "sdpa" or "eager")
    nodes, name = model(opts)
    if type(nodes) ~= "table" then
      error(("model function must return an array of nodes (got %s)"):format(show(nodes)), 0)
    end
    name = name or "custom"
    signature = graph_signature(nodes)
    for _, g in ipairs(plan and { "tp", "ep" } or {}) do -- a function model shards itself; make sure it did
      local sharded = plan[g] == 1
      for _, n in ipairs(nodes) do
        if type(n) == "table" and type(n.attrs) == "table" and n.attrs.group == g then sharded = true end
      end
      if not sharded then
        -- a setting this model cannot run (neusight.infeasible): `search` skips such a layout with this reason
        -- (a model function file searched without sharding itself keeps its tp 1 layouts), predict stops on it
        require("neusight").infeasible(("parallel.%s: the model function ignored opts.%s = %d (its graph has no %s "
          .. "collective; add them with neusight.parallel.comm_node)")
          :format(g, g, plan[g], g == "tp" and "tensor-parallel" or "expert-parallel"))
      end
    end
  else
    local cfg = type(model) == "string" and presets[model] or model
    local builder = require("neusight.models." .. cfg.arch)
    -- a config.json's "use_cache": false: HF's inference forward keeps no past_key_values (neusight.nodes hf_cache)
    local hf = require "neusight.models.hf"
    if type(hf.use_cache) == "function" and not hf.use_cache(cfg) then opts.use_cache = false end
    -- a layout this builder cannot shard is a setting it cannot run (neusight.infeasible, as for a model function
    -- above): `search` skips that layout with the reason, predict stops on it with the same message
    local cannot = require("neusight").infeasible
    if plan and plan.tp > 1 and not builder.tensor_parallel then
      cannot(error_at(("parallel.tp: the %s model builder (%s) has no tensor-parallel "
        .. "sharding; use tp = 1"):format(cfg.arch, builder_file(cfg.arch)), w, "parallel"))
    end
    if plan and plan.sequence_parallel and not builder.sequence_parallel then
      cannot(error_at(("parallel.sequence_parallel: the %s model builder (%s) does not "
        .. "implement it; drop sequence_parallel (--sequence-parallel): tensor parallelism alone runs"):format(cfg.arch,
        builder_file(cfg.arch)), w, "parallel"))
    end
    if plan and plan.ep > 1 and not builder.expert_parallel then
      cannot(error_at(("parallel.ep: the %s model builder (%s) has no experts to spread; "
        .. "use ep = 1"):format(cfg.arch, builder_file(cfg.arch)), w, "parallel"))
    end
    if opts.phase and not (type(builder.serving) == "table" and builder.serving[opts.phase]) then
      error(field_error(w, "mode", ("field 'mode': the %s model builder (%s) has no %s phase "
        .. "(decoder-only models with a KV cache: gpt, opt, llama, moe, deepseek); use mode = \"inference\"")
        :format(cfg.arch, builder_file(cfg.arch), opts.phase)), 0)
    end
    local has_sdpa = type(builder.attention) == "table" and builder.attention.sdpa
    if w.attention == "sdpa" and not has_sdpa then
      error(field_error(w, "attention", ("field 'attention': the %s model builder (%s) has "
        .. "no sdpa attention; use attention = \"eager\""):format(cfg.arch, builder_file(cfg.arch))), 0)
    end
    -- a builder whose HF default is sdpa at every dtype (M.sdpa_any_dtype: the Llama family, its MoE types and
    -- DeepSeek, which no fp32 NeuSight trace covers) takes it in fp32 too on HF's kernels; Megatron's fp32 attention
    -- stays eager (its fused kernels are 16-bit)
    local sdpa_default = M.sdpa_by_default(w.dtype) or (builder.sdpa_any_dtype == true and not opts.megatron)
    opts.attention = w.attention or (has_sdpa and sdpa_default and "sdpa" or "eager")
    -- a builder with routed experts and no M.experts runs HF's loop only; builders without experts ignore the field
    -- (ignored_fields has warned of it)
    local impls = type(builder.experts) == "table" and builder.experts or { loop = true }
    if w.experts ~= nil and builder.num_experts and not impls[w.experts] then
      local have = {}
      for impl in pairs(impls) do have[#have + 1] = impl end
      table.sort(have)
      error(field_error(w, "experts", ("field 'experts': the %s model builder (%s) has no "
        .. "%q experts; use experts = \"%s\""):format(cfg.arch, builder_file(cfg.arch), w.experts, table.concat(have, "\" or \""))), 0)
    end
    local ok, built = pcall(function()
      fields_check(cfg, builder)
      return builder.build(cfg, opts)
    end)
    if not ok then error(error_at(built, w, "model"), 0) end
    nodes = built
    if plan and plan.tp > 1 then
      -- the model FLOPs count a node several tp ranks run alike once (neusight.parallel.shard mark_replicated): told
      -- by the same builder's graph at tp = 1 (and, for key/value heads shared by ranks, at the divisors of tp)
      local whole_opts = {}
      for k, v in pairs(opts) do whole_opts[k] = v end
      whole_opts.tp, whole_opts.sequence_parallel = 1, false
      local whole_ok, whole = pcall(builder.build, cfg, whole_opts)
      if not whole_ok then error(error_at(whole, w, "model"), 0) end
      par.mark_replicated(nodes, whole, plan.tp, function(d) -- the graph at tp = d (nil where the builder refuses d)
        local at = {}
        for k, v in pairs(whole_opts) do at[k] = v end
        at.tp = d
        local ok_d, graph = pcall(builder.build, cfg, at)
        return ok_d and graph or nil
      end)
    end
    if plan and plan.ep > 1 then
      -- a local expert's weights (attrs.expert) are 1 / ep of the model's: its gradient accumulation times ep is the
      -- model's (engine/core/forecast.h phase_model_flops; neusight.figures counts it once per model parameter)
      for _, n in ipairs(nodes) do
        if type(n.attrs) == "table" and n.attrs.expert then
          local attrs = { model_flops_shards = plan.ep }
          for k, v in pairs(n.attrs) do
            if k ~= "model_flops_shards" then attrs[k] = v end
          end
          n.attrs = attrs
        end
      end
    end
    name = cfg.name or (type(model) == "string" and model) or cfg.arch
    positions = rotary_limit(cfg, builder)
    if builder.top_k and builder.num_experts then
      -- how the routed experts ran (neusight.models.moe.implementation: the field, else HF's loop), for the report
      local moe_lib = require("neusight.models.moe")
      routing = { k = builder.top_k(cfg), E = builder.num_experts(cfg),
                  experts = moe_lib.implementation(opts, name),
                  -- the imbalance assumed where it is priced: expert parallelism (neusight.models.moe busiest_rank_rows)
                  router_skew = (opts.ep or 1) > 1 and builder.router_skew and moe_lib.router_skew(opts.router_skew, name)
                    or nil }
    end
  end
  if training and w.lora_rank then -- LoRA: the base frozen, adapters on the targeted linears (neusight.lora)
    local autocast = false -- the builder ran the graph under torch.autocast: its GEMMs' fp32 weight casts
    for _, n in ipairs(nodes) do
      if type(n) == "table" and type(n.attrs) == "table" and n.attrs.autocast_weight then autocast = true break end
    end
    local ok, out, info = pcall(require("neusight.lora").apply, nodes, name, w.lora_rank, w.lora_targets, autocast)
    if not ok then error(field_error(w, w.lora_targets and "lora_targets" or "lora_rank", tostring(out)), 0) end
    nodes, opts.lora = out, info
  end
  fill_defaults(nodes, w)
  if training and w.precision == "amp" then nodes = M.autocast_loss(nodes) end
  if training and opts.megatron then M.fuse_wgrad_accumulation(nodes) end
  if w.dtype == "fp8" then M.fp8_dtypes(nodes, plan, opts.phase ~= nil) end  -- before the cache's bytes and the activations' quantisation
  if opts.phase == "decode" then M.decode_cache_attrs(nodes) end
  if w.weight_dtype then M.quantise_weights(nodes, K.WEIGHT_BYTES[w.weight_dtype]) end
  if not training then M.quantise_activations(nodes) end
  local fused  -- the fused nodes' members' forward kernels, by name (neusight.fusion apply): the pipeline's bound
  if w.fusion then  -- loaded only when asked for: start-up time matters
    local fusion = require("neusight.fusion")
    local fopts = fusion.options(w.fusion)
    if fopts then nodes, fused = fusion.apply(nodes, fopts) end
  end
  if plan then -- more pipeline stages than the graph has layers: said now, at the script's line, not after the forecast
    local stages = require("neusight.parallel.stages")
    local ok, e = pcall(stages.stages_check, stages.layer_count(nodes), plan.pp * plan.virtual_stages)
    if not ok then error(error_at(e, w, "parallel"), 0) end
  end

  return name, nodes, plan, opts, routing, positions, signature, fused
end

--- Parameters a token touches in a graph of routed experts: Σ params · count with the routed experts' weights
--- (attrs.expert) scaled by k / E — attention, dense MLPs, shared experts, routers, norms, embeddings and the LM head
--- in full (neusight.models.moe.active_of). `routing` = { k, E } from the builder (top_k, num_experts). The graph's
--- scope is params': one tensor-parallel rank's shard in a parallel run, whose E / ep local experts under expert
--- parallelism take k / ep of a token's experts on average (the same k / E share). nil for a graph without routed
--- experts (a dense model: every parameter is active, and the report says nothing more).
function M.active_params(nodes, routing)
  if not routing then return nil end
  for _, n in ipairs(nodes) do
    if type(n.attrs) == "table" and n.attrs.expert and (n.params or 0) > 0 then
      return require("neusight.models.moe").active_of(nodes, routing.k, routing.E)
    end
  end
  return nil
end

-- The KV cache a graph's GPU holds (M.kv_cache_bytes): a serving phase's (0 when it writes none), or in inference the
-- cache HF's forward keeps in its past_key_values (neusight.nodes hf_cache; nil when the builder marks none: a model
-- without a KV cache, or Megatron-LM's kernels); in training the part of it autograd does not keep anyway (hf_cache:
-- eager attention with grouped-query heads on one GPU), nil where there is none.
local function held_cache(opts, nodes, plan)
  if opts.phase then return M.kv_cache_bytes(nodes, plan) end
  local bytes = M.kv_cache_bytes(nodes, plan)
  return bytes > 0 and bytes or nil
end

-- The memory of a run (neusight.memory): for a single GPU the report itself (with the largest batch that fits,
-- rebuilding the graph at other batches); for a parallel run nil, its context going to the timeline as plan.memory,
-- with at_micro_batch(live, mb): the bytes per GPU of the fullest stage at micro-batch size mb (live's dp and
-- microbatches: global batch mb · dp · microbatches), the graph rebuilt there and measured by the timeline's own
-- per-stage memory (neusight.parallel.memory at) under the plan `live` as it runs (a search re-times a build with
-- another schedule or recomputation), for the largest micro-batch that fits (neusight.parallel.memory report).
local function memory_of(w, gpu, nodes, plan, recipe, state, kv)
  local memory = require "neusight.memory"
  local rule_of = memory.engine_rules()
  local function context(ns, kv_bytes, batch)
    return memory.context { nodes = ns, rule_of = rule_of, training = w.mode == "train", state = state,
      recipe = recipe, kv_cache_bytes = kv_bytes, gpu_mem_gb = gpu and gpu.mem_gb, gpu_vendor = gpu and gpu.vendor,
      gpu_reported_gib = memory.reported_gib(gpu), mode = w.mode, batch = batch }
  end
  local ctx = context(nodes, kv, w.batch)
  if plan then
    plan.memory = ctx
    ctx.at_micro_batch = function(live, mb)
      local wb = {}
      for k, v in pairs(w) do wb[k] = v end
      wb.batch = mb * live.dp * live.microbatches
      local ok, failed, ns, p, opts = pcall(graph_of, wb, gpu)
      if not ok then -- the model at a micro-batch the run did not ask for: the largest is not known, the run still is
        error(("at micro-batch %d, global batch %d (built while finding the largest micro-batch that fits): %s")
          :format(mb, wb.batch, tostring(failed)), 0)
      end
      p.schedule, p.recompute = live.schedule, live.recompute
      p.memory = context(ns, held_cache(opts, ns, p), wb.batch)
      return require("neusight.parallel.memory").at(p, ns)
    end
    return nil
  end
  local function at_batch(b)
    local wb = {}
    for k, v in pairs(w) do wb[k] = v end
    wb.batch = b
    local ok, failed, ns, _, opts = pcall(graph_of, wb, gpu)
    if not ok then -- the model at a batch the run did not ask for: the largest batch is not known, the run still is
      error(("at batch %d (built while finding the largest batch that fits): %s"):format(b, tostring(failed)), 0)
    end
    return memory.single(context(ns, held_cache(opts, ns), b)).total
  end
  local ok, at = pcall(function() at_batch(1) return at_batch end) -- a builder that refuses batch 1: no search
  return memory.single(ctx, ok and at or nil)
end

-- Whether node n is a flash_attention node --flash-attention made (`fused`: neusight.fusion apply's members, by node
-- name), not one a model function built itself.
local function fused_flash(n, fused)
  return n.op == "flash_attention" and fused ~= nil and fused[n.name] ~= nil
end

-- The attention a model function's graph ran, whatever opts.attention said (a function may build its sdpa nodes at
-- every dtype: fp32's default is "eager"): "sdpa" with a fused attention node (sdpa, flash_attention), else "eager"
-- with a softmax node (the matmul-softmax-matmul chain), else nil (no attention: an MLP, a state-space model). It
-- had said opts.attention: a ViT of sdpa nodes in fp32 was reported "eager attention", without the fp32 fused-
-- attention warning, and a Mamba graph "sdpa attention". A flash_attention node --flash-attention made (`fused`:
-- neusight.fusion apply's members, by node name) is the eager chain it fused: "eager", as a builder's graph says.
local function graph_attention(nodes, fused)
  local softmax = false
  for _, n in ipairs(nodes) do
    local made = fused_flash(n, fused)
    if (n.op == "sdpa" or n.op == "flash_attention") and not made then return "sdpa" end
    softmax = softmax or n.op == "softmax" or made
  end
  return softmax and "eager" or nil
end

-- What a model function's graph (`nodes`, defaults filled; `signature` its raw graph_signature; `name` the model's)
-- does not honour of the options it was given, told by calling it again with one option changed (a call that fails
-- tells nothing): the warnings, each { id = a stable name of the check, text = what it says }, and an error for a
-- decode step that reads no KV cache. The id is what says two warnings are the same: `neusight search` tells each once
-- over its layouts (engine/cli/search_cmd.cpp search_warnings::model), though the numbers in its text (the layout's
-- batch, its parameters) differ. Builders declare what they implement (M.serving, sequence_parallel, …) and graph_of
-- refuses the rest; a function declares nothing.
local function function_checks(w, opts, nodes, name, signature)
  local out, model = {}, w.model
  local function warn(id, text) out[#out + 1] = { id = id, text = text } end
  local function same(changes) return graph_signature_at(model, opts, changes) == signature end
  local b = opts.batch
  for _, other in ipairs { 2 * b, b > 1 and 1 or nil } do
    local at = graph_signature_at(model, opts, { batch = other })
    if at then
      if at == signature then
        warn("batch_ignored", ("model function '%s' gives the same graph at batch %d and %d: it ignores opts.batch, so the "
          .. "forecast is of its fixed graph whatever the batch (the throughput still counts %d sequences%s); build its "
          .. "shapes from opts.batch"):format(name, b, other, w.batch,
            type(opts.parallel) == "table" and (opts.parallel.dp or 1) > 1
              and ", and the data-parallel replicas split a batch it does not read" or ""))
      end
      break
    end
  end
  if opts.phase == "decode" then
    local reads_cache = false
    for _, n in ipairs(nodes) do
      if type(n.attrs.kv_cache_bytes) == "number" then reads_cache = true end
    end
    local C = opts.context
    if not reads_cache and (graph_signature_at(model, opts, { context = 2 * C }) or signature) == signature then
      error(field_error(w, "mode", ("field 'mode': model function '%s' has no decode step: its graph has no "
        .. "decode_attention node or KV-cache write (neusight.nodes.kv_cache_write) and does not change with "
        .. "opts.context (%d, %d), so it is not a step over a KV cache; build one when opts.phase == \"decode\" (README "
        .. "\"Workloads\"), or use mode = \"inference\""):format(name, C, 2 * C)), 0)
    end
  elseif opts.phase == "prefill" then
    local writes = false
    for _, n in ipairs(nodes) do
      if type(n.attrs.kv_cache_bytes) == "number" then writes = true end
    end
    if not writes then
      warn("prefill_no_kv_write", ("mode prefill: model function '%s' writes no KV cache (no node with attrs.kv_cache_bytes: "
        .. "neusight.nodes.kv_cache_write): the prefill is forecast as its forward pass and kv_cache_gb is 0"):format(name))
    end
  end
  if opts.sequence_parallel and same { sequence_parallel = false } then
    warn("sequence_parallel_ignored", ("sequence_parallel: model function '%s' gives the same graph without it (it ignores "
      .. "opts.sequence_parallel): the forecast is of tensor parallelism without sequence parallelism"):format(name))
  end
  -- parameters: a linear / addmm node's weight is in × out elements (neusight.memory gemm_weight_elems); fewer
  -- declared parameters than that leave weights out of the model state (and the optimizer step)
  local declared = 0
  for _, n in ipairs(nodes) do declared = declared + n.params * n.count end
  -- (a node whose shape is no shape fails here: the engine's node check refuses it after the build, naming it)
  local shaped, weights = pcall(require("neusight.memory").gemm_weight_elems, nodes)
  if shaped and weights > declared then
    warn("params_undeclared", ("model function '%s': its linear/addmm nodes hold %.4g weight elements (in × out features) but "
      .. "its nodes declare %.4g parameters (field 'params'): the model state%s only the declared ones; give "
      .. "each node with weights its params"):format(name, weights, declared,
        w.mode == "train" and w.optimizer ~= "none" and ", the gradients and the optimizer step count" or " counts"))
  end
  return out
end

--- The builder's graph of a normalized workload: model name, nodes, parallel plan (or nil), builder opts. No optimizer
--- node, no memory (M.build adds them); `gpu` only prices collectives of a parallel plan. `notes` (optional, a table):
--- the builder's notes on the kernels it chose (Gemma-2's soft-capping under sdpa, a sliding window's kernel) are
--- appended to it, not said on stderr, for a build no forecast is made of (neusight.catalog's listing); the builder
--- gets it as opts.notes. Collected, a note is not used up: a later forecast of the model still says it.
---@return string model_name
---@return neusight.Node[] nodes
M.graph = function(w, gpu, notes) return graph_of(w, gpu, notes) end

--- Expands a workload into its build: one table of what the engine and the report read of it,
---   model           the model's name
---   nodes           neusight.Node[]: the graph
---   plan            neusight.parallel.plan() of a parallel run, else nil
---   state           the model state per parameter (neusight.precision.state: weights, gradients, master,
---                   optimizer_state bytes); the engine hands it to neusight.precision.state_report with the graph's
---                   parameters, and the report shows that (the field then holds the state report)
---   kv_cache_bytes  serving phases: the KV cache a GPU holds over all its microbatches, every layer (one tp rank's
---                   heads; M.kv_cache_bytes; nil in train and inference)
---   kv_window, kv_window_share  serving phases of a sliding-window model: M.kv_cache_window (nil otherwise)
---   memory          single-GPU runs: neusight.memory.single() (memory_gb, memory, lines, warning?); parallel runs nil
---                   (the timeline reports it from plan.memory)
---   active_params   M.active_params: a token's parameters (mixtures of experts only)
---   experts         how the routed experts ran, "loop" or "grouped" (mixtures of experts only)
---   attention       the attention implementation the graph was built with, "eager" or "sdpa" (the field, else the
---                   default: M.sdpa_by_default, the builder's M.sdpa_any_dtype); nil in decode (the decode kernel)
---   router_skew     the load imbalance assumed under expert parallelism (mixtures of experts only; neusight.models.moe)
---   max_positions   M.position_limit: the max_position_embeddings a rotary model runs beyond with a warning (serve
---                   holds its requests' lengths to it)
---   warnings        what building found (a model function's checks, …), texts; warning_ids: each one's stable id,
---                   by the same index (what says two layouts' warnings are one: neusight search tells it once)
---   model_warnings  M.model_warnings: what the model's config file says that the forecast does not read (serve's
---                   report says them; predict's has them among M.warnings)
---   fused_members   under fusion: neusight.fusion apply's members (each fused node's members' forward kernels)
--- The engine adds `source` and hands the table to neusight.report.workload.
--- In training with an optimizer, one optimizer node
--- { op = <optimizer>, phase = "optimizer", inputs = {{P}}, dtype = the step's, attrs = element sizes by role
--- and the implementation (neusight.precision.optimizer_attrs) } is appended, P = Σ params · count.
--- In a serving phase (mode "prefill" / "decode") the builder gets opts.phase and opts.context.
--- The precision recipe's "amp" convention is Megatron-LM's when Megatron kernels run the model (a parallel plan with
--- kernels = "megatron"), PyTorch autocast's otherwise.
--- With a `parallel` table asking for more than one GPU or microbatch, the graph is one rank's
--- microbatch (batch / (dp · microbatches), sharded over tp) and `plan` is neusight.parallel.plan()
--- for the engine's timeline (nil otherwise). `gpu` (the GPU view) prices the collectives.
--- A builder's or the plan's error about a field of the model config or parallel table the script (M.normalize's
--- `text`) writes in place names the line that sets it (M.nested_field_line).
--- `origin` (the engine's: the workload's source, and a --model config.json) has every node checked against its rule
--- (the engine's check_nodes, naming the line of the script that writes a node: M.node_located) before the memory
--- report calls the rules' hooks on them, and the build's `nodes_checked` says it was.
---@param spec table a workload table (normalized here if it was not already)
---@param gpu? table
---@param origin? string
---@return table build
function M.build(spec, gpu, origin)
  local w = M.normalize(spec)
  local training = w.mode == "train"
  local name, nodes, plan, opts, routing, positions, signature, fused = graph_of(w, gpu)
  -- what building found, as text (`warnings`) and each warning's id beside it (`warning_ids`: function_checks')
  local warnings, warning_ids = {}, {}
  local function warn(id, text)
    warning_ids[#warnings + 1] = id
    warnings[#warnings + 1] = text
  end
  for _, c in ipairs(type(w.model) == "function" and function_checks(w, opts, nodes, name, signature) or {}) do
    warn(c.id, c.text)
  end
  -- what the graph ran: a builder's is the opts it built from; a model function's, its nodes (graph_attention)
  local attention = opts.attention
  if type(w.model) == "function" then attention = graph_attention(nodes, fused) end
  -- fused attention in fp32/tf32 (the Llama family's HF default at every dtype, or asked for): no such kernel was measured
  if attention == "sdpa" and opts.phase ~= "decode" and (w.dtype == "fp32" or w.dtype == "tf32") then
    warn("sdpa_fp32", ("attention sdpa in %s: PyTorch runs it as the memory-efficient kernel (FlashAttention takes "
      .. "16-bit inputs only); the attention_prefill predictor was trained on 16-bit FlashAttention kernels alone "
      .. "(AIConfigurator), so it prices these at the fp32 matrix peak, outside what it was trained on (no fp32 "
      .. "fused-attention measurement exists here); attention = \"eager\" prices the matmul-softmax-matmul chain the "
      .. "fp32 NeuSight traces measured"):format(w.dtype))
  end
  -- --flash-attention fuses eager matmul → softmax → matmul blocks (neusight.fusion): with none in the graph (sdpa attention,
  -- already one FlashAttention kernel per layer; a decode step; a builder whose eager chain the pass does not match) it
  -- fuses no attention, and says so rather than leave a forecast that reads as flash-attention's
  local fopts = w.fusion and require("neusight.fusion").options(w.fusion)
  if fopts and fopts.flash_attention then
    local found = false -- a flash_attention node the pass made (a model function may build its own: not fused here)
    for _, n in ipairs(nodes) do
      if fused_flash(n, fused) then found = true break end
    end
    if not found then
      -- a decode step first: its decode kernel is the same under either attention, so --attention eager fuses nothing
      -- either; sdpa is the graph's (`attention`: a model function's, its nodes'), and only a builder takes --attention
      local decode, sdpa = opts.phase == "decode", attention == "sdpa"
      local builder_sdpa = sdpa and not decode and type(w.model) ~= "function"
      warn("flash_attention_none", ("--flash-attention (fusion = \"flash_attention\"): model '%s' has no eager "
        .. "matmul-softmax-matmul attention block to fuse (%s), so it changes nothing beyond --fusion's element-wise "
        .. "fusion; %s"):format(tostring(name),
          decode and "a decode step runs one decode-attention kernel per layer"
          or sdpa and "its attention is sdpa, already one fused FlashAttention kernel per layer"
          or "its attention chain is not one the fusion pass matches: scripts/neusight/fusion.lua",
        builder_sdpa and "give --attention eager (workload field attention = \"eager\") to fuse the eager chain, or "
          .. "--fusion alone" or "give --fusion alone"))
    end
  end
  -- a mixture of experts under tensor parallelism in Megatron training (kernels "megatron") without sequence
  -- parallelism: the builders that model Megatron-Core's token dispatcher (builder.token_dispatcher: moe, deepseek)
  -- forecast it as vLLM-style tensor parallelism, which Megatron-Core refuses in training (TransformerConfig
  -- raises: "performance may degrade if MoE and tensor parallelism are enabled without also enabling sequence
  -- parallelism"). Said, not switched on:
  -- the flag's absence is how one asks for tp without it (eager kernels, serving engines' tensor parallelism), and
  -- sequence parallelism changes the dense layers too. neusight search says it once (warning id) for its layouts.
  if routing and plan and plan.training and plan.tp > 1 and not plan.sequence_parallel and opts.megatron then
    local _, builder = model_builder(w.model)
    if builder and builder.token_dispatcher then
      warn("moe_tp_without_sequence_parallel", ("parallel: mixture of experts '%s' with tp > 1 in training without "
        .. "sequence parallelism is forecast as vLLM-style tensor parallelism (every tp rank routes all of its "
        .. "sequence's tokens, its expert-parallel all-to-alls carry all n·k routed rows, an all-reduce after the "
        .. "block), which Megatron-Core refuses in training (MoE with tensor parallelism needs sequence "
        .. "parallelism); --sequence-parallel (parallel.sequence_parallel = true) forecasts its all-to-all token "
        .. "dispatcher: each tp rank routes its own n/tp tokens and sends 1/tp of the all-to-all rows (the README's "
        .. "parallel training section has a worked example)"):format(tostring(name)))
    end
  end
  if plan and plan.training and plan.recompute == "selective" then
    local tagged = false
    for _, n in ipairs(nodes) do
      if n.attrs.core_attention == true then tagged = true end
    end
    if not tagged then
      warn("selective_untagged", ("recompute selective: no node of model '%s' is tagged core attention "
        .. "(attrs.core_attention = true: QKᵀ, softmax, ·V): nothing is recomputed, the forecast is recompute none's")
        :format(name))
    end
  end
  local active = M.active_params(nodes, routing) -- before the optimizer node (it has no parameters either way)
  local recipe = plan and plan.precision or precision.recipe(w.precision, w.dtype, precision.convention(false), w.mode)
  if training then M.gradient_dtypes(nodes, recipe) end
  -- no model has 2^48 (2.8e14, K.MAX_ELEMENTS) parameters, the largest ~1e12: more is a size or count out of range in
  -- the config
  -- (n_positions = 2^62 made a 2^70-parameter position table, forecast with exit 0; found by tests/fuzz/mutate.py). In
  -- training the optimizer step's tensor says so below, as it did.
  local stepped = training and w.optimizer ~= "none"
  local P, P_float = 0, 0.0 -- the step's parameters: a LoRA graph's frozen base takes no step (neusight.lora)
  for _, n in ipairs(nodes) do
    if not (opts.lora and n.attrs.frozen) then P = P + n.params * n.count end -- (attrs read only under LoRA: a model
    -- function's attrs are checked after this)
    P_float = P_float + n.params * 1.0 * n.count
  end
  if P_float >= K.MAX_ELEMENTS then
    -- the step's tensor holds every parameter: beyond 2^48 elements (a huge layer count) the integer sum would wrap
    -- (found by the hf_config fuzz target: a negative dimension from num_decoder_layers = 442949672968)
    error((stepped and "model '%s': %.4g parameters, more than the %s elements of the optimizer step's tensor"
      or "model '%s': %.4g parameters, more than %s (%s; the largest models have about 1e12): a size or "
        .. "count of its config is out of range"):format(tostring(name), P_float, K.MAX_ELEMENTS_TEXT,
        (("%.1e"):format(K.MAX_ELEMENTS):gsub("e%+0*", "e"))), 0)
  end
  if stepped then
    if P > 0 then
      nodes[#nodes + 1] = {
        op = w.optimizer, name = "optimizer." .. w.optimizer, layer = "", phase = "optimizer",
        inputs = { { P } }, output = { P }, dtype = precision.step_dtype(recipe), count = 1, params = 0,
        attrs = precision.optimizer_attrs(recipe, w.optimizer_impl),
      }
    end
  end
  -- a node repeated 2^63 - 1 times (a layer count of math.maxinteger) forecast 4.5e18 ms, exit 0 (tests/fuzz/mutate.py);
  -- checked after the parameters, whose message says more of a config's layer count
  for i, n in ipairs(nodes) do
    if n.count > 2 ^ 24 then
      error(("model '%s': node #%d '%s': field 'count' must be at most 2^24 (16777216 repetitions; got %s)")
        :format(tostring(name), i, n.name, show(n.count)), 0)
    end
  end
  local state = precision.state(recipe, w.optimizer, training)
  if opts.lora then
    local lora = require("neusight.lora")
    local _, trainable, all = lora.state(state, nodes)
    opts.lora.trainable = trainable -- the adapters' parameters (× count): the one count, for the warning and JSON
    warn("lora", ("LoRA rank %d on %s (%d linear nodes): %.4g M trainable parameters, %.3g %% of %.4g B; the base "
      .. "model frozen (no weight gradients, accumulation or optimizer state), precision %s%s; lora_alpha and "
      .. "dropout 0 cost nothing; QLoRA (4-bit base) is not modelled")
      :format(w.lora_rank, table.concat(opts.lora.names, ","), opts.lora.linears, trainable / 1e6,
        100 * trainable / all, all / 1e9, recipe.name, recipe.name == "pure"
          and (" (the base loaded in %s, adapters too: PEFT's fp32 adapters are not modelled)"):format(w.dtype)
          or " (an fp32 model under torch.autocast)"))
  end
  -- fp8 (W8A8) inference keeps its embeddings, norms and LM head in bf16 (M.fp8_dtypes), as an FP8 checkpoint does,
  -- beside 1-byte linears (precision pure; amp keeps fp32 weights, which autocast casts)
  local w8a8 = not training and w.dtype == "fp8" and w.precision == "pure"
  if w.weight_dtype then
    state.weights = weights_per_param(nodes, K.WEIGHT_BYTES[w.weight_dtype],
      w8a8 and K.dtype_bytes(M.W8A8_KEPT) or state.weights)
  elseif w8a8 then
    state.weights = M.w8a8_weights_per_param(nodes, state.weights)
  end
  -- the engine's node check before the rules' hooks run on the nodes (the memory report's saves): a node with too
  -- few inputs was reported from the rule's file ("ops/sdpa.lua:17: … needs input #3") without the workload's line
  local engine_ok, engine = pcall(require, "neusight")
  local checked = origin ~= nil and engine_ok and type(engine) == "table" and type(engine.check_nodes) == "function"
    and type(engine.model_where) == "function"
  if checked then
    local where = engine.model_where(origin, type(name) == "string" and name or "custom")  -- the engine's words
    engine.check_nodes(nodes, where, M.node_located(w, nodes))
  end
  local kv = held_cache(opts, nodes, plan)
  local kv_window, kv_window_share
  if opts.phase then kv_window, kv_window_share = M.kv_cache_window(nodes) end
  local mem = memory_of(w, gpu, nodes, plan, recipe, state, kv)
  if mem and mem.max_batch_error then
    warn("max_batch_unknown", ("the largest batch that fits is not shown: model '%s' fails %s"):format(name,
      mem.max_batch_error))
  end
  return { model = name, nodes = nodes, nodes_checked = checked, plan = plan, state = state, kv_cache_bytes = kv,
           kv_window = kv_window, kv_window_share = kv_window_share,
           memory = mem, active_params = active, warnings = warnings, warning_ids = warning_ids,
           experts = routing and routing.experts, router_skew = routing and routing.router_skew,
           -- LoRA (neusight.lora): { rank, targets = "q_proj,…", trainable = the adapters' parameters }; nil otherwise
           lora = opts.lora and { rank = w.lora_rank, targets = table.concat(opts.lora.names, ","),
                                  trainable = opts.lora.trainable } or nil,
           max_positions = positions, model_warnings = M.model_warnings(w.model),
           -- under fusion: each fused node's members' forward kernels, unfused, by the fused node's name (neusight.fusion
           -- apply), which neusight.pipeline prices beside it (neusight.fusion cap); nil without fusion
           fused_members = fused,
           -- "eager" | "sdpa": what the graph ran (the default depends on dtype and family); a decode step's attention
           -- is the decode kernel whatever it says (neusight.nodes decode_attention): none there
           attention = opts.phase ~= "decode" and attention or nil }
end

return M
