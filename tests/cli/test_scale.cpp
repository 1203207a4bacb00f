// tests/cli/test_scale.cpp — `neusight scale` on a per-op label trace (fixture copy of the NeuSight data).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;

namespace {
const std::string trace = "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.csv";

json scale_json(const std::string& args) {
  const auto r = run_cli("scale --trace " + trace + " " + args + " --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}
}  // namespace

TEST_CASE("scale: to the same GPU the trace comes back unchanged", "[cli][scale]") {
  const json j = scale_json("--from 'Tesla T4' --to t4");
  CHECK(j["layers"] == 36);  // from the model config beside the fixture data
  CHECK(j["mode"] == "inference");
  CHECK_THAT(double(j["latency_ms"]), Catch::Matchers::WithinRel(double(j["origin_ms"]), 1e-12));
  double sum = 0;
  for (const auto& op : j["ops"]) {
    CHECK(double(op["scaled_ms"]) == Approx(double(op["origin_ms"])).epsilon(1e-12));
    sum += double(op["scaled_ms"]);
  }
  CHECK_THAT(sum, Catch::Matchers::WithinRel(double(j["latency_ms"]), 1e-9));
}

TEST_CASE("scale: each op moves by the ratio of the tile predictor's forecasts", "[cli][scale]") {
  const json j = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB'");
  size_t with_kernels = 0;
  for (const auto& op : j["ops"]) {
    const double from = op["predicted_from_ms"], to = op["predicted_to_ms"], origin = op["origin_ms"];
    if (from > 0) {
      ++with_kernels;
      CHECK(double(op["scaled_ms"]) == Approx(origin * to / from).epsilon(1e-9));
    } else {
      CHECK(double(op["scaled_ms"]) == Approx(origin));  // no kernels: host time, kept
    }
  }
  CHECK(with_kernels > 20);
  CHECK(double(j["latency_ms"]) < double(j["origin_ms"]));  // the A100 is faster than the T4
}

TEST_CASE("scale: a trace without its operator graph is a clear error", "[cli][scale]") {
  ns_test::temp_dir t;
  const auto copy = t.write("label/Tesla_T4/gpt2_large-inf-1024-4.csv", ns_test::slurp(ns_test::source_dir / trace));
  const auto r = run_cli("scale --trace '" + copy.string() + "' --from t4 --to l4");
  CHECK(r.code == 1);
  CHECK(r.err.find("no operator graph for this trace at") != std::string::npos);
}
