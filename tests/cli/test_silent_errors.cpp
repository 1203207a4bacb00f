// tests/cli/test_silent_errors.cpp — inputs that used to give a wrong forecast without a word (issue 15) are errors:
// exit 1, a message naming the file, nothing written with -o.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

// A workload around a model function returning `nodes` (Lua), in `mode`.
std::string workload(const std::string& mode, const std::string& nodes) {
  return "return {\n  gpu = \"h100\", mode = \"" + mode + "\", batch = 4, seq = 128,\n"
         "  model = function(opts)\n    return " + nodes + "\n  end,\n}\n";
}

// Runs `run SCRIPT -o OUT`: the error must start with `want`, the exit code be 1 and OUT be absent.
void run_should_fail(const char* file, int line, const temp_dir& t, const fs::path& script, const std::string& want,
                     const std::string& flags = "") {
  INFO(file << ":" << line);
  const fs::path out = t.path / "out.json";
  const auto r = run_cli("run '" + script.string() + "' --format json -o '" + out.string() + "'" + flags);
  INFO("stderr: " << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.rfind("neusight: " + want, 0) == 0);
  CHECK_FALSE(fs::exists(out));
}
#define FILE_LINE_ARGS __FILE__, __LINE__

const char* const one_linear = R"({ { op = "mine", name = "n1", inputs = { { 4, 128, 64 } }, output = { 4, 128, 64 } } })";

}  // namespace

TEST_CASE("silent errors: an op rule whose forward returns one kernel, not a list", "[cli][errors]") {
  temp_dir t;
  t.write("w/ops/mine.lua", R"lua(return {
  name = "mine", doc = "d", backward = false,
  forward = function(node) return { kind = "memory", name = "MEM", flops = 0, bytes = 1e9 } end,
})lua");
  const auto script = t.write("w/run.lua", workload("inference", one_linear));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  (t.path / "w/ops").string() + "/mine.lua:3: forward() returned a single kernel (a table with field "
                                                "'kind'), expected an array of kernels: return { kernel }\n");
}

TEST_CASE("silent errors: a training run over an op rule without backward", "[cli][errors]") {
  temp_dir t;
  t.write("w/ops/mine.lua", R"lua(return {
  name = "mine", doc = "d",
  forward = function(node) return { { kind = "memory", name = "MEM", flops = 0, bytes = 1e9 } } end,
})lua");
  const auto script = t.write("w/run.lua", workload("train", one_linear));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  (t.path / "w/ops").string() + "/mine.lua: op 'mine' has no 'backward' and this is a training run; "
                                                "write backward = false if the op has no backward work\n");
  // inference does not need it
  const auto inf = t.write("w/inf.lua", workload("inference", one_linear));
  CHECK(run_cli("run '" + inf.string() + "' --format json").code == 0);
}

TEST_CASE("silent errors: a misspelt op name", "[cli][errors]") {
  temp_dir t;
  const auto script = t.write("run.lua", workload("train", R"({
      { op = "linaer", name = "fc", inputs = { { 4, 128, 64 } }, output = { 4, 128, 256 }, params = 64 * 256 } })"));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":5: model 'custom', node 1 'fc': unknown op 'linaer' (did you mean 'linear'?): "
                                    "no linaer.lua on the op search path\n");
}

TEST_CASE("silent errors: a typo in a model config key", "[cli][errors]") {
  temp_dir t;
  const auto script = t.write("run.lua", R"(return {
  gpu = "h100", mode = "train", batch = 4, seq = 128,
  model = { name = "mine", arch = "gpt", n_layer = 2, n_embd = 1024, n_head = 16, vocab_size = 50257,
            n_positions = 1024, n_iner = 8192 },
})");
  // the line of the config that sets it (workload.lua model_field_line), and the context line names the workload
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":4: gpt model 'mine': unknown field 'n_iner' (did you mean 'n_inner'?)\n"
                  "    while building the model of " + script.string());
  // a config not written in place (a local, as from a require): the line is not certain, the workload alone
  const auto local = t.write("local.lua", R"(local cfg = { name = "mine", arch = "gpt", n_layer = 2, n_embd = 1024,
  n_head = 16, vocab_size = 50257, n_positions = 1024, n_iner = 8192 }
return { gpu = "h100", mode = "train", batch = 4, seq = 128, model = cfg })");
  run_should_fail(FILE_LINE_ARGS, t, local,
                  "gpt model 'mine': unknown field 'n_iner' (did you mean 'n_inner'?)\n"
                  "    while building the model of " + local.string());
}

TEST_CASE("silent errors: a model without nodes, and nodes whose shapes disagree", "[cli][errors]") {
  temp_dir t;
  auto script = t.write("empty.lua", workload("inference", "{}"));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ": model 'custom' has no nodes: an empty graph would forecast 0 ms");

  script = t.write("linear.lua", workload("train", R"({
      { op = "linear", name = "fc", inputs = { { 4, 128, 64 } }, output = { 7, 3, 99 }, params = 64 * 99 } })"));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":5: model 'custom', node 1 'fc' (op 'linear'): x {4,128,64} has 512 rows of 64 "
                                    "features but the output {7,3,99} has 21 rows of 99 (ops/linear.lua check())\n");

  script = t.write("matmul.lua", workload("inference", R"({
      { op = "matmul", name = "qk", inputs = { { 4, 8, 128, 64 }, { 4, 8, 64, 128 } }, output = { 4, 8, 128, 64 } } })"));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":5: model 'custom', node 1 'qk' (op 'matmul'): A {4,8,128,64} · B {4,8,64,128} is "
                                    "32 x {128,128}, not the output {4,8,128,64} (ops/matmul.lua check())\n");

  script = t.write("bmm.lua", workload("inference", R"({
      { op = "bmm", name = "pv", inputs = { { 32, 128, 128 }, { 32, 64, 64 } }, output = { 32, 128, 64 } } })"));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":5: model 'custom', node 1 'pv' (op 'bmm'): A {32,128,128} and B {32,64,64} do "
                                    "not multiply (ops/bmm.lua check())\n");

  script = t.write("add.lua", workload("inference", R"({
      { op = "add", name = "res", inputs = { { 4, 128, 64 }, { 4, 128, 65 } }, output = { 4, 128, 64 } } })"));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":5: model 'custom', node 1 'res' (op 'add'): input #2 {4,128,65} does not "
                                    "broadcast to the output {4,128,64} (ops/add.lua check())\n");

  script = t.write("gelu.lua", workload("inference", R"({
      { op = "gelu", name = "act", inputs = { { 4, 128, 64 } }, output = { 4, 128, 256 } } })"));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":5: model 'custom', node 1 'act' (op 'gelu'): input #1 {4,128,64} does not "
                                    "broadcast to the output {4,128,256} (ops/gelu.lua check())\n");

  // Broadcasting operands and a Python scalar ({1}) are fine.
  script = t.write("ok.lua", workload("inference", R"({
      { op = "add", name = "mask", inputs = { { 4, 8, 128, 128 }, { 1, 1, 128, 128 } }, output = { 4, 8, 128, 128 } },
      { op = "mul", name = "scale", inputs = { { 4, 8, 128, 128 }, { 1 } }, output = { 4, 8, 128, 128 } },
      { op = "matmul", name = "gqa", inputs = { { 4, 8, 128, 64 }, { 4, 1, 64, 128 } }, output = { 4, 8, 128, 128 } } })"));
  CHECK(run_cli("run '" + script.string() + "' --format json").code == 0);
}

TEST_CASE("silent errors: a run that does not fit in GPU memory says so in JSON warnings", "[cli][errors]") {
  // GPT-3 175B's training state (2.8 TB in bf16 amp) on one 80 GB H100.
  auto r = run_cli("predict --model gpt3_175b --gpu h100_sxm5_80gb --mode train --batch 1 --seq 2048 --dtype bf16 "
                   "--predictor roofline --format json");
  REQUIRE(r.code == 0);
  json j = json::parse(r.out);
  REQUIRE(j["warnings"].size() == 1);
  const std::string w = j["warnings"][0].get<std::string>();
  CHECK(w.rfind("memory ", 0) == 0);
  CHECK(w.find("GB per GPU (model state 2793.7 + activations ") != std::string::npos);
  CHECK(w.find("exceeds the GPU's 80 GB: the forecast assumes it fits (shard it") != std::string::npos);
  CHECK(r.err.find("warning: memory ") != std::string::npos);
  CHECK_FALSE(j["fits"].get<bool>());
  // A parallel layout whose stages do not fit either.
  r = run_cli("predict --model gpt3_175b --gpu h100_sxm5_80gb --mode train --batch 8 --seq 2048 --dtype bf16 --tp 8 --pp 2 "
              "--microbatches 8 --predictor roofline --format json");
  REQUIRE(r.code == 0);
  j = json::parse(r.out);
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0].get<std::string>().rfind("stages 0, 1 need up to ", 0) == 0);
  CHECK_FALSE(j["parallel"]["fits"].get<bool>());
  // One that fits has none.
  r = run_cli("predict --model gpt2_large --gpu h100_sxm5_80gb --mode train --batch 4 --seq 1024 --predictor roofline --format json");
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["warnings"].empty());
}

// fp64 is a tensor type the engine sizes (profiler traces hold such tensors), not a compute type: it went the fp32 path
// (the fp32 peak, its GEMM tiles) and forecast a Llama forward faster in fp64 than in fp32
TEST_CASE("silent errors: a double-precision compute dtype is refused", "[cli][errors]") {
  for (const char* dtype : {"fp64", "float64", "double", "torch.float64"}) {
    const auto r = run_cli(std::string("predict --model llama32_1b --gpu h100 --mode inference --batch 1 --seq 16 --dtype ") +
                           dtype);
    INFO(dtype << ": " << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("command line: --dtype must be a compute dtype") != std::string::npos);
    CHECK(r.err.find("double precision is not modelled") != std::string::npos);
  }
  const auto served = run_cli("serve --model llama32_1b --gpu h100 --batch 1 --input-len 16 --output-len 2 --dtype fp64");
  CHECK(served.code == 1);
  CHECK(served.err.find("double precision is not modelled") != std::string::npos);
  CHECK(run_cli("predict --model llama32_1b --gpu h100 --mode inference --batch 1 --seq 16 --dtype fp32").code == 0);
}

// A 16-bit GEMM on a GPU without tensor cores is refused in the user's terms (the GPU, its file, what to do), not as
// the tile rule's missing table entry
TEST_CASE("silent errors: fp16 on a GPU without tensor cores names the GPU and what to do", "[cli][errors]") {
  const auto r = run_cli("predict --model gpt2_large --gpu p100 --mode inference --batch 1 --seq 16 --dtype fp16");
  CHECK(r.code == 1);
  CHECK(r.err.find("GPU 'P100-PCIE-16GB' (gpus/p100_pcie_16gb.toml): fp16 GEMMs are not modelled: the pascal "
                   "architecture has no tensor cores") != std::string::npos);
  CHECK(r.err.find("its fp32 GEMMs are (a run in fp32: --dtype fp32)") != std::string::npos);
}
