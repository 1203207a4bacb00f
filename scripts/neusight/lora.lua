-- scripts/neusight/lora.lua — LoRA fine-tuning (workload fields lora_rank, lora_targets; --lora-rank, --lora-targets):
-- the training graph of HF PEFT's LoraLayer, `result = base(x) + lora_B(lora_A(dropout(x))) * scaling`, on each
-- targeted nn.Linear, with every parameter of the base model frozen.
--
-- apply(nodes, …) rewrites a built training graph (before neusight.workload fill_defaults):
--   * every node holding parameters gets attrs.frozen (neusight.rules node_attrs): the linear rules keep the dgrad
--     GEMM (dX = dY·W: activations' gradients still flow) and drop the wgrad GEMM and the accumulation; norms' and
--     the RMSNorm weights' accumulation go; the embedding runs no backward (the token ids take no gradient). A frozen
--     linear saves no input (autograd saves x only for dW): its adapter's lora_A saves it instead, once per group of
--     linears reading one saved input (q/k/v, gate/up: neusight.nodes linear's `shared`).
--   * after each targeted linear (in I → out O, rows T): lora_A Linear(T, I, R), lora_B Linear(T, R, O) (no bias;
--     their own forward, dgrad and wgrad GEMMs and accumulation), lora_scaling (·scaling, a scalar: VECmul) and
--     lora_add (base + adapter). Parameters R·(I + O) per targeted linear.
--   * the precision recipe is the run's: LoRA's default is "pure" (neusight.workload normalize: HF / PEFT load the
--     base in torch_dtype, bf16, so activations and every weight are bf16 and autocast casts nothing); under an
--     explicit amp the model is fp32 under torch.autocast, as for full fine-tuning, and each adapter weight is cast
--     per forward like the base's (neusight.nodes g.add).
-- state(…) is the model state per parameter averaged over the graph's parameters (as neusight.workload's weight-only
-- quantisation does): every weight at the recipe's bytes, the gradients, master copies and moments of the adapters
-- alone (so the optimizer step and its state cover the adapters alone). PEFT's default fp32 adapters under a bf16
-- base (autocast_adapter_dtype) are not modelled: pure keeps them bf16 (8 B per adapter parameter less).
-- Not modelled: lora_alpha (scaling's value costs nothing), lora_dropout > 0 (PEFT's default is 0: an Identity),
-- QLoRA (4-bit base weights: weight_dtype is refused in training), parallel plans, layer 0's skipped input-gradient
-- kernels before its first adapter (its input needs no gradient) and the norm-weight mul's gradient kernel.
local ipairs, type, concat = ipairs, type, table.concat

local M = {}

--- PEFT's common target_modules of the Llama family (attention and MLP projections): the default targets.
M.DEFAULT_TARGETS = { "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj" }

--- The ops whose parameters apply() can freeze (their rules read attrs.frozen).
local FREEZABLE = { linear = true, embedding = true, weight = true, layernorm = true, rms_norm = true }

--- The target list of a workload field value: a comma-separated string or a list of strings; nil and the reason when
--- it is neither. Each name is a linear's module name (the last part of its node name, PEFT's target_modules) or its
--- short form without "_proj" (q for q_proj).
---@return string[]? targets
---@return string? problem
function M.targets(v)
  local list = {}
  if type(v) == "string" then
    for part in (v .. ","):gmatch("([^,]*),") do list[#list + 1] = part:match("^%s*(.-)%s*$") end
  elseif type(v) == "table" and #v > 0 then
    for i, t in ipairs(v) do list[i] = t end
  else
    return nil, "must be a comma-separated string or a list of module names such as \"q_proj,v_proj\""
  end
  for _, t in ipairs(list) do
    if type(t) ~= "string" or not t:match("^[%a_][%w_]*$") then
      return nil, ("must name linear modules (letters, digits, _), comma-separated (got %s)"):format(
        type(t) == "string" and ("%q"):format(t) or type(t))
    end
  end
  return list
end

-- the module name of a node (the last dotted part of its name)
local function module_of(name) return name:match("([^%.]+)$") end

-- whether module `m` is target `t`: the name itself or its short form (q → q_proj)
local function is_target(m, t) return m == t or m == t .. "_proj" end

local function copy_shape(s, last)
  local out = {}
  for i, d in ipairs(s) do out[i] = d end
  if last then out[#out] = last end
  return out
end

--- Rewrites `nodes` (a training graph of model `model`, before fill_defaults) for LoRA of rank `rank` on linears whose
--- module is one of `targets` (nil: M.DEFAULT_TARGETS, those the model has). `autocast`: the graph runs under
--- torch.autocast. Returns the new node list and { linears = n targeted, names = the targeted modules } (the adapters'
--- parameters: M.state's trainable). Errors (plain text; the caller says where): a target no linear of the model has,
--- naming the model's linear modules; a parameter-holding op it cannot freeze.
function M.apply(nodes, model, rank, targets, autocast)
  local linears, seen, addmm = {}, {}, {}
  for _, n in ipairs(nodes) do
    if (n.op == "linear" or n.op == "addmm") and (n.params or 0) > 0 then
      local m = module_of(n.name)
      local list = n.op == "linear" and linears or addmm
      if not seen[m] then seen[m], list[#list + 1] = true, m end
    end
  end
  -- the model's linear modules, for the messages; GPT-2's Conv1D GEMMs (addmm) are said to be no targets here
  local function modules()
    return (#linears > 0 and concat(linears, ", ") or "none")
      .. (#addmm > 0 and (" (its addmm GEMMs %s, HF's Conv1D, are not modelled as LoRA targets)"):format(
        concat(addmm, ", ")) or "")
  end
  local given = targets ~= nil
  targets = targets or M.DEFAULT_TARGETS
  local wanted, used = {}, {}
  for _, t in ipairs(targets) do
    local found = false
    for _, m in ipairs(linears) do
      if is_target(m, t) then wanted[m], found = true, true end
    end
    if found then used[#used + 1] = t elseif given then
      error(("lora_targets: %q matches no linear of model '%s'; its linear modules: %s"):format(t, tostring(model),
        modules()), 0)
    end
  end
  if #used == 0 then
    error(("lora_targets: none of PEFT's common targets (%s) is a linear of model '%s'; give --lora-targets "
      .. "(workload field lora_targets) from its linear modules: %s"):format(concat(M.DEFAULT_TARGETS, ","),
      tostring(model), modules()), 0)
  end
  local out, info = {}, { linears = 0, names = {} }
  local group_saved = false -- the current group of linears reading one saved input has an adapter saving it
  for _, n in ipairs(nodes) do
    local attrs = n.attrs or {}
    n.attrs = attrs
    local holds = (n.params or 0) > 0 or attrs.tied ~= nil
    if holds and not FREEZABLE[n.op] then
      error(("LoRA: node '%s' (op '%s') holds parameters, and freezing op '%s' is not modelled (only %s)")
        :format(n.name, n.op, n.op, "linear, embedding, weight, layernorm, rms_norm"), 0)
    end
    if holds then attrs.frozen = true end
    out[#out + 1] = n
    if n.op == "linear" and holds then
      local shares = attrs.saved_inputs == "" -- reads the input an earlier linear saves (nodes.linear `shared`)
      if not shares then group_saved = false end
      attrs.saved_inputs = "" -- a frozen GEMM keeps no input: dX = dY·W
      if (n.params or 0) > 0 and wanted[module_of(n.name)] then
        local x = n.inputs[1]
        local I, O = x[#x], n.output[#n.output]
        local mid = copy_shape(n.output, rank)
        local function add(op, suffix, inputs, output, params, a)
          if autocast and params > 0 then -- the fp32 adapter weight cast once per forward (neusight.nodes g.add)
            local w = { inputs[1][#inputs[1]], output[#output] }
            out[#out + 1] = { op = "cast", name = n.name .. suffix .. ".weight_cast", layer = n.layer, count = n.count,
              dtype = n.dtype, inputs = { w }, output = w, params = 0, attrs = { from = "fp32", autocast_weight = true,
              note = "torch.autocast: the fp32 adapter weight cast once per forward" } }
          end
          out[#out + 1] = { op = op, name = n.name .. suffix, layer = n.layer, count = n.count, dtype = n.dtype,
            inputs = inputs, output = output, params = params, attrs = a }
        end
        -- lora_A saves x unless an adapter of its group already does (the same tensor)
        add("linear", ".lora_A", { x }, mid, I * rank,
          { bias = false, saved_inputs = group_saved and "" or nil, note = "LoRA A: in → rank" })
        group_saved = true
        add("linear", ".lora_B", { mid }, copy_shape(n.output), rank * O, { bias = false, note = "LoRA B: rank → out" })
        add("mul", ".lora_scaling", { copy_shape(n.output) }, copy_shape(n.output), 0,
          { note = "LoRA: · scaling (lora_alpha / r), a Python scalar" })
        add("add", ".lora_add", { copy_shape(n.output), copy_shape(n.output) }, copy_shape(n.output), 0,
          { note = "LoRA: base(x) + scaled adapter" })
        info.linears = info.linears + 1
      end
    end
  end
  for _, m in ipairs(linears) do
    if wanted[m] then info.names[#info.names + 1] = m end
  end
  return out, info
end

--- The model state per parameter of a LoRA graph: `state` (neusight.precision state: every parameter's bytes by role)
--- averaged over the graph's parameters, the frozen ones holding only their weights, the trainable ones (the
--- adapters) weights, gradients, master copies and moments. Returns `state` changed, and the trainable and all
--- parameters (× count).
function M.state(state, nodes)
  local frozen, all = require("neusight.workload").params_split(nodes, function(n)
    return type(n.attrs) == "table" and n.attrs.frozen == true
  end)
  if all == 0 then return state, 0, 0 end
  local trainable = all - frozen
  local share = trainable / all
  state.gradients = state.gradients * share
  state.master = state.master * share
  state.optimizer_state = state.optimizer_state * share
  return state, trainable, all
end

return M
