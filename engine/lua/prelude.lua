-- engine/lua/prelude.lua — the Lua half of the engine: sandbox, restricted require, op-rule schema, strict views.
local C, version = ...   -- C: engine functions (find_script, find_op, load, eprint, warn) and words (older_scripts); see session.cpp

local E = {}             -- engine-internal table, kept in the registry by the host

-- Nothing in a script may reach bytecode or the one string metatable every script shares: no string.dump, and
-- getmetatable("") answers a string instead of the table (whose __index is the string library).
string.dump = nil
getmetatable("").__metatable = "string"

-- The engine's one did-you-mean rule (engine/core/text.h text_close_matches, through C.closest): closest(word,
-- candidates) is the closest candidate or nil (candidates: an array of strings or a table's string keys);
-- did_you_mean gives the " (did you mean 'x'?)" suffix of an error message, or "".
local closest = C.closest
local function did_you_mean(word, keys)
  local best = closest(word, keys)
  return best and (" (did you mean '" .. best .. "'?)") or ""
end
E.did_you_mean = did_you_mean

-- The public module scripts get from require "neusight".
local ns = { version = version, closest = closest, did_you_mean = did_you_mean, warn = C.warn,
             cluster_file = C.cluster_load } -- gpus/clusters/<name>.toml (or a .toml path) as a table
-- Loops over long integer series that neusight.parallel runs once per op of a pipeline (engine/lua/wrap_series.cpp;
-- Lua's number semantics, bit for bit): pack_integers(t, n) packs t[1..n] for them; walk(program, total, fw, bw, V,
-- last, all) walks a compiled schedule (neusight.parallel.schedule), which compile(lists, P, v, Mb) compiles from each
-- device's ops (the schedule's turns, run once without times); fold(series, counts, fw_terms, bw_terms, watch)
-- sums each device's ops and queue(at, n, dt, len, free, sum) runs its gradient buckets through the data-parallel
-- link (neusight.parallel.timeline).
ns.pack_integers, ns.walk, ns.fold, ns.queue, ns.compile = C.pack_integers, C.walk, C.fold, C.queue, C.compile
-- dtype_sizes() → { fp32 = 4, tf32 = 4, fp16 = 2, bf16 = 2, fp8 = 1, fp64 = 8 }: the engine's one table of dtypes and
-- their bytes per element (engine/core/graph.cpp), a fresh copy each call.
ns.dtype_sizes = C.dtype_sizes
-- node_fields() → { "op", "name", "layer", … }: the fields a model's node may have (engine/lua/wrap_graph.cpp's one
-- list), a fresh copy each call.
ns.node_fields = C.node_fields
-- gpu_fields() → { "name", "aliases", …, "source" }: the fields a GPU table may have (engine/core/gpu_spec.cpp's one
-- list, and its file's `source`), a fresh copy each call.
ns.gpu_fields = C.gpu_fields
-- families() → { { name = "bmm", per_sm = true }, … }: the predictor's kernel families in the engine's order, each
-- with whether its MLP reads the GPU's memory bandwidth and memory per SM (engine/core/tile_model.h), a fresh copy each
-- call.
ns.families = C.families
-- cluster_limits() → { bw_gbps = 1e6, latency_us = 1e6, count = 1048576 }: the engine's one set of a cluster's maxima
-- (engine/core/cluster_spec.h; a cluster file's and neusight.topology's), a fresh copy each call.
ns.cluster_limits = C.cluster_limits
-- limit_text(x) → "1e6" (not %g's "1e+06"): the engine's one form of a limit in a message (engine/core/text.h
-- text_limit), so a limit reads the same whichever reader reports it.
ns.limit_text = C.limit_text
-- gpu_named(gpu, name) → whether `name` names the GPU table (its name, an alias or its file's stem; case, spaces, '-'
-- and '_' ignored): the engine's one rule (engine/core/gpu_spec.h gpu_spec_named).
ns.gpu_named = C.gpu_named
-- gpu_find(name) → the GPU table a bundled GPU file answers to `name` (its name, an alias or its file's stem; the
-- session's catalogue, parsed once), or nil where none does (and for a path: names only). What
-- scripts/neusight/uncertainty.lua reads the leave-one-GPU-out folds' GPUs by.
ns.gpu_find = C.gpu_find
function ns.ceil_div(a, b)
  if type(a) ~= "number" or type(b) ~= "number" then
    error("bad argument to 'ceil_div' (numbers expected, got " .. type(a) .. ", " .. type(b) .. ")", 2)
  end
  return -((-a) // b)
end

-- A script's pcall hands back every error but a script limit's (instructions, memory, time): that one goes on up,
-- so that a runaway loop cannot catch its own stop.
local raw_pcall, limit_tripped = pcall, C.limit_tripped
local function pcall_result(ok, ...)
  if not ok and limit_tripped() then error((...), 0) end
  return ok, ...
end

-- What ns.<name> returns of raw_pcall(C.<name>, …): its value, or its error as "ns.<name>: <message>" at the line of
-- ns.<name>'s caller (level 3; not a tail call, so that frame is there); a script limit's error goes on up as it is.
local function engine_result(name, ok, r)
  if ok then return r end
  if limit_tripped() then error(r, 0) end
  error("ns." .. name .. ": " .. tostring(r), 3)
end

-- ns.predict(kernels, gpu, predictor) -> { seconds, … }: a built-in predictor ("neusight", "roofline",
-- "roofline-reference") over a list of kernels — the tables a Lua predictor receives, or ones built as an op rule
-- returns them (those get the library's tile) — on a GPU (the table rules and predictors receive, a copy with changed
-- numbers, or a name). One call prices identical kernels once; the "neusight" MLP runs once per family.
function ns.predict(kernels, gpu, predictor)
  if type(kernels) ~= "table" then
    error("bad argument #1 to 'predict' (array of kernels expected, got " .. type(kernels) .. ")", 2)
  end
  if type(gpu) == "userdata" then  -- the read-only view rules and predictors get: its fields, as a plain table
    local t = {}
    for k, v in pairs(gpu) do t[k] = v end
    gpu = t
  elseif type(gpu) ~= "table" and type(gpu) ~= "string" then
    error("bad argument #2 to 'predict' (GPU table or name expected, got " .. type(gpu) .. ")", 2)
  end
  if type(predictor) ~= "string" then
    error("bad argument #3 to 'predict' (predictor name expected, got " .. type(predictor) .. ")", 2)
  end
  local r = engine_result("predict", raw_pcall(C.predict, kernels, gpu, predictor))
  return r
end

-- ns.trained_gpus(predictor, vendor) -> { family = { GPU table, … } }: the GPUs the built-in predictor's weights for
-- GPUs of `vendor` were trained on, by family (their manifests' training.gpus, weights/<vendor>/<family>/model.toml
-- under the session's weights root: --weights DIR's), each the GPU's read-only table, or its name where no GPU file
-- answers it; {} for a predictor without weights ("roofline") or a vendor without them. The same lists a forecast's
-- band and range warnings read (r.trained_gpus, scripts/neusight/uncertainty.lua), a fresh table each call: what a Lua
-- predictor decides "beyond the training range" by (scripts/neusight/predictors/neusight_vector_form.lua).
function ns.trained_gpus(predictor, vendor)
  if type(predictor) ~= "string" then
    error("bad argument #1 to 'trained_gpus' (predictor name expected, got " .. type(predictor) .. ")", 2)
  end
  if type(vendor) ~= "string" then
    error("bad argument #2 to 'trained_gpus' (vendor expected, got " .. type(vendor) .. ")", 2)
  end
  local r = engine_result("trained_gpus", raw_pcall(C.trained_gpus, predictor, vendor))
  return r
end

-- setmetatable without finalizers: a __gc would run script code between the engine's calls, outside its limits.
local raw_setmetatable = setmetatable
local function safe_setmetatable(t, mt)
  if type(t) ~= "table" then
    error("bad argument #1 to 'setmetatable' (table expected, got "
          .. (type(t) == "userdata" and "read-only view" or type(t)) .. ")", 2)
  end
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("bad argument #2 to 'setmetatable' (__gc metamethods are not available to scripts)", 2)
  end
  local ok, r = raw_pcall(raw_setmetatable, t, mt)
  if not ok then error(r, 2) end  -- "cannot change a protected metatable", "nil or table expected"
  return r
end

-- Curated base for every script environment: no io, os, load, dofile, debug (hygiene, not security).
local base = {
  ipairs = ipairs, pairs = pairs, next = next, select = select, type = type,
  tostring = tostring, tonumber = tonumber, error = error, assert = assert,
  pcall = function(f, ...) return pcall_result(raw_pcall(f, ...)) end,
  setmetatable = safe_setmetatable, getmetatable = getmetatable,
  rawget = rawget, rawset = rawset, rawequal = rawequal, rawlen = rawlen,
  print = C.eprint,      -- stdout belongs to the report (JSON/CSV); script output goes to stderr
}
-- Library tables are copied into each environment on first use, so that one script replacing string.format or
-- math.max changes its own copy only.
local libs = { math = math, string = string, table = table, utf8 = utf8 }

local env_mt = {
  __index = function(env, k)
    local lib = libs[k]
    if lib then
      local copy = {}
      for name, f in next, lib do copy[name] = f end
      rawset(env, k, copy)
      return copy
    end
    local v = base[k]
    if v == nil then error("undefined global '" .. tostring(k) .. "'", 2) end
    return v
  end,
  __newindex = function(_, k)
    error("assignment to undeclared global '" .. tostring(k) .. "' (use local)", 2)
  end,
  __metatable = "sandbox",  -- getmetatable(_ENV) must not hand out this table, which every environment shares
}

-- A read-only table in front of module `t`, made per environment: its fields read through (a plain __index table,
-- as fast as the module itself), assignments are errors, pairs and # see the module's fields. A rawset lands in this
-- environment's own view, never in the module. Tables inside the module are the module's own: registries that
-- workloads extend by design (collectives.algorithms, parallel.schedules, models.hf.TYPES) stay writable.
local function readonly(t, what)
  return raw_setmetatable({}, {
    __index = t,
    __newindex = function(_, k) error(what .. " is read-only (assignment to '" .. tostring(k) .. "')", 2) end,
    __len = function() return #t end,
    __pairs = function() return next, t, nil end,
    __metatable = "read-only",
  })
end

-- Modules by name, shared by every script; each environment gets read-only views of them from its own require.
local loaded = { neusight = ns }
-- The modules being loaded, innermost last ({ name, chunk }), and which of them by name: a module required again
-- while it loads is a cycle, an error that names it (else it would load itself until the stack ran out). An entry
-- leaves when its load ends, normally or by an error (the to-be-closed `done`).
local loading, loading_at = {}, {}
local loading_mt = {
  __close = function(entry)
    loading[#loading] = nil
    loading_at[entry[1]] = nil
  end,
}
local function require_raw(name, level)
  if type(name) ~= "string" then
    error("bad argument #1 to 'require' (string expected, got " .. type(name) .. ")", level + 1)
  end
  local m = loaded[name]
  if m ~= nil then return m end
  local at = loading_at[name]
  if at then
    local chain = {}
    for i = at + 1, #loading do chain[#chain + 1] = "'" .. loading[i][1] .. "' (" .. loading[i][2] .. ")" end
    error("module '" .. name .. "' requires itself (" .. loading[at][2] .. ")" ..
          (#chain > 0 and " through " .. table.concat(chain, ", ") or ""), level + 1)
  end
  local path, chunk = C.find_script(name)
  if not path then error("module '" .. name .. "' not found:" .. chunk, level + 1) end
  local done <close> = raw_setmetatable({ name, chunk }, loading_mt)
  loading[#loading + 1] = done
  loading_at[name] = #loading
  local r = C.load(path, chunk, E.new_env())(name)
  if r == nil then r = true end
  loaded[name] = r
  return r
end
E.require = function(name) return require_raw(name, 2) end  -- the host's: the modules themselves

-- needs(name, fn) → module `name`'s function `fn`, or the error the engine's own calls give of a --scripts copy without
-- it (engine/lua/session.cpp function_push): one module's script calling another's function that an older override
-- copy lacks gets the file and the bundled one to compare it with, not "attempt to call a nil value".
-- ns.older_scripts: the words by which these errors say so, the engine's (engine/lua/session_impl.h
-- older_scripts_words, which function_push writes too).
ns.older_scripts = C.older_scripts
function ns.needs(name, fn)
  local m = require_raw(name, 2)
  local f = type(m) == "table" and m[fn] or nil
  if type(f) ~= "function" then
    local _, chunk = C.find_script(name)
    error(("%s has no function %s (module %s): %s compare it with the bundled scripts/%s.lua")
      :format(tostring(chunk), fn, name, ns.older_scripts, (name:gsub("%.", "/"))), 0)
  end
  return f
end

-- infeasible(msg) raises `msg` (no position: error(msg, 0)) as the reason a setting cannot run as asked (tp not
-- dividing the heads, weights leaving no room for a KV cache, …): the input is well formed, the setting is not.
-- is_infeasible(err) → whether `err`, an error caught by pcall, is such a reason (it carries the message of the last
-- infeasible(), or of an ns::infeasible the engine raised: engine/lua/lua_state.h ns_infeasible_note, forgotten once
-- asked). `serve --sweep` makes a row of such an error and stops at any other: a script's bug is never a row.
ns.infeasible = C.infeasible
function ns.is_infeasible(err)
  local msg = C.infeasible_take()
  return msg ~= nil and type(err) == "string" and err:find(msg, 1, true) ~= nil
end

local function require_for_env()
  local views = {}
  return function(name)
    local v = views[name]
    if v ~= nil then return v end
    local m = require_raw(name, 2)
    v = type(m) == "table" and readonly(m, "module '" .. name .. "'") or m
    views[name] = v
    return v
  end
end

-- A fresh global table for one chunk, with its own require; `extra` entries (test helpers) are visible as globals.
function E.new_env(extra)
  local env = { require = require_for_env() }
  if extra then for k, v in pairs(extra) do env[k] = v end end
  return raw_setmetatable(env, env_mt)
end

-- A fresh copy of a plain table and the tables in it.
local function copy_deep(v, depth)
  if type(v) ~= "table" then return v end
  if depth > 32 then error("table nested too deeply", 0) end
  local t = {}
  for k, x in next, v do t[k] = copy_deep(x, depth + 1) end
  return t
end

-- Read-only view with errors on unknown fields, so `node.ouput` fails instead of being nil. The view is a userdata
-- (rawset, setmetatable and next cannot reach `data`, getmetatable answers a string); a table field reads as a
-- fresh copy, so a rule that edits node.inputs edits its own copy. pairs and # see the real fields.
function E.strict(data, what)
  return C.view({
    __index = function(_, k)
      local v = rawget(data, k)
      if v == nil then error(what .. " has no field '" .. tostring(k) .. "'" .. did_you_mean(k, data), 2) end
      if type(v) == "table" then return copy_deep(v, 1) end
      return v
    end,
    __newindex = function(_, k) error(what .. " is read-only (assignment to '" .. tostring(k) .. "')", 2) end,
    __pairs = function()
      return function(_, k)
        local nk, v = next(data, k)
        if type(v) == "table" then v = copy_deep(v, 1) end
        return nk, v
      end, nil, nil
    end,
    __len = function() return rawlen(data) end,
    __tostring = function() return what end,
    __name = "read-only " .. what,
    __metatable = "read-only",
  })
end

-- The GPU rules, predictors and scripts receive (session push_gpu): a strict view, "gpu has no field 'x'", of the table
-- gpu_push made, which is kept (weak keys: a view dropped takes it along) for ns.gpu_optional.
local gpu_tables = setmetatable({}, { __mode = "k" })
local gpu_keys = {}
for _, k in ipairs(C.gpu_fields()) do gpu_keys[k] = true end
function E.gpu_view(data)
  local view = E.strict(data, "gpu")
  gpu_tables[view] = data
  return view
end

-- ns.gpu_optional(gpu, key) → the GPU's field `key`, or nil where the GPU leaves it out (an optional key of its file:
-- nvlink_domain_gpus, price_per_hour_usd), which reading gpu.key refuses. A key no GPU has is an error, as it is
-- through the view, so that a misspelt key is never read as one left out. `gpu`: the view, or a plain GPU table (its
-- own field, rawget: a strict table of a test or dev tool, made to refuse a missing field as the view does, too).
function ns.gpu_optional(gpu, key)
  local data = gpu_tables[gpu]
  if data == nil then
    if type(gpu) ~= "table" then
      error("bad argument #1 to 'gpu_optional' (GPU expected, got "
            .. (type(gpu) == "userdata" and "read-only view" or type(gpu)) .. ")", 2)
    end
    data = gpu
  end
  if not gpu_keys[key] then error("gpu has no field '" .. tostring(key) .. "'" .. did_you_mean(key, gpu_keys), 2) end
  return rawget(data, key)
end

-- Op-rule schema (style.md): returned table, required/optional typed fields, unknown keys are errors.
-- `backward = false` says the op has no backward work; a training run refuses a rule that says nothing (the engine
-- checks it when it needs the hook). `check(node)` returns nil or what is wrong with the node (its shapes).
-- `saves(node)` (optional) returns the bytes autograd keeps for the node's backward and `temporary(node)` the
-- largest transient while it runs (scripts/neusight/memory.lua; defaults there). `attrs` declares the node attributes
-- the rule reads (name → "type: what it does"; check_nodes holds every node to it), `fusion` whether the node may
-- join a fused run (scripts/neusight/fusion.lua: "elementwise" or "anchor").
local op_fields = { name = "string", doc = "string", forward = "function", backward = "function",
                    accumulate = "function", check = "function", saves = "function", temporary = "function",
                    attrs = "table", fusion = "string", optimizer = "table" }
-- `optimizer` makes the rule an optimizer step (--optimizer NAME; scripts/neusight/workload.lua optimizers):
-- moments = the state elements it keeps per parameter (Adam's 2, momentum SGD's 1, Lion's 1; their element size is the
-- precision recipe's moment), impl = the implementation it runs by default outside Megatron kernels ("fused" or
-- "foreach"; default "foreach").
local optimizer_fields = { moments = "integer", impl = "string" }
-- The types an attribute may be declared with (a node's attrs hold numbers, booleans and strings).
local attr_types = { boolean = true, integer = true, number = true, string = true }
local op_required = { "name", "doc", "forward" }

-- The line of the file at `path` whose text (comments aside) matches `pattern`, when exactly one line does; nil
-- otherwise (a wrong line is worse than the file alone).
local function unique_line(path, pattern)
  local f = path and io.open(path, "r")
  if not f then return nil end
  local text = f:read("a") or ""
  f:close()
  local found, n = nil, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:gsub("%-%-.*$", ""):find(pattern) then
      if found then return nil end
      found = n
    end
  end
  return found
end

-- The line that writes field `key` (`key = …`).
local function key_line(path, key)
  if type(key) ~= "string" then return nil end
  return unique_line(path, "%f[%w_]" .. key .. "%s*=[^=]")
end

function E.check_op(rule, chunk, stem, path)
  if type(rule) ~= "table" then
    error(chunk .. ": an op rule must return a table (got " .. type(rule) .. ")", 0)
  end
  if getmetatable(rule) ~= nil then
    error(chunk .. ": an op rule must return a plain table (this one has a metatable)", 0)
  end
  for k, v in next, rule do
    local want = op_fields[k]
    if not want then
      local line = key_line(path, k) -- the rule's line, not only its file (the message used to lead with the node's)
      error(chunk .. (line and ":" .. line or "") .. ": unknown field '" .. tostring(k) .. "'" .. did_you_mean(k, op_fields), 0)
    end
    if k == "backward" and v ~= false and type(v) ~= want then
      error(chunk .. ": field 'backward' must be a function, or false for an op without backward work (got "
            .. (type(v) == "boolean" and "true" or type(v)) .. ")", 0)
    elseif k ~= "backward" and type(v) ~= want then
      error(chunk .. ": field '" .. k .. "' must be a " .. want .. " (got " .. type(v) .. ")", 0)
    end
  end
  for _, k in ipairs(op_required) do
    if rule[k] == nil then error(chunk .. ": missing required field '" .. k .. "'", 0) end
  end
  if rule.name ~= stem then
    error(chunk .. ": field 'name' is '" .. rule.name .. "' but must equal the file stem '" .. stem .. "'", 0)
  end
  if rule.fusion ~= nil and rule.fusion ~= "elementwise" and rule.fusion ~= "anchor" then
    error(chunk .. ": field 'fusion' must be \"elementwise\" or \"anchor\" (got '" .. rule.fusion .. "')", 0)
  end
  if rule.optimizer ~= nil then
    local o, line = rule.optimizer, key_line(path, "optimizer")
    local at = chunk .. (line and ":" .. line or "") .. ": field 'optimizer'"
    if getmetatable(o) ~= nil then error(at .. " must be a plain table", 0) end
    for k in next, o do
      if not optimizer_fields[k] then
        error(at .. ": unknown key '" .. tostring(k) .. "'" .. did_you_mean(k, optimizer_fields)
              .. " (it takes moments and impl)", 0)
      end
    end
    if math.type(o.moments) ~= "integer" or o.moments < 0 or o.moments > 16 then
      error(at .. ": 'moments' must be an integer from 0 to 16, the state elements the step keeps per parameter (got "
            .. tostring(o.moments) .. ")", 0)
    end
    if o.impl ~= nil and o.impl ~= "fused" and o.impl ~= "foreach" then
      error(at .. ": 'impl' must be \"fused\" or \"foreach\" (got " .. tostring(o.impl) .. ")", 0)
    end
    if rule.backward ~= nil and rule.backward ~= false then
      error(at .. ": an optimizer step has no backward (it runs after it): drop 'backward'", 0)
    end
  end
  local copy = {}  -- the engine keeps its own copy: the script cannot swap a hook later through its table
  for k, v in next, rule do copy[k] = v end
  if rule.attrs ~= nil then
    local attrs = {}
    for k, v in next, rule.attrs do
      local t = type(v) == "string" and v:match("^(%a+)") or nil
      if type(k) ~= "string" or not attr_types[t] then
        error(chunk .. ": field 'attrs': entry '" .. tostring(k) .. "' must be a name = \"type: what it does\" with "
              .. "type boolean, integer, number or string (got " .. (type(v) == "string" and "'" .. v .. "'" or type(v))
              .. ")", 0)
      end
      attrs[k] = v
    end
    copy.attrs = attrs
  end
  return copy
end

-- Lua predictor schema (--predictor NAME: scripts/neusight/predictors/NAME.lua, or a .lua file): a returned plain table,
-- predict(kernels, gpu) -> { seconds, … } required, description optional, unknown keys are errors.
local predictor_fields = { predict = "function", description = "string" }

function E.check_predictor(p, chunk)
  if type(p) ~= "table" then
    error(chunk .. ": a predictor must return a table { predict = function(kernels, gpu) … end } (got " .. type(p)
          .. ")", 0)
  end
  if getmetatable(p) ~= nil then
    error(chunk .. ": a predictor must return a plain table (this one has a metatable)", 0)
  end
  for k, v in next, p do
    local want = predictor_fields[k]
    if not want then error(chunk .. ": unknown field '" .. tostring(k) .. "'" .. did_you_mean(k, predictor_fields), 0) end
    if type(v) ~= want then error(chunk .. ": field '" .. k .. "' must be a " .. want .. " (got " .. type(v) .. ")", 0) end
  end
  if p.predict == nil then
    error(chunk .. ": missing required field 'predict' (function(kernels, gpu) returning seconds per kernel)", 0)
  end
  local copy = {}  -- the engine keeps its own copy, as for op rules
  for k, v in next, p do copy[k] = v end
  return copy
end

-- Runs a loaded rule or predictor file. One that ends in `return require("neusight.rules").linear { … }` tail-calls
-- the constructor, so the constructor's errors (raised at its caller's level) point at this loader, not at the file:
-- those name the file instead ("ops/mine.lua: rules.linear: unknown field 'dco'", not "engine/lua/prelude.lua:…").
local function call_file(fn, ...)
  local r = fn(...) -- the frame such an error points at (a tail call would leave pcall's, which has no position)
  return r
end
-- The line that calls constructor `ctor` (`rules.elementwise {`, `R.linear(`).
local function ctor_line(path, ctor)
  return unique_line(path, "%.%s*" .. ctor .. "%f[^%w_]")
end

local function run_file(fn, chunk, path, ...)
  local ok, r = raw_pcall(call_file, fn, ...)
  if ok then return r end
  if limit_tripped() then error(r, 0) end
  if type(r) == "string" then
    local rest = r:match("^engine/lua/prelude%.lua:%d+: (.*)$")
    if rest then
      -- a constructor's error ("rules.elementwise: …") names the file's line that calls it
      local ctor = rest:match("^rules%.([%a_][%w_]*): ")
      local line = ctor and ctor_line(path, ctor)
      r = chunk .. (line and (":" .. line) or "") .. ": " .. rest
    end
  end
  error(r, 0)
end

-- Loads a predictor file (found by the host) in a fresh environment and checks it; `name` is its module name or path.
function E.load_predictor(path, chunk, name)
  return E.check_predictor(run_file(C.load(path, chunk, E.new_env()), chunk, path, name), chunk)
end

-- Op rules load lazily on first use and are cached by name; false caches "no rule".
local ops, op_chunks = {}, {}
function E.get_op(name)
  local r = ops[name]
  if r ~= nil then return r or nil, op_chunks[name] end
  local path, chunk = C.find_op(name)
  if not path then ops[name] = false; return nil end
  r = E.check_op(run_file(C.load(path, chunk, E.new_env()), chunk, path), chunk, name, path)
  ops[name], op_chunks[name] = r, chunk
  return r, chunk
end
-- Forgets the rules loaded (and the "no rule" found): the op search path changed (a workload's ops/ folder).
function E.ops_forget() ops, op_chunks = {}, {} end

-- The rule of op `name`, or an error naming the closest op on the search path. There is no silent memory-bound
-- guess for an op without a rule: a rule file routes an op there explicitly (require("neusight.fallback").rule).
-- What to say of op `name` that no rule on the search path answers: the bundled rule the path leaves out
-- (NEUSIGHT_OPS_PATH without ";;"), else the closest op on the path, else where the rules are listed.
-- The first, " (ops/adam.lua is bundled, but …)", alone: nil when the path holds the bundled ops/ or it has no such rule.
local function op_bundled_note(name)
  local bundled = type(name) == "string" and C.op_unsearched(name)
  if not bundled then return nil end
  return " (" .. bundled .. " is bundled, but the bundled ops/ is not on the op search path: NEUSIGHT_OPS_PATH has no "
    .. "';;' to splice it in)"
end
ns.op_bundled_note = op_bundled_note
local function op_missing_hint(name)
  local note = op_bundled_note(name)
  if note then return note end
  local names = {}
  for _, n in ipairs(C.op_names()) do names[n] = true end
  local hint = did_you_mean(name, names)
  if hint == "" then hint = " (`neusight ops` lists the rules)" end
  return hint
end

function E.need_op(name)
  local r, chunk = E.get_op(name)
  if r then return r, chunk end
  error("unknown op '" .. tostring(name) .. "'" .. op_missing_hint(name) .. ": no " .. tostring(name) ..
        ".lua on the op search path", 0)
end

-- The rule of op `name` for library code (scripts/neusight/memory.lua reads the `saves` hooks): require("neusight").op_rule.
ns.op_rule = function(name) return (E.need_op(name)) end
-- The rule of op `name`, or nil when the search path has none; a rule file that fails to load still raises.
ns.op_rule_or_nil = function(name) return (E.get_op(name)) end
-- Where op `name`'s rule defines hook `field`, for library code's messages about what the hook returned
-- (scripts/neusight/memory.lua: saves, temporary): "ops/x.lua:12" (the line of its function), or the rule file alone
-- when the function is defined elsewhere (a constructor's, in scripts/neusight/rules.lua).
ns.op_where = function(name, field)
  local rule, chunk = E.need_op(name)
  local f = rule[field]
  if type(f) == "function" then
    local info = debug.getinfo(f, "S")
    if info and info.linedefined > 0 and info.source == "@" .. chunk then return chunk .. ":" .. info.linedefined end
  end
  return chunk
end

-- Where Lua function `f` is defined, "file:line" (its chunk as the engine loaded it: an override's own path), for
-- library code's messages about what a function of a script returned (scripts/neusight/collectives.lua: an algorithm
-- returning a negative time); nil for a function with no file (a C function, a string chunk).
ns.function_where = function(f)
  if type(f) ~= "function" then return nil end
  local info = debug.getinfo(f, "S")
  if not (info and info.linedefined > 0 and info.source:sub(1, 1) == "@") then return nil end
  return info.source:sub(2) .. ":" .. info.linedefined
end

-- What is wrong with node n's attrs (nil when nothing): each key is one the op's rule declares (its field `attrs`) or
-- one the engine reads on every node (neusight.rules node_attrs), with the declared type. A misspelled attribute
-- would otherwise be ignored without a word (attrs = { bais = false } priced the bias; { causal = "false" } was causal).
local function attrs_problem(n, rule, chunk)
  local attrs = n.attrs
  if type(attrs) ~= "table" then return nil end -- absent (nodes_read refuses another type)
  local common = require_raw("neusight.rules", 1).node_attrs or {}
  local own = rule.attrs or {}
  local keys = {}
  for k in next, attrs do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v = attrs[k]
    local decl = type(k) == "string" and (own[k] or common[k]) or nil
    if not decl then
      local known = {}
      for name in next, own do known[#known + 1] = name end
      table.sort(known)
      local all = {}
      for name in next, own do all[name] = true end
      for name in next, common do all[name] = true end
      return ("unknown attribute attrs.%s%s: %s reads %s; the engine reads those of scripts/neusight/rules.lua "
        .. "node_attrs on any node"):format(tostring(k), did_you_mean(tostring(k), all), chunk,
          #known > 0 and "attrs " .. table.concat(known, ", ") or "no attrs")
    end
    local want = decl:match("^(%a+)")
    local fits
    if want == "integer" then fits = math.type(v) ~= nil and v == math.floor(v) and v == v
    else fits = type(v) == want end
    if not fits then
      return ("attrs.%s must be %s %s (got %s %s): %s"):format(k, want == "integer" and "an" or "a", want, type(v),
        type(v) == "string" and ("%q"):format(v) or tostring(v), decl:match("^%a+:?%s*(.*)$"))
    end
  end
end

-- Checks the nodes a model built before anything is priced: at least one node, every op has a rule, and each
-- rule's check(node) accepts its node (shapes). Errors start with `where` (the workload file and the model);
-- `located(i, who)`, when given, puts the script's line of node i into a node's `who` (neusight.workload node_located).
function E.check_nodes(nodes, where, located)
  if #nodes == 0 then
    error(where .. " has no nodes: an empty graph would forecast 0 ms (does the model function return its list?)", 0)
  end
  for i, n in ipairs(nodes) do
    local who = where .. ", node " .. i .. " '" .. tostring(n.name) .. "'"
    if located then who = located(i, who) end
    local loaded, got = pcall(E.get_op, n.op)
    -- a rule file that fails to load: its own file:line first, then the node that needed it
    if not loaded then error(tostring(got) .. "\n    while loading the rule of op '" .. tostring(n.op) .. "' for " .. who, 0) end
    local ok, rule, chunk = pcall(E.need_op, n.op)
    if not ok then error(who .. ": " .. tostring(rule), 0) end
    local problem = attrs_problem(n, rule, chunk)
    if problem then error(("%s (op '%s'): %s"):format(who, tostring(n.op), problem), 0) end
    if rule.check then
      local view = E.strict(n, "node '" .. tostring(n.name) .. "'")
      local ok_, problem = pcall(rule.check, view)
      if not ok_ then error(tostring(problem) .. "\n    while checking " .. who, 0) end
      if problem ~= nil then
        error(("%s (op '%s'): %s (%s check())"):format(who, tostring(n.op), tostring(problem), chunk), 0)
      end
    end
  end
end

-- The same check for library code, after the engine's reader of nodes (C.nodes_check: shapes are arrays of integers,
-- fields of their types) as the engine runs them: scripts/neusight/workload.lua build runs it before its memory report,
-- whose rule hooks (saves) would otherwise meet a node of the wrong shape first and name the rule's line, not the
-- workload's.
ns.check_nodes = function(nodes, where, located)
  local err, i = C.nodes_check(nodes, where)
  if err then  -- "<where>: node #i …": the script's line of node i in place of `where`, as check_nodes names it
    if i and located then err = located(i, where) .. err:sub(#where + 1) end
    error(err, 0)
  end
  return E.check_nodes(nodes, where, located)
end
-- model_where(origin, model) → "<origin>: model '<model>'": the engine's one wording of a workload's model in
-- messages (engine/lua/wrap_graph.cpp model_where), the `where` check_nodes' errors start with.
ns.model_where = C.model_where

-- Extra globals of Lua-side tests (tests/scripts/test_*.lua).
function E.test_globals()
  local dtype_bytes = C.dtype_sizes()
  return {
    load_op = function(name)
      local r = E.get_op(name)
      if not r then error("no op rule '" .. tostring(name) .. "' on the op search path", 2) end
      return r
    end,
    make_node = function(t)
      local n = { layer = "", dtype = "fp32", count = 1, params = 0, training = true, attrs = {},
                  phase = "forward", inputs = {} }
      for k, v in pairs(t) do n[k] = v end
      n.dtype_bytes = dtype_bytes[n.dtype] or error("unknown dtype '" .. tostring(n.dtype) .. "'", 2)
      return n
    end,
  }
end

return E
