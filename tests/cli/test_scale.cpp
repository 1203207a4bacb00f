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

// ---- Chrome-trace JSON and wavescale traces: ratio routing for kernel-varying ops, wave scaling otherwise.
namespace {
const std::string chrome = "tests/fixtures/traces/chrome/tiny.json";
const std::string wavescale = "tests/fixtures/traces/wavescale/trace.json";
const std::string v100 = "'Tesla V100-PCIE-32GB'", a100 = "'NVIDIA A100-PCIE-40GB'";

json scale_trace(const std::string& file, const std::string& args) {
  const auto r = run_cli("scale --trace '" + file + "' " + args + " --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}
}  // namespace

TEST_CASE("scale: measured traces scaled to the same GPU come back unchanged", "[cli][scale]") {
  for (const auto& file : {chrome, wavescale}) {
    for (const std::string variant : {"code", "paper"}) {
      INFO(file << " " << variant);
      const json j = scale_trace(file, "--from " + v100 + " --to v100 --wave-variant " + variant);
      REQUIRE(j["ops"].size() >= 3);
      size_t wave = 0;
      for (const auto& op : j["ops"]) {
        INFO(op.dump());
        if (op["method"] == "wave") ++wave;
        CHECK(double(op["scaled_ms"]) == Approx(double(op["origin_ms"])).epsilon(1e-12));
      }
      CHECK(wave >= 2);
      CHECK(double(j["latency_ms"]) == Approx(double(j["origin_ms"])).epsilon(1e-12));
    }
  }
}

TEST_CASE("scale: a Chrome trace's GEMM moves by the predictor's ratio, other ops by wave scaling", "[cli][scale]") {
  const json j = scale_trace(chrome, "--from " + v100 + " --to " + a100);
  CHECK(j["mode"] == "train");
  bool ratio_seen = false;
  double fw = 0, bw = 0;
  for (const auto& op : j["ops"]) {
    INFO(op.dump());
    if (op["phase"] == "forward") fw += double(op["scaled_ms"]);
    else if (op["phase"] == "backward" || op["phase"] == "accumulate") bw += double(op["scaled_ms"]);
    if (op["op"] == "aten::linear") {
      ratio_seen = true;
      CHECK(op["method"] == "ratio");
      CHECK(op["family"] == "gemm");
      CHECK(double(op["origin_ms"]) == Approx(0.0025));
      const double from = op["predicted_from_ms"], to = op["predicted_to_ms"];
      REQUIRE(from > 0);
      CHECK(double(op["scaled_ms"]) == Approx(double(op["origin_ms"]) * to / from).epsilon(1e-12));
    } else if (op["op"] == "aten::add") {
      CHECK(op["method"] == "wave");
      CHECK(!op.contains("predicted_from_ms"));
    }
  }
  CHECK(ratio_seen);
  CHECK(double(j["forward_ms"]) == Approx(fw));
  CHECK(double(j["backward_ms"]) == Approx(bw));
  CHECK(double(j["latency_ms"]) == Approx(fw + bw));
}

TEST_CASE("scale: wavescale ops without shapes fall back to wave scaling with a warning", "[cli][scale]") {
  const auto r = run_cli("scale --trace " + wavescale + " --from " + v100 + " --to " + a100 + " --format json");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("'linear' ops routed to the ratio had missing or unsupported input shapes") != std::string::npos);
  const json j = json::parse(r.out);
  CHECK(j["ops"].size() == 4);
  for (const auto& op : j["ops"]) CHECK(op["method"] != "ratio");
  // the optimizer op has no kernels: its time is kept, and counts in the end-to-end latency only
  CHECK(double(j["latency_ms"]) > double(j["forward_ms"]) + double(j["backward_ms"]));
}

TEST_CASE("scale: --wave-variant paper changes a multi-wave kernel's result", "[cli][scale]") {
  ns_test::temp_dir t;
  t.write("ops.csv", "op_id,op_name,pass,wall_ns\n0,add_,fwd,\n");
  t.write("kernels.csv",
          "op_id,seq,kernel_name,grid_x,grid_y,grid_z,block_x,block_y,block_z,regs_per_thread,smem_static_bytes,"
          "smem_dynamic_bytes,duration_ns\n0,0,elementwise_add,100003,1,1,256,1,1,32,0,0,1000000\n");
  const auto manifest = t.write("trace.json", R"({"format": "wavescale-trace/1", "origin_gpu": "V100",
    "ops": "ops.csv", "kernels": "kernels.csv"})");
  const json code = scale_trace(manifest.string(), "--from " + v100 + " --to " + a100);
  const json paper = scale_trace(manifest.string(), "--from " + v100 + " --to " + a100 + " --wave-variant paper");
  REQUIRE(code["ops"].size() == 1);
  REQUIRE(paper["ops"].size() == 1);
  const double c = code["ops"][0]["scaled_ms"], p = paper["ops"][0]["scaled_ms"];
  CHECK(code["ops"][0]["origin_ms"] == Approx(1.0));
  CHECK(c > 0);
  CHECK(p > 0);
  CHECK(std::abs(c - p) > 1e-6 * c);
  const auto bad = run_cli("scale --trace '" + manifest.string() + "' --from v100 --to v100 --wave-variant nope");
  CHECK(bad.code != 0);
}
