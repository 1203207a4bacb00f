-- tests/scripts/test_lora.lua — LoRA fine-tuning (workload fields lora_rank, lora_targets; scripts/neusight/lora.lua):
-- Llama-3-8B bf16, rank 16 on PEFT's common targets: the adapters' parameters by hand from the config, no base
-- weight-gradient GEMM or accumulation, the optimizer step and the gradient / optimizer state over the adapters alone,
-- the GEMM FLOPs per token by formula, memory far below full fine-tuning; and the bad-input errors.
local workload = require "neusight.workload"
local presets = require "neusight.models.presets"

local testing = require "neusight.testing"
local t = testing.bind(load_op, make_node)
local eq = t.eq

local T = {}

local SEQ, R = 2048, 16
local function spec(extra)
  local s = { model = "llama3_8b", gpu = "h100", mode = "train", batch = 1, seq = SEQ, dtype = "bf16",
              optimizer = "adamw" }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local err_of = testing.error_of

-- the adapters' parameters by hand from the config: R · (in + out) for q, k, v, o, gate, up, down, every layer
local function adapter_params()
  local c = presets.llama3_8b
  local h, i, kv = c.hidden_size, c.intermediate_size, c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
  local per_layer = (h + h) + (h + kv) + (h + kv) + (h + h) + 3 * (h + i)
  return R * per_layer * c.num_hidden_layers
end

local function optimizer_node(nodes)
  for _, n in ipairs(nodes) do if n.phase == "optimizer" then return n end end
end

function T.test_lora_adapter_params_and_frozen_base()
  local full = workload.build(spec())
  local lora = workload.build(spec { lora_rank = R })
  local A = adapter_params()
  eq(A, 41943040, "the hand count: 32 · 16 · (8192 + 5120 + 5120 + 8192 + 3 · 18432)")
  local trainable, all, adapters, wgrad_base, acc_base = 0, 0, 0, 0, 0
  for _, n in ipairs(lora.nodes) do
    all = all + n.params * n.count
    if not n.attrs.frozen then trainable = trainable + n.params * n.count end
    if n.name:match("%.lora_[AB]$") then
      adapters = adapters + 1
      local _, bw, acc = t.kernels(n, true)
      eq(#bw, 2, n.name .. ": dgrad and wgrad GEMMs")
      assert(bw[2].wgrad, n.name .. ": its wgrad GEMM")
      eq(#acc, 1, n.name .. ": its gradient accumulated (no bias)")
    elseif n.attrs.frozen then
      local _, bw, acc = t.kernels(n, true)
      for _, k in ipairs(bw) do if k.wgrad then wgrad_base = wgrad_base + 1 end end
      acc_base = acc_base + #acc
      if n.op == "linear" then eq(#bw, 1, n.name .. ": the dgrad GEMM alone") end
      if n.op == "embedding" then eq(#bw, 0, n.name .. ": no backward (the ids take no gradient)") end
    end
  end
  eq(trainable, A, "trainable parameters = the adapters'")
  eq(all, testing.params(full.nodes) + A, "all parameters = the base's + the adapters'")
  eq(adapters, 2 * 7, "A and B on 7 linears (one node each, count 32)")
  eq(wgrad_base, 0, "no weight-gradient GEMM of a base node")
  eq(acc_base, 0, "no gradient accumulation of a base node")
  eq(optimizer_node(lora.nodes).inputs[1][1], A, "the optimizer step over the adapters alone")
  eq(optimizer_node(full.nodes).inputs[1][1], testing.params(full.nodes), "full fine-tuning steps every parameter")
end

-- model state, precision pure (LoRA's default: the base loaded in bf16): every weight at 2 B, gradients (2 B) and
-- AdamW's two moments (2 × 2 B) of the adapters alone
function T.test_lora_state_and_memory()
  local full = workload.build(spec())
  local lora = workload.build(spec { lora_rank = R })
  eq(lora.state.convention, "pure", "LoRA's default recipe")
  local A, P = adapter_params(), testing.params(full.nodes)
  local st = lora.memory.memory.state
  local near = function(a, b, what) testing.near(a, b, what, 1e-9) end
  near(st.gradients_gb * 1e9, A * 2, "gradients: the adapters' bf16 .grad")
  near(st.optimizer_gb * 1e9, A * 4, "optimizer: the adapters' two bf16 moments")
  near(st.weights_gb * 1e9, (P + A) * 2, "weights: the base and the adapters in bf16")
  assert(lora.memory.memory_gb < 0.3 * full.memory.memory_gb,
    ("LoRA memory %.2f GB is far below full fine-tuning's %.2f GB"):format(lora.memory.memory_gb, full.memory.memory_gb))
  -- an explicit amp: an fp32 model under autocast, the adapters' fp32 gradients and moments
  local amp = workload.build(spec { lora_rank = R, precision = "amp" }).memory.memory.state
  near(amp.gradients_gb * 1e9, A * 4, "amp gradients")
  near(amp.optimizer_gb * 1e9, A * 8, "amp moments")
  near(amp.weights_gb * 1e9, (P + A) * 4, "amp weights fp32")
end

-- GEMM FLOPs per token (forward + backward): full fine-tuning 6 · P_lin (forward, dgrad, wgrad: 2 each per weight);
-- LoRA 4 · P_lin (forward and dgrad alone: no wgrad) + 6 · P_A (the adapters' forward, dgrad and wgrad), P_lin the
-- base linears' weights (lm_head included). The attention core (sdpa, no weights) is the same in both.
function T.test_lora_flops_per_token()
  local full = workload.build(spec())
  local lora = workload.build(spec { lora_rank = R })
  local P_lin = 0
  for _, n in ipairs(full.nodes) do
    if n.op == "linear" then P_lin = P_lin + n.params * n.count end
  end
  local tokens = SEQ
  local f_full = t.matmul_flops(full.nodes) / tokens
  assert(math.abs(f_full / (6 * P_lin) - 1) < 0.01, ("full: %.6g vs 6 · P_lin = %.6g"):format(f_full, 6 * P_lin))
  local expected = 4 * P_lin + 6 * adapter_params()
  local got = t.matmul_flops(lora.nodes) / tokens
  assert(math.abs(got / expected - 1) < 0.01, ("LoRA GEMM FLOPs per token %.6g vs 4 · P_lin + 6 · P_A = %.6g")
    :format(got, expected))
  local function attention(nodes)
    return t.flops(nodes, true, "fw", "attention") + t.flops(nodes, true, "bw", "attention")
  end
  assert(attention(full.nodes) > 0, "the attention core is counted")
  eq(attention(lora.nodes), attention(full.nodes), "the attention core alike")
end

-- targets: short forms, a subset, the saved inputs (x saved once per group of linears that read it)
function T.test_lora_targets()
  local qv = workload.build(spec { lora_rank = 8, lora_targets = "q,v_proj" })
  local names = {}
  for _, n in ipairs(qv.nodes) do
    if n.name:match("%.lora_A$") then names[#names + 1] = n.name end
  end
  eq(table.concat(names, " "), "layers.self_attn.q_proj.lora_A layers.self_attn.v_proj.lora_A", "q and v only")
  for _, n in ipairs(qv.nodes) do
    if n.name == "layers.self_attn.q_proj.lora_A" then eq(n.attrs.saved_inputs, nil, "q's adapter saves x") end
    if n.name == "layers.self_attn.v_proj.lora_A" then eq(n.attrs.saved_inputs, "", "v's reads the x q's saves") end
    if n.op == "linear" and n.attrs.frozen then eq(n.attrs.saved_inputs, "", n.name .. ": a frozen GEMM saves no x") end
  end
  local list = workload.build(spec { lora_rank = 8, lora_targets = { "q_proj", "v_proj" } })
  eq(#list.nodes, #qv.nodes, "a list names the same targets")
end

function T.test_lora_bad_inputs()
  eq(err_of(workload.normalize, spec { lora_rank = 0 }):match("lora_rank.-positive integer") ~= nil, true, "rank 0")
  eq(err_of(workload.normalize, spec { lora_rank = 8.5 }):match("positive integer") ~= nil, true, "non-integer")
  eq(err_of(workload.normalize, spec { lora_rank = "16" }):match("positive integer") ~= nil, true, "a string")
  local inf = err_of(workload.normalize, spec { lora_rank = 8, mode = "inference" })
  assert(inf:find("applies to mode \"train\" only", 1, true), inf)
  local no_rank = err_of(workload.normalize, spec { lora_targets = "q" })
  assert(no_rank:find("needs 'lora_rank'", 1, true), no_rank)
  local bad = err_of(workload.normalize, spec { lora_rank = 8, lora_targets = "q,,v" })
  assert(bad:find("lora_targets", 1, true) and bad:find("must name linear modules", 1, true), bad)
  local unknown = err_of(workload.build, spec { lora_rank = 8, lora_targets = "q,qkv" })
  assert(unknown:find("\"qkv\" matches no linear of model 'llama3_8b'", 1, true), unknown)
  assert(unknown:find("q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head", 1, true), unknown)
  local par = err_of(workload.normalize, spec { lora_rank = 8, parallel = { dp = 2 }, batch = 2 })
  assert(par:find("parallel table is not modelled", 1, true), par)
  -- GPT-2's GEMMs are Conv1D (addmm): none of the default targets, its GEMMs named as no targets
  local gpt = err_of(workload.build, spec { model = "gpt2_med", lora_rank = 8, seq = 512 })
  assert(gpt:find("none of PEFT's common targets", 1, true) and gpt:find("its addmm GEMMs c_attn", 1, true), gpt)
  -- a parameter the rules cannot freeze (BERT's token-type table, a view holding its weights): said, not trained
  local bert = err_of(workload.build, spec { model = "bert", lora_rank = 8, seq = 512, lora_targets = "query" })
  assert(bert:find("freezing op 'view' is not modelled", 1, true), bert)
  -- Phi-3's fused qkv_proj: PEFT's q/k/v names match nothing there, o_proj and down_proj do
  local phi = workload.build(spec { model = "phi3_mini", lora_rank = 8, seq = 512 })
  local adapted = {}
  for _, n in ipairs(phi.nodes) do if n.name:match("%.lora_A$") then adapted[#adapted + 1] = n.name end end
  eq(table.concat(adapted, " "), "layers.self_attn.o_proj.lora_A layers.mlp.down_proj.lora_A", "Phi-3's defaults")
end

return T
