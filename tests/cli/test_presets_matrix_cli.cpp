// tests/cli/test_presets_matrix_cli.cpp — issue 12's promise, every LLM preset × every combination: each Llama-family,
// MoE and DeepSeek preset (`neusight models`, arch llama / moe / deepseek; the list must be among them) runs
// `predict` in train, inference, prefill and decode, fp32 and bf16, on one GPU and on 8 (tp 2 × pp 2 × dp 2, sequence
// parallel except in decode, ep 2 with grouped experts for the MoE ones); `search` ranks at least one fitting layout in
// training and inference; `serve` forecasts a static batch. Every forecast is finite and positive and its memory parts
// add up to memory_gb. The refusals by design keep their messages (decode with sequence parallelism; tp not dividing
// the heads). One case per builder family so that ctest runs them side by side.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;

namespace {

// The presets issue 12 names (DeepSeek: the ones present).
const std::set<std::string> required = {
    "llama2_7b", "llama2_13b",   "llama2_70b",    "llama3_8b",  "llama3_70b", "llama3_405b",   "llama32_1b",
    "llama32_3b", "mistral_7b",  "mixtral_8x7b",  "mixtral_8x22b", "qwen25_7b", "qwen25_72b", "qwen3_8b",
    "qwen3_32b",  "qwen3_30b_a3b", "deepseek_v2_lite", "deepseek_v3"};

struct preset {
  std::string name;
  double params;
};

// The presets of builder `arch` (llama, moe or deepseek), from `neusight models`.
std::vector<preset> presets_of(const std::string& arch) {
  std::vector<preset> out;
  const json models = run_json("models");  // named: a range-for over a temporary's member would dangle
  for (const auto& m : models["models"])
    if (m["arch"] == arch) out.push_back({m["name"].get<std::string>(), m["params"].get<double>()});
  REQUIRE(!out.empty());
  return out;
}

bool finite_positive(const json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0; }
bool finite_nonnegative(const json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
}

double sum_of(const json& parts) {
  double s = 0;
  for (const auto& [k, v] : parts.items()) s += v.get<double>();
  return s;
}

// One predict forecast: positive finite times and FLOPs, memory parts summing to memory_gb (and the state and
// workspace parts to theirs), fits = memory_gb within the GPU, a KV cache exactly in the serving phases and in HF's
// one-GPU inference forward.
void check_forecast(const std::string& args, const std::string& mode, bool parallel) {
  INFO("predict " << args);
  const json j = run_json("predict " + args);
  CHECK(finite_positive(j["latency_ms"]));
  CHECK(finite_positive(j["forward_ms"]));
  CHECK(finite_positive(j["flops"]));
  CHECK(finite_positive(j["params"]));
  for (const char* k : {"backward_ms", "optimizer_ms", "grad_accumulate_ms", "state_gb"})
    CHECK(finite_nonnegative(j[k]));
  if (mode == "train") {
    CHECK(finite_positive(j["backward_ms"]));
    CHECK(finite_positive(j["optimizer_ms"]));
  }
  REQUIRE(finite_positive(j["memory_gb"]));
  const double total = j["memory_gb"].get<double>();
  const json& m = j["memory"];
  double parts = 0;
  for (const char* k : {"state_gb", "activations_gb", "temporary_gb", "workspace_gb", "kv_cache_gb"}) {
    INFO("memory." << k);
    REQUIRE(finite_nonnegative(m[k]));
    parts += m[k].get<double>();
  }
  CHECK(parts == Approx(total).epsilon(1e-9));
  if (m.contains("state")) CHECK(sum_of(m["state"]) == Approx(m["state_gb"].get<double>()).epsilon(1e-9));
  if (m.contains("workspace"))
    CHECK(sum_of(m["workspace"]) == Approx(m["workspace_gb"].get<double>()).epsilon(1e-9));
  CHECK(j["fits"].get<bool>() == (total <= m["capacity_gb"].get<double>()));
  const bool serving = mode == "prefill" || mode == "decode";
  // HF's forward on one GPU keeps its past_key_values (neusight.nodes hf_cache); Megatron-LM's kernels (the parallel
  // runs' default) keep none outside the serving phases
  const bool hf_cache = mode == "inference" && !parallel;
  CHECK((m["kv_cache_gb"].get<double>() > 0) == (serving || hf_cache));
  if (mode != "train") CHECK(m["activations_gb"].get<double>() == 0);
  for (const auto& op : j["ops"]) CHECK(finite_nonnegative(op["ms"]));
  if (parallel) {
    CHECK(j["parallel"]["world"].get<int>() == 8);
    double most = 0;
    for (const auto& dev : j["parallel"]["devices"]) {
      CHECK(finite_positive(dev["memory_gb"]));
      CHECK(finite_positive(dev["compute_ms"]));
      most = std::max(most, dev["memory_gb"].get<double>());
    }
    CHECK(most == Approx(total).epsilon(1e-9));
  }
}

// GPUs for `search` to find a training layout that fits: 20 B per parameter (bf16 weights, fp32 gradients, a sharded
// Adam) over 60 GB per GPU, a power of two from 8.
int search_gpus(double params) {
  int g = 8;
  while (g * 60e9 < params * 20) g *= 2;
  return g;
}

void check_preset(const preset& p, bool moe) {
  const std::string& m = p.name;
  const std::string gpu = " --gpu h100 --batch 8";
  for (const std::string dtype : {"fp32", "bf16"}) {
    for (const std::string mode : {"train", "inference", "prefill", "decode"}) {
      const bool decode = mode == "decode";
      const std::string shape = decode ? " --context 64" : " --seq 64";
      const std::string base = "--model " + m + gpu + shape + " --mode " + mode + " --dtype " + dtype;
      check_forecast(base, mode, false);
      std::string par = " --tp 2 --pp 2 --dp 2 --microbatches 2";
      if (!decode) par += " --sequence-parallel";
      if (moe) par += " --ep 2 --experts grouped";
      check_forecast(base + par, mode, true);
    }
  }
  for (const std::string mode : {"train", "inference"}) {
    const int g = search_gpus(p.params);
    std::string args = "search --model " + m + " --gpu h100 --gpus " + std::to_string(g) + " --batch " +
                       std::to_string(g) + " --seq 128 --dtype bf16 --mode " + mode + " --distributed-optimizer";
    if (moe && p.params > 100e9) args += " --ep 8";  // DeepSeek-V2/V3, Mixtral-8x22B: one ep keeps the search short
    INFO(args);
    const json s = run_json(args);
    CHECK(s["fitting"].get<int>() >= 1);
    REQUIRE(!s["layouts"].empty());
    double last = 0;
    for (const auto& row : s["layouts"]) {
      CHECK(row["fits"].get<bool>());
      CHECK(finite_positive(row["iteration_ms"]));
      CHECK(finite_positive(row["memory_gb"]));
      CHECK(row["iteration_ms"].get<double>() >= last);  // ranked fastest first
      last = row["iteration_ms"].get<double>();
    }
  }
  {
    // weights beyond one H100's budget are serve's error (tester7 P5): then sharded over 8, and a preset whose weights
    // exceed even that (Llama-3-405B, DeepSeek-V3 in bf16) is that error, with the weights named as the reason
    std::string args = "serve --model " + m + " --gpu h100 --batch 4 --input-len 64 --output-len 8";
    const std::string alone = "cannot be served: the weights alone (";
    if (const auto one = run_cli(args); one.code != 0) {
      INFO(args << "\n" << one.err);
      REQUIRE(one.err.find(alone) != std::string::npos);
      args += " --tp 8";
      if (const auto eight = run_cli(args); eight.code != 0) {
        INFO(args << "\n" << eight.err);
        CHECK(eight.err.find(alone) != std::string::npos);
        return;
      }
    }
    INFO(args);
    const json s = run_json(args);
    for (const char* k : {"ttft_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s", "weights_gb", "kv_cache_gb"})
      CHECK(finite_positive(s[k]));
  }
}

// The presets of builder `arch`; `meta`: only Meta's Llama ones (name llama*), or only the others (Mistral, Qwen).
void check_family(const std::string& arch, bool moe, int meta = -1) {
  for (const auto& p : presets_of(arch)) {
    if (meta >= 0 && (p.name.rfind("llama", 0) == 0) != (meta == 1)) continue;
    INFO("preset " << p.name);
    check_preset(p, moe);
  }
}

}  // namespace

TEST_CASE("presets matrix: the issue's presets are all there", "[cli][presets]") {
  std::set<std::string> have;
  const json models = run_json("models");
  for (const auto& m : models["models"])
    if (m["arch"] == "llama" || m["arch"] == "moe" || m["arch"] == "deepseek") have.insert(m["name"]);
  for (const auto& name : required) {
    INFO(name);
    CHECK(have.count(name) == 1);
  }
}

TEST_CASE("presets matrix: Llama 2 and 3 presets in every mode and dtype on 1 and 8 GPUs and search and serve",
          "[cli][presets][llama]") {
  check_family("llama", false, 1);
}

TEST_CASE("presets matrix: Mistral and Qwen presets in every mode and dtype on 1 and 8 GPUs and search and serve",
          "[cli][presets][llama]") {
  check_family("llama", false, 0);
}

TEST_CASE("presets matrix: MoE presets in every mode and dtype on 1 and 8 GPUs and search and serve",
          "[cli][presets][moe]") {
  check_family("moe", true);
}

TEST_CASE("presets matrix: DeepSeek presets in every mode and dtype on 1 and 8 GPUs and search and serve",
          "[cli][presets][deepseek]") {
  check_family("deepseek", true);
}

// What is refused by design, with a message that says why.
TEST_CASE("presets matrix: the impossible layouts are refused with their reason", "[cli][presets]") {
  auto refused = [](const std::string& args, const std::string& why) {
    INFO(args);
    const auto r = run_cli(args);
    CHECK(r.code != 0);
    CHECK_THAT(r.err, Catch::Matchers::Contains(why));
  };
  refused("predict --model llama3_8b --gpu h100 --batch 8 --mode decode --context 64 --tp 2 --sequence-parallel",
          "mode \"decode\" has one new token per sequence: drop sequence_parallel");
  refused("predict --model qwen25_7b --gpu h100 --batch 8 --seq 64 --mode train --tp 8",
          "num_attention_heads = 28 is not divisible by tp = 8");
  refused("predict --model llama3_8b --gpu h100 --batch 8 --seq 66 --mode train --tp 4 --sequence-parallel",
          "the sequence length = 66 is not divisible by tp = 4");
  refused("predict --model mixtral_8x7b --gpu h100 --batch 6 --seq 64 --mode train --dp 3 --ep 3",
          "num_experts = 8 is not divisible by ep = 3");
  refused("predict --model llama2_7b --gpu h100 --batch 8 --seq 64 --mode train --pp 64 --microbatches 8",
          "64 pipeline stage(s) (pp × virtual_stages) but the model has only 32 layer(s)");
}

// One GPU is a layout too: activation recomputation on one GPU is honoured (it used to be ignored: the same time and
// memory as none), and `search --gpus 1` ranks the one-GPU layouts (it used to forecast none: "no parallel plan").
TEST_CASE("presets matrix: one GPU honours --recompute and search --gpus 1 ranks its layouts", "[cli][presets]") {
  const std::string base = "predict --model llama32_1b --gpu h100 --batch 8 --seq 1024 --dtype bf16 --mode train";
  const json none = run_json(base);
  const json full = run_json(base + " --recompute full");
  CHECK(full["parallel"]["recompute"] == "full");
  CHECK(full["parallel"]["world"].get<int>() == 1);
  CHECK(full["memory"]["activations_gb"].get<double>() < none["memory"]["activations_gb"].get<double>() / 2);
  CHECK(full["latency_ms"].get<double>() > none["latency_ms"].get<double>());  // the forward runs again
  // inference has nothing to recompute: the plain one-GPU forecast
  const std::string inf = "predict --model llama32_1b --gpu h100 --batch 8 --seq 1024 --dtype bf16 --mode inference";
  CHECK(run_json(inf + " --recompute full")["latency_ms"] == run_json(inf)["latency_ms"]);

  const json s = run_json("search --model llama32_1b --gpu h100 --gpus 1 --batch 8 --seq 1024 --dtype bf16 --all");
  REQUIRE(!s["layouts"].empty());
  bool plain = false;
  for (const auto& row : s["layouts"]) {
    CHECK(row["dp"].get<int>() * row["tp"].get<int>() * row["pp"].get<int>() == 1);
    if (row["microbatches"] == 1 && row["recompute"] == "none") {
      plain = true;  // the one-GPU forecast predict gives for it
      CHECK(row["iteration_ms"].get<double>() == Approx(none["latency_ms"].get<double>()).epsilon(1e-12));
      CHECK(row["memory_gb"].get<double>() == Approx(none["memory_gb"].get<double>()).epsilon(1e-12));
      // compute as the planned rows count it: the optimizer step is apart (it was the whole iteration)
      CHECK(row["compute_ms"].get<double>() ==
            Approx(none["latency_ms"].get<double>() - none["optimizer_ms"].get<double>()).epsilon(1e-12));
    } else {
      CHECK(row["compute_ms"].get<double>() < row["iteration_ms"].get<double>());  // the optimizer step is not in it
    }
  }
  CHECK(plain);
}
