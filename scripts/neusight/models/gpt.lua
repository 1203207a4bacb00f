-- scripts/neusight/models/gpt.lua — GPT-2-style decoder (HF GPT2LMHeadModel, eager attention, gelu_new) as an op graph.
--
-- The node sequence mirrors the reference's traced one-layer graph (opgraph/gpt2_large-train-1024-4.csv,
-- the rows with kernels), so a forecast decomposes into the same kernels. The transformer layer is
-- emitted once with count = n_layer (layer "h"), never copied per layer. Departures from the trace:
--   * the trace's getitems on size() results (Python ints, e.g. getitem_4, _8…_10, _12…_15: MEM of
--     two 1-element shapes) are left out: they are host-side bookkeeping, not GPU kernels;
--   * view/permute/split nodes are kept only where they explain a shape change (they cost nothing);
--   * lm_head is bias-free: we accumulate no bias gradient (the reference adds VECadd(1, V) anyway);
--   * in training, the HF loss (shift + cross-entropy) is appended unless opts.loss == false; the
--     reference neither traces nor measures a loss.
local ipairs, type, tostring, error = ipairs, type, tostring, error

local checks = require "neusight.models.check"

local M = {}

-- Validates cfg/opts; errors name the model and the field (level 0: the position is the config, not Lua code).
local function check(cfg, opts)
  local who = ("gpt model '%s'"):format(tostring(cfg.name or "?"))
  checks.counts(who, cfg, { "n_layer", "n_embd", "n_head", "vocab_size", "n_positions" }, { "n_inner" })
  if cfg.n_embd % cfg.n_head ~= 0 then
    error(("%s: n_embd (%d) must be divisible by n_head (%d)"):format(who, cfg.n_embd, cfg.n_head), 0)
  end
  checks.batch_seq(who, opts, cfg.n_positions, "n_positions")
end

--- Builds the op graph of one forward pass (the engine derives backward/accumulate from the op rules).
---@param cfg { name?: string, n_layer: integer, n_embd: integer, n_head: integer, vocab_size: integer, n_positions: integer, n_inner?: integer, tie_word_embeddings?: boolean }
---@param opts { batch: integer, seq: integer, training?: boolean, dtype?: string, loss?: boolean }
---@return neusight.Node[]
function M.build(cfg, opts)
  check(cfg, opts)
  local b, s, h, nh = opts.batch, opts.seq, cfg.n_embd, cfg.n_head
  local V, P, L = cfg.vocab_size, cfg.n_positions, cfg.n_layer
  local hd, ni, T = h // nh, cfg.n_inner or 4 * h, b * s
  local dtype = opts.dtype or "fp32"

  local nodes, layer, count = {}, "", 1
  local function add(op, name, inputs, output, params, attrs)
    nodes[#nodes + 1] = {
      op = op, name = name, layer = layer, count = count, dtype = dtype,
      inputs = inputs, output = output, params = params or 0, attrs = attrs or {},
    }
  end

  -- Shapes are shared between nodes: nodes are read-only for op rules and the engine.
  local x = { b, s, h }                     -- residual stream
  local heads = { b, nh, s, hd }            -- per-head q / v / attention output
  local scores = { b, nh, s, s }            -- attention scores
  local act = { b, s, ni }                  -- MLP hidden activation

  -- Embeddings. wpe is the same lookup as wte, but the reference classifies `transformer_wpe` as
  -- 'misc' (its name matches none of its embedding patterns), so it costs nothing there. To keep
  -- forecasts comparable it is a zero-kernel "view" node here; its parameters still count for the optimizer.
  add("embedding", "wte", { { b, s } }, x, V * h, { num_embeddings = V, embedding_dim = h })
  add("view", "wpe", { { 1, s } }, { 1, s, h }, P * h)
  add("add", "embd_add", { x, { 1, s, h } }, x)
  add("dropout", "drop", { x }, x)

  layer, count = "h", L
  add("layernorm", "h.ln_1", { x }, x, 2 * h)
  -- Conv1D c_attn, traced as addmm(bias, x2d, W).
  add("addmm", "h.attn.c_attn", { { 3 * h }, { T, h }, { h, 3 * h } }, { T, 3 * h }, h * 3 * h + 3 * h)
  add("split", "h.attn.split", { { b, s, 3 * h } }, x)
  -- The trace records the tuple unpacking of split() as three getitems with a stale (1,) input and
  -- charges each a MEM of its output; split() returns views, but we mirror the reference here.
  for _, which in ipairs { "q", "k", "v" } do
    add("getitem", "h.attn.split." .. which, { { 1 } }, x)
  end
  add("permute", "h.attn.split_heads", { { b, s, nh, hd } }, heads)
  add("matmul", "h.attn.qk", { heads, { b, nh, hd, s } }, scores)
  -- attn / torch.full([], √hd): the divisor is a 0-dim tensor, which the reference counts as a
  -- second operand (VECdiv, two backward kernels), hence tensor_inputs = 2.
  add("div", "h.attn.scale", { scores, { 1 } }, scores, 0, { tensor_inputs = 2 })
  -- bias[:, :, s-s:s, :s] slices the (1, 1, n_positions, n_positions) causal-mask buffer.
  add("getitem", "h.attn.causal_mask", { { 1, 1, P, P }, { 1 }, { 1 } }, { 1, 1, s, s })
  add("where", "h.attn.mask", { { 1, 1, s, s }, scores, { 1 } }, scores)
  add("softmax", "h.attn.softmax", { scores }, scores)
  add("dropout", "h.attn.attn_dropout", { scores }, scores)
  add("matmul", "h.attn.pv", { scores, heads }, heads)
  add("permute", "h.attn.merge_heads", { heads }, { b, s, nh, hd })
  add("contiguous", "h.attn.contiguous", { { b, s, nh, hd } }, { b, s, nh, hd })
  add("addmm", "h.attn.c_proj", { { h }, { T, h }, { h, h } }, { T, h }, h * h + h)
  add("dropout", "h.attn.resid_dropout", { x }, x)
  add("add", "h.attn.residual", { x, x }, x, 0, { fused_external = 1 }) -- x + residual stream (fusion.lua)
  add("layernorm", "h.ln_2", { x }, x, 2 * h)
  add("addmm", "h.mlp.c_fc", { { ni }, { T, h }, { h, ni } }, { T, ni }, h * ni + ni)
  -- gelu_new(a) = 0.5·a·(1 + tanh(√(2/π)·(a + 0.044715·a³))), traced as 8 elementwise nodes. Python-float
  -- operands are not graph inputs, so single-input nodes are the reference's 'u' variants.
  add("mul", "h.mlp.act.half", { act }, act)          -- 0.5 · a              VECmulu
  add("pow", "h.mlp.act.cube", { act }, act)          -- a ** 3               VECpowu
  add("mul", "h.mlp.act.coef", { act }, act)          -- 0.044715 · a³        VECmulu
  add("add", "h.mlp.act.inner", { act, act }, act)    -- a + 0.044715·a³      VECadd
  add("mul", "h.mlp.act.scale", { act }, act)         -- √(2/π) · (…)         VECmulu
  add("tanh", "h.mlp.act.tanh", { act }, act)         -- tanh(…)              VECtanh
  add("add", "h.mlp.act.one_plus", { act }, act)      -- 1.0 + tanh(…)        VECaddu
  add("mul", "h.mlp.act.out", { act, act }, act)      -- 0.5·a · (1 + …)      VECmul
  add("addmm", "h.mlp.c_proj", { { h }, { T, ni }, { ni, h } }, { T, h }, ni * h + h)
  add("dropout", "h.mlp.dropout", { x }, x)
  add("add", "h.mlp.residual", { x, x }, x, 0, { fused_external = 1 }) -- x + residual stream (fusion.lua)

  layer, count = "", 1
  add("layernorm", "ln_f", { x }, x, 2 * h)
  -- HF ties lm_head.weight to wte.weight: its parameters are already counted on wte.
  local tied = cfg.tie_word_embeddings ~= false
  add("linear", "lm_head", { x }, { b, s, V }, tied and 0 or h * V, { bias = false })
  if opts.training and opts.loss ~= false and s > 1 then
    -- HF's loss: logits[..., :-1, :].contiguous() (a copy), then cross-entropy over b·(s−1) tokens.
    -- (The labels' shift copies b·(s−1) integers and is left out.)
    local n = b * (s - 1)
    add("contiguous", "loss.shift_logits", { { b, s - 1, V } }, { b, s - 1, V })
    add("cross_entropy", "loss", { { n, V }, { n } }, { 1 })
  end
  return nodes
end

return M
