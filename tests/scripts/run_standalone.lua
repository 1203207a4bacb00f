-- tests/scripts/run_standalone.lua — dev runner: runs tests/scripts/test_*.lua with plain lua5.4 in a sandbox like the engine's.
--
-- Usage, from the repository root:  lua5.4 tests/scripts/run_standalone.lua [substring-of-test-name]
-- The C++ suite runs the same files as Catch2 DYNAMIC_SECTIONs; this runner needs no build. It mirrors
-- the engine's contract: a strict environment per chunk (reading an undefined global is an error),
-- `require` limited to scripts/, and the globals load_op(name) / make_node(tbl) for test files.
-- Being a dev tool outside the sandbox, it may use io/os/loadfile itself.
-- A test named test_engine_* checks one of the engine's own primitives (what require "neusight" hands scripts from
-- C++): this runner has only its Lua copies of them, so it reports such a test skipped, never passed; the C++ suite
-- (tests/lua_api/test_lua_scripts.cpp) runs it against the real one.
local root = arg[0]:match("^(.-)tests/scripts/[^/]*$") or "./"
local filter = arg[1]

local BASE_NAMES = {
  "math", "string", "table", "utf8", "ipairs", "pairs", "next", "select", "type", "tostring", "tonumber",
  "error", "assert", "pcall", "setmetatable", "getmetatable", "rawget", "rawset", "rawequal", "rawlen", "print",
}

local base = {}
for _, name in ipairs(BASE_NAMES) do base[name] = _G[name] end

-- A fresh strict environment: reads fall back to `base` (plus `extra`); reading an unknown name or
-- assigning a global is an error (op rules and modules return tables, they never set globals).
local function strict_env(extra)
  return setmetatable({}, {
    __newindex = function(_, key) error("assignment to undefined global '" .. tostring(key) .. "'", 2) end,
    __index = function(_, key)
      local v = extra and extra[key]
      if v == nil then v = base[key] end
      if v == nil then error("undefined global '" .. tostring(key) .. "'", 2) end
      return v
    end,
  })
end

local function load_chunk(path, extra)
  local fn, err = loadfile(path, "t", strict_env(extra))
  if not fn then error(err, 0) end
  return fn
end

-- require restricted to scripts/<a/b>.lua or scripts/<a/b>/init.lua, each module in its own strict env.
-- require "neusight" (engine/lua/prelude.lua) for plain lua5.4: closest / did_you_mean follow engine/core/text.cpp
-- text_close_matches, the engine's one rule (this runner has no C++; the engine-run tests check the real one).
local function edit_distance(a, b)
  local prev, cur = {}, {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    cur[0] = i
    for j = 1, #b do cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:byte(i) == b:byte(j) and 0 or 1)) end
    prev, cur = cur, prev
  end
  return prev[#b]
end
local function closest(word, cands)
  local w, list, seen = tostring(word):lower(), {}, {}
  for k, v in pairs(cands) do
    local c = type(k) == "string" and k or (math.type(k) == "integer" and type(v) == "string" and v) or nil
    if c and not seen[c] then list[#list + 1], seen[c] = c, true end
  end
  table.sort(list)
  local best, best_d, best_e
  for _, c in ipairs(list) do
    if c == word then goto next end -- never the word itself (text.cpp)
    local lc = c:lower()
    local e = edit_distance(w, lc)
    local d = e
    if (#w >= 3 and lc:find(w, 1, true)) or (#lc >= 3 and w:sub(1, #lc) == lc) then d = math.min(d, 1) end
    if #w >= 3 and lc:sub(1, #w) == w then d = 0 end
    if d <= math.max(2, #w // 3) and (not best_d or d < best_d or (d == best_d and e < best_e)) then
      best, best_d, best_e = c, d, e
    end
    ::next::
  end
  return best
end
-- ns.pack_integers, ns.walk, ns.fold, ns.queue and ns.compile (engine/lua/wrap_series.cpp, the loops neusight.parallel runs per op) as the
-- plain Lua loops they run: this runner has no C++; the engine-run tests check the real ones.
local function pack_integers(t, n)
  local p = {}
  for i = 1, n do p[i] = t[i] end
  return p
end
local function walk(program, total, fw, bw, _, last, all)
  local done, starts, last_bw = { [0] = 0 }, {}, {}
  for k = 1, total do
    local x = program[k]
    local a, b = done[x >> 40], done[x >> 16 & 0xFFFFFF]
    local start = a < b and b or a
    local c = (x & 0xFFFF) - 0x8000
    if c > 0 then
      done[k] = start + fw[c]
    else
      c = -c
      done[k] = start + bw[c]
      local l = last_bw[c]
      if not l or start > l then last_bw[c] = start end
    end
    starts[k] = start
  end
  local finishes = {}
  for d = 1, #last do finishes[d] = done[last[d]] end
  if all then return finishes, last_bw, done, starts end
  return finishes, last_bw
end
local function fold(series, counts, fw_terms, bw_terms, watch)
  local J = 0
  for _, ts in ipairs { fw_terms, bw_terms } do
    for _, t in ipairs(ts) do J = math.max(J, t[1]) end
  end
  local out = {}
  for d = 1, #series do
    local codes, sums, peak = series[d], {}, 0
    for j = 1, J do sums[j] = 0 end
    for i = 1, counts[d] do
      local k, ts = codes[i], fw_terms
      if k < 0 then k, ts = -k, bw_terms end
      for _, t in ipairs(ts) do
        local j = t[1]
        if t[3] == -1 then sums[j] = sums[j] - t[2][k] else sums[j] = sums[j] + t[2][k] end
      end
      if watch and watch >= 1 and watch <= J and sums[watch] > peak then peak = sums[watch] end
    end
    sums[J + 1] = peak
    out[d] = sums
  end
  return out
end
-- compile: the schedule's turns (scripts/neusight/parallel/schedule.lua shape_of), each device's ops in order while
-- they are ready, devices in turn; nil where no device can run another op while some are left (a deadlock)
local function compile(lists, P, v, Mb)
  local V = P * v
  local done_fw, done_bw = {}, {} -- [vs][mb] = program position
  for vs = 0, V - 1 do done_fw[vs], done_bw[vs] = {}, {} end
  local program, codes, n, last, ptr, left, k = {}, {}, {}, {}, {}, 0, 0
  for d = 1, P do
    codes[d], n[d], last[d], ptr[d] = {}, lists[d].n, 0, 1
    left = left + n[d]
  end
  local progress = true
  while left > 0 and progress do
    progress = false
    for d = 1, P do
      local l, cd = lists[d], codes[d]
      local fw, chunk, mb = l.fw, l.chunk, l.mb
      local i, nd, at = ptr[d], n[d], last[d]
      local i0 = i
      while i <= nd do
        local vs, m = chunk[i] * P + (d - 1), mb[i]
        local ready, c
        if fw[i] then
          ready = vs == 0 and 0 or done_fw[vs - 1][m]
          if ready == nil then break end
          k, c = k + 1, vs + 1
          done_fw[vs][m] = k
        else
          if not done_fw[vs][m] then break end
          ready = vs == V - 1 and done_fw[vs][m] or done_bw[vs + 1][m]
          if ready == nil then break end
          k, c = k + 1, -(vs + 1)
          done_bw[vs][m] = k
        end
        program[k], cd[i], at = at << 40 | ready << 16 | (c + 0x8000), c, k
        i = i + 1
      end
      if i > i0 then ptr[d], last[d], left, progress = i, at, left - (i - i0), true end
    end
  end
  if left > 0 then return nil end
  return k, program, pack_integers(program, k), codes, last
end

local function queue(at, n, dt, len, free, sum)
  for k = 1, len do
    for _ = 1, n[k] do
      local start = at[k] < free and free or at[k]
      free = start + dt[k]
      sum = sum + dt[k]
    end
  end
  return free, sum
end

-- engine/core/graph.cpp dtype_sizes, for plain lua5.4 (the engine hands scripts its own table)
local DTYPE_BYTES = { fp64 = 8, fp32 = 4, tf32 = 4, fp16 = 2, bf16 = 2, fp8 = 1 }
-- engine/core/cluster_spec.h's cluster_max_* constants, read from the header itself: the engine hands scripts the same
-- numbers as ns.cluster_limits() (this runner has no C++, and a copy here could drift from them)
local function cluster_limits()
  local f = assert(io.open(root .. "engine/core/cluster_spec.h", "r"))
  local text = f:read("a")
  f:close()
  local t = {}
  for key, value in text:gmatch("constexpr [%w_]+ cluster_max_([%w_]+) = ([%w%.%+%-]+);") do t[key] = tonumber(value) end
  assert(t.bw_gbps and t.latency_us and math.type(t.count) == "integer",
         "runner: cluster_max_bw_gbps, _latency_us, _count not found in engine/core/cluster_spec.h")
  return t
end
-- engine/core/text.cpp text_limit, for plain lua5.4: %g, its exponent without '+' or leading zeros ("1e6"), so that
-- the scripts that print a limit (neusight.topology) run here; its test (test_engine_limit_text_*) is skipped here
local function limit_text(x)
  local s = ("%g"):format(x)
  local mantissa, sign, digits = s:match("^(.-)e([+-])0*(%d+)$")
  if not mantissa then return s end
  return mantissa .. "e" .. (sign == "-" and "-" or "") .. digits
end
-- engine/lua/wrap_graph.cpp node_keys (ns.node_fields), read from the source itself as cluster_limits above
local function node_fields()
  local f = assert(io.open(root .. "engine/lua/wrap_graph.cpp", "r"))
  local text = f:read("a")
  f:close()
  local list = assert(text:match("node_keys = (%b{})"), "runner: node_keys not found in engine/lua/wrap_graph.cpp")
  local t = {}
  for key in list:gmatch('"([%w_]+)"') do t[#t + 1] = key end
  return t
end
-- engine/core/gpu_spec.cpp gpu_fields (ns.gpu_fields: its keys and `source`), read from the source itself as
-- node_fields above; ns.gpu_optional over the plain GPU tables tests make here (the engine's reads its view too)
local function gpu_fields()
  local f = assert(io.open(root .. "engine/core/gpu_spec.cpp", "r"))
  local text = f:read("a")
  f:close()
  local t = {}
  for key in text:gmatch('{"([%w_]+)", &g::') do t[#t + 1] = key end
  assert(#t > 0, "runner: gpu_fields not found in engine/core/gpu_spec.cpp")
  t[#t + 1] = "source"
  return t
end
local gpu_keys
local function gpu_optional(gpu, key)
  if type(gpu) ~= "table" then error("bad argument #1 to 'gpu_optional' (GPU expected, got " .. type(gpu) .. ")", 2) end
  if not gpu_keys then
    gpu_keys = {}
    for _, k in ipairs(gpu_fields()) do gpu_keys[k] = true end
  end
  local keys = gpu_keys
  if not keys[key] then
    local best = closest(key, keys)
    error("gpu has no field '" .. tostring(key) .. "'" .. (best and (" (did you mean '" .. best .. "'?)") or ""), 2)
  end
  return rawget(gpu, key)
end
local neusight_module = {
  pack_integers = pack_integers, walk = walk, fold = fold, queue = queue, compile = compile, cluster_limits = cluster_limits,
  limit_text = limit_text, node_fields = node_fields, gpu_fields = gpu_fields, gpu_optional = gpu_optional,
  dtype_sizes = function()
    local t = {}
    for k, v in pairs(DTYPE_BYTES) do t[k] = v end
    return t
  end,
  closest = closest,
  warn = function(...) io.stderr:write("neusight: warning: ", table.concat({ ... }, " "), "\n") end,
  did_you_mean = function(word, keys)
    local best = closest(word, keys)
    return best and (" (did you mean '" .. best .. "'?)") or ""
  end,
}

local loaded = { neusight = neusight_module }
neusight_module.older_scripts = "a --scripts copy from an older neusight?" -- the engine's words (ns.older_scripts, engine/lua/session_impl.h older_scripts_words)
-- infeasible(msg) / is_infeasible(err) as the prelude gives them: the last reason raised, forgotten once asked
local infeasible_last
function neusight_module.infeasible(msg)
  infeasible_last = msg
  error(msg, 0)
end
function neusight_module.is_infeasible(err)
  local msg = infeasible_last
  infeasible_last = nil
  return msg ~= nil and type(err) == "string" and err:find(msg, 1, true) ~= nil
end
-- needs(name, fn) as the engine's prelude gives it: the module's function, or an error naming the module
function neusight_module.needs(name, fn)
  local f = base.require(name)[fn]
  if type(f) ~= "function" then error(("module %s has no function %s"):format(name, fn), 0) end
  return f
end
function base.require(name)
  if loaded[name] ~= nil then return loaded[name] end
  local rel = name:gsub("%.", "/")
  for _, path in ipairs { root .. "scripts/" .. rel .. ".lua", root .. "scripts/" .. rel .. "/init.lua" } do
    local f = io.open(path, "r")
    if f then
      f:close()
      local value = load_chunk(path)(name)
      loaded[name] = value == nil and true or value
      return loaded[name]
    end
  end
  error("module '" .. name .. "' not found under scripts/", 2)
end

-- load_op(name): ops/<name>.lua, checked against the op-rule schema the engine enforces.
local OP_KEYS = { name = "string", doc = "string", forward = "function", backward = "function", accumulate = "function",
                  check = "function", saves = "function", temporary = "function", attrs = "table", fusion = "string",
                  optimizer = "table" }  -- engine/lua/prelude.lua op_fields
local ops = {}
local function load_op(name)
  if ops[name] then return ops[name] end
  local path = root .. "ops/" .. name .. ".lua"
  local rule = load_chunk(path)()
  if type(rule) ~= "table" then error(path .. ": must return a table", 2) end
  for key, value in pairs(rule) do
    if not OP_KEYS[key] then error(path .. ": unknown field '" .. tostring(key) .. "'", 2) end
    local ok = type(value) == OP_KEYS[key] or (key == "backward" and value == false) -- no backward work
    if not ok then error(path .. ": field '" .. key .. "' must be a " .. OP_KEYS[key], 2) end
  end
  if rule.name ~= name then error(path .. ": name '" .. tostring(rule.name) .. "' does not match the file", 2) end
  if not rule.doc or not rule.forward then error(path .. ": 'doc' and 'forward' are required", 2) end
  ops[name] = rule
  return rule
end

-- make_node(tbl): a copy of tbl with the engine's defaults filled in.
local function make_node(tbl)
  local node = { op = "?", name = "node", layer = "", inputs = {}, output = {}, dtype = "fp32",
                 count = 1, params = 0, training = true, attrs = {} }
  for k, v in pairs(tbl) do node[k] = v end
  node.dtype_bytes = DTYPE_BYTES[node.dtype]
  return node
end

local test_env = { load_op = load_op, make_node = make_node }
neusight_module.op_rule = load_op -- the engine's require("neusight").op_rule (neusight.fusion asks it)
neusight_module.function_where = function(f) -- the engine's (engine/lua/prelude.lua): "file:line" of a Lua function
  local info = debug.getinfo(f, "S")
  if not (info and info.linedefined > 0 and info.source:sub(1, 1) == "@") then return nil end
  return info.source:sub(2) .. ":" .. info.linedefined
end
-- the engine's op_bundled_note: this runner's op search path is the bundled ops/ alone, so never a note
neusight_module.op_bundled_note = function() return nil end
neusight_module.op_rule_or_nil = function(name) -- the engine's op_rule_or_nil: nil without a rule file
  local f = io.open(root .. "ops/" .. name .. ".lua", "r")
  if not f then return nil end
  f:close()
  return load_op(name)
end

local files = {}
local listing = io.popen('ls "' .. root .. 'tests/scripts"')
for file in listing:lines() do
  if file:match("^test_.*%.lua$") then files[#files + 1] = file end
end
listing:close()
table.sort(files)

local passed, failed, skipped = 0, 0, 0
for _, file in ipairs(files) do
  local ok, suite = pcall(function() return load_chunk(root .. "tests/scripts/" .. file, test_env)() end)
  if not ok then
    failed = failed + 1
    print("FAIL " .. file .. ": " .. tostring(suite))
  else
    local names = {}
    for name, fn in pairs(suite) do
      if name:match("^test_") and type(fn) == "function" and (not filter or name:find(filter, 1, true)) then
        names[#names + 1] = name
      end
    end
    table.sort(names)
    for _, name in ipairs(names) do
      if name:match("^test_engine_") then
        skipped = skipped + 1
        print("SKIP " .. file .. " " .. name .. ": checks an engine primitive this runner only copies (ctest runs it)")
      else
        local ok_, err = xpcall(suite[name], debug.traceback)
        if ok_ then
          passed = passed + 1
        else
          failed = failed + 1
          print("FAIL " .. file .. " " .. name .. ": " .. tostring(err))
        end
      end
    end
  end
end
print(("%d passed, %d failed, %d skipped"):format(passed, failed, skipped))
os.exit(failed == 0)
