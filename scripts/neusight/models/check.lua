-- scripts/neusight/models/check.lua — argument checks shared by the model builders (messages name the model).
-- Errors are raised at level 0: the position that matters is the config's field, not this Lua code.
local ipairs, pairs, type, tostring, error = ipairs, pairs, type, tostring, error

local M = {}

M.is_count = require("neusight.topology").is_count

-- The integer a count field holds: a Lua integer >= 1, or a whole-number float that has one (2^10 in a Lua config,
-- "vocab_size": 1.0 in a config.json), so that every shape built from it holds integers (the op rules' shape checks
-- refuse float dimensions). nil for anything else, a float beyond 2^63 included ("%d" cannot format it). M.count_of
-- for neusight.workload position_limit (a max_position_embeddings of 2048.0 is 2048 there too).
local function count_of(v)
  return M.is_count(v) and math.tointeger(v) or nil
end
M.count_of = count_of

-- A config value in a message: a string quoted and named as one (a config.json's "hidden_size": "4096" is not the
-- number 4096, though tostring prints both alike), a table as "a table", anything else as tostring.
local function shown(v)
  if type(v) == "string" then return ("%q, a string"):format(v) end
  return type(v) == "table" and "a table" or tostring(v)
end
M.shown = shown -- the builders' field messages: "sliding_window": "4096" is no integer, "use_sliding_window": "true" no boolean

--- Raises "<who>: a (va) must be divisible by b (vb)<tail>" unless it is. The fields are named as the builder reads
--- them, which for a config.json are its keys (neusight.models.hf TYPES); for a model read from one
--- (neusight.models.hf config_key) the error starts with the file and the line of key b (else of a) — the keys' values
--- are the file's — and names a key the file does not hold, whose default applies: "dir/config.json:5: llama model
--- 'm': num_attention_heads (8) must be divisible by num_key_value_heads (3)". `cfg` is the config as given.
function M.divisible(who, cfg, a, va, b, vb, tail)
  if va % vb == 0 then return end
  local hf = require "neusight.models.hf"
  local path = hf.config_key and hf.config_key(cfg, a)
  local msg = ("%s: %s (%d) must be divisible by %s (%d)%s"):format(who, a, va, b, vb, tail or "")
  if not path then error(msg, 0) end
  local line, unset = nil, {}
  for _, field in ipairs { b, a } do
    local _, key, at = hf.config_key(cfg, field)
    line = line or at
    if not key then unset[#unset + 1] = field end
  end
  if #unset > 0 then
    msg = msg .. (" (%s: not in the file, the default)"):format(table.concat(unset, ", "))
  end
  error(("%s%s: %s"):format(path, line and ":" .. line or "", msg), 0)
end

--- Raises "<who>: field 'k' must be a positive integer (got v)" for the first bad key, and stores a whole-number
--- float back as the integer it equals. Keys listed in `optional` may also be nil. `from`: the config as given, when
--- `cfg` is a builder's copy of it (default cfg): a field that was null in its config.json (neusight.models.hf
--- config_null) reads "(got null, a JSON null)" after the file and the key's line, not the false or nil it became.
function M.counts(who, cfg, required, optional, from)
  local function bad(key)
    local path, null_key, line = require("neusight.models.hf").config_null(from or cfg, key)
    if null_key then
      local named = null_key ~= key and (" (key '%s')"):format(null_key) or ""
      error(("%s%s: %s: field '%s'%s must be a positive integer (got null, a JSON null)")
        :format(path, line and ":" .. line or "", who, key, named), 0)
    end
    error(("%s: field '%s' must be a positive integer (got %s)"):format(who, key, shown(cfg[key])), 0)
  end
  for _, key in ipairs(required) do
    local n = count_of(cfg[key])
    if not n then bad(key) end
    cfg[key] = n
  end
  for _, key in ipairs(optional or {}) do
    if cfg[key] ~= nil then
      local n = count_of(cfg[key])
      if not n then bad(key) end
      cfg[key] = n
    end
  end
end

--- Raises "<who>: unknown field 'k' (did you mean 'x'?)" for the first key of cfg (sorted) that is not in the
--- `known` list (a did-you-mean among them when one is close, as for workload fields).
function M.known(who, cfg, known)
  local set, keys = {}, {}
  for _, k in ipairs(known) do set[k] = true end
  for k in pairs(cfg) do
    if not set[k] then keys[#keys + 1] = tostring(k) end
  end
  if #keys == 0 then return end
  table.sort(keys)
  local best = require("neusight.workload").did_you_mean(keys[1], known)
  error(("%s: unknown field '%s'%s"):format(who, keys[1], best and (" (did you mean '%s'?)"):format(best) or ""), 0)
end

--- Raises "<who>: field 'k' must be a boolean (got v)" for the first key of `keys` that cfg sets to anything but a
--- boolean (`do_layer_norm_before = { true }` was truthy and taken as true).
function M.booleans(who, cfg, keys)
  for _, key in ipairs(keys) do
    local v = cfg[key]
    if v ~= nil and type(v) ~= "boolean" then
      error(("%s: field '%s' must be a boolean (got %s)"):format(who, key,
        shown(v)), 0)
    end
  end
end

--- Raises "<who>: field 'k' makes a table of v x width, more than 2^48 elements" when a count that sizes an
--- embedding table (rows of `width`) makes one beyond the shapes' 2^48 elements: the table is a parameter count, not
--- a shape the node checks, and n_positions = 2^62 made its integer product wrap to 0 parameters (exit 0).
function M.table_size(who, key, rows, width)
  if rows * 1.0 * width > 2 ^ 48 then
    error(("%s: field '%s' makes a table of %s x %s, more than 2^48 elements"):format(who, key, tostring(rows),
      tostring(width)), 0)
  end
end

local function finite(v) return math.type(v) ~= nil and v == v and v > -math.huge and v < math.huge end

-- The fields a config may carry that change no kernel but still describe the model (HF's position limit, RoPE base,
-- norm epsilons, the MoE aux loss's weight …): each problem when its value is one no model can have (a position limit
-- of 0, a RoPE base of 0, a negative epsilon), nil when it is fine. A broken config is an error, not a key to ignore.
-- A position count: a positive integer of at most 2^31 (HF's largest context today is ~10^7; 2^62 is no model).
local function positions(v)
  local n = count_of(v)
  if not n then return "must be a positive integer" end
  if n > 2 ^ 31 then return "must be a positive integer of at most 2^31" end
end
local function non_negative_integer(v)
  if math.tointeger(v) == nil or v < 0 then return "must be a non-negative integer" end
end
local function epsilon(v) -- a norm's epsilon
  if not (finite(v) and v >= 0 and v < 1) then return "must be a number in [0, 1)" end
end
M.NEUTRAL = {
  max_position_embeddings = positions,
  n_ctx = positions,
  original_max_position_embeddings = positions,
  query_pre_attn_scalar = function(v) if not (finite(v) and v > 0) then return "must be a positive number" end end,
  relative_attention_max_distance = positions,
  num_sparse_encoder_layers = non_negative_integer,
  num_sparse_decoder_layers = non_negative_integer,
  rope_theta = function(v) if not (finite(v) and v > 0) then return "must be a positive number (the RoPE base)" end end,
  rope_scaling = function(v)
    if v ~= false and type(v) ~= "table" then return "must be a table of the RoPE scaling (or null)" end
  end,
  -- transformers v5's one table for rope_theta and rope_scaling ({ rope_type, rope_theta, factor … }; Gemma3-style
  -- configs nest one such table per layer type): as those two, no kernel reads it; its RoPE bases must be positive.
  rope_parameters = function(v)
    if v == false then return nil end
    if type(v) ~= "table" then return "must be a table of the RoPE parameters (or null)" end
    local tables = { v }
    for _, sub in pairs(v) do
      if type(sub) == "table" and (sub.rope_theta ~= nil or sub.rope_type ~= nil) then tables[#tables + 1] = sub end
    end
    for _, t in ipairs(tables) do
      local theta = t.rope_theta
      if theta ~= nil and not (finite(theta) and theta > 0) then
        return ("must give rope_theta as a positive number, the RoPE base (rope_theta %s)"):format(shown(theta))
      end
      if t.rope_type ~= nil and type(t.rope_type) ~= "string" then
        return ("must give rope_type as a string (rope_type %s)"):format(shown(t.rope_type))
      end
    end
  end,
  rms_norm_eps = epsilon,
  layer_norm_epsilon = epsilon,
  layer_norm_eps = epsilon,
  output_router_logits = function(v) if type(v) ~= "boolean" then return "must be a boolean" end end,
  router_aux_loss_coef = function(v) if not (finite(v) and v >= 0) then return "must be a non-negative number" end end,
}

--- Raises "<who>: <noun> 'k' <problem> (got v)" for the first key of `keys` (sorted) that cfg sets to a value
--- M.NEUTRAL refuses; keys it does not list are not looked at. `noun` defaults to "field".
function M.neutral(who, cfg, keys, noun)
  local sorted = {}
  for _, k in ipairs(keys) do sorted[#sorted + 1] = k end
  table.sort(sorted)
  for _, k in ipairs(sorted) do
    local v, check = cfg[k], M.NEUTRAL[k]
    local problem = v ~= nil and check and check(v)
    if problem then
      error(("%s: %s '%s' %s (got %s)"):format(who, noun or "field", k, problem,
        shown(v)), 0)
    end
  end
end

--- The positions one sequence of a run holds, and the words that say so: a decode step's `context` cached tokens + 1
--- new one ("context 4096 + 1 new token"), else its `seq` (training, inference, prefill: "seq 8192"). The one count
--- every position limit is held to: a learned table's error (M.batch_seq, neusight.nodes.serving) and a rotary
--- model's warning (M.rotary_positions_warning).
---@param seq integer
---@param context? integer a decode step's cache
---@return integer n, string text
function M.positions(seq, context)
  if context then return context + 1, ("context %d + 1 new token"):format(context) end
  return seq, ("seq %d"):format(seq)
end

--- A rotary model (no position table; builders with M.rotary_positions) run at `n` positions (`text` says how many,
--- M.positions) beyond its max_position_embeddings `max`: the warning that the forecast assumes it runs at that
--- length; nil within it or without a limit.
---@param text string
---@param n integer
---@param max? integer
---@return string?
function M.rotary_positions_warning(text, n, max)
  if max == nil or n <= max then return nil end
  return ("%s exceeds the model's max_position_embeddings %d (the forecast assumes the model runs at that length, "
    .. "e.g. with RoPE scaling)"):format(text, max)
end

--- The error of a run holding `n` positions (`text` says how, M.positions) beyond a learned position table of
--- `max_positions` (max_name = its field): a setting's reason (neusight.infeasible: `serve --sweep` makes a row of
--- it), not a bug of the input. Returns where the table holds them or the model has none.
function M.position_limit(who, n, text, max_positions, max_name)
  if max_positions and n > max_positions then
    require("neusight").infeasible(("%s: %s exceeds %s %d"):format(who, text, max_name, max_positions))
  end
end

--- Checks opts.batch and opts.seq, and seq against the model's position table (max_name = its field).
function M.batch_seq(who, opts, max_positions, max_name)
  for _, key in ipairs { "batch", "seq" } do
    if not M.is_count(opts[key]) then
      error(("%s: option '%s' must be a positive integer (got %s)"):format(who, key, tostring(opts[key])), 0)
    end
  end
  local n, text = M.positions(opts.seq)
  M.position_limit(who, n, text, max_positions, max_name)
end

return M
