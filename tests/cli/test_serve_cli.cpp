// tests/cli/test_serve_cli.cpp — `--launch eager|graph` and `neusight serve` end to end: the launch rule touches only
// the vector kernels, a static batch is made of the predict phases it names, the continuous-batching simulation at a
// trickle of requests is one request's prefill and decode, throughput saturates, seeds reproduce, bad inputs fail.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;
using ns_test::warnings_with;

namespace {

json decode(int batch, int context, const std::string& extra = "") {
  return run_json("predict --model llama3_8b --gpu h100 --mode decode --dtype bf16 --batch " + std::to_string(batch) +
                  " --context " + std::to_string(context) + " " + extra);
}

json prefill(int batch, int seq, const std::string& extra = "") {
  return run_json("predict --model llama3_8b --gpu h100 --mode prefill --dtype bf16 --batch " + std::to_string(batch) +
                  " --seq " + std::to_string(seq) + " " + extra);
}

json serve(const std::string& args) { return run_json("serve --model llama3_8b --gpu h100 " + args); }

// serve's kernels at every tp, Megatron-LM's fused set (what vLLM and SGLang run): predict's phases of the same
// workload take --kernels megatron (predict's one-GPU default is HF's eager graph)
const std::string served = " --kernels megatron";

const std::set<std::string> vector_kinds = {"elementwise", "softmax", "layernorm"};

}  // namespace

TEST_CASE("launch: graph replay is faster than eager for decode, by the vector kernels' overhead only",
          "[cli][serve][launch]") {
  const json eager = decode(8, 2048, "--launch eager");
  const json graph = decode(8, 2048, "--launch graph");
  CHECK(eager["launch"] == "eager");
  CHECK(graph["launch"] == "graph");
  const double e = eager["latency_ms"], g = graph["latency_ms"];
  CHECK(g < e);
  CHECK(g < 0.6 * e);  // most of an eager decode step is ~1 000 element-wise kernels at their ≈ 25 µs floor
  REQUIRE(eager["ops"].size() == graph["ops"].size());
  double vector_overhead = 0;
  for (size_t i = 0; i < eager["ops"].size(); ++i) {
    const json& a = eager["ops"][i];
    const json& b = graph["ops"][i];
    REQUIRE(a["name"] == b["name"]);
    const double ea = a["ms"], gb = b["ms"];
    if (vector_kinds.count(a["kind"].get<std::string>())) {
      CHECK(gb <= ea);
      if (ea > 0) CHECK(gb >= 2e-3 * a["count"].get<double>() * (1 - 1e-12));  // the 2 µs graph floor per launch
      vector_overhead += ea - gb;
    } else {
      INFO(a["name"] << " " << a["kind"]);
      CHECK(gb == ea);  // GEMMs, attention, copies, collectives: unchanged
    }
  }
  CHECK(e - g == Approx(vector_overhead).epsilon(1e-9));
}

TEST_CASE("launch: eager is the default and does not move any number", "[cli][serve][launch]") {
  const json plain = decode(8, 2048);
  const json eager = decode(8, 2048, "--launch eager");
  CHECK(plain["launch"] == "eager");
  CHECK(plain["latency_ms"] == eager["latency_ms"]);
  CHECK(plain["ops"] == eager["ops"]);
  // training and inference reports say nothing of the launch mode unless asked for graphs
  const json inf = run_json("predict --model gpt2_large --gpu A100-PCIE-40GB --mode inference --batch 1 --seq 128");
  CHECK_FALSE(inf.contains("launch"));
  const auto clash = run_cli("predict --model gpt2_large --gpu A100-PCIE-40GB --mode inference --batch 1 --seq 128 "
                             "--launch graph --overhead on");
  CHECK(clash.code == 1);
  CHECK(clash.err.find("--overhead on and --launch graph exclude each other: a CUDA-graph replay runs") !=
        std::string::npos);
  // on AMD the vendor's word (scripts/neusight/launch.lua graph_name), not "CUDA graph"
  const auto amd = run_cli("predict --model gpt2_large --gpu mi210 --mode inference --batch 1 --seq 128 "
                           "--launch graph --overhead on");
  INFO(amd.err);
  CHECK(amd.code == 1);
  CHECK(amd.err.find("exclude each other: a HIP-graph (hipGraph) replay runs") != std::string::npos);
  CHECK(amd.err.find("CUDA") == std::string::npos);
}

TEST_CASE("launch: prefill under graphs keeps its large kernels and is never slower", "[cli][serve][launch]") {
  const json eager = prefill(8, 2048, "--launch eager");
  const json graph = prefill(8, 2048, "--launch graph");
  CHECK(graph["latency_ms"].get<double>() <= eager["latency_ms"].get<double>());
  CHECK(graph["latency_ms"].get<double>() > 0.95 * eager["latency_ms"].get<double>());
}

TEST_CASE("serve: a static batch is the prefill and decode forecasts it comes from", "[cli][serve]") {
  for (const std::string launch : {"graph", "eager"}) {
    INFO(launch);
    const std::string l = "--launch " + launch;
    const json s = serve("--batch 4 --input-len 512 --output-len 6 " + l);
    CHECK(s["kind"] == "static");
    CHECK(s["launch"] == launch);
    const json pre = prefill(4, 512, l + served);
    CHECK(s["ttft_ms"].get<double>() == Approx(pre["latency_ms"].get<double>()).epsilon(1e-12));
    double sum = 0;
    for (int c = 512; c <= 512 + 6 - 2; ++c) sum += decode(4, c, l + served)["latency_ms"].get<double>();
    CHECK(s["decode_steps"] == 5);
    CHECK(s["tpot_ms"].get<double>() == Approx(sum / 5).epsilon(1e-12));
    CHECK(s["e2e_ms"].get<double>() == Approx(pre["latency_ms"].get<double>() + sum).epsilon(1e-12));
    CHECK(s["output_tokens_per_s_per_gpu"].get<double>() == Approx(4 * 6 / (s["e2e_ms"].get<double>() / 1e3)));
    CHECK(s["weights_gb"].get<double>() == Approx(pre["state_gb"].get<double>()));
    // the KV cache at the end: 517 tokens per sequence, pro rata of the prefill's 512
    CHECK(s["kv_cache_gb"].get<double>() == Approx(pre["kv_cache_gb"].get<double>() * 517 / 512));
    CHECK(s["fits"] == true);
  }
}

// Issue 13: serving engines (vLLM, SGLang, TensorRT-LLM) run fused RMSNorm, rotary and SiLU-and-mul and one QKV and
// one gate-up GEMM at every tp — Megatron-LM's kernel set, which serve priced at tp > 1 only: tp 1 took HF's eager
// graph (13-20 % slower) and a --tp 1,2 sweep mixed the two. --kernels eager keeps HF's (transformers' generate).
TEST_CASE("serve: tp 1 prices the fused kernels tp 2 does - predict --kernels megatron - and --kernels eager HF's",
          "[cli][serve][kernels]") {
  const std::string run = "--batch 4 --input-len 512 --output-len 2 ";  // TPOT: one decode step at context 512
  const json one = serve(run);
  const json two = serve(run + "--tp 2");
  CHECK(one["kernels"] == "megatron");
  CHECK(two["kernels"] == "megatron");
  const json pre = prefill(4, 512, "--launch graph" + served);
  const json dec = decode(4, 512, "--launch graph" + served);
  CHECK(one["ttft_ms"].get<double>() == Approx(pre["latency_ms"].get<double>()).epsilon(1e-12));
  CHECK(one["tpot_ms"].get<double>() == Approx(dec["latency_ms"].get<double>()).epsilon(1e-12));
  // the fused set: one QKV GEMM and one gate-up GEMM where HF's graph has three and two
  std::set<std::string> names;
  for (const json& op : dec["ops"]) names.insert(op["name"].get<std::string>());
  CHECK(names.count("layers.self_attn.qkv_proj") == 1);
  CHECK(names.count("layers.mlp.gate_up_proj") == 1);
  CHECK(names.count("layers.self_attn.q_proj") == 0);
  // HF's eager graph (predict's one-GPU default) is slower, and --kernels eager is it, at tp 1 and at tp 2
  const json hf_pre = prefill(4, 512, "--launch graph"), hf_dec = decode(4, 512, "--launch graph");
  CHECK(one["tpot_ms"].get<double>() < hf_dec["latency_ms"].get<double>());
  CHECK(one["ttft_ms"].get<double>() < hf_pre["latency_ms"].get<double>());
  const json eager = serve(run + "--kernels eager");
  CHECK(eager["kernels"] == "eager");
  CHECK(eager["ttft_ms"].get<double>() == Approx(hf_pre["latency_ms"].get<double>()).epsilon(1e-12));
  CHECK(eager["tpot_ms"].get<double>() == Approx(hf_dec["latency_ms"].get<double>()).epsilon(1e-12));
  CHECK(serve(run + "--tp 2 --kernels eager")["tpot_ms"].get<double>() ==
        Approx(decode(4, 512, "--launch graph --tp 2 --kernels eager")["latency_ms"].get<double>()).epsilon(1e-12));
  // the table's header and --help say it; a misspelt set is refused with predict's names
  const auto table = run_cli("serve --model llama3_8b --gpu h100 " + run);
  CHECK(table.out.find("launch graph, kernels megatron, predictor neusight") != std::string::npos);
  CHECK(run_cli("serve --help").out.find("--kernels") != std::string::npos);
  const auto bad = run_cli("serve --model llama3_8b --gpu h100 " + run + "--kernels megatorn");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("serve: --kernels: \"megatron\" or \"eager\" expected, got \"megatorn\" (did you mean "
                     "'megatron'?)") != std::string::npos);
  // a sweep over tp 1 and 2 runs one kernel set, and says it
  const json sweep = run_json("serve --model llama3_8b --gpu h100 --sweep --tp 1,2 " + run);
  CHECK(sweep["kernels"] == "megatron");
  for (const json& row : sweep["rows"]) CHECK(row["kernels"] == "megatron");  // each row's, as a comparison's
  CHECK(sweep["rows"][0]["tpot_ms"].get<double>() == Approx(one["tpot_ms"].get<double>()).epsilon(1e-12));
  CHECK(sweep["rows"][1]["tpot_ms"].get<double>() == Approx(two["tpot_ms"].get<double>()).epsilon(1e-12));
  CHECK(run_cli("serve --model llama3_8b --gpu h100 --sweep --tp 1,2 --format csv " + run).out.find(",gpus,kernels,") !=
        std::string::npos);
}

// Issue 13: OPT is a decoder-only model with a KV cache (vLLM serves it), but its builder had no prefill or decode
// phase and serve refused it. Both kernel sets: serve's default (megatron: one q/k/v GEMM as vLLM's QKVParallelLinear,
// the rest HF's modules, scripts/neusight/models/opt.lua) and HF's eager graph (three q/k/v GEMMs); each phase is
// predict's, the KV cache 2 · 24 layers · 32 heads · 64 · 2 bytes per token, a decode step one DecodeAttention per
// layer over C + 1 tokens.
TEST_CASE("serve: OPT runs - its static batch is predict's prefill and decode - eager and serving kernels",
          "[cli][serve][opt]") {
  const double per_token = 2.0 * 24 * 32 * 64 * 2 / 1e9;  // GB per cached token and sequence
  for (const std::string kernels : {"megatron", "eager"}) {
    INFO(kernels);
    const std::string k = " --kernels " + kernels;
    const json s = run_json("serve --model opt_13 --gpu h100 --batch 4 --input-len 512 --output-len 3" +
                            (kernels == "eager" ? k : std::string()));
    CHECK(s["kind"] == "static");
    CHECK(s["kernels"] == kernels);
    const std::string predict = "predict --model opt_13 --gpu h100 --dtype bf16 --batch 4 --launch graph" + k;
    const json pre = run_json(predict + " --mode prefill --seq 512");
    const json d512 = run_json(predict + " --mode decode --context 512");
    const json d513 = run_json(predict + " --mode decode --context 513");
    CHECK(s["ttft_ms"].get<double>() == Approx(pre["latency_ms"].get<double>()).epsilon(1e-12));
    CHECK(s["tpot_ms"].get<double>() ==
          Approx((d512["latency_ms"].get<double>() + d513["latency_ms"].get<double>()) / 2).epsilon(1e-12));
    CHECK(pre["kv_cache_gb"].get<double>() == Approx(4 * 512 * per_token).epsilon(1e-12));
    CHECK(d512["kv_cache_gb"].get<double>() == Approx(4 * 513 * per_token).epsilon(1e-12));
    int decoders = 0;
    for (const json& op : d512["ops"])
      if (op["kernel"] == "DecodeAttention") {
        decoders += op["count"].get<int>();
        CHECK(op["dims"]["heads"] == 32);
        CHECK(op["dims"]["kv_heads"] == 32);
      }
    CHECK(decoders == 24);
    for (const json* phase : {&pre, &d512}) {  // the q/k/v projections: their Linear kernels, one of each per layer
      std::string qkv;
      for (const json& op : (*phase)["ops"]) {
        const std::string name = op["name"];
        if (name.find("layers.self_attn.") == 0 && name.size() > 5 && name.substr(name.size() - 5) == "_proj" &&
            name != "layers.self_attn.out_proj") {
          CHECK(op["kernel"] == "Linear");
          CHECK(op["count"] == 24);
          qkv += (qkv.empty() ? "" : " ") + name.substr(17);
        }
      }
      CHECK(qkv == (kernels == "megatron" ? "qkv_proj" : "q_proj k_proj v_proj"));
    }
  }
  // under load too, and the learned position table bounds a request (input + output - 1 positions)
  const json rate = run_json("serve --model opt_13 --gpu h100 --rate 5 --requests 40 --input-len 256 --output-len 32");
  CHECK(rate["kind"] == "simulation");
  CHECK(rate["ttft_ms"]["p50"].get<double>() > 0);
  const auto long_req = run_cli("serve --model opt_13 --gpu h100 --batch 1 --input-len 2000 --output-len 64");
  CHECK(long_req.code == 1);
  CHECK(long_req.err.find("opt model 'opt_13': context 2062 + 1 new token exceeds max_position_embeddings 2048") !=
        std::string::npos);
}

TEST_CASE("serve: the report carries the model's parameters as predict counts them", "[cli][serve]") {
  const double params = prefill(1, 512)["params"];
  CHECK(params == 8030261248.0);  // Llama-3.1-8B, HuggingFace's count
  CHECK(serve("--batch 1 --input-len 512 --output-len 8")["params"].get<double>() == params);
  CHECK(serve("--rate 1 --requests 10 --input-len 512 --output-len 8")["params"].get<double>() == params);
  CHECK(!serve("--batch 1 --input-len 512 --output-len 8").contains("active_params"));  // dense: every parameter
  SECTION("a mixture of experts: the active parameters too, as predict counts them") {
    const json p = run_json("predict --model mixtral_8x7b --gpu h200 --mode decode --batch 1 --context 512");
    const json s = run_json("serve --model mixtral_8x7b --gpu h200 --batch 1 --input-len 512 --output-len 4");
    REQUIRE(p.contains("active_params"));
    CHECK(s["active_params"].get<double>() == p["active_params"].get<double>());
    CHECK(s["active_params"].get<double>() < s["params"].get<double>());
  }
}

TEST_CASE("serve: static batch memory: the largest concurrency that fits", "[cli][serve]") {
  const json s = serve("--batch 8 --input-len 2048 --output-len 128");
  const double per_token = s["kv_cache_gb_per_token"];
  CHECK(per_token == Approx(2.0 * 32 * 8 * 128 * 2 / 1e9));  // K and V, 32 layers, 8 kv heads of 128, bf16
  // 0.9 of the memory the H100 reports (its file's mem_reported_gib, 79.1 GiB), as vLLM budgets it (tester7 P1)
  const double budget = 0.9 * s["gpu_mem_reported_gib"].get<double>() * 1073741824 / 1e9 - s["weights_gb"].get<double>();
  CHECK(s["kv_budget_gb"].get<double>() == Approx(budget));
  CHECK(s["memory_budget_gb"].get<double>() == Approx(0.9 * 79.1 * 1073741824 / 1e9));
  const int blocks_per_seq = (2048 + 128 - 1 + 15) / 16;
  const int most = s["max_concurrency"];
  CHECK(most == int(s["kv_blocks"].get<int>() / blocks_per_seq));
  CHECK(most * blocks_per_seq * 16 * per_token <= budget);
  CHECK((most + 1) * blocks_per_seq * 16 * per_token > budget);
  // a batch beyond it is reported, not refused
  const json big = serve("--batch " + std::to_string(most + 1) + " --input-len 2048 --output-len 128");
  CHECK(big["fits"] == false);
  // one, beside the out-of-distribution one (H100 is not a training GPU)
  CHECK(warnings_with(big["warnings"], "does not fit") == 1);
  CHECK(big["warnings"].size() == s["warnings"].size() + 1);
  // tensor parallelism halves the KV cache and the weights per GPU
  const json tp2 = serve("--batch 8 --input-len 2048 --output-len 128 --tp 2");
  CHECK(tp2["kv_cache_gb"].get<double>() == Approx(s["kv_cache_gb"].get<double>() / 2));
  CHECK(tp2["max_concurrency"].get<int>() > 2 * most);
  CHECK(tp2["tpot_ms"].get<double>() < s["tpot_ms"].get<double>());
}

TEST_CASE("serve: at a trickle of requests each is served alone: TTFT = prefill(1), TPOT = decode(1)", "[cli][serve]") {
  const json s = serve("--rate 0.01 --requests 20 --input-len 512 --output-len 64");
  CHECK(s["kind"] == "simulation");
  CHECK(s["max_running"] == 1);
  CHECK(s["mean_decode_batch"] == 1.0);
  const double pre = prefill(1, 512, "--launch graph" + served)["latency_ms"];
  CHECK(s["ttft_ms"]["p50"].get<double>() == Approx(pre).epsilon(1e-9));
  CHECK(s["ttft_ms"]["p99"].get<double>() == Approx(pre).epsilon(1e-9));
  // decode contexts 512 … 574, interpolated between forecasts at 512 and 574: within 1 % of the middle one
  const double mid = decode(1, 543, "--launch graph" + served)["latency_ms"];
  CHECK(s["tpot_ms"]["p50"].get<double>() == Approx(mid).epsilon(0.01));
  CHECK(s["tpot_ms"]["p99"].get<double>() == Approx(mid).epsilon(0.01));
  CHECK(s["e2e_ms"]["p50"].get<double>() == Approx(pre + 63 * s["tpot_ms"]["p50"].get<double>()).epsilon(1e-9));
  // a fixed prompt length off the powers of two is a grid point of its own: exact too (300 tokens was interpolated
  // between 256 and 512, 4.3 % below the prefill)
  const json odd = serve("--rate 0.01 --requests 5 --input-len 300 --output-len 16");
  CHECK(odd["ttft_ms"]["p50"].get<double>() ==
        Approx(prefill(1, 300, "--launch graph" + served)["latency_ms"]).epsilon(1e-9));
}

// The band under load (serve.lua): the same arrivals replayed with every prefill and decode step at its p10 / p90
// time. At a trickle each request is alone, so its TTFT is the prefill's own band and its TPOT scales by the decode
// step's factor.
TEST_CASE("serve: the rate simulation's band replays the steps at their p10 and p90 times", "[cli][serve][band]") {
  const json s = serve("--rate 0.01 --requests 20 --input-len 512 --output-len 64");
  REQUIRE(s.contains("band"));
  const json pre = prefill(1, 512, "--launch graph" + served);
  const json& lo = s["band"]["p10"];
  const json& hi = s["band"]["p90"];
  CHECK(lo["ttft_ms"]["p50"].get<double>() == Approx(pre["latency_ms_p10"].get<double>()).epsilon(1e-9));
  CHECK(hi["ttft_ms"]["p50"].get<double>() == Approx(pre["latency_ms_p90"].get<double>()).epsilon(1e-9));
  CHECK(lo["tpot_ms"]["p50"].get<double>() ==
        Approx(s["tpot_ms"]["p50"].get<double>() * lo["decode_step_factor"].get<double>()).epsilon(1e-9));
  CHECK(lo["decode_step_factor"].get<double>() < 1);
  CHECK(hi["decode_step_factor"].get<double>() > 1);
  CHECK(s["band"]["spread"].get<double>() == pre["figures"]["band_spread"].get<double>());  // the table's width factor
  // under load: slower steps queue more
  const json busy = serve("--rate 40 --requests 400 --input-len 512 --output-len 128");
  REQUIRE(busy.contains("band"));
  CHECK(busy["band"]["p10"]["ttft_ms"]["p90"].get<double>() <= busy["ttft_ms"]["p90"].get<double>());
  CHECK(busy["band"]["p90"]["ttft_ms"]["p90"].get<double>() >= busy["ttft_ms"]["p90"].get<double>());
  CHECK(busy["band"]["p90"]["tpot_ms"]["p50"].get<double>() > busy["tpot_ms"]["p50"].get<double>());
  // a predictor without an error table: no band
  CHECK_FALSE(serve("--rate 1 --requests 20 --input-len 512 --output-len 64 --predictor roofline").contains("band"));
}

TEST_CASE("serve: throughput grows with the rate until the GPU saturates", "[cli][serve]") {
  const std::string base = "--requests 600 --input-len 512 --output-len 128 --rate ";
  std::vector<double> tput, offered;
  for (double rate : {1.0, 4.0, 16.0, 64.0, 1000.0, 4000.0}) {
    const json s = serve(base + std::to_string(rate));
    tput.push_back(s["throughput"]["output_tokens_per_s_per_gpu"]);
    offered.push_back(rate * 128);
  }
  for (size_t i = 0; i + 1 < tput.size(); ++i) CHECK(tput[i + 1] >= tput[i] * 0.98);
  CHECK(tput[0] == Approx(offered[0]).epsilon(0.25));  // below saturation, it serves what arrives
  CHECK(tput[2] > 3 * tput[0]);
  CHECK(tput.back() < 0.5 * offered.back());                      // saturated: far below the offered load
  CHECK(tput.back() == Approx(tput[tput.size() - 2]).epsilon(0.1));  // and flat
}

TEST_CASE("serve: chunked prefill and length distributions run — the same seed gives the same result", "[cli][serve]") {
  const std::string args = "--rate 20 --requests 300 --input-len uniform:128:1024 --output-len uniform:16:256 "
                           "--chunked-prefill 512 --seed 7";
  const auto a = run_cli("serve --model llama3_8b --gpu h100 " + args + " --format json");
  const auto b = run_cli("serve --model llama3_8b --gpu h100 " + args + " --format json");
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  const json j = json::parse(a.out);
  CHECK(j["chunked_prefill"] == 512);
  CHECK(j["steps"]["mixed"].get<int>() > 0);
  CHECK(j["input_len_mean"].get<double>() > 128);
  CHECK(j["input_len_mean"].get<double>() < 1024);
  const json other = serve("--rate 20 --requests 300 --input-len uniform:128:1024 --output-len uniform:16:256 "
                           "--chunked-prefill 512 --seed 8");
  CHECK(other["ttft_ms"]["mean"] != j["ttft_ms"]["mean"]);
  // the TTFT percentiles are ordered
  CHECK(j["ttft_ms"]["p50"].get<double>() <= j["ttft_ms"]["p90"].get<double>());
  CHECK(j["ttft_ms"]["p90"].get<double>() <= j["ttft_ms"]["p99"].get<double>());
}

TEST_CASE("serve: memory pressure preempts and still finishes every request", "[cli][serve]") {
  const json s = serve("--rate 1000 --requests 200 --input-len 1024 --output-len 1024 --gpu-memory-utilization 0.25");
  CHECK(s["preemptions"].get<int>() > 0);
  CHECK(s["e2e_ms"]["count"] == 200);
}

TEST_CASE("serve: CSV and table carry the report's numbers", "[cli][serve]") {
  const std::string args = "serve --model llama3_8b --gpu h100 --rate 2 --requests 50 --input-len 1024 --output-len 32";
  const json j = run_json(args);
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.rfind("field,value\n", 0) == 0);
  char line[128];
  std::snprintf(line, sizeof line, "\nttft_ms.p99,%s\n", j["ttft_ms"]["p99"].dump().c_str());
  CHECK(csv.out.find(line) != std::string::npos);
  CHECK(csv.out.find("\nthroughput.output_tokens_per_s_per_gpu,") != std::string::npos);
  CHECK(csv.out.find("\nphases.decode.roofline_ms.weights,") != std::string::npos);
  const auto table = run_cli(args);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("TTFT ms") != std::string::npos);
  CHECK(table.out.find("bound: weights") != std::string::npos);  // decode at batch 1 streams the weights
  CHECK(table.out.find("bound: compute") != std::string::npos);  // a 1024-token prefill is compute-bound
  CHECK(j["phases"]["decode"]["bound"] == "weights");
}

TEST_CASE("serve: bad inputs are clear errors", "[cli][serve]") {
  auto fails = [](const std::string& args, const std::string& message) {
    const auto r = run_cli("serve --model llama3_8b --gpu h100 " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("neusight: serve: " + message, 0) == 0);
  };
  fails("--rate 0 --input-len 128 --output-len 16", "--rate must be a positive number of requests per second (got 0)");
  fails("--rate -2 --input-len 128 --output-len 16", "--rate must be a positive number of requests per second (got -2)");
  fails("--batch 4 --input-len 128 --output-len 0", "the output length (--output-len) must be a positive integer (got 0)");
  fails("--rate 1 --input-len 128 --output-len uniform:0:8",
        "the output length (--output-len) uniform:LO:HI needs 1 <= LO <= HI (got uniform:0:8)");
  fails("--batch 4 --input-len uniform:1:8 --output-len 8",
        "a static batch (--batch) takes fixed lengths; length distributions need --rate");
  fails("--rate 1 --input-len 100000 --output-len 8 --gpu-memory-utilization 0.3",
        "a request of 100007 tokens needs 6251 KV-cache blocks of 16 tokens");
  const auto bert = run_cli("serve --model bert_large --gpu h100 --batch 1 --input-len 128 --output-len 8");
  CHECK(bert.code == 1);
  // the model's error as the builder gives it (not a setting that cannot run: no GPU or tp serves it)
  CHECK(bert.err.rfind("neusight: field 'mode': the bert model builder (scripts/neusight/models/bert.lua) has no "
                       "prefill phase", 0) == 0);
  const auto neither = run_cli("serve --model llama3_8b --gpu h100 --input-len 128 --output-len 8");
  CHECK(neither.code == 2);
  const auto both = run_cli("serve --model llama3_8b --gpu h100 --input-len 128 --output-len 8 --batch 2 --rate 1");
  CHECK(both.code == 2);
}

TEST_CASE("serve: lengths beyond a forecast's context name their flags, not a workload field", "[cli][serve]") {
  auto fails = [](const std::string& args, const std::string& message) {
    const auto r = run_cli("serve --model llama32_1b --gpu h100 --predictor roofline " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("neusight: serve: " + message, 0) == 0);
    CHECK(r.err.find("field 'context'") == std::string::npos);
  };
  fails("--batch 1 --input-len 100 --output-len 99999999",
        "the output length (--output-len) must be at most 16777216 tokens (got 99999999)");
  fails("--rate 5 --requests 5 --input-len uniform:1:20000000 --output-len 4",
        "the input length (--input-len) uniform:LO:HI needs HI <= 16777216 tokens (got uniform:1:20000000)");
  fails("--batch 1 --input-len 16000000 --output-len 1000000",
        "a request of input 16000000 + output 1000000 tokens reaches a context of 16999999 tokens; a forecast takes at "
        "most 16777216 (--input-len, --output-len)");
}

// Llama-3-70B's bf16 weights (141 GB) on a 24 GB L4: no memory is left for a KV cache, so no serving engine starts.
// The static batch was a "does not fit" result with TTFT/TPOT and exit 0 (its budget once -119.5 GB, then 0); it is now
// the error continuous batching gives (tester7 P5), nothing written.
TEST_CASE("serve: weights beyond the GPU's memory leave no KV cache: an error - never a negative budget",
          "[cli][serve]") {
  const std::string base = "serve --model llama3_70b --gpu l4 --input-len 512 --output-len 128 --predictor roofline ";
  // 90 % of what the L4 reports (gpus/l4.toml mem_reported_gib 22.0: 23.6e9 B, a little under its 24 GB)
  const std::string why = "the weights alone (141.1 GB per GPU) exceed 90 % of the 22.0 GiB the GPU reports (21.3 GB, "
                          "--gpu-memory-utilization 0.9): no room for a KV cache";
  for (const char* how : {"--batch 1", "--batch 1 --format json", "--rate 1 --requests 10"}) {
    const auto r = run_cli(base + how);
    INFO(how << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.rfind("neusight: serve: model 'llama3_70b' cannot be served: " + why, 0) == 0);
  }
  // sharded over 8 GPUs the weights fit: a budget and a concurrency again
  const json tp8 = run_json(base + "--batch 1 --tp 8");
  CHECK(tp8["fits"] == true);
  CHECK(tp8["kv_budget_gb"].get<double>() > 0);
  CHECK(tp8["max_concurrency"].get<int>() >= 1);
}

// 0 means "not given" inside serve_flags: a 0 given must be refused, not read as the default (--gpu-memory-utilization 0
// forecast with 0.9, --block-size 0 with 16).
TEST_CASE("serve: a --gpu-memory-utilization outside 0 to 1 and zero counts are refused by the flag", "[cli][serve]") {
  const std::string base = "serve --model llama32_1b --gpu h100 --input-len 64 --output-len 4 --predictor roofline ";
  for (const std::string u : {"0", "-0.5", "1.5", "nan", "inf", "0.9x"}) {
    const auto r = run_cli(base + "--batch 1 --gpu-memory-utilization " + u);
    INFO(u << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--gpu-memory-utilization: Value ") != std::string::npos);
    CHECK(r.err.find(" is not a fraction in (0, 1]") != std::string::npos);
  }
  CHECK(run_cli(base + "--batch 1 --gpu-memory-utilization ''").err.find("--gpu-memory-utilization: an empty value") !=
        std::string::npos);  // every flag's empty value (cli/flags.cpp nonempty_value)
  for (const std::string u : {"1", "0.5", "1e-1"}) {  // 1e-3 (80 MB) no longer holds the 2.5 GB weights: an error
    const auto r = run_cli(base + "--batch 1 --gpu-memory-utilization " + u + " --format json");
    INFO(u << "\n" << r.err);
    REQUIRE(r.code == 0);
    CHECK(json::parse(r.out)["gpu_memory_utilization"].get<double>() == std::stod(u));
  }
  for (const std::string flags : {"--batch 1 --block-size 0", "--rate 1 --requests 0", "--rate 1 --max-batch 0",
                                  "--rate 1 --max-batched-tokens 0", "--rate 1 --chunked-prefill 0",
                                  "--rate 1 --requests 2,3"}) {
    const auto r = run_cli(base + flags);
    INFO(flags << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(": a positive integer expected") != std::string::npos);
  }
}

// --seed has no value that means "not given" (serve_flags keeps an optional): every integer given is the seed the
// arrivals and lengths are drawn with, -1 and other negative ones included (splitmix64 takes any 64-bit integer).
TEST_CASE("serve: every --seed given is honoured and negative seeds are seeds too", "[cli][serve]") {
  const std::string base = "serve --model llama32_1b --gpu h100 --predictor roofline --rate 50 --requests 40 "
                           "--input-len uniform:16:512 --output-len uniform:2:8";
  const json plain = run_json(base);
  CHECK(plain["seed"] == 0);  // the default
  std::map<std::string, json> runs;
  for (const std::string seed : {"0", "-1", "-7", "7", "-9223372036854775808", "9223372036854775807"}) {
    const json r = run_json(base + " --seed " + seed);
    INFO(seed);
    CHECK(r["seed"].get<int64_t>() == std::stoll(seed));
    runs[seed] = r["ttft_ms"];
  }
  CHECK(runs["0"] == plain["ttft_ms"]);
  for (const auto& [seed, ttft] : runs) {
    INFO(seed);
    if (seed != "0") CHECK(ttft != runs["0"]);  // not the default's draws
  }
  CHECK(runs["-7"] != runs["7"]);
  for (const std::string seed : {"1.5", "x", "99999999999999999999"}) {
    const auto r = run_cli(base + " --seed " + seed);
    INFO(seed << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--seed") != std::string::npos);
  }
  // beyond 64 bits: refused, not saturated to the largest seed
  CHECK(run_cli(base + " --seed 9223372036854775808").err.find(
            "Value 9223372036854775808 is not an integer from -9223372036854775808 to 9223372036854775807") !=
        std::string::npos);
}

// Number flags whose 0 or -1 stands for "not given" take finite values only: CLI11's PositiveNumber and
// NonNegativeNumber let "nan" through, and a NaN failed the "given" test too (--ttft-ms nan ran without the target,
// --bucket-mb nan with the default bucket, --script-timeout nan with the default timeout).
TEST_CASE("flags: a number with leading blanks is refused", "[cli][serve][flags]") {
  // strtod skips them; the flag's value is what was typed
  const auto r = run_cli("serve --model llama32_1b --gpu h100,l4 --predictor roofline --batch 1 --input-len 64 "
                         "--output-len 4 --sweep --ttft-ms ' 5'");
  CHECK(r.code == 2);
  CHECK(r.err.find("is not a positive finite number") != std::string::npos);
}

TEST_CASE("flags: a NaN or infinite number is refused where 0 or -1 means not given", "[cli][serve][flags]") {
  const std::string sweep = "serve --model llama32_1b --gpu h100,l4 --predictor roofline --batch 1 --input-len 64 "
                            "--output-len 4 --sweep ";
  const std::string predict = "predict --model gpt2_large --gpu h100 --mode train --batch 8 --seq 128 --dp 2 "
                              "--predictor roofline ";
  for (const std::string value : {"nan", "inf", "-inf", "NaN", "0", "-1", "1x"}) {
    for (const std::string& args : {sweep + "--ttft-ms " + value, sweep + "--tpot-ms " + value,
                                   predict + "--bucket-mb " + value}) {
      const auto r = run_cli(args);
      INFO(args << "\n" << r.err);
      CHECK(r.code == 2);
      CHECK(r.out.empty());
      CHECK(r.err.find("Value " + value + " is not a positive finite number") != std::string::npos);
    }
    if (value == "0") continue;  // 0: no limit
    const auto r = run_cli(predict + "--script-timeout " + value);
    INFO(value << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("Value " + value + " is not a non-negative finite number") != std::string::npos);
  }
  CHECK(run_cli(sweep + "--ttft-ms 1e9 --tpot-ms 0.5 --format json").code == 0);
  CHECK(run_cli(predict + "--bucket-mb 50 --script-timeout 0 --format json").code == 0);
}

// A GPU's calibration file corrects serve's step forecasts as it does predict's; the report names it, and
// --no-calibration ignores it.
TEST_CASE("serve and search: the GPU's calibration is applied and named in the report, --no-calibration ignores it",
          "[cli][serve][calibration]") {
  ns_test::temp_dir t;
  const std::string toml = ns_test::slurp(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml");
  std::string mine;
  std::istringstream lines(toml);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("name = ", 0) == 0) line = "name = \"CalH100\"";
    else if (line.rfind("aliases = ", 0) == 0) line = "aliases = [\"calh100\"]";
    mine += line + "\n";
  }
  const std::filesystem::path gpu = t.write("calh100.toml", mine);
  t.write("calh100.calibration.toml", "format_version = 1\ngpu = \"CalH100\"\n[factors]\ngemm_tc16 = 2.0\n");
  const std::string args = "serve --model llama3_8b --gpu '" + gpu.string() + "' --batch 4 --input-len 512 --output-len 8";
  const json cal = run_json(args);
  const json raw = run_json(args + " --no-calibration");
  CHECK(cal["calibration"] == (t.path / "calh100.calibration.toml").string());
  CHECK(!raw.contains("calibration"));
  CHECK(cal["ttft_ms"].get<double>() > 1.2 * raw["ttft_ms"].get<double>());  // prefill is mostly GEMMs
  const auto table = ns_test::run_cli(args);
  CHECK(table.out.find("calibrated: kernel times corrected by") != std::string::npos);
  const json sweep = run_json("serve --model llama3_8b --gpu '" + gpu.string() + "',h100 --batch 4 --sweep "
                              "--input-len 512 --output-len 8");
  REQUIRE(sweep["rows"].size() == 2);
  CHECK(sweep["rows"][0]["calibration"] == cal["calibration"]);
  CHECK(!sweep["rows"][1].contains("calibration"));

  SECTION("search too") {
    const std::string q = "search --model gpt2_large --gpu '" + gpu.string() + "' --gpus 8 --batch 8 --seq 512 --dtype bf16";
    const json with = run_json(q), without = run_json(q + " --no-calibration");
    CHECK(with["calibration"] == cal["calibration"]);
    CHECK(!without.contains("calibration"));
    const json& best = with["layouts"][0];  // the same layout in the uncalibrated ranking: its compute is slower now
    bool found = false;
    for (const auto& l : without["layouts"])
      if (l["dp"] == best["dp"] && l["tp"] == best["tp"] && l["pp"] == best["pp"] &&
          l["microbatches"] == best["microbatches"] && l["recompute"] == best["recompute"]) {
        found = true;
        CHECK(best["compute_ms"].get<double>() > 1.03 * l["compute_ms"].get<double>());  // GEMMs are part of it
      }
    CHECK(found);
    CHECK(ns_test::run_cli(q).out.find("calibrated: kernel times corrected by") != std::string::npos);
  }
}

// A sliding-window model's paged KV cache under --rate: its windowed layers hold the blocks of at most the window
// (scripts/neusight/serve.lua kv_paging, the decode graph's rule: neusight.workload kv_cache_window), so long prompts no
// longer take every token's blocks. Accounting every token at the full rate, as before, would admit at most
// kv_blocks / ceil(16511 / 16) requests at once.
TEST_CASE("serve: a sliding-window model's --rate KV blocks hold the window only - more requests run at once",
          "[cli][serve][window]") {
  const std::string load = " --gpu h100 --rate 4 --requests 200 --input-len 16384 --output-len 128";
  const int per_request_full = (16384 + 128 - 1 + 15) / 16;  // blocks of a request's 16511 tokens, every one kept
  ns_test::temp_dir t;  // Qwen3-8B with use_sliding_window: layers 20 … 35 of 36 keep the last 1024 tokens
  const auto qwen = t.write("qwen3_sw/config.json", R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960,
    "max_window_layers": 20, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "sliding_window": 1024,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_sliding_window": true, "vocab_size": 151936})");
  struct windowed_case {
    std::string model;
    int window;
    double share;
  };
  for (const windowed_case& c : {windowed_case{"mistral_7b", 4096, 1.0},
                                 windowed_case{"'" + qwen.string() + "'", 1024, 16.0 / 36}}) {
    INFO(c.model);
    const json s = run_json("serve --model " + c.model + load);
    INFO(s.dump().substr(0, 600));
    CHECK(s["kv_window"] == c.window);
    CHECK(s["kv_window_share"].get<double>() == Approx(c.share).epsilon(1e-12));
    // the longest request's cache is predict's decode step's at its last context (one rule, the graph's)
    const json dec = run_json("predict --model " + c.model + " --gpu h100 --mode decode --batch 1 --context 16510 "
                              "--dtype bf16 --launch graph");
    CHECK(s["kv_cache_gb_per_request_max"].get<double>() == Approx(dec["kv_cache_gb"].get<double>()).epsilon(1e-9));
    CHECK(s["max_running"].get<int>() > s["kv_blocks"].get<int>() / per_request_full + 5);
    CHECK(s["preemptions"] == 0);
    CHECK(s["kv_peak_gb"].get<double>() <= s["kv_budget_gb"].get<double>() + 1e-9);
    CHECK(s["e2e_ms"]["count"] == 200);
  }
  // Without a window nothing changes: every token's blocks, at most kv_blocks / their count running, each holding at
  // least its prompt's 1024 blocks.
  const json l = serve(load.substr(std::string(" --gpu h100").size()));
  CHECK_FALSE(l.contains("kv_window"));
  CHECK_FALSE(l.contains("kv_cache_gb_per_request_max"));
  const int running = l["max_running"];
  CHECK(running <= l["kv_blocks"].get<int>() / 1024);
  const double block_gb = 16 * l["kv_cache_gb_per_token"].get<double>();
  CHECK(l["kv_peak_gb"].get<double>() >= running * 1024 * block_gb - 1e-9);
  CHECK(l["kv_peak_gb"].get<double>() <= l["kv_blocks"].get<int>() * block_gb + 1e-9);
}

// An arrival rate beyond what the server finishes (tester3 problem 5: Llama-3-8B on an L4 at 5 req/s, about 1 req/s of
// capacity) grows the queue without bound: TTFT p50 was 28.8 / 56.6 s at 100 / 200 requests with no warning. The
// report keeps its numbers and says both rates, in JSON `warnings` and on stderr; JSON has the capacity.
TEST_CASE("serve: a rate beyond the forecast capacity warns with both rates on stderr and in JSON", "[cli][serve]") {
  const std::string base = "serve --model llama3_8b --gpu l4 --input-len 1024 --output-len 256 --requests 100 "
                           "--format json --rate ";
  const auto over = run_cli(base + "5");
  INFO(over.err);
  REQUIRE(over.code == 0);
  const json j = json::parse(over.out);
  const double cap = j["throughput"]["capacity_requests_per_s"];
  CHECK(cap > 0.8);
  CHECK(cap < 1.3);
  CHECK(j["throughput"]["requests_per_s"].get<double>() < cap * 1.05);  // saturated: the simulation runs at it
  CHECK(j["ttft_ms"]["p50"].get<double>() > 10000);                      // the numbers stay as simulated
  char shown[32];
  std::snprintf(shown, sizeof shown, "%.3g", cap);
  const std::string says = "--rate 5 req/s exceeds the forecast capacity of " + std::string(shown) + " req/s";
  size_t in_json = 0;
  for (const auto& w : j["warnings"]) in_json += w.get<std::string>().rfind(says, 0) == 0;
  CHECK(in_json == 1);
  CHECK(over.err.find("neusight: warning: " + says) != std::string::npos);
  // well below it: nothing said
  const auto under = run_cli(base + "0.3");
  REQUIRE(under.code == 0);
  CHECK(under.out.find("forecast capacity") == std::string::npos);
  CHECK(under.err.find("forecast capacity") == std::string::npos);
}

// The capacity is the server's steady state, not the user's --requests (tester8 problem 2: Llama-3-8B, H100, 1024 -> 256
// tokens at 32 req/s had no capacity and no overload warning at 300 / 400 / 500 requests, TTFT p90 5.8-7 s, and 18.4
// req/s at 600 / 1000; with output lengths uniform:250:262 it was 41.3 req/s at 300 and 20.9 at 1000). The replay
// draws its own requests: the same capacity at 300 and 1000, and 32 req/s beyond it at 300 too.
TEST_CASE("serve: the forecast capacity does not depend on --requests and 300 requests beyond it warn",
          "[cli][serve]") {
  // (HF's eager kernels, serve's one-GPU kernels when tester8 measured these numbers; the fused default: 21.0 req/s)
  const std::string base = "serve --model llama3_8b --gpu h100 --input-len 1024 --rate 32 --kernels eager --format json ";
  const auto capacity = [&](const std::string& more, bool* warned) {
    const auto r = run_cli(base + more);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    REQUIRE(j["throughput"].contains("capacity_requests_per_s"));
    *warned = false;
    for (const auto& w : j["warnings"])
      *warned = *warned || w.get<std::string>().rfind("--rate 32 req/s exceeds the forecast capacity of ", 0) == 0;
    return j["throughput"]["capacity_requests_per_s"].get<double>();
  };
  bool warned_300 = false, warned_1000 = false;
  const double c300 = capacity("--output-len 256 --requests 300", &warned_300);
  const double c1000 = capacity("--output-len 256 --requests 1000", &warned_1000);
  CHECK(c300 == Approx(c1000).epsilon(0.02));
  CHECK(c1000 == Approx(18.4).epsilon(0.03));
  CHECK(warned_300);
  CHECK(warned_1000);
  const double u300 = capacity("--output-len uniform:250:262 --requests 300", &warned_300);
  const double u1000 = capacity("--output-len uniform:250:262 --requests 1000", &warned_1000);
  CHECK(u300 == Approx(u1000).epsilon(0.03));
  CHECK(warned_300);
  // the sweep's row of the same setting: its capacity and `beyond` (it had neither)
  const auto sweep = run_cli("serve --model llama3_8b --input-len 1024 --output-len 256 --requests 300 --sweep "
                             "--gpu h100 --tp 1 --rate 32 --kernels eager --format json");
  REQUIRE(sweep.code == 0);
  const json row = json::parse(sweep.out)["rows"][0];
  CHECK(row["capacity_requests_per_s"].get<double>() == Approx(c300).epsilon(1e-12));
  CHECK(row["overload"] == "beyond");
}

// `predict --tp 8` on A100 PCIe cards (a 2-GPU NVLink bridge) warns that its tp group is priced over PCIe beyond a pair;
// `serve` of the same layout forecast the same phases without a word. It now says the plan's warnings as predict says
// them (scripts/neusight/report.lua layout_warnings, one text: neusight.parallel.layout), in JSON `warnings`, on
// stderr and in its table; a layout within one bridge (tp 2) says nothing.
TEST_CASE("serve: the layout's warnings are predict's for the same layout", "[cli][serve]") {
  const std::string model = "--model llama32_1b --gpu a100_pcie_80gb --predictor roofline ";
  const auto bridge_of = [](const json& report) {
    std::vector<std::string> out;
    for (const auto& w : report.value("warnings", json::array()))
      if (w.get<std::string>().find("bridge joins") != std::string::npos) out.push_back(w.get<std::string>());
    return out;
  };
  const json predicted = run_json("predict " + model + "--mode decode --batch 1 --context 256 --tp 8");
  const auto said = bridge_of(predicted);
  REQUIRE(said.size() == 1);
  CHECK(said[0] == "tp 8 on a100_pcie_80gb: its NVLink bridge joins 2 GPUs; collectives beyond a pair are priced over "
                   "PCIe (32 GB/s per direction); give --cluster for your system");
  const std::string serve = "serve " + model + "--input-len 256 --output-len 16 --batch 1 --tp ";
  const json served = run_json(serve + "8");
  CHECK(bridge_of(served) == said);
  const auto table = run_cli(serve + "8");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("warning: " + said[0]) != std::string::npos);
  const auto rate = run_cli(serve.substr(0, serve.find("--batch")) + "--rate 1 --requests 5 --tp 8 --format json");
  REQUIRE(rate.code == 0);
  CHECK(bridge_of(json::parse(rate.out)) == said);
  CHECK(rate.err.find("neusight: warning: " + said[0]) != std::string::npos);
  CHECK(bridge_of(run_json(serve + "2")).empty());
}

TEST_CASE("serve: one model only and its own messages without an internal context line", "[cli][serve]") {
  // a comma list is not a preset name "a,b"
  const auto listed = run_cli("serve --model gpt2_med,gpt2_large --gpu h100 --batch 1 --input-len 8 --output-len 2 --sweep");
  INFO(listed.err);
  CHECK(listed.code == 1);
  CHECK(listed.err == "neusight: --model gpt2_med,gpt2_large: serve takes one model (lists are for --gpu, --tp, --batch, "
                      "--rate with --sweep); run serve once per model\n");
  // serve.lua's message for the user is whole: no "    in scripts/neusight/serve.lua run" under it
  const auto zero = run_cli("serve --model gpt2_med --gpu h100 --batch 1 --input-len 8 --output-len 0");
  INFO(zero.err);
  CHECK(zero.code == 1);
  CHECK(zero.err == "neusight: serve: the output length (--output-len) must be a positive integer (got 0)\n");
  // calibration.lua's message for the user is whole too: no "    in scripts/neusight/calibration.lua fit_serve()"
  // under it (tester8 #7, session.cpp figures_call); nothing written
  ns_test::temp_dir t;
  const std::filesystem::path gpu =
      t.write("calx.toml", ns_test::slurp(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml"));
  const std::filesystem::path m = t.write("m.toml", "tpot_ms = 5\n");
  const auto fit = run_cli("serve --model gpt2_med --gpu '" + gpu.string() + "' --batch 1 --input-len 8 --output-len 1 "
                           "--predictor roofline --calibrate '" + m.string() + "'");
  INFO(fit.err);
  CHECK(fit.code == 1);
  CHECK(fit.err == "neusight: " + m.string() + ": tpot_ms given, but the run has no decode step (--output-len 1: its "
                   "one token comes from the prefill)\n");
  CHECK_FALSE(std::filesystem::exists(t.path / "calx.calibration.toml"));
}

// predict's --help says its --dtype default, which is not serve's: a serving phase forecast without --dtype is fp32
// (the model as PyTorch loads it; a config.json's torch_dtype is not read), serve's bf16. The help said no default
// (audit 2026-11-29: `predict --mode decode` of Llama-3-8B on an H100 without --dtype read 25.65 ms, fp32 weights,
// against 6.79 ms in bf16).
TEST_CASE("predict --help says the fp32 --dtype default that a serving phase without --dtype gets", "[cli][serve]") {
  const std::string help = run_cli("predict --help").out;
  CHECK(help.find("default fp32") != std::string::npos);
  CHECK(help.find("serve's default is bf16") != std::string::npos);
  CHECK(run_json("predict --model llama3_8b --gpu h100 --mode decode --batch 1 --context 64")["dtype"] == "fp32");
  CHECK(run_json("serve --model llama3_8b --gpu h100 --batch 1 --input-len 64 --output-len 2")["dtype"] == "bf16");
}

// audit19: serve's JSON says what predict's figures say of a forecast outside what the AMD predictor knows (an MI300X
// beyond the MI100 / MI210 its weights saw, a band borrowed from the NVIDIA folds, GEMMs and attention priced by the
// roofline fallback) under the same names, per phase: it had only the warnings' text.
TEST_CASE("serve: a phase's JSON says out of distribution and the borrowed and fallback band as predict does",
          "[cli][serve]") {
  const std::string args = " --model llama3_8b --dtype bf16 --batch 8 --input-len 1024 --output-len 16";
  const json amd = run_json("serve --gpu mi300x" + args);
  for (const char* phase : {"prefill", "decode"}) {
    INFO(phase);
    const json& p = amd["phases"][phase];
    CHECK(p["out_of_distribution"] == true);
    CHECK(p["band_borrowed_from"] == "nvidia");
    CHECK(p["band_widened"].get<double>() > 1);
    CHECK(p["band_fallback_share"].get<double>() > 0);
  }
  const json pre = run_json("predict --gpu mi300x --mode prefill --seq 1024 --kernels megatron --launch graph" +
                            std::string(" --model llama3_8b --dtype bf16 --batch 8"));
  CHECK(amd["phases"]["prefill"]["band_fallback_share"].get<double>() ==
        Approx(pre["figures"]["band_fallback_share"].get<double>()));
  const json in = run_json("serve --gpu mi210" + args);  // a training GPU of the AMD weights: inside their range
  CHECK(in["phases"]["prefill"]["out_of_distribution"] == false);
  CHECK(in["phases"]["prefill"]["band_borrowed_from"] == "nvidia");
  CHECK_FALSE(in["phases"]["prefill"].contains("band_widened"));
}

// audit19: the table names the graph API of the GPU's vendor (the engine hands report.lua the GPU's vendor)
TEST_CASE("launch graph: the table says hipGraph on an AMD GPU and CUDA graph on an NVIDIA one", "[cli][serve]") {
  const std::string args = " --model llama3_8b --mode decode --dtype bf16 --batch 1 --context 128 --launch graph";
  const auto amd = run_cli("predict --gpu mi300x" + args);
  REQUIRE(amd.code == 0);
  CHECK(amd.out.find("(launch graph: HIP-graph (hipGraph) replay, scripts/neusight/launch.lua)") != std::string::npos);
  CHECK(amd.out.find("CUDA") == std::string::npos);
  const auto nv = run_cli("predict --gpu h100" + args);
  REQUIRE(nv.code == 0);
  CHECK(nv.out.find("(launch graph: CUDA-graph replay, scripts/neusight/launch.lua)") != std::string::npos);
  // a --scripts launch.lua written before graph_name (the engine's --overhead message allows for it): the table was
  // cut short after the whole forecast ("attempt to call a nil value (field 'graph_name')"); vendor-neutral instead
  ns_test::temp_dir t;
  const auto old = run_cli("predict --gpu mi300x" + args + ns_test::override_dir(t, "old", "launch", "M.graph_name = nil"));
  INFO(old.err);
  CHECK(old.code == 0);
  CHECK(old.out.find("(launch graph: graph replay, scripts/neusight/launch.lua)") != std::string::npos);
}
