// tests/lua_api/test_overhead.cpp — session::overhead_apply: scripts/neusight/overhead.lua after prediction.
#include <catch2/catch.hpp>

#include "core/gpu_spec.h"
#include "lua/session.h"
#include "test_util.h"

using ns_test::source_dir;
using ns_test::temp_dir;

TEST_CASE("overhead: the script's rule is applied per launch, off leaves seconds alone", "[lua][overhead]") {
  temp_dir t;
  t.write("neusight/overhead.lua", R"(
    local real = { PARAMS = { default = { launch_s = 1e-3 } }, enabled = true }
    function real.apply(seconds, gpu, mode)
      if mode == "off" or (mode == "default" and not real.enabled) then return nil end
      local out = {}
      for i, s in ipairs(seconds) do out[i] = (s > 0 and s < 1e-3) and 1e-3 or s end
      return out
    end
    return real)");
  ns::session_options o;
  o.data_root = source_dir;
  o.script_dirs.push_back(t.path);
  ns::session s(o);
  const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve("l4");
  std::vector<double> sec{0, 1e-6, 2e-3};
  CHECK_FALSE(s.overhead_apply(sec, gpu, "off"));
  CHECK(sec == std::vector<double>{0, 1e-6, 2e-3});
  CHECK(s.overhead_apply(sec, gpu, "default"));
  CHECK(sec == std::vector<double>{0, 1e-3, 2e-3});
}

TEST_CASE("overhead: the shipped script is off by default and rejects a bad mode", "[lua][overhead]") {
  ns::session_options o;
  o.data_root = source_dir;
  ns::session s(o);
  const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve("l4");
  std::vector<double> sec{1e-7, 1e-3};
  CHECK_FALSE(s.overhead_apply(sec, gpu, "default"));
  CHECK(s.overhead_apply(sec, gpu, "on"));
  CHECK(sec[1] == 1e-3);
  CHECK_THROWS_WITH(s.overhead_apply(sec, gpu, "maybe"),
                    Catch::Contains("overhead mode must be \"on\", \"off\" or \"default\" (got maybe)"));
}

TEST_CASE("overhead: on says why it changes nothing where launch_s is 0, off and default say nothing",
          "[lua][overhead]") {
  ns::session_options o;
  o.data_root = source_dir;
  ns::session s(o);
  const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve("l4");
  std::vector<double> sec{1e-7, 1e-3};
  std::vector<std::string> notes;
  CHECK(s.overhead_apply(sec, gpu, "on", &notes));
  CHECK(sec == std::vector<double>{1e-7, 1e-3});  // the shipped launch_s = 0 raises nothing
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::StartsWith("--overhead on has no effect: scripts/neusight/overhead.lua has no "
                                         "per-launch host cost for " + gpu.name + " (PARAMS.default.launch_s = 0"));
  notes.clear();
  CHECK_FALSE(s.overhead_apply(sec, gpu, "off", &notes));
  CHECK_FALSE(s.overhead_apply(sec, gpu, "default", &notes));
  CHECK(notes.empty());
}

TEST_CASE("overhead: a script's second result must be a string or nil", "[lua][overhead]") {
  temp_dir t;
  t.write("neusight/overhead.lua", R"(
    return { apply = function(seconds, gpu, mode) return nil, 42 end })");
  ns::session_options o;
  o.data_root = source_dir;
  o.script_dirs.push_back(t.path);
  ns::session s(o);
  const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve("l4");
  std::vector<double> sec{1e-7};
  CHECK_THROWS_WITH(s.overhead_apply(sec, gpu, "on"),
                    Catch::Contains("apply's second result must be a string or nil (got number)"));
}
