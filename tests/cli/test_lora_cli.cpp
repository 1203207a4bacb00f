// tests/cli/test_lora_cli.cpp — LoRA fine-tuning end to end (--lora-rank, --lora-targets; scripts/neusight/lora.lua):
// Llama-3-8B bf16 rank 16 on one H100 forecast faster than full fine-tuning and slower than full fine-tuning's
// forward and data-gradient GEMMs alone (the floor a frozen base cannot go under), in far less memory; the bad inputs.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;
using ns_test::warned;

namespace {

// the same recipe both ways (pure bf16: LoRA's default), so the difference is LoRA's alone
const std::string train_args =
    "predict --model llama3_8b --gpu h100 --mode train --dtype bf16 --precision pure --optimizer adamw --batch 1 "
    "--seq 2048";

// Full fine-tuning's forward and backward without what a frozen base drops: the weight-gradient GEMMs (each linear's
// second backward GEMM, dW = dYᵀ·X: neusight.rules linear), the gradient accumulation and the optimizer step.
double forward_and_dgrad_ms(const json& full) {
  std::map<std::string, int> seen;
  double wgrad = 0;
  for (const auto& op : full["ops"])
    if (op["op"] == "linear" && op["phase"] == "backward" && op["kind"] == "gemm" &&
        ++seen[op["name"].get<std::string>()] == 2)
      wgrad += op["ms"].get<double>();
  REQUIRE(wgrad > 0);
  return full["forward_ms"].get<double>() + full["backward_ms"].get<double>() -
         full["grad_accumulate_ms"].get<double>() - wgrad;
}

}  // namespace

TEST_CASE("lora: Llama-3-8B rank 16 between full fine-tuning and its forward plus data gradients", "[cli][lora]") {
  const json full = run_json(train_args);
  const json lora = run_json(train_args + " --lora-rank 16");
  const double floor = forward_and_dgrad_ms(full);
  INFO("full " << full["latency_ms"] << " ms, LoRA " << lora["latency_ms"] << " ms, floor " << floor << " ms");
  CHECK(lora["latency_ms"].get<double>() < full["latency_ms"].get<double>());
  CHECK(lora["latency_ms"].get<double>() > floor);
  CHECK(lora["optimizer_ms"].get<double>() < 0.02 * full["optimizer_ms"].get<double>());
  CHECK(lora["flops"].get<double>() < 0.75 * full["flops"].get<double>());
  CHECK(lora["memory_gb"].get<double>() < 0.5 * full["memory_gb"].get<double>());  // activations alike, state not
  CHECK(lora["state_gb"].get<double>() < 0.3 * full["state_gb"].get<double>());
  CHECK(lora["memory"]["state"]["optimizer_gb"].get<double>() == Approx(41943040.0 * 4 / 1e9));
  CHECK(lora["lora_rank"] == 16);
  CHECK(lora["trainable_params"] == 41943040);  // 32 layers · 16 · (8192 + 5120 + 5120 + 8192 + 3 · 18432)
  CHECK_FALSE(full.contains("trainable_params"));
  CHECK(warned(lora["warnings"], "LoRA rank 16 on q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj (7 linear nodes)"));
  // no weight-gradient GEMM of a base linear: one backward GEMM each, two for each adapter
  std::map<std::string, int> gemms;
  for (const auto& op : lora["ops"])
    if (op["op"] == "linear" && op["phase"] == "backward" && op["kind"] == "gemm") ++gemms[op["name"].get<std::string>()];
  CHECK(gemms["layers.mlp.down_proj"] == 1);
  CHECK(gemms["lm_head"] == 1);
  CHECK(gemms["layers.mlp.down_proj.lora_A"] == 2);
  CHECK(gemms["layers.mlp.down_proj.lora_B"] == 2);
}

TEST_CASE("lora: bad ranks targets and modes are errors", "[cli][lora]") {
  const auto zero = run_cli(train_args + " --lora-rank 0");
  CHECK(zero.code != 0);
  CHECK(zero.err.find("--lora-rank") != std::string::npos);
  const auto half = run_cli(train_args + " --lora-rank 1.5");
  CHECK(half.code != 0);
  CHECK(half.err.find("--lora-rank") != std::string::npos);
  const auto unknown = run_cli(train_args + " --lora-rank 8 --lora-targets q,qkv");
  CHECK(unknown.code != 0);
  CHECK(unknown.err.find("\"qkv\" matches no linear of model 'llama3_8b'; its linear modules: q_proj, k_proj") !=
        std::string::npos);
  const auto inference =
      run_cli("predict --model llama3_8b --gpu h100 --mode inference --dtype bf16 --batch 1 --seq 512 --lora-rank 8");
  CHECK(inference.code != 0);
  CHECK(inference.err.find("applies to mode \"train\" only") != std::string::npos);
  const auto targets_alone = run_cli(train_args + " --lora-targets q,v");
  CHECK(targets_alone.code != 0);
  CHECK(targets_alone.err.find("needs 'lora_rank'") != std::string::npos);
}
