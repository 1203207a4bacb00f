// tests/cli/cli_json.h — run a neusight command with --format json in process and parse its output (exit code 0
// required; the command and its stderr are shown when it fails), and read the warnings of such a document.
#pragma once
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace ns_test {

// `env`: as run_cli's; `err` (when given) gets the command's stderr.
inline nlohmann::json run_json(const std::string& cmd, const std::string& env = "", std::string* err = nullptr) {
  const auto r = run_cli(cmd + " --format json", env);
  INFO(cmd << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  if (err) *err = r.err;
  return nlohmann::json::parse(r.out);
}

// How many of `warnings` (a document's "warnings": an array of strings) contain `text`.
inline size_t warnings_with(const nlohmann::json& warnings, const std::string& text) {
  size_t n = 0;
  for (const auto& w : warnings) n += w.get<std::string>().find(text) != std::string::npos;
  return n;
}

// Whether one of `warnings` contains `text`.
inline bool warned(const nlohmann::json& warnings, const std::string& text) { return warnings_with(warnings, text) > 0; }

// A number as a TOML/JSON literal that reads back to the same double (17 significant digits).
inline std::string num(double x) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

}  // namespace ns_test
