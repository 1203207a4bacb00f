// tests/cli/test_serving_cli.cpp — serving phases end to end: `predict --mode prefill / decode` for Llama-3-8B on an H100
// (the README's two commands), kv_cache_gb, decode time against C, B and the weights' read, errors, tensor parallelism.
#include <algorithm>
#include <filesystem>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "cli_json.h"
#include "test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ns_test::run_cli;

namespace {

json predict(const std::string& args) {
  const auto r = run_cli("predict " + args + " --format json");
  INFO("predict " << args << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

std::string decode_args(int batch, int context, const std::string& extra = "") {
  return "--model llama3_8b --gpu h100 --mode decode --batch " + std::to_string(batch) + " --context " +
         std::to_string(context) + " --dtype bf16 " + extra;
}

// Σ count of the forward kernels named `kernel`.
int kernels_named(const json& j, const std::string& kernel) {
  int n = 0;
  for (const auto& op : j["ops"])
    if (op["kernel"] == kernel) n += op["count"].get<int>();
  return n;
}

const json* op_named(const json& j, const std::string& name) {
  for (const auto& op : j["ops"])
    if (op["name"] == name) return &op;
  return nullptr;
}

constexpr double kv_bytes_per_token = 2.0 * 32 * 8 * 128 * 2;  // K and V, 32 layers, 8 kv heads of 128, bf16

}  // namespace

TEST_CASE("serving: the README's prefill and decode commands for llama3_8b on an H100", "[cli][serving]") {
  const json pre = predict("--model llama3_8b --gpu h100 --mode prefill --batch 8 --seq 2048 --dtype bf16");
  CHECK(pre["mode"] == "prefill");
  CHECK(pre["latency_ms"].get<double>() > 0);
  CHECK(pre["backward_ms"].get<double>() == 0);
  CHECK(pre["optimizer_ms"].get<double>() == 0);
  CHECK(pre["kv_cache_gb"].get<double>() == Approx(kv_bytes_per_token * 8 * 2048 / 1e9));
  // the LM head on each prompt's last token: B rows
  const json* head = op_named(pre, "lm_head");
  REQUIRE(head);
  CHECK((*head)["dims"]["m"] == 8);
  CHECK(kernels_named(pre, "FlashAttention") == 32);
  // weights for inference = params x dtype bytes
  CHECK(pre["state_gb"].get<double>() == Approx(pre["params"].get<double>() * 2 / 1e9));

  const json dec = predict(decode_args(8, 2048));
  CHECK(dec["mode"] == "decode");
  CHECK(dec["context"] == 2048);
  CHECK(dec["seq"] == 1);
  CHECK(dec["kv_cache_gb"].get<double>() == Approx(kv_bytes_per_token * 8 * 2049 / 1e9));
  CHECK(dec["backward_ms"].get<double>() == 0);
  CHECK(kernels_named(dec, "DecodeAttention") == 32);
  CHECK(kernels_named(dec, "FlashAttention") == 0);
  for (const auto& op : dec["ops"]) {
    if (op["kernel"] == "DecodeAttention") {
      CHECK(op["dims"]["kv_len"] == 2049);
      CHECK(op["dims"]["kv_heads"] == 8);
    }
    if (op["kind"] == "gemm") CHECK(op["dims"]["m"] == 8);
    CHECK(op["kind"] != "bmm");
  }
  // one decode step is far shorter than the prefill of the same batch
  CHECK(dec["latency_ms"].get<double>() < pre["latency_ms"].get<double>() / 10);
}

TEST_CASE("serving: decode time grows with the context and the batch, and reads at least the weights", "[cli][serving]") {
  for (const std::string predictor : {"neusight", "roofline"}) {
    INFO(predictor);
    const std::string p = "--predictor " + predictor;
    const double c1k = predict(decode_args(8, 1024, p))["latency_ms"];
    const double c4k = predict(decode_args(8, 4096, p))["latency_ms"];
    const double b1 = predict(decode_args(1, 2048, p))["latency_ms"];
    const double b64 = predict(decode_args(64, 2048, p))["latency_ms"];
    CHECK(c4k > c1k);
    CHECK(b64 > b1);
  }
  // the roofline's floor: every weight a step reads, read once (params x 2 bytes / the GPU's bandwidth) — all of them
  // but the untied embedding table, of which a step gathers B rows only (128256 x 4096 of Llama-3-8B's 8.03 B)
  const json one = predict(decode_args(1, 1024, "--predictor roofline"));
  double bw_gbps = 0;
  for (const auto& g : json::parse(run_cli("gpus --format json").out))
    if (g["name"] == one["gpu"]) bw_gbps = g["mem_bw_gbps"];
  REQUIRE(bw_gbps > 0);
  const double read = one["params"].get<double>() - 128256.0 * 4096;
  CHECK(read / one["params"].get<double>() > 0.93);
  const double weights_ms = read * 2 / (bw_gbps * 1e9) * 1e3;
  CHECK(one["latency_ms"].get<double>() >= weights_ms);
}

TEST_CASE("serving: decode with tensor parallelism 2", "[cli][serving]") {
  const json one = predict(decode_args(8, 2048));
  const json two = predict(decode_args(8, 2048, "--tp 2"));
  CHECK(two["latency_ms"].get<double>() > 0);
  CHECK(two["parallel"]["tp"] == 2);
  CHECK(two["kv_cache_gb"].get<double>() == Approx(one["kv_cache_gb"].get<double>() / 2));
  CHECK(two["latency_ms"].get<double>() < one["latency_ms"].get<double>());
  for (const auto& op : two["ops"])
    if (op["kernel"] == "DecodeAttention") {
      CHECK(op["dims"]["heads"] == 16);
      CHECK(op["dims"]["kv_heads"] == 4);
    }
}

TEST_CASE("serving: errors", "[cli][serving]") {
  auto fails = [](const std::string& args, const std::string& message) {
    const auto r = run_cli("predict " + args);
    INFO(args);
    CHECK(r.code == 1);
    CHECK(r.err == "neusight: " + message + "\n");
  };
  {  // a missing --context is a usage error like every missing required flag (exit 2, review18)
    const auto r = run_cli("predict --model llama3_8b --gpu h100 --mode decode --batch 8 --dtype bf16");
    CHECK(r.code == 2);
    CHECK(r.err == "neusight: command line: missing --context; `neusight predict --help` lists the flags\n");
  }
  // given by flags, said by the flags (tester3 problem 12: the messages named workload fields)
  fails("--model llama3_8b --gpu h100 --mode train --batch 8 --seq 128 --context 2048",
        "command line: --context applies to --mode decode only (mode is \"train\"): prefill and inference take the prompt "
        "length as --seq");
  fails("--model llama3_8b --gpu h100 --mode decode --batch 8 --seq 2048 --context 2048",
        "command line: --seq is the prompt length of --mode prefill (and inference, train); --mode decode runs one new "
        "token per sequence over --context tokens of KV cache: drop --seq 2048 (--context is the cache's length)");
  const auto bert = run_cli("predict --model bert_large --gpu h100 --mode decode --batch 8 --context 128");
  CHECK(bert.code == 1);
  CHECK(bert.err.find("the bert model builder (scripts/neusight/models/bert.lua) has no decode phase") != std::string::npos);
}

// Rotary models (Llama, MoE, DeepSeek) have no position table: beyond max_position_embeddings a forecast warns (GPT,
// BERT and OPT refuse it: their learned tables have no row there). Prefill counts seq, decode context + 1, serve
// input + output.
namespace {
bool warns_of_positions(const json& j, const std::string& what) {
  return ns_test::warned(j["warnings"], what + " exceeds the model's max_position_embeddings");
}
}  // namespace

TEST_CASE("serving: a Llama preset beyond its max_position_embeddings warns and within it does not", "[cli][serving]") {
  const json beyond = predict("--model llama2_7b --gpu h100 --mode prefill --batch 1 --seq 8192");
  CHECK(warns_of_positions(beyond, "seq 8192"));
  CHECK(std::string(beyond["warnings"][0]) ==
        "seq 8192 exceeds the model's max_position_embeddings 4096 (the forecast assumes the model runs at that length, "
        "e.g. with RoPE scaling)");
  CHECK_FALSE(warns_of_positions(predict("--model llama2_7b --gpu h100 --mode prefill --batch 1 --seq 4096"), "seq 4096"));
  // decode: the cache + the new token
  CHECK(warns_of_positions(predict("--model llama2_7b --gpu h100 --mode decode --batch 1 --context 4096"),
                           "context 4096 + 1 new token"));
  CHECK_FALSE(warns_of_positions(predict("--model llama2_7b --gpu h100 --mode decode --batch 1 --context 4095"),
                                 "context 4095 + 1 new token"));
  // a mixture of experts and DeepSeek, training too
  CHECK(warns_of_positions(predict("--model mixtral_8x7b --gpu h100 --mode prefill --batch 1 --seq 65536"),
                           "seq 65536"));
  CHECK(warns_of_positions(predict("--model deepseek_v2_lite --gpu h100 --mode train --batch 1 --seq 200000"),
                           "seq 200000"));
  // a config.json's own value (tests/fixtures/hf/llama32_1b: 131072)
  CHECK(warns_of_positions(predict("--model tests/fixtures/hf/llama32_1b/config.json --gpu h100 --mode prefill "
                                   "--batch 1 --seq 140000"),
                           "seq 140000"));
  // serve: the longest request, prompt + output (vLLM's max_model_len rule)
  const std::string serve = "serve --model llama2_7b --gpu h100 --batch 1 --input-len 4000 --output-len ";
  CHECK(warns_of_positions(ns_test::run_json(serve + "97"), "input 4000 + output 97 tokens"));
  CHECK_FALSE(warns_of_positions(ns_test::run_json(serve + "96"), "input 4000 + output 96 tokens"));
}

// A config.json's max_position_embeddings as Llama-3.2-1B's (tests/fixtures/hf/llama32_1b) with the value replaced:
// null counts as omitted and both take LlamaConfig's default 2048 (null failed to load: "field
// 'max_position_embeddings' must be a positive integer (got false)"); 2048.0 is 2048 (it loaded and never warned).
TEST_CASE("serving: a config.json max_position_embeddings of null or 2048.0 or none warns beyond 2048", "[cli][serving][hf]") {
  const std::string fixture = ns_test::slurp(ns_test::source_dir / "tests/fixtures/hf/llama32_1b/config.json");
  const std::string key = "\"max_position_embeddings\": 131072,";
  const size_t at = fixture.find(key);
  REQUIRE(at != std::string::npos);
  ns_test::temp_dir t;
  for (const std::string value : {"\"max_position_embeddings\": null,", "\"max_position_embeddings\": 2048.0,", ""}) {
    INFO(value);
    std::string text = fixture;
    text.replace(at, key.size(), value);
    const auto file = t.write("m" + std::to_string(value.size()) + "/config.json", text);
    // --dtype bf16, the file's torch_dtype: without it the first warning says that torch_dtype is not read
    const std::string model = "--model '" + file.string() + "' --gpu h100 --predictor roofline --dtype bf16 --batch 1 ";
    const json beyond = predict(model + "--mode prefill --seq 4096");
    REQUIRE(beyond["warnings"].size() >= 1);
    CHECK(std::string(beyond["warnings"][0]) ==
          "seq 4096 exceeds the model's max_position_embeddings 2048 (the forecast assumes the model runs at that length, "
          "e.g. with RoPE scaling)");
    CHECK_FALSE(warns_of_positions(predict(model + "--mode prefill --seq 2048"), "seq 2048"));
    CHECK(warns_of_positions(predict(model + "--mode decode --context 2048"), "context 2048 + 1 new token"));
  }
}

namespace {
// The longest bf16-cache, window-less row of AIConfigurator's `file` of the B200 (a training GPU of the attention MLPs):
// its keys, isl (context_attention: a prompt) or isl + step (generation_attention: a cache).
int64_t longest_attention_row(const std::filesystem::path& file, bool decode) {
  std::istringstream in(ns_test::slurp(file));
  std::string line;
  std::getline(in, line);
  std::vector<std::string> head;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string cell; std::getline(ss, cell, ',');) out.push_back(cell);
    return out;
  };
  head = split(line);
  auto col = [&](const std::string& name) {
    const auto it = std::find(head.begin(), head.end(), name);
    REQUIRE(it != head.end());
    return size_t(it - head.begin());
  };
  const size_t isl = col("isl"), step = col("step"), kv = col("kv_cache_dtype"), win = col("window_size");
  int64_t most = 0;
  while (std::getline(in, line)) {
    const auto row = split(line);
    if (row.size() != head.size() || row[kv] != "bfloat16" || row[win] != "0") continue;
    most = std::max<int64_t>(most, std::stoll(row[isl]) + (decode ? std::stoll(row[step]) : 0));
  }
  return most;
}

bool warns_of_attention_range(const json& j, const std::string& what) {
  for (const auto& w : j["warnings"])
    if (std::string(w).find(what) != std::string::npos &&
        std::string(w).find("beyond the contexts the neusight predictor's attention MLPs were trained on") !=
            std::string::npos)
      return true;
  return false;
}
}  // namespace

// A prefill or decode attention longer than any the attention MLPs learnt (AIConfigurator: prompts of up to 16384
// tokens, caches of up to 131072) was priced without a word, on a training GPU without any warning at all (audit25:
// Llama-3.1-8B, a 131072-token prefill on a B200, 8x the longest measured). Said from the first token beyond the
// data's longest row (the manifests' [training.range]: scripts/neusight/uncertainty.lua range_warning), by predict
// and serve; not by the roofline predictor.
TEST_CASE("serving: attention beyond the attention MLPs' training contexts is said", "[cli][serving]") {
  const auto dir = ns_test::shared_data("aiconfigurator/b200_sxm");
  if (!dir) return;
  const int64_t prompt = longest_attention_row(*dir / "context_attention.csv", false);
  const int64_t cache = longest_attention_row(*dir / "generation_attention.csv", true);
  REQUIRE(prompt == 16384);
  REQUIRE(cache == 131072);
  const std::string model = "--model llama32_1b --gpu b200 --dtype bf16 --batch 1 ";
  const std::string at = std::to_string(prompt), past = std::to_string(prompt + 1);
  CHECK_FALSE(warns_of_attention_range(predict(model + "--mode prefill --seq " + at), "prefill attention"));
  CHECK(warns_of_attention_range(predict(model + "--mode prefill --seq " + past),
                                 "a prefill attention over " + past + " tokens (attention_prefill was trained on "
                                 "prompts of up to " + at));
  // a decode step at context C attends over C + 1 cached tokens
  CHECK_FALSE(warns_of_attention_range(predict(model + "--mode decode --context " + std::to_string(cache - 1)),
                                       "decode attention"));
  CHECK(warns_of_attention_range(predict(model + "--mode decode --context " + std::to_string(cache)),
                                 "a decode attention over " + std::to_string(cache + 1) + " cached tokens"));
  CHECK_FALSE(warns_of_attention_range(
      predict(model + "--mode decode --predictor roofline --context " + std::to_string(cache)), "decode attention"));
  // serve: of its requests (the longest prompt; the longest request's input + output - 1 cached tokens)
  const json s = ns_test::run_json("serve --model llama32_1b --gpu b200 --batch 1 --output-len 2 --input-len " + past);
  CHECK(warns_of_attention_range(s, "a prefill attention over " + past + " tokens"));
  CHECK_FALSE(warns_of_attention_range(
      ns_test::run_json("serve --model llama32_1b --gpu b200 --batch 1 --output-len 2 --input-len " + at), "attention"));
}

// The ranges said are the manifests' ([training.range], written by `neusight train` from the rows it trained on), of
// the weights the forecast used: a --weights DIR whose attention_prefill manifest records prompts of up to 4096 keys
// warns of a 4097-token prefill (a constant 16384 said nothing); the shipped weights' does not. A copy of the shipped
// weights with that one line changed: the weights themselves are the same bytes. (serve has no --weights: its phases'
// range is the shipped manifests', checked by the test above.)
TEST_CASE("serving: the attention range said is the --weights manifests'", "[cli][serving]") {
  ns_test::temp_dir t;
  const fs::path root = t.path / "weights";
  fs::copy(ns_test::source_dir / "weights", root, fs::copy_options::recursive);
  const fs::path manifest = root / "nvidia" / "attention_prefill" / "model.toml";
  std::string text = ns_test::slurp(manifest);
  const auto range = text.find("[training.range]");
  REQUIRE(range != std::string::npos);
  const auto keys = text.find("keys = 16384.0", range);
  REQUIRE(keys != std::string::npos);
  text.replace(keys, 14, "keys = 4096.0");
  t.write("weights/nvidia/attention_prefill/model.toml", text);
  const std::string weights = " --weights '" + root.string() + "'";
  const std::string model = "--model llama32_1b --gpu b200 --dtype bf16 --batch 1 ";
  const std::string said = "a prefill attention over 4097 tokens (attention_prefill was trained on prompts of up to 4096)";
  CHECK_FALSE(warns_of_attention_range(predict(model + "--mode prefill --seq 4096" + weights), "prefill attention"));
  CHECK(warns_of_attention_range(predict(model + "--mode prefill --seq 4097" + weights), said));
  CHECK_FALSE(warns_of_attention_range(predict(model + "--mode prefill --seq 4097"), "prefill attention"));
}

// A manifest's [training.range] is refused where it names another input than the family's, or a value that is no
// positive number: never read as "no range" (which says nothing).
TEST_CASE("serving: a misspelt or bad training.range is refused with its place", "[cli][serving]") {
  for (const auto& [line, why] : std::vector<std::pair<std::string, std::string>>{
           {"key = 4096.0", "training.range.key is not an input the attention_prefill family records (it records 'keys')"},
           {"keys = -1.0", "training.range.keys must be a positive number"}}) {
    ns_test::temp_dir t;
    const fs::path root = t.path / "weights";
    fs::copy(ns_test::source_dir / "weights", root, fs::copy_options::recursive);
    std::string text = ns_test::slurp(root / "nvidia" / "attention_prefill" / "model.toml");
    text.replace(text.find("keys = 16384.0"), 14, line);
    t.write("weights/nvidia/attention_prefill/model.toml", text);
    const auto r = run_cli("predict --model llama32_1b --gpu b200 --dtype bf16 --batch 1 --mode prefill --seq 128 "
                           "--weights '" + root.string() + "'");
    CHECK(r.code != 0);
    CHECK(r.err.find("attention_prefill/model.toml:") != std::string::npos);
    CHECK(r.err.find(why) != std::string::npos);
  }
}

// The shipped manifests' ranges are what `neusight train --dry-run` computes from their own training data (the
// manifest's training.data and excluded_gpus: the same rows and code path as training), value for value.
TEST_CASE("serving: the shipped attention manifests' training.range is their data's", "[cli][serving][shared]") {
  if (!ns_test::shared_data("aiconfigurator/b200_sxm")) return;
  for (const char* fam : {"attention_prefill", "attention_decode"}) {
    const fs::path manifest = ns_test::source_dir / "weights" / "nvidia" / fam / "model.toml";
    const toml::table m = toml::parse(ns_test::slurp(manifest));
    const toml::table* shipped = m["training"]["range"].as_table();
    REQUIRE(shipped != nullptr);
    std::string cmd = std::string("train --dry-run --family ") + fam + " --out /nonexistent --data";
    for (const auto& d : *m["training"]["data"].as_array()) cmd += " '" + d.value_or(std::string()) + "'";
    for (const auto& g : *m["training"]["excluded_gpus"].as_array()) cmd += " --exclude-gpu '" + g.value_or(std::string()) + "'";
    const auto r = run_cli(cmd);
    INFO(cmd << "\n" << r.err);
    REQUIRE(r.code == 0);
    // the printed [training.range] on (the lines before it are the summary and min_seconds), as TOML: the same
    // inputs and values, however either is indented
    const auto at = r.out.find("[training.range]");
    REQUIRE(at != std::string::npos);
    const toml::table printed = toml::parse(r.out.substr(at));
    const toml::table* range = printed["training"]["range"].as_table();
    REQUIRE(range != nullptr);
    CHECK(range->size() == shipped->size());
    for (const auto& [key, v] : *shipped) {
      INFO(fam << " training.range." << key.str());
      CHECK((*range)[key.str()].value<double>() == v.value<double>());
    }
  }
}
