// tests/cli/test_hf_config.cpp — `--model path/config.json`: HuggingFace configs give the same graph as the presets.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "lua/wrap.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::source_dir;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

const char* const base_flags = " --gpu l4 --mode train --batch 2 --seq 64 --predictor roofline --format json";

json forecast(const std::string& model) {
  const auto r = run_cli("predict --model '" + model + "'" + base_flags);
  INFO("model " << model << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// The supported model_type list as hf.lua prints it (switch only where its builder exists).
std::string supported() {
  std::string s =
      "bert, deepseek_v2, deepseek_v3, gemma, gemma2, gpt2, llama, mistral, mixtral, opt, phi3, qwen2, qwen2_moe, qwen3, "
      "qwen3_moe";
  if (fs::exists(source_dir / "scripts/neusight/models/switch.lua")) s += ", switch_transformers";
  return s;
}

}  // namespace

TEST_CASE("hf config: every DLmodel_configs JSON with a builder gives its preset's FLOPs", "[cli][hf]") {
  const auto shared = ns_test::shared_data("neusight/DLmodel_configs");
  if (!shared) return;
  const fs::path dir = *shared;
  int compared = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    const std::string stem = e.path().stem().string();
    const json cfg = json::parse(ns_test::slurp(e.path()));
    const std::string type = cfg.value("model_type", "");
    if (type == "switch_transformers" && !fs::exists(source_dir / "scripts/neusight/models/switch.lua")) continue;
    SECTION(stem) {
      const json from_file = forecast(e.path().string());
      const json preset = forecast(stem);
      CHECK(from_file["model"] == stem);
      CHECK(from_file["flops"].get<double>() == preset["flops"].get<double>());
      CHECK(from_file["params"] == preset["params"]);
      CHECK(from_file["ops"].size() == preset["ops"].size());
      CHECK(from_file["latency_ms"].get<double>() == Approx(preset["latency_ms"].get<double>()).epsilon(1e-12));
    }
    ++compared;
  }
  CHECK(compared >= 11);
}

TEST_CASE("hf config: checked-in fixtures, from the command line and from a workload", "[cli][hf]") {
  // The reference's gpt2_large.json equals the preset.
  const json large = forecast("tests/fixtures/neusight/DLmodel_configs/gpt2_large.json");
  CHECK(large["model"] == "gpt2_large");
  CHECK(large["flops"].get<double>() == forecast("gpt2_large")["flops"].get<double>());

  // A tiny GPT-2 config.json (null n_inner, nested tables ignored) equals the same config written in Lua.
  temp_dir t;
  const auto lua_cfg = t.write("lua.lua", R"(return { gpu = "l4", mode = "train", batch = 2, seq = 64,
    model = { name = "tiny-gpt2", arch = "gpt", n_layer = 2, n_embd = 128, n_head = 4, vocab_size = 1000,
              n_positions = 256 } })");
  const auto r = run_cli("run '" + lua_cfg.string() + "' --predictor roofline --format json");
  REQUIRE(r.code == 0);
  const json want = json::parse(r.out);
  const json got = forecast("tests/fixtures/hf/tiny-gpt2/config.json");
  CHECK(got["model"] == "tiny-gpt2");
  CHECK(got["flops"].get<double>() == want["flops"].get<double>());

  // In a workload the path is relative to the script's folder.
  fs::create_directories(t.path / "m");
  fs::copy_file(source_dir / "tests/fixtures/hf/tiny-gpt2/config.json", t.path / "m/config.json");
  const auto w = t.write("w.lua", R"(return { gpu = "l4", mode = "train", batch = 2, seq = 64, model = "m/config.json" })");
  const auto rw = run_cli("run '" + w.string() + "' --predictor roofline --format json");
  INFO(rw.err);
  REQUIRE(rw.code == 0);
  const json jw = json::parse(rw.out);
  CHECK(jw["model"] == "m");
  CHECK(jw["flops"].get<double>() == want["flops"].get<double>());
}

TEST_CASE("hf config: malformed, unreadable and unsupported files", "[cli][hf][errors]") {
  temp_dir t;
  const std::string flags = " --gpu l4 --mode inference --batch 1 --seq 8";
  const auto bad = t.write("bad.json", "{\n  \"model_type\": \"gpt2\",\n  \"n_layer\": }\n");
  auto r = run_cli("predict --model '" + bad.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + bad.string() +
                     ":3:14: invalid JSON: syntax error while parsing value - unexpected '}'; expected '[', '{', or a "
                     "literal\n");

  const auto truncated = t.write("trunc.json", "{\"model_type\": \"gpt2\",\n");
  r = run_cli("predict --model '" + truncated.string() + "'" + flags);
  CHECK(r.err == "neusight: " + truncated.string() +
                     ":2:1: invalid JSON: syntax error while parsing object key - unexpected end of input; expected "
                     "string literal\n");

  // A number beyond double is nlohmann's out_of_range, not a parse_error: still an error naming the file.
  const auto huge = t.write("huge.json", "{\"model_type\": \"gpt2\", \"n_embd\": 1E999}");
  r = run_cli("predict --model '" + huge.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + huge.string() + ": invalid JSON: number overflow parsing '1E999'\n");

  r = run_cli("predict --model '" + (t.path / "missing.json").string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + (t.path / "missing.json").string() + ": no such file\n");

  // A key given twice (top level or nested) is refused with the key named: a JSON reader keeps one value silently.
  const auto dup = t.write("dup.json", "{\"model_type\": \"gpt2\", \"n_layer\": 2,\n \"n_layer\": 48}");
  r = run_cli("predict --model '" + dup.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + dup.string() + ":2: key 'n_layer' appears twice in one object (a JSON reader keeps one "
                     "of them silently: Python's json, so HF, the last); give it once\n");
  // its line is the second one's, counted among the keys in text order (a string value ":" or a key's name inside a
  // string is no key); the same key in sibling objects, or in an array's objects, is no duplicate
  const auto nested = t.write("nested.json", R"({"model_type": "gpt2", "note": "x\": y", "b": {"x": 3},
    "l": [{"x": 1}, {"x": 2}],
    "task_specific_params": {"a": {"x": 1,
      "x": 2}}})");
  r = run_cli("predict --model '" + nested.string() + "'" + flags);
  CHECK(r.err.find("neusight: " + nested.string() + ":4: key 'x' appears twice in one object") == 0);

  const auto arr = t.write("arr.json", "[1, 2]");
  r = run_cli("predict --model '" + arr.string() + "'" + flags);
  CHECK(r.err == "neusight: " + arr.string() + ": a model config must be a JSON object (got array)\n");

  const auto rwkv = t.write("rwkv/config.json", R"({"model_type": "rwkv", "hidden_size": 4096})");
  r = run_cli("predict --model '" + rwkv.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + rwkv.string() + ": has model_type \"rwkv\", which is not supported; supported: " +
                     supported() + " (to add it: a builder neusight/models/rwkv.lua declaring HF, under --scripts DIR; "
                     "README \"Writing a model builder\")\n");

  const auto none = t.write("none.json", R"({"n_layer": 2})");
  r = run_cli("predict --model '" + none.string() + "'" + flags);
  CHECK(r.err == "neusight: " + none.string() + ": has no 'model_type'; supported: " + supported() + "\n");

  // A builder's own check names the file and the key's line, the model (from the file name) and the field.
  const auto partial = t.write("partial.json", R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 0})");
  r = run_cli("predict --model '" + partial.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err.rfind("neusight: " + partial.string() + ":1: gpt model 'partial': field 'n_embd' must be a positive "
                    "integer (got 0)", 0) == 0);
}

TEST_CASE("hf config: omitted keys take HF's defaults, unknown keys are errors", "[cli][hf][errors]") {
  temp_dir t;
  // GPT2Config defaults: n_embd 768, n_head 12, vocab_size 50257, n_positions 1024.
  const auto partial = t.write("partial.json", R"({"model_type": "gpt2", "n_layer": 2})");
  const auto lua_cfg = t.write("lua.lua", R"(return { gpu = "l4", mode = "train", batch = 2, seq = 64,
    model = { name = "partial", arch = "gpt", n_layer = 2, n_embd = 768, n_head = 12, vocab_size = 50257,
              n_positions = 1024 } })");
  const auto r_lua = run_cli("run '" + lua_cfg.string() + "' --predictor roofline --format json");
  REQUIRE(r_lua.code == 0);
  const json got = forecast(partial.string());
  CHECK(got["params"] == json::parse(r_lua.out)["params"]);
  CHECK(got["flops"].get<double>() == json::parse(r_lua.out)["flops"].get<double>());

  // A typo is neither ours nor HF's: an error with a did-you-mean, exit 1, nothing written.
  const std::string out = (t.path / "out.json").string();
  const std::string flags = " --gpu l4 --mode inference --batch 1 --seq 8 --format json -o '" + out + "'";
  const auto typo = t.write("typo/config.json", R"({"model_type": "gpt2", "n_layer": 2, "n_iner": 8192})");
  auto r = run_cli("predict --model '" + typo.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + typo.string() + ":1: unknown key 'n_iner' for model_type \"gpt2\" (did you mean 'n_inner'?)\n");
  CHECK_FALSE(fs::exists(out));
  const auto bert = t.write("bert/config.json", R"({"model_type": "bert", "num_hidden_layer": 2})");
  r = run_cli("predict --model '" + bert.string() + "'" + flags);
  CHECK(r.err == "neusight: " + bert.string() +
                     ":1: unknown key 'num_hidden_layer' for model_type \"bert\" (did you mean 'num_hidden_layers'?)\n");
  // An HF key that would change the kernels is accepted at the value the builder models only.
  const auto relu = t.write("relu/config.json", R"({"model_type": "gpt2", "activation_function": "relu"})");
  r = run_cli("predict --model '" + relu.string() + "'" + flags);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + relu.string() +
                     ":1: activation_function = \"relu\" is not modelled by the gpt builder (scripts/neusight/models/gpt.lua "
                     "builds \"gelu_new\" only)\n");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("json_position_of: nlohmann's byte count → line:col", "[lua][hf]") {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": }\n";
  CHECK(ns::json_position_of(text, 1).line == 1);
  CHECK(ns::json_position_of(text, 1).col == 1);
  const auto p = ns::json_position_of(text, 20);  // the '}' on line 3 is byte 20 (1-based)
  CHECK(p.line == 3);
  CHECK(p.col == 8);
  CHECK(ns::json_position_of(text, 0).line == 1);
  CHECK(ns::json_position_of(text, 1000).line == 4);
}

TEST_CASE("hf config: search names the config.json a builder refuses", "[cli][hf][search]") {
  ns_test::temp_dir t;
  const auto cfg = t.write("odd.json", R"({"model_type": "gpt2", "n_layer": 2, "n_head": 3, "n_embd": 64})");
  const auto r = ns_test::run_cli("search --model '" + cfg.string() + "' --gpu h100 --gpus 2 --batch 8 --seq 128");
  CHECK(r.code == 1);
  CHECK(r.err.find("n_embd (64) must be divisible by n_head (3)") != std::string::npos);
  CHECK(r.err.find("(--model " + cfg.string() + ")") != std::string::npos);
}

// A builder's refusal of a config.json's values (heads that do not divide) starts with the file and the line of the
// key, as hf.lua's own key errors do; it named the model alone, the file only in the context line below it.
TEST_CASE("hf config: a builder's refusal names the file line of the key", "[cli][hf]") {
  ns_test::temp_dir t;
  const auto kv = t.write("kv.json", "{\"model_type\": \"llama\", \"hidden_size\": 512, \"intermediate_size\": 1024,\n"
                                     " \"num_attention_heads\": 8,\n"
                                     " \"num_key_value_heads\": 3,\n"
                                     " \"num_hidden_layers\": 2, \"vocab_size\": 1000}\n");
  auto r = run_cli("predict --model '" + kv.string() + "'" + base_flags);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("neusight: " + kv.string() + ":3: llama model 'kv': num_attention_heads (8) must be divisible by "
                   "num_key_value_heads (3)\n") != std::string::npos);
  const auto hs = t.write("hs.json", "{\"model_type\": \"llama\",\n \"hidden_size\": 500,\n"
                                     " \"intermediate_size\": 1024, \"num_attention_heads\": 8,\n"
                                     " \"num_hidden_layers\": 2, \"vocab_size\": 1000}\n");
  r = run_cli("predict --model '" + hs.string() + "'" + base_flags);
  CHECK(r.err.find(hs.string() + ":3: llama model 'hs': hidden_size (500) must be divisible by num_attention_heads "
                   "(8), or head_dim be given") != std::string::npos);
  // a key the file does not hold takes its default, and the message says so
  const auto gpt = t.write("g.json", "{\"model_type\": \"gpt2\", \"n_layer\": 2,\n \"n_embd\": 64}\n");
  r = run_cli("predict --model '" + gpt.string() + "'" + base_flags);
  CHECK(r.err.find(gpt.string() + ":2: gpt model 'g': n_embd (64) must be divisible by n_head (12) (n_head: not in "
                   "the file, the default)") != std::string::npos);
}

TEST_CASE("hf config: --model DIR reads a snapshot directory's config.json", "[cli][hf]") {
  temp_dir t;
  const fs::path dir = t.path / "Llama-3.2-1B";
  fs::create_directories(dir);
  fs::copy_file(source_dir / "tests/fixtures/hf/llama32_1b/config.json", dir / "config.json");
  const json from_dir = forecast(dir.string());
  const json from_file = forecast((dir / "config.json").string());
  CHECK(from_dir["model"] == "Llama-3.2-1B");
  CHECK(from_dir["flops"].get<double>() == from_file["flops"].get<double>());
  CHECK(from_dir["params"] == from_file["params"]);
  // a directory without one: said so, not "unknown model preset"
  const fs::path empty = t.path / "empty";
  fs::create_directories(empty);
  const auto r = run_cli("predict --model '" + empty.string() + "'" + base_flags);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("a directory without config.json; --model takes a preset name, a HuggingFace config.json, or a "
                   "snapshot directory holding one") != std::string::npos);
  CHECK(r.err.find("unknown model preset") == std::string::npos);
  // a preset's name wins over a folder of that name in the working directory (here one holding Llama-3.2-1B's
  // config.json): --model llama3_8b is the preset
  fs::create_directories(t.path / "llama3_8b");
  fs::copy_file(source_dir / "tests/fixtures/hf/llama32_1b/config.json", t.path / "llama3_8b" / "config.json");
  const auto shadowed = ns_test::run_sh("cd " + ns_test::quoted(t.path.string()) + " && '" NEUSIGHT_EXE
                                        "' predict --model llama3_8b" + base_flags);
  INFO(shadowed.err);
  REQUIRE(shadowed.code == 0);
  CHECK(json::parse(shadowed.out)["params"] == forecast("llama3_8b")["params"]);
}
