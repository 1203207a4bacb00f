-- tests/scripts/test_overhead.lua — host-side launch overhead rule (scripts/neusight/overhead.lua).
local O = require "neusight.overhead"

local function eq(got, want, what)
  if got ~= want then error(("%s:\n  expected %s\n  got      %s"):format(what, tostring(want), tostring(got)), 2) end
end

local M = {}

function M.test_max_rule_and_views()
  local saved = O.PARAMS.test_gpu
  O.PARAMS.test_gpu = { launch_s = 5e-6 }
  local out = O.apply({ 0, 1e-6, 5e-6, 2e-5 }, { name = "test_gpu" }, "on")
  O.PARAMS.test_gpu = saved
  eq(out[1], 0, "a view launches nothing")
  eq(out[2], 5e-6, "short kernel waits for the host")
  eq(out[3], 5e-6, "equal")
  eq(out[4], 2e-5, "long kernel hides the host")
end

function M.test_modes()
  eq(O.apply({ 1e-6 }, { name = "x" }, "off"), nil, "off")
  eq(O.apply({ 1e-6 }, { name = "x" }, "default") == nil, not O.enabled, "default follows M.enabled")
  local ok, err = pcall(O.apply, { 1 }, { name = "x" }, "maybe")
  eq(ok, false, "bad mode fails")
  eq(err, 'overhead mode must be "on", "off" or "default" (got maybe)', "message")
end

function M.test_fitted_default_is_unknown_gpu_fallback()
  eq(O.params({ name = "no such gpu" }), O.PARAMS.default, "fallback")
  assert(O.PARAMS.default.launch_s >= 0)
end

return M
