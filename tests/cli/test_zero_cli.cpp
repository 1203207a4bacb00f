// tests/cli/test_zero_cli.cpp — sharded data parallelism (--zero, parallel.zero: scripts/neusight/parallel/zero.lua):
// Llama-3-8B's model state per GPU under ZeRO-3 against the closed form, --zero 1 as --distributed-optimizer, the
// refusals (a stage out of range, with --distributed-optimizer, ZeRO-2/3 with a pipeline), a comparison over stages,
// and search ranking layouts under each stage (where ZeRO-3 fits and DDP does not).
#include <catch2/catch.hpp>

#include <string>
#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;

namespace {
const std::string llama8 =
    "predict --model llama3_8b --gpu h100 --mode train --batch 8 --seq 2048 --dtype bf16 --predictor roofline "
    "--format json --dp 8";
}

// Llama-3.1-8B: 8,030,261,248 parameters (HF's count): 32 layers of 218,112,000, the token embedding 525,336,576 and the
// final norm + LM head 525,340,672. Megatron amp bf16 with Adam: 2 + 4 + 4 + 8 = 18 B per parameter; ZeRO-3 over dp 8
// keeps 1/8 of each, plus the largest two neighbouring units (the one computing and the one prefetched: norm + head
// and the last layer; the embedding and the head are never gathered together) unsharded: their bf16 parameters and
// fp32 gradients, (525,340,672 + 218,112,000) x 6 B.
TEST_CASE("zero 3: Llama-3-8B state per GPU is 18 psi / 8 plus two unsharded units", "[cli][zero]") {
  const auto r = run_cli(llama8 + " --zero 3");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const json& par = j["parallel"];
  CHECK(par["zero"] == 3);
  CHECK(par["distributed_optimizer"] == true);
  const double psi = 8030261248.0;
  CHECK(par["devices"][0]["params"].get<double>() == Approx(psi).epsilon(1e-12));
  const json& st = j["memory"]["state"];
  CHECK(st["weights_gb"].get<double>() == Approx(2 * psi / 8 / 1e9).epsilon(1e-9));
  CHECK(st["gradients_gb"].get<double>() == Approx(4 * psi / 8 / 1e9).epsilon(1e-9));
  CHECK(st["master_gb"].get<double>() == Approx(4 * psi / 8 / 1e9).epsilon(1e-9));
  CHECK(st["optimizer_gb"].get<double>() == Approx(8 * psi / 8 / 1e9).epsilon(1e-9));
  const double gathered = (525340672.0 + 218112000.0) * 6;
  CHECK(st["gathered_gb"].get<double>() == Approx(gathered / 1e9).epsilon(1e-9));
  CHECK(j["memory"]["state_gb"].get<double>() == Approx((18 * psi / 8 + gathered) / 1e9).epsilon(1e-9));
  // no bucket all-reduce and no parameter all-gather after the step: the data-parallel traffic is the units'
  CHECK(par["devices"][0]["dp_buckets"] == 0);
  CHECK(par["devices"][0]["dp_comm_ms"].get<double>() > 0);
  // ZeRO-2: the gradients sharded too, the weights whole, nothing gathered
  const auto two = run_cli(llama8 + " --zero 2");
  REQUIRE(two.code == 0);
  const json s2 = json::parse(two.out)["memory"]["state"];
  CHECK(s2["weights_gb"].get<double>() == Approx(2 * psi / 1e9).epsilon(1e-9));
  CHECK(s2["gradients_gb"].get<double>() == Approx(4 * psi / 8 / 1e9).epsilon(1e-9));
  CHECK_FALSE(s2.contains("gathered_gb"));
  // the table names it
  const auto table = run_cli("predict --model llama3_8b --gpu h100 --mode train --batch 8 --seq 2048 --dtype bf16 "
                             "--predictor roofline --dp 8 --zero 3");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("megatron kernels, ZeRO-3") != std::string::npos);
  CHECK(table.out.find("weights + gradients + master + optimizer sharded over dp 8") != std::string::npos);
  CHECK(table.out.find("data-parallel ZeRO-3 parameter all-gathers") != std::string::npos);
  // inference shards nothing (a warning says --zero has no effect): the layout line does not name a stage
  const auto inference = run_cli("predict --model llama3_8b --gpu h100 --mode inference --batch 8 --seq 2048 "
                                 "--dtype bf16 --predictor roofline --dp 2 --zero 3");
  REQUIRE(inference.code == 0);
  CHECK(inference.err.find("has no effect") != std::string::npos);
  CHECK(inference.out.find("megatron kernels\n") != std::string::npos);
  CHECK(inference.out.find("ZeRO-3") == std::string::npos);
}

TEST_CASE("zero 1 is the distributed optimizer", "[cli][zero]") {
  const auto z1 = run_cli(llama8 + " --zero 1");
  const auto dist = run_cli(llama8 + " --distributed-optimizer");
  INFO(z1.err << dist.err);
  REQUIRE(z1.code == 0);
  REQUIRE(dist.code == 0);
  const json a = json::parse(z1.out), b = json::parse(dist.out);
  CHECK(a["parallel"]["zero"] == 1);
  CHECK(b["parallel"]["zero"] == 1);
  CHECK(a["latency_ms"] == b["latency_ms"]);
  CHECK(a["memory_gb"] == b["memory_gb"]);
  // giving both is refused (one fact, two names)
  const auto both = run_cli(llama8 + " --zero 1 --distributed-optimizer");
  CHECK(both.code != 0);
  CHECK((both.err.find("--zero excludes --distributed-optimizer") != std::string::npos ||
         both.err.find("--distributed-optimizer excludes --zero") != std::string::npos));
}

TEST_CASE("zero: a stage out of range and a combination not modelled are refused by the flag", "[cli][zero]") {
  const auto range = run_cli(llama8 + " --zero 4");
  CHECK(range.code == 1);
  CHECK(range.err.find("--zero: 0, 1, 2 or 3 expected") != std::string::npos);
  const auto name = run_cli(llama8 + " --zero full");
  CHECK(name.code == 1);
  CHECK(name.err.find("--zero: 0, 1, 2 or 3 expected (the ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, "
                      "3 + parameters), got \"full\"") != std::string::npos);
  const auto pp = run_cli(llama8 + " --zero 3 --pp 2 --microbatches 2");
  CHECK(pp.code == 1);
  CHECK(pp.err.find("--zero: ZeRO stage 3 shards the gradients and parameters over dp, which is not run with pipeline "
                    "parallelism (pp = 2)") != std::string::npos);
  // at dp 1 it shards nothing: said, not refused
  const auto one = run_cli("predict --model llama3_8b --gpu h100 --mode train --batch 8 --seq 2048 --dtype bf16 "
                           "--predictor roofline --format json --tp 2 --zero 3");
  INFO(one.err);
  CHECK(one.code == 0);
  CHECK(one.err.find("parallel.zero (--zero) has no effect") != std::string::npos);
}

TEST_CASE("zero: a comparison over stages has a zero column", "[cli][zero]") {
  const auto r = run_cli(llama8 + " --zero 0,3");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][0]["zero"] == 0);
  CHECK(j["rows"][1]["zero"] == 3);
  CHECK(j["rows"][1]["memory_gb"].get<double>() < j["rows"][0]["memory_gb"].get<double>());
}

// Llama-3-8B on 8 H100s without tensor parallelism: dp 8 under DDP holds 18 B x 8.03 B = 145 GB of state per GPU and
// does not fit; under ZeRO-3 it does. search --zero ranks each layout under each stage, skips ZeRO-3 with a pipeline
// (the config's reason), and its JSON, CSV and table name the stage.
TEST_CASE("search --zero: layouts ranked under each stage, ZeRO-3 fitting where DDP does not", "[cli][zero][search]") {
  const std::string base = "search --model llama3_8b --gpu h100 --gpus 8 --batch 16 --seq 2048 --dtype bf16 "
                           "--predictor roofline --max-tp 1 --recompute full --zero 0,3";
  const auto r = run_cli(base + " --all --top 100 --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  bool ddp_dp8_fits = true, zero3_dp8_fits = false;
  int zero3_rows = 0;
  for (const auto& l : j["layouts"]) {
    if (l["zero"] == 3) {
      ++zero3_rows;
      CHECK(l["pp"] == 1);  // not with a pipeline
    }
    if (l["dp"] == 8 && l["pp"] == 1 && l["zero"] == 0) ddp_dp8_fits = ddp_dp8_fits && l["fits"].get<bool>();
    if (l["dp"] == 8 && l["pp"] == 1 && l["zero"] == 3) zero3_dp8_fits = zero3_dp8_fits || l["fits"].get<bool>();
  }
  CHECK(zero3_rows > 0);
  CHECK_FALSE(ddp_dp8_fits);
  CHECK(zero3_dp8_fits);
  bool skipped = false;
  for (const auto& [why, n] : j["skipped"].items())
    skipped = skipped || why.find("ZeRO stage 3 shards the gradients and parameters") == 0;
  CHECK(skipped);
  const auto table = run_cli(base);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("zero = ZeRO stage over the dp ranks") != std::string::npos);
  const auto csv = run_cli(base + " --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.find(",zero,") != std::string::npos);
  const auto bad = run_cli(base.substr(0, base.size() - 3) + "0,5");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("search: --zero: 0, 1, 2, 3 (ZeRO stages, a comma-separated list) or all expected, got \"5\"") !=
        std::string::npos);
}
