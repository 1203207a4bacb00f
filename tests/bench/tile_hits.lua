-- tests/bench/tile_hits.lua — how often scripts/tiling rules pick the tile the library actually launched, per GPU × family.
--
-- Usage, from anywhere:  lua5.4 tests/bench/tile_hits.lua /work/shared/data/neusight [--as ARCH]
-- For every measured kernel in the NeuSight micro-benchmarks it compares tiling.gemm.select() with
-- the tile parsed from the kernel name (bmm, linear) and tiling.vec.select() with the elements per
-- block measured from the launch grid (elementwise), and prints the hit rate by row count and by
-- latency (a miss on a long kernel costs more). Splits: "train" = dataset/train/collect and, for
-- AMD, dataset_amd/train/collect; "test" = dataset/test/*.csv and, for AMD GEMMs (no train file
-- survives upstream), dataset_amd/test/collect. GPU tables come from gpus/*.toml (device names are
-- matched against `aliases`) and are strict, like the engine's: reading a missing key is an error.
-- `--as ARCH` evaluates every GPU of ARCH's vendor with ARCH's rules instead of its own: a transfer
-- check of how a rule fares on a GPU it was not fitted to (what an unseen architecture gets).
-- A dev tool run outside the sandbox: it uses io and package.path.
--
-- `--collect DIR` reads a scripts/collect output folder instead (every *.csv under DIR: <op>/p<torch>/[<dtype>/]
-- <GPU>.csv): the split column is then the rows' dtype (the Dtype column, fp32 without it), tensor-core dtypes
-- take the tensor-core rule (tiling.gemm.select with the row's dtype), and `named%` is the share of GEMM rows
-- whose kernel name carries a tile at all (rows without one are left out of count% and time%).
local root = (arg[0]:match("^(.-)tests/bench/[^/]*$") or "./")
local collect_dir = arg[1] == "--collect" and (arg[2] or error("--collect needs a folder")) or nil
local data = collect_dir or arg[1] or
  error("usage: lua5.4 tests/bench/tile_hits.lua <neusight data dir> [--as ARCH] | --collect DIR")
local as_arch = not collect_dir and arg[2] == "--as" and (arg[3] or error("--as needs an architecture")) or nil
package.path = root .. "scripts/?.lua;" .. root .. "scripts/?/init.lua;" .. package.path

local gemm = require "tiling.gemm"
local vec = require "tiling.vec"

local function ls(dir, pattern)
  local out = {}
  local p = io.popen('ls "' .. dir .. '" 2>/dev/null')
  for name in p:lines() do
    if name:match(pattern) then out[#out + 1] = name end
  end
  p:close()
  table.sort(out)
  return out
end

---------------------------------------------------------------------------------------------------
-- gpus/*.toml: a minimal reader for the flat `key = value  # comment` lines these files use.

local function toml_value(text)
  text = text:gsub("^%s+", "")
  if text:sub(1, 1) == "[" then -- array of strings
    local list = {}
    for s in text:match("^%[(.-)%]"):gmatch('"(.-)"') do list[#list + 1] = s end
    return list
  end
  local s = text:match('^"(.-)"')
  if s then return s end
  local raw = text:match("^([^#%s]+)")
  if raw == "true" then return true elseif raw == "false" then return false end
  return tonumber(raw) or raw
end

local function strict(tbl, what)
  return setmetatable(tbl, { __index = function(_, key) error(what .. ": no field '" .. tostring(key) .. "'", 2) end })
end

local gpus = {} -- device string (any alias or name) → strict gpu table
for _, file in ipairs(ls(root .. "gpus", "%.toml$")) do
  local gpu = {}
  for line in io.lines(root .. "gpus/" .. file) do
    local key, value = line:match("^([%w_]+)%s*=%s*(.-)%s*$")
    if key then gpu[key] = toml_value(value) end
  end
  if as_arch then
    local vendor = as_arch:match("^cdna") and "amd" or "nvidia"
    -- a GPU moved to another architecture loses its compute capability, as an unseen GPU would
    if gpu.vendor == vendor and gpu.architecture ~= as_arch then
      gpu.architecture, gpu.compute_capability = as_arch, "unseen"
    end
  end
  strict(gpu, "gpus/" .. file)
  gpus[gpu.name] = gpu
  for _, alias in ipairs(rawget(gpu, "aliases") or {}) do gpus[alias] = gpu end
end

---------------------------------------------------------------------------------------------------
-- CSV with quoted fields (kernel names contain commas).

local function split_csv(line)
  local fields, i, n = {}, 1, #line
  while i <= n + 1 do
    if line:sub(i, i) == '"' then
      local buf, j = {}, i + 1
      while true do
        local q = line:find('"', j, true)
        if not q then buf[#buf + 1] = line:sub(j); i = n + 2; break end
        buf[#buf + 1] = line:sub(j, q - 1)
        if line:sub(q + 1, q + 1) == '"' then buf[#buf + 1] = '"'; j = q + 2
        else i = q + 2; break end
      end
      fields[#fields + 1] = table.concat(buf)
    else
      local c = line:find(",", i, true) or n + 1
      fields[#fields + 1] = line:sub(i, c - 1)
      i = c + 1
    end
  end
  return fields
end

-- Calls fn(row) for each data row of a CSV file, row keyed by header name; no-op if the file is absent.
local function each_row(path, fn)
  local f = io.open(path, "r")
  if not f then return end
  local header
  for line in f:lines() do
    line = line:gsub("\r$", "")
    local fields = split_csv(line)
    if not header then
      header = fields
    elseif #fields >= #header then
      local row = {}
      for i, name in ipairs(header) do row[name] = fields[i] end
      fn(row)
    end
  end
  f:close()
end

---------------------------------------------------------------------------------------------------
-- Tally

local stats, order = {}, {}
local unknown_devices = {}

local function tally(device, family, split, hit, latency)
  local key = device .. "|" .. family .. "|" .. split
  local s = stats[key]
  if not s then
    s = { device = device, family = family, split = split, n = 0, hits = 0, lat = 0, lat_hit = 0, all = 0 }
    stats[key] = s
    order[#order + 1] = key
  end
  s.all = s.all + 1
  if hit == nil then return end -- a GEMM row whose kernel name carries no tile (counted in named% only)
  s.n, s.lat = s.n + 1, s.lat + latency
  if hit then s.hits, s.lat_hit = s.hits + 1, s.lat_hit + latency end
end

local function gpu_of(device)
  local gpu = gpus[device]
  if not gpu then unknown_devices[device] = true end
  return gpu
end

local function gemm_file(path, family, split)
  each_row(path, function(row)
    local gpu = gpu_of(row.Device)
    if not gpu then return end
    local tm, tk = gemm.parse(row["Kernel Name"])
    local dtype = collect_dir and row.Dtype or "fp32"
    if collect_dir then split = dtype end
    if not tm then -- no tile in the name (not a GEMM kernel, or a library kernel without one)
      if collect_dir then tally(gpu.name, family, split, nil, 0) end
      return
    end
    -- The data's linear rows are B x M tokens (B = 1 in the shared data; the collector writes B = 1 too).
    local b, m = tonumber(row.B), tonumber(row.M)
    if family == "linear" then b, m = 1, b * m end
    local t = gemm.select({ family = family, b = b, m = m, n = tonumber(row.N), k = tonumber(row.K), dtype = dtype },
      gpu)
    tally(gpu.name, family, split, t.tile_m == tm and t.tile_k == tk, tonumber(row.Latency))
  end)
end

local VEC_FAMILY = { softmax = "softmax", ln = "layernorm" } -- everything else is elementwise
local function vec_file(path, op, split)
  each_row(path, function(row)
    local o = op or row.OPName
    if VEC_FAMILY[o] then return end -- one block per row by construction; nothing to check
    local gpu = gpu_of(row.Device)
    if not gpu then return end
    local rows, hidden = tonumber(row.B), tonumber(row.H)
    local measured = vec.from_grid(rows, hidden, tonumber(row["Grid x"]), tonumber(row["Grid y"]),
      tonumber(row["Grid z"]))
    local dtype = collect_dir and row.Dtype or "fp32"
    if collect_dir then split = dtype end
    local t = vec.select({ family = "elementwise", op = o, rows = rows, hidden = hidden, dtype = dtype }, gpu)
    tally(gpu.name, "elementwise", split, t.elems == measured, tonumber(row.Latency))
  end)
end

local SKIP_OPS = { bmm = true, linear = true, conv = true }
if collect_dir then
  local p = io.popen('find "' .. collect_dir .. '" -name "*.csv" | sort')
  for path in p:lines() do
    local op = path:match("([%w_]+)/p[%d.]+/[^/]*$") or path:match("([%w_]+)/p[%d.]+/%w+/[^/]*$")
    if op == "bmm" or op == "linear" then gemm_file(path, op, "fp32")
    elseif op and not SKIP_OPS[op] and op ~= "context_attention" then vec_file(path, op, "fp32") end
  end
  p:close()
end
for _, base in ipairs(collect_dir and {} or { { dir = data .. "/dataset/train/collect", ver = "p2.1.0" },
                        { dir = data .. "/dataset_amd/train/collect", ver = "p2.4.1" } }) do
  for _, op in ipairs(ls(base.dir, "^%w+$")) do
    local dir = base.dir .. "/" .. op .. "/" .. base.ver
    for _, file in ipairs(ls(dir, "%.csv$")) do
      if op == "bmm" or op == "linear" then gemm_file(dir .. "/" .. file, op, "train")
      elseif not SKIP_OPS[op] then vec_file(dir .. "/" .. file, op, "train") end
    end
  end
end
for _, family in ipairs(collect_dir and {} or { "bmm", "linear" }) do
  gemm_file(data .. "/dataset/test/" .. family .. ".csv", family, "test")
  local dir = data .. "/dataset_amd/test/collect/" .. family .. "/p2.4.1"
  for _, file in ipairs(ls(dir, "%.csv$")) do gemm_file(dir .. "/" .. file, family, "test") end
end
if not collect_dir then vec_file(data .. "/dataset/test/elem.csv", nil, "test") end

---------------------------------------------------------------------------------------------------
-- Report

local FAMILIES = { bmm = 1, linear = 2, elementwise = 3 }
table.sort(order, function(a, b)
  local x, y = stats[a], stats[b]
  if x.device ~= y.device then return x.device < y.device end
  if x.family ~= y.family then return FAMILIES[x.family] < FAMILIES[y.family] end
  return x.split > y.split -- train before test
end)

local extra = collect_dir and (" %8s"):format("named%") or ""
print(("%-16s %-12s %-6s %7s %8s %8s"):format("gpu", "family", "split", "rows", "count%", "time%") .. extra)
for _, key in ipairs(order) do
  local s = stats[key]
  local named = collect_dir and (" %8.1f"):format(100 * s.n / s.all) or ""
  print(("%-16s %-12s %-6s %7d %8.1f %8.1f"):format(s.device, s.family, s.split, s.all, 100 * s.hits / s.n,
    100 * s.lat_hit / s.lat) .. named)
end
for device in pairs(unknown_devices) do
  io.stderr:write("tile_hits: no gpus/*.toml alias for device '" .. device .. "' (rows skipped)\n")
end
