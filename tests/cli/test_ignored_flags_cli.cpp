// tests/cli/test_ignored_flags_cli.cpp — a flag that changes nothing in the forecast says so (stderr and JSON
// `warnings`): the parallel-only flags on one GPU, the training-only ones in inference (scripts/neusight/workload.lua
// ignored_fields), in a search those no layout uses; a flag that matters says nothing; a parallel run's JSON says what
// its `params` counts.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;

namespace {

const std::string kPredict = "predict --model gpt2_large --gpu A100-SXM4-40GB --seq 256 --predictor roofline ";

// The JSON warnings of a run that succeeded, and its stderr.
struct warned {
  std::vector<std::string> json_warnings;
  std::string err;
  // the warnings, JSON and stderr, that say a field has no effect
  int ignored() const {
    int n = 0;
    for (const auto& w : json_warnings) n += w.find(" has no effect: ") != std::string::npos;
    return n;
  }
  bool says(const std::string& text) const {
    bool in_json = false;
    for (const auto& w : json_warnings) in_json = in_json || w.find(text) != std::string::npos;
    return in_json && err.find("neusight: warning: " + text) != std::string::npos;
  }
};

warned run_json(const std::string& command) {
  const auto r = run_cli(command + " --format json");
  INFO(command << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  warned w;
  const json doc = json::parse(r.out);  // kept: a loop over a temporary's member would dangle
  for (const auto& x : doc["warnings"]) w.json_warnings.push_back(x.get<std::string>());
  w.err = r.err;
  return w;
}

// A run whose flags all change something: no warning says one has no effect.
void says_nothing(const std::string& command) {
  INFO(command);
  const warned w = run_json(command);
  CHECK(w.ignored() == 0);
  CHECK(w.err.find("has no effect") == std::string::npos);
}

}  // namespace

TEST_CASE("ignored flags: each parallel-only flag on one GPU warns by its key and flag", "[cli][ignored_flags]") {
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--kernels eager", "parallel.kernels (--kernels) has no effect: "},
      {"--schedule gpipe", "parallel.schedule (--schedule) has no effect: "},
      {"--virtual-stages 1", "parallel.virtual_stages (--virtual-stages) has no effect: "},
      {"--bucket-mb 50", "parallel.bucket_mb (--bucket-mb) has no effect: "},
      {"--overlap-grad-reduce off", "parallel.overlap_grad_reduce (--overlap-grad-reduce) has no effect: "},
      {"--cluster dgx_h100", "parallel.cluster (--cluster) has no effect: "},
      {"--distributed-optimizer", "parallel.distributed_optimizer (--distributed-optimizer) has no effect: "},
      // tester10 #10: was an error, so a comparison over --tp 1,2,4 --sequence-parallel lost its one-GPU row
      {"--sequence-parallel", "parallel.sequence_parallel (--sequence-parallel) has no effect: "},
  };
  for (const auto& [flag, text] : flags) {
    INFO(flag);
    const warned w = run_json(kPredict + "--mode train --batch 2 " + flag);
    CHECK(w.says(text));
    CHECK(w.ignored() == 1);
  }
}

// tester9 #3: --kernels megatron on one GPU was refused as having no effect unless microbatches or recomputation came
// with it; it is a one-device plan running Megatron-LM's kernels, in every mode.
// A --cluster file that is not there is an error on one GPU too (the file is read all the same), not only the note
// that the flag has no effect there: as a parallel run refuses it, whatever the layout (leftovers14).
TEST_CASE("ignored flags: a missing --cluster file is an error on one GPU as on several", "[cli][ignored_flags]") {
  temp_dir t;
  const std::string missing = (t.path / "missing.toml").string();
  for (const std::string layout : {"", "--dp 2 "}) {
    INFO(layout);
    const auto r = run_cli(kPredict + "--mode train --batch 2 " + layout + "--cluster '" + missing + "'");
    CHECK(r.code == 1);
    CHECK(r.err.find(missing + ": no such file") != std::string::npos);
    CHECK(r.out.empty());
  }
  // a search whose every layout is one GPU reads it too
  const auto s = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --seq 256 --predictor roofline --gpus 1 "
                         "--batch 4 --cluster '" + missing + "'");
  CHECK(s.code == 1);
  CHECK(s.err.find(missing + ": no such file") != std::string::npos);
}

TEST_CASE("ignored flags: --kernels megatron on one GPU runs Megatron's kernels in every mode", "[cli][ignored_flags]") {
  for (const std::string mode : {"--mode train", "--mode inference", "--mode prefill", "--mode decode --context 256"}) {
    INFO(mode);
    const std::string run = "predict --model llama3_8b --gpu h100 --dtype bf16 --batch 2 --seq 256 --predictor roofline " + mode;
    const std::string one = mode.find("decode") != std::string::npos ? ns_test::replace_all(run, "--seq 256 ", "") : run;
    const auto eager = run_cli(one + " --format json");
    const auto megatron = run_cli(one + " --kernels megatron --format json");
    INFO(megatron.err);
    REQUIRE(eager.code == 0);
    REQUIRE(megatron.code == 0);
    const json e = json::parse(eager.out), m = json::parse(megatron.out);
    CHECK(m["parallel"]["kernels"] == "megatron");
    CHECK(megatron.err.find("has no effect") == std::string::npos);
    CHECK(m["latency_ms"].get<double>() != e["latency_ms"].get<double>());  // other kernels
  }
}

// tester10 #6: an optimizer rule whose forward never reads attrs.impl (the README's one-kernel Lion) priced both
// implementations alike while the report said "(foreach)": a given --optimizer-impl now says it has no effect there,
// and not with a rule that reads it.
TEST_CASE("ignored flags: --optimizer-impl with a rule that prices both alike warns", "[cli][ignored_flags]") {
  temp_dir t;
  t.write("ops/lion.lua",
          "local K, rules = require 'neusight.kernels', require 'neusight.rules'\n"
          "return { name = 'lion', doc = 'Lion: one fused kernel', attrs = rules.optimizer_attrs,\n"
          "  optimizer = { moments = 1, impl = 'fused' },\n"
          "  forward = function(node)\n"
          "    local r = rules.optimizer_roles(node)\n"
          "    local out = rules.optimizer_prologue(r, node.dtype)\n"
          "    out[#out + 1] = K.vec('addcmul', r.rows, r.P, node.dtype, { bytes_per_elem = 2 * r.w + r.g + 2 * r.m + r.copy })\n"
          "    return out\n"
          "  end }\n");
  const std::string lion = kPredict + "--mode train --batch 2 --ops '" + (t.path / "ops").string() + "' --optimizer lion ";
  for (const std::string impl : {"fused", "foreach"}) {
    INFO(impl);
    const warned w = run_json(lion + "--optimizer-impl " + impl);
    CHECK(w.says("optimizer_impl (--optimizer-impl) has no effect: the op rule of optimizer \"lion\" ("));
    CHECK(w.err.find("prices \"fused\" and \"foreach\" alike in this run") != std::string::npos);
    CHECK(w.ignored() == 1);
  }
  CHECK(run_json(lion).ignored() == 0);  // not given: nothing to say
  for (const std::string opt : {"adam", "adamw"})
    says_nothing(kPredict + "--mode train --batch 2 --optimizer " + opt + " --optimizer-impl foreach");
  // SGD: one pass either way without a master copy (fp32, or autocast's fp32 weights); with one (Megatron's bf16
  // recipe) the fused step writes the 16-bit copy itself
  CHECK(run_json(kPredict + "--mode train --batch 2 --optimizer sgd --optimizer-impl fused").ignored() == 1);
  says_nothing(kPredict + "--mode train --batch 2 --dtype bf16 --kernels megatron --optimizer sgd --optimizer-impl foreach");
}

TEST_CASE("ignored flags: training-only flags in inference warn", "[cli][ignored_flags]") {
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--optimizer adamw", "optimizer (--optimizer) has no effect: only training runs an optimizer step (mode is \"inference\")"},
      {"--optimizer-impl fused", "optimizer_impl (--optimizer-impl) has no effect: "},
      {"--recompute full", "parallel.recompute (--recompute) has no effect: "},
      {"--dp 2 --bucket-mb 50", "parallel.bucket_mb (--bucket-mb) has no effect: "},
      {"--dp 2 --distributed-optimizer", "parallel.distributed_optimizer (--distributed-optimizer) has no effect: "},
      {"--experts grouped", "experts (--experts) has no effect: the gpt model builder"},  // no routed experts
      {"--router-skew 1.5", "router_skew (--router-skew) has no effect: the gpt model builder"},  // likewise
  };
  for (const auto& [flag, text] : flags) {
    INFO(flag);
    const warned w = run_json(kPredict + "--mode inference --batch 2 " + flag);
    CHECK(w.says(text));
    CHECK(w.ignored() == 1);
  }
}

TEST_CASE("ignored flags: flags that matter and defaults say nothing", "[cli][ignored_flags]") {
  for (const std::string flags : {
           "--mode train --batch 2",
           "--mode inference --batch 2",
           "--mode train --batch 2 --optimizer adamw --optimizer-impl foreach",
           "--mode train --batch 2 --recompute full --kernels eager",
           "--mode train --batch 4 --dp 2 --bucket-mb 50 --overlap-grad-reduce off --distributed-optimizer --cluster dgx_a100",
           "--mode train --batch 4 --pp 2 --microbatches 2 --schedule interleaved --virtual-stages 2",
           "--mode train --batch 4 --microbatches 2 --schedule gpipe",
           "--mode inference --batch 2 --optimizer none --recompute none --dp 1 --ep 1",
       })
    says_nothing(kPredict + flags);
}

TEST_CASE("ignored flags: a workload script's parallel table and fields warn through run", "[cli][ignored_flags]") {
  temp_dir t;
  const auto script = t.write("w.lua", "return { model = 'gpt2_large', gpu = 'A100-SXM4-40GB', mode = 'inference', batch = 2,\n"
                                      "  seq = 256, optimizer = 'adamw', parallel = { dp = 1, bucket_mb = 40, kernels = 'eager',\n"
                                      "  recompute = 'full', distributed_optimizer = false } }\n");
  const warned w = run_json("run '" + script.string() + "' --predictor roofline");
  CHECK(w.says("optimizer (--optimizer) has no effect: "));
  CHECK(w.says("parallel.bucket_mb (--bucket-mb) has no effect: "));
  CHECK(w.says("parallel.kernels (--kernels) has no effect: "));
  CHECK(w.says("parallel.recompute (--recompute) has no effect: "));
  CHECK(w.ignored() == 4);  // distributed_optimizer = false and dp = 1 ask for nothing
}

TEST_CASE("ignored flags: a comparison row of inference keeps the optimizer's warning", "[cli][ignored_flags]") {
  const auto r = run_cli(kPredict + "--mode train,inference --batch 2 --optimizer adamw --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["rows"].size() == 2);
  int with = 0;
  for (const auto& row : j["rows"]) {
    const std::string w = row["warnings"].dump();  // a list, as a single forecast's
    const bool says = w.find("optimizer (--optimizer) has no effect") != std::string::npos;
    CHECK(says == (row["mode"] == "inference"));
    with += says;
  }
  CHECK(with == 1);
}

// How often `text` occurs in `s`.
int occurrences(const std::string& s, const std::string& text) {
  int n = 0;
  for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + text.size())) ++n;
  return n;
}

// search forecasts many layouts; a flag is reported when it changes nothing in every one of them, once (stderr and the
// JSON's warnings), and search's own per-layout settings (dp, tp, pp, microbatches, schedule, recompute) never are.
TEST_CASE("ignored flags: search warns once of a flag no layout uses", "[cli][ignored_flags][search]") {
  const std::string base = "search --model gpt2_large --gpu A100-SXM4-40GB --seq 256 --predictor roofline ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--gpus 8 --batch 8 --mode inference --optimizer adamw",
       "optimizer (--optimizer) has no effect: only training runs an optimizer step (mode is \"inference\")"},
      {"--gpus 8 --batch 8 --mode inference --optimizer-impl fused", "optimizer_impl (--optimizer-impl) has no effect: "},
      {"--gpus 8 --batch 8 --mode inference --distributed-optimizer",
       "parallel.distributed_optimizer (--distributed-optimizer) has no effect: "},
      {"--gpus 8 --batch 8 --mode inference --recompute full", "parallel.recompute (--recompute) has no effect: "},
      {"--gpus 8 --batch 8 --mode inference --recompute all", "parallel.recompute (--recompute all) has no effect: "},
      {"--gpus 1 --batch 4 --distributed-optimizer",  // every layout has dp = 1
       "parallel.distributed_optimizer (--distributed-optimizer) has no effect: "},
      {"--gpus 1 --batch 4 --cluster dgx_a100", "parallel.cluster (--cluster) has no effect: "},
      {"--gpus 1 --batch 1 --schedule gpipe", "parallel.schedule (--schedule) has no effect: "},
      {"--gpus 4 --batch 8 --max-tp 1 --sequence-parallel",
       "parallel.sequence_parallel (--sequence-parallel) has no effect: "},
      {"--gpus 4 --batch 8 --optimizer none --optimizer-impl foreach", "optimizer_impl (--optimizer-impl) has no effect: "},
  };
  for (const auto& [flags, text] : cases) {
    INFO(flags);
    const warned w = run_json(base + flags);
    CHECK(w.says(text));
    CHECK(w.ignored() == 1);
    CHECK(occurrences(w.err, "has no effect") == 1);  // once for the search, not once per layout
  }
}

TEST_CASE("ignored flags: a search whose flags all matter in some layout says nothing", "[cli][ignored_flags][search]") {
  const std::string base = "search --model gpt2_large --gpu A100-SXM4-40GB --seq 256 --predictor roofline ";
  for (const std::string flags : {
           // dp = 2, tp = 2 and microbatches > 1 in some layouts; the others ignore these flags
           "--gpus 2 --batch 4 --distributed-optimizer --sequence-parallel --cluster dgx_a100 --schedule gpipe",
           "--gpus 2 --batch 4 --optimizer adamw --optimizer-impl foreach --recompute full",
           "--gpus 1 --batch 4 --schedule gpipe",  // microbatches 2 and 4
           "--gpus 1 --batch 1",                   // search's own schedule and recompute on the one layout: not flags
           "--gpus 1 --batch 1 --mode inference --recompute none --optimizer none",
           "--gpus 8 --batch 8 --mode inference",
       })
    says_nothing(base + flags);
}

TEST_CASE("ignored flags: search tells the GPU out of distribution once", "[cli][ignored_flags][search]") {
  const warned w = run_json("search --model gpt2_large --gpu A100-SXM4-80GB --gpus 8 --batch 8 --seq 256 --mode inference");
  const std::string ood = "A100-SXM4-80GB is out of distribution for the ";
  CHECK(w.says(ood));
  CHECK(occurrences(w.err, ood) == 1);
  int in_json = 0;
  for (const auto& x : w.json_warnings) in_json += x.find(ood) != std::string::npos;
  CHECK(in_json == 1);
  const warned in = run_json("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 8 --batch 8 --seq 256 --mode inference");
  for (const auto& x : in.json_warnings)  // a GPU trained on: nothing to say of it (pp 3, 5, 6, 7, 8 split the layers
    CHECK(x.find("out of distribution") == std::string::npos);  // unevenly: that is said)
  CHECK(in.err.find("out of distribution") == std::string::npos);
}

TEST_CASE("params_scope: a parallel run's JSON says what params counts and a one-GPU run's is unchanged", "[cli][parallel]") {
  auto doc = [](const std::string& flags) {
    const auto r = run_cli(kPredict + "--mode inference --batch 4 --format json " + flags);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out);
  };
  const json one = doc("");
  const json tp = doc("--tp 2");
  const json pp = doc("--pp 2");
  CHECK(!one.contains("params_scope"));
  CHECK(tp["params_scope"] == "one tensor-parallel rank, all pipeline stages");
  CHECK(pp["params_scope"] == "whole model");
  CHECK(pp["params"] == one["params"]);                         // every stage's share: the whole model
  CHECK(tp["params"].get<double>() < one["params"].get<double>());  // one tp rank's shard
}

TEST_CASE("params_scope: the table's parameter line of a mixture of experts says what the JSON says", "[cli][parallel]") {
  const std::string base = "predict --model mixtral_8x7b --gpu h100 --mode decode --batch 8 --context 128 --dtype bf16 "
                           "--predictor roofline ";
  auto line = [&](const std::string& flags) {
    const auto r = run_cli(base + flags);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const size_t at = r.out.find("\nparameters ");
    REQUIRE(at != std::string::npos);
    return r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  CHECK_THAT(line("--pp 2"), Catch::Contains("active per token") && Catch::Contains("), whole model;") &&
                                 !Catch::Contains("tensor-parallel"));  // pp alone: every stage's share, no tp shard
  CHECK_THAT(line("--tp 2"), Catch::Contains("), one tensor-parallel rank, all pipeline stages;"));
  CHECK_THAT(line("--tp 2 --dp 2 --ep 2"),
             Catch::Contains("), one tensor- and expert-parallel rank, all pipeline stages (E / ep of the routed experts);"));
  CHECK_THAT(line(""), !Catch::Contains("rank") && !Catch::Contains("whole model"));
}

TEST_CASE("params_scope: serve --tp 2 says params is one tensor-parallel rank and tp 1 is unchanged", "[cli][serve]") {
  auto doc = [](const std::string& tp) {
    const auto r = run_cli("serve --model llama3_8b --gpu h100 --input-len 128 --output-len 8 --batch 2 --format json --tp " + tp);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out);
  };
  const json one = doc("1");
  const json two = doc("2");
  CHECK(!one.contains("params_scope"));
  CHECK(two["params_scope"] == "one tensor-parallel rank");
  CHECK(two["params"].get<double>() < one["params"].get<double>());
}

TEST_CASE("ignored flags: serve --experts on a dense model warns and a mixture of experts does not", "[cli][ignored_flags][serve]") {
  const std::string base = "serve --gpu h100 --batch 2 --input-len 64 --output-len 4 --predictor roofline --format json";
  const std::string says = "experts (--experts) has no effect: model 'llama32_1b' has no routed experts; drop it";
  auto warnings = [](const std::string& cmd) {
    const auto r = run_cli(cmd);
    INFO(cmd << "\n" << r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out)["warnings"].dump();
  };
  CHECK(warnings(base + " --model llama32_1b --experts loop").find(says) != std::string::npos);
  CHECK(warnings(base + " --model llama32_1b").find("has no effect") == std::string::npos);  // the default: nothing
  CHECK(warnings(base + " --model qwen3_30b_a3b --experts loop").find("has no effect") == std::string::npos);
}

TEST_CASE("ignored flags: --overhead on warns where the GPU's launch_s is 0 and prices launches where it is not",
          "[cli][ignored_flags][overhead]") {
  // the shipped scripts/neusight/overhead.lua fits launch_s = 0 on every GPU: --overhead on leaves every launch as
  // predicted (it used to say nothing), inference and train alike; off, the shipped default, says nothing
  const std::string gpt = "predict --model gpt2_med --gpu h100 --batch 8 --seq 512 --dtype bf16 --predictor roofline ";
  const auto latency = [](const std::string& command) {
    const auto r = run_cli(command + " --format json");
    INFO(command << "\nstderr: " << r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out)["latency_ms"].get<double>();
  };
  for (const std::string mode : {"--mode inference", "--mode train --optimizer adamw"}) {
    INFO(mode);
    const warned on = run_json(gpt + mode + " --overhead on");
    CHECK(on.ignored() == 1);
    CHECK(on.says("--overhead on has no effect: scripts/neusight/overhead.lua has no per-launch host cost for "
                  "H100-SXM5-80GB (PARAMS.default.launch_s = 0"));
    CHECK(latency(gpt + mode + " --overhead on") == latency(gpt + mode + " --overhead off"));
    says_nothing(gpt + mode + " --overhead off");
  }
  // a launch_s of this GPU's own (a --scripts copy): on raises the short launches to it and says nothing
  temp_dir t;
  const std::string scripts = ns_test::override_dir(t, "o", "overhead", "M.PARAMS['H100-SXM5-80GB'] = { launch_s = 50e-6 }");
  says_nothing(gpt + "--mode inference --overhead on" + scripts);
  CHECK(latency(gpt + "--mode inference --overhead on" + scripts) > latency(gpt + "--mode inference --overhead off"));
  // one of this GPU's own at 0 is named as its entry
  const std::string zero = ns_test::override_dir(t, "z", "overhead", "M.PARAMS['H100-SXM5-80GB'] = { launch_s = 0 }");
  CHECK(run_json(gpt + "--mode inference --overhead on" + zero)
            .says("--overhead on has no effect: scripts/neusight/overhead.lua has no per-launch host cost for "
                  "H100-SXM5-80GB (PARAMS[\"H100-SXM5-80GB\"].launch_s = 0), so no kernel launch"));
}

TEST_CASE("ignored flags: eval models --overhead on says once per GPU that it changed nothing", "[cli][ignored_flags][overhead]") {
  const auto r = run_cli("eval models tests/fixtures/neusight/label/Tesla_T4 --overhead on --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string note = "neusight: warning: --overhead on has no effect: scripts/neusight/overhead.lua has no "
                           "per-launch host cost for ";
  const size_t at = r.err.find(note);
  CHECK(at != std::string::npos);
  CHECK(r.err.find(note, at + 1) == std::string::npos);
  CHECK(run_cli("eval models tests/fixtures/neusight/label/Tesla_T4 --format json").err.find("--overhead") ==
        std::string::npos);
}
