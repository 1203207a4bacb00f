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
--   names   what the message must name (default: {rel}, the input's path from tests/bad_inputs/, which ends the
--           absolute path the command gives; Lua shortens long chunk names from the left)
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
-- a bandwidth a digit off (tester10 #1): held to the bandwidth per fp32 TFLOP/s real parts have (scripts/neusight/gpu_check.lua)
gpu_case("mem_bw_gbps_digit_added", "mem_bw_gbps", "1000.0", "key 'mem_bw_gbps' = 1000 is 500 GB/s per fp32 TFLOP/s")
gpu_case("mem_bw_gbps_digit_dropped", "mem_bw_gbps", "10.0", "key 'mem_bw_gbps' = 10 is 5 GB/s per fp32 TFLOP/s")
-- memory in MB for GB (audit16: an RTX 5090 file with mem_gb = 32000 forecast 260x slower, no error): held to the GB
-- per SM real parts have (scripts/neusight/gpu_check.lua)
gpu_case("mem_gb_in_mb", "mem_gb", "8000", "key 'mem_gb' = 8000 is 800 GB per SM (num_sm 10)")
gpu_case("mem_gb_digit_dropped", "mem_gb", "0.8", "key 'mem_gb' = 0.8 is 0.08 GB per SM (num_sm 10)")
-- link bandwidths in TB/s for GB/s (audit16: an H100 file with interconnect_bw_gbps = 0.9 forecast a dp 8 run 150x
-- slower, no error): PCIe held to its generation's rate, a GPU link to at least the slot's
gpu_case("pcie_bw_gbps_tbps", "pcie_bw_gbps", "0.032", "key 'pcie_bw_gbps' = 0.032, but PCIe gen 4 carries 32 GB/s")
gpu_case("pcie_bw_gbps_beyond_gen", "pcie_bw_gbps", "64.0", "key 'pcie_bw_gbps' = 64, but PCIe gen 4 carries 32 GB/s")
do
  local text = replace_line(replace_line(gpu, "interconnect =", 'interconnect = "nvlink3"'), "interconnect_bw_gbps =",
    "interconnect_bw_gbps = 0.6")
  case { kind = "gpu", file = "gpu/interconnect_bw_gbps_tbps.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = "key 'interconnect_bw_gbps' = 0.6 is below pcie_bw_gbps (32)",
         line = line_of(text, "interconnect_bw_gbps =") }
end
-- strings, arrays, structure
gpu_case("vendor_unknown", "vendor", '"intel"', "key 'vendor' must be \"nvidia\" or \"amd\"")
gpu_case("vendor_number", "vendor", '7', "key 'vendor' must be a string (got integer)")
gpu_case("name_empty", "name", '""', "key 'name' must not be empty")
gpu_case("name_table", "name", '{ x = 1 }', "key 'name' must be a string (got table)")
-- a string of whitespace only is refused as an empty one is (a note = "  " was printed blank once per run)
gpu_case("name_blank", "name", '"  "', "key 'name' must not be blank (whitespace only)")
do
  local text = gpu .. 'note = " \t "\n'
  case { kind = "gpu", file = "gpu/note_blank.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = "key 'note' must not be blank (whitespace only)", line = line_of(text, "note =") }
end
gpu_case("aliases_string", "aliases", '"bad1"', "key 'aliases' must be an array of strings (got string)")
gpu_case("aliases_mixed", "aliases", '["bad1", 2]', "key 'aliases' must be an array of strings")
gpu_case("architecture_bool", "architecture", 'true', "key 'architecture' must be a string (got boolean)")
gpu_case("compute_capability_float", "compute_capability", '8.0', "key 'compute_capability' must be a string (got float)")
gpu_case("interconnect_array", "interconnect", '[]', "key 'interconnect' must be a string (got array)")
gpu_case("num_sm_date", "num_sm", '1979-05-27', "key 'num_sm' must be an integer (got date/time)")
-- the link and vendor keys, checked together at load (a parallel run used to fail late, naming no file)
gpu_case("interconnect_unknown", "interconnect", '"nvlink9"',
         { "key 'interconnect' must be one of none, nvlink1", "(got \"nvlink9\") (did you mean 'nvlink1'?)" })
gpu_case("interconnect_other_vendor", "interconnect", '"infinity_fabric"', "is an AMD link, but vendor = \"nvidia\"")
gpu_case("interconnect_bw_without_link", "interconnect_bw_gbps", "900.0",
         "key 'interconnect_bw_gbps' must be 0 with interconnect = \"none\" (got 900)")
do
  local text = replace_line(gpu, "interconnect =", 'interconnect = "nvlink4"')
  case { kind = "gpu", file = "gpu/interconnect_link_without_bw.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = "key 'interconnect_bw_gbps' must be > 0 with interconnect = \"nvlink4\"",
         line = line_of(text, "interconnect_bw_gbps =") }
  text = replace_line(gpu, "vendor =", 'vendor = "amd"')
  case { kind = "gpu", file = "gpu/architecture_other_vendor.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = "architecture 'ampere' is an NVIDIA architecture, but vendor = \"amd\"",
         line = line_of(text, "architecture =") }
  -- one the tile rules do not know (scripts/tiling/gemm.lua M.vendors): a typo, named where the file says it
  text = replace_line(gpu, "architecture =", 'architecture = "amprere"')
  case { kind = "gpu", file = "gpu/architecture_unknown.toml", text = text, args = PREDICT .. " --gpu {file}",
         expect = { "architecture 'amprere' is not one the tile rules know", "(did you mean 'ampere'?)" },
         line = line_of(text, "architecture =") }
end
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
  -- search resolves the GPU once, before its layouts: the file's one error, not a reason repeated per layout
  text = replace_line(gpu, "num_sm =", "num_sms = 10")
  case { kind = "gpu", file = "gpu/search_typo_key.toml", text = text,
         args = "search --model gpt2_large --mode inference --batch 2 --seq 8 --gpus 2 --predictor roofline "
           .. "--format json -o {out} --gpu {file}",
         expect = "unknown key 'num_sms' (did you mean 'num_sm'?)", line = line_of(text, "num_sms") }
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

-- the GPU file of a user's own GPU that eval kernels, eval models and train take for measured rows (--gpu FILE): loaded
-- and checked as predict's --gpu FILE; a good file that names no row's device is an error naming it
do
  local EVK_GPU = "eval kernels {root}/../fixtures/bench/bmm_small.csv --format json -o {out} --gpu {file}"
  local text = replace_line(gpu, "num_sm =", "num_sms = 10")
  case { kind = "gpu", file = "gpu/eval_kernels_typo_key.toml", text = text, args = EVK_GPU,
         expect = "unknown key 'num_sms' (did you mean 'num_sm'?)", line = line_of(text, "num_sms") }
  text = replace_line(gpu, "mem_bw_gbps =", "# mem_bw_gbps removed")
  case { kind = "gpu", file = "gpu/train_missing_key.toml", text = text,
         args = "train -q --family bmm --epochs 2 --data {root}/../fixtures/bench/bmm_small.csv --out {out} --gpu {file}",
         expect = "missing required key 'mem_bw_gbps'", line = select(2, text:gsub("\n", "")) }
  text = replace_line(gpu, "mem_bw_gbps =", "mem_bw_gbps = -1.0")
  case { kind = "gpu", file = "gpu/eval_models_negative.toml", text = text,
         args = "eval models {root}/../fixtures/neusight/label/Tesla_T4 --predictor roofline --format json -o {out} --gpu {file}",
         expect = "key 'mem_bw_gbps' must be", line = line_of(text, "mem_bw_gbps =") }
  case { kind = "gpu", file = "gpu/eval_kernels_names_no_row.toml", text = gpu, args = EVK_GPU,
         expect = { "no device of the rows read is GPU 'Bad-1' (aliases 'bad1')",
                    "devices no GPU file names: 'Imaginary GPU 9000'" } }
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
-- `gpu`: the name of the GPU the cluster was built for, or an array of names
for _, vt in ipairs { { "7", "number" }, { '""', "empty" }, { "[]", "empty_array" }, { '["H100", 3]', "mixed" } } do
  cluster_case("gpu_" .. vt[2], "description =", "gpu = " .. vt[1], "key 'gpu' must be the name of the GPU")
end
for _, f in ipairs { "nodes", "gpus_per_node" } do
  -- arrays, not pairs over a keyed table: the corpus regenerates in the same order every time
  for _, vt in ipairs { { "0", "zero" }, { "-3", "neg" }, { "2.5", "frac" }, { "9223372036854775807", "huge" },
                        { '"4"', "text" }, { "inf", "inf" } } do
    local v, tag = vt[1], vt[2]
    cluster_case(f .. "_" .. tag, f .. " =", f .. " = " .. v, "key '" .. f .. "' must be")
  end
end
for nth, sect in ipairs { "intra", "inter" } do
  for _, f in ipairs { "bw_gbps", "latency_us", "efficiency" } do
    for _, vt in ipairs { { "nan", "nan" }, { "inf", "inf" }, { "-1.0", "neg" }, { '"x"', "text" }, { "1e300", "huge" } } do
      local v, tag = vt[1], vt[2]
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

-------------------------------------------------------------------------------------------------- Lua workloads
local RUN = "run {file} --format json -o {out}"
-- A workload whose model function returns `nodes`; `pre` runs first. The nodes are on line #pre + 4.
local function workload(nodes, pre)
  pre = pre or ""
  return pre .. "return {\n  gpu = \"h100\", mode = \"inference\", batch = 4, seq = 128,\n  model = function(opts)\n" ..
         "    return " .. nodes .. "\n  end,\n}\n"
end
local function lines(s) return select(2, s:gsub("\n", "")) end
local function wl(name, nodes, pre, expect, line, extra)
  local text = workload(nodes, pre)
  case { kind = "workload", file = "workload/" .. name .. ".lua", text = text, args = RUN .. (extra or ""),
         expect = expect, line = line == "nodes" and lines(pre or "") + 4 or line }
end
local function node(inputs, output, extra)
  return '{ { op = "linear", name = "fc", inputs = { ' .. inputs .. ' }, output = ' .. output .. (extra or "") .. ' } }'
end
local fc = node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", params = 4096")
local boom = "setmetatable({}, { __index = function() error('boom') end, __len = function() error('len') end })"

-- shapes and nodes
wl("dim_zero", node("{ 4, 0, 64 }", "{ 4, 0, 64 }"), nil, "x {4,0,64} has a dimension < 1", "nodes")
-- node attrs are held to the attrs the op's rule declares (tester5: a misspelled or mistyped one was ignored)
wl("attrs_unknown", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", params = 4096, attrs = { bais = false }"), nil,
   "unknown attribute attrs.bais (did you mean 'bias'?)", "nodes")
wl("attrs_wrong_type", '{ { op = "sdpa", name = "attn", inputs = { { 1, 2, 8, 4 }, { 1, 2, 8, 4 }, { 1, 2, 8, 4 } }, ' ..
   'output = { 1, 2, 8, 4 }, attrs = { causal = "false" } } }', nil, 'attrs.causal must be a boolean (got string "false")',
   "nodes")
-- attrs.input_dtypes one engine dtype per input, by position: an empty entry shifted the positions after it
wl("attrs_input_dtypes_empty_entry", '{ { op = "add", name = "res", inputs = { { 4, 128, 64 }, { 4, 128, 64 }, ' ..
   '{ 4, 128, 64 } }, output = { 4, 128, 64 }, attrs = { input_dtypes = "bf16,,fp32" } } }', nil,
   "node 1 'res' (op 'add'): attrs.input_dtypes 'bf16,,fp32': entry #2 is empty", "nodes")
wl("dim_negative", node("{ 4, -128, 64 }", "{ 4, -128, 64 }"), nil, "dimension 2 is -128, expected a non-negative integer", "nodes")
wl("dim_fraction", node("{ 4, 1.5, 64 }", "{ 4, 1.5, 64 }"), nil, "dimension 2 is 1.5, expected a non-negative integer", "nodes")
wl("dim_nan", node("{ 4, 0/0, 64 }", "{ 4, 0/0, 64 }"), nil, "dimension 2 is", "nodes")
wl("dim_huge_float", node("{ 4, 2^62, 64 }", "{ 4, 2^62, 64 }"), nil, "must be a shape of at most 2^48 elements", "nodes")
wl("dim_huge_int", node("{ 4, 1 << 62, 64 }", "{ 4, 1 << 62, 64 }"), nil, "must be a shape of at most 2^48 elements", "nodes")
wl("dim_string", node('{ 4, "128", 64 }', "{ 4, 128, 64 }"), nil, "expected a non-negative integer", "nodes")
wl("shape_mismatch", node("{ 4, 128, 64 }", "{ 7, 3, 99 }", ", params = 6336"), nil,
   "x {4,128,64} has 512 rows of 64 features but the output {7,3,99} has 21 rows of 99", "nodes")
wl("params_negative", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", params = -5"), nil, "field 'params' must be >= 0", "nodes")
wl("params_nan", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", params = 0/0"), nil, "field 'params' must be a finite number", "nodes")
wl("params_inf", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", params = math.huge"), nil, "field 'params' must be a finite number", "nodes")
-- found by tests/fuzz/mutate.py: the graph's own scripts read a function model's nodes before the engine checks them
-- ("scripts/neusight/memory.lua:44: attempt to mul a 'number' with a 'string'")
wl("dim_string_output", node("{ 4, 128, 64 }", '{ 4, "128", 64 }'), nil,
   "node #1 'fc': field 'output' must be a shape: dimension 2 is", "nodes")
wl("shape_string_output", node("{ 4, 128, 64 }", '"4x128x64"'), nil,
   "node #1 'fc': field 'output' must be a shape (array of non-negative integers; got \"4x128x64\")", "nodes")
wl("count_string", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ', params = 4096, count = "2"'), nil,
   "node #1 'fc': field 'count' must be an integer >= 1", "nodes")
-- tester9: `layer = 1` (a layer number) for --pp; the message says what the field is
wl("layer_number", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", params = 4096, layer = 1"), nil,
   "node #1 'fc': field 'layer' must be a string naming the repeated block (e.g. layer = \"h\", with count = its number of layers)", "nodes")
wl("attrs_number", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", attrs = 5"), nil, "node #1 'fc': field 'attrs' must be a table", "nodes")
wl("inputs_not_array", '{ { op = "linear", name = "fc", inputs = { x = { 4, 128, 64 } }, output = { 4, 128, 64 } } }', nil,
   "field 'inputs' must be an array of shapes (it has a key outside 1..0)")
wl("shape_extra_key", '{ { op = "linear", name = "fc", inputs = { { 4, 128, 64, n = 3 } }, output = { 4, 128, 64 } } }', nil,
   "field 'inputs' #1 must be a shape (array of non-negative integers; it has key", "nodes")
-- a built-in rule's argument error named neither the workload nor its model
wl("layernorm_dim_zero", '{ { op = "layernorm", name = "ln", inputs = { { 4, 0, 64 } }, output = { 4, 0, 64 }, params = 128 } }',
   nil, { "bad argument #1 to 'layernorm' (positive integer expected, got 0)", "workload/layernorm_dim_zero.lua: model 'custom'" })
wl("node_no_op", '{ { name = "fc", inputs = { { 4, 128, 64 } }, output = { 4, 128, 64 } } }', nil,
   "node #1 needs string fields 'op' and 'name'")
wl("node_op_number", '{ { op = 5, name = "fc", inputs = { { 4, 128, 64 } }, output = { 4, 128, 64 } } }', nil,
   "node #1 needs string fields 'op' and 'name'")
wl("node_no_output", '{ { op = "linear", name = "fc", inputs = { { 4, 128, 64 } } } }', nil,
   "node #1 'fc': field 'output' must be a shape", "nodes")
wl("node_string", '{ "linear" }', nil, "node #1 needs string fields 'op' and 'name'")
wl("node_unknown_field", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", parms = 4096"), nil, "unknown field 'parms' (did you mean 'params'?)", "nodes")
-- issue 15: a required field under another name said only that the field was missing; nodes of one name were taken
-- (the report's rows and attrs.tied could not tell them apart); an sdpa output of another size was priced
wl("node_required_misspelt", '{ { op = "linear", name = "fc", inputs = { { 4, 128, 64 } }, outptu = { 4, 128, 64 } } }', nil,
   "node #1 'fc': unknown field 'outptu' (did you mean 'output'?)", "nodes")
wl("node_name_twice", '{ { op = "gelu", name = "g", inputs = { { 4, 8 } }, output = { 4, 8 } },\n' ..
   '      { op = "gelu", name = "g", inputs = { { 4, 8 } }, output = { 4, 8 } } }', nil,
   "node #2 'g': node #1 has that name too", 5)
wl("sdpa_output_mismatch", '{ { op = "sdpa", name = "attn", inputs = { { 4, 8, 128, 64 }, { 4, 8, 128, 64 }, ' ..
   '{ 4, 8, 128, 64 } }, output = { 4, 8, 131, 64 } } }', nil,
   "the output {4,8,131,64} is not {4,8,128,64} (Q's batch, heads and length, V's head_dim) (ops/sdpa.lua check())", "nodes")
wl("sdpa_heads_not_grouped", '{ { op = "sdpa", name = "attn", inputs = { { 4, 3, 128, 64 }, { 4, 5, 128, 64 }, ' ..
   '{ 4, 5, 128, 64 } }, output = { 4, 3, 128, 64 } } }', nil,
   "Q's 3 heads are not a multiple of K and V's 5 (grouped-query attention)", "nodes")
wl("op_misspelt", '{ { op = "linaer", name = "fc", inputs = { { 4, 128, 64 } }, output = { 4, 128, 64 } } }', nil,
   "unknown op 'linaer' (did you mean 'linear'?)", "nodes")
wl("nodes_number", "42", nil, "model function must return an array of nodes (got 42)")
wl("nodes_nil", "nil", nil, "model function must return an array of nodes (got nil)")
wl("nodes_empty", "{}", nil, "model 'custom' has no nodes: an empty graph would forecast 0 ms")
-- metamethods (issue 15: each of these used to abort the process)
wl("meta_node_list", boom, nil, "", "nodes")
wl("meta_shape", "{ { op = 'linear', name = 'n1', inputs = { " .. boom .. " }, output = { 4, 8 } } }", nil,
   "node #1 'n1': field 'inputs'[1] must be a shape")
-- an __index answering every key kept the memory model's ipairs going until the time limit (review)
wl("meta_shape_endless", "{ { op = 'add', name = 'n1', inputs = { setmetatable({}, { __index = function() return 4 end }) }, "
   .. "output = { 4, 8 } } }", nil, "node #1 'n1': field 'inputs'[1] must be a shape")
wl("meta_attrs", "{ { op = 'add', name = 'n1', inputs = { { 4, 8 } }, output = { 4, 8 }, attrs = " .. boom .. " } }", nil,
   "node #1 'n1': attrs: expected a plain table (it has a metatable)", "nodes")
wl("meta_len_fraction", "{ { op = 'add', name = 'n1', inputs = { { 4, 8 } }, output = setmetatable({ 4, 8 }, { __len = function() return 1.5 end }) } }",
   nil, "node #1 'n1': field 'output' must be a shape")
wl("meta_quiet_shape", "{ { op = 'add', name = 'n1', inputs = { setmetatable({ 4, 8 }, { __index = function() return nil end }) }, output = { 4, 8 } } }",
   nil, "field 'inputs'[1] must be a shape")
wl("meta_node", "{ setmetatable({}, { __index = function(_, k) error('no ' .. k) end }) }", nil, "", nil)
-- errors and runaway scripts
wl("error_in_model", "{ error('model failed') }", nil, "model failed", "nodes")
wl("error_nil", "{ error() }", nil, "error object is a nil value")
wl("error_table", "{ error({}) }", nil, "error object is a table value")
wl("error_tostring_raises", fc, "error(setmetatable({}, { __tostring = function() error('inner') end }))\n", "inner", 1)
wl("error_tostring_loops", fc, "error(setmetatable({}, { __tostring = function() while true do end end }))\n",
   "script ran longer than", 1, " --script-budget 20000000")
wl("error_huge_message", fc, "error(('x'):rep(1e6))\n", "more bytes]", 1)
wl("loop_default_limits", "(function() while true do end end)()", nil, "script ran longer than 1000000000 instructions", "nodes")
wl("loop_top_level", fc, "local n = 0\nwhile true do n = n + 1 end\n", "script ran longer than 20000000 instructions", 2,
   " --script-budget 20000000")
wl("loop_pcall", fc, "while true do pcall(function() while true do end end) end\n", "script ran longer than 20000000 instructions", 1,
   " --script-budget 20000000")
wl("loop_budget_env_style", fc, "for i = 1, math.maxinteger do end\n", "script ran longer than 20000000 instructions", 1,
   " --script-budget 20000000")
wl("recursion", fc, "local function f(n) return f(n + 1) + 1 end\nf(1)\n", "stack overflow", 1)
wl("pattern_backtracking", fc, "local s = ('a'):rep(300000)\nlocal x = s:find('.-.-.-.-b')\n",
   "script ran longer than 1 s of CPU time", nil, " --script-timeout 1")
wl("memory_bomb_table", fc, "local t = {}\nfor i = 1, 1e12 do t[i] = i end\n", "script used more than 64 MB of memory", 2,
   " --script-memory 64")
wl("memory_bomb_concat", fc, "local s = 'x'\nfor i = 1, 64 do s = s .. s end\n", "script used more than 64 MB of memory", 2,
   " --script-memory 64")
wl("memory_bomb_rep", fc, "local s = ('x'):rep(1e9)\n", "script used more than 64 MB of memory", 1, " --script-memory 64")
wl("memory_bomb_rep_huge", fc, "local s = ('x'):rep(2^40)\n", "resulting string too large", 1)
wl("memory_bomb_strings", fc, "local t = {}\nwhile true do t[#t + 1] = ('x'):rep(1e6) end\n", "script used more than 64 MB of memory", 2,
   " --script-memory 64")
-- the sandbox
wl("require_absolute_tmp", fc, "local m = require('.tmp.x')\n", "module '.tmp.x' not found: invalid module name", 1)
wl("require_dotdot", fc, "local m = require('..etc.passwd')\n", "module '..etc.passwd' not found: invalid module name", 1)
wl("require_slash", fc, "local m = require('a/b')\n", "module 'a/b' not found: invalid module name", 1)
wl("require_trailing_dot", fc, "local m = require('neusight.')\n", "module 'neusight.' not found: invalid module name", 1)
wl("require_missing", fc, "local m = require('no_such_module_here')\n", "module 'no_such_module_here' not found", 1)
wl("global_io", fc, "local f = io.open('/etc/passwd')\n", "undefined global 'io'", 1)
wl("global_os", fc, "os.execute('true')\n", "undefined global 'os'", 1)
wl("global_load", fc, "load('\\27Lua')()\n", "undefined global 'load'", 1)
wl("global_dofile", fc, "dofile('/etc/passwd')\n", "undefined global 'dofile'", 1)
wl("global_debug", fc, "debug.sethook()\n", "undefined global 'debug'", 1)
wl("global_coroutine", fc, "local co = coroutine.wrap(function() while true do end end)\nco()\n", "undefined global 'coroutine'", 1)
wl("string_dump", fc, "local d = string.dump(print)\n", "attempt to call a nil value (field 'dump')", 1)
wl("string_metatable", fc, "getmetatable('').__index = {}\n", "attempt to index a string value", 1)
wl("gc_metamethod", fc, "setmetatable({}, { __gc = function() while true do end end })\n", "__gc metamethods are not available to scripts", 1)
wl("env_metatable", fc, "setmetatable(_ENV, nil)\n", "", 1)
wl("neusight_write", fc, "require('neusight').ceil_div = nil\n", "module 'neusight' is read-only (assignment to 'ceil_div')", 1)
wl("kernels_write", fc, "require('neusight.kernels').linear = nil\n", "is read-only (assignment to 'linear')", 1)
-- workload fields
-- the message names the field's line (workload() sets them all on line 2); line false: the file alone
local function wf(name, from, to, expect, line)
  local text = workload(fc):gsub(from, to, 1)
  if line == nil then line = 2 end
  case { kind = "workload", file = "workload/" .. name .. ".lua", text = text, args = RUN, expect = expect, line = line or nil }
end
wf("batch_zero", "batch = 4", "batch = 0", "field 'batch' must be a positive integer (got 0)")
wf("batch_negative", "batch = 4", "batch = -4", "field 'batch' must be a positive integer (got -4)")
wf("batch_fraction", "batch = 4", "batch = 4.5", "field 'batch' must be a positive integer (got 4.5)")
wf("batch_huge", "batch = 4", "batch = 2^62", "field 'batch' must be at most 16777216")
wf("batch_string", "batch = 4", "batch = \"four\"", "field 'batch' must be a positive integer (got \"four\")")
wf("seq_nan", "seq = 128", "seq = 0/0", "field 'seq' must be a positive integer")
wf("seq_inf", "seq = 128", "seq = math.huge", "field 'seq' must be a positive integer (got inf)")
wf("seq_huge", "seq = 128", "seq = 1 << 40", "field 'seq' must be at most 16777216")
wf("mode_typo", "\"inference\"", "\"infer\"", "field 'mode' must be \"train\", \"inference\", \"prefill\" or \"decode\" (got \"infer\") (did you mean 'inference'?)")
wf("field_typo", "batch = 4", "bacth = 4", "unknown field 'bacth' (did you mean 'batch'?)")
wf("dtype_unknown", "batch = 4,", "batch = 4, dtype = \"fp7\",", "field 'dtype' must be a dtype name")
wf("gpu_number", "\"h100\"", "100", "field 'gpu' must be a GPU name string (got 100)")
wf("gpu_unknown", "\"h100\"", "\"h1000\"", "unknown GPU 'h1000'")
wf("optimizer_unknown", "batch = 4,", "batch = 4, optimizer = \"adamx\",", "field 'optimizer' must be \"none\" or an optimizer: \"sgd\", \"adam\", \"adamw\" or an op rule of yours")
-- LoRA (scripts/neusight/lora.lua): its fields' errors name their line
local function lora(fields) return 'return { gpu = "h100", mode = "train", batch = 1, seq = 128, model = "llama32_1b",\n  ' .. fields .. ' }\n' end
case { kind = "workload", file = "workload/lora_rank_zero.lua", text = lora("lora_rank = 0"), args = RUN,
       expect = "field 'lora_rank' must be a positive integer, the adapters' rank (got 0)", line = 2 }
case { kind = "workload", file = "workload/lora_rank_fraction.lua", text = lora("lora_rank = 8.5"), args = RUN,
       expect = "field 'lora_rank' must be a positive integer, the adapters' rank (got 8.5)", line = 2 }
case { kind = "workload", file = "workload/lora_inference.lua", text = lora("lora_rank = 8, mode = \"inference\""):gsub('mode = "train", ', ''),
       args = RUN, expect = "field 'lora_rank' (LoRA fine-tuning) applies to mode \"train\" only", line = 2 }
case { kind = "workload", file = "workload/lora_target_unknown.lua", text = lora("lora_rank = 8, lora_targets = \"q,qkv\""),
       args = RUN, expect = "lora_targets: \"qkv\" matches no linear of model 'llama32_1b'; its linear modules: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj", line = 2 }
case { kind = "workload", file = "workload/lora_targets_empty.lua", text = lora("lora_rank = 8, lora_targets = \"q,,v\""),
       args = RUN, expect = "field 'lora_targets' must name linear modules", line = 2 }
local function wt(name, text, expect, line)
  case { kind = "workload", file = "workload/" .. name .. ".lua", text = text, args = RUN, expect = expect, line = line }
end
local function preset(fields) return 'return { gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large", ' .. fields .. ' }\n' end
local function gpt(fields) return 'return { gpu = "h100", mode = "inference", batch = 4, seq = 128, model = { name = "m", arch = "gpt", ' .. fields .. ' } }\n' end
local gpt_ok = 'n_layer = 2, n_embd = 1024, n_head = 16, vocab_size = 50257, n_positions = 1024'
wt("returns_number", "return 42\n", "a workload script must return a table (got number)")
wt("returns_nil", "return nil\n", "a workload script must return a table (got nil)")
wt("empty", "", "a workload script must return a table (got nil)")
wt("syntax_error", "return {\n", "unexpected symbol near <eof>", 2)
wt("binary", "\255\254\0garbage", "unexpected symbol", 1)
wt("model_preset_typo", 'return { gpu = "h100", mode = "inference", batch = 4, seq = 128, model = "gpt2_larg" }\n',
   "unknown model preset \"gpt2_larg\" (did you mean 'gpt2_large'?)")
wt("config_vocab_huge", gpt(gpt_ok:gsub("50257", "2^62")), "must be a shape of at most 2^48 elements")
wt("config_layers_zero", gpt(gpt_ok:gsub("n_layer = 2", "n_layer = 0")), "field 'n_layer' must be a positive integer (got 0)")
wt("config_heads_indivisible", gpt(gpt_ok:gsub("1024, n_head", "1000, n_head")), "n_embd (1000) must be divisible by n_head (16)", 1)
wt("config_typo", gpt(gpt_ok .. ", n_iner = 8192"), "unknown field 'n_iner' (did you mean 'n_inner'?)")
wt("config_arch_unknown", gpt(gpt_ok):gsub('"gpt"', '"gtp"'), "gtp")
wt("parallel_bucket_tiny", preset("parallel = { dp = 2, bucket_mb = 1e-6 }"), "parallel.bucket_mb: at least 1 (MB) expected")
wt("parallel_bucket_negative", preset("parallel = { dp = 2, bucket_mb = -1 }"), "parallel.bucket_mb: positive number expected")
wt("parallel_tp_zero", preset("parallel = { dp = 2, tp = 0 }"), "parallel.tp: positive integer expected, got 0")
wt("parallel_dp_huge", preset("parallel = { dp = 2^40 }"), "parallel.dp: at most 2^24 expected")
wt("parallel_dp_fraction", preset("parallel = { dp = 1.5 }"), "parallel.dp: positive integer expected, got 1.5")
wt("parallel_microbatches_zero", preset("parallel = { pp = 4, microbatches = 0 }"), "parallel.microbatches: positive integer expected, got 0")
wt("parallel_schedule_unknown", preset("parallel = { pp = 4, schedule = \"zigzag\" }"), "parallel.schedule: one of")
wt("parallel_typo", preset("parallel = { dp = 2, tpp = 2 }"), "parallel: unknown field 'tpp'")
-- parallel.zero (the ZeRO stage; neusight/parallel/config.lua): out of range, a name, misspelt, contradicting its other
-- name, and a combination not modelled (the line of the `parallel` table, as every parallel.normalize error names)
wt("parallel_zero_range", preset("parallel = { dp = 2, zero = 4 }"), "parallel.zero: 0, 1, 2 or 3 expected")
wt("parallel_zero_name", preset("parallel = { dp = 2, zero = \"full\" }"),
   "parallel.zero: 0, 1, 2 or 3 expected (the ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters), got \"full\"")
wt("parallel_zero_typo", preset("parallel = { dp = 2, zer0 = 3 }"), "parallel: unknown field 'zer0' (did you mean 'zero'?)")
wt("parallel_zero_disagree_lines", 'return {\n  gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large",\n' ..
   '  parallel = {\n    dp = 2,\n    zero = 0,\n    distributed_optimizer = true,\n  },\n}\n',
   "parallel.zero: zero = 0 and distributed_optimizer = true disagree", 3)
wt("parallel_zero3_pp_lines", 'return {\n  gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large",\n' ..
   '  parallel = {\n    dp = 2,\n    pp = 2,\n    zero = 3,\n  },\n}\n',
   "parallel.zero: ZeRO stage 3 shards the gradients and parameters over dp, which is not run with pipeline parallelism (pp = 2)", 3)
wt("parallel_not_table", preset("parallel = 4"), "parallel")
wt("parallel_cluster_unknown", preset("parallel = { dp = 2, cluster = \"nowhere\" }"), "unknown cluster 'nowhere'")
wt("experts_typo", 'return { gpu = "h100", mode = "inference", batch = 4, seq = 128, model = "mixtral_8x7b", experts = "groupd" }\n',
   "(did you mean 'grouped'?)")
wt("experts_dense_model_number", preset("experts = 3"), "experts")
wt("figures_not_function", preset('figures = "tokens"'), "field 'figures' must be a function(f) returning { name = value, … }")
wt("figures_returns_number", preset("figures = function() return 3 end"),
   "field 'figures' must return a table of name = value (got number)")
wt("figures_name_taken", preset("figures = function() return { mfu = 1 } end"),
   "field 'figures' returned 'mfu', a figure or column the report has already")
wt("figures_value_inf", preset("figures = function() return { x = math.huge } end"),
   "a figure is a finite number, a string or a boolean")
wt("figures_errors", preset("figures = function(f) return f.nope.x end"), "attempt to index", 1)
wt("config_name_table", 'return { gpu = "h100", mode = "inference", batch = 4, seq = 128, model = { name = { 1 }, arch = "gpt", ' ..
   gpt_ok .. ' } }\n', "field 'model' table field 'name' must be a non-empty string (got")
-- a model config written in place, one field a line: a builder's error about one of its fields names that line
-- (workload.lua model_field_line; it named the workload alone), and so does an arch naming no builder (it ended in
-- require's "module 'neusight.models.gtp' not found" at a line of workload.lua)
local function gpt_lines(change)
  local f = { 'name = "m", arch = "gpt",', "n_layer = 2,", "n_embd = 1024,", "n_head = 16,", "vocab_size = 50257,",
              "n_positions = 1024," }
  for i, l in ipairs(f) do f[i] = "    " .. (change[i] or l) .. "\n" end
  return 'return {\n  model = {\n' .. table.concat(f) .. '  },\n  gpu = "h100", mode = "inference", batch = 4, seq = 128,\n}\n'
end
wt("config_lines_layers_zero", gpt_lines { [2] = "n_layer = 0," }, "field 'n_layer' must be a positive integer (got 0)", 4)
wt("config_lines_heads_zero", gpt_lines { [4] = "n_head = 0," }, "field 'n_head' must be a positive integer (got 0)", 6)
wt("config_lines_typo", gpt_lines { [6] = "n_positons = 1024," }, "unknown field 'n_positons' (did you mean 'n_positions'?)", 8)
wt("config_lines_arch_unknown", gpt_lines { [1] = 'name = "m", arch = "gtp",' },
   { "table field 'arch' = \"gtp\" names no model builder (no neusight/models/gtp.lua on the script search path) (did you mean 'gpt'?)",
     "bundled builders: bert, deepseek, gpt, llama, moe, opt, switch" }, 3)
wt("config_lines_arch_not_builder", gpt_lines { [1] = 'name = "m", arch = "check",' },
   "table field 'arch' = \"check\": neusight/models/check.lua on the script search path is not a model builder", 3)
-- fields no kernel reads that still describe the model were taken whatever their value (0 positions, a RoPE base of 0)
local function llama_lines(extra)
  return 'return {\n  model = {\n    arch = "llama", hidden_size = 256, intermediate_size = 512, num_attention_heads = 4,\n' ..
         '    num_hidden_layers = 2, vocab_size = 1000,\n    ' .. extra .. '\n  },\n' ..
         '  gpu = "h100", mode = "inference", batch = 1, seq = 8,\n}\n'
end
wt("config_max_positions_zero", llama_lines "max_position_embeddings = 0,",
   "field 'max_position_embeddings' must be a positive integer (got 0)", 5)
wt("config_max_positions_huge", llama_lines "max_position_embeddings = 2^62,",
   "field 'max_position_embeddings' must be a positive integer of at most 2^31 (got 4.6116860184274e+18)", 5)
-- a table's parameters overflowed: n_positions = 2^62 made wpe's 2^62 x n_embd wrap to 0 parameters, and a layer count
-- of math.maxinteger forecast 4.5e18 ms, both with exit 0 (found by tests/fuzz/mutate.py, seed 4303)
wt("config_positions_wrap", gpt(gpt_ok:gsub("n_positions = 1024", "n_positions = 2^62")),
   "field 'n_positions' makes a table of 4611686018427387904 x 1024, more than 2^48 elements", 1)
wt("config_layers_maxinteger", 'return { gpu = "h100", mode = "inference", batch = 4, seq = 128, model = { name = "m", ' ..
   'arch = "gpt", ' .. gpt_ok:gsub("n_layer = 2", "n_layer = math.maxinteger") .. ' } }\n',
   "parameters, more than 2^48 (2.8e14; the largest models have about 1e12): a size or count of its config is out of range")
wl("count_huge", node("{ 4, 128, 64 }", "{ 4, 128, 64 }", ", count = 2^40"), nil,
   "node #1 'fc': field 'count' must be at most 2^24 (16777216 repetitions; got 1099511627776.0)")
wt("config_rope_theta_zero", llama_lines "rope_theta = 0,", "field 'rope_theta' must be a positive number (the RoPE base) (got 0)", 5)
wt("config_rms_norm_eps_negative", llama_lines "rms_norm_eps = -1e-6,", "field 'rms_norm_eps' must be a number in [0, 1) (got -1e-06)", 5)
-- an inline cluster's links get a cluster TOML's ranges (2^62 us was accepted: a forecast of 10^11 years)
wt("parallel_cluster_latency_huge", preset("parallel = { dp = 2, cluster = { gpus_per_node = 2, nodes = 1, " ..
   "inter = { latency_us = 2^62 } } }"), "inter.latency_us: at most 1e6 (microseconds per message) expected")
wt("parallel_cluster_bw_huge", preset("parallel = { dp = 2, cluster = { gpus_per_node = 2, nodes = 1, " ..
   "intra = { bw_gbps = 1e300 } } }"), "intra.bw_gbps: at most 1e6 (GB/s per direction) expected")
-- counts without a bound (found by tests/fuzz/mutate.py): tp = 2^40 ran out the script budget, pp = 2^40 the memory
wt("parallel_tp_huge", preset("parallel = { tp = 2^40 }"), "parallel.tp: at most 2^24 expected")
wt("parallel_virtual_stages_huge", preset("parallel = { pp = 2, microbatches = 2, schedule = 'interleaved', virtual_stages = 1e308 }"),
   "parallel.virtual_stages: at most 2^24 expected")
wt("parallel_gpus_huge", preset("parallel = { dp = 1024, tp = 1024, pp = 2 }"),
   "dp × tp × pp = 2097152 GPUs, more than the 2^20 (1048576) a layout may have")
-- an inline cluster's counts get a cluster TOML's range (found by tests/fuzz/mutate.py, seed 4101: gpus_per_node =
-- 1e308 failed in the parallel report, naming no workload)
wt("parallel_cluster_gpus_per_node_huge", preset("parallel = { dp = 2, cluster = { gpus_per_node = 1e308, nodes = 1 } }"),
   "cluster.gpus_per_node: at most 1048576 expected, got 1e+308")
-- … and the plan's errors about the parallel table written in place name the line of the field (it named the file in
-- the context line only)
wt("parallel_cluster_lines", 'return {\n  gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large",\n' ..
   '  parallel = {\n    dp = 2,\n    cluster = {\n      gpus_per_node = 2,\n      nodes = 2^40,\n    },\n  },\n}\n',
   "parallel.cluster.nodes: at most 1048576 expected", 7)
wt("parallel_ep_lines", 'return {\n  gpu = "h100", mode = "train", batch = 8, seq = 128, model = "gpt2_large",\n' ..
   '  parallel = {\n    dp = 2,\n    ep = 2,\n  },\n}\n',
   "parallel.ep: the gpt model builder (scripts/neusight/models/gpt.lua) has no experts to spread; use ep = 1", 5)
-- a top-level field a builder cannot run names its line too (it named the file in the context line only)
wt("attention_sdpa_lines", 'return {\n  model = "switchxl4", gpu = "h100", mode = "inference",\n  batch = 1, seq = 8,\n' ..
   '  attention = "sdpa",\n}\n', "field 'attention': the switch model builder (scripts/neusight/models/switch.lua) has " ..
   "no sdpa attention; use attention = \"eager\"", 4)
wt("parallel_cluster_nodes_huge", preset("parallel = { dp = 2, cluster = { gpus_per_node = 2, nodes = 2^40 } }"),
   "cluster.nodes: at most 1048576 expected")
-- a config's boolean given as a table was truthy, taken as true (found by tests/fuzz/mutate.py, seed 4101)
wt("config_bool_table", 'return { gpu = "h100", mode = "inference", batch = 1, seq = 8, model = { arch = "opt", ' ..
   'num_hidden_layers = 2, hidden_size = 256, num_attention_heads = 4, ffn_dim = 1024, vocab_size = 1000, ' ..
   'max_position_embeddings = 512, do_layer_norm_before = { true } } }\n',
   "field 'do_layer_norm_before' must be a boolean (got a table)", 1)
-- relative_attention_num_buckets = 0 ended in ops/embedding.lua's argument error, naming neither field nor file
wt("config_buckets_zero", 'return { gpu = "h100", mode = "inference", batch = 1, seq = 8, model = { arch = "switch", ' ..
   'num_layers = 2, num_decoder_layers = 2, d_model = 64, d_ff = 128, d_kv = 16, num_heads = 4, num_experts = 2, ' ..
   'expert_capacity = 8, encoder_sparse_step = 2, decoder_sparse_step = 2, vocab_size = 100, ' ..
   'relative_attention_num_buckets = 0 } }\n', "field 'relative_attention_num_buckets' must be a positive integer (got 0)", 1)
-- more pipeline stages than layers: the timeline's error named no file (found by tests/fuzz/mutate.py)
wt("parallel_pp_over_layers", 'return { gpu = "h100", mode = "train", batch = 8, seq = 128, optimizer = "sgd", model = { name = "m", ' ..
   'arch = "gpt", ' .. gpt_ok .. ' }, parallel = { pp = 4, microbatches = 4 } }\n',
   "parallel: 4 pipeline stage(s) (pp × virtual_stages) but the model has only 2 layer(s)", 1)
-- a builder's error about several of its fields at once named no line (issue 15): the line that sets the first
wt("parallel_tp_heads_indivisible", 'return { gpu = "h100", mode = "train", batch = 8, seq = 128, optimizer = "sgd", model = { ' ..
   'name = "m", arch = "gpt", ' .. gpt_ok .. ' },\n  parallel = { tp = 3 } }\n', "n_head = 16 is not divisible by tp = 3", 1)
wt("parallel_cluster_bad_file", preset("parallel = { dp = 2, cluster = \"tests/bad_inputs/cluster/inter_bw_gbps_inf.toml\" }"),
   "inter_bw_gbps_inf.toml:")

-------------------------------------------------------------------------------------------------- op rules
-- Each case is a folder holding one rule mine.lua, given with --ops to a workload with one node of op "mine"
-- (oprule/run.lua, or oprule/run_train.lua for training).
local run_rule = 'return {\n  gpu = "h100", mode = "inference", batch = 4, seq = 128,\n  model = function(opts)\n' ..
                 '    return { { op = "mine", name = "n1", inputs = { { 4, 128, 64 } }, output = { 4, 128, 64 } } }\n  end,\n}\n'
write("oprule/run.lua", run_rule)
write("oprule/run_train.lua", (run_rule:gsub("inference", "train")))
local RULE = "run {root}/oprule/run.lua --ops {dir} --format json -o {out}"
local RULE_TRAIN = "run {root}/oprule/run_train.lua --ops {dir} --format json -o {out}"
local mem = '    return { { kind = "memory", name = "MEM", flops = 0, bytes = 1e6 } }'
-- a rule whose forward runs `body` (lines 4…)
local function rule_text(body)
  return 'return {\n  name = "mine", doc = "d", backward = false,\n  forward = function(node, gpu)\n' .. body .. '\n  end,\n}\n'
end
local function rc(name, text, expect, line, args)
  case { kind = "oprule", file = "oprule/" .. name .. "/mine.lua", text = text, args = args or RULE, expect = expect, line = line }
end
local function rf(name, body, expect, line, extra) rc(name, rule_text(body), expect, line, RULE .. (extra or "")) end
local function kern(fields) return '    return { { kind = "memory", name = "MEM", ' .. fields .. ' } }' end
rf("forward_single_kernel", '    return { kind = "memory", name = "MEM", flops = 0, bytes = 1e6 }', "forward() returned a single kernel", 3)
rf("forward_nil", "    return nil", "forward() returned nil, expected an array of kernels", 3)
rf("forward_number", "    return 5", "forward() returned number, expected an array of kernels", 3)
rf("forward_string", "    return 'kernels'", "expected an array of kernels")
rf("forward_error", "    error('rule failed')", "rule failed", 4)
rf("forward_error_nil", "    error()", "error object is a nil value")
rf("forward_error_table", "    error({ code = 1 })", "error object is a table value")
rf("kernel_bytes_negative", kern("flops = 0, bytes = -1"), "flops and bytes must be >= 0", 3)
-- saves()/temporary() returning no number of bytes (tester5: a negative saves() gave -254 GB that "fits", a string
-- failed in scripts/neusight/memory.lua): an error at the hook's line
local function hook_rule(hook, ret)
  return 'return {\n  name = "mine", doc = "d", backward = false,\n  forward = function(node, gpu)\n' .. mem ..
         '\n  end,\n  ' .. hook .. ' = function(node) return ' .. ret .. ' end,\n}\n'
end
rc("saves_negative", hook_rule("saves", "-5"), "saves() returned -5 for node 'n1', expected a number of bytes >= 0", 6)
rc("saves_string", hook_rule("saves", '"lots"'), 'saves() returned "lots" for node', 6)
rc("temporary_nan", hook_rule("temporary", "0/0"), "temporary() returned", 6)
-- the attrs a rule declares and how it fuses are checked when it loads
rc("attrs_declared_bad_type", 'return {\n  name = "mine", doc = "d", backward = false, attrs = { scale = "float" },\n' ..
   '  forward = function(node, gpu)\n' .. mem .. '\n  end,\n}\n',
   "field 'attrs': entry 'scale' must be a name = \"type: what it does\"")
rc("fusion_unknown", 'return {\n  name = "mine", doc = "d", backward = false, fusion = "pointwise",\n' ..
   '  forward = function(node, gpu)\n' .. mem .. '\n  end,\n}\n', "field 'fusion' must be \"elementwise\" or \"anchor\"")
rf("kernel_flops_negative", kern("flops = -5, bytes = 1"), "flops and bytes must be >= 0")
-- a hand-built GEMM's FLOPs against its dims (tester5: flops = 0 was priced from the dims, 1000x them accepted)
rf("kernel_gemm_flops_zero", '    return { { kind = "gemm", name = "G", b = 1, m = 64, n = 64, k = 64, flops = 0, bytes = 1e6 } }',
   "kind 'gemm' computes 2·b·m·n·k = 524288 FLOPs, got flops = 0 (more than half of it and at most twice", 3)
rf("kernel_bmm_flops_over", '    return { { kind = "bmm", name = "B", b = 2, m = 64, n = 64, k = 64, flops = 2^30, bytes = 1e6 } }',
   "kind 'bmm' computes 2·b·m·n·k = ", 3)
-- a misspelled rule field is reported at the rule's line (tester5: only the workload's line was named)
rc("field_typo_line", 'return {\n  name = "mine", doc = "d", backward = false,\n  fowrard = function(node, gpu)\n' .. mem ..
   '\n  end,\n}\n', "unknown field 'fowrard' (did you mean 'forward'?)", 3)
rf("kernel_flops_nan", kern("flops = 0/0, bytes = 1e6"), "field 'flops' must be a finite number")
rf("kernel_bytes_inf", kern("flops = 0, bytes = math.huge"), "field 'bytes' must be a finite number")
rf("kernel_bytes_huge", kern("flops = 0, bytes = 1e300"), "flops and bytes must be at most 1e21")
rf("kernel_flops_huge", kern("flops = 2^100, bytes = 1"), "flops and bytes must be at most 1e21")
rf("kernel_bytes_string", kern('flops = 0, bytes = "lots"'), "field 'bytes' must be a number (got string)")
rf("kernel_kind_unknown", '    return { { kind = "quantum", name = "MEM", flops = 0, bytes = 1e6 } }', "unknown kind 'quantum'")
rf("kernel_kind_missing", '    return { { name = "MEM", flops = 0, bytes = 1e6 } }', "field 'kind' must be a string (got nil)")
rf("kernel_name_missing", '    return { { kind = "memory", flops = 0, bytes = 1e6 } }', "field 'name' must be a string (got nil)")
rf("kernel_field_typo", kern("flops = 0, byts = 1e6"), "unknown field 'byts' (did you mean 'bytes'?)")
rf("kernel_number", "    return { 5 }", "kernel #1: expected a table (got number)", 3)
rf("kernel_gemm_no_flops", '    return { { kind = "gemm", name = "G", m = 0, n = 64, k = 64 } }', "field 'flops' must be a number (got nil)")
-- found by tests/fuzz/mutate.py: dimensions and seconds without a range (m = 0 failed in scripts/tiling/gemm.lua
-- without naming the rule; rows = 2^62 and seconds = 2^53 were forecast)
rf("kernel_gemm_m_zero", '    return { { kind = "gemm", name = "G", b = 1, m = 0, n = 64, k = 64, flops = 0, bytes = 1 } }',
   "field 'm' must be between 1 and 2^48 (got 0)")
rf("kernel_rows_huge", '    return { { kind = "elementwise", name = "V", op = "add", rows = 1 << 62, hidden = 4, flops = 1, bytes = 1 } }',
   "field 'rows' must be between 1 and 2^48")
rf("kernel_rows_hidden_product", '    return { { kind = "softmax", name = "S", rows = 1 << 30, hidden = 1 << 30, flops = 1, bytes = 1 } }',
   "rows × hidden must be at most 2^48")
rf("kernel_gemm_dims_product", '    return { { kind = "gemm", name = "G", b = 1 << 40, m = 1 << 40, n = 64, k = 64, flops = 1, bytes = 1 } }',
   "b·m·n·k must be at most 1e21")
rf("kernel_vec_zero_flops", '    return { { kind = "elementwise", name = "V", op = "add", rows = 4, hidden = 4, flops = 0, bytes = 16 } }',
   "kind 'elementwise' needs flops > 0 and bytes > 0")
rf("kernel_collective_zero_seconds", '    return { { kind = "collective", name = "AllReduce", flops = 0, bytes = 1e6, seconds = 0 } }',
   "a collective kernel that sends bytes needs seconds > 0")
rf("kernel_bytes_tiny", kern("flops = 0, bytes = 1e-300"), "flops and bytes must be 0 or at least 1")
rf("kernel_seconds_tiny", kern("flops = 0, bytes = 1, seconds = 1e-300"), "field 'seconds' must be 0 or a time of 1e-9 to 1e6 s (got 1e-300): a time that short is a unit slip")
rf("kernel_seconds_huge", kern("flops = 0, bytes = 1, seconds = 2^53"), "field 'seconds' must be 0 or a time of 1e-9 to 1e6 s (got 9.0072e+15): a time that long is a unit slip")
-- what one more key adds (the KV-length envelope's copies): attention only, and no more than the kernel itself
rf("kernel_kv_flops_on_gemm", '    return { { kind = "gemm", name = "G", b = 1, m = 4, n = 64, k = 64, flops = 32768, bytes = 1, kv_flops = 1 } }',
   "kv_flops and kv_bytes belong to attention kernels (kind 'gemm')")
rf("kernel_kv_bytes_above_bytes", '    local a = require("neusight.kernels").attention("decode", 1, 1, 64, 64, 4, 4, "bf16")\n' ..
   '    a.kv_bytes = a.bytes * 2\n    return { a }',
   "kv_flops and kv_bytes (what one more key adds) must be between 0 and the kernel's flops and bytes")
-- the kernel constructors: an unknown option was ignored, a wrapping shape forecast 0 ms, softmax's error had no line
rf("vec_opts_typo", '    return { require("neusight.kernels").vec("add", 4, 4, "fp32", { byts = 3 }) }',
   "bad argument #5 to 'vec' (unknown field 'byts'; known: bytes, bytes_per_elem, flops_per_elem)", 4)
rf("vec_opts_number", '    return { require("neusight.kernels").vec("add", 4, 4, "fp32", 5) }',
   "bad argument #5 to 'vec' (table or nil expected, got number)", 4)
rf("mem_shape_wraps", '    return { require("neusight.kernels").mem({ { 4, math.maxinteger, 64 } }, "fp32") }',
   "bad argument #1 to 'mem' (shape 1: more than 2^48 elements)", 4)
rf("mem_shape_string", '    return { require("neusight.kernels").mem({ { 4, 128 }, { 4, "x" } }, "fp32") }',
   "bad argument #1 to 'mem' (shape 2: dimension 2 is x, expected a non-negative integer)", 4)
rf("mem_shape_keys", '    return { require("neusight.kernels").mem({ { 4, 128 }, { x = 1 } }, "fp32") }',
   "bad argument #1 to 'mem' (shape 2: shape expected, got a table without an array part)", 4)
rf("softmax_zero", '    return { require("neusight.kernels").softmax(0, 64, "fp32") }',
   "bad argument #1 to 'softmax' (positive integer expected, got 0)", 4)
rf("dtype_bytes_unknown", '    local e = require("neusight.kernels").dtype_bytes("fp7")\n' .. mem,
   "bad argument #1 to 'dtype_bytes' (unknown dtype 'fp7')", 4)
-- a rule built by a constructor (`return require("neusight.rules").x { … }` is a tail call): its spec errors named
-- engine/lua/prelude.lua, not the rule file
rc("ctor_spec_typo", 'return require("neusight.rules").elementwise { name = "mine", doc = "d", op = "add", grda = "mem" }\n',
   "rules.elementwise: unknown field 'grda'")
rc("ctor_spec_no_doc", 'return require("neusight.rules").linear { name = "mine" }\n', "rules.linear: field 'doc' must be a string")
-- every rule of the model returned {}: 0 ms, exit 0
case { kind = "oprule", file = "oprule/forward_empty_only_node/mine.lua", text = rule_text("    return {}"), args = RULE,
       expect = "model 'custom': none of its 1 nodes has a kernel that does work (every op rule returned {} or kernels " ..
                "of 0 flops and 0 bytes): the forecast would be 0 ms", names = "oprule/run.lua" }
case { kind = "oprule", file = "oprule/forward_no_work/mine.lua", text = rule_text(kern("flops = 0, bytes = -0.0")),
       args = RULE, expect = "model 'custom': none of its 1 nodes has a kernel that does work", names = "oprule/run.lua" }
-- … and the message names the rule that returned nothing (found by tests/fuzz/mutate.py, seed 4101: it named the
-- workload alone)
case { kind = "oprule", file = "oprule/forward_empty_names_rule/mine.lua", text = rule_text("    return {}"), args = RULE,
       expect = { "none of its 1 nodes has a kernel that does work", "(op rules: " } }
rf("kernel_list_metatable", "    return setmetatable({}, { __len = function() return 1.5 end, __index = function() error('x') end })",
   "expected a plain table (it has a metatable)")
rf("kernel_dtype_unknown", kern('flops = 0, bytes = 1, dtype = "fp7"'), "fp7")
rf("gpu_assign", "    gpu.num_sm = 1\n" .. mem, "gpu is read-only (assignment to 'num_sm')", 4)
rf("gpu_rawset", "    rawset(gpu, 'num_sm', 1)\n" .. mem, "bad argument #1 to 'rawset' (table expected, got read-only gpu)", 4)
rf("gpu_setmetatable", "    setmetatable(gpu, nil)\n" .. mem, "", 4)
rf("node_assign", "    node.name = 'x'\n" .. mem, "node 'n1' is read-only (assignment to 'name')", 4)
rf("node_field_typo", "    local n = #node.ouput\n" .. mem, "node 'n1' has no field 'ouput' (did you mean 'output'?)", 4)
rf("require_absolute_tmp", "    require('.tmp.x')\n" .. mem, "module '.tmp.x' not found: invalid module name", 4)
rf("string_metatable", "    getmetatable('').__index.rep = nil\n" .. mem, "attempt to index a nil value", 4)
rf("loop_budget", "    while true do end", "script ran longer than 20000000 instructions", 4, " --script-budget 20000000")
rf("loop_pcall", "    while true do pcall(function() while true do end end) end", "script ran longer than 20000000 instructions", 4,
   " --script-budget 20000000")
rf("memory_bomb", "    local t = {} while true do t[#t+1] = ('x'):rep(1e6) end", "script used more than 64 MB of memory", 4,
   " --script-memory 64")
rf("pattern_backtracking", "    local s = ('a'):rep(300000) return s:find('.-.-.-.-b')", "script ran longer than 1 s of CPU time", nil,
   " --script-timeout 1")
rf("error_huge_message", "    error(('x'):rep(1e6))", "more bytes]", 4)
rc("loop_default_limits", "while true do end\n", "script ran longer than 1000000000 instructions", 1)
rc("syntax_error", 'return {\n  name = "mine",\n  forward = function(node\n}\n', "')' expected near '}'", 4)
rc("returns_number", "return 42\n", "an op rule must return a table (got number)")
rc("returns_nothing", "\n", "an op rule must return a table (got nil)")
rc("rule_metatable", "return setmetatable({ name = 'mine', doc = 'd', backward = false },\n  { __index = function() error('rule boom') end })\n",
   "an op rule must return a plain table (this one has a metatable)")
rc("no_forward", 'return { name = "mine", doc = "d", backward = false }\n', "missing required field 'forward'")
rc("forward_not_function", 'return { name = "mine", doc = "d", backward = false, forward = "fast" }\n', "field 'forward' must be a function (got string)")
rc("name_mismatch", 'return { name = "other", doc = "d", backward = false, forward = function() return {} end }\n',
   "field 'name' is 'other' but must equal the file stem 'mine'")
rc("field_typo", 'return { name = "mine", doc = "d", bakward = false, forward = function() return {} end }\n',
   "unknown field 'bakward' (did you mean 'backward'?)")
rc("check_error", 'return { name = "mine", doc = "d", backward = false, check = function() error("bad shape") end,\n' ..
   '  forward = function() return {} end }\n', "bad shape", 1)
rc("no_backward_in_training", 'return { name = "mine", doc = "d", forward = function() return {} end }\n',
   "op 'mine' has no 'backward' and this is a training run", nil, RULE_TRAIN)
rc("backward_error", 'return { name = "mine", doc = "d", forward = function() return {} end,\n  backward = function() error("no grad") end }\n',
   "no grad", 2, RULE_TRAIN)
rc("backward_returns_kernel", 'return { name = "mine", doc = "d", forward = function() return {} end,\n' ..
   '  backward = function() return { kind = "memory", name = "M", flops = 0, bytes = 1 } end }\n',
   "backward() returned a single kernel", nil, RULE_TRAIN)

-------------------------------------------------------------------------------------------------- HF config.json
local HF = "predict --model {file} --gpu h100 --mode inference --batch 1 --seq 8 --predictor roofline --format json -o {out}"
-- tiny GPT-2 fields (tests/fixtures/hf/tiny-gpt2); `change` maps a key to its JSON text (false: leave it out)
local hf_keys = { "model_type", "activation_function", "n_ctx", "n_embd", "n_head", "n_inner", "n_layer", "n_positions", "vocab_size" }
local hf_base = { model_type = '"gpt2"', activation_function = '"gelu_new"', n_ctx = "256", n_embd = "128", n_head = "4",
                  n_inner = "null", n_layer = "2", n_positions = "256", vocab_size = "1000" }
-- A config.json of one key a line: `keys` in order, `base` their JSON texts. Returns text(change, extra) (`change` maps
-- a key to its JSON text, false: leave it out; `extra` a last line) and line(k), the line of key k (line 1 is "{").
local function json_config(keys, base)
  local function text(change, extra)
    local parts = {}
    for _, k in ipairs(keys) do
      local v = base[k]
      if change[k] ~= nil then v = change[k] end
      if v then parts[#parts + 1] = '  "' .. k .. '": ' .. v end
    end
    if extra then parts[#parts + 1] = extra end
    return "{\n" .. table.concat(parts, ",\n") .. "\n}\n"
  end
  local function line(k)
    for i, key in ipairs(keys) do
      if key == k then return i + 1 end
    end
    error("no key " .. k)
  end
  return text, line
end
local hf_text, hf_line = json_config(hf_keys, hf_base)
write("hf/good.json", hf_text {})
local function hf(name, text, expect, line, args)
  case { kind = "hf", file = "hf/" .. name .. ".json", text = text, args = args or HF, expect = expect, line = line }
end
-- a field's value of the wrong type or range named the model and the field, but not the file's line (only null values
-- did): every field error of a config file names the key's line (neusight.models.check fail)
for _, f in ipairs { "vocab_size", "n_layer", "n_head", "n_embd", "n_positions" } do
  local at = hf_line(f)
  hf(f .. "_zero", hf_text { [f] = "0" }, "field '" .. f .. "' must be a positive integer (got 0)", at)
  hf(f .. "_negative", hf_text { [f] = "-5" }, "field '" .. f .. "' must be a positive integer (got -5)", at)
  hf(f .. "_fraction", hf_text { [f] = "100.5" }, "field '" .. f .. "' must be a positive integer (got 100.5)", at)
  hf(f .. "_string", hf_text { [f] = '"100"' }, "field '" .. f .. "' must be a positive integer", at)
  hf(f .. "_bool", hf_text { [f] = "true" }, "field '" .. f .. "' must be a positive integer (got true)", at)
end
-- a null count is HF's None: it read "(got nil)" (GPT-2, OPT: as omitted) or "(got false)" (the Llama family, DeepSeek),
-- with no file or line; the message names the null and its line
hf("vocab_size_null", hf_text { vocab_size = "null" }, "field 'vocab_size' must be a positive integer (got null, a JSON null)", 10)
hf("llama_vocab_null", '{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,\n' ..
   '  "num_hidden_layers": 2, "vocab_size": null}\n', "field 'vocab_size' must be a positive integer (got null, a JSON null)", 2)
hf("vocab_size_huge", hf_text { vocab_size = "4611686018427387904" }, "must be a shape of at most 2^48 elements")
hf("n_embd_huge", hf_text { n_embd = "1099511627776" }, "must be a shape of at most 2^48 elements")
hf("n_inner_negative", hf_text { n_inner = "-1" }, "field 'n_inner' must be a positive integer (got -1)", hf_line("n_inner"))
hf("n_head_indivisible", hf_text { n_head = "3" }, "n_embd (128) must be divisible by n_head (3)", hf_line("n_head"))
hf("n_positions_small", hf_text { n_positions = "4" }, "seq 8 exceeds n_positions 4")
hf("key_typo", hf_text({}, '  "n_iner": 512'), "unknown key 'n_iner' for model_type \"gpt2\" (did you mean 'n_inner'?)", 11)
hf("model_type_unknown", hf_text { model_type = '"gpt5"' }, "has model_type \"gpt5\", which is not supported")
hf("model_type_missing", hf_text { model_type = false }, "has no 'model_type'")
hf("model_type_number", hf_text { model_type = "2" }, "has model_type 2, which is not supported")
-- a config.json with architectures but no model_type names the type to add; a multimodal config (Mistral-Small-3.1's
-- mistral3, LLaVA) whose text_config is a supported language model says so: neither was more than "not supported"
hf("architectures_only", '{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n',
   "has no 'model_type' (architectures names LlamaForCausalLM: add \"model_type\": \"llama\")")
hf("text_config_supported", '{"model_type": "mistral3", "text_config": {"model_type": "mistral", "hidden_size": 64}}\n',
   "has model_type \"mistral3\", which is not supported (its text_config is a \"mistral\" language model")
-- found by the hf_config fuzz target (tests/fuzz): a model_type object was shown as "table: 0x…"; a whole number beyond
-- 2^63 passed the count check and failed in a builder's string.format ("number has no integer representation")
-- … and a layer count whose parameters overflow the optimizer step's tensor (the integer sum wrapped negative)
hf("switch_decoder_layers_huge_train", '{"model_type": "switch_transformers", "d_ff": 32768, "d_kv": 128, ' ..
   '"d_model": 4096, "num_decoder_layers": 442949672968, "num_sparse_decoder_layers": 11, "num_experts": 1, ' ..
   '"num_heads": 32, "num_layers": 24, ' ..
   '"vocab_size": 32128}\n', "parameters, more than the 2^48 elements of the optimizer step's tensor", nil,
   (HF:gsub("inference", "train")))
hf("n_layer_beyond_int64", hf_text { n_layer = "1e300" }, "field 'n_layer' must be a positive integer (got 1e+300)",
   hf_line("n_layer"))
hf("model_type_object", hf_text { model_type = '{ "name": "gpt2" }' }, "has a model_type that is not a string (a JSON object or array)")
hf("activation_unknown", hf_text { activation_function = '"swishy"' }, "activation_function = \"swishy\" is not modelled", 3)
hf("n_layer_table", hf_text { n_layer = '{ "a": 1 }' }, "field 'n_layer' must be a positive integer", hf_line("n_layer"))
hf("number_overflow", hf_text { n_layer = "1e999" }, "invalid JSON: number overflow parsing '1e999'")
hf("nan_literal", hf_text { n_layer = "NaN" }, "invalid JSON", 8)
hf("truncated", '{ "model_type": "gpt2", "n_layer": 2,', "invalid JSON", 1)
hf("empty", "", "invalid JSON", 1)
hf("binary", "\255\254{}", "invalid JSON", 1)
hf("top_array", "[1, 2]\n", "a model config must be a JSON object (got array)")
hf("top_string", '"gpt2"\n', "a model config must be a JSON object (got string)")
hf("trailing_comma", hf_text({}, '  "n_layer2": 2,'), "invalid JSON", 12)
hf("llama_kv_indivisible", '{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, ' ..
   '"num_hidden_layers": 2, "vocab_size": 100, "num_key_value_heads": 3}\n', "num_attention_heads (4) must be divisible by num_key_value_heads (3)")
hf("llama_intermediate_negative", '{"model_type": "llama", "hidden_size": 64, "intermediate_size": -128, "num_attention_heads": 4, ' ..
   '"num_hidden_layers": 2, "vocab_size": 100}\n', "field 'intermediate_size' must be a positive integer (got -128)")
hf("bert_type_vocab_zero", '{"model_type": "bert", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, ' ..
   '"vocab_size": 100, "type_vocab_size": 0}\n', "field 'type_vocab_size' must be a positive integer (got 0)")
-- keys dropped as changing no kernel were taken whatever their value (check.lua NEUTRAL): 0 positions, a RoPE base of 0,
-- a negative norm epsilon, an n_ctx of 0 beside n_positions
local hf_llama = '{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, ' ..
   '"num_hidden_layers": 2, "vocab_size": 100, %s}\n'
hf("llama_max_positions_zero", hf_llama:format('"max_position_embeddings": 0'),
   "key 'max_position_embeddings' must be a positive integer (got 0)")
hf("llama_rope_theta_zero", hf_llama:format('"rope_theta": 0.0'), "key 'rope_theta' must be a positive number (the RoPE base) (got 0.0)")
hf("llama_rms_norm_eps_negative", hf_llama:format('"rms_norm_eps": -1e-05'), "key 'rms_norm_eps' must be a number in [0, 1) (got -1e-05)")
-- a value of the wrong JSON type was shown by tostring: "tie_word_embeddings": "false" read "must be a boolean (got false)",
-- "use_sliding_window": "true" "must be a boolean (got true)", "sliding_window": "4096" "(got 4096)": the string is named
hf("llama_tie_string", hf_llama:format('"tie_word_embeddings": "false"'),
   "field 'tie_word_embeddings' must be a boolean (got \"false\", a string)")
hf("mistral_sliding_window_string", (hf_llama:format('"num_key_value_heads": 4, "sliding_window": "4096"'):gsub('"llama"', '"mistral"')),
   "field 'sliding_window' must be a positive integer or false (got \"4096\", a string)")
hf("qwen2_use_sliding_window_string", (hf_llama:format('"use_sliding_window": "true"'):gsub('"llama"', '"qwen2"')),
   "field 'use_sliding_window' must be a boolean (got \"true\", a string)")
hf("qwen3_moe_norm_topk_string", (hf_llama:format('"norm_topk_prob": "true", "num_experts": 4, "num_experts_per_tok": 2, '
   .. '"moe_intermediate_size": 32'):gsub('"llama"', '"qwen3_moe"')),
   "field 'norm_topk_prob' must be a boolean (got \"true\", a string)")
hf("deepseek_v2_norm_topk_string", '{"model_type": "deepseek_v2", "hidden_size": 64, "intermediate_size": 128, ' ..
   '"num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100, "kv_lora_rank": 16, "q_lora_rank": null, ' ..
   '"qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "norm_topk_prob": "false"}\n',
   "field 'norm_topk_prob' must be a boolean (got \"false\", a string)")
hf("n_ctx_zero", hf_text { n_ctx = "0" }, "key 'n_ctx' must be a positive integer (got 0)", hf_line("n_ctx")) -- dropped
hf("layer_norm_epsilon_negative", hf_text({}, '  "layer_norm_epsilon": -1'), "key 'layer_norm_epsilon' must be a number in [0, 1) (got -1)",
   #hf_keys + 2)
-- a Llama-family config one key a line (the layout of HF's own files): each wrong value names its key's line
local llama_keys = { "model_type", "hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
                     "vocab_size", "num_key_value_heads", "rope_scaling" }
local llama_base = { model_type = '"llama"', hidden_size = "64", intermediate_size = "128", num_attention_heads = "4",
                     num_hidden_layers = "2", vocab_size = "100", num_key_value_heads = "4", rope_scaling = "null" }
local llama_lines, llama_line = json_config(llama_keys, llama_base)
hf("llama_heads_string", llama_lines { num_attention_heads = '"32"' },
   "field 'num_attention_heads' must be a positive integer (got \"32\", a string)", llama_line("num_attention_heads"))
hf("llama_hidden_negative", llama_lines { hidden_size = "-4096" }, "field 'hidden_size' must be a positive integer (got -4096)",
   llama_line("hidden_size"))
hf("llama_layers_float", llama_lines { num_hidden_layers = "2.5" },
   "field 'num_hidden_layers' must be a positive integer (got 2.5)", llama_line("num_hidden_layers"))
hf("llama_rope_scaling_number", llama_lines { rope_scaling = "3" },
   "key 'rope_scaling' must be a table of the RoPE scaling (or null) (got 3)", llama_line("rope_scaling"))
hf("llama_heads_indivisible", llama_lines { num_attention_heads = "5", num_key_value_heads = "5" },
   "hidden_size (64) must be divisible by num_attention_heads (5), or head_dim be given", llama_line("num_attention_heads"))
hf("llama_kv_heads_indivisible", llama_lines { num_key_value_heads = "3" },
   "num_attention_heads (4) must be divisible by num_key_value_heads (3)", llama_line("num_key_value_heads"))
hf("llama_hidden_act", llama_lines({}, '  "hidden_act": "gelu"'),
   "hidden_act \"gelu\" is not supported", #llama_keys + 2)
hf("llama_tie_number", llama_lines({}, '  "tie_word_embeddings": 1'),
   "field 'tie_word_embeddings' must be a boolean (got 1)", #llama_keys + 2)
hf("llama_dropout_range", llama_lines({}, '  "attention_dropout": 1.5'),
   "field 'attention_dropout' must be a number in [0, 1) (got 1.5)", #llama_keys + 2)
hf("mixtral_topk_exceeds", (llama_lines({}, '  "num_local_experts": 2,\n  "num_experts_per_tok": 4')
   :gsub('"llama"', '"mixtral"')), "num_experts_per_tok (4) exceeds num_local_experts (2)", #llama_keys + 3)
hf("bert_hidden_act", '{\n  "model_type": "bert",\n  "hidden_size": 64,\n  "num_attention_heads": 4,\n' ..
   '  "num_hidden_layers": 2,\n  "vocab_size": 100,\n  "hidden_act": "tanh"\n}\n', "hidden_act tanh is not supported", 7)
hf("switch_sparse_step", '{\n  "model_type": "switch_transformers",\n  "num_layers": 4,\n  "num_decoder_layers": 4,\n' ..
   '  "encoder_sparse_step": 3\n}\n', "layer counts must be multiples of the sparse steps (num_layers 4, encoder_sparse_step 3)", 5)
case { kind = "hf", file = "hf/fifo.json", text = "{}\n", fifo = "config.json", names = "{tmp}/config.json",
       args = "predict --model {tmp}/config.json --gpu h100 --mode inference --batch 1 --seq 8 --format json -o {out}",
       expect = "not a regular file (a FIFO)" }

-------------------------------------------------------------------------------------------------- shared helpers
local function read(rel)
  local f = assert(io.open(root .. "/../" .. rel, "rb"))
  local t = f:read("a")
  f:close()
  return t
end
-- `text` with the first plain occurrence of `from` replaced by `to` (which must exist)
local function sub1(text, from, to)
  local a, b = text:find(from, 1, true)
  assert(a, "not found: " .. from)
  return text:sub(1, a - 1) .. to .. text:sub(b + 1)
end
local function line_at(text, pos) return select(2, text:sub(1, pos):gsub("\n", "")) + 1 end
local function line_of_plain(text, what) return line_at(text, assert(text:find(what, 1, true), what)) end
-- the lines of `text`, the `n`th replaced by f(line)
local function with_line(text, n, f)
  local out, i = {}, 0
  for l in (text:sub(-1) == "\n" and text or text .. "\n"):gmatch("([^\n]*)\n") do
    i = i + 1
    out[#out + 1] = i == n and f(l) or l
  end
  return table.concat(out, "\n") .. "\n"
end

-------------------------------------------------------------------------------------------------- opgraph CSV
-- predict --graph needs the file name opgraph/<model>-<inf|train>-<seq>-<batch>.csv: one folder per case
local og = read("fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv")
local OG = "predict --graph {file} --gpu h100 --layers 2 --predictor roofline --format json -o {out}"
local function ogc(name, text, expect, line)
  case { kind = "opgraph", file = "opgraph/" .. name .. "/opgraph/gpt2_large-inf-1024-4.csv", text = text, args = OG,
         expect = expect, line = line }
end
local lin = "(4096, 1280, 3840)"
local function lin_case(name, to, expect) ogc(name, with_line(og, 29, function(l) return sub1(l, lin, to) end), expect, 29) end
lin_case("linear_dim_huge", "(4096, 1280, 9223372036854775807)", "kernel 'Linear' has a dimension 9223372036854775807 over 2^32")
lin_case("linear_dim_2_62", "(4611686018427387904, 1280, 3840)", "over 2^32")
lin_case("linear_operand_huge", "(4294967296, 4294967296, 4294967296)",
         "column 'FwOps': kernel 'Linear': bad argument to 'linear' (operand X has more than 2^48 elements)")
lin_case("linear_weight_huge", "(4096, 4294967296, 4294967296)",
         "column 'FwOps': kernel 'Linear': bad argument to 'linear' (operand W has more than 2^48 elements)")
lin_case("linear_dim_negative", "(4096, -1280, 3840)", "kernel 'Linear' needs 3 positive integers (T, I, O)")
lin_case("linear_dim_zero", "(0, 1280, 3840)", "kernel 'Linear' needs 3 positive integers (T, I, O)")
lin_case("linear_dim_hex", "(0x1000, 1280, 3840)", "malformed number")
lin_case("linear_dim_float", "(4096.5, 1280, 3840)", "floats are not supported")
lin_case("linear_dim_overflow", "(99999999999999999999999, 1280, 3840)", "integer out of range")
lin_case("linear_dim_string", "('a', 1280, 3840)", "kernel 'Linear' needs 3 positive integers")
lin_case("linear_two_dims", "(4096, 1280)", "kernel 'Linear' needs 3 positive integers (T, I, O), got (4096, 1280)")
lin_case("linear_unbalanced", "(4096, 1280, 3840", "expected ',' or ')'")
ogc("kernel_unknown", with_line(og, 29, function(l) return sub1(l, "['Linear',", "['Quantum',") end), "unknown kernel 'Quantum'", 29)
ogc("vec_dim_huge", with_line(og, 15, function(l) return sub1(l, "(4096, 1280)", "(4096, 4611686018427387904)") end),
    "kernel 'VECadd' has a dimension 4611686018427387904 over 2^32", 15)
ogc("vec_unknown", with_line(og, 15, function(l) return sub1(l, "['VECadd',", "['VECfrobnicate',") end), "unknown vector kernel 'VECfrobnicate'", 15)
ogc("output_shape_huge", with_line(og, 15, function(l) return sub1(l, '"(4, 1024, 1280)"', '"(4, 1024, 4611686018427387904)"') end),
    "OutputShape", 15)
ogc("input_shapes_not_list", with_line(og, 15, function(l) return sub1(l, '"[(4, 1024, 1280), (1, 1024, 1280)]"', '"(4, 1024)"') end),
    "expected a list of shapes", 15)
ogc("mem_not_shapes", with_line(og, 4, function(l) return sub1(l, "((1,), (1,))", "(1, 1)") end), "kernel 'MEM': expected a shape", 4)
ogc("prev_not_set", with_line(og, 4, function(l) return sub1(l, "{'size'}", "['size']") end), "expected a set of node names", 4)
ogc("short_row", with_line(og, 30, function(l) return l:match("^([^,]*,[^,]*,[^,]*)") end), "expected 9 fields, found 3", 30)
ogc("open_quote", with_line(og, 31, function(l) return l .. '"' end), "quote inside an unquoted field")
ogc("binary_row", with_line(og, 6, function() return "\0\1\255" end), "expected 9 fields, found 1", 6)
ogc("header_typo", with_line(og, 1, function(l) return sub1(l, "FwOps", "FwOpz") end), "missing column 'FwOps' (did you mean 'FwOpz'?)")
ogc("header_only", og:match("^[^\n]*\n"), "layer start marker 'transformer_h_0_ln_1' not found")
ogc("empty", "", "empty CSV file (no header)")

-------------------------------------------------------------------------------------------------- dataset CSV
-- micro-benchmark rows for `eval kernels` and `train`
local ds = read("fixtures/bench/bmm_small.csv")
local EVK = "eval kernels {file} --format json -o {out}"
local TRAIN = "train -q --family bmm --epochs 2 --data {file} --out {out}"
local function dsc(name, text, expect, line, args)
  case { kind = "dataset", file = "dataset/" .. name .. ".csv", text = text, args = args or EVK, expect = expect, line = line }
end
local function ds_field(name, col, value, expect, args)
  -- replaces column `col` (1-based) of the first data row
  local text = with_line(ds, 2, function(l)
    local f = {}
    for x in (l .. ","):gmatch("([^,]*),") do f[#f + 1] = x end
    f[col] = value
    return table.concat(f, ",")
  end)
  dsc(name, text, expect, 2, args)
end
-- columns: 2 Latency, 3 Device, 17 B, 18 M, 19 N, 20 K
-- (rows with a latency <= 0 or an empty shape are skipped with a count, by design: collectors write such rows)
for _, v in ipairs { { "nan", "nan" }, { "inf", "inf" }, { "text", "fast" }, { "huge", "1e308" }, { "hex", "0x10" },
                     { "above_1e7", "2e7" } } do
  ds_field("latency_" .. v[1], 2, v[2], "column 'Latency' must be a number of at most 1e7 (got '" .. v[2] .. "')")
  ds_field("train_latency_" .. v[1], 2, v[2], "column 'Latency' must be a number of at most 1e7", TRAIN)
end
for _, c in ipairs { { 17, "B" }, { 18, "M" }, { 19, "N" }, { 20, "K" } } do
  for _, v in ipairs { { "hex", "0x100" }, { "huge", "9223372036854775807" }, { "float", "2.5" }, { "overflow", "99999999999999999999" },
                       { "above_2_31", "4294967296" }, { "text", "many" } } do
    ds_field("dim_" .. c[2] .. "_" .. v[1], c[1], v[2], "column '" .. c[2] .. "' must be an integer of at most 2^31 (got '" .. v[2] .. "')")
  end
end
ds_field("grid_x_hex", 9, "0x2", "column 'Grid x' must be an integer")
ds_field("grid_x_huge", 9, "1e30", "column 'Grid x' must be an integer")
dsc("short_row", with_line(ds, 2, function(l) return l:match("^([^,]*,[^,]*)") end), "expected 20 fields, found 2", 2)
dsc("header_typo", with_line(ds, 1, function(l) return sub1(l, "Latency", "Latncy") end), "missing column 'Latency (ms)'")
dsc("header_only", ds:match("^[^\n]*\n"), "no rows to evaluate")
dsc("empty", "", "empty CSV file (no header)")
dsc("train_empty", "", "empty CSV file (no header)", nil, TRAIN)
dsc("train_header_only", ds:match("^[^\n]*\n"), "no bmm rows to train on", nil, TRAIN)
-- dtype spellings: scripts/collect writes Dtype as fp32|tf32|fp16|bf16|fp8, AIConfigurator its dtype columns as
-- float16|bfloat16|fp8; a dtype in another file's spelling (PyTorch's torch.bfloat16, bf16 in an AIConfigurator file)
-- is refused at its row. In an AIConfigurator file it was skipped as "not modelled" (eval: no rows, train: fewer).
do
  local function with_dtype(v)
    local out, n = {}, 0
    for l in ds:gmatch("([^\n]*)\n") do
      n = n + 1
      out[#out + 1] = l .. (n == 1 and ",Dtype" or "," .. (n == 2 and v or "bf16"))
    end
    return table.concat(out, "\n") .. "\n"
  end
  dsc("dtype_bfloat16", with_dtype("bfloat16"), "column 'Dtype' spells bf16 as 'bfloat16'; scripts/collect writes 'bf16'", 2)
  dsc("dtype_torch_float16", with_dtype("torch.float16"), "column 'Dtype' spells fp16 as 'torch.float16'", 2)
  dsc("train_dtype_torch_bfloat16", with_dtype("torch.bfloat16"), "column 'Dtype' spells bf16 as 'torch.bfloat16'", 2,
      "train -q --family gemm_tc16 --epochs 2 --data {file} --out {out}")
  local gemm = read("fixtures/aiconfigurator/gemm.csv")
  dsc("aic_gemm_dtype_bf16", with_line(gemm, 3, function(l) return sub1(l, ",bfloat16,", ",bf16,") end),
      "column 'gemm_dtype' spells bf16 as 'bf16'; AIConfigurator's files write 'bfloat16'", 3)
  local attn = read("fixtures/aiconfigurator/context_attention.csv")
  dsc("aic_attn_dtype_torch", with_line(attn, 2, function(l) return sub1(l, ",bfloat16,", ",torch.bfloat16,") end),
      "column 'attn_dtype' spells bf16 as 'torch.bfloat16'", 2)
  dsc("aic_kv_cache_dtype_fp16", with_line(attn, 2, function(l) return sub1(l, ",bfloat16,fp8,", ",bfloat16,fp16,") end),
      "column 'kv_cache_dtype' spells fp16 as 'fp16'; AIConfigurator's files write 'float16'", 2)
end

-------------------------------------------------------------------------------------------------- Chrome traces
local tr = read("fixtures/traces/chrome/tiny.json")
local SCALE = "scale --trace {file} --from V100 --to h100 --format json -o {out}"
local function trc(name, text, expect, line)
  case { kind = "trace", file = "trace/" .. name .. ".json", text = text, args = SCALE, expect = expect, line = line }
end
local function tr_sub(name, from, to, expect, with_line_no)
  local text = sub1(tr, from, to)
  -- "args": the change is on the line after the event's first line, which the message names
  trc(name, text, expect, with_line_no and line_of_plain(text, to) - (with_line_no == "args" and 1 or 0) or nil)
end
local k1 = '"ts": 30, "dur": 2.5'
tr_sub("kernel_dur_huge", k1, '"ts": 30, "dur": 1e308', "'dur' must be at most 1e10 microseconds", true)
tr_sub("kernel_dur_above_1e10", k1, '"ts": 30, "dur": 2e10', "'dur' must be at most 1e10 microseconds", true)
tr_sub("kernel_dur_negative", k1, '"ts": 30, "dur": -2.5', "negative 'dur'", true)
tr_sub("kernel_dur_nan", k1, '"ts": 30, "dur": NaN', "invalid JSON", true)
tr_sub("kernel_dur_string", k1, '"ts": 30, "dur": "long"', "'dur' must be a number (got a string \"long\")", true)
tr_sub("kernel_dur_numeric_string", k1, '"ts": 30, "dur": "12.5"', "'dur' must be a number (got a string \"12.5\")", true)
tr_sub("kernel_dur_null", k1, '"ts": 30, "dur": null', "'dur' must be a number (got null)", true)
tr_sub("kernel_dur_bool", k1, '"ts": 30, "dur": true', "'dur' must be a number (got a boolean true)", true)
tr_sub("kernel_ts_string", k1, '"ts": "30", "dur": 2.5', "'ts' must be a number (got a string \"30\")", true)
tr_sub("kernel_ts_missing", k1, '"dur": 2.5', "missing number 'ts'", true)
tr_sub("cpu_dur_string", '"ts": 10, "dur": 50', '"ts": 10, "dur": "50"',
       "event 'aten::linear': 'dur' must be a number (got a string \"50\")", true)
tr_sub("cpu_ts_array", '"ts": 10, "dur": 50', '"ts": [10], "dur": 50', "event 'aten::linear': 'ts' must be a number (got an array)", true)
tr_sub("cpu_pid_fraction", '"pid": 1, "tid": 1, "ts": 10, "dur": 50', '"pid": 1.5, "tid": 1, "ts": 10, "dur": 50',
       "event 'aten::linear': 'pid' must be an integer or a string (got the number 1.5)", true)
tr_sub("cpu_tid_null", '"pid": 1, "tid": 1, "ts": 10, "dur": 50', '"pid": 1, "tid": null, "ts": 10, "dur": 50',
       "event 'aten::linear': 'tid' must be an integer or a string (got null)", true)
tr_sub("kernel_dur_missing", k1, '"ts": 30', "missing number 'dur'", true)
tr_sub("kernel_dur_overflow", k1, '"ts": 30, "dur": 1e999', "invalid JSON: number overflow parsing '1e999'")
tr_sub("kernel_ts_huge", k1, '"ts": 1e300, "dur": 2.5', "'ts' must be a time stamp within 1e17 microseconds", true)
tr_sub("cpu_dur_huge", '"ts": 10, "dur": 50', '"ts": 10, "dur": 1e300', "'dur' must be at most 1e10 microseconds", true)
tr_sub("kernel_ts_negative", k1, '"ts": -30, "dur": 2.5', "negative 'ts' (-30)", true)
tr_sub("cpu_ts_negative", '"ts": 10, "dur": 50', '"ts": -10, "dur": 50', "event 'aten::linear': negative 'ts' (-10)", true)
tr_sub("device_string", '"External id": 2, "grid"', '"External id": 2, "device": "cuda:0", "grid"',
       "args.device must be a non-negative integer (got a string \"cuda:0\")", "args")
do -- every kernel's 'dur' 0: no kernel time to scale
  local z = tr
  for _, d in ipairs({ '"ts": 30, "dur": 2.5', '"ts": 85, "dur": 1.0', '"ts": 230, "dur": 3.0', '"ts": 400, "dur": 5.0' }) do
    z = sub1(z, d, (d:gsub('"dur": [%d.]+', '"dur": 0')))
  end
  trc("kernel_dur_all_zero", z, "every one of its 4 kernel events has 'dur' 0: a trace with no kernel time cannot be scaled")
end
trc("kernels_two_devices", sub1(sub1(tr, '"External id": 2, "grid"', '"External id": 2, "device": 0, "grid"'),
                                '"External id": 3, "grid"', '"External id": 3, "device": 1, "grid"'),
    "its kernels ran on 2 devices (device 0: 1 kernels, device 1: 1 kernels): a trace is one GPU's work")
tr_sub("grid_negative", '"grid": [4, 1, 1]', '"grid": [-4, 1, 1]', "args.grid must be 3 positive integers of at most 2147483647 (got [-4,1,1])", "args")
tr_sub("grid_huge", '"grid": [4, 1, 1]', '"grid": [9223372036854775807, 1, 1]', "args.grid must be 3 positive integers of at most 2147483647 (got [9223372036854775807,1,1])", "args")
tr_sub("grid_short", '"grid": [4, 1, 1]', '"grid": [4]', "args.grid must be 3 positive integers of at most 2147483647 (got [4])", "args")
tr_sub("grid_float", '"grid": [4, 1, 1]', '"grid": [4.5, 1, 1]', "args.grid must be 3 positive integers", "args")
tr_sub("block_huge", '"block": [256, 1, 1]', '"block": [1000000, 1, 1]', "args.block must be 3 positive integers of at most 1024", "args")
tr_sub("block_zero", '"block": [256, 1, 1]', '"block": [0, 1, 1]', "args.block must be 3 positive integers of at most 1024 (got [0,1,1])", "args")
tr_sub("registers_huge", '"registers per thread": 64', '"registers per thread": 9223372036854775807',
       "args.registers per thread must be a non-negative integer of at most 65536 (got the number 9223372036854775807)", "args")
tr_sub("smem_negative", '"shared memory": 8192', '"shared memory": -8192', "args.shared memory must be a non-negative integer of at most 1073741824 (got the number -8192)", "args")
tr_sub("smem_huge", '"shared memory": 8192', '"shared memory": 1e300', "args.shared memory must be a non-negative integer", "args")
tr_sub("external_id_string", '"External id": 2, "grid"', '"External id": "two", "grid"', "args.External id must be an integer (got a string \"two\")", "args")
tr_sub("kernel_no_args", ', "ts": 30, "dur": 2.5,\n     "args": {"External id": 2, "grid": [4, 1, 1], "block": [256, 1, 1], "registers per thread": 64, "shared memory": 8192}}',
       ', "ts": 30, "dur": 2.5}', "missing 'args'")
tr_sub("input_dims_negative", '"Input Dims": [[4, 8], [16, 8], [16]]', '"Input Dims": [[-4, 8], [16, 8], [16]]',
       "args.Input Dims of 'aten::linear' must hold sizes >= 0 (got -4)", "args")
-- a size that is no integer (a string, a fraction, null), or an entry that is no list: an error naming the event, never
-- a non-tensor argument (the op was wave-scaled under a warning that named no event)
for _, c in ipairs({  -- name, the changed Input Dims, what the message says it got
  { "input_dims_string", '[["4", 8], [16, 8], [16]]', 'hold lists of integer sizes (got ["4",8])' },
  { "input_dims_fraction", '[[4, 8.5], [16, 8], [16]]', "hold lists of integer sizes (got [4,8.5])" },
  { "input_dims_null", '[[4, 8], [16, null], [16]]', "hold lists of integer sizes (got [16,null])" },
  { "input_dims_not_list", "[[4, 8], 16, [16]]", "hold lists of integer sizes (got 16)" },
  { "input_dims_tensor_list_string", '[[4, 8], [[16, "x"]], [16]]', 'hold lists of integer sizes (got [[16,"x"]])' },
  { "input_dims_string_whole", '"[[4, 8]]"', 'be a list (got a string "[[4, 8]]")' },
}) do
  tr_sub(c[1], '"Input Dims": [[4, 8], [16, 8], [16]]', '"Input Dims": ' .. c[2],
         "args.Input Dims of 'aten::linear' must " .. c[3], "args")
end
trc("events_not_array", '{"schemaVersion": 1, "traceEvents": 5}\n', "no 'traceEvents' array")
trc("event_not_object", '{"schemaVersion": 1, "traceEvents": [5]}\n', "trace event must be an object")
trc("no_events", '{"schemaVersion": 1, "traceEvents": []}\n', "no GPU kernel events")
trc("no_kernels", (tr:gsub('"cat": "kernel"', '"cat": "kernel_x"')), "no GPU kernel events")
trc("top_array", "[]\n", "no GPU kernel events")
trc("truncated", tr:sub(1, 400), "invalid JSON")
trc("empty", "", "empty")
do -- wavescale traces (a manifest, its ops.csv and kernels.csv beside it) with no kernel time, as the Chrome ones above
  local head = "op_id,seq,kernel_name,grid_x,grid_y,grid_z,block_x,block_y,block_z,regs_per_thread,smem_static_bytes," ..
               "smem_dynamic_bytes,duration_ns\n"
  -- `line` (optional): the line of `named` ("kernels.csv", or "ops.csv" for a case of `ops`) the message names
  local function wsc(name, kernels, expect, line, ops, named)
    local dir = "trace/" .. name .. "/"
    write(dir .. "ops.csv", ops or "op_id,op_name,pass,wall_ns\n0,add_,fwd,5000\n")
    write(dir .. "kernels.csv", kernels)
    case { kind = "trace", file = dir .. "trace.json", args = SCALE, expect = expect, names = dir .. (named or "kernels.csv"),
           line = line,
           text = '{"format": "wavescale-trace/1", "origin_gpu": "V100", "ops": "ops.csv", "kernels": "kernels.csv"}\n' }
  end
  wsc("wavescale_dur_all_zero", head .. "0,0,add,4,1,1,256,1,1,16,0,0,0\n-1,0,memset,1,1,1,32,1,1,8,0,0,0\n",
      "every one of its 2 kernel rows has 'duration_ns' 0: a trace with no kernel time cannot be scaled")
  wsc("wavescale_no_kernels", head, "no kernel rows: a trace with no kernels cannot be scaled")
  -- durations past the longest profiler event (1e10 µs, as a Chrome trace's 'dur'): two of 1.7e308 ns summed to inf,
  -- and the forecast was null
  wsc("wavescale_dur_huge", head .. "0,0,add,4,1,1,256,1,1,16,0,0,1.7e308\n0,1,add,4,1,1,256,1,1,16,0,0,1.7e308\n",
      "column 'duration_ns': must be at most 1e13 ns (1e10 microseconds, the longest profiler event), got '1.7e308'", 2)
  wsc("wavescale_dur_nan", head .. "0,0,add,4,1,1,256,1,1,16,0,0,nan\n", "column 'duration_ns': expected a number, got 'nan'", 2)
  wsc("wavescale_wall_huge", head .. "0,0,add,4,1,1,256,1,1,16,0,0,1000\n",
      "column 'wall_ns': must be at most 1e13 ns", 2, "op_id,op_name,pass,wall_ns\n0,add_,fwd,1e300\n", "ops.csv")
end

-------------------------------------------------------------------------------------------------- weights
-- --weights ROOT with ROOT/nvidia/bmm/{model.toml, weights.bin}; the case file is the changed model.toml or weights.bin
local wm = read("../weights/nvidia/bmm/model.toml")
local WEIGHTS = "predict --model gpt2_large --gpu h100 --mode inference --batch 1 --seq 8 --format json -o {out} --weights {root}/"
local wbin = read("../weights/nvidia/bmm/weights.bin")
-- weights.bin beside the case's model.toml when `bin` is given (the TOML checks pass and the binary is read)
-- `names`: the message names the binary (weights.bin, or the file weights_file gives) rather than model.toml
local function wtc(name, text, expect, line, bin, names)
  local dir = "weights/" .. name .. "/nvidia/bmm/"
  if bin then write(dir .. "weights.bin", bin) end
  case { kind = "weights", file = dir .. "model.toml", text = text, args = WEIGHTS .. "weights/" .. name, expect = expect,
         line = line, names = names and dir .. names }
end
local function wt_sub(name, from, to, expect, bin, names)
  local text = sub1(wm, from, to)
  wtc(name, text, expect, nil, bin, names)
end
-- engine/core/weights.cpp's fnv1a64: FNV-1a with the offset basis 1469598103934665603 (the standard one has a final 7)
local function fnv1a64(s)
  local h = 1469598103934665603
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return ("%016x"):format(h)
end
-- a binary with a consistent checksum: the loader must look at the values themselves
local function wt_bin(name, bin, expect)
  wtc(name, sub1(wm, "weights_fnv1a64 = 'b24366351b6b19a7'", "weights_fnv1a64 = '" .. fnv1a64(bin) .. "'"), expect, nil, bin,
      "weights.bin")
end
assert(fnv1a64(wbin) == "b24366351b6b19a7", "fnv1a64 of the bundled bmm weights")
wt_sub("layers_huge", "layers = [ 5, 64, 64, 64, 3 ]", "layers = [ 5, 2000000000, 64, 64, 3 ]", "'layers' must hold positive integers of at most 65536")
wt_sub("layers_wrap", "layers = [ 5, 64, 64, 64, 3 ]", "layers = [ 5, 4294967360, 64, 64, 3 ]", "'layers' must hold positive integers of at most 65536")
wt_sub("layers_negative", "layers = [ 5, 64, 64, 64, 3 ]", "layers = [ 5, -64, 64, 64, 3 ]", "'layers' must hold positive integers")
wt_sub("layers_zero", "layers = [ 5, 64, 64, 64, 3 ]", "layers = [ 5, 0, 64, 64, 3 ]", "'layers' must hold positive integers")
wt_sub("layers_wide", "layers = [ 5, 64, 64, 64, 3 ]", "layers = [ 5, 65536, 65536, 65536, 3 ]", "'layers' imply")
wt_sub("layers_shape", "layers = [ 5, 64, 64, 64, 3 ]", "layers = [ 4, 64, 3 ]", "'layers' must start with 5 inputs and end with 3 outputs")
wt_sub("bytes_wrong", "weights_bytes = 35676", "weights_bytes = 35680", "35676 bytes, expected 35676", wbin, "weights.bin")
wt_sub("bytes_negative", "weights_bytes = 35676", "weights_bytes = -1", "truncated or from another model", wbin, "weights.bin")
wt_sub("checksum_wrong", "weights_fnv1a64 = 'b24366351b6b19a7'", "weights_fnv1a64 = 'b24366351b6b19a8'", "checksum mismatch", wbin, "weights.bin")
wt_sub("family_wrong", "family = 'bmm'", "family = 'softmax'", "trained on other features than this engine computes")
wt_sub("family_unknown", "family = 'bmm'", "family = 'conv'", "unknown family 'conv'")
wt_sub("format_version", "format_version = 1", "format_version = 99", "format_version 99 is not supported")
wt_sub("activation_unknown", "activation = 'relu'", "activation = 'swish'", "unsupported activation 'swish'")
wt_sub("vendor_wrong", "vendor = 'nvidia'", "vendor = 'amd'", "trained on other features than this engine computes")
wt_sub("weights_file_escape", "weights_file = 'weights.bin'", "weights_file = '../../../../../../etc/passwd'",
       "'weights_file' must name a file beside model.toml")
wt_sub("weights_file_missing", "weights_file = 'weights.bin'", "weights_file = 'nothing.bin'", "no such file", nil, "nothing.bin")
wt_bin("weights_nan", "\0\0\192\127" .. wbin:sub(5), "float #0 is not finite")
wt_bin("weights_inf", wbin:sub(1, 400) .. "\0\0\128\255" .. wbin:sub(405), "float #100 is not finite")
wt_bin("weights_zero", ("\0"):rep(#wbin), "feature scale #0 is 0")
wt_bin("weights_truncated", wbin:sub(1, 1000), "1000 bytes, expected 35676")
wtc("syntax", wm .. "layers = [\n", "", nil)
wtc("empty", "", "", nil)

-------------------------------------------------------------------------------------------------- label JSON
-- eval models reads label/<GPU>/<tag>.json against the reference graphs opgraph/<tag>.csv
local LABEL = "eval models {file} --graphs {root}/../fixtures/neusight/opgraph --predictor roofline --format json -o {out}"
local function lbc(name, text, expect, line)
  case { kind = "label", file = "label/" .. name .. "/label/Tesla_T4/gpt2_large-inf-1024-4.json", text = text, args = LABEL,
         expect = expect, line = line }
end
local function lbl(layers, e2e) return ('{"num_layer": %s, "e2e_latency": %s, "fw_latency": 2505.2, "bwall_latency": 0}\n'):format(layers, e2e) end
lbc("e2e_negative", lbl(36, "-5"), "key 'e2e_latency' must be a time of 1e-6 to 1e9 ms (got -5)")
lbc("e2e_zero", lbl(36, "0"), "key 'e2e_latency' must be a time of 1e-6 to 1e9 ms (got 0)")
lbc("e2e_huge", lbl(36, "1e300"), "key 'e2e_latency' must be a time of 1e-6 to 1e9 ms (got 1e+300): a time that long is a unit slip")
lbc("e2e_string", lbl(36, '"slow"'), "key 'e2e_latency' must be a time of 1e-6 to 1e9 ms (got \"slow\")")
lbc("e2e_nan", lbl(36, "NaN"), "invalid JSON")
lbc("e2e_overflow", lbl(36, "1e999"), "invalid JSON")
lbc("e2e_missing", '{"num_layer": 36}\n', "missing key 'e2e_latency' (the measured time of one iteration, milliseconds)")
lbc("layers_negative", lbl(-3, 2505.2), "key 'num_layer' must be a non-negative integer")
lbc("layers_huge", lbl(1000000000000, 2505.2), "key 'num_layer' must be a non-negative integer of at most 100000")
lbc("layers_float", lbl(36.5, 2505.2), "key 'num_layer' must be a non-negative integer")
lbc("top_array", "[]\n", "missing key 'e2e_latency'")
lbc("truncated", '{"num_layer": 36,', "invalid JSON")
lbc("empty", "", "invalid JSON")
-- a key outside the four of a label (found by tests/fuzz/mutate.py: a misspelt key was ignored, exit 0)
lbc("key_typo", '{"num_layer": 36, "e2e_latency": 2505.2, "FW_LATENCY": 2505.2, "bwall_latency": 0}\n',
    "unknown key 'FW_LATENCY' (did you mean 'fw_latency'?)")
lbc("fw_string", lbl(36, 2505.2):gsub('"fw_latency": 2505.2', '"fw_latency": "x"'), "key 'fw_latency' must be 0 or a time of 1e-6 to 1e9 ms (got \"x\")")
lbc("bwall_negative", lbl(36, 2505.2):gsub('"bwall_latency": 0', '"bwall_latency": -1'),
    "key 'bwall_latency' must be 0 or a time of 1e-6 to 1e9 ms (got -1)")
-- a time under 1 ns is a unit slip (1e-300 was taken as a measurement: every APE then ~1e302 %); the line is the key's
lbc("e2e_tiny", '{\n  "num_layer": 36,\n  "e2e_latency": 1e-300,\n  "fw_latency": 2505.2,\n  "bwall_latency": 0\n}\n',
    "key 'e2e_latency' must be a time of 1e-6 to 1e9 ms (got 1e-300): a time that short is a unit slip", 3)
lbc("fw_tiny", '{\n  "num_layer": 36,\n  "e2e_latency": 2505.2,\n  "fw_latency": 1e-12,\n  "bwall_latency": 0\n}\n',
    "key 'fw_latency' must be 0 or a time of 1e-6 to 1e9 ms (got 1e-12): a time that short is a unit slip", 4)
lbc("key_unknown", '{"num_layer": 36, "e2e_latency": 2505.2, "fw_latency": 2505.2, "bwall_latency": 0, "gpu": "T4"}\n',
    "unknown key 'gpu'")

-------------------------------------------------------------------------------------------------- label-trace CSV
-- scale on a per-op label trace label/<GPU>/<tag>.csv, with its operator graph
local lt = read("fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.csv")
local LTRACE = "scale --trace {file} --from t4 --to l4 --graph {root}/../fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv " ..
               "--format json -o {out}"
local function ltc(name, text, expect, line)
  case { kind = "labeltrace", file = "labeltrace/" .. name .. "/label/Tesla_T4/gpt2_large-inf-1024-4.csv", text = text,
         args = LTRACE, expect = expect, line = line }
end
local addmm = "True,11.012403297424317,11.012403297424317,0,0,"
for _, v in ipairs { { "nan", "nan", "expected a number, got 'nan'" }, { "inf", "inf", "expected a number, got 'inf'" },
                     { "negative", "-11.0", "negative value -11.0" }, { "text", "fast", "expected a number, got 'fast'" },
                     { "hex", "0x10", "expected a number, got '0x10'" } } do
  ltc("latency_" .. v[1], with_line(lt, 29, function(l) return sub1(l, addmm, "True," .. v[2] .. "," .. v[2] .. ",0,0,") end),
      "column 'fw_latency': " .. v[3], 29)
end
-- over 11 days for one op: a unit slip as well
ltc("latency_huge", with_line(lt, 29, function(l) return sub1(l, addmm, "True,1e308,1e308,0,0,") end),
    "column 'fw_latency' must be 0 or a time of 1e-6 to 1e9 ms (got 1e308): a time that long is a unit slip", 29)
-- a time under 1 ns is a unit slip (0 is "not measured"): 1e-300 was scaled as a measurement
ltc("latency_tiny", with_line(lt, 29, function(l) return sub1(l, addmm, "True,1e-300,1e-300,0,0,") end),
    "column 'fw_latency' must be 0 or a time of 1e-6 to 1e9 ms (got 1e-300): a time that short is a unit slip", 29)
ltc("output_shape_huge", with_line(lt, 29, function(l) return sub1(l, '"(4096, 3840)"', '"(4096, 4611686018427387904)"') end),
    "column 'output_shape': shape dimensions must be in 0..2^32", 29)
ltc("output_shape_negative", with_line(lt, 29, function(l) return sub1(l, '"(4096, 3840)"', '"(4096, -3840)"') end),
    "column 'output_shape': shape dimensions must be in 0..2^32", 29)
ltc("short_row", with_line(lt, 29, function(l) return l:match("^([^,]*,[^,]*)") end), "expected 22 fields, found 2", 29)
ltc("header_only", lt:match("^[^\n]*\n"), "no op with a measured latency")
-- a misspelt column (the optional `target` silently fell back to `Name`; found by tests/fuzz/mutate.py)
ltc("column_typo", sub1(lt, ",target,", ",targt,"), "unknown column 'targt' (did you mean 'target'?)", 1)
ltc("empty", "", "empty CSV file (no header)")

-------------------------------------------------------------------------------------------------- calibration measurements
-- `predict --calibrate` (latency_ms) and `serve --batch … --calibrate` (ttft_ms / tpot_ms) measurements; the GPU is the
-- corpus's good one, so a case that wrongly passed would leave gpu/good.calibration.toml (a file the manifest test
-- flags), never a file beside gpus/.
local CAL_GPU = " --gpu {root}/gpu/good.toml --calibrate {file}"
local SERVE_CAL = "serve --model gpt2_med --batch 2 --input-len 16 --output-len 4 --predictor roofline --format json -o {out}"
  .. CAL_GPU
local function meas(name, args, text, expect, line, names)
  case { kind = "measurement", file = "measurement/" .. name .. ".toml", text = text, args = args, expect = expect,
         line = line, names = names }
end
meas("predict_missing", PREDICT .. CAL_GPU, 'note = "x"\n', "missing key 'latency_ms'")
meas("predict_negative", PREDICT .. CAL_GPU, "latency_ms = -3\n", "latency_ms must be a time of 1e-6 to 1e9 ms (got -3)", 1)
meas("predict_unknown_key", PREDICT .. CAL_GPU, "latency_ms = 3\nttft_ms = 3\n", "unknown key 'ttft_ms'", 2)
meas("serve_neither", SERVE_CAL, 'note = "x"\n', "needs ttft_ms (the measured prefill of the batch) or tpot_ms")
meas("serve_latency_ms", SERVE_CAL, "latency_ms = 3\n", { "unknown key 'latency_ms'",
  "latency_ms is predict --calibrate's" }, 1)
meas("serve_misspelt", SERVE_CAL, "ttft_ms = 3\ntpot = 1\n", "unknown key 'tpot' (did you mean 'tpot_ms'?)", 2)
meas("serve_ttft_negative", SERVE_CAL, "ttft_ms = -3\n", "ttft_ms must be a time of 1e-6 to 1e9 ms (got -3)", 1)
meas("serve_ttft_zero", SERVE_CAL, "ttft_ms = 0\ntpot_ms = 1\n", "ttft_ms must be a time of 1e-6 to 1e9 ms (got 0)", 1)
meas("serve_tpot_string", SERVE_CAL, 'tpot_ms = "fast"\n', "tpot_ms must be a time of 1e-6 to 1e9 ms (got a string)", 1)
meas("serve_tpot_nan", SERVE_CAL, "ttft_ms = 2\ntpot_ms = nan\n", "tpot_ms must be a time of 1e-6 to 1e9 ms (got nan)", 2)
meas("serve_tpot_inf", SERVE_CAL, "tpot_ms = inf\n", "tpot_ms must be a time of 1e-6 to 1e9 ms (got inf)", 1)
meas("predict_huge", PREDICT .. CAL_GPU, "latency_ms = 1e10\n", "latency_ms must be a time of 1e-6 to 1e9 ms (got 1e+10): a time that long is a unit slip", 1)
meas("serve_tpot_huge", SERVE_CAL, "tpot_ms = 1e12\n", "tpot_ms must be a time of 1e-6 to 1e9 ms (got 1e+12): a time that long is a unit slip", 1)
-- under 1 ns: a unit slip that fitted every factor to its limit
meas("predict_tiny", PREDICT .. CAL_GPU, "latency_ms = 1e-300\n", "latency_ms must be a time of 1e-6 to 1e9 ms (got 1e-300): a time that short is a unit slip", 1)
meas("serve_ttft_tiny", SERVE_CAL, "ttft_ms = 2\ntpot_ms = 5e-9\n", "tpot_ms must be a time of 1e-6 to 1e9 ms (got 5e-09): a time that short is a unit slip", 2)
meas("serve_note_number", SERVE_CAL, "tpot_ms = 1\nnote = 4\n", "note must be a string", 2)
meas("serve_table", SERVE_CAL, "tpot_ms = 1\n[ttft]\nms = 3\n", "unknown key 'ttft'", 2)
meas("serve_syntax", SERVE_CAL, "tpot_ms = 1\nttft_ms = \n", "expected value", 2)
meas("serve_rate", SERVE_CAL:gsub("%-%-batch 2", "--rate 2"), "ttft_ms = 3\n",
  "needs a static batch (--batch N)", nil, "--calibrate")
meas("serve_no_decode", SERVE_CAL:gsub("%-%-output%-len 4", "--output-len 1"), "tpot_ms = 3\n",
  "tpot_ms given, but the run has no decode step")

-------------------------------------------------------------------------------------------------- serve requests files
-- `serve --requests-file` traces (scripts/neusight/arrivals.lua parse): CSV with a header, or JSON Lines; the Azure
-- traces' TIMESTAMP,ContextTokens,GeneratedTokens or arrival_s,input_len,output_len.
local SERVE_TRACE = "serve --model gpt2_med --gpu h100 --predictor roofline --format json -o {out} --requests-file {file}"
local function rqf(name, text, expect, line)
  case { kind = "requests", file = "requests/" .. name, text = text, args = SERVE_TRACE, expect = expect, line = line }
end
local RH = "arrival_s,input_len,output_len\n"
rqf("empty.csv", "", "empty: no requests")
rqf("header_only.csv", RH, "no requests: the header is the only line", 1)
rqf("missing_column.csv", "arrival_s,input_len\n0,8\n", "no output length column: one of output_len, generatedtokens", 1)
rqf("column_typo.csv", "arrival_s,input_len,outptu_len\n0,8,8\n", "'outptu_len' is not one of them", 1)
rqf("two_columns.csv", "TIMESTAMP,arrival_s,input_len,output_len\n0,0,8,8\n",
  "both 'arrival_s' and 'TIMESTAMP' give the arrival time: keep one", 1)
rqf("unsorted.csv", RH .. "0,8,8\n2,8,8\n1.5,8,8\n", "arrival_s 1.5 comes 0.5 s before the previous row's (line 3)", 4)
rqf("negative.csv", RH .. "-1,8,8\n", "arrival_s must not be negative (got -1)", 2)
rqf("time_word.csv", RH .. "0,8,8\nlater,8,8\n", "arrival_s must be a number of seconds (got 'later')", 3)
rqf("fraction.csv", RH .. "0,8.5,8\n", "input_len must be a positive integer number of tokens (got '8.5')", 2)
rqf("zero_output.csv", RH .. "0,8,0\n", "output_len must be a positive integer number of tokens (got 0)", 2)
rqf("short_row.csv", RH .. "0,8,8\n1,8\n", "2 fields, but the header (line 1) names 3 columns", 3)
rqf("too_long.csv", RH .. "0,8,8\n1,16777216,8\n", "a request of input 16777216 + output 8 tokens reaches a context", 3)
rqf("bad_date.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,8,8\n2023-11-31 00:00:00,8,8\n",
  "TIMESTAMP '2023-11-31 00:00:00': no such date", 3)
rqf("time_back.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,8,8\n2023-11-16 18:15:46.25,8,8\n",
  "is 0.25 s before the first row's (line 2)", 3)
rqf("mixed_zones.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:47+05:00,8,8\n2023-11-16 18:15:48,8,8\n",
  "TIMESTAMP '2023-11-16 18:15:48' has no zone, but the first row's (line 2) has one", 3)
rqf("string_time.jsonl", '{"arrival_s": "0", "input_len": 8, "output_len": 8}\n',
  "arrival_s must be a number of seconds (got the string '0')", 1)
rqf("syntax.jsonl", '{"arrival_s": 0, "input_len": 8, "output_len": 8}\n{"arrival_s": 1, "input_len": 8 "output_len": 8}\n',
  "',' or '}' expected after a value", 2)
rqf("string_length.jsonl", '{"arrival_s": 0, "input_len": "8", "output_len": 8}\n',
  "input_len must be a positive integer number of tokens (got the string '8')", 1)
rqf("missing_key.jsonl", '{"arrival_s": 0, "input_len": 8, "output_len": 8}\n{"arrival_s": 1, "input_len": 8}\n',
  'no "output_len" (the output length; the first row has it)', 2)

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
