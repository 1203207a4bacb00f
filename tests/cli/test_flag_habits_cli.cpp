// tests/cli/test_flag_habits_cli.cpp — the command line as people use it (issue 15 "CLI habits", issue 14): every
// missing required flag said at once; a value a flag gave said by the flag; search takes --weights as predict does;
// --ops only where an op rule is read; a search path without the bundled ops/ said so, never "did you mean" the name
// itself.
#include <catch2/catch.hpp>

#include "test_util.h"

using ns_test::run_cli;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

// `args` exits 2 with exactly `message` (after "neusight: ") on stderr, nothing on stdout.
void usage_says(const std::string& args, const std::string& message) {
  const auto r = run_cli(args);
  INFO(args << "\nstderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(r.err == "neusight: " + message + "\n");
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("missing required flags are reported all at once on every command", "[cli][flags]") {
  // serve: --input-len alone was named; the lengths and the arrivals are required together without --requests-file
  usage_says("serve --model llama3_8b --gpu h100",
             "command line: missing --input-len, --output-len and --batch (static batch) or --rate (arrivals) "
             "(--input-len, --output-len and --batch or --rate are required without --requests-file); "
             "`neusight serve --help` lists the flags");
  usage_says("serve", "command line: missing --model, --gpu, --input-len, --output-len and --batch (static batch) or "
                      "--rate (arrivals) (--input-len, --output-len and --batch or --rate are required without "
                      "--requests-file); `neusight serve --help` lists the flags");
  // the table's required flags alone: no word on --requests-file
  usage_says("serve --input-len 8 --output-len 8 --rate 1",
             "command line: missing --model and --gpu; `neusight serve --help` lists the flags");
  usage_says("search --model gpt3_xl",
             "command line: missing --gpu, --gpus, --batch and --seq; `neusight search --help` lists the flags");
  usage_says("train --out /nonexistent-cli15",
             "command line: missing --family and --data; `neusight train --help` lists the flags");
  usage_says("scale", "command line: missing --trace and --to; `neusight scale --help` lists the flags");
  usage_says("eval kernels", "command line: missing the files argument; `neusight eval kernels --help` lists the flags");
  // predict: the model (or a graph) and the GPU; which of --mode, --batch, --seq are needed follows from the first
  usage_says("predict --mode train", "command line: missing --model (or --graph) and --gpu; `neusight predict --help` "
                                     "lists the flags");
  usage_says("predict --gpu h100", "command line: missing --model (or --graph); `neusight predict --help` lists the flags");
  // a --model's --gpu, --mode, --batch and --seq are usage errors too (exit 2), as --model's own: they were the
  // workload's error, exit 1 ("missing --gpu" alone exited 1, "missing --model (or --graph) and --gpu" 2)
  usage_says("predict --model gpt2_large", "command line: missing --gpu, --mode, --batch and --seq; `neusight predict "
                                           "--help` lists the flags");
  usage_says("predict --model gpt2_large --mode train --batch 1 --seq 8",
             "command line: missing --gpu; `neusight predict --help` lists the flags");
  usage_says("predict --model gpt2_large --gpu h100 --mode train --batch 1",
             "command line: missing --seq; `neusight predict --help` lists the flags");
  // decode takes no --seq (one new token per sequence), but a --mode list's other rows do: one usage error, not a
  // row whose error is a missing flag
  usage_says("predict --model gpt2_large --gpu h100 --mode decode,prefill --batch 1 --context 8",
             "command line: missing --seq; `neusight predict --help` lists the flags");
  // and a decode row's --context (it was the workload's error, exit 1)
  usage_says("predict --model gpt2_large --gpu h100 --mode decode --batch 1",
             "command line: missing --context; `neusight predict --help` lists the flags");
  const auto decode = run_cli("predict --model gpt2_large --gpu h100 --mode decode --batch 1 --context 8 "
                              "--predictor roofline --format json");
  CHECK(decode.code == 0);
  // a value refused is still said first (CLI11's order: the values, then what is missing)
  const auto v = run_cli("search --model gpt3_xl --gpus 0");
  CHECK(v.code == 2);
  CHECK(v.err.find("--gpus") != std::string::npos);
  CHECK(v.err.find("missing") == std::string::npos);
}

TEST_CASE("a value a flag gave is refused naming the flag and not the workload field", "[cli][flags]") {
  const std::string base = "predict --model gpt2_large --gpu h100 --batch 1 --seq 8 --predictor roofline ";
  struct one {
    std::string args, message;
  };
  for (const one& c : std::vector<one>{
           {base + "--mode train --dtype bf17", "command line: --dtype must be a dtype name such as"},
           {base + "--mode train --precision ampp", "command line: --precision must be \"pure\" or \"amp\" (got \"ampp\")"},
           {base + "--mode inference --kv-dtype f8", "command line: --kv-dtype must be \"fp8\", \"bf16\", \"fp16\" or \"fp32\""},
           {base + "--mode train --kv-dtype fp8", "command line: --kv-dtype applies to the serving phases only"},
           {base + "--mode train --optimizer adan", "command line: --optimizer must be \"none\" or an optimizer"},
           {base + "--mode train --optimizer-impl fuse", "command line: --optimizer-impl must be \"fused\" or \"foreach\""},
           {base + "--mode train --dp 1 --schedule 1f1bb", "command line: --schedule: one of \"1f1b\""},
           {"predict --model gpt2 --gpu h100 --mode train --batch 1 --seq 8", "command line: --model names an unknown model preset"},
           // a comparison's values are checked up front the same way
           {base + "--mode train --dtype bf16,bf17", "command line: --dtype must be a dtype name such as"},
           {"search --model gpt2_large --gpu h100 --gpus 2 --batch 2 --seq 8 --predictor roofline --dtype bf17",
            "command line: --dtype must be a dtype name such as"},
           {"serve --model llama3_8b --gpu h100 --batch 1 --input-len 8 --output-len 8 --predictor roofline --dtype bf17",
            "command line: --dtype must be a dtype name such as"},
           // run: the script's file, and the flag that gave the value
           {"run examples/gpt3_train.lua --predictor roofline --dtype bf17", "examples/gpt3_train.lua: --dtype must be"},
       }) {
    const auto r = run_cli(c.args);
    INFO(c.args << "\nstderr: " << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("neusight: " + c.message, 0) == 0);
    CHECK(r.err.find("field '") == std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("search --weights DIR reads the predictor's weights there as predict does", "[cli][search][weights]") {
  temp_dir t;
  const fs::path empty = t.path / "empty";
  fs::create_directories(empty);
  const std::string tail = " --model gpt2_large --gpu h100 --batch 8 --seq 128 --mode inference --weights '" +
                           empty.string() + "'";
  const auto p = run_cli("predict" + tail);
  const auto s = run_cli("search --gpus 2" + tail);
  INFO(p.err << "\n" << s.err);
  CHECK(p.code == 1);
  CHECK(s.code == 1);
  const std::string why = "no bmm weights for nvidia GPUs in " + (empty / "nvidia").string();
  CHECK(p.err.find(why) != std::string::npos);
  CHECK(s.err.find(why) != std::string::npos);
  // a root holding the bundled families forecasts as the bundled weights do
  const fs::path same = t.path / "same";
  fs::create_directories(same);
  fs::create_directory_symlink(ns_test::source_dir / "weights" / "nvidia", same / "nvidia");
  const std::string search = "search --gpus 2 --model gpt2_large --gpu h100 --batch 8 --seq 128 --mode inference "
                             "--format json";
  const auto bundled = run_cli(search);
  const auto mine = run_cli(search + " --weights '" + same.string() + "'");
  INFO(mine.err);
  REQUIRE(bundled.code == 0);
  REQUIRE(mine.code == 0);
  // the same JSON but where a warning names the uncertainty table it read (the band's widening: its folder)
  CHECK(ns_test::replace_all(mine.out, (same / "nvidia" / "uncertainty.toml").string(), "weights/nvidia/uncertainty.toml") ==
        bundled.out);
  CHECK(run_cli("search --help").out.find("--weights DIR") != std::string::npos);
}

TEST_CASE("the --ops flag is offered only on the commands that read op rules", "[cli][flags]") {
  for (const char* command : {"train", "eval kernels", "models"}) {
    INFO(command);
    CHECK(run_cli(std::string(command) + " --help").out.find("--ops") == std::string::npos);
  }
  const auto r = run_cli("models --ops .");
  CHECK(r.code == 2);
  CHECK(r.err.find("models has no --ops option") != std::string::npos);
  for (const char* command : {"run", "predict", "search", "serve", "ops", "paths", "scale", "eval models"}) {
    INFO(command);
    CHECK(run_cli(std::string(command) + " --help").out.find("--ops DIR") != std::string::npos);
  }
}

TEST_CASE("an op the search path leaves out of the bundled ops/ says so and never did-you-mean itself", "[cli][ops]") {
  temp_dir t;
  const fs::path mine = t.write("myops/lion.lua", "return { forward = function(n) return {} end }\n").parent_path();
  const std::string env = "NEUSIGHT_OPS_PATH='" + mine.string() + "'";  // no ";;": the bundled ops/ is not searched
  const std::string base = "predict --model gpt2_large --gpu h100 --batch 1 --seq 8 --predictor roofline ";
  const auto r = run_cli(base + "--mode train --optimizer adam", env);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("(got \"adam\": no op rule of that name) (ops/adam.lua is bundled, but the bundled ops/ is not on "
                   "the op search path: NEUSIGHT_OPS_PATH has no ';;' to splice it in)") != std::string::npos);
  CHECK(r.err.find("did you mean 'adam'") == std::string::npos);
  // a model's op: the same words
  const auto m = run_cli(base + "--mode inference", env);
  INFO(m.err);
  CHECK(m.code == 1);
  CHECK(m.err.find("is bundled, but the bundled ops/ is not on the op search path") != std::string::npos);
  // with the bundled ops/ spliced in, a typo still gets the closest name
  const auto typo = run_cli(base + "--mode train --optimizer adan", env.substr(0, env.size() - 1) + ";;'");
  CHECK(typo.err.find("(did you mean 'adam'?)") != std::string::npos);
}

// A flag given twice is said as such, with what to do (audit 2026-11-29: CLI11's "--gpu: At Most 1 required but
// received 2", when `serve --gpu h100 --gpu l4` meant a comparison, which is one comma-separated value under --sweep).
TEST_CASE("a flag given twice is said in words with exit 2", "[cli][flags]") {
  usage_says("serve --model llama3_8b --gpu h100 --gpu l4 --input-len 10 --output-len 2 --batch 1",
             "command line: --gpu given 2 times: give it once (where it takes a list, as one comma-separated value: "
             "--gpu A,B)");
  usage_says("predict --model llama3_8b --gpu h100 --mode decode --batch 1 --batch 2 --batch 4 --context 5",
             "command line: --batch given 3 times: give it once (where it takes a list, as one comma-separated value: "
             "--batch A,B)");
}

// A Megatron-LM user's first guesses (audit17): --micro-batch-size was answered "did you mean '--microbatches'?", the
// count of microbatches, not their size, and --tensor-model-parallel-size with nothing. Megatron-LM's name of a setting
// the command takes is said with ours and how it differs; a command without that setting keeps the did-you-mean.
TEST_CASE("Megatron-LM's flag names are answered with the command's own", "[cli][flags]") {
  const std::string predict = "predict --model llama3_8b --gpu h100 --mode train --batch 8 --seq 512 --dp 2 ";
  usage_says(predict + "--micro-batch-size 1",
             "unknown option '--micro-batch-size' (Megatron-LM's flag): predict takes --microbatches, the number of "
             "microbatches per iteration, not their size: the micro-batch size is --batch / (--dp x --microbatches); "
             "`neusight predict --help` lists them");
  usage_says(predict + "--tensor-model-parallel-size 2",
             "unknown option '--tensor-model-parallel-size' (Megatron-LM's flag): predict takes --tp; "
             "`neusight predict --help` lists them");
  usage_says("search --model llama3_8b --gpu h100 --gpus 8 --batch 8 --seq 512 --use-distributed-optimizer",
             "unknown option '--use-distributed-optimizer' (Megatron-LM's flag): search takes --distributed-optimizer; "
             "`neusight search --help` lists them");
  usage_says("search --model mixtral_8x7b --gpu h100 --gpus 8 --batch 8 --seq 512 --moe-grouped-gemm",
             "unknown option '--moe-grouped-gemm' (Megatron-LM's flag): search takes --experts grouped; "
             "`neusight search --help` lists them");
  // a setting not modelled is said so, not "did you mean" a near name
  usage_says(predict + "--context-parallel-size 2",
             "unknown option '--context-parallel-size' (Megatron-LM's flag): it sets context parallelism (each "
             "sequence split over ranks in attention), which is not modelled (README: Parallel training); "
             "`neusight predict --help` lists the options");
  // search has no --tp (it searches tp): the name is not offered there
  const auto r = run_cli("search --model llama3_8b --gpu h100 --gpus 8 --batch 8 --seq 512 --tensor-model-parallel-size 2");
  CHECK(r.code == 2);
  CHECK(r.err.find("Megatron-LM") == std::string::npos);
  CHECK(r.err.find("unknown option '--tensor-model-parallel-size'") != std::string::npos);
}
