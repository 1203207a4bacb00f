// tests/cli/cli_json.h — run a neusight command with --format json in process and parse its output (exit code 0
// required; the command and its stderr are shown when it fails). `env`: as run_cli's.
#pragma once
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace ns_test {

inline nlohmann::json run_json(const std::string& cmd, const std::string& env = "") {
  const auto r = run_cli(cmd + " --format json", env);
  INFO(cmd << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace ns_test
