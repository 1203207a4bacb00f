// tests/cli/test_memory_cli.cpp — memory per GPU end to end (scripts/neusight/memory.lua): memory_gb and its parts in every
// mode, fits, the largest batch that fits, recomputation and attention kernels against each other.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;

namespace {

json predict(const std::string& args) {
  const auto r = run_cli("predict " + args + " --predictor roofline --format json");
  INFO("predict " << args << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// memory_gb is the sum of the `memory` parts.
void parts_sum(const json& j) {
  const json& m = j["memory"];
  CHECK(j["memory_gb"].get<double>() ==
        Approx(m["state_gb"].get<double>() + m["activations_gb"].get<double>() + m["temporary_gb"].get<double>() +
               m["workspace_gb"].get<double>() + m["kv_cache_gb"].get<double>()));
}

}  // namespace

TEST_CASE("memory: memory_gb and its parts in every mode, one GPU and parallel", "[cli][memory]") {
  const std::string gpt = "--model gpt2_large --gpu A100-SXM4-40GB --seq 1024 --batch 4 ";
  const std::string llama = "--model llama3_8b --gpu h100 --dtype bf16 --batch 2 ";
  for (const std::string& args :
       {gpt + "--mode train", gpt + "--mode inference", gpt + "--mode train --pp 2 --microbatches 2",
        gpt + "--mode train --tp 2 --dp 2", llama + "--mode prefill --seq 512", llama + "--mode decode --context 512",
        llama + "--mode train --seq 1024 --tp 4 --sequence-parallel"}) {
    INFO(args);
    const json j = predict(args);
    REQUIRE(j.contains("memory_gb"));
    CHECK(j["memory_gb"].get<double>() > 0);
    CHECK(j["memory_gb"].get<double>() >= j["state_gb"].get<double>());
    parts_sum(j);
    CHECK(j["fits"] == (j["memory_gb"].get<double>() <= j["memory"]["capacity_gb"].get<double>()));
    const bool training = j["mode"] == "train";
    CHECK((j["memory"]["activations_gb"].get<double>() > 0) == training);  // saved for backward: training only
    const bool serving = j["mode"] == "prefill" || j["mode"] == "decode";
    if (serving) CHECK(j["memory"]["kv_cache_gb"].get<double>() == Approx(j["kv_cache_gb"].get<double>()));
    if (j.contains("parallel")) CHECK(j["parallel"]["memory_gb"] == j["memory_gb"]);
  }
}

TEST_CASE("memory: the largest batch that fits fits, one more does not", "[cli][memory]") {
  for (const std::string& args : {std::string("--model gpt2_large --gpu A100-PCIE-40GB --mode train --seq 1024"),
                                  std::string("--model gpt2_large --gpu A100-PCIE-40GB --mode inference --seq 1024"),
                                  std::string("--model llama3_8b --gpu h100 --dtype bf16 --mode train --seq 4096")}) {
    INFO(args);
    const json one = predict(args + " --batch 1");
    const int best = one["memory"]["max_batch"].get<int>();
    if (best == 0) {
      CHECK_FALSE(one["fits"].get<bool>());
      continue;
    }
    const json at = predict(args + " --batch " + std::to_string(best));
    const json over = predict(args + " --batch " + std::to_string(best + 1));
    CHECK(at["fits"].get<bool>());
    CHECK_FALSE(over["fits"].get<bool>());
    CHECK(at["memory"]["max_batch"] == best);  // the same answer from any batch
    CHECK(over["warnings"].size() == 1);
  }
}

TEST_CASE("memory: a parallel run names what dominates and the largest micro-batch that fits, one more does not",
          "[cli][memory]") {
  // dp 2 x 4 microbatches fixed: the micro-batch size varies (Megatron's --micro-batch-size), the global batch with it
  const std::string args = "--model llama32_1b --gpu h100 --dtype bf16 --mode train --seq 2048 --tp 2 --pp 2 --dp 2 "
                           "--microbatches 4";
  const json one = predict(args + " --batch 512");  // micro-batch 64: over 80 GB
  const json& m = one["memory"];
  CHECK_FALSE(one["fits"].get<bool>());
  std::string largest;
  double most = -1;
  for (const char* part : {"state", "activations", "temporary", "workspace", "kv_cache"})
    if (m[std::string(part) + "_gb"].get<double>() > most) most = m[std::string(part) + "_gb"].get<double>(), largest = part;
  CHECK(m["dominant"] == largest);  // the fullest stage's largest part
  REQUIRE(m.contains("max_batch"));
  const int best = m["max_batch"].get<int>();
  REQUIRE(best >= 1);
  CHECK(best < 64);
  CHECK(m["max_batch_of"] == "micro-batch size");
  CHECK(m["max_global_batch"] == best * 8);
  const json at = predict(args + " --batch " + std::to_string(best * 8));
  const json over = predict(args + " --batch " + std::to_string((best + 1) * 8));
  CHECK(at["parallel"]["micro_batch"] == best);
  CHECK(at["fits"].get<bool>());
  CHECK_FALSE(over["fits"].get<bool>());
  CHECK(at["memory"]["max_batch"] == best);  // the same answer from any batch
  CHECK(over["memory"]["max_batch"] == best);
  const auto table = run_cli("predict " + args + " --batch 512 --predictor roofline");
  CHECK(table.out.find("memory    fullest GPU: stage ") != std::string::npos);
  CHECK(table.out.find("; " + largest + " dominate") != std::string::npos);
  CHECK(table.out.find("largest micro-batch that fits: " + std::to_string(best) + " (global batch " +
                       std::to_string(best * 8) + " = " + std::to_string(best) + " × dp 2 × 4 microbatches)") !=
        std::string::npos);
}

TEST_CASE("memory: one GPU with --recompute names what dominates and the largest batch, as without", "[cli][memory]") {
  const std::string args = "--model llama32_1b --gpu h100 --dtype bf16 --mode train --seq 2048 --recompute full";
  const json one = predict(args + " --batch 4");
  const json& m = one["memory"];
  CHECK(m["dominant"].is_string());
  REQUIRE(m.contains("max_batch"));
  const int best = m["max_batch"].get<int>();
  REQUIRE(best >= 1);
  CHECK(m["max_batch_of"] == "batch");  // one microbatch on one GPU: the micro-batch is the batch
  CHECK_FALSE(m.contains("max_global_batch"));
  CHECK(predict(args + " --batch " + std::to_string(best))["fits"].get<bool>());
  CHECK_FALSE(predict(args + " --batch " + std::to_string(best + 1))["fits"].get<bool>());
  // without recomputation: the same fields, a smaller batch
  const json none = predict("--model llama32_1b --gpu h100 --dtype bf16 --mode train --seq 2048 --batch 4");
  CHECK(none["memory"]["max_batch_of"] == "batch");
  CHECK(none["memory"]["max_batch"].get<int>() < best);
  const auto table = run_cli("predict " + args + " --batch 4 --predictor roofline");
  CHECK(table.out.find("memory    fullest GPU: stage 0, ") != std::string::npos);
  CHECK(table.out.find("; largest batch that fits: " + std::to_string(best)) != std::string::npos);
}

TEST_CASE("memory: fits is false when over, with a warning naming the parts", "[cli][memory]") {
  const json j = predict("--model gpt2_large --gpu A100-PCIE-40GB --mode train --seq 1024 --batch 16");
  CHECK_FALSE(j["fits"].get<bool>());
  CHECK(j["memory"]["dominant"] == "activations");
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0].get<std::string>().find("exceeds the GPU's 40 GB") != std::string::npos);
  CHECK(j["warnings"][0].get<std::string>().find("the largest batch that fits is ") != std::string::npos);
  const auto table = run_cli("predict --model gpt2_large --gpu A100-PCIE-40GB --mode train --seq 1024 --batch 16 "
                             "--predictor roofline");
  CHECK(table.out.find("activations dominate; exceeds the GPU's 40 GB") != std::string::npos);
  CHECK(table.out.find("largest batch that fits: ") != std::string::npos);
}

// An imported graph has no memory report: its model state alone is held to the GPU's capacity, the one every memory
// report holds a run to (scripts/neusight/memory.lua capacity: at most 95 % of the reported total), not to the
// datasheet's mem_gb. A T4 reports 14.75 GiB of its "16 GB" (capacity 15.05 GB): GPT-2 Large's training graph at 94
// layers holds 15.8 GB of fp32 weights and gradients, which was said to fit the T4's 16 GB with no warning.
TEST_CASE("memory: an imported graph's model state is held to the reported capacity", "[cli][memory]") {
  const std::string graph = "predict --graph tests/fixtures/neusight/opgraph/gpt2_large-train-1024-1.csv --gpu t4 "
                            "--layers 94 --predictor roofline";
  const auto r = run_cli(graph);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("model state 15.8 GB exceeds the GPU's 15.05 GB (95 % of the 14.75 GiB it reports; its "
                   "datasheet's 16 GB is more than that)") != std::string::npos);
  CHECK(r.out.find("does not fit (model state, activations not counted)") != std::string::npos);
  const json j = json::parse(run_cli(graph + " --format json").out);
  CHECK_FALSE(j["figures"]["fits"].get<bool>());
}

TEST_CASE("memory: recomputation full < selective < none, and sdpa < eager at long sequences", "[cli][memory]") {
  const std::string base = "--model gpt3_27 --gpu h100 --mode train --seq 2048 --batch 4 --pp 2 --microbatches 2 "
                           "--dtype bf16 --attention eager";
  const double none = predict(base)["memory"]["activations_gb"].get<double>();
  const double sel = predict(base + " --recompute selective")["memory"]["activations_gb"].get<double>();
  const double full = predict(base + " --recompute full")["memory"]["activations_gb"].get<double>();
  CHECK(full < sel);
  CHECK(sel < none);
  const std::string one = "--model gpt3_27 --gpu h100 --mode train --seq 2048 --batch 1 --dtype bf16";
  const json sdpa = predict(one + " --attention sdpa"), eager = predict(one + " --attention eager");
  CHECK(sdpa["memory"]["activations_gb"].get<double>() < 0.5 * eager["memory"]["activations_gb"].get<double>());
  CHECK(sdpa["latency_ms"].get<double>() < eager["latency_ms"].get<double>());
}

TEST_CASE("memory: prefill and decode hold every microbatch's KV cache and a stage its layers' share of it",
          "[cli][memory]") {
  // each microbatch's sequences keep their own cache across the microbatches (scripts/neusight/workload.lua
  // kv_cache_bytes): splitting the batch into microbatches moves no cache away, and a pipeline stage holds its half
  // of the layers' cache for all 16 sequences (it used to count one microbatch's: 8.59 GB became 2.15 with 4)
  const std::string llama = "--model llama3_8b --gpu h100 --dtype bf16 --batch 16 ";
  for (const std::string& mode : {std::string("--mode decode --context 4096"), std::string("--mode prefill --seq 4096")}) {
    INFO(mode);
    const json one = predict(llama + mode);
    const double kv = one["kv_cache_gb"].get<double>();
    REQUIRE(kv > 1);
    CHECK(one["memory"]["kv_cache_gb"].get<double>() == Approx(kv));
    const json micro = predict(llama + mode + " --microbatches 4");
    CHECK(micro["kv_cache_gb"].get<double>() == Approx(kv));
    CHECK(micro["memory"]["kv_cache_gb"].get<double>() == Approx(kv));
    // only the temporary differs: the largest node's transient at the microbatch's size
    const auto held = [](const json& j) { return j["memory_gb"].get<double>() - j["memory"]["temporary_gb"].get<double>(); };
    CHECK(held(micro) == Approx(held(one)));
    CHECK(micro["memory"]["temporary_gb"].get<double>() < one["memory"]["temporary_gb"].get<double>());
    const json staged = predict(llama + mode + " --pp 2 --microbatches 8");
    CHECK(staged["kv_cache_gb"].get<double>() == Approx(kv));  // every layer, as with --pp alone
    CHECK(staged["memory"]["kv_cache_gb"].get<double>() == Approx(kv / 2));
    REQUIRE(staged["parallel"]["devices"].size() == 2);
    for (const json& d : staged["parallel"]["devices"]) CHECK(d["kv_cache_gb"].get<double>() == Approx(kv / 2));
    CHECK(staged["memory"]["kv_cache_gb"].get<double>() ==
          Approx(predict(llama + mode + " --pp 2")["memory"]["kv_cache_gb"].get<double>()));
  }
}

// Under pipeline parallelism each stage holds its own layers' KV cache: with sliding-window attention on some layers
// only (Qwen2's max_window_layers), a stage of full-attention layers holds more than a stage of windowed ones (tester
// 3: both got the model-wide average). Hand count, batch 2, context 8192 (+1 new token), 4 KV heads of 128, bf16:
// 14 full layers 2·14·2·4·128·2·8193 B = 0.4698 GB; 14 windowed layers the same at 4096 tokens = 0.2349 GB.
TEST_CASE("memory: each pipeline stage holds its own layers' KV cache - windowed layers the window's",
          "[cli][memory][window]") {
  ns_test::temp_dir t;
  const auto cfg = t.write("qwen_sw/config.json",
                           R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":3584,)"
                           R"("intermediate_size":18944,"num_attention_heads":28,"num_hidden_layers":28,)"
                           R"("num_key_value_heads":4,"vocab_size":152064,"max_position_embeddings":131072,)"
                           R"("max_window_layers":14,"use_sliding_window":true,"sliding_window":4096,)"
                           R"("tie_word_embeddings":false,"torch_dtype":"bfloat16","rms_norm_eps":1e-6,)"
                           R"("rope_theta":1000000.0})");
  const auto r = ns_test::run_cli("predict --model " + ns_test::quoted(cfg.string()) + " --gpu h100 --mode decode "
                                  "--batch 2 --context 8192 --dtype bf16 --pp 2 --microbatches 2 --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& dev = j["parallel"]["devices"];
  REQUIRE(dev.size() == 2);
  CHECK(dev[0]["kv_cache_gb"].get<double>() == Approx(2.0 * 14 * 2 * 4 * 128 * 2 * 8193 / 1e9).epsilon(1e-9));
  CHECK(dev[1]["kv_cache_gb"].get<double>() == Approx(2.0 * 14 * 2 * 4 * 128 * 2 * 4096 / 1e9).epsilon(1e-9));
  CHECK(j["memory"]["stage"].get<int>() == 0);  // the stage of full-attention layers is the fullest
}
