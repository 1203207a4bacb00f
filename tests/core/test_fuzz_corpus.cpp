// tests/core/test_fuzz_corpus.cpp — every kept fuzz input (tests/fuzz/corpus/<target>, tests/fuzz/regressions/<target>)
// through the entry its libFuzzer target calls (tests/fuzz/fuzz_entries.h): it loads, or it throws ns::error whose
// message names the file; never a crash, a sanitizer report (the ASan + UBSan build) or another exception type.
// A regression input was a bad input that crashed a loader: it must now fail with that error (names containing
// ".loads" would mark inputs that must load instead).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <vector>

#include "core/text.h"
#include "fuzz/fuzz_entries.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Feeds every file of the target's corpus and regressions; returns how many were read.
size_t replay(const std::string& name) {
  const auto& all = ns_fuzz::targets();
  const auto t = std::find_if(all.begin(), all.end(), [&](const ns_fuzz::target& x) { return x.name == name; });
  REQUIRE(t != all.end());
  size_t n = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const bool regression = std::string(kind) == "regressions";
    for (const fs::path& file : files_in(ns_test::source_dir / "tests" / "fuzz" / kind / name)) {
      ++n;
      const std::string source = fs::relative(file, ns_test::source_dir).generic_string();
      const bool must_load = source.find(".loads") != std::string::npos;
      INFO(source);
      try {
        t->run(ns_test::slurp(file), source);
        if (regression && !must_load) FAIL_CHECK("a regression input loaded without an error");
      } catch (const ns::error& e) {
        CHECK_THAT(e.what(), Catch::Contains(source));
        if (must_load) FAIL_CHECK("expected to load: " << e.what());
      } catch (const std::exception& e) {
        FAIL_CHECK("not an ns::error: " << e.what());
      }
    }
  }
  return n;
}

}  // namespace

TEST_CASE("fuzz corpus: GPU TOML", "[fuzz]") { CHECK(replay("gpu_toml") > 0); }
TEST_CASE("fuzz corpus: cluster TOML", "[fuzz]") { CHECK(replay("cluster_toml") > 0); }
TEST_CASE("fuzz corpus: micro-benchmark dataset CSV", "[fuzz]") { CHECK(replay("dataset") > 0); }
TEST_CASE("fuzz corpus: operator-graph CSV", "[fuzz]") { CHECK(replay("opgraph") > 0); }
TEST_CASE("fuzz corpus: traces (Chrome JSON, wavescale, label CSV)", "[fuzz]") { CHECK(replay("trace") > 0); }
TEST_CASE("fuzz corpus: weights (model.toml + weights.bin)", "[fuzz]") { CHECK(replay("weights") > 0); }
TEST_CASE("fuzz corpus: HuggingFace config.json models", "[fuzz]") { CHECK(replay("hf_config") > 0); }
TEST_CASE("fuzz corpus: GPU calibration TOML", "[fuzz]") { CHECK(replay("calibration_toml") > 0); }
TEST_CASE("fuzz corpus: --calibrate measurement TOML", "[fuzz]") { CHECK(replay("measurement_toml") > 0); }
TEST_CASE("fuzz corpus: uncertainty TOML (leave-one-GPU-out error table)", "[fuzz]") { CHECK(replay("uncertainty_toml") > 0); }

TEST_CASE("fuzz finding: a dataset dimension beyond 2^31 is an error, not a float-to-int overflow", "[fuzz]") {
  const std::string csv =
      "framework,version,device,op_name,kernel_source,batch_size,isl,num_heads,num_key_value_heads,head_dim,"
      "beam_width,attn_dtype,kv_cache_dtype,step,window_size,latency\n"
      "VLLM,0.24.0,NVIDIA B200,context_attention,x,4,16444444444444444444384,64,64,64,1,bfloat16,bfloat16,0,0,12.1\n";
  CHECK_THROWS_WITH(ns_fuzz::dataset(csv, "big.csv"),
                    "big.csv:2: column 'isl' must be an integer of at most 2^31 (got '16444444444444444444384')");
}

TEST_CASE("fuzz finding: trace kernel launch geometry out of the GPUs' limits is an error, not an int64 overflow", "[fuzz]") {
  // A wavescale trace with one kernel row; `row` replaces grid..smem_dynamic_bytes.
  auto wavescale = [](const std::string& row) {
    std::string in = R"({"format": "wavescale-trace/1", "ops": "ops.csv", "kernels": "kernels.csv"})";
    in += '\0';
    in += "op_id,op_name,pass\n0,linear,fwd\n";
    in += '\0';
    in += "op_id,seq,kernel_name,grid_x,grid_y,grid_z,block_x,block_y,block_z,regs_per_thread,smem_static_bytes,"
          "smem_dynamic_bytes,duration_ns\n0,0,k," + row + ",1000\n";
    return in;
  };
  CHECK_NOTHROW(ns_fuzz::trace(wavescale("4,1,1,256,1,1,64,0,0"), "t"));
  CHECK_THROWS_WITH(ns_fuzz::trace(wavescale("9223372036854775807,2,1,256,1,1,64,0,0"), "t"),
                    "t/kernels.csv:2: kernel 'k': grid 9223372036854775807x2x1 is out of range (each dimension at most "
                    "2^31-1, 2^53 blocks in all)");
  CHECK_THROWS_WITH(ns_fuzz::trace(wavescale("2147483647,2147483647,2147483647,256,1,1,64,0,0"), "t"),
                    Catch::Contains("grid 2147483647x2147483647x2147483647 is out of range"));
  CHECK_THROWS_WITH(ns_fuzz::trace(wavescale("4,1,1,9223372036854775807,2,1,64,0,0"), "t"),
                    "t/kernels.csv:2: kernel 'k': block 9223372036854775807x2x1 has more than 1024 threads");
  CHECK_THROWS_WITH(ns_fuzz::trace(wavescale("4,1,1,256,1,1,9223372036854775807,0,0"), "t"),
                    "t/kernels.csv:2: kernel 'k': 9223372036854775807 registers per thread is out of range (at most 512)");
  CHECK_THROWS_WITH(ns_fuzz::trace(wavescale("4,1,1,256,1,1,64,9223372036854775807,9223372036854775807"), "t"),
                    "t/kernels.csv:2: kernel 'k': shared memory 9223372036854775807 + 9223372036854775807 bytes is out "
                    "of range (at most 1048576 per block)");
}

TEST_CASE("fuzz finding: a weights manifest's layer widths are checked before anything is allocated", "[fuzz]") {
  const auto dir = ns_test::source_dir / "weights" / "nvidia" / "attention_decode";
  const std::string toml = ns_test::slurp(dir / "model.toml"), bin = ns_test::slurp(dir / "weights.bin");
  CHECK_NOTHROW(ns_fuzz::weights(toml + '\0' + bin, "w"));
  for (const std::string layers : {"[ 5, 2000000000, 3 ]", "[ 5, 4294967328, 32, 3 ]"}) {
    const std::string bad = std::regex_replace(toml, std::regex("layers = \\[[^\\]]*\\]"), "layers = " + layers);
    INFO(layers);
    CHECK_THROWS_WITH(ns_fuzz::weights(bad + '\0' + bin, "w"), "w/model.toml: 'layers' must hold positive integers of at most 65536");
  }
}

TEST_CASE("weights manifest: gemm_fp8's quantisation stage keys are required, unknown keys are refused", "[weights]") {
  const auto dir = ns_test::source_dir / "weights" / "nvidia" / "gemm_fp8";
  const std::string toml = ns_test::slurp(dir / "model.toml"), bin = ns_test::slurp(dir / "weights.bin");
  const auto with = [&](const std::string& from, const std::string& to) {
    const std::string out = std::regex_replace(toml, std::regex(from), to);
    REQUIRE(out != toml);
    return out + '\0' + bin;
  };
  CHECK_NOTHROW(ns_fuzz::weights(toml + '\0' + bin, "w"));
  CHECK_NOTHROW(ns_fuzz::weights(with("quant_row_cycles = [0-9.e+-]+", "quant_row_cycles = 0"), "w"));  // explicit 0
  // weights from before the stage (or with the key left out) would load with a changed meaning
  CHECK_THROWS_WITH(ns_fuzz::weights(with("quant_bytes_per_element = [0-9.e+-]+\n", ""), "w"),
                    Catch::StartsWith("w/model.toml: missing required key 'quant_bytes_per_element'"));
  // a misspelled key is not a silent 0: file, line and column
  CHECK_THROWS_WITH(ns_fuzz::weights(with("quant_row_cycles =", "quant_row_cycle ="), "w"),
                    Catch::Matches("w/model\\.toml:[0-9]+:[0-9]+: unknown key 'quant_row_cycle'.*"));
  const auto other = ns_test::source_dir / "weights" / "nvidia" / "attention_decode";
  const std::string t2 = ns_test::slurp(other / "model.toml"), b2 = ns_test::slurp(other / "weights.bin");
  CHECK_THROWS_WITH(ns_fuzz::weights("quant_row_cycles = 0\n" + t2 + '\0' + b2, "w"),
                    "w/model.toml:1:20: 'quant_row_cycles' is for gemm_fp8 only");
}

TEST_CASE("fuzz finding: a JSON number beyond double is an ns::error naming the trace, not nlohmann's out_of_range", "[fuzz]") {
  CHECK_THROWS_WITH(ns_fuzz::trace("{\"traceEvents\": 1E999}", "t.json"),
                    "t.json: invalid JSON: number overflow parsing '1E999'");
}

TEST_CASE("fuzz finding: an operator-graph shape beyond 2^53 elements is an error, not an int64 overflow", "[fuzz]") {
  const std::string head = "Name,OpName,FwOps,BwOps,AccOps,Prev,Next,InputShapes,OutputShape\n";
  CHECK_NOTHROW(ns_fuzz::opgraph(head + "x,add,[],[],[],set(),set(),\"[(4, 8)]\",\"(4, 8)\"\n", "g.csv"));
  CHECK_THROWS_WITH(
      ns_fuzz::opgraph(head + "x,add,[],[],[],set(),set(),\"[(50257, 12844444444444440)]\",\"(4, 8)\"\n", "g.csv"),
      "g.csv:2: column 'InputShapes': expected a shape (a tuple of integers of at most 2^32, at most 2^48 elements), got (50257, 12844444444444440)");
  CHECK_THROWS_WITH(
      ns_fuzz::opgraph(head + "x,add,[],[],[],set(),set(),\"[(4, 8)]\",\"(4294967296, 4294967296)\"\n", "g.csv"),
      "g.csv:2: column 'OutputShape': expected a shape (a tuple of integers of at most 2^32, at most 2^48 elements), got (4294967296, 4294967296)");
}

TEST_CASE("fuzz finding: a whole-number float in a config.json is refused naming the key and node checks name the config", "[fuzz]") {
  // found by fuzz_hf_config (regressions/hf_config/mixtral_vocab_size_1.0.json): "vocab_size": 1.0 passed the
  // builder's positive-integer check as a float and reached the op rules' shape check ("the output {2,8,1.0} has a
  // dimension < 1"), whose message named "command line", not the config. It was then taken as the integer it equals;
  // since 2026-11-30 (issue 12) a config.json's float where HF's config holds an int is refused, the key named
  const std::string mixtral =
      R"({"model_type": "mixtral", "vocab_size": 1.0, "hidden_size": 64.0, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "num_local_experts": 4.0,
          "num_experts_per_tok": 2})";
  CHECK_THROWS_WITH(ns_fuzz::hf_config(mixtral, "m"),
                    Catch::StartsWith("m/config.json:1: moe model 'm': field 'vocab_size' must be an integer (got 1.0, "
                                      "a JSON number with a fraction part or exponent: write 1)"));
  // a whole number beyond int64 is refused (found next: regressions/hf_config/deepseek_experts_per_tok_2.7e70.json,
  // where "%d" raised "number has no integer representation" in deepseek.lua)
  CHECK_THROWS_WITH(ns_fuzz::hf_config(std::regex_replace(mixtral, std::regex("1\\.0"), "1e300"), "m"),
                    Catch::StartsWith("m/config.json:1: moe model 'm': field 'vocab_size' must be a positive integer "
                                      "(got 1e+300)") &&
                        Catch::Contains("while building the model of command line (--model m/config.json)"));
}

TEST_CASE("fuzz finding: a model_type that is a JSON object is named as such, not as a Lua table address", "[fuzz]") {
  CHECK_THROWS_WITH(ns_fuzz::hf_config(R"({"model_type": {"a": 1}})", "m"),
                    Catch::StartsWith("m/config.json: has a model_type that is not a string (a JSON object or array); "
                                      "supported: "));
}

TEST_CASE("fuzz finding: a calibration's format_version must be the integer 1, never a float cast to int64", "[fuzz]") {
  // found by fuzz_calibration_toml (regressions/calibration_toml/format_version_float_1e118.toml): value<int64_t>()
  // cast 1.3e118 to int64 (UBSan: float-cast-overflow)
  const std::string rest = "gpu = \"H100-SXM5-80GB\"\n[factors]\nlinear = 1.25\n";
  CHECK_NOTHROW(ns_fuzz::calibration_toml("format_version = 1\n" + rest, "c.toml"));
  for (const char* v : {"1.3e118", "1.0", "\"1\""}) {
    INFO(v);
    CHECK_THROWS_WITH(ns_fuzz::calibration_toml("format_version = " + std::string(v) + "\n" + rest, "c.toml"),
                      "c.toml: format_version = 1 expected (a calibration written by `neusight predict --calibrate`)");
  }
}

TEST_CASE("fuzz finding: an uncertainty table's family range is checked, naming the table", "[fuzz]") {
  // found by fuzz_uncertainty_toml (regressions/uncertainty_toml/range_without_peak_field.loads.toml, which now loads:
  // its range gives no peak to compare): a range without peak_field read the GPU's field nil,
  // "scripts/neusight/uncertainty.lua:68: gpu has no field 'nil'", an error that named no file
  const std::string head = "format_version = 2\nvendor = \"nvidia\"\nlevels = [0.1, 0.5, 0.9]\n"
                           "[families.linear]\nquantiles = [[-0.1, 0.0, 0.1], [-0.2, 0.05, 0.2]]\n";
  const std::string range = "[families.linear.range]\nnum_sm = [20.0, 108.0]\nmem_bw_gbps = [192.0, 1555.0]\n"
                            "peak_tflops = [5.5, 19.5]\narchitectures = [\"ampere\", \"volta\"]\n";
  CHECK_NOTHROW(ns_fuzz::uncertainty_toml(head, "u"));
  CHECK_NOTHROW(ns_fuzz::uncertainty_toml(head + range + "peak_field = \"peak_fp32_tflops\"\n", "u"));
  // a peak no GPU file has (a misspelt one) is an error naming the table; it was read through a pcall that swallowed
  // the view's error, and the peak went uncompared without a word
  CHECK_THROWS_WITH(ns_fuzz::uncertainty_toml(head + range + "peak_field = \"peak_fp4_tflops\"\n", "u"),
                    Catch::StartsWith("u/uncertainty.toml: families.linear.range.peak_field: 'peak_fp4_tflops' is not a "
                                      "GPU field (did you mean 'peak_fp8_tflops'?)"));
  CHECK_THROWS_WITH(ns_fuzz::uncertainty_toml(head + range, "u"),
                    Catch::StartsWith("u/uncertainty.toml: families.linear.range.peak_field must name a GPU peak "
                                      "(peak_<type>_tflops) beside peak_tflops"));
  CHECK_THROWS_WITH(ns_fuzz::uncertainty_toml(head + "[families.linear.range]\nnum_sm = [108.0]\n", "u"),
                    Catch::StartsWith("u/uncertainty.toml: families.linear.range.num_sm must be [low, high], two finite "
                                      "numbers"));
  CHECK_THROWS_WITH(ns_fuzz::uncertainty_toml(head + "[families.linear.range]\narchitectures = [1, 2]\n", "u"),
                    Catch::StartsWith("u/uncertainty.toml: families.linear.range.architectures must be a list of "
                                      "architecture names"));
}

TEST_CASE("fuzz finding: a model whose parameters overflow the optimizer step's tensor is an error, not a wrapped shape", "[fuzz]") {
  // found by fuzz_hf_config (regressions/hf_config/switch_decoder_layers_4e11_train.json): in train mode Σ params ·
  // count wrapped to a negative int64, and rules.lua's numel raised on the optimizer node's shape. The target builds the
  // inference workload first, which now refuses 2^48 parameters itself (an inference forecast of the model was made)
  const std::string cfg = ns_test::slurp(ns_test::source_dir / "tests" / "fuzz" / "regressions" / "hf_config" /
                                         "switch_decoder_layers_4e11_train.json");
  CHECK_THROWS_WITH(ns_fuzz::hf_config(cfg, "s"),
                    Catch::StartsWith("model 's': 4.738e+19 parameters, more than 2^48 (2.8e14; the largest models have "
                                      "about 1e12): a size or count of its config is out of range") &&
                        Catch::Contains("while building the model of command line (--model s/config.json)"));
}
