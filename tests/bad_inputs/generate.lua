-- tests/bad_inputs/generate.lua — writes the bad-input corpus (the files under tests/bad_inputs/<kind>/) and its
-- manifest cases.toml, which tests/cli/test_bad_inputs.cpp runs. Both are checked in; run this after editing a case:
--   lua5.4 tests/bad_inputs/generate.lua
-- Every case is one call of case{...}:
--   kind    the group (one ctest entry per kind)
--   file    the bad input, relative to tests/bad_inputs/ (its text in `text`, or written elsewhere in this script)
--   args    the neusight command line; {file} the input's absolute path, {dir} its folder, {root} tests/bad_inputs,
--           {tmp} a fresh temp folder, {out} {tmp}/out.json (which must not exist afterwards)
--   expect  substrings the error message must contain
--   line    the line the message must name as "<names>:<line>" (absent where the input has no lines)
--   names   what the message must name (default: {file}, the input's absolute path)
--   fifo    a FIFO created as {tmp}/<fifo> before the run
local root = arg[0]:match("^(.*)/[^/]*$") or "."
local cases, files = {}, {}

local function write(rel, text)
  assert(not files[rel], "file written twice: " .. rel)
  files[rel] = true
  local dir = (root .. "/" .. rel):match("^(.*)/[^/]*$")
  os.execute("mkdir -p '" .. dir .. "'")
  local f = assert(io.open(root .. "/" .. rel, "wb"))
  f:write(text)
  f:close()
end

local function case(c)
  assert(c.kind and c.file and c.args and c.expect, "case needs kind, file, args, expect")
  if type(c.expect) == "string" then c.expect = { c.expect } end
  if c.text then write(c.file, c.text) end
  cases[#cases + 1] = c
end

-- The line (1-based) of the first line of `text` that starts with `prefix`.
local function line_of(text, prefix)
  local n = 0
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if l:sub(1, #prefix) == prefix then return n end
  end
  error("no line starting with " .. prefix)
end

local function replace_line(text, prefix, new)
  local out, hit = {}, false
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    if not hit and l:sub(1, #prefix) == prefix then out[#out + 1] = new; hit = true else out[#out + 1] = l end
  end
  assert(hit, prefix)
  return table.concat(out, "\n", 1, #out - 1) .. "\n"
end

local PREDICT = "predict --model gpt2_large --mode inference --batch 1 --seq 8 --predictor roofline --format json -o {out}"

-------------------------------------------------------------------------------------------------- gpu TOML
local gpu = [[
# a made-up GPU with round numbers; each case changes one line
name = "Bad-1"
aliases = ["bad1"]
vendor = "nvidia"
architecture = "ampere"
compute_capability = "8.0"
num_sm = 10
cores_per_sm = 64
base_clock_mhz = 1000
boost_clock_mhz = 1500
mem_gb = 8
mem_bw_gbps = 100.0
l2_mb = 4.0
peak_fp32_tflops = 2.0
peak_fp32_matrix_tflops = 2.0
peak_tf32_tflops = 8.0
peak_fp16_tflops = 16.0
peak_bf16_tflops = 16.0
peak_fp8_tflops = 0.0
max_threads_per_sm = 2048
max_threads_per_block = 1024
max_blocks_per_sm = 32
max_warps_per_sm = 64
warp_size = 32
max_regs_per_sm = 65536
max_regs_per_block = 65536
max_regs_per_thread = 255
max_smem_per_sm_kb = 164
max_smem_per_block_kb = 163
interconnect = "none"
interconnect_bw_gbps = 0.0
pcie_gen = 4
pcie_bw_gbps = 32.0
price_per_hour_usd = 1.5
]]
write("gpu/good.toml", gpu)  -- the base every case changes; the driver checks that it is accepted

-- integer fields and number fields; `zero` marks those where 0 is a valid value (an absent feature)
local int_fields = { "num_sm", "cores_per_sm", "max_threads_per_sm", "max_threads_per_block", "max_blocks_per_sm",
                     "max_warps_per_sm", "warp_size", "max_regs_per_sm", "max_regs_per_block", "max_regs_per_thread",
                     "pcie_gen" }
local num_fields = { "base_clock_mhz", "boost_clock_mhz", "mem_gb", "mem_bw_gbps", "l2_mb", "peak_fp32_tflops",
                     "peak_fp32_matrix_tflops", "peak_tf32_tflops", "peak_fp16_tflops", "peak_bf16_tflops",
                     "peak_fp8_tflops", "max_smem_per_sm_kb", "max_smem_per_block_kb", "interconnect_bw_gbps",
                     "pcie_bw_gbps", "price_per_hour_usd" }
local zero_ok = { peak_tf32_tflops = true, peak_bf16_tflops = true, peak_fp8_tflops = true, interconnect_bw_gbps = true }

local function gpu_case(name, field, value, expect)
  local file = "gpu/" .. name .. ".toml"
  local text = replace_line(gpu, field .. " =", field .. " = " .. value)
  case { kind = "gpu", file = file, text = text, args = PREDICT .. " --gpu {file}", expect = expect,
         line = line_of(text, field .. " =") }
end

for _, f in ipairs(int_fields) do
  gpu_case(f .. "_nan", f, "nan", "key '" .. f .. "' must be an integer (got float)")
  gpu_case(f .. "_inf", f, "inf", "key '" .. f .. "' must be an integer (got float)")
  gpu_case(f .. "_neg", f, "-1", "key '" .. f .. "' must be")
  gpu_case(f .. "_zero", f, "0", "key '" .. f .. "' must be")
  gpu_case(f .. "_frac", f, "1.5", "key '" .. f .. "' must be an integer (got float)")
  gpu_case(f .. "_huge", f, "9223372036854775807", "key '" .. f .. "' must be")
  gpu_case(f .. "_text", f, '"64"', "key '" .. f .. "' must be an integer (got string)")
end
for _, f in ipairs(num_fields) do
  gpu_case(f .. "_nan", f, "nan", "key '" .. f .. "' must be")
  gpu_case(f .. "_inf", f, "inf", "key '" .. f .. "' must be")
  gpu_case(f .. "_neg", f, "-1.0", "key '" .. f .. "' must be")
  if not zero_ok[f] then gpu_case(f .. "_zero", f, "0.0", "key '" .. f .. "' must be") end
  gpu_case(f .. "_tiny", f, "1e-300", "key '" .. f .. "' must be")
  gpu_case(f .. "_huge", f, "1e300", "key '" .. f .. "' must be")
  gpu_case(f .. "_text", f, '"fast"', { "key '" .. f .. "' must be", "(got string)" })
end
-- strings, arrays, structure
gpu_case("vendor_unknown", "vendor", '"intel"', "key 'vendor' must be \"nvidia\" or \"amd\"")
gpu_case("vendor_number", "vendor", '7', "key 'vendor' must be a string (got integer)")
gpu_case("name_empty", "name", '""', "key 'name' must not be empty")
gpu_case("name_table", "name", '{ x = 1 }', "key 'name' must be a string (got table)")
gpu_case("aliases_string", "aliases", '"bad1"', "key 'aliases' must be an array of strings (got string)")
gpu_case("aliases_mixed", "aliases", '["bad1", 2]', "key 'aliases' must be an array of strings")
gpu_case("architecture_bool", "architecture", 'true', "key 'architecture' must be a string (got boolean)")
gpu_case("compute_capability_float", "compute_capability", '8.0', "key 'compute_capability' must be a string (got float)")
gpu_case("interconnect_array", "interconnect", '[]', "key 'interconnect' must be a string (got array)")
gpu_case("num_sm_date", "num_sm", '1979-05-27', "key 'num_sm' must be an integer (got date/time)")
do
  local text = replace_line(gpu, "num_sm =", "num_sms = 10")
  case { kind = "gpu", file = "gpu/typo_key.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = "unknown key 'num_sms' (did you mean 'num_sm'?)", line = line_of(text, "num_sms") }
end
gpu_case("syntax_unclosed_string", "name", '"Bad-1', "")
gpu_case("syntax_no_value", "mem_gb", '', "")
gpu_case("syntax_overflow_int", "num_sm", '99999999999999999999', "")
gpu_case("syntax_overflow_float", "mem_bw_gbps", '1e400', "could not be interpreted as a value")
gpu_case("syntax_leading_zero", "num_sm", '010', "")
do
  local text = gpu .. "num_sm = 12\n"
  case { kind = "gpu", file = "gpu/duplicate_key.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = "num_sm", line = select(2, text:gsub("\n", "")) }
  text = replace_line(gpu, "mem_bw_gbps =", "# mem_bw_gbps removed")
  case { kind = "gpu", file = "gpu/missing_key.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = "missing required key 'mem_bw_gbps'", line = select(2, text:gsub("\n", "")) }
  case { kind = "gpu", file = "gpu/empty.toml", text = "", args = PREDICT .. " --gpu {file}",
         expect = "missing required key 'name'", line = 1 }
  case { kind = "gpu", file = "gpu/only_comment.toml", text = "# nothing here\n", args = PREDICT .. " --gpu {file}",
         expect = "missing required key 'name'", line = 1 }
  case { kind = "gpu", file = "gpu/binary.toml", text = "\0\1\2\255\254garbage\0\n", args = PREDICT .. " --gpu {file}",
         expect = "", line = 1 }
  case { kind = "gpu", file = "gpu/table_header.toml", text = gpu .. "[extra]\nx = 1\n", args = PREDICT .. " --gpu {file}",
         expect = "unknown key 'extra'", line = line_of(gpu .. "[extra]\nx = 1\n", "[extra]") }
  case { kind = "gpu", file = "gpu/utf8_bom_junk.toml", text = "\239\187\191" .. "name = \"x\"\n\226\130\172 = 1\n",
         args = PREDICT .. " --gpu {file}", expect = "", line = 2 }
  case { kind = "gpu", file = "gpu/fifo_input.toml", text = "# the case runs on a FIFO at {tmp}/gpu.fifo\n",
         args = PREDICT .. " --gpu {tmp}/gpu.fifo", fifo = "gpu.fifo", names = "{tmp}/gpu.fifo",
         expect = "not a regular file (a FIFO)" }
end

-------------------------------------------------------------------------------------------------- cluster TOML
local cluster = [[
# a made-up cluster; each case changes one line
name = "bad_cluster"
description = "two nodes of four"
nodes = 2
gpus_per_node = 4

[intra]
bw_gbps = 100.0
latency_us = 2.0
efficiency = 0.8

[inter]
bw_gbps = 10.0
latency_us = 10.0
efficiency = 0.8
]]
write("cluster/good.toml", cluster)
local CLUSTER = "predict --model gpt2_large --gpu h100 --mode train --batch 8 --seq 128 --dp 2 --tp 4 " ..
                "--predictor roofline --format json -o {out} --cluster {file}"
local function cluster_case(name, prefix, new, expect, nth)
  -- replaces the nth line starting with prefix (1: [intra], 2: [inter])
  local out, n, at = {}, 0, nil
  for l in (cluster .. "\n"):gmatch("([^\n]*)\n") do
    if l:sub(1, #prefix) == prefix then
      n = n + 1
      if n == (nth or 1) then l = new; at = #out + 1 end
    end
    out[#out + 1] = l
  end
  assert(at, prefix)
  local text = table.concat(out, "\n", 1, #out - 1) .. "\n"
  case { kind = "cluster", file = "cluster/" .. name .. ".toml", text = text, args = CLUSTER, expect = expect, line = at }
end
for _, f in ipairs { "nodes", "gpus_per_node" } do
  for v, tag in pairs { ["0"] = "zero", ["-3"] = "neg", ["2.5"] = "frac", ["9223372036854775807"] = "huge",
                        ['"4"'] = "text", ["inf"] = "inf" } do
    cluster_case(f .. "_" .. tag, f .. " =", f .. " = " .. v, "key '" .. f .. "' must be")
  end
end
for nth, sect in ipairs { "intra", "inter" } do
  for _, f in ipairs { "bw_gbps", "latency_us", "efficiency" } do
    for v, tag in pairs { nan = "nan", inf = "inf", ["-1.0"] = "neg", ['"x"'] = "text", ["1e300"] = "huge" } do
      cluster_case(sect .. "_" .. f .. "_" .. tag, f .. " =", f .. " = " .. v, "key '" .. sect .. "." .. f .. "' must be", nth)
    end
  end
  cluster_case(sect .. "_bw_zero", "bw_gbps =", "bw_gbps = 0", "key '" .. sect .. ".bw_gbps' must be > 0", nth)
  cluster_case(sect .. "_efficiency_over", "efficiency =", "efficiency = 1.5", "key '" .. sect .. ".efficiency' must be in (0, 1]", nth)
  cluster_case(sect .. "_typo", "latency_us =", "latency = 2.0", "unknown key '" .. sect .. ".latency'", nth)
end
do
  local text = "name = \"c\"\ngpus_per_node = 4\nintra = 5\n"
  case { kind = "cluster", file = "cluster/intra_not_table.toml", text = text, args = CLUSTER,
         expect = "key 'intra' must be a table", line = 3 }
end
cluster_case("name_number", "name =", "name = 5", "key 'name' must be a string")
cluster_case("typo_top", "nodes =", "node = 2", "unknown key 'node' (did you mean 'nodes'?)")
do
  local text = replace_line(cluster, "gpus_per_node =", "# no gpus_per_node")
  case { kind = "cluster", file = "cluster/missing_gpn.toml", text = text, args = CLUSTER,
         expect = "missing required key 'gpus_per_node'", line = select(2, text:gsub("\n", "")) }
end
cluster_case("syntax", "description =", 'description = "unterminated', "")

-------------------------------------------------------------------------------------------------- manifest
local function q(s) return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"') .. '"' end
local out = { "# tests/bad_inputs/cases.toml — written by generate.lua (edit that, then run it); read by",
              "# tests/cli/test_bad_inputs.cpp. One [[case]] per bad input: see generate.lua for the fields.", "" }
for _, c in ipairs(cases) do
  out[#out + 1] = "[[case]]"
  out[#out + 1] = "kind = " .. q(c.kind)
  out[#out + 1] = "file = " .. q(c.file)
  out[#out + 1] = "args = " .. q(c.args)
  local e = {}
  for _, s in ipairs(c.expect) do e[#e + 1] = q(s) end
  out[#out + 1] = "expect = [" .. table.concat(e, ", ") .. "]"
  if c.line then out[#out + 1] = "line = " .. c.line end
  if c.names then out[#out + 1] = "names = " .. q(c.names) end
  if c.fifo then out[#out + 1] = "fifo = " .. q(c.fifo) end
  out[#out + 1] = ""
end
local f = assert(io.open(root .. "/cases.toml", "w"))
f:write(table.concat(out, "\n"))
f:close()
io.write(#cases, " cases\n")
