// tests/lua_api/test_lua_scripts.cpp — runs every test_* function of tests/scripts/test_*.lua in the sandbox.
#include <catch2/catch.hpp>

#include <algorithm>

#include "lua/session.h"
#include "test_util.h"

using namespace ns;

TEST_CASE("Lua-side unit tests", "[lua][scripts]") {
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(ns_test::source_dir / "tests/scripts")) {
    const std::string name = f.path().filename().string();
    if (name.rfind("test_", 0) == 0 && f.path().extension() == ".lua") files.push_back(f.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  for (const auto& file : files) {
    session_options o;
    o.data_root = ns_test::source_dir;
    // The tests are ours, not a user's script: under ASan + UBSan with every core busy (CI) a Monte-Carlo test took
    // more than the 8 s a user's call gets (stop 32), so they get 120 s; a test that loops forever still stops.
    if (o.limits.seconds > 0 && o.limits.seconds < 120) o.limits.seconds = 120;
    session s(o);
    const auto names = s.lua_test_names(file);
    CHECK(!names.empty());
    for (const auto& name : names) {
      DYNAMIC_SECTION(file.filename().string() << ": " << name) {
        try {
          s.lua_test_run(file, name);
        } catch (const std::exception& e) {
          FAIL(e.what());
        }
      }
    }
  }
}
