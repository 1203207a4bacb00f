-- tests/scripts/test_workload.lua — workload validation (exact error messages, defaults, CLI overrides) and graph building.
local workload = require "neusight.workload"
local presets = require "neusight.models.presets"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

-- A valid workload with `changes` applied (a field set to false is removed).
local function spec(changes)
  local w = { model = "gpt2_large", gpu = "A100-PCIE-40GB", mode = "train", batch = 4, seq = 1024 }
  for k, v in pairs(changes or {}) do
    if v == false and k ~= "loss" then w[k] = nil else w[k] = v end
  end
  return w
end

-- The exact message of normalize's error.
local function error_of(w, overrides)
  local ok, err = pcall(workload.normalize, w, overrides, "examples/w.lua")
  assert(not ok, "expected an error")
  return err
end

local T = {}

function T.test_defaults()
  local w = workload.normalize(spec())
  eq(w.optimizer, "adam", "train default optimizer")
  eq(w.dtype, "fp32", "default dtype")
  eq(w.loss, true, "default loss")
  eq(workload.normalize(spec { mode = "inference" }).optimizer, "none", "inference default optimizer")
  local original = spec()
  workload.normalize(original)
  eq(original.optimizer, nil, "normalize does not modify its argument")
end

function T.test_unknown_fields_suggest_a_name()
  eq(error_of(spec { batchsize = 4 }), "examples/w.lua: unknown field 'batchsize' (did you mean 'batch'?)", "prefix")
  eq(error_of(spec { optimiser = "sgd" }), "examples/w.lua: unknown field 'optimiser' (did you mean 'optimizer'?)", "typo")
  eq(error_of(spec { frobnicate = 1 }), "examples/w.lua: unknown field 'frobnicate'", "no suggestion")
end

function T.test_missing_and_mistyped_fields()
  eq(error_of(spec { gpu = false }), "examples/w.lua: missing required field 'gpu' (or --gpu on the command line)",
    "missing gpu")
  eq(error_of(spec { gpu = false, mode = false, seq = false }),
    "examples/w.lua: missing required fields 'gpu', 'mode', 'seq' (or --gpu, --mode, --seq on the command line)",
    "every missing field at once")
  local ok, err = pcall(workload.normalize, { model = "gpt2_large" }, nil, "command line")
  eq(ok, false, "the command line without --gpu")
  eq(err, "command line: missing --gpu, --mode, --batch, --seq (required without a workload script)", "as flags")
  eq(error_of(spec { batch = "4" }), 'examples/w.lua: field \'batch\' must be a positive integer (got "4")', "string batch")
  eq(error_of(spec { seq = 0 }), "examples/w.lua: field 'seq' must be a positive integer (got 0)", "zero seq")
  eq(error_of(spec { mode = "training" }),
    [[examples/w.lua: field 'mode' must be "train", "inference", "prefill" or "decode" (got "training") (did you mean 'train'?)]], "mode")
  eq(error_of(spec { optimizer = "adamW2" }),
    [[examples/w.lua: field 'optimizer' must be "none" or an optimizer: "sgd", "adam", "adamw" or an op rule of yours with an 'optimizer' field (README: Operator rules) (got "adamW2": no op rule of that name) (did you mean 'adamw'?)]],
    "optimizer")
  eq(error_of(spec { loss = "yes" }), [[examples/w.lua: field 'loss' must be a boolean (got "yes")]], "loss")
  eq(error_of(spec { dtype = "fp33" }),
    [[examples/w.lua: field 'dtype' must be a dtype name such as "fp32", "bf16", "fp16", "tf32", "fp8" (or bfloat16, torch.float16, …) (got "fp33")]], "dtype")
  eq(error_of(spec { dtype = "int8" }),
    [[examples/w.lua: field 'dtype' must be a compute dtype (got "int8"): int8 is a weight storage type, give --weight-dtype int8 (workload field weight_dtype) with a compute --dtype such as bf16]], "int8 is a weight dtype")
  eq(error_of(spec { precision = "mixed" }),
    [[examples/w.lua: field 'precision' must be "pure" or "amp" (got "mixed") (did you mean 'amp'?)]], "mixed is amp")
  eq(workload.normalize(spec { dtype = "torch.bfloat16" }).dtype, "bf16", "dtype alias → the engine's name")
  eq(workload.normalize(spec(), { dtype = "BF16" }).dtype, "bf16", "--dtype BF16")
  eq(error_of(spec { model = { n_layer = 2 } }),
    "examples/w.lua: field 'model' table needs a string 'arch' naming a builder in neusight/models/ (got nil)", "arch")
  local names = {}
  for name in pairs(presets) do names[#names + 1] = name end
  table.sort(names)
  eq(error_of(spec { model = "gpt3_176b" }),
    [[examples/w.lua: field 'model' names an unknown model preset "gpt3_176b" (did you mean 'gpt3_175b'?); presets: ]]
      .. table.concat(names, ", ") .. " (neusight models lists them)", "preset")
  eq(error_of(42), "examples/w.lua: a workload must return a table (got 42)", "not a table")
end

function T.test_overrides_apply_before_validation()
  local w = workload.normalize(spec { batch = false, mode = "inference" }, { batch = 8, mode = "train" }, "w.lua")
  eq(w.batch, 8, "batch from the CLI")
  eq(w.mode, "train", "CLI wins")
  eq(w.optimizer, "adam", "default follows the overridden mode")
  eq(error_of(spec(), { batch = -1 }), "examples/w.lua: --batch must be a positive integer (got -1)", "bad override")
end

local params_sum = require("neusight.testing").params

function T.test_build_appends_one_optimizer_node()
  local b = workload.build(spec { model = "gpt3_175b", batch = 1, seq = 2048 })
  local nodes = b.nodes
  eq(b.model, "gpt3_175b", "model name")
  local opt = nodes[#nodes]
  eq(opt.op, "adam", "optimizer op")
  eq(opt.name, "optimizer.adam", "optimizer name")
  eq(opt.phase, "optimizer", "phase")
  eq(opt.params, 0, "the optimizer owns no parameters")
  eq(opt.count, 1, "count")
  eq(opt.inputs[1][1], params_sum(nodes), "P = sum of params x count")
  eq(opt.inputs[1][1], 174604259328, "GPT-3 175B parameters")
  eq(opt.output[1], opt.inputs[1][1], "output shape {P}")
  local optimizers = 0
  for _, n in ipairs(nodes) do
    if n.phase == "optimizer" then optimizers = optimizers + 1 end
  end
  eq(optimizers, 1, "exactly one optimizer node")
end

function T.test_no_optimizer_node_in_inference_or_with_none()
  local nodes = workload.build(spec { mode = "inference" }).nodes
  assert(nodes[#nodes].phase == nil, "inference")
  nodes = workload.build(spec { optimizer = "none" }).nodes
  assert(nodes[#nodes].phase == nil, "optimizer none")
end

function T.test_config_table_and_function_models()
  local cfg = { name = "tiny", arch = "gpt", n_layer = 2, n_embd = 64, n_head = 4, vocab_size = 100, n_positions = 16 }
  local b = workload.build(spec { model = cfg, batch = 2, seq = 16, optimizer = "sgd" })
  local name, nodes = b.model, b.nodes
  eq(name, "tiny", "config name")
  eq(nodes[#nodes].op, "sgd", "sgd node")

  local seen_opts
  b = workload.build(spec {
    model = function(opts)
      seen_opts = opts
      return { { op = "linear", name = "fc", inputs = { { opts.batch, 8 } }, output = { opts.batch, 4 }, params = 36 } }
    end,
    dtype = "bf16",
  })
  name, nodes = b.model, b.nodes
  eq(name, "custom", "default name of a function model")
  eq(seen_opts.training, true, "opts.training")
  eq(seen_opts.dtype, "bf16", "opts.dtype")
  eq(nodes[1].dtype, "bf16", "dtype default filled in")
  eq(nodes[1].count, 1, "count default")
  eq(nodes[1].layer, "", "layer default")
  eq(nodes[2].inputs[1][1], 36, "optimizer over the function model's params")
end

---------------------------------------------------------------------------------------------------
-- Precision recipes and optimizer implementations (scripts/neusight/precision.lua)

-- A typo in a model config key (a table in the workload, or a preset copied and changed) is an error naming the
-- model, never the builder's default: n_iner = 8192 would otherwise build the 4·n_embd MLP.
function T.test_model_config_typos_are_errors()
  local function config_error(model)
    local ok, err = pcall(workload.build, spec { model = model, mode = "inference" })
    assert(not ok, "expected an error")
    return err
  end
  local gpt = { name = "mine", arch = "gpt", n_layer = 2, n_embd = 256, n_head = 4, vocab_size = 1000,
                n_positions = 128, n_iner = 8192 }
  eq(config_error(gpt), "gpt model 'mine': unknown field 'n_iner' (did you mean 'n_inner'?)", "gpt")
  local overridden = {}
  for k, v in pairs(presets.bert) do overridden[k] = v end
  overridden.num_hiden_layers = 2
  eq(config_error(overridden), "bert model 'bert': unknown field 'num_hiden_layers' (did you mean 'num_hidden_layers'?)",
    "bert preset override")
  local opt = {}
  for k, v in pairs(presets.opt) do opt[k] = v end
  opt.ffn = 4096
  eq(config_error(opt), "opt model 'opt': unknown field 'ffn' (did you mean 'ffn_dim'?)", "opt")
  local switch = {}
  for k, v in pairs(presets.switchxl4) do switch[k] = v end
  switch.num_expert = 8
  eq(config_error(switch), "switch model 'switchxl4': unknown field 'num_expert' (did you mean 'num_experts'?)",
    "switch")
end

-- The same typos given to a bundled builder's build() directly (a workload's model function may require the builder
-- and build a config of its own, which no workload check sees): the builder's own check (neusight.models.check
-- fields), not the default.
function T.test_model_config_typos_given_to_a_builder_directly_are_errors()
  local function build_error(arch, cfg)
    local ok, err = pcall(require("neusight.models." .. arch).build, cfg, { batch = 1, seq = 8 })
    assert(not ok, arch .. ": expected an error")
    return err
  end
  eq(build_error("gpt", { name = "mine", n_layer = 2, n_embd = 256, n_head = 4, vocab_size = 1000, n_positions = 128,
    n_iner = 8192 }), "gpt model 'mine': unknown field 'n_iner' (did you mean 'n_inner'?)", "gpt")
  local function typo(preset, key, v)
    local c = {}
    for k, x in pairs(presets[preset]) do c[k] = x end
    c[key] = v
    return c
  end
  eq(build_error("bert", typo("bert", "num_hiden_layers", 2)),
    "bert model 'bert': unknown field 'num_hiden_layers' (did you mean 'num_hidden_layers'?)", "bert")
  eq(build_error("opt", typo("opt", "ffn", 4096)), "opt model 'opt': unknown field 'ffn' (did you mean 'ffn_dim'?)",
    "opt")
  eq(build_error("switch", typo("switchxl4", "num_expert", 8)),
    "switch model 'switchxl4': unknown field 'num_expert' (did you mean 'num_experts'?)", "switch")
end

-- Gradient accumulation follows the recipe's gradients, not the compute dtype: under amp (torch.autocast; fp8's
-- Transformer Engine recipe alike) the parameters and their .grad buffers are fp32, so every accumulate() kernel adds
-- fp32 gradients (the bytes of an fp32 run's), while pure keeps them in the dtype (half of those at bf16). The amp
-- kernels used to move the compute dtype's bytes beside a state_gb of fp32 gradients (neusight.workload
-- gradient_dtypes, attrs.grad_dtype).
function T.test_accumulate_kernels_move_the_recipes_gradient_bytes()
  local function accumulate_bytes(changes)
    local sum = 0
    for _, n in ipairs(workload.build(spec(changes)).nodes) do
      local rule = load_op(n.op)
      if n.phase ~= "optimizer" and rule.accumulate then
        for _, k in ipairs(rule.accumulate(make_node(n))) do sum = sum + n.count * k.bytes end
      end
    end
    return sum
  end
  local fp32 = accumulate_bytes { dtype = "fp32", optimizer = "none" }
  assert(fp32 > 0, "an fp32 training graph accumulates its gradients")
  eq(accumulate_bytes { dtype = "bf16", precision = "amp", optimizer = "none" }, fp32, "amp bf16: fp32 gradients")
  eq(accumulate_bytes { dtype = "fp16", precision = "amp" }, fp32, "amp fp16: fp32 gradients")
  eq(accumulate_bytes { dtype = "fp8", precision = "amp" }, fp32, "amp fp8 (Transformer Engine): fp32 gradients")
  eq(2 * accumulate_bytes { dtype = "bf16", precision = "pure" }, fp32, "pure bf16: bf16 gradients")
  -- GPT-2 Large ties lm_head to wte: the tied node adds into the same fp32 .grad
  local tied
  for _, n in ipairs(workload.build(spec { dtype = "bf16" }).nodes) do
    if n.name == "lm_head" then tied = n end
  end
  assert(tied and tied.params == 0 and tied.attrs.tied, "lm_head is tied")
  eq(tied.attrs.grad_dtype, "fp32", "the tied lm_head's gradient dtype")
end

-- Megatron-LM's amp (precision convention "megatron"): the linear layers' weight gradients accumulate inside their wgrad
-- GEMM (no kernel), while its main_grad hooks add each bias's, norm's and embedding's 16-bit param.grad into the fp32
-- main_grad: 2 (read the bf16 .grad) + 4 + 4 (read and write main_grad) bytes per element. They were priced at the
-- compute dtype's 3 × 2 (neusight.workload gradient_dtypes, attrs.grad_from, neusight.rules grad_accumulate).
function T.test_megatron_hooks_add_a_16_bit_grad_into_fp32_main_grad()
  local gpu = { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 }
  local function accumulated(changes)
    changes.optimizer, changes.parallel = "none", { kernels = "megatron" }
    local elems, bytes, dtypes = 0, 0, {}
    for _, n in ipairs(workload.build(spec(changes), gpu).nodes) do
      local rule = load_op(n.op)
      if n.phase ~= "optimizer" and rule.accumulate then
        for _, k in ipairs(rule.accumulate(make_node(n))) do
          elems, bytes = elems + n.count * k.rows * k.hidden, bytes + n.count * k.bytes
          dtypes[k.dtype] = true
        end
      end
    end
    assert(elems > 0, "the hooks accumulate")
    return bytes / elems, dtypes
  end
  local per, dtypes = accumulated { dtype = "bf16", precision = "amp" }
  eq(per, 2 + 4 + 4, "bf16 amp: a bf16 .grad into the fp32 main_grad")
  assert(dtypes.fp32 and not dtypes.bf16, "the adds run in the fp32 main_grad")
  eq(accumulated { dtype = "fp8", precision = "amp" }, 2 + 4 + 4, "fp8 amp: bf16 parameters' .grad into fp32 main_grad")
  eq(accumulated { dtype = "fp16", precision = "amp" }, 3 * 2, "fp16 amp: fp16 main gradients")
  eq(accumulated { dtype = "bf16", precision = "pure" }, 3 * 2, "bf16 pure: bf16 gradients")
end

-- GPT-2's lm_head is tied to wte: under Megatron's kernels its wgrad GEMM accumulates into the embedding weight's
-- main_grad (gradient-accumulation fusion, as for every linear), so it adds no VECadd(1, V·h) of its own; the
-- embedding's own hook still adds wte's .grad. The tied node was left out of the fusion (it holds no parameters).
function T.test_megatron_tied_lm_head_accumulates_inside_its_wgrad_gemm()
  local gpu = { interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64 }
  local by_name = {}
  for _, n in ipairs(workload.build(spec { dtype = "bf16", optimizer = "none", parallel = { kernels = "megatron" } },
                                    gpu).nodes) do
    by_name[n.name] = n
  end
  local head, wte = by_name.lm_head, by_name.wte
  assert(head and head.attrs.tied == "wte" and head.params == 0, "lm_head is tied to wte")
  eq(head.attrs.wgrad_fused, true, "the tied lm_head's wgrad GEMM accumulates into main_grad")
  eq(#load_op(head.op).accumulate(make_node(head)), 0, "no accumulate kernel for the tied lm_head")
  eq(#load_op(wte.op).accumulate(make_node(wte)), 1, "the embedding's hook adds wte's .grad")
end

-- Cross-entropy in a 16-bit training run computes in fp32, as HF (logits.float() in its causal-LM loss), torch.autocast
-- (cross_entropy on its fp32 list) and Megatron-LM (.float() in its vocab-parallel loss) run it: its kernels move fp32
-- bytes, after one cast of the logits to fp32 (reads 2 B, writes 4 B per element; the cast back in backward), never
-- two. It was priced at the compute dtype's bytes beside saves() of fp32 log-probabilities.
function T.test_loss_runs_in_fp32_after_one_upcast()
  local function loss_nodes(changes)
    local out, casts = {}, 0
    for _, n in ipairs(workload.build(spec(changes)).nodes) do
      if n.name:sub(1, 4) == "loss" and n.op ~= "all_reduce" then
        out[#out + 1] = n
        if n.op == "cast" then casts = casts + 1 end
      end
    end
    return out, casts
  end
  local function bytes(n, phase)
    local sum = 0
    for _, k in ipairs(load_op(n.op)[phase](make_node(n))) do sum = sum + k.bytes end
    return sum
  end
  local fp32 = loss_nodes { dtype = "fp32", optimizer = "none" }
  eq(#fp32, 2, "fp32: the shift copy and the loss")
  eq(fp32[1].op, "contiguous", "fp32: no cast, the shift copy")
  local T_, V = 4 * 1023, 50257
  -- (Megatron's kernels build the same loss: neusight.nodes.causal_lm_loss)
  for _, case in ipairs { { dtype = "bf16", precision = "amp" }, { dtype = "bf16", precision = "pure" },
                          { dtype = "fp16", precision = "amp" } } do
    case.optimizer = "none"
    local what = case.dtype .. " " .. case.precision
    local nodes, casts = loss_nodes(case)
    eq(casts, 1, what .. ": one cast of the logits (HF's .float()), not a second for autocast")
    eq(#nodes, 2, what .. ": the cast and the loss")
    local cast, loss = nodes[1], nodes[2]
    eq(cast.op, "cast", what .. ": the upcast")
    eq(cast.dtype, "fp32", what .. ": to fp32")
    eq(cast.attrs.from, case.dtype, what .. ": from the logits' dtype")
    eq(bytes(cast, "forward"), T_ * V * (2 + 4), what .. ": the cast reads 16-bit, writes fp32")
    eq(bytes(cast, "backward"), T_ * V * (4 + 2), what .. ": and casts the gradient back")
    eq(loss.dtype, "fp32", what .. ": the loss computes in fp32")
    eq(loss.attrs.from, case.dtype, what .. ": its logits' dtype")
    eq(bytes(loss, "forward"), bytes(fp32[2], "forward"), what .. ": forward moves fp32 bytes")
    eq(bytes(loss, "backward"), bytes(fp32[2], "backward"), what .. ": backward moves fp32 bytes")
  end
  -- BERT calls CrossEntropyLoss on its scores without .float(): fp32 under amp (autocast's cast, a node of its own),
  -- the dtype under pure (no autocast)
  local function bert(precision)
    local out = {}
    for _, n in ipairs(workload.build(spec { model = "bert", seq = 128, dtype = "bf16", precision = precision,
                                             optimizer = "none" }).nodes) do
      if n.name:sub(1, 4) == "loss" then out[#out + 1] = n.op .. ":" .. n.name .. ":" .. n.dtype end
    end
    return table.concat(out, " ")
  end
  eq(bert("amp"), "cast:loss.mlm.to_fp32:fp32 cross_entropy:loss.mlm:fp32 cast:loss.nsp.to_fp32:fp32 "
    .. "cross_entropy:loss.nsp:fp32", "bert amp: autocast's casts, losses in fp32")
  eq(bert("pure"), "cross_entropy:loss.mlm:bf16 cross_entropy:loss.nsp:bf16", "bert pure: bf16 losses, no cast")
end

function T.test_precision_and_optimizer_impl_defaults()
  eq(workload.normalize(spec()).precision, "pure", "fp32 training: pure (amp would be the same thing)")
  eq(workload.normalize(spec { dtype = "bf16" }).precision, "amp", "bf16 training: amp, what people train with")
  eq(workload.normalize(spec { dtype = "fp16" }).precision, "amp", "fp16 training: amp")
  eq(workload.normalize(spec { dtype = "bf16", mode = "inference" }).precision, "pure", "bf16 inference: bf16 weights")
  eq(workload.normalize(spec { dtype = "bf16", precision = "pure" }).precision, "pure", "pure asked for")
  eq(workload.normalize(spec { dtype = "tf32" }).precision, "pure", "tf32 keeps fp32 storage")
  eq(workload.normalize(spec { optimizer = "adamw" }).optimizer_impl, "fused", "adamw: fused by default")
  eq(workload.normalize(spec { optimizer = "adam" }).optimizer_impl, "foreach", "adam: foreach by default")
  eq(workload.normalize(spec { optimizer = "sgd" }).optimizer_impl, "foreach", "sgd: foreach by default")
  eq(workload.normalize(spec { optimizer = "none" }).optimizer_impl, nil, "no implementation without an optimizer")
  eq(workload.normalize(spec { optimizer = "adamw", optimizer_impl = "foreach" }).optimizer_impl, "foreach", "asked for")
end

-- kernels = "megatron" on one GPU (no microbatches, no recomputation) is a one-device plan running Megatron-LM's
-- kernels, in every mode: no "has no effect" warning, and its optimizer step Megatron's fused one; "eager" there is
-- the plain run's graph already, and says so.
function T.test_kernels_megatron_on_one_gpu_is_a_plan()
  local function ignored(w)
    local out = {}
    for _, x in ipairs(workload.warnings(w)) do
      if x:find("has no effect", 1, true) then out[#out + 1] = x end
    end
    return table.concat(out, " | ")
  end
  for _, mode in ipairs { "train", "inference", "prefill" } do
    eq(ignored(workload.normalize(spec { mode = mode, dtype = "bf16", parallel = { kernels = "megatron" } })), "",
      mode .. ": --kernels megatron changes the run")
  end
  eq(workload.normalize(spec { optimizer = "adam", parallel = { kernels = "megatron" } }).optimizer_impl, "fused",
    "Megatron's kernels step with its fused Adam")
  eq(workload.normalize(spec { optimizer = "adam", parallel = { kernels = "eager" } }).optimizer_impl, "foreach",
    "the eager graph: PyTorch's default")
  assert(ignored(workload.normalize(spec { parallel = { kernels = "eager" } })):find("already", 1, true),
    "eager on one GPU: the plain run's kernels already")
end

-- cli15 (issue 15: "errors about a flag name the flag, not the workload file"): a value the command line gave is said
-- by its flag, every field alike (one rule, workload.flag_of); the script's own fields keep their names and lines.
function T.test_a_flags_value_is_said_by_the_flag()
  eq(workload.flag_of("kv_dtype"), "--kv-dtype", "a field's flag")
  eq(workload.flag_of("parallel.virtual_stages"), "--virtual-stages", "a parallel field's flag")
  eq(workload.flag_of("fusion", "flash_attention"), "--flash-attention", "fusion = \"flash_attention\"'s flag")
  eq(workload.flag_of("fusion", true), "--fusion", "fusion = true's flag")
  local function cli(overrides)
    local ok, err = pcall(workload.normalize, {}, overrides, "command line")
    assert(not ok, "expected an error")
    return err
  end
  local base = { model = "gpt2_large", gpu = "h100", mode = "inference", batch = 1, seq = 8 }
  local function with(changes)
    local o = {}
    for k, v in pairs(base) do o[k] = v end
    for k, v in pairs(changes) do o[k] = v end
    return o
  end
  eq(cli(with { dtype = "bf17" }), 'command line: --dtype must be a dtype name such as "fp32", "bf16", "fp16", "tf32", '
    .. '"fp8" (or bfloat16, torch.float16, …) (got "bf17")', "--dtype")
  eq(cli(with { mode = "trian" }),
    'command line: --mode must be "train", "inference", "prefill" or "decode" (got "trian") (did you mean \'train\'?)',
    "--mode")
  eq(cli(with { mode = "train", precision = "ampp" }),
    'command line: --precision must be "pure" or "amp" (got "ampp") (did you mean \'amp\'?)', "--precision")
  eq(cli(with { mode = "prefill", kv_dtype = "f8" }),
    'command line: --kv-dtype must be "fp8", "bf16", "fp16" or "fp32" (got "f8") (did you mean \'fp8\'?)', "--kv-dtype")
  eq(cli(with { mode = "train", optimizer_impl = "fuse" }),
    'command line: --optimizer-impl must be "fused" or "foreach" (got "fuse") (did you mean \'fused\'?)',
    "--optimizer-impl")
  assert(cli(with { mode = "train", optimizer = "adan" }):find("^command line: %-%-optimizer must be \"none\" or an optimizer"),
    "--optimizer")
  assert(cli(with { model = "gpt2" }):find("^command line: %-%-model names an unknown model preset \"gpt2\""), "--model")
  eq(cli(with { mode = "train", fusion = "flash_attention" }), "command line: --flash-attention applies to inference "
    .. "only: fused training (torch.compile's backward graphs) is not modelled; use mode = \"inference\" or fusion = false",
    "--flash-attention")
  -- a rule between fields, about a flag's value
  eq(cli(with { kv_dtype = "fp8" }), 'command line: --kv-dtype applies to the serving phases only (mode "prefill" or '
    .. '"decode"; mode is "inference"): train and inference hold no KV cache', "--kv-dtype in inference")
  -- a parallel field a flag gave: by its flag; one the script wrote: as the parallel table's
  eq(cli(with { mode = "train", ["parallel.dp"] = 1, ["parallel.schedule"] = "1f1bb" }),
    'command line: --schedule: one of "1f1b", "gpipe", "interleaved" expected, got "1f1bb" (did you mean \'1f1b\'?)',
    "--schedule")
  local text = "return {\n  parallel = { schedule = \"1f1bb\" },\n}\n"
  local ok, err = pcall(workload.normalize, spec { parallel = { schedule = "1f1bb" } }, { ["parallel.dp"] = 1 },
    "examples/w.lua", text)
  assert(not ok)
  assert(err:find("field 'parallel' is invalid: parallel.schedule: ", 1, true), err)
  -- the script's own field: its name and line, as before
  text = "return {\n  dtype = \"bf17\",\n}\n"
  ok, err = pcall(workload.normalize, spec { dtype = "bf17" }, nil, "examples/w.lua", text)
  assert(not ok)
  assert(err:find("^examples/w.lua:2: field 'dtype' must be a dtype name"), err)
  -- a comparison's values, checked before any forecast (check_fields: the command line's)
  ok, err = pcall(workload.check_fields, { dtype = "bf17" }, "command line")
  assert(not ok and err:find("^command line: %-%-dtype must be a dtype name"), err)
  ok, err = pcall(workload.check_fields, { ["parallel.recompute"] = "ful" }, "command line")
  eq(err, 'command line: --recompute: "none", "selective" or "full" expected, got "ful" (did you mean \'full\'?)',
    "--recompute in a comparison")
end

function T.test_unknown_precision_and_impl_are_errors_naming_the_field()
  eq(error_of(spec { dtype = "bf16", precision = "ampp" }),
    [[examples/w.lua: field 'precision' must be "pure" or "amp" (got "ampp") (did you mean 'amp'?)]], "typo")
  eq(error_of(spec { precision = "quantum" }),
    [[examples/w.lua: field 'precision' must be "pure" or "amp" (got "quantum")]], "unknown, no suggestion")
  -- names that do not say which recipe is meant: words, not a guess ("full" precision is fp32 to PyTorch users;
  -- 'pure' at --dtype bf16 would forecast bf16 compute and state)
  eq(error_of(spec { dtype = "bf16", precision = "full" }),
    [[examples/w.lua: field 'precision' must be "pure" or "amp" (got "full"): full precision (fp32) is the compute ]]
    .. [[dtype, --dtype fp32 (whose recipe is 'pure'); 'pure' keeps the whole state in the dtype given]], "full")
  eq(error_of(spec { dtype = "bf16", precision = "None" }),
    [[examples/w.lua: field 'precision' must be "pure" or "amp" (got "None"): leave it out for the default (amp when ]]
    .. [[training in fp16, bf16 or fp8, else pure), or 'pure' for no mixed precision]], "none")
  eq(error_of(spec(), { precision = true }),
    [[examples/w.lua: --precision must be "pure" or "amp" (got true)]], "CLI override, not a string")
  eq(error_of(spec { precison = "amp" }), "examples/w.lua: unknown field 'precison' (did you mean 'precision'?)", "field")
  eq(error_of(spec { optimizer = "adamw", optimizer_impl = "fuse" }),
    [[examples/w.lua: field 'optimizer_impl' must be "fused" or "foreach" (got "fuse") (did you mean 'fused'?)]], "impl")
end

function T.test_amp_needs_a_16_bit_compute_dtype()
  local want = [[examples/w.lua: field 'precision' "amp" mixes a 16-bit or fp8 compute dtype with fp32 state; ]]
    .. [[dtype "%s" is already %d bytes per element (parameters, gradients and optimizer state in it): ]]
    .. [[use precision = "pure" or dtype "bf16" / "fp16"]]
  eq(error_of(spec { precision = "amp" }), want:format("fp32", 4), "amp + fp32")
  eq(error_of(spec { precision = "amp" }, { dtype = "tf32" }), want:format("tf32", 4), "amp + tf32 (CLI)")
  eq(workload.normalize(spec { precision = "amp", dtype = "fp8" }).precision, "amp", "fp8 compute mixes")
end

-- Model state per parameter by recipe, in bytes: { weights, gradients, master, optimizer_state }. Single-GPU runs
-- use PyTorch autocast's convention for amp (fp32 parameters, gradients and moments; no master copy).
function T.test_state_per_parameter_by_recipe()
  local cases = {
    { {}, { 4, 4, 0, 8 }, "fp32 Adam: 4 + 4 + 2·4 = 16" },
    { { dtype = "bf16", precision = "pure", optimizer = "adamw" }, { 2, 2, 0, 4 }, "model.to(bf16) AdamW: 4·2 = 8" },
    { { dtype = "bf16", optimizer = "adamw" }, { 4, 4, 0, 8 }, "amp (autocast) bf16 AdamW: 16" },
    { { dtype = "fp16", optimizer = "sgd" }, { 4, 4, 0, 0 }, "amp (autocast) fp16 SGD: 8" },
    { { dtype = "bf16", optimizer = "none" }, { 4, 4, 0, 0 }, "amp without an optimizer: weights + gradients" },
    { { dtype = "bf16", mode = "inference" }, { 2, 0, 0, 0 }, "bf16 inference: the weights" },
    { { dtype = "bf16", mode = "inference", precision = "amp" }, { 4, 0, 0, 0 }, "autocast inference: fp32 weights" },
  }
  for _, c in ipairs(cases) do
    local st = workload.build(spec(c[1])).state
    local got = { st.weights, st.gradients, st.master, st.optimizer_state }
    eq(table.concat(got, " "), table.concat(c[2], " "), c[3])
  end
end

-- The model state as the report shows it (neusight.precision.state_report): params × bytes per parameter, the JSON
-- object in role order, the table line, and a warning only for runs no memory report covers that do not fit.
function T.test_state_report()
  local precision = require "neusight.precision"
  local s = { weights = 2, gradients = 4, master = 4, optimizer_state = 8, convention = "megatron" }
  local r = precision.state_report(s, 1e9, "amp", 80, false)
  eq(r.state_gb, 18.0, "1e9 parameters x 18 B")
  eq(r.convention, "megatron", "convention")
  eq(table.concat(getmetatable(r.bytes_per_param).__order, " "), "weights gradients master optimizer_state", "key order")
  eq(math.type(r.bytes_per_param.weights), "float", "bytes per parameter are numbers")
  eq(r.line, "model state              18.0 GB   (1 B parameters x 18 B = weights 2 + gradients 4 + master 4 + "
    .. "optimizer 8 per parameter, amp recipe (megatron))\n", "table line")
  eq(r.warning, nil, "a memory report covers it")
  local over = precision.state_report(s, 5e9, "amp", 80, true)
  eq(over.warning, "model state 90.0 GB exceeds the GPU's 80 GB: the forecast assumes it fits (shard it, see the "
    .. "parallelism options)", "no memory report: the state alone does not fit")
  eq(over.line:find(" — exceeds the GPU's 80 GB", 1, true) ~= nil, true, "the line says so too")
  eq(precision.state_report(s, 4e9, "amp", 80, true).warning, nil, "72 GB fits")
  eq(precision.state_bytes(1e9, s, 4), 1e9 * 6 + 1e9 * 12 / 4, "the optimizer's part over the distributed optimizer's dp")
end

function T.test_optimizer_node_carries_the_recipe()
  local nodes = workload.build(spec { dtype = "bf16", optimizer = "adamw" }).nodes
  local opt = nodes[#nodes]
  eq(opt.op, "adamw", "op")
  eq(opt.name, "optimizer.adamw", "name")
  eq(opt.dtype, "fp32", "amp steps in fp32")
  local a = opt.attrs
  eq(a.impl, "fused", "impl")
  eq(a.precision, "amp", "recipe")
  eq(a.convention, "autocast", "single GPU: PyTorch autocast")
  eq(table.concat({ a.param_bytes, a.grad_bytes, a.main_grad_bytes, a.master_bytes, a.moment_bytes }, " "),
    "4 4 0 0 4", "element sizes")
  eq(a.loss_scale, false, "bf16: no loss scaling")
  nodes = workload.build(spec { dtype = "bf16", precision = "pure", optimizer = "adam", optimizer_impl = "fused" }).nodes
  opt = nodes[#nodes]
  eq(opt.dtype, "bf16", "pure steps in the dtype")
  eq(table.concat({ opt.attrs.param_bytes, opt.attrs.grad_bytes, opt.attrs.moment_bytes }, " "), "2 2 2", "pure sizes")
  eq(opt.attrs.impl, "fused", "impl asked for")
end

-- Ops of the first attention block of a built graph (layer "h"), in order, joined by spaces.
local function attention_ops(w)
  local nodes = workload.build(w).nodes
  local ops = {}
  for _, n in ipairs(nodes) do
    if n.name:match("^h%.attn%.") and n.op ~= "permute" and n.op ~= "getitem" and n.op ~= "split" then ops[#ops + 1] = n.op end
  end
  return table.concat(ops, " ")
end

function T.test_attention_implementation()
  -- bf16 defaults to sdpa (one fused kernel), fp32 to the eager chain the fp32 measurements were traced from.
  -- (bf16 training is amp under torch.autocast: c_attn's input cast and the two Conv1D weight casts, eager softmax's
  -- fp32 output cast back; tests/scripts/test_autocast.lua)
  eq(attention_ops(spec { dtype = "bf16" }), "cast cast addmm sdpa cast addmm dropout add", "bf16 default: sdpa")
  eq(attention_ops(spec { dtype = "bf16", precision = "pure" }), "addmm sdpa addmm dropout add", "bf16 pure: sdpa")
  eq(attention_ops(spec {}), "addmm matmul div where softmax dropout matmul contiguous addmm dropout add", "fp32: eager")
  eq(attention_ops(spec { dtype = "bf16", attention = "eager", precision = "pure" }),
    "addmm matmul div where softmax dropout matmul contiguous addmm dropout add", "explicit eager in bf16")
  eq(attention_ops(spec { dtype = "bf16", attention = "eager" }),
    "cast cast addmm matmul div where softmax cast dropout matmul contiguous cast addmm dropout add",
    "explicit eager in bf16 amp (autocast)")
  eq(attention_ops(spec { attention = "sdpa" }), "addmm sdpa addmm dropout add", "explicit sdpa in fp32")
  -- The sdpa node carries Q, K, V of this rank's heads and the causal mask.
  local nodes = workload.build(spec { dtype = "bf16" }).nodes
  for _, n in ipairs(nodes) do
    if n.op == "sdpa" then
      eq(#n.inputs, 3, "Q, K, V")
      eq(table.concat(n.inputs[1], ","), "4,20,1024,64", "Q shape [b, heads, s, d]")
      eq(n.attrs.causal, true, "causal")
      eq(n.count, 36, "one node replicated over the layers")
    end
  end
  -- BERT's is non-causal, OPT's causal.
  local function sdpa_node(w)
    local ns = workload.build(w).nodes
    for _, n in ipairs(ns) do if n.op == "sdpa" then return n end end
  end
  eq(sdpa_node(spec { model = "bert_large", dtype = "bf16", seq = 512 }).attrs.causal, false, "bert: full attention")
  eq(sdpa_node(spec { model = "opt_13", dtype = "bf16", seq = 2048 }).attrs.causal, true, "opt: causal")
  eq(sdpa_node(spec { model = "bert_large", seq = 512 }), nil, "bert fp32: eager")
  -- the Llama family, its MoE types and DeepSeek default to sdpa in fp32 too, as HF's attn_implementation does (no fp32
  -- NeuSight trace covers them; the eager default made a fp32 Llama-3.2-1B training 77 GB where HF's sdpa holds 42);
  -- an explicit eager stays eager (and Megatron's fp32 attention, a parallel run's kernels)
  for _, m in ipairs { "llama32_1b", "qwen3_30b_a3b", "deepseek_v2_lite" } do
    assert(sdpa_node(spec { model = m, dtype = "fp32", seq = 64, batch = 1 }) ~= nil, m .. " fp32: sdpa by default")
    eq(sdpa_node(spec { model = m, dtype = "fp32", seq = 64, batch = 1, attention = "eager" }), nil,
      m .. " fp32: eager when asked")
  end
  -- the build says which ran (the report's JSON `attention` and table header): nothing in decode, whose decode kernel
  -- is the same either way
  eq(workload.build(spec { model = "llama32_1b", dtype = "fp32", seq = 64, batch = 1 }).attention, "sdpa", "llama fp32")
  eq(workload.build(spec { seq = 64, batch = 1 }).attention, "eager", "gpt2 fp32")
  -- fp32 fused attention is priced by a predictor trained on 16-bit kernels only: the build says so, and only then
  local function sdpa_warned(w)
    for _, t in ipairs(workload.build(w).warnings) do if t:find("attention sdpa in fp32", 1, true) then return true end end
    return false
  end
  eq(sdpa_warned(spec { model = "llama32_1b", dtype = "fp32", seq = 64, batch = 1 }), true, "llama fp32 sdpa: warned")
  eq(sdpa_warned(spec { attention = "sdpa", seq = 64, batch = 1 }), true, "gpt2 fp32 explicit sdpa: warned")
  eq(sdpa_warned(spec { model = "llama32_1b", dtype = "fp32", seq = 64, batch = 1, attention = "eager" }), false,
    "fp32 eager: no warning")
  eq(sdpa_warned(spec { model = "llama32_1b", dtype = "bf16", seq = 64, batch = 1 }), false, "bf16 sdpa: no warning")
  eq(workload.build(spec { model = "llama32_1b", dtype = "bf16", mode = "decode", seq = false, context = 64,
    batch = 1 }).attention, nil, "decode")
  -- --flash-attention with no eager attention block to fuse says so, naming what to do (it was silent: sdpa's forecast
  -- with element-wise fusion read as flash-attention's); an eager graph it fuses does not warn
  local function flash_warning(w)
    for _, t in ipairs(workload.build(w).warnings) do if t:find("--flash-attention", 1, true) then return t end end
    return nil
  end
  local fl = { model = "llama32_1b", dtype = "bf16", seq = 64, batch = 1, mode = "inference", fusion = "flash_attention" }
  local t = flash_warning(spec(fl)) or ""
  assert(t:find("model 'llama32_1b' has no eager matmul-softmax-matmul attention block to fuse (its attention is sdpa",
    1, true) and t:find("give --attention eager", 1, true), "sdpa + flash: warned, got " .. t)
  fl.attention = "eager"
  eq(flash_warning(spec(fl)), nil, "eager + flash: fused, no warning")
  t = flash_warning(spec { model = "opt_13", seq = 64, batch = 1, mode = "inference", fusion = "flash_attention" }) or ""
  assert(t:find("not one the fusion pass matches", 1, true), "opt eager (bmm chain): warned, got " .. t)
  -- a decode step is said as one, whatever the attention: --attention eager fuses nothing there either
  t = flash_warning(spec { model = "llama32_1b", dtype = "bf16", mode = "decode", seq = false, context = 64, batch = 1,
    fusion = "flash_attention" }) or ""
  assert(t:find("(a decode step runs one decode-attention kernel per layer)", 1, true)
    and t:find("; give --fusion alone", 1, true), "bf16 sdpa decode + flash: the decode step said, got " .. t)
  -- a model function's attention is its graph's: an eager chain the pass fused is still "eager" (as a builder's: no
  -- fp32 sdpa warning), and one of sdpa nodes is said as sdpa in fp32 too, without --attention advice it ignores
  local function encoder(sdpa)
    return function(o)
      local b = o.batch
      local x, q, s = { b, 197, 256 }, { b, 4, 197, 64 }, { b, 4, 197, 197 }
      local nodes = { { op = "linear", name = "qkv", inputs = { x }, output = { b, 197, 768 }, params = 256 * 768 } }
      if sdpa then
        nodes[#nodes + 1] = { op = "sdpa", name = "attn", inputs = { q, q, q }, output = q, attrs = { causal = false } }
      else
        nodes[#nodes + 1] = { op = "matmul", name = "qk", inputs = { q, { b, 4, 64, 197 } }, output = s }
        nodes[#nodes + 1] = { op = "softmax", name = "sm", inputs = { s }, output = s }
        nodes[#nodes + 1] = { op = "matmul", name = "pv", inputs = { s, q }, output = q }
      end
      nodes[#nodes + 1] = { op = "linear", name = "proj", inputs = { x }, output = x, params = 256 * 256 }
      return nodes, "enc"
    end
  end
  local fn = { model = encoder(false), dtype = "fp32", seq = 197, batch = 8, mode = "inference", fusion = "flash_attention" }
  local built = workload.build(spec(fn))
  eq(built.nodes[2].op, "flash_attention", "function eager + flash: fused")
  eq(built.attention, "eager", "function eager + flash: its attention is the eager chain fused")
  eq(sdpa_warned(spec(fn)), false, "function eager + flash in fp32: no sdpa warning")
  fn.model = encoder(true)
  t = flash_warning(spec(fn)) or ""
  assert(t:find("(its attention is sdpa, already one fused FlashAttention kernel per layer)", 1, true)
    and t:find("; give --fusion alone", 1, true), "function sdpa + flash in fp32: sdpa said, got " .. t)
  -- A builder without sdpa refuses it by name; a bad value is an error with a suggestion.
  local ok, err = pcall(workload.build, spec { model = "switchxl4", attention = "sdpa", seq = 512, batch = 1 })
  assert(not ok and tostring(err):find("field 'attention': the switch model builder (scripts/neusight/models/switch.lua) has no sdpa attention", 1, true), tostring(err))
  eq(error_of(spec { attention = "spda" }),
    [[examples/w.lua: field 'attention' must be "eager" or "sdpa" (got "spda") (did you mean 'sdpa'?)]], "typo")
  -- bf16 Switch (no sdpa in its builder yet) keeps eager, as documented.
  workload.build(spec { model = "switchxl4", dtype = "bf16", seq = 512, batch = 1 })
end

-- What a workload was given that changes nothing in its forecast warns, naming the field and its flag: the
-- parallel-only fields on one GPU, the training-only ones in inference (neusight.workload.warnings).
function T.test_ignored_fields_warn()
  local function notes(changes, overrides)
    local out = {}
    for _, w in ipairs(workload.warnings(workload.normalize(spec(changes), overrides))) do
      out[#out + 1] = w:match("^(%S+ %(%-%-[%w-]+%)) has no effect: ") or ("other: " .. w)
    end
    return table.concat(out, " | ")
  end
  -- one GPU, training: each parallel-only field, in the script's table or as a flag
  for key, flag in pairs { kernels = "--kernels", schedule = "--schedule", virtual_stages = "--virtual-stages",
    bucket_mb = "--bucket-mb", overlap_grad_reduce = "--overlap-grad-reduce", cluster = "--cluster",
    distributed_optimizer = "--distributed-optimizer" } do
    local value = ({ kernels = "eager", schedule = "gpipe", virtual_stages = 1, bucket_mb = 50,
      overlap_grad_reduce = false, cluster = "dgx_h100", distributed_optimizer = true })[key]
    local want = ("parallel.%s (%s)"):format(key, flag)
    eq(notes { parallel = { [key] = value } }, want, key .. " in the script on one GPU")
    eq(notes(nil, { ["parallel." .. key] = value }), want, key .. " as a flag on one GPU")
  end
  -- inference: the training-only ones
  local inference = { mode = "inference" }
  eq(notes(inference, { optimizer = "adamw" }), "optimizer (--optimizer)", "optimizer in inference")
  eq(notes(inference, { optimizer_impl = "fused" }), "optimizer_impl (--optimizer-impl)", "optimizer_impl in inference")
  eq(notes(inference, { ["parallel.recompute"] = "full" }), "parallel.recompute (--recompute)", "recompute in inference")
  eq(notes(inference, { ["parallel.dp"] = 2, ["parallel.bucket_mb"] = 50, ["parallel.distributed_optimizer"] = true }),
    "parallel.bucket_mb (--bucket-mb) | parallel.distributed_optimizer (--distributed-optimizer)", "dp 2 in inference")
  eq(notes({ optimizer = "none" }, { optimizer_impl = "fused" }), "optimizer_impl (--optimizer-impl)", "no optimizer")
  -- ZeRO-3: no gradient buckets (each unit reduce-scatters its own); stages 0-2 have them
  eq(notes(nil, { ["parallel.dp"] = 2, ["parallel.zero"] = 3, ["parallel.bucket_mb"] = 50,
    ["parallel.overlap_grad_reduce"] = false }),
    "parallel.bucket_mb (--bucket-mb) | parallel.overlap_grad_reduce (--overlap-grad-reduce)", "zero 3")
  eq(notes(nil, { ["parallel.dp"] = 2, ["parallel.zero"] = 2, ["parallel.bucket_mb"] = 50 }), "", "zero 2: buckets")
  -- tp without dp: no gradient all-reduce
  eq(notes(nil, { ["parallel.tp"] = 2, ["parallel.bucket_mb"] = 50 }), "parallel.bucket_mb (--bucket-mb)", "tp 2, dp 1")
  -- what has an effect, the defaults filled in and what states "off" say nothing
  eq(notes(), "", "no field given")
  eq(notes(inference), "", "inference, nothing given")
  eq(notes({ optimizer = "adamw", optimizer_impl = "foreach" }), "", "training with an optimizer")
  eq(notes({ parallel = { dp = 1, tp = 1, pp = 1, ep = 1, microbatches = 1, recompute = "none",
    distributed_optimizer = false, sequence_parallel = false } }), "", "degrees of 1 and features off")
  eq(notes(inference, { optimizer = "none", ["parallel.recompute"] = "none" }), "", "inference, off stated")
  eq(notes(nil, { ["parallel.recompute"] = "full", ["parallel.kernels"] = "eager" }), "", "recompute plans one GPU")
  eq(notes(nil, { ["parallel.dp"] = 2, ["parallel.bucket_mb"] = 50, ["parallel.overlap_grad_reduce"] = false,
    ["parallel.distributed_optimizer"] = true, ["parallel.cluster"] = "dgx_h100", ["parallel.kernels"] = "eager" }),
    "", "data-parallel training")
  eq(notes(nil, { ["parallel.pp"] = 2, ["parallel.microbatches"] = 2, ["parallel.schedule"] = "interleaved",
    ["parallel.virtual_stages"] = 2 }), "", "interleaved pipeline")
  eq(notes(nil, { ["parallel.microbatches"] = 2, ["parallel.schedule"] = "gpipe" }), "", "microbatches on one GPU")
  -- --experts on a model without routed experts; a mixture of experts takes it
  eq(notes(inference, { experts = "grouped" }), "experts (--experts)", "experts on a dense model")
  eq(notes({ mode = "inference", model = "mixtral_8x7b" }, { experts = "grouped" }), "", "experts on a mixture of experts")
  -- normalized again (M.build does): the same notes, none from the defaults its parallel table has by now
  local twice = workload.normalize(workload.normalize(spec(inference), { optimizer = "adamw", ["parallel.dp"] = 2 }))
  eq(#workload.warnings(twice), 1, "normalized twice: the optimizer's note only")
  eq(#workload.warnings(workload.normalize(workload.normalize(spec(), { ["parallel.dp"] = 2 }))), 0, "dp 2 twice")
  -- a copy of a normalized table (search.lua's probe) has no notes: nothing is reported twice or by another command
  local w = workload.normalize(spec(inference), { optimizer = "adamw" })
  local copy = {}
  for k, v in pairs(w) do copy[k] = v end
  eq(#workload.warnings(copy), 0, "a copy")
  -- the message says why
  eq(workload.warnings(workload.normalize(spec(), { ["parallel.bucket_mb"] = 50 }))[1],
    "parallel.bucket_mb (--bucket-mb) has no effect: the gradient all-reduce buckets exist in data-parallel training only (dp = 1); drop it",
    "bucket_mb message")
end

-- A training pipeline left at its default single microbatch warns (the bubble is most of the iteration); a count
-- given, even 1, or a run without a pipeline, says nothing.
function T.test_default_single_microbatch_pipeline_warns()
  local function said(changes, overrides)
    local out = {}
    for _, w in ipairs(workload.warnings(workload.normalize(spec(changes), overrides))) do
      if w:find("microbatch", 1, true) then out[#out + 1] = w end
    end
    return out
  end
  local w = said(nil, { ["parallel.pp"] = 4 })
  eq(#w, 1, "pp 4, microbatches not given")
  eq(w[1]:find("pp 4 with 1 microbatch (the default; --microbatches, parallel.microbatches)", 1, true) ~= nil, true, w[1])
  eq(w[1]:find("= 75 % of the pipeline's time", 1, true) ~= nil, true, w[1])
  eq(#said({ parallel = { pp = 2 } }), 1, "in the script's table too")
  eq(#said(nil, { ["parallel.pp"] = 4, ["parallel.microbatches"] = 1 }), 0, "a count given, even 1")
  eq(#said({ parallel = { pp = 4, microbatches = 4 } }), 0, "several microbatches")
  eq(#said(nil, { ["parallel.dp"] = 4 }), 0, "no pipeline")
  eq(#said({ mode = "inference" }, { ["parallel.pp"] = 4 }), 0, "inference: a request's latency, no iteration")
end

-- A field's error names the script line that sets it, where exactly one line does; never a line for a value the
-- command line gave.
function T.test_field_errors_name_their_line()
  local text = table.concat({
    "-- batch = 99 in a comment is not a setting",
    "local opts = { note = 'seq = 5 in a string is not one either' }",
    "--[[ nor mode = 'x' in a long comment ]]",
    "return {",
    "  model = \"gpt2_large\", gpu = \"A100-PCIE-40GB\",",
    "  mode = \"train\", description = [[ dtype = 'bf16' in a long string ]],",
    "  batch = -4, seq=1024,",
    "  dtyp = \"bf16\",",
    "}",
  }, "\n")
  eq(workload.field_line(text, "batch"), 7, "the one line setting batch (not the comment)")
  eq(workload.field_line(text, "seq"), 7, "seq=1024 without blanks (not the string)")
  eq(workload.field_line(text, "mode"), 6, "mode (not the long comment)")
  eq(workload.field_line(text, "dtype"), nil, "a name only a long string sets")
  eq(workload.field_line(text, "nothing"), nil, "a field the text does not set")
  eq(workload.field_line("a = 1\nb = { a = 2 }\n", "a"), nil, "two lines set it: no line rather than a wrong one")
  eq(workload.field_line("if a == 1 then end\na = 2\n", "a"), 2, "a comparison is not a setting")
  eq(workload.field_line(text, "bat.ch"), nil, "not a name")
  -- set another way somewhere: the `key =` line may not be the one that counts (a wrong line is worse than none)
  eq(workload.field_line("local w = { batch = 64 }\nw.batch = 0\nreturn w\n", "batch"), nil, "x.key = elsewhere")
  eq(workload.field_line("local w = { batch = 64 }\nw . batch = 0\nreturn w\n", "batch"), nil, "x . key = elsewhere")
  eq(workload.field_line("local t = { dtype = 'bf16' }\nreturn { [\"dtype\"] = 'bf17' }\n", "dtype"), nil, "[\"key\"] =")
  eq(workload.field_line("local gpu = 'H100'\nreturn { gpu = gpu }\n", "gpu"), nil, "a local of that name")
  eq(workload.field_line("return { figures = function(f) local dtype = f.dtype end, dtype = 'x' }\n", "dtype"), nil,
    "a local inside a function")
  eq(workload.field_line("return { f = function(a, seq) seq = 1 end,\n seq = 2 }\n", "seq"), nil, "a parameter")
  local function err(w, overrides)
    local ok, e = pcall(workload.normalize, w, overrides, "examples/w.lua", text)
    assert(not ok, "expected an error")
    return e
  end
  eq(err(spec { batch = -4 }), "examples/w.lua:7: field 'batch' must be a positive integer (got -4)", "batch")
  eq(err(spec { dtyp = "bf16" }), "examples/w.lua:8: unknown field 'dtyp' (did you mean 'dtype'?)", "unknown field")
  eq(err(spec(), { batch = -4 }), "examples/w.lua: --batch must be a positive integer (got -4)",
    "the command line's value: no script line, said by its flag")
  text = "return {\n  parallel = { dp = 3 },\n}\n"
  eq(err(spec { parallel = { dp = 3 } }),
    "examples/w.lua:2: field 'parallel': the global batch 4 is not divisible by dp × microbatches = 3 × 1",
    "the script's parallel table")
  eq(err(spec { parallel = { dp = 1 } }, { ["parallel.dp"] = 3 }),
    "examples/w.lua: field 'parallel': the global batch 4 is not divisible by dp × microbatches = 3 × 1",
    "a parallel value from the command line: no script line")
end

-- A function model's node errors name the script's line that writes the node (node_line: its `name = "…"` literal),
-- where one line certainly does; else the script alone (issue 15: they named neither)
function T.test_node_errors_name_their_line()
  local text = table.concat({
    "-- name = \"fc\" in a comment is not a node",
    "local function m(opts)",
    "  return {",
    "    { op = 'linear', name = 'fc', inputs = { { 2, 8 } }, output = { 2, 8 }, params = 64 },",
    "    { op = \"gelu\", name = \"act\", inputs = { { 2, 8 } }, output = { 2, 8 } },",
    "  }",
    "end",
    "return { model = m, gpu = 'h100', mode = 'inference', batch = 2, seq = 8 }",
  }, "\n")
  eq(workload.node_line(text, "fc"), 4, "single quotes (not the comment)")
  eq(workload.node_line(text, "act"), 5, "double quotes")
  eq(workload.node_line(text, "nothing"), nil, "a name the text does not write")
  eq(workload.node_line(text, "f"), nil, "a prefix of a name is not the name")
  local twice = "a = { name = 'x' }\nb = { name = 'x' }\n"
  eq(workload.node_line(twice, "x"), nil, "on two lines: no line rather than a wrong one")
  eq(workload.node_line(twice, "x", 2, 2), 2, "the second of two nodes of that name")
  eq(workload.node_line(twice, "x", 2, 3), nil, "three nodes of that name, two literals")
  eq(workload.node_line("t.name = 'x'\n", "x"), nil, "x.name = is no node")
  local function err(nodes)
    local spec = { model = function() return nodes, "m" end, gpu = "h100", mode = "inference", batch = 2, seq = 8 }
    local ok, e = pcall(workload.build, workload.normalize(spec, nil, "examples/w.lua", text))
    assert(not ok, "expected an error")
    return e
  end
  local function fc(changes)
    local n = { op = "linear", name = "fc", inputs = { { 2, 8 } }, output = { 2, 8 }, params = 64 }
    for k, v in pairs(changes) do n[k] = v end
    return n
  end
  eq(err { fc { output = { 2, -8 } } },
    "examples/w.lua:4: model: node #1 'fc': field 'output' must be a shape: dimension 2 is -8, expected a non-negative "
      .. "integer", "a shape")
  eq(err { fc { params = -5 } }, "examples/w.lua:4: model: node #1 'fc': field 'params' must be >= 0 (got -5)", "params")
  eq(err { fc { output = false, outptu = { 2, 8 } } },
    "examples/w.lua:4: model: node #1 'fc': unknown field 'outptu' (did you mean 'output'?)",
    "a required field under another name: the did-you-mean, not only that it is missing")
  eq(err { fc {}, fc { name = "act" }, fc { name = "act" } },
    "examples/w.lua: model: node #3 'act': node #2 has that name too (each node needs a name of its own: the report's "
      .. "rows and attrs.tied name nodes)", "a name twice, one literal: the script alone")
  eq(err { fc { name = "nothing", output = { 2, 0.5 } } },
    "examples/w.lua: model: node #1 'nothing': field 'output' must be a shape: dimension 2 is 0.5, expected a "
      .. "non-negative integer", "a name the script does not write: the script alone")
end

-- The engine's node check a script may call (ns.check_nodes) names the node of a dtype no engine name answers, as its
-- other node errors, and the script's line of it where `located` gives one: it raised a bare "unknown dtype 'fp33'",
-- not even the `where` (a workload's nodes reach it with their dtype converted: neusight.workload node_problem).
function T.test_engine_check_nodes_names_the_node_of_an_unknown_dtype()
  local ns = require "neusight"
  local nodes = { { op = "linear", name = "fc", inputs = { { 2, 8 } }, output = { 2, 8 }, params = 64 },
    { op = "gelu", name = "act", inputs = { { 2, 8 } }, output = { 2, 8 }, dtype = "fp33" } }
  local ok, err = pcall(ns.check_nodes, nodes, "mine.lua: model 'm'")
  assert(not ok and tostring(err):find("mine.lua: model 'm': node #2 'act': field 'dtype': unknown dtype 'fp33'", 1,
    true) == 1, tostring(err))
  local function located(i, where) return (where:gsub(":", ":" .. i .. "0:", 1)) end  -- node i at line i0
  ok, err = pcall(ns.check_nodes, nodes, "mine.lua: model 'm'", located)
  assert(not ok and tostring(err):find("mine.lua:20: model 'm': node #2 'act': field 'dtype': unknown dtype 'fp33'", 1,
    true) == 1, "the node's line: " .. tostring(err))
end

-- A builder's error about a field of the model config the script writes in place names the line that sets it, where
-- that is certain (model_field_line: the key set once, inside the `model = { … }` braces); else the message as it was.
function T.test_model_config_errors_name_their_line()
  local text = table.concat({
    "-- n_head = 3 in a comment is not a setting",
    "return {",
    "  model = {",
    "    arch = \"gpt\", name = \"m\",",
    "    n_layer = 2, n_embd = 128,",
    "    n_head = 0,",
    "    vocab_size = 1000, n_positions = 256, n_postions = 1,",
    "  },",
    "  gpu = \"h100\", mode = \"inference\", batch = 1, seq = 8,",
    "}",
  }, "\n")
  eq(workload.model_field_line(text, "n_head"), 6, "the one line setting n_head inside the config")
  eq(workload.model_field_line(text, "n_postions"), 7, "an unknown key's line")
  eq(workload.model_field_line(text, "arch"), 4, "arch")
  eq(workload.model_field_line(text, "batch"), nil, "a top-level field is outside the config's braces")
  eq(workload.model_field_line(text, "nothing"), nil, "a key the text does not set")
  -- not certain: no line rather than a wrong one
  eq(workload.model_field_line("local c = { n_head = 0 }\nreturn { model = c }\n", "n_head"), nil,
    "the config is not written in place")
  eq(workload.model_field_line("return {\n  model = { n_head = 4 },\n  other = { n_head = 0 },\n}\n", "n_head"), nil,
    "the key on two lines")
  eq(workload.model_field_line("local x = { n_head = 0 }\nreturn {\n  model = { arch = 'gpt' },\n}\n", "n_head"), nil,
    "set once, but outside the config")
  eq(workload.model_field_line("local m = {\n  n_head = 1,\n}\nm.n_head = 0\nreturn { model = m }\n", "n_head"), nil,
    "x.key = elsewhere")
  eq(workload.model_field_line("return {\n  model = {\n    n_head = 0, a = { n_head = 1 },\n  },\n}\n", "n_head"), 3,
    "twice on one line: that line")
  eq(workload.model_field_line("return {\n  model =\n  { n_head = 0 },\n}\n", "n_head"), 3,
    "the constructor's brace on the line after model =")
  eq(workload.model_field_line("return {\n  model = { s = '}', n_head = 0 },\n}\n", "n_head"), 2,
    "a brace in a string does not close the config")

  -- the tables the texts above and below return (no `load` in a sandbox)
  local function gpt_spec(model)
    return { model = model, gpu = "h100", mode = "inference", batch = 1, seq = 8 }
  end
  local function cfg(extra)
    local c = { arch = "gpt", name = "m", n_layer = 2, n_embd = 128, n_head = 0, vocab_size = 1000, n_positions = 256 }
    for k, v in pairs(extra or {}) do c[k] = v end
    return c
  end
  local function err(spec, chunk)
    local ok, e = pcall(workload.build, workload.normalize(spec, nil, "examples/w.lua", chunk), nil, chunk, "examples/w.lua")
    assert(not ok, "expected an error")
    return e
  end
  eq(err(gpt_spec(cfg()), (text:gsub(", n_postions = 1", ""))),
    "examples/w.lua:6: gpt model 'm': field 'n_head' must be a positive integer (got 0)", "a bad count")
  local typo = text:gsub("n_head = 0", "n_head = 4")
  eq(err(gpt_spec(cfg { n_head = 4, n_postions = 1 }), typo),
    "examples/w.lua:7: gpt model 'm': unknown field 'n_postions' (did you mean 'n_positions'?)", "a typo")
  local two = typo:gsub("n_embd = 128", "n_embd = 130"):gsub(", n_postions = 1", "")
  eq(err(gpt_spec(cfg { n_head = 4, n_embd = 130 }), two),
    "examples/w.lua:3: gpt model 'm': n_embd (130) must be divisible by n_head (4)",
    "two fields on two lines: the config's line")
  local one = two:gsub("n_embd = 130,\n    n_head = 4,", "n_embd = 130, n_head = 4,")
  eq(err(gpt_spec(cfg { n_head = 4, n_embd = 130 }), one),
    "examples/w.lua:5: gpt model 'm': n_embd (130) must be divisible by n_head (4)", "two fields on one line: that line")
  -- the other forms a builder names one field in: "<key> <value> is not supported", "<key>[i] must be"
  local bert = "return {\n  model = {\n    arch = 'bert', num_hidden_layers = 2, hidden_size = 64,\n" ..
    "    num_attention_heads = 4, intermediate_size = 128, vocab_size = 100,\n    max_position_embeddings = 64, " ..
    "type_vocab_size = 2,\n    hidden_act = 'tanh',\n  },\n}\n"
  eq(err(gpt_spec { arch = "bert", num_hidden_layers = 2, hidden_size = 64, num_attention_heads = 4,
    intermediate_size = 128, vocab_size = 100, max_position_embeddings = 64, type_vocab_size = 2, hidden_act = "tanh" },
    bert), "examples/w.lua:6: bert model '?': hidden_act tanh is not supported (\"gelu\" or \"relu\")", "is not supported")
  local qwen = "return {\n  model = {\n    arch = 'llama', model_type = 'qwen2', hidden_size = 64, intermediate_size = 128,\n" ..
    "    num_attention_heads = 4, num_key_value_heads = 4, num_hidden_layers = 2, vocab_size = 100,\n" ..
    "    layer_types = { 'full_attention', 'sliding' },\n  },\n}\n"
  eq(err(gpt_spec { arch = "llama", model_type = "qwen2", hidden_size = 64, intermediate_size = 128,
    num_attention_heads = 4, num_key_value_heads = 4, num_hidden_layers = 2, vocab_size = 100,
    layer_types = { "full_attention", "sliding" } },
    qwen), "examples/w.lua:5: llama model '?': layer_types[2] must be \"full_attention\" or \"sliding_attention\" (got "
    .. "sliding)", "an element of a list field")
  eq(err(gpt_spec(cfg()), "local c = { n_head = 0 }\nreturn { model = c }\n"),
    "gpt model 'm': field 'n_head' must be a positive integer (got 0)", "not written in place: no line")
  local ok, e = pcall(workload.build, workload.normalize(gpt_spec(cfg())), nil)
  assert(not ok)
  eq(e, "gpt model 'm': field 'n_head' must be a positive integer (got 0)", "without the script's text: as it was")
  -- the plan's errors about the parallel table written in place: the line of the field they name (its last name)
  local par_text = "return {\n  model = 'gpt2_large', gpu = 'h100', mode = 'train', batch = 8, seq = 128,\n" ..
    "  parallel = {\n    dp = 2,\n    cluster = { nodes = 1,\n      gpus_per_node = 1e308 },\n  },\n}\n"
  local par_spec = { model = "gpt2_large", gpu = "h100", mode = "train", batch = 8, seq = 128,
                     parallel = { dp = 2, cluster = { nodes = 1, gpus_per_node = 1e308 } } }
  local gpu = { name = "H100", interconnect = "nvlink4", interconnect_bw_gbps = 900, pcie_bw_gbps = 64, mem_gb = 80 }
  local function perr(over, chunk)
    local ok2, e2 = pcall(workload.build, workload.normalize(par_spec, over, "examples/w.lua", chunk or par_text), gpu)
    assert(not ok2, "expected an error")
    return e2
  end
  eq(perr(), "examples/w.lua:6: parallel.cluster.gpus_per_node: at most 1048576 expected, got 1e+308", "a cluster field")
  eq(perr { ["parallel.dp"] = 2 }, "parallel.cluster.gpus_per_node: at most 1048576 expected, got 1e+308",
    "the command line gave a parallel value: no script line")
  eq(perr(nil, "local c = { gpus_per_node = 1e308 }\nreturn { parallel = { cluster = c } }\n"),
    "parallel.cluster.gpus_per_node: at most 1048576 expected, got 1e+308", "not written in place: no line")
  -- a top-level field a builder cannot run: its line, the file alone when the command line gave the value
  local att = "return {\n  model = 'switchxl4', gpu = 'h100', mode = 'inference',\n  batch = 1, seq = 8,\n" ..
    "  attention = 'sdpa',\n}\n"
  local att_spec = { model = "switchxl4", gpu = "h100", mode = "inference", batch = 1, seq = 8, attention = "sdpa" }
  local function aerr(over)
    local ok2, e2 = pcall(workload.build, workload.normalize(att_spec, over, "examples/w.lua", att))
    assert(not ok2, "expected an error")
    return e2
  end
  local no_sdpa = "field 'attention': the switch model builder (scripts/neusight/models/switch.lua) has no sdpa "
    .. "attention; use attention = \"eager\""
  eq(aerr(), "examples/w.lua:4: " .. no_sdpa, "the script's attention")
  eq(aerr { attention = "sdpa" }, "examples/w.lua: " .. no_sdpa, "--attention: the file alone")
  -- the model table's own fields in normalize: arch and name
  local function nerr(model, chunk)
    local ok2, e2 = pcall(workload.normalize, gpt_spec(model), nil, "examples/w.lua", chunk)
    assert(not ok2)
    return e2
  end
  local function lines(field)
    return "return {\n  model = {\n    " .. field .. ",\n  },\n  gpu = 'h100', mode = 'inference', batch = 1, seq = 8,\n}\n"
  end
  eq(nerr({ arch = "gtp" }, lines "arch = 'gtp'"),
    "examples/w.lua:3: field 'model' table field 'arch' = \"gtp\" names no model builder (no "
    .. "neusight/models/gtp.lua on the script search path) (did you mean 'gpt'?); bundled builders: bert, deepseek, gpt, "
    .. "llama, moe, opt, switch",
    "an arch naming no builder")
  eq(nerr({ arch = "check" }, lines "arch = 'check'"),
    "examples/w.lua:3: field 'model' table field 'arch' = \"check\": neusight/models/check.lua on the script search path "
    .. "is not a model builder (no build function); bundled builders: bert, deepseek, gpt, llama, moe, opt, switch",
    "a module that builds nothing")
  eq(nerr({ arch = "gpt", name = "" }, lines "arch = 'gpt', name = ''"),
    "examples/w.lua:3: field 'model' table field 'name' must be a non-empty string (got \"\")", "an empty name")
  eq(nerr({ name = "m" }, lines "name = 'm'"),
    "examples/w.lua:2: field 'model' table needs a string 'arch' naming a builder in neusight/models/ (got nil)",
    "no arch: the line of model =")
end

-- A rotary model's max_position_embeddings written as a whole-number float (2048.0 in a config.json or a Lua config)
-- is the integer it equals, as the builders' check takes it: beyond it the forecast warns (it said nothing: the limit
-- had to be a Lua integer).
function T.test_position_limit_of_a_whole_number_float()
  local cfg = { arch = "llama", name = "f", model_type = "llama", hidden_size = 64, intermediate_size = 128,
                num_attention_heads = 4, num_hidden_layers = 2, vocab_size = 100, max_position_embeddings = 2048.0 }
  local limit = workload.position_limit(cfg)
  eq(math.type(limit), "integer", "the limit's type")
  eq(limit, 2048, "the limit")
  local function warnings(seq)
    return workload.warnings(workload.normalize { model = cfg, gpu = "A100-PCIE-40GB", mode = "prefill", batch = 1,
                                                  seq = seq })
  end
  eq(warnings(4096)[1], "seq 4096 exceeds the model's max_position_embeddings 2048 (the forecast assumes the model "
    .. "runs at that length, e.g. with RoPE scaling)", "beyond it")
  eq(#warnings(2048), 0, "within it")
  -- not a count: no limit (the builder refuses it)
  eq(workload.position_limit { arch = "llama", max_position_embeddings = 2048.5 }, nil, "2048.5")
  eq(workload.position_limit { arch = "llama", max_position_embeddings = "2048" }, nil, "a string")
end

-- tester3 problem 9: recipes no trainer runs were accepted silently. Pure fp8 training (fp8 weights, gradients and
-- Adam moments) warns; fp8 amp outside Megatron kernels, fp32 parameters, gradients and moments with cached fp8 weight
-- copies, is Transformer Engine's recipe and named so (it read "autocast": torch.autocast has no fp8).
function T.test_fp8_recipes_say_what_they_are()
  local precision = require "neusight.precision"
  local function warned(changes, text)
    for _, w in ipairs(workload.warnings(workload.normalize(spec(changes)))) do
      if w:find(text, 1, true) then return true end
    end
    return false
  end
  local pure = "precision pure with dtype fp8 in training keeps the weights, gradients and optimizer moments in fp8"
  eq(warned({ dtype = "fp8", precision = "pure", optimizer = "adamw" }, pure), true, "pure fp8 training warns")
  eq(warned({ dtype = "fp8", optimizer = "adamw" }, pure), false, "amp (the default for fp8 training): no such warning")
  eq(warned({ dtype = "bf16", precision = "pure", optimizer = "adamw" }, pure), false, "pure bf16: a recipe people run")
  eq(warned({ dtype = "fp8", mode = "inference" }, pure), false, "fp8 inference: weights in fp8 is what it means")
  local te = precision.recipe("amp", "fp8", "autocast")
  eq(te.convention, "transformer_engine", "fp8 amp with eager kernels: Transformer Engine's, not autocast")
  eq(te.param .. te.grad .. te.moment, "fp32fp32fp32", "the same bytes as before: fp32 state")
  eq(precision.caches_weights(te), true, "with its fp8 weight copies cached (neusight.memory)")
  eq(precision.recipe("amp", "bf16", "autocast").convention, "autocast", "bf16: torch.autocast")
  eq(precision.recipe("amp", "fp8", "megatron").convention, "megatron", "Megatron kernels: Megatron-LM's optimizer")
  eq(precision.caches_weights(precision.recipe("amp", "bf16", "megatron")), false, "Megatron: bf16 parameters, no cache")
end

return T
