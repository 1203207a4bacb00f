// tests/cli/test_hf_families_cli.cpp — Phi-3, Gemma and Gemma2 config.json files (tests/fixtures/hf: the published
// microsoft/Phi-3-mini-4k-instruct, google/gemma-7b, google/gemma-2-9b) through `predict`: HF's parameter counts, the
// presets' forecasts; transformers v5's rope_parameters and dtype keys; keys that would change the kernels refused.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;

namespace {

json predict(const std::string& args) { return ns_test::run_json("predict " + args); }

// The fixture's text with `key`'s line replaced by `line` (every fixture has one key per line).
std::string with_line(const std::string& text, const std::string& key, const std::string& line) {
  const auto at = text.find("\"" + key + "\"");
  REQUIRE(at != std::string::npos);
  const auto start = text.rfind('\n', at) + 1;
  const auto end = text.find('\n', at);
  return text.substr(0, start) + line + text.substr(end);
}

}  // namespace

TEST_CASE("hf families: Phi-3 / Gemma / Gemma2 config.json give HF's parameter counts and the presets", "[cli][hf]") {
  const struct {
    const char* name;
    double params;
  } models[] = {{"phi3_mini", 3821079552.0}, {"gemma_7b", 8537680896.0}, {"gemma2_9b", 9241705984.0}};
  for (const auto& m : models) {
    INFO(m.name);
    const std::string tail = " --gpu h100 --dtype bf16 --batch 1 --seq 512 --mode train";
    const json file = predict(std::string("--model tests/fixtures/hf/") + m.name + "/config.json" + tail);
    CHECK(file["params"].get<double>() == m.params);  // HF num_parameters()
    const json preset = predict(std::string("--model ") + m.name + tail);
    CHECK(preset["params"] == file["params"]);
    CHECK(preset["flops"] == file["flops"]);
    CHECK(preset["latency_ms"] == file["latency_ms"]);
  }
}

TEST_CASE("hf families: rope_parameters and dtype (transformers v5) are read as rope_theta / torch_dtype", "[cli][hf]") {
  temp_dir t;
  const std::string qwen3 = R"({"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 512,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 1000,
    "max_position_embeddings": 4096, )";
  const auto legacy = t.write("legacy/config.json", qwen3 + R"("rope_theta": 1000000, "rope_scaling": null,
    "torch_dtype": "bfloat16"})");
  const auto v5 = t.write("v5/config.json", qwen3 + R"("rope_parameters": {"rope_type": "default", "rope_theta": 1000000},
    "dtype": "bfloat16"})");
  const std::string tail = " --gpu h100 --dtype bf16 --batch 1 --seq 256 --mode inference";
  CHECK(predict("--model " + v5.string() + tail)["latency_ms"] == predict("--model " + legacy.string() + tail)["latency_ms"]);
  const auto bad = t.write("bad/config.json", qwen3 + R"("rope_parameters": {"rope_type": "default", "rope_theta": 0}})");
  const auto r = run_cli("predict --model " + bad.string() + tail);
  CHECK(r.code != 0);
  CHECK(r.err.find("key 'rope_parameters' must give rope_theta as a positive number") != std::string::npos);
}

TEST_CASE("hf families: keys that would change the kernels are refused, naming the file and the key", "[cli][hf]") {
  temp_dir t;
  const std::string phi3 = ns_test::slurp(ns_test::source_dir / "tests/fixtures/hf/phi3_mini/config.json");
  const std::string gemma = ns_test::slurp(ns_test::source_dir / "tests/fixtures/hf/gemma_7b/config.json");
  const struct {
    std::string file, text, message;
  } cases[] = {
      {"prf/config.json", with_line(phi3, "resid_pdrop", R"(  "partial_rotary_factor": 0.75,)"),
       "partial_rotary_factor = 0.75 is not modelled by the llama builder"},
      {"drop/config.json", with_line(phi3, "resid_pdrop", R"(  "resid_pdrop": 0.1,)"),
       "resid_pdrop = 0.1 is not modelled by the llama builder"},
      {"act/config.json", with_line(gemma, "hidden_act", R"(  "hidden_act": "gelu_new",)"),
       "hidden_act \"gelu_new\" is not supported (Gemma's MLP is GeGLU"},
      {"key/config.json", with_line(gemma, "hidden_act", R"(  "hidden_act": "gelu", "final_logit_softcapping": 30.0,)"),
       "unknown key 'final_logit_softcapping' for model_type \"gemma\""},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    const auto path = t.write(c.file, c.text);
    const auto r = run_cli("predict --model " + path.string() + " --gpu h100 --dtype bf16 --batch 1 --seq 64 --mode inference");
    CHECK(r.code != 0);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(r.out.empty());
  }
}
