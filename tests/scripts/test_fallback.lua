-- tests/scripts/test_fallback.lua — memory-bound fallback for ops without a rule: bytes and fixed latency.
local fallback = require "neusight.fallback"

local function close(got, want, what)
  if math.abs(got - want) > 1e-12 * math.abs(want) then
    error(("%s: expected %.17g, got %.17g"):format(what, want, got), 2)
  end
end

local GPU = { name = "test", mem_bw_gbps = 2000 }

local T = {}

function T.test_forward_moves_inputs_and_output_once()
  local node = make_node { op = "cumsum", name = "c", inputs = { { 4, 1024 }, { 1 } }, output = { 4, 1024 } }
  local ks = fallback.forward(node, GPU)
  assert(#ks == 1, "one kernel")
  local k = ks[1]
  assert(k.kind == "memory" and k.name == "MEM", "a MEM kernel")
  close(k.flops, 0, "flops")
  close(k.bytes, 4 * (4096 + 1 + 4096), "bytes")
  close(k.seconds, k.bytes / (fallback.efficiency * 2000e9) + fallback.launch_overhead_s, "seconds")
  close(fallback.efficiency, 0.8, "documented efficiency")
  close(fallback.launch_overhead_s, 5e-6, "documented launch overhead")
end

function T.test_backward_costs_the_same_once()
  local node = make_node { op = "cumsum", name = "c", inputs = { { 8, 8 } }, output = { 8, 8 }, dtype = "bf16" }
  local fw, bw = fallback.forward(node, GPU), fallback.backward(node, GPU)
  assert(#bw == 1, "one kernel")
  close(bw[1].bytes, 2 * 128, "bf16 bytes")
  close(bw[1].seconds, fw[1].seconds, "same latency as forward")
end

return T
