// tests/cli/test_llama_cli.cpp — Llama-family models end to end: a checked-in config.json (meta-llama/Llama-3.2-1B) through
// `predict`, training and inference, tensor parallel; presets; null vs omitted config keys; strict keys.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;

namespace {

const std::string fixture = "tests/fixtures/hf/llama32_1b/config.json";

json predict(const std::string& args) {
  const auto r = run_cli("predict " + args + " --format json");
  INFO("predict " << args << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

int kernels_named(const json& j, const std::string& kernel) {
  int n = 0;
  for (const auto& op : j["ops"])
    if (op["kernel"] == kernel) n += op["count"].get<int>();
  return n;
}

}  // namespace

TEST_CASE("llama: Llama-3.2-1B config.json, training and inference on an H100", "[cli][llama]") {
  const std::string base = "--model " + fixture + " --gpu h100 --dtype bf16 --batch 1 --seq 2048";
  const json train = predict(base + " --mode train");
  CHECK(train["model"] == "llama32_1b");
  CHECK(train["params"].get<double>() == 1235814400.0);  // HF num_parameters(), lm_head tied
  CHECK(train["latency_ms"].get<double>() > 0);
  CHECK(train["backward_ms"].get<double>() > train["forward_ms"].get<double>());
  CHECK(train["optimizer_ms"].get<double>() > 0);
  // bf16 defaults to sdpa: one fused kernel per layer each way, GQA 32 query heads over 8 kv heads.
  CHECK(kernels_named(train, "FlashAttention") == 16);
  CHECK(kernels_named(train, "FlashAttentionBwd") == 16);
  CHECK(kernels_named(train, "VECsilu") == 16);
  for (const auto& op : train["ops"])
    if (op["kernel"] == "FlashAttention") {
      CHECK(op["dims"]["heads"] == 32);
      CHECK(op["dims"]["kv_heads"] == 8);
      CHECK(op["dims"]["head_dim"] == 64);
    }

  const json inference = predict(base + " --mode inference");
  CHECK(inference["params"].get<double>() == 1235814400.0);
  CHECK(inference["backward_ms"].get<double>() == 0);
  CHECK(inference["latency_ms"].get<double>() < train["forward_ms"].get<double>() * 1.5);

  // The preset is the same model: the same FLOPs and parameters.
  const json preset = predict("--model llama32_1b --gpu h100 --dtype bf16 --batch 1 --seq 2048 --mode train");
  CHECK(preset["flops"].get<double>() == train["flops"].get<double>());
  CHECK(preset["params"] == train["params"]);

  // Eager attention materialises the scores: slower than sdpa.
  const json eager = predict(base + " --mode train --attention eager");
  CHECK(kernels_named(eager, "FlashAttention") == 0);
  CHECK(eager["latency_ms"].get<double>() > train["latency_ms"].get<double>());
}

TEST_CASE("llama: tensor parallel over 2 GPUs", "[cli][llama][parallel]") {
  const json tp = predict("--model " + fixture + " --gpu h100 --mode train --dtype bf16 --batch 1 --seq 2048 --tp 2");
  CHECK(tp["parallel"]["tp"] == 2);
  // One rank's parameters: half of every projection and of the (tied) vocabulary, norms replicated.
  CHECK(tp["params"].get<double>() == 617940992.0);
  int all_reduces = 0;
  for (const auto& op : tp["ops"])
    if (op["kernel"] == "ALLREDUCE") all_reduces += op["count"].get<int>();
  CHECK(all_reduces == 16 * 4 + 3);  // f and g twice per layer; embedding, lm_head, cross-entropy
  CHECK(tp["parallel"]["devices"][0]["tp_comm_ms"].get<double>() > 0);
  const json sp = predict("--model llama3_8b --gpu h100 --mode train --dtype bf16 --batch 1 --seq 4096 --tp 8 "
                          "--sequence-parallel");
  CHECK(sp["params"].get<double>() > 8030261248.0 / 8);
  CHECK(sp["parallel"]["fits"] == true);
}

TEST_CASE("llama: megatron kernels fuse RMSNorm - RoPE - SwiGLU and the qkv and fc1 GEMMs - and sequence parallelism saves what it saves on GPT-3",
          "[cli][llama][parallel]") {
  // The user report's layout (tester3 problem 4) at 8 sequences: Llama-3-70B and GPT-3 175B on 64 H100s, tp 8 x pp 8.
  const std::string layout = " --gpu h100 --mode train --batch 8 --seq 2048 --dtype bf16 --optimizer adamw --tp 8 --pp 8 "
                             "--microbatches 8 --cluster dgx_h100";
  const auto forward_ops = [](const json& j, const std::string& prefix) {
    int n = 0;
    for (const auto& op : j["ops"])
      if (op["phase"] == "forward" && op["name"].get<std::string>().rfind(prefix, 0) == 0) ++n;
    return n;
  };
  const json megatron = predict("--model llama3_70b" + layout);  // kernels = megatron: the default of a parallel run
  const json eager = predict("--model llama3_70b" + layout + " --kernels eager");
  // One kernel per norm and per rotary embedding, where HF's eager graph has 8 (bf16: casts to fp32 and back) and 5.
  // Under amp's torch.autocast (the eager default in bf16) the norm's input is the fp32 residual stream: no casts, 6.
  const json eager_pure = predict("--model llama3_70b" + layout + " --kernels eager --precision pure");
  CHECK(forward_ops(megatron, "layers.input_layernorm") == 1);
  CHECK(forward_ops(eager, "layers.input_layernorm") == 6);
  CHECK(forward_ops(eager_pure, "layers.input_layernorm") == 8);
  CHECK(forward_ops(megatron, "layers.self_attn.rotary.q") == 1);
  CHECK(forward_ops(eager, "layers.self_attn.rotary.q") == 5);
  CHECK(kernels_named(megatron, "VECswiglu") == 80);  // one per layer (ops list the model's 80)
  CHECK(kernels_named(megatron, "VECsilu") == 0);
  CHECK(kernels_named(eager, "VECsilu") == 80);
  // Megatron-Core's linear_qkv and linear_fc1: one GEMM forward, one dgrad and one wgrad backward, where HF's graph
  // runs q/k/v_proj and gate/up_proj (three and two of each).
  const auto gemms = [](const json& j, const std::string& phase, const std::vector<std::string>& names) {
    int n = 0;
    for (const auto& op : j["ops"])
      for (const auto& name : names)
        if (op["phase"] == phase && op["name"] == "layers." + name && op["kernel"] == "Linear") ++n;
    return n;
  };
  const std::vector<std::string> qkv = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.qkv_proj"};
  const std::vector<std::string> fc1 = {"mlp.gate_proj", "mlp.up_proj", "mlp.gate_up_proj"};
  CHECK(gemms(megatron, "forward", qkv) == 1);
  CHECK(gemms(megatron, "backward", qkv) == 2);
  CHECK(gemms(megatron, "forward", fc1) == 1);
  CHECK(gemms(megatron, "backward", fc1) == 2);
  CHECK(gemms(eager, "forward", qkv) == 3);
  CHECK(gemms(eager, "backward", qkv) == 6);
  CHECK(gemms(eager, "forward", fc1) == 2);
  CHECK(gemms(eager, "backward", fc1) == 4);
  CHECK(megatron["params"] == eager["params"]);  // one rank's: the same weights
  CHECK(megatron["forward_ms"].get<double>() < 0.8 * eager["forward_ms"].get<double>());
  // Sequence parallelism shards the norms, dropouts and residual adds: on fused kernels it saves Llama about what it
  // saves GPT-3 (8.7 %; HF's eager RMSNorm chains made it 24 % on Llama before).
  const auto compute = [&](const std::string& model, const std::string& extra) {
    return predict("--model " + model + layout + extra)["parallel"]["compute_ms"].get<double>();
  };
  const double llama_saving = 1 - compute("llama3_70b", " --sequence-parallel") / megatron["parallel"]["compute_ms"].get<double>();
  const double gpt_saving = 1 - compute("gpt3_175b", " --sequence-parallel") / compute("gpt3_175b", "");
  INFO("sequence-parallel saving: llama " << llama_saving << ", gpt-3 " << gpt_saving);
  CHECK(gpt_saving > 0.05);
  CHECK(llama_saving > 0.5 * gpt_saving);
  CHECK(llama_saving < 1.25 * gpt_saving);
}

TEST_CASE("llama: config.json null vs omitted keys, strict keys", "[cli][llama][hf]") {
  temp_dir t;
  // MistralConfig's default sliding_window is 4096: omitted, HF masks the window at s = 4096 (non-causal sdpa
  // kernel over all pairs); null (Mistral-7B-v0.3) is no window (causal kernel, half the pairs).
  const std::string shape = R"("model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 256,
    "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000)";
  const auto omitted = t.write("omitted/config.json", "{" + shape + "}");
  const auto null = t.write("null/config.json", "{" + shape + R"(, "sliding_window": null, "rope_scaling": null})");
  const std::string flags = " --gpu h100 --mode inference --dtype bf16 --batch 1 --seq 4096 --predictor roofline";
  const auto attention_flops = [](const json& j) {
    double f = 0;
    for (const auto& op : j["ops"])
      if (op["kind"] == "attention") f += op["flops"].get<double>() * op["count"].get<double>();
    return f;
  };
  const double full = attention_flops(predict("--model '" + omitted.string() + "'" + flags));
  const double causal = attention_flops(predict("--model '" + null.string() + "'" + flags));
  CHECK(full == 2 * 4 * 64 * 4 * 4096.0 * 4096.0);
  CHECK(causal == 2 * 4 * 64 * 4 * 4096.0 * 4097.0 / 2);

  const auto typo = t.write("typo/config.json", R"({"model_type": "llama", "num_key_value_head": 8})");
  const auto r = run_cli("predict --model '" + typo.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + typo.string() +
                     ":1: unknown key 'num_key_value_head' for model_type \"llama\" (did you mean 'num_key_value_heads'?)\n");
}

// tester8 problem 1: a serving prefill of a sliding-window model runs the windowed FlashAttention kernel (vLLM, SGLang),
// which skips the key tiles outside the band, so the window never costs more than no window: Mistral-7B's shape on
// an H100 with the shipped predictor, window 4096 vs none, predict --mode prefill and serve's TTFT. At s ≤ window the
// two are the same forecast; above it the attention FLOPs are the band's, Σ min(i, 4096) pairs (counted here).
TEST_CASE("llama: a sliding window never makes a serving prefill slower than no window", "[cli][llama][serve]") {
  temp_dir t;
  const std::string shape = R"("model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    "max_position_embeddings": 131072)";
  const auto win = t.write("win/config.json", "{" + shape + R"(, "sliding_window": 4096})");
  const auto none = t.write("none/config.json", "{" + shape + R"(, "sliding_window": null})");
  const auto attention_flops = [](const json& j) {
    double f = 0;
    for (const auto& op : j["ops"])
      if (op["kind"] == "attention") f += op["flops"].get<double>() * op["count"].get<double>();
    return f;
  };
  for (const int s : {1024, 4096, 6144, 8192, 16384, 32768, 65536}) {
    const std::string flags = " --gpu h100 --mode prefill --dtype bf16 --batch 1 --seq " + std::to_string(s);
    const json w = predict("--model '" + win.string() + "'" + flags);
    const json n = predict("--model '" + none.string() + "'" + flags);
    INFO("seq " << s << ": window " << w["latency_ms"] << " ms, none " << n["latency_ms"] << " ms");
    double pairs = 0;
    for (int i = 1; i <= s; ++i) pairs += std::min(i, 4096);
    CHECK(attention_flops(w) == Approx(32 * 4.0 * 128 * 32 * pairs).epsilon(1e-9));
    if (s <= 4096) {
      CHECK(w["latency_ms"].get<double>() == n["latency_ms"].get<double>());
    } else {
      CHECK(w["latency_ms"].get<double>() < n["latency_ms"].get<double>());
    }
  }
  // the warning names the kernel the windowed layers were priced as
  const auto said = run_cli("predict --model '" + win.string() + "' --gpu h100 --mode prefill --dtype bf16 --batch 1 --seq 8192");
  CHECK(said.code == 0);
  CHECK(said.err.find("prefill attention is priced as the serving engines' windowed FlashAttention kernel") !=
        std::string::npos);
  for (const int s : {4096, 32768}) {
    const auto ttft = [&](const std::filesystem::path& m) {
      const auto r = run_cli("serve --model '" + m.string() + "' --gpu h100 --batch 1 --input-len " + std::to_string(s) +
                             " --output-len 4 --format json");
      INFO(r.err);
      REQUIRE(r.code == 0);
      return json::parse(r.out)["ttft_ms"].get<double>();
    };
    INFO("serve input " << s);
    if (s <= 4096)
      CHECK(ttft(win) == ttft(none));
    else
      CHECK(ttft(win) < ttft(none));
  }
}
