// tests/cli/test_user_report_cli.cpp — what a user test (persona: extender) found: -v on run/predict names op files
// that shadow bundled ones (as `ops -v` does), --weights warns where no predictor reads it, a new element-wise rule's
// error names its line and the `op` field, HF configs show a string count as a string and accept quantization_config
// with a warning, eval kernels says why rows were skipped, train --help lists every family, and CSV numbers are the
// JSON's digits.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_json;
using ns_test::run_cli;
using ns_test::source_dir;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

// The bundled GELU rule under another doc: a file that shadows ops/gelu.lua.
const char* const gelu_copy =
    "return require('neusight.rules').elementwise { name = 'gelu', doc = 'mine', unary = true, grad = 'same' }\n";

const char* const tiny_workload = R"lua(
return {
  gpu = "tests/fixtures/gpus/tiny.toml", mode = "inference", batch = 1, seq = 1,
  model = function(opts)
    return { { op = "gelu", name = "g", inputs = { { 1000 } }, output = { 1000 } } }
  end,
})lua";

std::string norm(const fs::path& p) { return p.lexically_normal().generic_string(); }

}  // namespace

TEST_CASE("user report: -v on run and predict names op files that shadow bundled ones", "[cli][ops]") {
  temp_dir t;
  t.write("myops/gelu.lua", gelu_copy);
  const std::string ops = (t.path / "myops").string();
  const std::string line = norm(t.path / "myops") + "/gelu.lua shadows ops/gelu.lua (op 'gelu')";
  const std::string tiny = (source_dir / "tests/fixtures/gpus/tiny.toml").string();
  const std::string script = t.write("w/wl.lua", tiny_workload).string();
  auto r = run_cli("run '" + script + "' --predictor roofline --gpu '" + tiny + "' --ops '" + ops + "' -v");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find(line) != std::string::npos);
  r = run_cli("predict --model gpt2_med --mode inference --batch 1 --seq 16 --predictor roofline --gpu '" + tiny +
              "' --ops '" + ops + "' -v");
  REQUIRE(r.code == 0);
  CHECK(r.err.find(line) != std::string::npos);
  // without -v nothing; `ops -v` lists it in its table, once (not on stderr again)
  r = run_cli("run '" + script + "' --predictor roofline --gpu '" + tiny + "' --ops '" + ops + "'");
  CHECK(r.err.find("shadows") == std::string::npos);
  r = run_cli("ops --ops '" + ops + "' -v");
  CHECK(r.out.find("shadows ops/gelu.lua") != std::string::npos);
  CHECK(r.err.find("shadows") == std::string::npos);
  // a workload's own ops/ folder joins the path when it loads: named then, once
  t.write("w/ops/gelu.lua", gelu_copy);
  r = run_cli("run '" + script + "' --predictor roofline --gpu '" + tiny + "' -v");
  REQUIRE(r.code == 0);
  const std::string beside = norm(t.path / "w/ops") + "/gelu.lua shadows ops/gelu.lua (op 'gelu')";
  CHECK(r.err.find(beside) != std::string::npos);
  CHECK(r.err.find(beside) == r.err.rfind(beside));
}

TEST_CASE("user report: --weights warns when no predictor of the run reads weights", "[cli][predictor]") {
  temp_dir t;
  fs::create_directories(t.path / "myw/nvidia");  // incomplete: the neusight predictor would refuse it
  const std::string w = (t.path / "myw").string();
  const std::string base = "predict --model gpt2_med --gpu h100 --mode inference --batch 1 --seq 64 --dtype bf16 ";
  auto r = run_cli(base + "--weights '" + w + "' --predictor roofline --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string note = "--weights " + norm(t.path / "myw") + " has no effect: no predictor of this run read weights";
  CHECK(r.err.find(note) != std::string::npos);
  bool in_json = false;
  const json j = json::parse(r.out);
  for (const auto& x : j["warnings"]) in_json = in_json || x.get<std::string>().find(note) == 0;
  CHECK(in_json);
  // the bundled weights (the default) and the neusight predictor say nothing
  r = run_cli(base + "--predictor roofline");
  CHECK(r.err.find("--weights") == std::string::npos);
  r = run_cli(base + "--weights '" + (source_dir / "weights").string() + "'");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("has no effect") == std::string::npos);
}

TEST_CASE("user report: an unknown element-wise op names the rule's line - the valid kernels and the op field",
          "[cli][ops]") {
  temp_dir t;
  t.write("w/ops/swiglu.lua", "-- a fused SwiGLU\nreturn require('neusight.rules').elementwise {\n"
                              "  name = 'swiglu', doc = 'silu(gate)*up', grad = 'same',\n}\n");
  const std::string script = t.write("w/wl.lua", std::string(tiny_workload)).string();
  std::string text = tiny_workload;
  text.replace(text.find("op = \"gelu\""), 11, "op = \"swiglu\"");
  t.write("w/wl.lua", text);
  const auto r = run_cli("run '" + script + "' --predictor roofline");
  REQUIRE(r.code == 1);
  CHECK(r.err.find("/w/ops/swiglu.lua:2: rules.elementwise: unknown elementwise op 'swiglu'") != std::string::npos);
  CHECK(r.err.find("field 'op' picks the element-wise kernel") != std::string::npos);
  CHECK(r.err.find("add, div, mul, pow, sub") != std::string::npos);
  CHECK(r.err.find("op = \"mul\"") != std::string::npos);
}

TEST_CASE("user report: an HF count given as a JSON string is shown as one - quantization_config warns", "[cli][hf]") {
  temp_dir t;
  const std::string llama = R"({"model_type": "llama", "hidden_size": HS, "intermediate_size": 1024,
    "num_attention_heads": 8, "num_hidden_layers": 2, "num_key_value_heads": 8, "vocab_size": 1000
    QUANT})";
  auto cfg = [&](const std::string& hs, const std::string& quant) {
    std::string s = llama;
    s.replace(s.find("HS"), 2, hs);
    s.replace(s.find("QUANT"), 5, quant);
    return s;
  };
  const std::string run = " --gpu h100 --mode inference --batch 1 --seq 64 --dtype bf16 --predictor roofline";
  const auto s = t.write("s.json", cfg("\"512\"", ""));
  auto r = run_cli("predict --model '" + s.string() + "'" + run);
  CHECK(r.code == 1);
  CHECK(r.err.find("field 'hidden_size' must be a positive integer (got \"512\", a string)") != std::string::npos);
  const auto q = t.write("q.json", cfg("512", ", \"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4}"));
  r = run_cli("predict --model '" + q.string() + "'" + run);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("quantization_config (quant_method \"awq\") is not read") != std::string::npos);
  CHECK(r.err.find("--weight-dtype") != std::string::npos);
}

// The quantization_config warning is a workload warning like the others: in the JSON `warnings` of predict, search
// and serve (it went to stderr alone; review finding), once per command (search and serve read the file per layout
// and per phase)
TEST_CASE("user report: quantization_config's warning is in the JSON warnings of predict - search and serve",
          "[cli][hf][search][serve]") {
  temp_dir t;
  const auto q = t.write("q.json", R"({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
    "num_attention_heads": 8, "num_hidden_layers": 2, "num_key_value_heads": 8, "vocab_size": 1000,
    "quantization_config": {"quant_method": "awq", "bits": 4}})");
  const std::string note = "q.json: quantization_config (quant_method \"awq\") is not read";
  const auto count = [](const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  };
  const auto in_json = [&](const json& warnings) { return count(warnings.dump(), "quantization_config (quant_method"); };
  const std::string model = " --model '" + q.string() + "' --gpu h100 --predictor roofline --format json";
  const auto p = run_cli("predict" + model + " --mode inference --batch 1 --seq 64 --dtype bf16");
  INFO(p.err);
  REQUIRE(p.code == 0);
  CHECK(in_json(json::parse(p.out)["warnings"]) == 1);
  CHECK(count(p.err, note) == 1);
  const auto s = run_cli("search" + model + " --gpus 4 --batch 8 --seq 128 --dtype bf16");
  INFO(s.err);
  REQUIRE(s.code == 0);
  CHECK(in_json(json::parse(s.out)["warnings"]) == 1);
  CHECK(count(s.err, note) == 1);
  const auto v = run_cli("serve" + model + " --batch 1 --input-len 64 --output-len 8 --dtype bf16");
  INFO(v.err);
  REQUIRE(v.code == 0);
  const json served = json::parse(v.out);
  CHECK(in_json(served["warnings"]) == 1);
  CHECK(served["warnings"][0].get<std::string>().find(note) != std::string::npos);  // first, as predict's
  const auto w = run_cli("serve" + model + " --sweep --batch 1,2 --input-len 64 --output-len 8 --dtype bf16");
  INFO(w.err);
  REQUIRE(w.code == 0);
  CHECK(in_json(json::parse(w.out)["warnings"]) == 1);
  // a config without it: nothing said
  const auto plain = t.write("p.json", R"({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
    "num_attention_heads": 8, "num_hidden_layers": 2, "num_key_value_heads": 8, "vocab_size": 1000})");
  const auto n = run_cli("predict --model '" + plain.string() + "' --gpu h100 --predictor roofline --format json "
                         "--mode inference --batch 1 --seq 64 --dtype bf16");
  REQUIRE(n.code == 0);
  CHECK(in_json(json::parse(n.out)["warnings"]) == 0);
}

// predict --calibrate fits the workload predict forecasts: it says that workload's warnings as predict does (it said
// none: a calibration fitted to a measurement of a quantised checkpoint without a word), on stderr and in its JSON
TEST_CASE("user report: calibrate says the workload warnings predict says", "[cli][hf][calibrate]") {
  temp_dir t;
  const auto q = t.write("q.json", R"({"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
    "num_attention_heads": 8, "num_hidden_layers": 2, "num_key_value_heads": 8, "vocab_size": 1000,
    "quantization_config": {"quant_method": "awq", "bits": 4}})");
  fs::copy_file(source_dir / "gpus" / "v100_pcie_32gb.toml", t.path / "v100.toml");  // a GPU the predictor trained on
  const std::string note = "q.json: quantization_config (quant_method \"awq\") is not read";
  const std::string args = "predict --model '" + q.string() + "' --gpu '" + (t.path / "v100.toml").string() +
                           "' --mode inference --batch 1 --seq 64 --dtype fp16 --format json";
  const auto p = run_cli(args);
  INFO(p.err);
  REQUIRE(p.code == 0);
  REQUIRE(p.err.find(note) != std::string::npos);
  const double forecast = json::parse(p.out)["latency_ms"];
  const auto m = t.write("m.toml", "latency_ms = " + std::to_string(1.2 * forecast) + "\n");
  const auto c = run_cli(args + " --calibrate '" + m.string() + "'");
  INFO(c.err);
  REQUIRE(c.code == 0);
  CHECK(c.err.find(note) != std::string::npos);
  CHECK(c.err.find(note, c.err.find(note) + 1) == std::string::npos);  // once, as predict says it
  CHECK(json::parse(c.out)["warnings"].dump().find("quantization_config (quant_method") != std::string::npos);
  CHECK(fs::exists(t.path / "v100.calibration.toml"));
}

TEST_CASE("user report: eval kernels says why rows were skipped in its report", "[cli][eval]") {
  temp_dir t;
  const auto csv = t.write(
      "neg.csv",
      "OPName,Latency,Device,Torch Version,CUDNN Version,Kernel Name,Warps per SM,Blocks per SM,Grid x,Grid y,Grid z,"
      "Block x,Block y,Block z,CUDA Version,Kernels,B,M,N,K\n"
      "bmm,-0.5,NVIDIA A100-PCIE-40GB,p2.1.0,8902,ampere_sgemm_128x128_nn,14.2,1.7,4,4,12,256,1,1,cu121,;k,12,512,64,512\n"
      "bmm,0,NVIDIA A100-PCIE-40GB,p2.1.0,8902,ampere_sgemm_128x128_nn,227.5,28.4,8,8,48,256,1,1,cu121,;k,48,1024,64,1024\n"
      "bmm,0.018,NVIDIA A100-PCIE-40GB,p2.1.0,8902,ampere_sgemm_64x32_sliced1x4_nn,4.7,1.1,2,4,16,128,1,1,cu121,;k,16,128,"
      "128,128\n");
  const auto r = run_cli("eval kernels '" + csv.string() + "'");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("1 rows evaluated, 2 skipped") != std::string::npos);
  CHECK(r.out.find("skipped 2 rows: non-positive latency or empty shape (first at " + csv.string() + ":2)") !=
        std::string::npos);
}

TEST_CASE("user report: train --help lists every family it accepts", "[cli][train]") {
  const auto r = run_cli("train --help");
  REQUIRE(r.code == 0);
  // the flag's text (CLI11 prints the accepted set apart, in braces)
  const size_t at = r.out.find("Kernel family: ");
  REQUIRE(at != std::string::npos);
  const std::string text = r.out.substr(at, r.out.find('\n', at) - at);
  for (const char* fam : {"bmm", "linear", "elementwise", "softmax", "layernorm", "gemm_tc16", "gemm_fp8",
                          "attention_prefill", "attention_decode"})
    CHECK(text.find(fam) != std::string::npos);
}

TEST_CASE("user report: CSV numbers are the shortest that read back - as JSON's", "[cli][csv]") {
  const std::string base = "predict --model gpt2_med --gpu h100 --mode inference --seq 64 --dtype bf16 ";
  const auto r = run_cli(base + "--batch 1 --format csv");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("99999999") == std::string::npos);
  CHECK(r.out.find("00000000") == std::string::npos);
  // a comparison's rows
  const auto c = run_cli(base + "--batch 1,2 --format csv");
  REQUIRE(c.code == 0);
  CHECK(c.out.find("99999999") == std::string::npos);
  CHECK(c.out.find("00000000") == std::string::npos);
  // every latency reads back as the JSON's double
  const auto j = run_cli(base + "--batch 1,2 --format json");
  REQUIRE(j.code == 0);
  const json rows = json::parse(j.out)["rows"];
  for (const auto& row : rows) {
    const double v = row["latency_ms"].get<double>();
    CHECK(c.out.find("," + json(v).dump() + ",") != std::string::npos);
  }
}

TEST_CASE("user report: an element-wise rule declares its own FLOPs per element - priced by them", "[cli][ops]") {
  temp_dir t;
  // two rules of one op kind vec_ops does not know, 8 and 1 FLOPs per element, moving a sixteenth of a byte per
  // element (what a fused chain keeps on chip): at 8 FLOPs that is compute-bound on the H100 (128 FLOPs per byte, its
  // fp32 ridge is 20), at 1 not (16)
  for (const char* f : {"8", "1"})
    t.write(std::string("w/ops/gelu_tanh") + f + ".lua",
            std::string("return require('neusight.rules').elementwise {\n  name = 'gelu_tanh") + f +
                "', op = 'gelu_tanh', doc = 'tanh GELU', grad = 'same', unary = true,\n  flops_per_elem = " + f +
                ", bytes_per_elem = 0.0625,\n}\n");
  auto forecast = [&](const char* f, const std::string& predictor) {
    std::string text = tiny_workload;
    text.replace(text.find("op = \"gelu\""), 11, std::string("op = \"gelu_tanh") + f + "\"");
    text.replace(text.find("{ 1000 } }, output = { 1000 }"), 29, "{ 8192, 65536 } }, output = { 8192, 65536 }");
    const std::string script = t.write(std::string("w/wl") + f + ".lua", text).string();
    const json j = run_json("run '" + script + "' --gpu h100 --predictor " + predictor);
    return j["latency_ms"].get<double>();
  };
  for (const std::string predictor : {"roofline", "neusight"}) {
    INFO(predictor);
    const double eight = forecast("8", predictor), one = forecast("1", predictor);
    CHECK(eight > 1.2 * one);
  }
  // fused with a bundled element-wise op (--fusion): one kernel of the run's FLOPs, 1 + 8 per element
  const std::string fused = t.write("w/fused.lua", R"lua(
return {
  gpu = "h100_sxm5_80gb", mode = "inference", batch = 1, seq = 1,
  model = function(opts)
    return { { op = "add", name = "a", inputs = { { 64, 1024 }, { 64, 1024 } }, output = { 64, 1024 } },
             { op = "gelu_tanh8", name = "g", inputs = { { 64, 1024 } }, output = { 64, 1024 } } }
  end,
})lua").string();
  const json j = run_json("run '" + fused + "' --fusion --predictor roofline");
  CHECK(j["flops"].get<double>() == 9.0 * 64 * 1024);
  // an op kind vec_ops does not know, without a declared count: the rule's file and line, and the field to give
  t.write("v/ops/gelu_fast.lua", "-- a user op\nreturn require('neusight.rules').elementwise {\n"
                                 "  name = 'gelu_fast', doc = 'x', grad = 'same', unary = true,\n}\n");
  std::string text = tiny_workload;
  text.replace(text.find("op = \"gelu\""), 11, "op = \"gelu_fast\"");
  const std::string script = t.write("v/wl.lua", text).string();
  const auto r = run_cli("run '" + script + "' --predictor roofline");
  INFO(r.err);
  REQUIRE(r.code == 1);
  CHECK(r.err.find("/v/ops/gelu_fast.lua:2: rules.elementwise: unknown elementwise op 'gelu_fast'") != std::string::npos);
  CHECK(r.err.find("flops_per_elem = F declares a kernel of its own") != std::string::npos);
}
