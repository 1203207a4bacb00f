// tests/cli/test_moe_cli.cpp — MoE Llama-family models end to end (scripts/neusight/models/moe.lua): Mixtral and Qwen3-MoE
// presets through `predict` in fp32 and bf16, training and inference, one GPU and tensor / expert / pipeline parallel,
// a config.json, and `search` ranking their layouts.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;
using ns_test::temp_dir;

namespace {

double ms_of(const json& j, const std::string& prefix) {
  double ms = 0;
  for (const auto& op : j["ops"])
    if (op["name"].get<std::string>().rfind(prefix, 0) == 0) ms += op["ms"].get<double>();
  return ms;
}

}  // namespace

TEST_CASE("moe: Mixtral-8x7B and Qwen3-30B-A3B train and infer on one H100, fp32 and bf16", "[cli][moe]") {
  for (const std::string model : {"mixtral_8x7b", "qwen3_30b_a3b"}) {
    const double params = model == "mixtral_8x7b" ? 46702792704.0 : 30532122624.0;
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO(model << " " << dtype);
      const std::string base = "predict --model " + model + " --gpu h100_sxm5_80gb --batch 1 --seq 512 --dtype " + dtype;
      const json train = run_json(base + " --mode train --optimizer adamw");
      CHECK(train["params"].get<double>() == params);
      CHECK(train["backward_ms"].get<double>() > train["forward_ms"].get<double>());
      CHECK(train["optimizer_ms"].get<double>() > 0);
      CHECK(ms_of(train, "router_aux_loss") > 0);
      CHECK(ms_of(train, "router_aux_loss") < 0.05 * train["latency_ms"].get<double>());  // small
      const json inference = run_json(base + " --mode inference");
      CHECK(inference["params"].get<double>() == params);
      CHECK(inference["backward_ms"].get<double>() == 0);
      CHECK(ms_of(inference, "router_aux_loss") == 0);
      CHECK(inference["latency_ms"].get<double>() > 0);
      CHECK(inference["latency_ms"].get<double>() < train["latency_ms"].get<double>());
    }
  }
}

TEST_CASE("moe: the report carries active_params, and MFU counts the active experts' FLOPs only", "[cli][moe][figures]") {
  // Published: Mixtral-8x7B 12.9 B active of 46.7 B; Qwen3-30B-A3B 3.3 B of 30.5 B; DeepSeek-V3 37 B of 671 B.
  const struct {
    const char* model;
    double params, active;
  } cases[] = {{"mixtral_8x7b", 46702792704.0, 12879925248.0},
               {"qwen3_30b_a3b", 30532122624.0, 3353032704.0},
               {"deepseek_v3", 671026404352.0, 37552282624.0}};
  for (const auto& c : cases) {
    INFO(c.model);
    const json tr = run_json(std::string("predict --model ") + c.model +
                             " --gpu h100 --mode train --batch 1 --seq 1024 --dtype bf16 --optimizer none");
    CHECK(tr["params"].get<double>() == c.params);
    CHECK(tr["active_params"].get<double>() == c.active);
    // model FLOPs are the graph's: each token through k experts, so per token ≈ 6 × the active parameters (+ attention,
    // routing; − the embedding lookup), nowhere near 6 × all of them
    const double per_token = tr["figures"]["flops_per_token"];
    CHECK(per_token > 0.9 * 6 * c.active);  // Qwen3-30B-A3B: its 0.31 B embedding rows do no FLOPs
    CHECK(per_token < 1.1 * 6 * c.active);
    CHECK(per_token < 0.3 * 6 * c.params);
    // decode: one token per sequence, 2 × active per token (the experts 8 tokens hit; attention over the cache)
    const json dec = run_json(std::string("predict --model ") + c.model +
                              " --gpu h100 --mode decode --batch 8 --context 128 --dtype bf16");
    CHECK(dec["active_params"].get<double>() == c.active);
    CHECK(dec["figures"]["flops_per_token"].get<double>() == Approx(2 * c.active).epsilon(0.12));
  }
  // the table says it; a dense model's report has no active_params
  const auto r = run_cli("predict --model mixtral_8x7b --gpu h100 --mode inference --batch 1 --seq 128 --dtype bf16");
  CHECK(r.out.find("of which 12.880 B active per token") != std::string::npos);
  const json dense = run_json("predict --model llama3_8b --gpu h100 --mode inference --batch 1 --seq 128 --dtype bf16");
  CHECK_FALSE(dense.contains("active_params"));
  // tensor x expert parallel: the scope of params (one tp rank, its ep share of the experts), the same k / E share
  const json ep = run_json("predict --model mixtral_8x7b --gpu h100 --batch 8 --seq 1024 --dtype bf16 --mode train "
                           "--optimizer none --tp 2 --dp 4 --ep 4 --cluster dgx_h100");
  const double p = ep["params"], a = ep["active_params"];
  CHECK(a < p);
  CHECK(a > p / 4);
}

TEST_CASE("moe: weight-only quantisation also stores the experts no token reaches quantised", "[cli][moe][quant]") {
  // decode of one sequence: 2 of 8 experts busy per layer, the other 6 hold weights and launch nothing; with fp8
  // weights every linear's weight is 1 byte, only the norms and embed_tokens stay at 2
  const json q = run_json("predict --model mixtral_8x7b --gpu h200 --mode decode --batch 1 --context 1024 --dtype bf16 "
                          "--weight-dtype fp8");
  const double per_param = q["state_bytes_per_param"]["weights"];
  CHECK(per_param < 1.01);  // was 1.73: the idle experts' 32 × 6 × 3 × 4096 × 14336 weights counted at 2 bytes
  CHECK(q["memory"]["state_gb"].get<double>() == Approx(46702792704.0 * per_param / 1e9));
  CHECK(q["memory"]["state_gb"].get<double>() < 47.5);
}

TEST_CASE("moe: Mixtral-8x7B with tensor, expert and pipeline parallelism", "[cli][moe][parallel]") {
  const std::string base = "predict --model mixtral_8x7b --gpu h100_sxm5_80gb --batch 8 --seq 4096 --dtype bf16 "
                           "--mode train --optimizer adamw --cluster dgx_h100";
  // 64 GPUs: tp 8 inside a node, experts over 8 data-parallel ranks.
  const json ep = run_json(base + " --tp 8 --dp 8 --ep 8");
  const auto& p = ep["parallel"];
  CHECK(p["ep"] == 8);
  CHECK(p["fits"] == true);
  CHECK(p["devices"][0]["ep_comm_ms"].get<double>() > 0);
  CHECK(p["devices"][0]["tp_comm_ms"].get<double>() > 0);
  // one rank: 1/8 of the attention and of every one of its 1 expert (8 / ep 8), the router whole
  CHECK(ep["params"].get<double>() < 46702792704.0 / 8);
  // Pipeline: 32 layers over 4 stages, 8 each, whatever the expert nodes' counts.
  const json pp = run_json(base + " --tp 8 --pp 4 --microbatches 8");
  int layers = 0;
  for (const auto& d : pp["parallel"]["devices"]) {
    CHECK(d["layers"] == 8);
    layers += d["layers"].get<int>();
  }
  CHECK(layers == 32);
  // Sequence parallel and expert parallel on Qwen3-30B-A3B (4 kv heads, tp 8: one per rank).
  const json q = run_json("predict --model qwen3_30b_a3b --gpu h100 --batch 16 --seq 2048 --dtype bf16 --mode train "
                          "--tp 8 --dp 2 --ep 2 --sequence-parallel --cluster dgx_h100");
  CHECK(q["parallel"]["devices"][0]["ep_comm_ms"].get<double>() > 0);
}

TEST_CASE("moe: a Mixtral config.json and the preset are one model", "[cli][moe]") {
  temp_dir t;
  const auto cfg = t.write("Mixtral-8x7B-v0.1/config.json", R"({
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
    "use_cache": true, "vocab_size": 32000})");
  const std::string run = " --gpu h100 --batch 1 --seq 1024 --dtype bf16 --mode train";
  const json file = run_json("predict --model '" + cfg.string() + "'" + run);
  const json preset = run_json("predict --model mixtral_8x7b" + run);
  CHECK(file["params"].get<double>() == 46702792704.0);
  CHECK(file["flops"].get<double>() == preset["flops"].get<double>());
  CHECK(file["latency_ms"].get<double>() == Approx(preset["latency_ms"].get<double>()).epsilon(1e-12));
}

TEST_CASE("moe: search ranks Mixtral and Qwen3-MoE layouts without refusing them", "[cli][moe][search]") {
  // Mixtral-8x7B's 46.7 B parameters need 16 H100s (18 B of bf16 Megatron amp state each); Qwen3-30B-A3B fits on 8.
  for (const std::string model : {"mixtral_8x7b", "qwen3_30b_a3b"}) {
    INFO(model);
    const std::string gpus = model == "mixtral_8x7b" ? "16" : "8";
    const json s = run_json("search --model " + model + " --gpu h100 --gpus " + gpus + " --batch 16 --seq 2048 --dtype bf16");
    CHECK(s["skipped"].empty());
    CHECK(s["fitting"].get<int>() > 0);
    CHECK(s["layouts"].size() > 0);
  }
}

// moesp: Megatron-Core refuses MoE with tp > 1 in training without sequence parallelism, so a search that ranks such
// layouts (forecast vLLM-style) says so, once for all of them, naming --sequence-parallel; with it, or in inference
// (serving engines' tensor parallelism), nothing is said.
TEST_CASE("search: MoE training layouts with tp above 1 without sequence parallelism are warned of once",
          "[cli][moe][search]") {
  const std::string base = "search --model mixtral_8x7b --gpu h100 --batch 16 --seq 2048 --dtype bf16 "
                           "--predictor roofline --gpus 16 --all --top 100000";
  auto refused = [](const json& s) {
    int n = 0;
    for (const auto& w : s["warnings"]) {
      const std::string t = w.get<std::string>();
      if (t.find("Megatron-Core refuses") != std::string::npos) {
        ++n;
        CHECK(t.find("--sequence-parallel") != std::string::npos);
      }
    }
    return n;
  };
  const json s = run_json(base);
  bool tp = false;
  for (const auto& l : s["layouts"]) tp = tp || l["tp"].get<int>() > 1;
  REQUIRE(tp);  // it ranks tp > 1 layouts
  CHECK(refused(s) == 1);
  CHECK(refused(run_json(base + " --sequence-parallel")) == 0);
  CHECK(refused(run_json(base + " --mode inference")) == 0);
}

// issue 12: `search` also searches the expert-parallel degree — every ep dividing dp and the expert count — and each
// row is exactly the forecast `predict` makes of that layout; --ep fixes it.
TEST_CASE("search: MoE layouts with every expert-parallel degree, each the same forecast predict makes", "[cli][moe][search]") {
  const std::string base = "--model mixtral_8x7b --gpu h100 --batch 16 --seq 2048 --dtype bf16 --predictor roofline";
  const json s = run_json("search " + base + " --gpus 16 --all --top 100000");
  std::map<int, json> best;  // ep → its fastest row
  for (const auto& l : s["layouts"]) {
    REQUIRE(l.contains("ep"));
    const int ep = l["ep"].get<int>(), dp = l["dp"].get<int>();
    CHECK(dp % ep == 0);
    CHECK(8 % ep == 0);  // Mixtral's 8 experts
    if (!best.count(ep)) best[ep] = l;
  }
  CHECK(best.size() == 4);  // ep 1, 2, 4, 8 (16 does not divide the 8 experts)
  for (const auto& [ep, l] : best) {
    INFO("ep " << ep);
    const json one = run_json("predict " + base + " --mode train --dp " + std::to_string(l["dp"].get<int>()) +
                              " --tp " + std::to_string(l["tp"].get<int>()) + " --pp " +
                              std::to_string(l["pp"].get<int>()) + " --ep " + std::to_string(ep) + " --microbatches " +
                              std::to_string(l["microbatches"].get<int>()) + " --recompute " +
                              l["recompute"].get<std::string>());
    CHECK(one["latency_ms"].get<double>() == l["iteration_ms"].get<double>());
    CHECK(one["memory_gb"].get<double>() == l["memory_gb"].get<double>());
  }
  // --ep 1 keeps the search of before: only ep 1, the same rows as the ep-1 rows of the full search
  const json fixed = run_json("search " + base + " --gpus 16 --all --top 100000 --ep 1");
  size_t ones = 0;
  for (const auto& l : s["layouts"]) ones += l["ep"] == 1;
  CHECK(fixed["layouts"].size() == ones);
  for (const auto& l : fixed["layouts"]) CHECK(l["ep"] == 1);
  // --ep that does not divide a dp: those layouts are skipped with the reason
  const json four = run_json("search " + base + " --gpus 16 --all --top 100000 --ep 4");
  for (const auto& l : four["layouts"]) CHECK(l["ep"] == 4);
  CHECK(four["skipped"]["--ep 4 does not divide dp"].get<int>() > 0);
  // dense models: ep 1 only, and the output says nothing of it
  const json dense = run_json("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 8 --batch 16 --seq 1024 "
                              "--predictor roofline --all --top 1000");
  for (const auto& l : dense["layouts"]) {
    CHECK_FALSE(l.contains("ep"));
    CHECK_FALSE(l.contains("schedule"));
  }
  CHECK_FALSE(dense.contains("skipped_layouts"));
}

// tester3 problem 1: the distributed optimizer shards each parameter's master copy and Adam moments over the GPUs that
// hold a replica of it. A dense weight is on every dp rank; an expert's only on its expert-parallel rank, so its
// replicas are dp / ep (Megatron-LM's expert data-parallel group), and its state shards over those alone. Mixtral-8x7B
// bf16 amp (Megatron's 18 B per parameter: 6 unsharded + 12 sharded), its parameters counted from its config.
TEST_CASE("moe: the distributed optimizer shards expert state over dp / ep and dense state over dp", "[cli][moe][memory]") {
  const double h = 4096, inter = 14336, layers = 32, vocab = 32000, kv = 8 * 128, experts = 8;
  // one expert per rank at ep 8: gate, up, down per layer; the rest: attention, router, two norms per layer, the
  // untied embedding and LM head, the final norm
  const double expert = layers * 3 * h * inter;
  const double dense = layers * (2 * h * h + 2 * h * kv + h * experts + 2 * h) + 2 * vocab * h + h;
  const std::string base = "predict --model mixtral_8x7b --gpu h100 --mode train --dtype bf16 --optimizer adamw "
                           "--batch 16 --seq 512 --predictor roofline --distributed-optimizer --ep 8 ";
  for (const auto& [dp, replicas] : std::vector<std::pair<int, int>>{{8, 1}, {16, 2}}) {
    INFO("dp " << dp << " ep 8");
    const json j = run_json(base + "--dp " + std::to_string(dp));
    CHECK(j["params"].get<double>() == dense + expert);
    CHECK(j["optimizer_shards"] == dp);
    CHECK(j["expert_optimizer_shards"] == replicas);
    const auto& d = j["parallel"]["devices"][0];
    CHECK(d["expert_params"].get<double>() == expert);
    // dp 8: 1.61 B x 7.5 + 5.64 B x 18 = 113.5 GB (was 54.3, all of it over dp); dp 16: x 6.75 and x 12 = 78.5 GB
    const double want = dense * (6 + 12.0 / dp) + expert * (6 + 12.0 / replicas);
    CHECK(j["state_gb"].get<double>() == Approx(want / 1e9).epsilon(1e-12));
    CHECK(j["fits"] == false);
    // each GPU steps its dense parameters' 1/dp and its experts' 1/(dp / ep) of the graph's step
    CHECK(d["optimizer_ms"].get<double>() ==
          Approx(j["optimizer_ms"].get<double>() * (dense / dp + expert / replicas) / (dense + expert)).epsilon(1e-9));
  }
  // a dense model: everything over dp, as before (6 + 12 / dp), and no expert fields
  const json llama = run_json("predict --model llama32_1b --gpu h100 --mode train --dtype bf16 --optimizer adamw "
                              "--batch 8 --seq 512 --predictor roofline --distributed-optimizer --dp 8");
  CHECK(llama["state_gb"].get<double>() == Approx(llama["params"].get<double>() * 7.5 / 1e9).epsilon(1e-12));
  CHECK(llama["optimizer_shards"] == 8);
  CHECK_FALSE(llama.contains("expert_optimizer_shards"));
  CHECK_FALSE(llama["parallel"]["devices"][0].contains("expert_params"));
  CHECK(llama["parallel"]["devices"][0]["optimizer_ms"].get<double>() ==
        Approx(llama["optimizer_ms"].get<double>() / 8).epsilon(1e-12));
}

// The search that ranked dp 8 pp 2 ep 8 first at 75.1 GB under --distributed-optimizer: its stage 0 holds 2.82 B expert
// parameters whose state shards over dp / ep = 1, so it needs 92.8 GB and does not fit; no layout without
// recomputation fits 80 GB, and the row is the forecast predict makes of the layout.
TEST_CASE("search: a layout fits only by its true expert optimizer state under the distributed optimizer", "[cli][moe][search]") {
  const std::string base = "--model mixtral_8x7b --gpu h100 --batch 64 --seq 4096 --dtype bf16 --optimizer adamw "
                           "--cluster dgx_h100 --distributed-optimizer --predictor roofline";
  const std::string limits = " --gpus 16 --ep 8 --recompute none --max-tp 1";
  {  // was dp 8 pp 2 ep 8 mb 8, 75.1 GB; no layout fitting is an error (exit 1), the JSON with it as `error`
    const auto none = run_cli("search " + base + limits + " --format json");
    INFO(none.err);
    CHECK(none.code == 1);
    CHECK(json::parse(none.out)["layouts"].empty());
    CHECK(none.err.find("search: no layout of 16 GPUs fits in memory") != std::string::npos);
  }
  const json all = run_json("search " + base + limits + " --all --top 100");
  const json* row = nullptr;
  for (const auto& l : all["layouts"])
    if (l["dp"] == 8 && l["pp"] == 2 && l["microbatches"] == 8) row = &l;
  REQUIRE(row);
  CHECK((*row)["fits"] == false);
  const json one = run_json("predict " + base + " --mode train --dp 8 --pp 2 --ep 8 --microbatches 8");
  CHECK(one["memory_gb"].get<double>() == (*row)["memory_gb"].get<double>());
  // stage 0: 16 layers (one expert each, and the dense rest) and the embedding
  const double h = 4096, inter = 14336, kv = 8 * 128;
  const double expert = 16 * 3 * h * inter, dense = 16 * (2 * h * h + 2 * h * kv + h * 8 + 2 * h) + 32000 * h;
  const auto& stage0 = one["parallel"]["devices"][0];
  CHECK(stage0["expert_params"].get<double>() == expert);
  CHECK(stage0["state_gb"].get<double>() == Approx((dense * 7.5 + expert * 18) / 1e9).epsilon(1e-12));
  CHECK((*row)["memory_gb"].get<double>() > 80);  // an H100's 80 GB (92.8 GB with Megatron's fused Llama kernels)
}
