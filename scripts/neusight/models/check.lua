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

--- Where fields `fields` (a builder field or a list of them) of config table `cfg` stand in the config.json it was read
--- from (neusight.models.hf config_key and config_null; nil for a table no file gave: a preset, or a script's table,
--- which neusight.workload positions by the script's text): "<file>:<line>" at the line of the first of them whose key
--- (or null) the file holds on a line it gives, else "<file>"; and a note (else "") naming those of them the file does
--- not hold (the default applies) and one it holds under another key ("n_positions: key 'n_ctx'").
---@return string? where
---@return string note
function M.where(cfg, fields)
  if type(fields) ~= "table" then fields = { fields } end
  local hf = require "neusight.models.hf"
  local path = hf.config_key(cfg, fields[1])
  if not path then return nil, "" end
  local line, notes, unset = nil, {}, {}
  for _, field in ipairs(fields) do
    local _, key, at = hf.config_key(cfg, field)
    if not key then _, key, at = hf.config_null(cfg, field) end
    line = line or at
    if not key then
      unset[#unset + 1] = field
    elseif key ~= field then
      notes[#notes + 1] = ("%s: key '%s'"):format(field, key)
    end
  end
  if #unset > 0 then
    local default = cfg[unset[1]] ~= nil and ", the default" or ""
    notes[#notes + 1] = ("%s: not in the file%s"):format(table.concat(unset, ", "), default)
  end
  return path .. (line and ":" .. line or ""), #notes > 0 and (" (%s)"):format(table.concat(notes, "; ")) or ""
end

--- Raises `msg` ("<who>: field 'k' must be …"), the way every error about a field of a model config is raised: led by
--- the config file and the line of the first of `fields` (M.where) where `cfg` was read from a config.json (`cfg`: the
--- config as given, not a builder's copy of it), at level 0 (the position that matters is the file's, not this code's).
function M.fail(cfg, fields, msg)
  local where, note = M.where(cfg, fields)
  if where then msg = ("%s: %s%s"):format(where, msg, note) end
  error(msg, 0)
end

--- Raises "<who>: a (va) must be divisible by b (vb)<tail>" unless it is (M.fail: for a model read from a config.json,
--- after the file and the line of key b, else of a: "dir/config.json:5: llama model 'm': num_attention_heads (8) must
--- be divisible by num_key_value_heads (3)"; a field the file does not hold is named, its default applies). `cfg` is
--- the config as given.
function M.divisible(who, cfg, a, va, b, vb, tail)
  if va % vb == 0 then return end
  M.fail(cfg, { b, a }, ("%s: %s (%d) must be divisible by %s (%d)%s"):format(who, a, va, b, vb, tail or ""))
end

--- Raises "<who>: field 'k' must be an integer (got 32.0, …: write 32)" (M.fail) when cfg[key] is a whole float read
--- from a config.json: HF's config class holds an int there, and transformers would pass the float on to range(),
--- nn.Linear or a slice, which raise. A Lua config's whole float (2^10) passes: the caller stores it as the integer it
--- equals. Anything else passes too, for the caller's own check. `from`: as in M.counts.
function M.integer_in_file(who, cfg, key, from)
  local v = cfg[key]
  if math.type(v) ~= "float" or not math.tointeger(v) then return end
  local _, in_file = require("neusight.models.hf").config_key(from or cfg, key)
  if in_file then
    M.fail(from or cfg, key, ("%s: field '%s' must be an integer (got %s, a JSON number with a fraction part or "
      .. "exponent: write %d)"):format(who, key, shown(v), math.tointeger(v)))
  end
end

--- Raises "<who>: field 'k' must be a positive integer (got v)" for the first bad key (M.fail), and stores a
--- whole-number float back as the integer it equals. Keys listed in `optional` may also be nil. `from`: the config as
--- given, when `cfg` is a builder's copy of it (default cfg): a field that was null in its config.json
--- (neusight.models.hf config_null) reads "(got null, a JSON null)", not the false or nil it became.
function M.counts(who, cfg, required, optional, from)
  local function bad(key)
    local null = select(2, require("neusight.models.hf").config_null(from or cfg, key))
    M.fail(from or cfg, key, ("%s: field '%s' must be a positive integer (got %s)")
      :format(who, key, null and "null, a JSON null" or shown(cfg[key])))
  end
  local function float_in_file(key)
    if count_of(cfg[key]) then M.integer_in_file(who, cfg, key, from) end -- 1.5, 0.0: not a count, said below
  end
  for _, key in ipairs(required) do
    float_in_file(key)
    local n = count_of(cfg[key])
    if not n then bad(key) end
    cfg[key] = n
  end
  for _, key in ipairs(optional or {}) do
    if cfg[key] ~= nil then
      float_in_file(key)
      local n = count_of(cfg[key])
      if not n then bad(key) end
      cfg[key] = n
    end
  end
end

--- Raises "<who>: unknown field 'k' (did you mean 'x'?)" for the first key of cfg (sorted) that is not in the
--- `known` list (a did-you-mean among them when one is close, as for workload fields; M.fail).
function M.known(who, cfg, known)
  local set, keys = {}, {}
  for _, k in ipairs(known) do set[k] = true end
  for k in pairs(cfg) do
    if not set[k] then keys[#keys + 1] = tostring(k) end
  end
  if #keys == 0 then return end
  table.sort(keys)
  local best = require("neusight.workload").did_you_mean(keys[1], known)
  M.fail(cfg, keys[1], ("%s: unknown field '%s'%s"):format(who, keys[1],
    best and (" (did you mean '%s'?)"):format(best) or ""))
end

--- The one check of a config table's keys against the fields its builder reads, `fields` (its M.FIELDS; name and arch,
--- every config table's, need not be listed): "<who>: unknown field 'k' (did you mean 'x'?)" (M.known). What
--- neusight.workload's fields_check runs for every builder that lists M.FIELDS, and what the bundled gpt / bert / opt /
--- switch builders' build() run first, since build() is also called directly: a workload's model function may
--- `require "neusight.models.gpt"` and build a config of its own, which no workload check has seen (a misspelt
--- n_inner would be nil there, silently the default).
function M.fields(who, cfg, fields)
  local known = { "name", "arch" }
  for _, k in ipairs(fields) do known[#known + 1] = k end
  M.known(who, cfg, known)
end

--- Raises "<who>: field 'k' must be a boolean (got v)" for the first key of `keys` that cfg sets to anything but a
--- boolean (`do_layer_norm_before = { true }` was truthy and taken as true; M.fail). `from`: the config as given, when
--- `cfg` is a builder's copy of it (default cfg).
function M.booleans(who, cfg, keys, from)
  for _, key in ipairs(keys) do
    local v = cfg[key]
    if v ~= nil and type(v) ~= "boolean" then
      M.fail(from or cfg, key, ("%s: field '%s' must be a boolean (got %s)"):format(who, key, shown(v)))
    end
  end
end

--- Raises "<who>: field 'k' makes a table of v x width, more than 2^48 elements" when a count that sizes an
--- embedding table (rows of `width`) makes one beyond the shapes' 2^48 elements: the table is a parameter count, not
--- a shape the node checks, and n_positions = 2^62 made its integer product wrap to 0 parameters (exit 0). M.fail.
function M.table_size(who, cfg, key, rows, width)
  local K = require "neusight.kernels" -- the shapes' limit, K.MAX_ELEMENTS
  if rows * 1.0 * width > K.MAX_ELEMENTS then
    M.fail(cfg, key, ("%s: field '%s' makes a table of %s x %s, more than %s elements"):format(who, key,
      tostring(rows), tostring(width), K.MAX_ELEMENTS_TEXT))
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
-- The RoPE types transformers builds (modeling_rope_utils.py ROPE_INIT_FUNCTIONS): a rotary embedding of another type
-- fails there with a KeyError when the model is made (the config itself loads, with a logged warning), so it is refused
-- here too. The type changes only the rotary frequencies, a table made once at init (dynamic and longrope remake it
-- when a sequence outgrows it), never the rotary kernels: no kernel of the forecast reads it (README "Llama-family
-- models").
local ROPE_TYPES = { default = true, linear = true, dynamic = true, yarn = true, longrope = true, llama3 = true }
-- What is wrong with RoPE table `t`'s type (rope_type, or the older key `type` HF still reads), or nil.
local function rope_type_problem(t)
  local key = t.rope_type ~= nil and "rope_type" or t.type ~= nil and "type" or nil
  local v = key and t[key]
  if key == nil or ROPE_TYPES[v] then return nil end
  if type(v) ~= "string" then return ("must give %s as a string (%s %s)"):format(key, key, shown(v)) end
  local names = {}
  for k in pairs(ROPE_TYPES) do names[#names + 1] = k end
  table.sort(names)
  return ("gives %s %q, which transformers does not build (its RoPE types: %s)"):format(key, v, table.concat(names, ", "))
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
    if v == false then return nil end
    -- a JSON array is a Lua table too: HF reads the object's keys (rope_scaling.get), an array has none
    if type(v) ~= "table" or v[1] ~= nil then return "must be a table of the RoPE scaling (or null)" end
    return rope_type_problem(v)
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
      if t.rope_type ~= nil then
        local problem = rope_type_problem({ rope_type = t.rope_type })
        if problem then return problem end
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
--- M.NEUTRAL refuses (M.fail; who nil: "<noun> 'k' …", for a config.json's own object, whose file M.fail names);
--- keys it does not list are not looked at. `noun` defaults to "field".
function M.neutral(who, cfg, keys, noun)
  local sorted = {}
  for _, k in ipairs(keys) do sorted[#sorted + 1] = k end
  table.sort(sorted)
  for _, k in ipairs(sorted) do
    local v, check = cfg[k], M.NEUTRAL[k]
    local problem = v ~= nil and check and check(v)
    if problem then
      M.fail(cfg, k, ("%s%s '%s' %s (got %s)"):format(who and who .. ": " or "", noun or "field", k, problem,
        shown(v)))
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
    -- and what would run: the longest seq, or context (whose new token takes a row too), the table holds
    local context = text:match("^context ") ~= nil
    require("neusight").infeasible(("%s: %s exceeds %s %d, the rows of its learned position table: give a %s of at "
      .. "most %d"):format(who, text, max_name, max_positions, context and "context" or "seq",
      context and max_positions - 1 or max_positions))
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
