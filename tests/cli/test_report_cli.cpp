// tests/cli/test_report_cli.cpp — the single forecast's report is rendered by scripts/neusight/report.lua (issue 14):
// a field added in Lua (the module through --scripts, or a workload's report hook) reaches the JSON, and the table when
// its formatter is given it, with no C++ change.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::ordered_json;
using ns_test::run_cli;
using ns_test::slurp;
using ns_test::source_dir;
using ns_test::temp_dir;

namespace {

const char* const workload = R"lua(
return {
  gpu = "tests/fixtures/gpus/tiny.toml", mode = "inference", batch = 2, seq = 8,
  description = "two tiny nodes",
  model = function(opts)
    return {
      { op = "relu", name = "a", inputs = { { 2, 8, 64 } }, output = { 2, 8, 64 }, count = 3 },
      { op = "relu", name = "b", inputs = { { 2, 8, 64 } }, output = { 2, 8, 64 } },
    }
  end,
})lua";

// The bundled neusight.report with a new field: the workload's description, and the number of kernels; the table's
// formatter prints both. Nothing else changes.
std::string report_with_new_fields() {
  std::string text = slurp(source_dir / "scripts/neusight/report.lua");
  const std::string tail = "return M\n";
  REQUIRE(text.size() > tail.size());
  REQUIRE(text.compare(text.size() - tail.size(), tail.size(), tail) == 0);
  text.resize(text.size() - tail.size());
  return text + R"lua(
local workload, result, format_table = M.workload, M.result, M.format_table
function M.workload(w, facts)
  local f = workload(w, facts)
  f.description = w.description
  return f
end
function M.result(f, fc, x)
  local r = result(f, fc, x)
  r.description = f.description
  r.kernel_count = #fc.kernels
  return r
end
function M.format_table(r)
  return format_table(r) .. ("description      %s (%d kernels)\n"):format(r.description, r.kernel_count)
end
return M
)lua";
}

}  // namespace

TEST_CASE("report: a field added in Lua reaches the JSON and the table without a C++ change", "[cli][report]") {
  temp_dir t;
  const std::string script = t.write("w.lua", workload).string();
  const std::string scripts = t.path.string() + "/s";
  t.write("s/neusight/report.lua", report_with_new_fields());
  const std::string args = "run '" + script + "' --predictor roofline ";
  // bundled: no such field
  const auto plain = run_cli(args + "--format json");
  INFO("stderr: " << plain.err);
  REQUIRE(plain.code == 0);
  const json before = json::parse(plain.out);
  CHECK_FALSE(before.contains("description"));
  CHECK_FALSE(before.contains("kernel_count"));
  // the override: the new fields follow the documented ones, and everything else is as it was
  const auto r = run_cli(args + "--format json --scripts '" + scripts + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  json after = json::parse(r.out);
  CHECK(after["description"] == "two tiny nodes");
  CHECK(after["kernel_count"] == 2);
  CHECK(std::prev(after.end()).key() == "kernel_count");  // fields not in the module's order come last, sorted
  after.erase("description");
  after.erase("kernel_count");
  CHECK(after == before);
  // the table shows it through its formatter; the CSV, whose formatter was not changed, as one summary row each (its
  // summary rows are the JSON's fields), everything else as it was
  const auto table = run_cli(args + "--scripts '" + scripts + "'");
  REQUIRE(table.code == 0);
  CHECK_THAT(table.out, Catch::EndsWith("description      two tiny nodes (2 kernels)\n"));
  std::string csv = run_cli(args + "--format csv --scripts '" + scripts + "'").out;
  for (const std::string line : {"description,,,0,,,,0,0,0,0,0,0,0,0,0,0,summary,two tiny nodes\n",
                                 "kernel_count,,,0,,,,0,0,0,0,0,0,0,0,0,0,summary,2\n"}) {
    const size_t at = csv.find("\n" + line);
    REQUIRE(at != std::string::npos);
    csv.erase(at + 1, line.size());
  }
  CHECK(csv == run_cli(args + "--format csv").out);
}

TEST_CASE("report: the JSON keeps its field order and writes null tiles and empty objects", "[cli][report]") {
  temp_dir t;
  const std::string script = t.write("w.lua", workload).string();
  const auto r = run_cli("run '" + script + "' --predictor roofline --format json");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  REQUIRE(keys.size() > 3);
  CHECK(keys[0] == "neusight_version");
  CHECK(keys.back() == "ops");
  REQUIRE(j["ops"].size() == 2);
  CHECK(j["ops"][0]["name"] == "a");
  CHECK(j["ops"][0]["count"] == 3);
  CHECK(j["ops"][0]["dims"] == json{{"rows", 16}, {"hidden", 64}});
  CHECK(j["figures"].is_object());
}

TEST_CASE("report: a workload's report hook adds fields to the JSON", "[cli][report]") {
  temp_dir t;
  std::string hooked = workload;
  hooked.replace(hooked.find("  model = function"), 0,
                 "  report = function(r) r.tokens = r.batch * r.seq; r.described = r.source ~= nil end,\n");
  const std::string script = t.write("w.lua", hooked).string();
  const auto r = run_cli("run '" + script + "' --predictor roofline --format json");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["tokens"] == 16);
  CHECK(j["described"] == true);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  REQUIRE(keys.size() > 3);
  CHECK(keys[keys.size() - 3] == "ops");  // the report's own fields first, then the workload's, sorted
  CHECK(keys[keys.size() - 2] == "described");
  CHECK(keys.back() == "tokens");
  // not a function: the workload's field check says so
  std::string bad = workload;
  bad.replace(bad.find("  model = function"), 0, "  report = 3,\n");
  const auto e = run_cli("run '" + t.write("bad.lua", bad).string() + "' --predictor roofline");
  CHECK(e.code == 1);
  CHECK_THAT(e.err, Catch::Contains("field 'report' must be a function(r) adding fields to the report (got 3)"));
}
