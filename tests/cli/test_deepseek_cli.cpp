// tests/cli/test_deepseek_cli.cpp — DeepSeek-V3 end to end (scripts/neusight/models/deepseek.lua): every mode in fp32 and
// bf16 on one H100 (it does not fit: the memory warning says so, the forecast is still made), tensor / expert / pipeline
// parallel training and tensor-parallel decode, a config.json, and `search` accepting it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;
using ns_test::temp_dir;

namespace {

constexpr double deepseek_v3_params = 671026404352.0;  // HF DeepseekV3ForCausalLM (no MTP layer)

double ms_of(const json& j, const std::string& prefix) {
  double ms = 0;
  for (const auto& op : j["ops"])
    if (op["name"].get<std::string>().rfind(prefix, 0) == 0) ms += op["ms"].get<double>();
  return ms;
}

}  // namespace

TEST_CASE("deepseek: DeepSeek-V3 in every mode on one H100, fp32 and bf16: forecast made, memory says it does not fit",
          "[cli][deepseek]") {
  for (const std::string mode : {"train", "inference", "prefill", "decode"}) {
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO(mode << " " << dtype);
      const std::string shape = mode == "decode" ? " --batch 8 --context 2048" : " --batch 1 --seq 1024";
      std::string err;
      const json j = run_json("predict --model deepseek_v3 --gpu h100 --mode " + mode + " --dtype " + dtype + shape, "", &err);
      CHECK(j["params"].get<double>() == deepseek_v3_params);
      CHECK(j["latency_ms"].get<double>() > 0);
      CHECK((j["backward_ms"].get<double>() > 0) == (mode == "train"));
      CHECK(j["fits"] == false);
      CHECK(j["memory_gb"].get<double>() > 80);
      const json& m = j["memory"];
      for (const char* field : {"state_gb", "activations_gb", "temporary_gb", "workspace_gb", "kv_cache_gb", "capacity_gb"})
        CHECK(m.contains(field));
      CHECK(j["memory_gb"].get<double>() ==
            Approx(m["state_gb"].get<double>() + m["activations_gb"].get<double>() + m["temporary_gb"].get<double>() +
                   m["workspace_gb"].get<double>() + m["kv_cache_gb"].get<double>()));
      CHECK((m["kv_cache_gb"].get<double>() > 0) == (mode != "train"));
      // HF's forward keeps every head's K (qk_nope 128 + qk_rope 64) and V (128) of its tokens in past_key_values
      if (mode == "inference")
        CHECK(m["kv_cache_gb"].get<double>() == Approx(61.0 * 1024 * 128 * (192 + 128) * (dtype == "fp32" ? 4 : 2) / 1e9));
      REQUIRE(j["warnings"].size() > 0);
      // the predictor's own warnings (an H100 beyond the fp32 families' per-SM range) come before the memory one
      bool memory_warned = false;
      for (const auto& w : j["warnings"])
        memory_warned = memory_warned ||
                        w.get<std::string>().find("exceeds the GPU's 80 GB: the forecast assumes it fits") != std::string::npos;
      CHECK(memory_warned);
      CHECK(err.find("exceeds the GPU's 80 GB") != std::string::npos);
      CHECK(ms_of(j, "layers.mlp.experts") > 0);       // routed experts
      CHECK(ms_of(j, "layers.mlp.shared_experts") > 0);
      CHECK(ms_of(j, "dense_layers.mlp.gate_proj") > 0);  // first_k_dense_replace dense layers
      CHECK(ms_of(j, "router_aux_loss") == 0);          // HF's DeepseekV3ForCausalLM has no aux loss
    }
  }
}

TEST_CASE("deepseek: DeepSeek-V3 with tensor, expert and pipeline parallelism, and tensor-parallel decode", "[cli][deepseek][parallel]") {
  // 512 GPUs: tp 8 inside a node, 8 pipeline stages, experts over the 8 data-parallel ranks.
  const json tr = run_json("predict --model deepseek_v3 --gpu h100 --mode train --batch 128 --seq 4096 --dtype bf16 "
                           "--tp 8 --pp 8 --dp 8 --ep 8 --microbatches 16 --cluster dgx_h100");
  const auto& p = tr["parallel"];
  CHECK(p["ep"] == 8);
  CHECK(p["world"] == 512);
  int layers = 0;
  double params = 0;
  for (const auto& d : p["devices"]) {
    CHECK(d["ep_comm_ms"].get<double>() > 0);
    CHECK(d["tp_comm_ms"].get<double>() > 0);
    layers += d["layers"].get<int>();
    params += d["params"].get<double>();
  }
  CHECK(layers == 61);
  CHECK(params < deepseek_v3_params / 8);  // one tp rank of each stage, 32 of 256 experts per layer
  CHECK(tr["latency_ms"].get<double>() > 0);
  // Decode on one node: each rank caches the whole MLA latent (kv_lora_rank 512 + qk_rope_head_dim 64) for 8 × 2049
  // tokens over 61 layers (vLLM's MLA under tp), not its 16 heads' K (192) and V (128).
  const json dec = run_json("predict --model deepseek_v3 --gpu h100 --mode decode --batch 8 --context 2048 --tp 8 "
                            "--dtype bf16 --cluster dgx_h100");
  CHECK(dec["kv_cache_gb"].get<double>() == Approx(61.0 * 8 * 2049 * 576 * 2 / 1e9));
  CHECK(dec["parallel"]["devices"][0]["tp_comm_ms"].get<double>() > 0);
  CHECK(dec["latency_ms"].get<double>() > 0);
}

TEST_CASE("deepseek: decode memory is the weights, the latent KV cache and small transients (hand computation)",
          "[cli][deepseek][memory]") {
  // bf16 weights 671,026,404,352 × 2 B; the cache 61 layers × 8 sequences × (4096 + 1) tokens × 576 latent values × 2 B
  // (HF's decompressed per-head cache would hold 128 × (192 + 128) = 40,960 values per token: 71× more); the
  // temporary is the W_UK bmm's inputs and output (its weight counted again: 18 MB), cuBLAS' workspace 32 MiB.
  const json j = run_json("predict --model deepseek_v3 --gpu h200 --mode decode --batch 8 --context 4096 --dtype bf16");
  const double weights = deepseek_v3_params * 2 / 1e9, kv = 61.0 * 8 * 4097 * 576 * 2 / 1e9;
  const json& m = j["memory"];
  CHECK(m["state_gb"].get<double>() == Approx(weights));
  CHECK(j["kv_cache_gb"].get<double>() == Approx(kv));
  CHECK(m["kv_cache_gb"].get<double>() == Approx(kv));
  CHECK(m["temporary_gb"].get<double>() < 0.05);  // not the cache again (decode_attention's transient is Q and O)
  CHECK(j["memory_gb"].get<double>() == Approx(weights + kv + m["temporary_gb"].get<double>() + 0.033554432));
  CHECK(j["memory_gb"].get<double>() == Approx(1344.41).epsilon(1e-4));
}

TEST_CASE("deepseek: serve holds the MLA latent per token, so far more requests fit", "[cli][deepseek][serve]") {
  // fp8 weights over tp 8 on H200: 84.9 GB per GPU; every rank caches 61 × 576 bf16 values per token (70,272 B).
  const json s = run_json("serve --model deepseek_v3 --gpu h200 --tp 8 --weight-dtype fp8 --input-len 2048 "
                          "--output-len 64 --batch 32");
  const double per_token = s["kv_cache_gb_per_token"];
  CHECK(per_token == Approx(61.0 * 576 * 2 / 1e9));
  // 0.9 of the memory the H200 reports (gpus/h200_sxm_141gb.toml mem_reported_gib), as vLLM budgets it
  const double budget = 0.9 * s["gpu_mem_reported_gib"].get<double>() * 1073741824 / 1e9 - s["weights_gb"].get<double>();
  const int blocks_per_seq = (2048 + 64 - 1 + 15) / 16;
  CHECK(s["kv_blocks"].get<int>() == int(budget / (per_token * 16) + 1e-9));
  CHECK(s["max_concurrency"].get<int>() == s["kv_blocks"].get<int>() / blocks_per_seq);
  CHECK(s["max_concurrency"].get<int>() > 200);  // a per-head K/V cache (16 heads × 320 values per rank) fits 29
  CHECK(s["fits"] == true);
}

TEST_CASE("deepseek: DeepSeek-V2-Lite forecasts every mode on one H100 with its latent cache", "[cli][deepseek]") {
  for (const std::string mode : {"train", "prefill", "decode"}) {
    INFO(mode);
    const std::string shape = mode == "decode" ? " --batch 8 --context 2048" : " --batch 1 --seq 512";
    const json j = run_json("predict --model deepseek_v2_lite --gpu h100 --dtype bf16 --mode " + mode + shape);
    CHECK(j["params"].get<double>() == 15706484224.0);
    CHECK(j["active_params"].get<double>() == 2661150208.0);
    CHECK(j["latency_ms"].get<double>() > 0);
    if (mode == "decode") CHECK(j["kv_cache_gb"].get<double>() == Approx(27.0 * 8 * 2049 * 576 * 2 / 1e9));
  }
}

TEST_CASE("deepseek: the DeepSeek-V3 config.json and the preset are one model", "[cli][deepseek]") {
  temp_dir t;
  const auto cfg = t.write("DeepSeek-V3/config.json", R"({
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
                 "AutoModel": "modeling_deepseek.DeepseekV3Model",
                 "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"},
    "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
    "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": true,
    "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1", "use_cache": true, "v_head_dim": 128, "vocab_size": 129280})");
  const std::string run = " --gpu h100 --batch 1 --seq 1024 --dtype bf16 --mode inference";
  const json file = run_json("predict --model '" + cfg.string() + "'" + run);
  const json preset = run_json("predict --model deepseek_v3" + run);
  CHECK(file["params"].get<double>() == deepseek_v3_params);
  CHECK(file["flops"].get<double>() == preset["flops"].get<double>());
  CHECK(file["latency_ms"].get<double>() == Approx(preset["latency_ms"].get<double>()).epsilon(1e-12));
  // A misspelt key is an error with a did-you-mean, as for the other families.
  const auto bad = t.write("bad/config.json", R"({"model_type": "deepseek_v3", "n_routed_expert": 64})");
  const auto r = run_cli("predict --model '" + bad.string() + "' --gpu h100 --batch 1 --seq 128 --mode inference");
  CHECK(r.code != 0);
  CHECK(r.err.find("unknown key 'n_routed_expert' for model_type \"deepseek_v3\" (did you mean 'n_routed_experts'?)") !=
        std::string::npos);
}

TEST_CASE("deepseek: search ranks DeepSeek-V3 layouts", "[cli][deepseek][search]") {
  // 671 B parameters at 18 B of bf16 Megatron amp state each: 256 H100s hold it (with full recomputation).
  const json s = run_json("search --model deepseek_v3 --gpu h100 --gpus 256 --batch 256 --seq 2048 --dtype bf16");
  CHECK(s["fitting"].get<int>() > 0);
  CHECK(s["layouts"].size() > 0);
  for (const auto& [reason, count] : s["skipped"].items())  // only pipelines deeper than the 61 layers
    CHECK(reason.find("but the model has only 61 layer(s)") != std::string::npos);
}
