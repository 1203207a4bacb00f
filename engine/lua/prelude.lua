-- engine/lua/prelude.lua — the Lua half of the engine: sandbox, restricted require, op-rule schema, strict views.
local C, version = ...   -- C: engine functions (find_script, find_op, load, eprint, warn); see session.cpp

local E = {}             -- engine-internal table, kept in the registry by the host

local function did_you_mean(word, keys)
  word = tostring(word)
  local best, best_d
  for k in pairs(keys) do
    if type(k) == "string" then
      local d = C.edit_distance(word, k)
      if d <= 2 and (not best_d or d < best_d or (d == best_d and k < best)) then best, best_d = k, d end
    end
  end
  return best and (" (did you mean '" .. best .. "'?)") or ""
end
E.did_you_mean = did_you_mean

-- The public module scripts get from require "neusight".
local ns = { version = version, did_you_mean = did_you_mean, warn = C.warn,
             cluster_file = C.cluster_load } -- gpus/clusters/<name>.toml (or a .toml path) as a table
function ns.ceil_div(a, b)
  if type(a) ~= "number" or type(b) ~= "number" then
    error("bad argument to 'ceil_div' (numbers expected, got " .. type(a) .. ", " .. type(b) .. ")", 2)
  end
  return -((-a) // b)
end

-- Curated base for every script environment: no io, os, load, dofile, debug (hygiene, not security).
local base = {
  math = math, string = string, table = table, utf8 = utf8,
  ipairs = ipairs, pairs = pairs, next = next, select = select, type = type,
  tostring = tostring, tonumber = tonumber, error = error, assert = assert, pcall = pcall,
  setmetatable = setmetatable, getmetatable = getmetatable,
  rawget = rawget, rawset = rawset, rawequal = rawequal, rawlen = rawlen,
  print = C.eprint,      -- stdout belongs to the report (JSON/CSV); script output goes to stderr
}

local env_mt = {
  __index = function(_, k)
    local v = base[k]
    if v == nil then error("undefined global '" .. tostring(k) .. "'", 2) end
    return v
  end,
  __newindex = function(_, k)
    error("assignment to undeclared global '" .. tostring(k) .. "' (use local)", 2)
  end,
}

-- A fresh global table for one chunk; `extra` entries (test helpers) are visible as globals.
function E.new_env(extra)
  local env = {}
  if extra then for k, v in pairs(extra) do env[k] = v end end
  return setmetatable(env, env_mt)
end

local loaded = { neusight = ns }
function base.require(name)
  if type(name) ~= "string" then
    error("bad argument #1 to 'require' (string expected, got " .. type(name) .. ")", 2)
  end
  local m = loaded[name]
  if m ~= nil then return m end
  local path, chunk = C.find_script(name)
  if not path then error("module '" .. name .. "' not found:" .. chunk, 2) end
  local r = C.load(path, chunk, E.new_env())(name)
  if r == nil then r = true end
  loaded[name] = r
  return r
end
E.require = base.require

-- Read-only view with errors on unknown fields, so `node.ouput` fails instead of being nil.
function E.strict(data, what)
  return setmetatable({}, {
    __index = function(_, k)
      local v = data[k]
      if v == nil then error(what .. " has no field '" .. tostring(k) .. "'" .. did_you_mean(k, data), 2) end
      return v
    end,
    __newindex = function(_, k) error(what .. " is read-only (assignment to '" .. tostring(k) .. "')", 2) end,
    __pairs = function() return next, data, nil end,
    __len = function() return #data end,
  })
end

-- Op-rule schema (style.md): returned table, required/optional typed fields, unknown keys are errors.
-- `backward = false` says the op has no backward work; a training run refuses a rule that says nothing (the engine
-- checks it when it needs the hook). `check(node)` returns nil or what is wrong with the node (its shapes).
-- `saves(node)` (optional) returns the bytes autograd keeps for the node's backward and `temporary(node)` the
-- largest transient while it runs (scripts/neusight/memory.lua; defaults there).
local op_fields = { name = "string", doc = "string", forward = "function", backward = "function",
                    accumulate = "function", check = "function", saves = "function", temporary = "function" }
local op_required = { "name", "doc", "forward" }

function E.check_op(rule, chunk, stem)
  if type(rule) ~= "table" then
    error(chunk .. ": an op rule must return a table (got " .. type(rule) .. ")", 0)
  end
  for k, v in pairs(rule) do
    local want = op_fields[k]
    if not want then error(chunk .. ": unknown field '" .. tostring(k) .. "'" .. did_you_mean(k, op_fields), 0) end
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
  return rule
end

-- Op rules load lazily on first use and are cached by name; false caches "no rule".
local ops, op_chunks = {}, {}
function E.get_op(name)
  local r = ops[name]
  if r ~= nil then return r or nil, op_chunks[name] end
  local path, chunk = C.find_op(name)
  if not path then ops[name] = false; return nil end
  r = E.check_op(C.load(path, chunk, E.new_env())(), chunk, name)
  ops[name], op_chunks[name] = r, chunk
  return r, chunk
end

-- The rule of op `name`, or an error naming the closest op on the search path. There is no silent memory-bound
-- guess for an op without a rule: a rule file routes an op there explicitly (require("neusight.fallback").rule).
function E.need_op(name)
  local r, chunk = E.get_op(name)
  if r then return r, chunk end
  local names = {}
  for _, n in ipairs(C.op_names()) do names[n] = true end
  local hint = did_you_mean(name, names)
  if hint == "" then hint = " (`neusight ops` lists the rules)" end
  error("unknown op '" .. tostring(name) .. "'" .. hint .. ": no " .. tostring(name) .. ".lua on the op search path",
        0)
end

-- The rule of op `name` for library code (scripts/neusight/memory.lua reads the `saves` hooks): require("neusight").op_rule.
ns.op_rule = function(name) return (E.need_op(name)) end

-- Checks the nodes a model built before anything is priced: at least one node, every op has a rule, and each
-- rule's check(node) accepts its node (shapes). Errors start with `where` (the workload file and the model).
function E.check_nodes(nodes, where)
  if #nodes == 0 then
    error(where .. " has no nodes: an empty graph would forecast 0 ms (does the model function return its list?)", 0)
  end
  for i, n in ipairs(nodes) do
    local who = where .. ", node " .. i .. " '" .. tostring(n.name) .. "'"
    local ok, rule, chunk = pcall(E.need_op, n.op)
    if not ok then error(who .. ": " .. tostring(rule), 0) end
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

-- Extra globals of Lua-side tests (tests/scripts/test_*.lua).
function E.test_globals()
  local dtype_bytes = { fp32 = 4, tf32 = 4, fp16 = 2, bf16 = 2, fp8 = 1, fp64 = 8 }
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
