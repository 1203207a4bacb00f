// tests/cli/test_scale.cpp — `neusight scale` on a per-op label trace (fixture copy of the NeuSight data).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;

namespace {
const std::string trace = "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.csv";

json scale_json(const std::string& args) {
  const auto r = run_cli("scale --trace " + trace + " " + args + " --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}
}  // namespace

TEST_CASE("scale: to the same GPU the trace comes back unchanged", "[cli][scale]") {
  const json j = scale_json("--from 'Tesla T4' --to t4");
  CHECK(j["layers"] == 36);  // from the model config beside the fixture data
  CHECK(j["mode"] == "inference");
  CHECK_THAT(double(j["latency_ms"]), Catch::Matchers::WithinRel(double(j["origin_ms"]), 1e-12));
  double sum = 0;
  for (const auto& op : j["ops"]) {
    CHECK(double(op["scaled_ms"]) == Approx(double(op["origin_ms"])).epsilon(1e-12));
    sum += double(op["scaled_ms"]);
  }
  CHECK_THAT(sum, Catch::Matchers::WithinRel(double(j["latency_ms"]), 1e-9));
}

TEST_CASE("scale: each op moves by the ratio of the tile predictor's forecasts", "[cli][scale]") {
  const json j = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB'");
  size_t with_kernels = 0, getitems = 0;
  for (const auto& op : j["ops"]) {
    const double from = op["predicted_from_ms"], to = op["predicted_to_ms"], origin = op["origin_ms"];
    // getitem: the reference charges it a copy, PyTorch runs a view or size()[i] (scripts/neusight/scale.lua host_ops)
    const bool host = op["op"] == "getitem";
    if (host && from > 0) ++getitems;
    if (from > 0 && !host) {
      ++with_kernels;
      CHECK(double(op["scaled_ms"]) == Approx(origin * to / from).epsilon(1e-9));
    } else {
      CHECK(double(op["scaled_ms"]) == Approx(origin));  // no GPU kernels: host time, kept
    }
  }
  CHECK(with_kernels > 20);
  CHECK(getitems > 0);
  CHECK(double(j["latency_ms"]) < double(j["origin_ms"]));  // the A100 is faster than the T4
}

TEST_CASE("scale: the predictor's warnings are said on stderr and in the JSON, once each", "[cli][scale]") {
  // a Lua predictor faster than the GPU's peaks: the predictor warns of it on both GPUs (figures.lua
  // predictor_warnings); scale took the ratios of those forecasts without a word
  ns_test::temp_dir t;
  const std::string fast = t.write("fast.lua", "return { predict = function(kernels, gpu) local o = {} for i, k in "
                                               "ipairs(kernels) do o[i] = k.bytes / (gpu.mem_bw_gbps * 1e12) end "
                                               "return o end }\n").string();
  const json j = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB' --predictor " + ns_test::quoted(fast));
  size_t said = 0;
  for (const auto& w : j["warnings"]) said += std::string(w).rfind("predictor " + fast + ":1 priced ", 0) == 0;
  CHECK(said == 2);  // one per GPU's forecast
  const auto r = run_cli("scale --trace " + trace + " --from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB' --predictor " +
                         ns_test::quoted(fast));
  for (const auto& w : j["warnings"]) {
    const std::string line = "neusight: warning: " + std::string(w) + "\n";
    const auto at = r.err.find(line);  // on stderr, once
    CHECK(at != std::string::npos);
    CHECK(r.err.find(line, at + 1) == std::string::npos);
  }
  // the tile predictor with the bundled weights: nothing of the kind
  const json ok = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB'");
  for (const auto& w : ok["warnings"]) CHECK(std::string(w).find("predictor ") != 0);
}

TEST_CASE("scale: a trace without its operator graph is a clear error", "[cli][scale]") {
  ns_test::temp_dir t;
  const auto copy = t.write("label/Tesla_T4/gpt2_large-inf-1024-4.csv", ns_test::slurp(ns_test::source_dir / trace));
  const auto r = run_cli("scale --trace '" + copy.string() + "' --from t4 --to l4");
  CHECK(r.code == 1);
  CHECK(r.err.find("no operator graph for this trace at") != std::string::npos);
}

// ---- Chrome-trace JSON and wavescale traces: ratio routing for kernel-varying ops, wave scaling otherwise.
namespace {
const std::string chrome = "tests/fixtures/traces/chrome/tiny.json";
const std::string wavescale = "tests/fixtures/traces/wavescale/trace.json";
const std::string v100 = "'Tesla V100-PCIE-32GB'", a100 = "'NVIDIA A100-PCIE-40GB'";

json scale_trace(const std::string& file, const std::string& args) {
  const auto r = run_cli("scale --trace '" + file + "' " + args + " --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}
}  // namespace

TEST_CASE("scale: measured traces scaled to the same GPU come back unchanged", "[cli][scale]") {
  for (const auto& file : {chrome, wavescale}) {
    for (const std::string variant : {"code", "paper"}) {
      INFO(file << " " << variant);
      const json j = scale_trace(file, "--from " + v100 + " --to v100 --wave-variant " + variant);
      REQUIRE(j["ops"].size() >= 3);
      size_t wave = 0;
      for (const auto& op : j["ops"]) {
        INFO(op.dump());
        if (op["method"] == "wave") ++wave;
        CHECK(double(op["scaled_ms"]) == Approx(double(op["origin_ms"])).epsilon(1e-12));
      }
      CHECK(wave >= 2);
      CHECK(double(j["latency_ms"]) == Approx(double(j["origin_ms"])).epsilon(1e-12));
    }
  }
}

TEST_CASE("scale: a Chrome trace's GEMM moves by the predictor's ratio, other ops by wave scaling", "[cli][scale]") {
  const json j = scale_trace(chrome, "--from " + v100 + " --to " + a100);
  CHECK(j["mode"] == "train");
  bool ratio_seen = false;
  double fw = 0, bw = 0;
  for (const auto& op : j["ops"]) {
    INFO(op.dump());
    if (op["phase"] == "forward") fw += double(op["scaled_ms"]);
    else if (op["phase"] == "backward" || op["phase"] == "accumulate") bw += double(op["scaled_ms"]);
    if (op["op"] == "aten::linear") {
      ratio_seen = true;
      CHECK(op["method"] == "ratio");
      CHECK(op["family"] == "gemm");
      CHECK(double(op["origin_ms"]) == Approx(0.0025));
      const double from = op["predicted_from_ms"], to = op["predicted_to_ms"];
      REQUIRE(from > 0);
      CHECK(double(op["scaled_ms"]) == Approx(double(op["origin_ms"]) * to / from).epsilon(1e-12));
    } else if (op["op"] == "aten::add") {
      CHECK(op["method"] == "wave");
      CHECK(!op.contains("predicted_from_ms"));
    }
  }
  CHECK(ratio_seen);
  CHECK(double(j["forward_ms"]) == Approx(fw));
  CHECK(double(j["backward_ms"]) == Approx(bw));
  CHECK(double(j["latency_ms"]) == Approx(fw + bw));
}

TEST_CASE("scale: wavescale ops without shapes fall back to wave scaling with a warning", "[cli][scale]") {
  const auto r = run_cli("scale --trace " + wavescale + " --from " + v100 + " --to " + a100 + " --format json");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("'linear' ops routed to the ratio had missing or unsupported input shapes") != std::string::npos);
  const json j = json::parse(r.out);
  CHECK(j["ops"].size() == 4);
  for (const auto& op : j["ops"]) CHECK(op["method"] != "ratio");
  // the optimizer op has no kernels: its time is kept, and counts in the end-to-end latency only
  CHECK(double(j["latency_ms"]) > double(j["forward_ms"]) + double(j["backward_ms"]));
}

TEST_CASE("scale: a Chrome trace's GEMM without its element types is not priced as fp32", "[cli][scale]") {
  // The real bf16 Llama trace with every "Input type" removed (an edited or converted trace keeps the dims only).
  // Taking its bf16 GEMMs for fp32 ones moved them by the fp32 ratio: to an L4 8.1 ms of them came out 35.2 ms.
  const std::string llama = "tests/fixtures/traces/hf/llama-bf16-train.json";
  json tr = json::parse(ns_test::slurp(ns_test::source_dir / llama));
  size_t stripped = 0;
  for (auto& e : tr["traceEvents"])
    if (e.contains("args") && e["args"].is_object()) stripped += e["args"].erase("Input type");
  REQUIRE(stripped > 100);
  ns_test::temp_dir t;
  const auto file = t.write("llama-no-types.json", tr.dump());
  const auto r = run_cli("scale --trace '" + file.string() + "' --to l4 --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("'aten::linear' ops routed to the ratio had missing or unsupported input shapes or element types") !=
        std::string::npos);
  size_t linears = 0;
  const json j = json::parse(r.out);
  for (const auto& op : j["ops"]) {
    if (op["op"] != "aten::linear" && op["op"] != "MmBackward0") continue;
    ++linears;
    INFO(op.dump());
    CHECK(op["method"] == "wave");  // not understood: wave-scaled and counted, never a guessed dtype
  }
  CHECK(linears >= 30);
  // with its types the same trace prices them as bf16 GEMMs by the ratio
  const json typed = scale_trace(llama, "--to l4");
  for (const auto& op : typed["ops"])
    if (op["op"] == "aten::linear") CHECK(op["method"] == "ratio");
}

TEST_CASE("scale: --wave-variant paper changes a multi-wave kernel's result", "[cli][scale]") {
  ns_test::temp_dir t;
  t.write("ops.csv", "op_id,op_name,pass,wall_ns\n0,add_,fwd,\n");
  t.write("kernels.csv",
          "op_id,seq,kernel_name,grid_x,grid_y,grid_z,block_x,block_y,block_z,regs_per_thread,smem_static_bytes,"
          "smem_dynamic_bytes,duration_ns\n0,0,elementwise_add,100003,1,1,256,1,1,32,0,0,1000000\n");
  const auto manifest = t.write("trace.json", R"({"format": "wavescale-trace/1", "origin_gpu": "V100",
    "ops": "ops.csv", "kernels": "kernels.csv"})");
  const json code = scale_trace(manifest.string(), "--from " + v100 + " --to " + a100);
  const json paper = scale_trace(manifest.string(), "--from " + v100 + " --to " + a100 + " --wave-variant paper");
  REQUIRE(code["ops"].size() == 1);
  REQUIRE(paper["ops"].size() == 1);
  const double c = code["ops"][0]["scaled_ms"], p = paper["ops"][0]["scaled_ms"];
  CHECK(code["ops"][0]["origin_ms"] == Approx(1.0));
  CHECK(c > 0);
  CHECK(p > 0);
  CHECK(std::abs(c - p) > 1e-6 * c);
  const auto bad = run_cli("scale --trace '" + manifest.string() + "' --from v100 --to v100 --wave-variant nope");
  CHECK(bad.code != 0);
}

// ---- Real PyTorch-profiler traces of HF models (tests/fixtures/traces/hf, recorded on an H200: reader fixtures).
namespace {
const std::string hf = "tests/fixtures/traces/hf/";
const double h200_bw = 4800, h100_bw = 3350;  // gpus/h200_sxm_141gb.toml, gpus/h100_sxm5_80gb.toml

// H200 → H100 (same compute, less bandwidth): an op neither speeds up nor slows by more than the bandwidth ratio.
void check_h200_to_h100(double origin_ms, double scaled_ms) {
  CHECK(scaled_ms >= origin_ms * (1 - 1e-9));
  CHECK(scaled_ms <= origin_ms * h200_bw / h100_bw * (1 + 1e-9));
}

json scale_hf(const std::string& name, const std::string& to, std::string* err = nullptr) {
  const auto r = run_cli("scale --trace " + hf + name + ".json --from h200_sxm_141gb --to " + to + " --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  if (err) *err = r.err;
  return json::parse(r.out);
}
}  // namespace

TEST_CASE("scale: real HF traces scaled to their own GPU come back unchanged", "[cli][scale]") {
  for (const std::string name : {"gpt2-fp32-train", "llama-bf16-train", "mixtral-bf16-inference", "llama-bf16-decode",
                                 "gpt2-fp16-decode"}) {
    INFO(name);
    const json j = scale_hf(name, "h200_sxm_141gb");
    for (const auto& op : j["ops"]) CHECK(double(op["scaled_ms"]) == Approx(double(op["origin_ms"])).epsilon(1e-12));
    CHECK(double(j["latency_ms"]) == Approx(double(j["origin_ms"])).epsilon(1e-12));
    // the gaps no kernel covers are carried over as they are: inside the GPU span, beside the kernel time
    const double span = j["origin_span_ms"], idle = j["idle_ms"];
    CHECK(idle >= 0);
    CHECK(idle < span);
    CHECK(double(j["origin_ms"]) <= span * (1 + 1e-9));  // one stream: the kernels fit in the span
    CHECK(double(j["latency_with_idle_ms"]) == Approx(double(j["latency_ms"]) + idle).epsilon(1e-12));
  }
  // label traces have no kernel timeline: no idle figures
  CHECK_FALSE(scale_json("--from 'Tesla T4' --to t4").contains("idle_ms"));
}

// tester8 #6: a decode step's kernels are a sixth of the step hf_trace.py measured (3.294 ms, CUDA events outside the
// profiler): the total is the kernel time, the measured step is shown beside it, and a step whose kernels cover under
// 20 % of it (launch- or host-bound) is warned of.
TEST_CASE("scale: the total is kernel time - the sidecar's measured step is shown and a launch-bound step warned of",
          "[cli][scale]") {
  std::string err;
  const json j = scale_hf("llama-bf16-decode", "h100_sxm5_80gb", &err);
  CHECK(double(j["kernel_ms"]) == double(j["latency_ms"]));
  CHECK(double(j["origin_step_ms"]) == Approx(3.29365758895874).epsilon(1e-12));
  CHECK(double(j["origin_kernel_share"]) == Approx(double(j["origin_ms"]) / 3.29365758895874).epsilon(1e-12));
  CHECK(double(j["origin_kernel_share"]) < 0.2);
  CHECK(err.find("the step is launch- or host-bound") != std::string::npos);
  CHECK(j["warnings"].dump().find("the step is launch- or host-bound") != std::string::npos);
  const auto r = run_cli("scale --trace " + hf + "llama-bf16-decode.json --from h200_sxm_141gb --to h100_sxm5_80gb");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("kernel time ") != std::string::npos);
  CHECK(r.out.find("end to end") == std::string::npos);
  CHECK(r.out.find("measured step         3.294 ms") != std::string::npos);
  // a training step's kernels cover most of its step: no warning
  std::string terr;
  const json train = scale_hf("llama-bf16-train", "h100_sxm5_80gb", &terr);
  INFO(terr);
  CHECK(double(train["origin_kernel_share"]) >= 0.2);
  CHECK(terr.find("launch- or host-bound") == std::string::npos);
}

// The share is a rule a researcher may change: scripts/neusight/scale.lua kernel_share_min, which a --scripts scale.lua
// moves (the message the same, with its threshold); a value outside [0, 1] is an error that names the file.
TEST_CASE("scale: the launch-bound share of the step is scripts/neusight/scale.lua kernel_share_min", "[cli][scale]") {
  ns_test::temp_dir t;
  const auto scale_with = [&](const std::string& name, const std::string& trace, const std::string& patch) {
    return run_cli("scale --trace " + hf + trace + ".json --from h200_sxm_141gb --to h100_sxm5_80gb --format json" +
                   ns_test::override_dir(t, name, "scale", patch));
  };
  const auto low = scale_with("low", "llama-bf16-decode", "M.kernel_share_min = 0.1");  // the step's kernels: 16 %
  REQUIRE(low.code == 0);
  CHECK(double(json::parse(low.out)["origin_kernel_share"]) > 0.1);
  CHECK(low.err.find("launch- or host-bound") == std::string::npos);
  const auto high = scale_with("high", "llama-bf16-train", "M.kernel_share_min = 1");
  REQUIRE(high.code == 0);
  const json train = json::parse(high.out);
  CHECK(double(train["origin_kernel_share"]) < 1);
  CHECK(high.err.find(" %, under 100 %): the step is launch- or host-bound, and the kernel time scaled here does not "
                      "forecast it on ") != std::string::npos);
  CHECK(train["warnings"].dump().find("under 100 %") != std::string::npos);
  const auto bad = scale_with("bad", "llama-bf16-decode", "M.kernel_share_min = 20");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("neusight/scale.lua: kernel_share_min must be a number in [0, 1] (the least share of the measured "
                     "step its kernels run before scale warns that the step is launch- or host-bound; got 20)") !=
        std::string::npos);
}

// A scale.lua whose scale() gives inf (a user's edit) is an error naming it, never a null op time in the output.
TEST_CASE("scale: a scale() result that is not a finite number is an error naming scale.lua", "[cli][scale]") {
  ns_test::temp_dir t;
  const auto r = run_cli("scale --trace " + trace + " --from 'Tesla T4' --to t4 --format json" +
                         ns_test::override_dir(t, "inf", "scale", "function M.scale() return math.huge end"));
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("neusight/scale.lua: scale() must return a finite number >= 0 (op '") != std::string::npos);
}

TEST_CASE("scale: backward GEMMs, attention and MoE experts of real traces take the ratio rule at their dtype",
          "[cli][scale]") {
  std::string err;
  const json gpt2 = scale_hf("gpt2-fp32-train", "a100_sxm4_80gb", &err);
  CHECK(err.find("missing or unsupported input shapes") == std::string::npos);
  std::map<std::string, std::string> method;
  for (const auto& op : gpt2["ops"]) {
    method[op["op"]] = op["method"];
    if (op["method"] == "ratio") CHECK(op["dtype"] == "fp32");
  }
  for (const char* kind : {"aten::addmm", "AddmmBackward0", "MmBackward0", "aten::scaled_dot_product_attention",
                           "ScaledDotProductEfficientAttentionBackward0"}) {
    INFO(kind);
    CHECK(method[kind] == "ratio");
  }
  const json llama = scale_hf("llama-bf16-train", "a100_sxm4_80gb");
  size_t bf16 = 0;
  for (const auto& op : llama["ops"])
    if (op["method"] == "ratio") {
      INFO(op.dump());
      if (op["dtype"] == "bf16") ++bf16;
      else CHECK(op["op"] == "aten::matmul");  // RoPE's frequencies: an fp32 product in the trace too
    }
  CHECK(bf16 >= 32);  // 15 linear + 15 MmBackward0 + attention forward and backward
  const json moe = scale_hf("mixtral-bf16-inference", "a100_sxm4_80gb");
  size_t grouped = 0;
  for (const auto& op : moe["ops"])
    if (op["op"] == "aten::_grouped_mm") {
      CHECK(op["method"] == "ratio");
      CHECK(op["family"] == "bmm");
      ++grouped;
    }
  CHECK(grouped == 2);  // the experts' gate+up and down projections of the one layer
}

// The physics of issue 11: the H200 and the H100 SXM share every compute field (SMs, clocks, peaks) and differ in
// their memory system. Compute-bound kernels (the large GEMMs, fused attention) keep their time; nothing slows
// down by more than the bandwidth ratio, and nothing speeds up.
TEST_CASE("scale: H200 → H100: compute-bound kernels keep their time, the rest slows by at most the bandwidth ratio",
          "[cli][scale][physics]") {
  for (const std::string name : {"gpt2-fp32-train", "llama-bf16-train"}) {
    INFO(name);
    const json j = scale_hf(name, "h100_sxm5_80gb");
    size_t kept = 0;
    for (const auto& op : j["ops"]) {
      INFO(op.dump());
      const double origin = op["origin_ms"], scaled = op["scaled_ms"];
      check_h200_to_h100(origin, scaled);
      const std::string kind = op["op"];
      const bool gemm = kind == "aten::addmm" || kind == "AddmmBackward0" || kind == "aten::linear" || kind == "MmBackward0";
      if (gemm && scaled == Approx(origin).epsilon(1e-9)) ++kept;
      // fp32 GEMMs of this size are compute-bound on both (ridge ≈ 14 FLOP/B): every one keeps its time
      if (gemm && name == "gpt2-fp32-train") {
        CHECK(scaled == Approx(origin).epsilon(1e-9));
        CHECK(op["physics"] == "compute-bound, same compute: kept");
      }
    }
    CHECK(kept >= 16);  // gpt2: 8 addmm + 8 AddmmBackward0 (+ LM head); llama: the q/o/MLP projections
    const double ratio = double(j["latency_ms"]) / double(j["origin_ms"]);
    CHECK(ratio > 1.0);
    // gpt2 +7.5 %, llama +30 %: its AdamW step (4.8 of 11.4 ms, multi_tensor_apply kernels that fill every SM) slows
    // by the bandwidth ratio, the end to end by less
    CHECK(ratio < (name == "gpt2-fp32-train" ? 1.1 : 1.35));
  }
}

// Decode steps against a KV cache (hf_trace.py --mode decode): 8 (Llama, bf16) or 4 (GPT-2, fp16) rows per GEMM, the
// attention of one query over 1,025 (513) cached keys, and the cache's append (aten::cat of the whole cache, a copy).
// H200 → H100 (same compute, 4.8 vs 3.35 TB/s): the copies slow by the bandwidth ratio itself, nothing speeds up or
// slows by more, and the GEMMs and attention are read with their shapes (the ratio rule at their dtype).
TEST_CASE("scale: real decode traces: KV-cache copies slow by the bandwidth ratio and GEMMs keep their shapes",
          "[cli][scale][physics]") {
  for (const auto& [name, dtype] : std::vector<std::pair<std::string, std::string>>{{"llama-bf16-decode", "bf16"},
                                                                                    {"gpt2-fp16-decode", "fp16"}}) {
    INFO(name);
    std::string err;
    const json j = scale_hf(name, "h100_sxm5_80gb", &err);
    CHECK(err.find("missing or unsupported input shapes") == std::string::npos);
    CHECK(j["mode"] == "inference");
    CHECK(j["backward_ms"] == 0.0);
    size_t cats = 0, gemms = 0, attention = 0;
    for (const auto& op : j["ops"]) {
      INFO(op.dump());
      const double origin = op["origin_ms"], scaled = op["scaled_ms"];
      check_h200_to_h100(origin, scaled);
      const std::string kind = op["op"];
      if (kind == "aten::cat" && origin > 0.01) {  // the cache appends (RoPE's one-block cats are latency-bound)
        CHECK(scaled == Approx(origin * h200_bw / h100_bw).epsilon(1e-9));
        ++cats;
      } else if (kind == "aten::linear" || kind == "aten::addmm") {
        CHECK(op["method"] == "ratio");
        CHECK(op["dtype"] == dtype);
        ++gemms;
      } else if (kind == "aten::scaled_dot_product_attention") {
        CHECK(op["method"] == "ratio");
        ++attention;
      }
    }
    CHECK(cats == 4);       // each layer's key and value appends
    CHECK(gemms >= 9);      // the projections of 2 layers and the LM head
    CHECK(attention == 2);  // one per layer
    CHECK(double(j["latency_ms"]) > double(j["origin_ms"]));
  }
}

// --predictor picks whose forecasts give the ratio: a built-in, or a Lua predictor; the JSON says which. A predictor
// whose times do not depend on the GPU moves no ratio op at all.
TEST_CASE("scale: --predictor gives the ratio from another predictor", "[cli][scale]") {
  const json tile = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB'");
  const json roof = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB' --predictor roofline");
  CHECK(tile["predictor"] == "neusight");
  CHECK(roof["predictor"] == "roofline");
  CHECK(roof["origin_ms"] == tile["origin_ms"]);
  CHECK(roof["latency_ms"].get<double>() != tile["latency_ms"].get<double>());
  ns_test::temp_dir t;
  t.write("scripts/neusight/predictors/flat.lua",
          "return { description = 'one microsecond per kernel on any GPU',\n"
          "  predict = function(kernels) local out = {} for i = 1, #kernels do out[i] = 1e-6 end return out end }\n");
  const json flat = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB' --predictor flat --scripts '" +
                               (t.path / "scripts").string() + "'");
  size_t ratio_ops = 0;
  for (const auto& op : flat["ops"])
    if (op["method"] == "ratio") {
      ++ratio_ops;
      CHECK(op["scaled_ms"].get<double>() == Approx(op["origin_ms"].get<double>()).epsilon(1e-9));
    }
  CHECK(ratio_ops > 0);
  const auto bad = run_cli("scale --trace " + trace + " --from 'Tesla T4' --to t4 --predictor rooflin");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("unknown predictor 'rooflin'") != std::string::npos);
}

// ---- The origin GPU: --from against the GPU the trace names (the rule of predict --calibrate).
TEST_CASE("scale: a trace recorded on another GPU than --from is an error", "[cli][scale]") {
  // gpt2-fp16-decode.json names 'NVIDIA H200' in its deviceProperties
  const auto r = run_cli("scale --trace " + hf + "gpt2-fp16-decode.json --from l4 --to h100 --format json");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("the trace was recorded on H200-SXM-141GB ('NVIDIA H200'), not on L4 (--from)") != std::string::npos);
  // so is the manifest's origin_gpu of a wavescale trace
  const auto w = run_cli("scale --trace " + wavescale + " --from t4 --to h100");
  CHECK(w.code == 1);
  CHECK(w.err.find("recorded on V100-PCIE-32GB ('V100'), not on T4 (--from)") != std::string::npos);
}

TEST_CASE("scale: without --from the origin is the GPU the trace names", "[cli][scale]") {
  const json named = scale_trace(hf + "gpt2-fp16-decode.json", "--to h100");
  const json given = scale_hf("gpt2-fp16-decode", "h100");
  CHECK(named["from"] == "H200-SXM-141GB");
  CHECK(double(named["latency_ms"]) == Approx(double(given["latency_ms"])).epsilon(1e-12));
  // a label CSV: its label/<GPU>/ folder
  CHECK(scale_json("--to t4")["from"] == "T4");
  // a trace that names none, in a folder that names no GPU: --from is needed
  ns_test::temp_dir t;
  std::string text = ns_test::slurp(ns_test::source_dir / chrome);
  const auto at = text.find("\"deviceProperties\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string("\"deviceProperties\"").size(), "\"otherProperties\"");
  const auto anon = t.write("anon.json", text);
  const auto r = run_cli("scale --trace '" + anon.string() + "' --to h100");
  CHECK(r.code == 1);
  CHECK(r.err.find("the trace does not name the GPU it was recorded on (no deviceProperties): give it with --from") !=
        std::string::npos);
  CHECK(scale_trace(anon.string(), "--from v100 --to h100")["from"] == "V100-PCIE-32GB");
}

TEST_CASE("scale: a label CSV whose folder names another GPU than --from warns", "[cli][scale]") {
  const json other = scale_json("--from v100 --to t4");
  REQUIRE(other["warnings"].size() == 1);
  CHECK(std::string(other["warnings"][0]).find("its folder 'Tesla_T4' names T4, not V100-PCIE-32GB (--from)") !=
        std::string::npos);
  CHECK(other["from"] == "V100-PCIE-32GB");  // --from still rules: a folder may be named anything
  CHECK(scale_json("--from t4 --to v100")["warnings"].empty());
  // a folder that names no GPU says nothing
  ns_test::temp_dir t;
  const auto copy = t.write("mine/gpt2_large-inf-1024-4.csv", ns_test::slurp(ns_test::source_dir / trace));
  const json mine = scale_trace(copy.string(), "--from v100 --to t4 --graph "
                                               "tests/fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv");
  REQUIRE(mine["warnings"].size() == 1);  // only that no label file (its measured time, the origin) is beside it
  CHECK(std::string(mine["warnings"][0]).find(": no label file ") != std::string::npos);
}

// A trace's GPU that no bundled file names: the given file's own name or alias is it (a user's GPU file); any other
// given GPU takes it with a warning (it stopped every such scale, with advice that did not help)
TEST_CASE("scale: a trace recorded on a GPU only the given file names is scaled from it", "[cli][scale]") {
  ns_test::temp_dir t;
  const auto nvl = t.write("nvl.json", ns_test::replace_all(ns_test::slurp(ns_test::source_dir / chrome),
                                                            "\"Tesla V100-PCIE-32GB\"", "\"NVIDIA H100 NVL\""));
  std::string gpu = ns_test::slurp(ns_test::source_dir / "gpus/h100_pcie_80gb.toml");
  const auto name_at = gpu.find("\nname = "), aliases_at = gpu.find("\naliases = ");
  REQUIRE(name_at != std::string::npos);
  REQUIRE(aliases_at != std::string::npos);
  gpu.replace(aliases_at + 1, gpu.find('\n', aliases_at + 1) - aliases_at - 1, "aliases = [\"NVIDIA H100 NVL\"]");
  gpu.replace(name_at + 1, gpu.find('\n', name_at + 1) - name_at - 1, "name = \"H100-NVL\"");
  const auto own = t.write("nvl.toml", gpu);
  const json mine = scale_trace(nvl.string(), "--from '" + own.string() + "' --to a100_sxm4_80gb");
  CHECK(mine["from"] == "H100-NVL");
  CHECK(mine["warnings"].dump().find("which no GPU file names") == std::string::npos);
  const json bundled = scale_trace(nvl.string(), "--from h100_pcie_80gb --to a100_sxm4_80gb");
  CHECK(bundled["from"] == "H100-PCIE-80GB");
  CHECK(bundled["warnings"].dump().find("the trace was recorded on 'NVIDIA H100 NVL', which no GPU file names: taken "
                                        "as H100-PCIE-80GB (--from)") != std::string::npos);
  // --calibrate keeps what it fits for every later forecast of the GPU: there the unknown name is refused, and the
  // file's own alias is the way in
  const auto plain = t.write("plain/h100_pcie_80gb.toml", ns_test::slurp(ns_test::source_dir / "gpus/h100_pcie_80gb.toml"));
  const auto refused = run_cli("predict --gpu '" + plain.string() + "' --calibrate '" + nvl.string() + "'");
  CHECK(refused.code == 1);
  CHECK(refused.err.find("which no GPU file names: add its torch.cuda.get_device_name() string to the aliases of") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.path / "plain/h100_pcie_80gb.calibration.toml"));
  // the file's own alias takes it past the GPU check, to the fit: the fixture's one 2.5 us linear op is too little
  // measured time for a factor (calibration.lua trace_min_launches), so nothing is written
  const auto fitted = run_cli("predict --gpu '" + own.string() + "' --calibrate '" + nvl.string() + "'");
  INFO(fitted.err);
  CHECK(fitted.code == 1);
  CHECK(fitted.err.find("nvl.json: no kernel family with enough measured time to calibrate") != std::string::npos);
  CHECK(fitted.err.find("which no GPU file names") == std::string::npos);
}

// A label CSV given by its name alone, from its own folder: the folder still names the GPU
TEST_CASE("scale: a label CSV given by a relative path in its folder finds its GPU", "[cli][scale]") {
  const std::filesystem::path dir = ns_test::source_dir / std::filesystem::path(trace).parent_path();
  const std::string file = std::filesystem::path(trace).filename().string();
  for (const std::string& as : {file, "./" + file}) {
    const auto r = ns_test::run_sh("cd '" + dir.string() + "' && '" NEUSIGHT_EXE "' scale --trace '" + as +
                                   "' --to h100 --format json");
    INFO(as << ": " << r.err);
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["from"] == "T4");
  }
}

// ---- GPUs by compute capability: Blackwell's rows of the occupancy table; AMD GPUs, which wave scaling cannot use.
namespace {
// tests/fixtures/traces/chrome/tiny.json as recorded on another GPU (`device`: its deviceProperties name).
std::string tiny_on(ns_test::temp_dir& t, const std::string& device) {
  const std::string text = ns_test::slurp(ns_test::source_dir / chrome);
  return t.write("trace.json", ns_test::replace_all(text, "Tesla V100-PCIE-32GB", device)).string();
}
// Its forward GEMM alone: every op takes the predictor's ratio, none wave scaling.
std::string tiny_gemm_only(ns_test::temp_dir& t) {
  return t.write("gemm.json", R"({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "Tesla V100-PCIE-32GB", "numSms": 80}],
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 50,
     "args": {"External id": 1, "Input Dims": [[4, 8], [16, 8], [16]], "Input type": ["float", "float", "float"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 15, "dur": 40,
     "args": {"External id": 2, "Input Dims": [[16], [4, 8], [8, 16], [], []], "Input type": ["float", "float", "float", "Scalar", "Scalar"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
     "args": {"External id": 2, "correlation": 100}},
    {"ph": "X", "cat": "kernel", "name": "volta_sgemm_32x32", "pid": 0, "tid": 7, "ts": 30, "dur": 2.5,
     "args": {"External id": 2, "grid": [4, 1, 1], "block": [256, 1, 1], "registers per thread": 64, "shared memory": 8192}}
  ]
}
)").string();
}
}  // namespace

TEST_CASE("scale: Blackwell GPUs wave-scale by their compute capability's occupancy limits both ways", "[cli][scale]") {
  for (const std::string to : {"b200", "gb200", "b300_sxm", "gb300", "rtx_pro_6000_server"}) {
    INFO(to);
    const json j = scale_trace(chrome, "--from " + v100 + " --to " + to + " --predictor roofline");
    size_t wave = 0;
    for (const auto& op : j["ops"]) {
      if (op["method"] != "wave") continue;
      ++wave;
      CHECK(double(op["scaled_ms"]) > 0);
    }
    CHECK(wave >= 2);
  }
  ns_test::temp_dir t;
  const json back = scale_trace(tiny_on(t, "NVIDIA B200"), "--to v100");  // recorded on a B200
  CHECK(back["from"] == "B200");
  CHECK(double(back["latency_ms"]) > 0);
}

TEST_CASE("scale: an AMD GPU is refused by the op that needs wave scaling and taken where every op takes the ratio",
          "[cli][scale]") {
  for (const std::string amd : {"mi300x", "mi100", "mi210", "mi250"}) {
    INFO(amd);
    const auto r = run_cli("scale --trace " + chrome + " --from " + v100 + " --to " + amd + " --predictor roofline");
    CHECK(r.code == 1);
    CHECK(r.err.find("takes Habitat's wave scaling of its measured kernels") != std::string::npos);
    CHECK(r.err.find(amd + ".toml: ") != std::string::npos);
    CHECK(r.err.find(" is an AMD GPU (compute_capability 'gfx") != std::string::npos);
    CHECK(r.err.find("cover NVIDIA GPUs only") != std::string::npos);
    CHECK(r.err.find("unsupported compute capability") == std::string::npos);
    CHECK(r.out.empty());
  }
  ns_test::temp_dir t;
  const std::string gemm = tiny_gemm_only(t);
  const json j = scale_trace(gemm, "--to mi300x --predictor roofline");
  REQUIRE(j["ops"].size() == 1);
  CHECK(j["ops"][0]["method"] == "ratio");
  CHECK(j["to"] == "MI300X");
}

TEST_CASE("scale: --graph and --layers are usage errors for traces they do not apply to", "[cli][scale]") {
  auto refused = [](const std::string& file, const std::string& flag, const std::string& want) {
    const auto r = run_cli("scale --trace " + file + " --from " + v100 + " --to " + a100 + " " + flag);
    INFO(flag << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(r.out.empty());
  };
  refused(chrome, "--layers 32", "--layers: 32 has no effect on a Chrome-trace JSON (" + chrome + ")");
  refused(chrome, "--graph /nonexistent/x.csv",
          "--graph: '/nonexistent/x.csv' has no effect on a Chrome-trace JSON (" + chrome + "): its ops carry their own");
  refused(wavescale, "--layers 2", "--layers: 2 has no effect on a wavescale trace");
  // a label CSV takes them
  const json j = scale_json("--from 'Tesla T4' --to t4 --layers 2");
  CHECK(j["layers"] == 2);
}

TEST_CASE("scale: the help says what -o writes", "[cli][scale]") {
  // scale (and gpus, eval models) write a table or JSON: -o x.csv is refused, and the help says so
  for (const std::string cmd : {"scale", "gpus", "eval models"}) {
    INFO(cmd);
    const auto h = run_cli(cmd + " --help");
    CHECK(h.out.find("a .json FILE sets --format unless it is given; this command writes a table or JSON, not CSV") !=
          std::string::npos);
    CHECK(h.out.find(".csv FILE sets --format") == std::string::npos);
  }
  CHECK(run_cli("predict --help").out.find("(a .json or .csv FILE sets --format unless it is given)") !=
        std::string::npos);
}

// ---- what-if GPU files and hand-made traces
namespace {
// gpus/h100_sxm5_80gb.toml at t/`file`, named "H100-WHATIF" without aliases, each line starting `key = ` replaced by
// the given line ("" drops it).
std::string h100_with(const ns_test::temp_dir& t, const std::string& file,
                      const std::vector<std::pair<std::string, std::string>>& lines) {
  std::string text = ns_test::slurp(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml");
  auto set = [&](const std::string& key, const std::string& line) {
    const auto at = text.find("\n" + key + " = ");
    REQUIRE(at != std::string::npos);
    const auto end = text.find('\n', at + 1);
    text.replace(at + 1, end - at - (line.empty() ? 0 : 1), line);
  };
  set("name", "name = \"H100-WHATIF\"");
  set("aliases", "aliases = []");
  for (const auto& [key, line] : lines) set(key, line);
  // a what-if part: its peaks need not be a real chip's (scripts/neusight/gpu_check.lua)
  return t.write(file, text + "what_if = \"the H100 with other numbers\"\n").string();
}
}  // namespace

// The physics rule's "same compute" is the compute the kernel runs on: the SMs, clocks and occupancy limits, and the
// peak of its own unit (fp32 SIMT for the fp32 GEMMs and vector kernels, the tensor cores of a bf16 GEMM's dtype). An
// H100 with another fp8 peak was "other compute" for GPT-2's fp32 GEMMs, which then took the predictor's ratio:
// 18.290 → 21.911 ms.
TEST_CASE("scale: a peak of a unit the trace's kernels do not use moves nothing", "[cli][scale][physics]") {
  ns_test::temp_dir t;
  const json stock = scale_hf("gpt2-fp32-train", "h100_sxm5_80gb");
  for (const std::string key : {"peak_fp8_tflops", "peak_bf16_tflops", "peak_fp16_tflops", "peak_tf32_tflops"}) {
    INFO(key);
    const std::string gpu = h100_with(t, key + ".toml", {{key, key + " = 2500.0"}});
    const json other = scale_hf("gpt2-fp32-train", "'" + gpu + "'");
    CHECK(double(other["latency_ms"]) == double(stock["latency_ms"]));
    REQUIRE(other["ops"].size() == stock["ops"].size());
    for (size_t i = 0; i < stock["ops"].size(); ++i) {
      INFO(stock["ops"][i].dump());
      CHECK(double(other["ops"][i]["scaled_ms"]) == double(stock["ops"][i]["scaled_ms"]));
      CHECK(other["ops"][i].value("physics", "") == stock["ops"][i].value("physics", ""));
    }
  }
  // the peak a kernel runs on is its compute: a bf16 GEMM on an H100 with other bf16 tensor cores is not kept
  const std::string bf16 = h100_with(t, "bf16.toml", {{"peak_bf16_tflops", "peak_bf16_tflops = 1200.0"}});
  const json llama = scale_hf("llama-bf16-train", "'" + bf16 + "'");
  size_t bf16_gemms = 0;
  for (const auto& op : llama["ops"]) {
    if (op.value("dtype", "") != "bf16") continue;
    ++bf16_gemms;
    CHECK(op["physics"] != "compute-bound, same compute: kept");
  }
  CHECK(bf16_gemms >= 8);
}

// Habitat keeps a kernel under one wave on both GPUs. A grid with a block on every SM streams through the whole memory
// system (the foreach AdamW's multi_tensor_apply: 320 blocks of 512 threads, under an H100's 528-block wave) and moves
// with the bandwidth; a grid of fewer blocks than SMs keeps its time. The optimizer step has its own line and key.
TEST_CASE("scale: a sub-wave kernel with a block on every SM moves with the bandwidth and a smaller one keeps its time",
          "[cli][scale]") {
  ns_test::temp_dir t;
  t.write("ops.csv", "op_id,op_name,pass,wall_ns\n0,add_,fwd,\n1,_foreach_add_,opt,\n");
  t.write("kernels.csv",
          "op_id,seq,kernel_name,grid_x,grid_y,grid_z,block_x,block_y,block_z,regs_per_thread,smem_static_bytes,"
          "smem_dynamic_bytes,duration_ns\n"
          "0,0,add_few_rows,4,1,1,512,1,1,32,0,0,100000\n"
          "1,0,multi_tensor_apply_kernel,320,1,1,512,1,1,32,0,0,1000000\n"
          "1,1,multi_tensor_apply_kernel,100,1,1,512,1,1,32,0,0,200000\n");
  const auto manifest = t.write("trace.json", R"({"format": "wavescale-trace/1", "origin_gpu": "NVIDIA H200",
    "ops": "ops.csv", "kernels": "kernels.csv"})");
  const json j = scale_trace(manifest.string(), "--to h100");
  REQUIRE(j["ops"].size() == 2);
  CHECK(j["from"] == "H200-SXM-141GB");
  CHECK(double(j["ops"][0]["scaled_ms"]) == Approx(0.1).epsilon(1e-12));  // 4 blocks on 132 SMs: kept
  const double opt = 1.0 * h200_bw / h100_bw + 0.2;                       // 320 blocks move, 100 blocks are kept
  CHECK(double(j["ops"][1]["scaled_ms"]) == Approx(opt).epsilon(1e-12));
  CHECK(j["ops"][1]["sub_wave"] == json{{"kernels", 2}, {"bandwidth_scaled", 1}});
  CHECK(double(j["forward_ms"]) == Approx(0.1).epsilon(1e-12));
  CHECK(double(j["backward_ms"]) == 0.0);
  CHECK(double(j["optimizer_ms"]) == Approx(opt).epsilon(1e-12));
  CHECK(double(j["latency_ms"]) == Approx(0.1 + opt).epsilon(1e-12));
  const auto text = run_cli("scale --trace '" + manifest.string() + "' --to h100");
  REQUIRE(text.code == 0);
  char line[64];
  std::snprintf(line, sizeof line, "\noptimizer      %12.3f ms\n", opt);
  CHECK(text.out.find(line) != std::string::npos);
  // the real AdamW step of a Llama training trace: H200 → H100 slows by the bandwidth ratio, not 0 %
  const json llama = scale_hf("llama-bf16-train", "h100_sxm5_80gb");
  size_t steps = 0;
  for (const auto& op : llama["ops"]) {
    if (op["phase"] != "optimizer") continue;
    ++steps;
    CHECK(double(op["scaled_ms"]) > double(op["origin_ms"]) * 1.35);
    CHECK(double(op["scaled_ms"]) <= double(op["origin_ms"]) * h200_bw / h100_bw * (1 + 1e-9));
    CHECK(double(llama["optimizer_ms"]) == double(op["scaled_ms"]));
  }
  CHECK(steps == 1);
}

namespace {
// tests/fixtures/traces/chrome/tiny.json with every "from" replaced by "to", written to t/`name`.
std::string tiny_edit(const ns_test::temp_dir& t, const std::string& name,
                      const std::vector<std::pair<std::string, std::string>>& edits) {
  std::string text = ns_test::slurp(ns_test::source_dir / chrome);
  for (const auto& [from, to] : edits) {
    REQUIRE(text.find(from) != std::string::npos);
    text = ns_test::replace_all(text, from, to);
  }
  return t.write(name, text).string();
}
const std::string tiny_props = R"("deviceProperties": [{"id": 0, "name": "Tesla V100-PCIE-32GB", "numSms": 80}])";
}  // namespace

// Kineto lists every visible GPU in deviceProperties; the kernels' args.device says which one the step ran on.
TEST_CASE("scale: the origin is the GPU the kernels ran on and kernels of two GPUs are refused", "[cli][scale]") {
  ns_test::temp_dir t;
  const std::string two = R"("deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}, {"id": 1, "name": "Tesla V100-PCIE-32GB"}])";
  const std::string on1 = tiny_edit(t, "on1.json", {{tiny_props, two}, {"\"grid\"", "\"device\": 1, \"grid\""}});
  CHECK(scale_trace(on1, "--to h100")["from"] == "V100-PCIE-32GB");
  const std::string on0 = tiny_edit(t, "on0.json", {{tiny_props, two}, {"\"grid\"", "\"device\": 0, \"grid\""}});
  CHECK(scale_trace(on0, "--to h100")["from"] == "A100-SXM4-80GB");
  // a device deviceProperties does not list, or several listed and no args.device: --from says it
  const std::string on2 = tiny_edit(t, "on2.json", {{tiny_props, two}, {"\"grid\"", "\"device\": 2, \"grid\""}});
  auto r = run_cli("scale --trace '" + on2 + "' --to h100");
  CHECK(r.code == 1);
  CHECK(r.err.find("does not name the GPU it was recorded on (its kernels ran on device 2, which deviceProperties "
                   "does not list): give it with --from") != std::string::npos);
  const std::string none = tiny_edit(t, "none.json", {{tiny_props, two}});
  r = run_cli("scale --trace '" + none + "' --to h100");
  CHECK(r.code == 1);
  CHECK(r.err.find("(deviceProperties lists 2 GPUs and its kernels do not say which one they ran on (no args.device))") !=
        std::string::npos);
  CHECK(scale_trace(none, "--from v100 --to h100")["from"] == "V100-PCIE-32GB");
  // the same trace with one kernel on device 0: refused, naming the devices
  std::string mixed = ns_test::slurp(on1);
  mixed.replace(mixed.find("\"device\": 1"), 11, "\"device\": 0");
  const auto m = t.write("mixed.json", mixed);
  r = run_cli("scale --trace '" + m.string() + "' --from v100 --to h100 --format json");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("mixed.json: its kernels ran on 2 devices (device 0: 1 kernels, device 1: 3 kernels): a trace is "
                   "one GPU's work") != std::string::npos);
}

// Kernels of concurrent streams overlap in time: their summed time (what is scaled) exceeds the time any ran, and the
// warning says which figure is reported. Kernels with 'dur' 0 are counted in a warning.
TEST_CASE("scale: overlapping kernels and zero durations are warned about", "[cli][scale]") {
  ns_test::temp_dir t;
  const std::string overlap =
      tiny_edit(t, "overlap.json", {{R"("tid": 7, "ts": 85, "dur": 1.0)", R"("tid": 9, "ts": 30, "dur": 2.5)"},
                                    {"\"External id\": 2, \"grid\"", "\"External id\": 2, \"stream\": 7, \"grid\""},
                                    {"\"External id\": 3, \"grid\"", "\"External id\": 3, \"stream\": 9, \"grid\""}});
  auto r = run_cli("scale --trace '" + overlap + "' --from v100 --to v100 --format json");
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  // 2.5 + 3 + 5 µs (the add runs beside the GEMM) against the ops' 2.5 + 2.5 + 3 (the nccl kernel has no op)
  CHECK(double(j["origin_busy_ms"]) == Approx(0.0105).epsilon(1e-9));
  CHECK(double(j["origin_ms"]) == Approx(0.008).epsilon(1e-9));
  const std::string w = j["warnings"].dump();
  CHECK(w.find("overlap.json: kernels overlap in time (concurrent streams: 2): their durations sum to 0.013 ms, "
               "but some kernel ran during ") != std::string::npos);
  CHECK(w.find(" ms only (origin_busy_ms); origin_ms and latency_ms are sums of kernel times, as if the kernels ran "
               "one after another") != std::string::npos);
  const json plain = scale_trace(chrome, "--from v100 --to v100");
  CHECK(plain["warnings"].dump().find("overlap") == std::string::npos);
  const std::string zero = tiny_edit(t, "zero.json", {{R"("ts": 85, "dur": 1.0)", R"("ts": 85, "dur": 0)"}});
  CHECK(scale_trace(zero, "--from v100 --to v100")["warnings"].dump().find("zero.json: 1 kernel has 'dur' 0 and "
                                                                          "count 0 ms on both GPUs") != std::string::npos);
}

// A compute capability the occupancy table lacks: the GPU file's own limits (every GPU file gives them) with the
// allocation rules of the table's nearest lower cc; a cc below the table is refused.
TEST_CASE("scale: a GPU file with a compute capability the occupancy table lacks is wave-scaled by its own limits",
          "[cli][scale]") {
  ns_test::temp_dir t;
  const std::string cc95 = h100_with(t, "cc95.toml", {{"compute_capability", "compute_capability = \"9.5\""}});
  const json stock = scale_trace(chrome, "--from v100 --to h100 --predictor roofline");
  const json j = scale_trace(chrome, "--from v100 --to '" + cc95 + "' --predictor roofline");
  CHECK(double(j["latency_ms"]) == double(stock["latency_ms"]));  // the H100's limits, 9.0's allocation rules
  const std::string cc52 = h100_with(t, "cc52.toml", {{"compute_capability", "compute_capability = \"5.2\""}});
  const auto r = run_cli("scale --trace " + chrome + " --from v100 --to '" + cc52 + "' --predictor roofline");
  CHECK(r.code == 1);
  CHECK(r.err.find("cc52.toml: unsupported compute capability '5.2' (known: 6.0") != std::string::npos);
}

// ... and says so, once per GPU, naming the file's compute_capability line and the cc whose rules it borrows; a cc
// the table has says nothing.
TEST_CASE("scale: a compute capability the occupancy table lacks is warned about once per GPU", "[cli][scale]") {
  ns_test::temp_dir t;
  const std::string cc97 = h100_with(t, "cc97.toml", {{"compute_capability", "compute_capability = \"9.7\""}});
  const std::string text = ns_test::slurp(cc97);
  const auto at = text.find("\ncompute_capability = ");
  REQUIRE(at != std::string::npos);
  const std::string line = std::to_string(std::count(text.begin(), text.begin() + long(at) + 1, '\n') + 1);
  const std::string want = "gpu 'H100-WHATIF' (" + cc97 + ":" + line + ":1): compute capability 9.7 is not in the "
                           "occupancy table; its allocation rules (register and shared-memory allocation units, "
                           "shared-memory carve-outs) are taken from cc 9.0, its sizes from its file";
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  auto r = run_cli("scale --trace " + chrome + " --from v100 --to '" + cc97 + "' --predictor roofline --format json");
  REQUIRE(r.code == 0);
  CHECK(count(r.err, "neusight: warning: " + want + "\n") == 1);
  CHECK(json::parse(r.out)["warnings"].dump().find(json(want).dump()) != std::string::npos);
  // to and from the same file: one GPU, one warning
  const std::string own = tiny_on(t, "H100-WHATIF");
  r = run_cli("scale --trace '" + own + "' --from '" + cc97 + "' --to '" + cc97 + "' --predictor roofline");
  REQUIRE(r.code == 0);
  CHECK(count(r.err, want) == 1);
  // above every cc of the table: the highest one's rules
  const std::string cc13 = h100_with(t, "cc13.toml", {{"compute_capability", "compute_capability = \"13.0\""}});
  r = run_cli("scale --trace " + chrome + " --from v100 --to '" + cc13 + "' --predictor roofline");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("compute capability 13.0 is not in the occupancy table; its allocation rules (register and "
                   "shared-memory allocation units, shared-memory carve-outs) are taken from cc 12.0") !=
        std::string::npos);
  // a cc the table has (the H100's own 9.0 in a copy): no such warning
  const std::string cc90 = h100_with(t, "cc90.toml", {});
  r = run_cli("scale --trace " + chrome + " --from v100 --to '" + cc90 + "' --predictor roofline --format json");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("occupancy table") == std::string::npos);
  CHECK(json::parse(r.out)["warnings"].dump().find("occupancy table") == std::string::npos);
}

// GPU time no op carries is never dropped from the totals unsaid: the profiler's memory copies and sets (gpu_memcpy,
// gpu_memset: no kernels) and kernels no op launched (the tiny trace's NCCL kernel) are counted with their time in a
// warning and JSON `not_scaled`. The real H200 Llama trace holds 5 copies and 17 sets.
TEST_CASE("scale: memory copies and kernels no op launched are reported with their time", "[cli][scale]") {
  ns_test::temp_dir t;
  const std::string copy = tiny_edit(
      t, "copy.json", {{R"({"ph": "i", "cat": "instant")",
                        R"x({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, )x"
                        R"x("tid": 7, "ts": 450, "dur": 4.0, "args": {"device": 0, "bytes": 8388608}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 460, "dur": 1.0, "args": {}},
    {"ph": "i", "cat": "instant")x"}});
  const json j = scale_trace(copy, "--from v100 --to v100");
  REQUIRE(j.contains("not_scaled"));
  CHECK(j["not_scaled"]["copies"] == 2);
  CHECK(double(j["not_scaled"]["copies_ms"]) == Approx(0.005).epsilon(1e-9));
  CHECK(j["not_scaled"]["unattributed_kernels"] == 1);
  CHECK(double(j["not_scaled"]["unattributed_ms"]) == Approx(0.005).epsilon(1e-9));
  const std::string w = j["warnings"].dump();
  CHECK(w.find("copy.json: 2 memory copies and sets (gpu_memcpy, gpu_memset: 0.0050 ms) are no kernels: not scaled "
               "and not in origin_ms or latency_ms") != std::string::npos);
  CHECK(w.find("copy.json: 1 kernel launched by no op (0.0050 ms: collectives") != std::string::npos);
  CHECK(w.find("kernels outside the profiled ops) was not scaled and is not in origin_ms") != std::string::npos);
  const json llama = scale_trace("tests/fixtures/traces/hf/llama-bf16-train.json", "--to h200");
  CHECK(llama["not_scaled"]["copies"] == 22);
  CHECK(double(llama["not_scaled"]["copies_ms"]) > 0);
}

// A wave-scaled op whose kernels are collectives or an attention library's (scale.lua wave_unpriced) is said with its
// time: the wave rule moves it by the memory bandwidth, which prices neither (audit27: both were scaled silently).
TEST_CASE("scale: collective and attention kernels the wave rule moves are warned of with their time", "[cli][scale]") {
  ns_test::temp_dir t;
  const std::string nccl = tiny_edit(t, "nccl.json", {{"\"aten::add\"", "\"record_param_comms\""},
                                                      {"\"elementwise_add\"", "\"ncclDevKernel_AllReduce_Sum_f32_RING_LL\""}});
  const json n = scale_trace(nccl, "--from v100 --to h100");
  const std::string wn = n["warnings"].dump();
  INFO(wn);
  CHECK(wn.find("nccl.json: 1 wave-scaled op (0.0010 ms, e.g. 'record_param_comms') launched collective (NCCL) "
                "kernels") != std::string::npos);
  CHECK(wn.find("speed: wave scaling moves it by the memory bandwidth ratio (or keeps it under one wave), which does "
                "not price it") != std::string::npos);
  const std::string flash = tiny_edit(t, "flash.json", {{"\"aten::add\"", "\"flash_attn::_flash_attn_forward\""},
                                                        {"\"elementwise_add\"", "\"flash_fwd_kernel\""}});
  const std::string wf = scale_trace(flash, "--from v100 --to h100")["warnings"].dump();
  INFO(wf);
  CHECK(wf.find("launched attention kernels (FlashAttention)") != std::string::npos);
  // the ratio rule's attention (torch SDPA's flash and memory-efficient kernels) and plain wave ops say nothing
  for (const char* f : {"gpt2-fp32-train", "llama-bf16-train", "mixtral-bf16-inference"}) {
    INFO(f);
    const std::string w = scale_trace(std::string("tests/fixtures/traces/hf/") + f + ".json", "--to h100")["warnings"].dump();
    CHECK(w.find("wave-scaled op") == std::string::npos);
  }
  CHECK(scale_trace(chrome, "--from v100 --to h100")["warnings"].dump().find("wave-scaled op") == std::string::npos);
}

// Which rule moved which share of the origin's time: JSON `rules` (ops, origin_ms, share per method) and the table's
// `rules` line; the shares sum to 1.
TEST_CASE("scale: the share of the origin's time each rule moved is reported", "[cli][scale]") {
  const json j = scale_trace("tests/fixtures/traces/hf/gpt2-fp32-train.json", "--to h100");
  REQUIRE(j.contains("rules"));
  double share = 0, ms = 0;
  size_t ops = 0;
  for (const auto& [rule, r] : j["rules"].items()) {
    INFO(rule);
    CHECK((rule == "ratio" || rule == "wave" || rule == "keep"));
    share += double(r["share"]), ms += double(r["origin_ms"]), ops += size_t(r["ops"]);
  }
  CHECK(share == Approx(1.0).epsilon(1e-9));
  CHECK(ms == Approx(double(j["origin_ms"])).epsilon(1e-9));
  CHECK(ops == j["ops"].size());
  CHECK(double(j["rules"]["ratio"]["share"]) > 0.3);  // GEMMs and attention, forward and backward
  CHECK(double(j["rules"]["wave"]["share"]) > 0.1);   // the AdamW step and the element-wise ops
  const auto r = run_cli("scale --trace tests/fixtures/traces/hf/gpt2-fp32-train.json --to h100");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\nrules          ratio ") != std::string::npos);
  CHECK(r.out.find("(share of the origin's time each moved)") != std::string::npos);
}

// The ratio is of the predictor's forecasts on both GPUs: a GPU beyond its training data (the H200 the fixtures were
// recorded on, a B200) is warned of as predict warns of it; scaling between training GPUs says nothing of it.
TEST_CASE("scale: a GPU outside the predictor's data is warned of", "[cli][scale]") {
  const json j = scale_trace("tests/fixtures/traces/hf/llama-bf16-decode.json", "--to b200");
  const std::string w = j["warnings"].dump();
  CHECK(w.find("B200 is out of distribution for the ") != std::string::npos);
  CHECK(w.find("H200-SXM-141GB is out of distribution for the ") != std::string::npos);
  CHECK(scale_trace(chrome, "--from v100 --to a100_pcie_40gb")["warnings"].dump().find("out of distribution") ==
        std::string::npos);
}

// A gzip-compressed trace (torch.profiler writes *.json.gz when asked) is named as such, not read as a CSV.
TEST_CASE("scale: a gzip-compressed trace is a clear error", "[cli][scale]") {
  ns_test::temp_dir t;
  const auto gz = t.write("trace.json.gz", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8) + "junk");
  const auto r = run_cli("scale --trace '" + gz.string() + "' --to h100");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("trace.json.gz: a gzip-compressed file: decompress it first (zcat ") != std::string::npos);
}

// A label CSV without a column it reads is named at its header line, with the columns a label CSV has — not with a
// did-you-mean of a column that is there for another purpose ('input_shapes' for a missing 'output_shape').
TEST_CASE("scale: a label CSV with a missing column names the file and header line", "[cli][scale]") {
  ns_test::temp_dir t;
  const auto csv = t.write("label/Tesla_V100-PCIE-32GB/x.csv",
                           "op,target,input_shapes,latency,fw_latency,bw_latency,acc_latency,Name\n"
                           "call_function,add,\"[(4, 8)]\",0.1,0.1,0,0,add\n");
  const auto r = run_cli("scale --trace '" + csv.string() + "' --to h100 --graph /dev/null");
  CHECK(r.code == 1);
  CHECK(r.err.find("x.csv:1: missing column 'output_shape' (a label CSV has the columns Name, input_shapes, "
                   "output_shape, fw_latency, bw_latency and acc_latency)") != std::string::npos);
  CHECK(r.err.find("did you mean") == std::string::npos);
}

// A label CSV's ops kept as measured (no GPU kernels, getitem: scale.lua host_ops) say so: method "keep" (they said
// "ratio"), and the rules' shares count them apart.
TEST_CASE("scale: label ops kept as measured say method keep", "[cli][scale]") {
  const json j = scale_json("--from 'Tesla T4' --to 'NVIDIA A100-PCIE-40GB'");
  size_t kept = 0, ratio = 0;
  for (const auto& op : j["ops"]) {
    INFO(op.dump());
    const bool host = op["op"] == "getitem" || !(double(op["predicted_from_ms"]) > 0);
    CHECK(op["method"] == (host ? "keep" : "ratio"));
    (host ? kept : ratio) += 1;
  }
  CHECK(kept > 0);
  CHECK(ratio > 20);
  CHECK(j["rules"]["keep"]["ops"] == kept);
  CHECK(j["rules"]["ratio"]["ops"] == ratio);
}

// A trace with ProfilerStep# ranges whose ops with kernels start outside every one of them (a second iteration or a
// warm-up the profiler did not mark) holds more than the steps it counts: said, with the ops' time (it was summed
// into the totals unsaid).
TEST_CASE("scale: ops outside every ProfilerStep range are warned of", "[cli][scale]") {
  ns_test::temp_dir t;
  const std::string cut = tiny_edit(t, "cut.json", {{R"("name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000)",
                                                     R"("name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100)"}});
  const std::string w = scale_trace(cut, "--from v100 --to v100")["warnings"].dump();
  CHECK(w.find("cut.json: 1 op with kernels (0.0030 ms) starts outside every ProfilerStep# range") != std::string::npos);
  CHECK(w.find("it is in the totals, which count 1 step") != std::string::npos);
  CHECK(scale_trace(chrome, "--from v100 --to v100")["warnings"].dump().find("ProfilerStep# range") == std::string::npos);
}

// A Chrome trace none of whose kernels an op it records launched (the collector's H200 traces keep no cpu_op; a trace
// recorded without CPU activity) has no op time to scale: it was a 0 ms forecast with exit code 0.
TEST_CASE("scale: a trace whose kernels no recorded op launched is refused", "[cli][scale]") {
  const auto r = run_cli("scale --trace tests/fixtures/collect_h200/run1/trace-000.json --to h100 --format json");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("trace-000.json: none of its 45 kernels (3.9148 ms) was launched by an op it records (no cpu_op "
                   "with the kernel's 'External id'") != std::string::npos);
}

// tests/bench/scale_pairs.sh dropped a pair whose `scale` or `predict` failed (`|| continue`, stderr to /dev/null): a
// shorter table read as a full one. A pair to a GPU no gpus/*.toml knows fails `scale`: stderr names it with scale's
// error, the scored pair stays a row, and the table's last line counts both.
TEST_CASE("scale: tests/bench/scale_pairs.sh names and counts the pairs it skips", "[cli][scale]") {
  namespace fs = std::filesystem;
  ns_test::temp_dir t;
  const fs::path data = t.path / "data";
  fs::copy(ns_test::source_dir / "tests/fixtures/neusight", data, fs::copy_options::recursive);
  const std::string tag = "gpt2_large-inf-1024-4";
  fs::create_directories(data / "label/No_Such_GPU");
  fs::copy_file(data / "label/NVIDIA_A100-PCIE-40GB" / (tag + ".json"), data / "label/No_Such_GPU" / (tag + ".json"));
  const auto r = ns_test::run_sh("NEUSIGHT='" NEUSIGHT_EXE "' bash tests/bench/scale_pairs.sh " + ns_test::quoted(data.string()));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("| T4 | A100-PCIE-40GB | " + tag + " |"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 5);  // header, rule, one row, blank, count
  CHECK_THAT(r.out, Catch::EndsWith("\npairs: 1 scored, 1 skipped (scale or predict failed: stderr names each)\n"));
  CHECK_THAT(r.err, Catch::StartsWith("scale_pairs.sh: skipped Tesla_T4 -> No_Such_GPU " + tag + ": scale failed: "));
  CHECK_THAT(r.err, Catch::Contains("No_Such_GPU"));
  CHECK_THAT(r.err, Catch::EndsWith("scale_pairs.sh: 1 of 2 pairs skipped\n"));
}
