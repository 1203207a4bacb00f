// tests/cli/test_parallel_cli.cpp — predict/run with --dp/--tp/--pp end to end: the timeline in JSON and the table, overrides, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;
using ns_test::warned;
namespace fs = std::filesystem;

namespace {

json predict(const std::string& extra) {
  const auto r = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --optimizer none --seq 1024 "
                         "--predictor roofline --format json " + extra);
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

double sum(const json& devices, const char* key) {
  double s = 0;
  for (const auto& d : devices) s += d[key].get<double>();
  return s;
}

}  // namespace

TEST_CASE("parallel: latency is the timeline's iteration and the per-rank graph is the microbatch", "[cli][parallel]") {
  const json one = predict("--batch 4");
  const json dp = predict("--batch 4 --dp 4 --kernels eager");  // the same kernels as the one-GPU graph
  REQUIRE(dp.contains("parallel"));
  const json& p = dp["parallel"];
  CHECK(p["dp"] == 4);
  CHECK(p["world"] == 4);
  CHECK(p["micro_batch"] == 1);
  CHECK(dp["latency_ms"].get<double>() == p["iteration_ms"].get<double>());
  // Every forward op's work is linear in the batch: the dp rank's graph holds a quarter of the forward FLOPs.
  // (Not of all FLOPs: gradient accumulation is parameter-sized, the same on every rank.)
  const auto forward_flops = [](const json& j) {
    double f = 0;
    for (const auto& op : j["ops"])
      if (op["phase"] == "forward") f += op["flops"].get<double>() * op["count"].get<double>();
    return f;
  };
  CHECK(forward_flops(dp) * 4 == Approx(forward_flops(one)).epsilon(1e-12));
  CHECK(dp["flops"].get<double>() * 4 > one["flops"].get<double>());
  // Gradients of all 774 M parameters are all-reduced (fp32), overlapped with backward: less is exposed than sent.
  const json& d0 = p["devices"][0];
  CHECK(p["grad_bytes_per_rank"].get<double>() == Approx(4 * one["params"].get<double>()).epsilon(1e-12));
  CHECK(d0["dp_comm_ms"].get<double>() > 0);
  CHECK(d0["dp_exposed_ms"].get<double>() < d0["dp_comm_ms"].get<double>());
  CHECK(d0["dp_buckets"].get<int>() > 10);
  CHECK(!one.contains("parallel"));
  CHECK(p["kernels"] == "eager");
  CHECK(predict("--batch 4 --dp 4")["parallel"]["kernels"] == "megatron");  // the default
}

TEST_CASE("parallel: Megatron kernels fuse the GPT MLP activation, eager kernels keep HF's graph", "[cli][parallel]") {
  temp_dir t;
  const auto script = t.write("w.lua", "return { model = 'gpt2_large', gpu = 'A100-SXM4-40GB', mode = 'train',\n"
                                       "  batch = 4, seq = 1024, optimizer = 'none', parallel = { dp = 4, kernels = 'eager' } }\n");
  const auto r = run_cli("run '" + script.string() + "' --format json --predictor roofline");
  REQUIRE(r.code == 0);
  const json eager = json::parse(r.out);
  const json megatron = predict("--batch 4 --dp 4");
  const auto count = [](const json& j, const std::string& prefix) {
    int n = 0;
    for (const auto& op : j["ops"])
      if (op["phase"] == "forward" && op["name"].get<std::string>().rfind(prefix, 0) == 0) ++n;
    return n;
  };
  CHECK(count(eager, "h.mlp.act.") == 8);  // gelu_new: 8 element-wise kernels
  CHECK(count(megatron, "h.mlp.act") == 1);  // one fused bias-GeLU
  CHECK(eager["parallel"]["kernels"] == "eager");
  CHECK(megatron["latency_ms"].get<double>() < eager["latency_ms"].get<double>());
}

TEST_CASE("parallel: tensor parallelism adds collective kernels, forward and backward", "[cli][parallel]") {
  const json tp = predict("--batch 4 --tp 4");
  int fw = 0, bw = 0;
  for (const auto& op : tp["ops"]) {
    if (op["kind"] != "collective") continue;
    CHECK(op["kernel"] == "ALLREDUCE");
    CHECK(op["flops"] == 0);
    (op["phase"] == "forward" ? fw : bw) += op["count"].get<int>();
  }
  // 36 layers × (2 forward + 2 backward), the embedding's and the loss's forward, lm_head's backward.
  CHECK(fw == 36 * 2 + 2);
  CHECK(bw == 36 * 2 + 1);
  const json& d = tp["parallel"]["devices"][0];
  CHECK(d["tp_comm_ms"].get<double>() > 0);
  // exposed: the wire less what runs under the column-parallel linears' weight-gradient GEMMs (below)
  CHECK(d["exposed_comm_ms"].get<double>() ==
        Approx(d["tp_comm_ms"].get<double>() - d["tp_comm_hidden_ms"].get<double>()));
}

// Megatron's column-parallel linear launches its input-gradient all-reduce after the dgrad GEMM and waits for it after
// the wgrad GEMM: per site and microbatch max(0, comm − wgrad) is exposed (scripts/neusight/parallel/timeline.lua
// hidden_comm). tp_comm_ms stays what is on the wire; the row-parallel all-reduces and eager kernels hide nothing.
TEST_CASE("parallel: a column-parallel input gradient runs under its wgrad GEMM with Megatron kernels", "[cli][parallel]") {
  const json tp = predict("--batch 4 --tp 2");
  // f before each column-parallel layer → the layer (GPT-2: c_attn, c_fc, the vocab-parallel lm_head)
  const std::map<std::string, std::string> reader = {
      {"h.attn.tp_in", "h.attn.c_attn"}, {"h.mlp.tp_in", "h.mlp.c_fc"}, {"lm_head.tp_in", "lm_head"}};
  std::map<std::string, double> comm_each, wgrad_each;  // per instance, ms
  std::map<std::string, int> backward_gemms, count;
  double row_parallel = 0;
  for (const auto& op : tp["ops"]) {
    const std::string name = op["name"].get<std::string>();
    if (op["kind"] == "collective" && op["phase"] == "backward") {
      REQUIRE(reader.count(name) == 1);  // every backward collective is an f
      comm_each[name] = op["ms_each"].get<double>(), count[name] = op["count"].get<int>();
    } else if (op["kind"] == "collective") {
      row_parallel += op["ms"].get<double>();
    } else if (op["kind"] == "gemm" && op["phase"] == "backward" && ++backward_gemms[name] == 2) {
      wgrad_each[name] = op["ms_each"].get<double>();  // the linear rule's backward: dgrad, then wgrad
    }
  }
  REQUIRE(comm_each.size() == 3);
  CHECK(row_parallel > 0);
  double hidden = 0, wire_f = 0;
  for (const auto& [f, layer] : reader) {
    REQUIRE(wgrad_each.count(layer) == 1);
    const double comm = comm_each[f];
    hidden += (comm - std::max(0.0, comm - wgrad_each[layer])) * count[f];
    wire_f += comm * count[f];
  }
  const json& d = tp["parallel"]["devices"][0];
  const double wire = d["tp_comm_ms"].get<double>(), hid = d["tp_comm_hidden_ms"].get<double>();
  CHECK(hid > 0);
  CHECK(hid == Approx(hidden));
  CHECK(hid <= wire_f * (1 + 1e-12));  // the row-parallel all-reduces: never hidden
  CHECK(wire == Approx(wire_f + row_parallel));
  CHECK(d["exposed_comm_ms"].get<double>() == Approx(wire - hid));
  CHECK(d["exposed_comm_ms"].get<double>() < wire);
  // PyTorch eager tensor parallelism: no such overlap, all of it exposed
  const json eager = predict("--batch 4 --tp 2 --kernels eager");
  const json& e = eager["parallel"]["devices"][0];
  CHECK(e["tp_comm_hidden_ms"].get<double>() == 0);
  CHECK(e["exposed_comm_ms"].get<double>() == Approx(e["tp_comm_ms"].get<double>()));
}

TEST_CASE("parallel: one-microbatch pipeline is the serial sum of its stages", "[cli][parallel]") {
  const json pp = predict("--batch 4 --pp 4 --microbatches 1");
  const json& p = pp["parallel"];
  REQUIRE(p["devices"].size() == 4);
  CHECK(sum(p["devices"], "layers") == 36);
  const double serial = sum(p["devices"], "microbatch_forward_ms") + sum(p["devices"], "microbatch_backward_ms");
  // ... then the first and last stage all-reduce the gradient of their tied embedding copies (Megatron-LM)
  CHECK(p["embedding_sync_ms"].get<double>() > 0);
  CHECK(p["iteration_ms"].get<double>() == Approx(serial + p["embedding_sync_ms"].get<double>()).epsilon(1e-12));
  for (const auto& d : p["devices"]) CHECK(d["bubble_ms"].get<double>() > 0);
  // More microbatches fill the pipeline: the bubble share shrinks.
  const json pp8 = predict("--batch 16 --pp 4 --microbatches 8");
  const auto share = [](const json& j) {
    return j["parallel"]["bubble_ms"].get<double>() / j["parallel"]["iteration_ms"].get<double>();
  };
  CHECK(share(pp8) < share(pp));
  const json gpipe = predict("--batch 16 --pp 4 --microbatches 8 --schedule gpipe");
  CHECK(gpipe["parallel"]["schedule"] == "gpipe");
}

TEST_CASE("parallel: workload field, command-line overrides and the table", "[cli][parallel]") {
  const auto r = run_cli("run examples/gpt3_parallel.lua --pp 4 --microbatches 8 --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["parallel"]["tp"] == 8);  // from the script
  CHECK(j["parallel"]["pp"] == 4);  // from the command line
  CHECK(j["parallel"]["schedule"] == "interleaved");
  CHECK(j["parallel"]["cluster"]["nodes"] == 8);
  const auto t = run_cli("run examples/gpt3_parallel.lua");
  REQUIRE(t.code == 0);
  CHECK(t.out.find("parallel  dp 1 x tp 8 x pp 8 = 64 GPUs (8 node(s) x 8), 64 microbatch(es) of 1, schedule "
                   "interleaved (2 chunks per device), megatron kernels") != std::string::npos);
  CHECK(t.out.find("bubble ms") != std::string::npos);
  CHECK(t.out.find("iteration ") != std::string::npos);
}

TEST_CASE("parallel: every parallel field has a flag that equals the workload field", "[cli][parallel]") {
  // --virtual-stages, --bucket-mb and --overlap-grad-reduce against the same fields written in a script
  temp_dir t;
  const auto script = t.path / "w.lua";
  {
    std::ofstream f(script);
    f << "return { model = 'gpt2_large', gpu = 'A100-SXM4-40GB', mode = 'train', optimizer = 'none', batch = 16,\n"
         "  seq = 1024, parallel = { dp = 2, pp = 4, microbatches = 8, schedule = 'interleaved', virtual_stages = 3,\n"
         "  bucket_mb = 100, overlap_grad_reduce = false } }\n";
  }
  const auto by_script = run_cli("run '" + script.string() + "' --predictor roofline --format json");
  REQUIRE(by_script.code == 0);
  const json flags = predict("--batch 16 --dp 2 --pp 4 --microbatches 8 --schedule interleaved --virtual-stages 3 "
                             "--bucket-mb 100 --overlap-grad-reduce off");
  const json s = json::parse(by_script.out);
  CHECK(flags["parallel"]["virtual_stages"] == 3);
  CHECK(flags["parallel"]["bucket_mb"] == 100);
  CHECK(flags["parallel"]["overlap_grad_reduce"] == false);
  CHECK(flags["latency_ms"] == s["latency_ms"]);
  CHECK(flags["parallel"] == s["parallel"]);
  // each flag moves the forecast the way its field does
  const json base = predict("--batch 16 --dp 2 --pp 4 --microbatches 8 --schedule interleaved");
  CHECK(base["parallel"]["virtual_stages"] == 2);
  CHECK(base["parallel"]["overlap_grad_reduce"] == true);
  CHECK(flags["latency_ms"] != base["latency_ms"]);
  const auto bad = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --batch 16 --pp 4 "
                           "--seq 128 --virtual-stages 3 --predictor roofline");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("--virtual-stages: only the \"interleaved\" schedule") != std::string::npos);
  CHECK(run_cli("predict --model gpt2_large --gpu h100 --overlap-grad-reduce maybe").code == 2);
}

TEST_CASE("parallel: bad parallel settings are clear errors", "[cli][parallel]") {
  const std::string base = "predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --seq 1024 ";
  auto r = run_cli(base + "--batch 3 --dp 2");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: command line: field 'parallel': the global batch 3 is not divisible by dp × microbatches = "
                 "2 × 1\n");
  r = run_cli(base + "--batch 4 --pp 2 --schedule gpip");
  CHECK(r.code == 1);
  CHECK(r.err.find("--schedule: one of \"1f1b\", \"gpipe\", \"interleaved\" expected, got \"gpip\" (did you "
                   "mean 'gpipe'?)") != std::string::npos);
  r = run_cli(base + "--batch 4 --tp 3");
  CHECK(r.code == 1);
  CHECK(r.err.find("gpt model 'gpt2_large': n_head = 20 is not divisible by tp = 3") != std::string::npos);
  // a model function must shard itself: one that ignores opts.tp is refused rather than forecast unsharded
  r = run_cli("run examples/custom_model.lua --tp 2");
  CHECK(r.code == 1);
  CHECK(r.err.find("parallel.tp: the model function ignored opts.tp = 2 (its graph has no tensor-parallel collective; "
                   "add them with neusight.parallel.comm_node)") != std::string::npos);
  r = run_cli("run examples/custom_model.lua --dp 2 --format json --predictor roofline");  // dp needs nothing of it
  CHECK(r.code == 0);
  // --graph excludes the parallel flags: a usage error (a graph file that is there: a missing one is said first, exit 1)
  r = run_cli("predict --graph tests/fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv --gpu A100-SXM4-40GB --dp 2");
  CHECK(r.code == 2);
  CHECK(r.err.find("--dp excludes --graph") != std::string::npos);
  temp_dir t;
  const auto script = t.write("w.lua", "return { model = 'gpt2_large', gpu = 'A100-SXM4-40GB', mode = 'train',\n"
                                       "  batch = 4, seq = 1024, parallel = { dpp = 2 } }\n");
  r = run_cli("run '" + script.string() + "'");
  CHECK(r.code == 1);
  CHECK(r.err.find("field 'parallel' is invalid: parallel: unknown field 'dpp' (did you mean 'dp'?)") !=
        std::string::npos);
  // 16 GPUs fit: the default cluster is 2 nodes of 8, and the data-parallel ring then crosses the network.
  r = run_cli(base + "--batch 64 --dp 16 --format json");
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["parallel"]["cluster"]["nodes"] == 2);
}

TEST_CASE("parallel: clusters from gpus/clusters/*.toml and collective algorithms added in Lua", "[cli][parallel]") {
  const json dgx = predict("--batch 16 --dp 16 --cluster dgx_a100");
  const json& c = dgx["parallel"]["cluster"];
  CHECK(c["file"] == "gpus/clusters/dgx_a100.toml");
  CHECK(c["nodes"] == 2);
  CHECK(c["inter"]["bw_gbps"] == 25.0);
  // The same 16 ranks over a slower network expose more of the gradient all-reduce.
  const json pcie = predict("--batch 16 --dp 16 --cluster pcie_8gpu");
  CHECK(pcie["parallel"]["devices"][0]["dp_comm_ms"].get<double>() >
        dgx["parallel"]["devices"][0]["dp_comm_ms"].get<double>());
  // A workload registers a new all-reduce algorithm without rebuilding: the cheapest registered one is used.
  temp_dir t;
  const auto script = t.write(
      "w.lua",
      "local C = require 'neusight.collectives'\n"
      "C.algorithms.all_reduce.in_network = function(n, p, link) return link.alpha end -- e.g. switch-side reduction\n"
      "return { model = 'gpt2_large', gpu = 'A100-SXM4-40GB', mode = 'train', optimizer = 'none',\n"
      "  batch = 4, seq = 1024, parallel = { tp = 4, cluster = 'dgx_a100' } }\n");
  const auto r = run_cli("run '" + script.string() + "' --format json --predictor roofline");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json custom = json::parse(r.out);
  const json ring = predict("--batch 4 --tp 4 --cluster dgx_a100");
  const double tp_custom = custom["parallel"]["devices"][0]["tp_comm_ms"].get<double>();
  const double tp_ring = ring["parallel"]["devices"][0]["tp_comm_ms"].get<double>();
  // 36 layers x 4 + 3 all-reduces of 0.6 us (the cluster's intra latency, NCCL's NVLink LL step) each, plus NCCL's
  // 6.6 us base of one collective (scripts/neusight/topology.lua base_seconds: the ring's, for an algorithm it does not name)
  CHECK(tp_custom == Approx((36 * 4 + 3) * (0.6 + 6.6) * 1e-3).epsilon(1e-9));
  CHECK(tp_ring > tp_custom);
}

TEST_CASE("parallel: the default cluster joins 8-GPU nodes by a network capped by the GPU's host link",
          "[cli][parallel]") {
  // --help says what the default is (it said one node of the GPU's own links, also past 8 GPUs)
  const auto help = run_cli("predict --help");
  CHECK(help.out.find("one node of the GPU's own links") == std::string::npos);
  CHECK(help.out.find("400 Gb/s NIC per GPU") != std::string::npos);
  // An L4's NIC sits behind its PCIe 4.0 x16 (32 GB/s): the network no faster than that (it was 50 GB/s, above the
  // node's own 32); an H100's PCIe 5.0 (64 GB/s) leaves the 400 Gb/s (50 GB/s) as it was.
  const auto l4 = run_cli("predict --model gpt2_large --gpu l4 --mode train --optimizer none --seq 1024 "
                          "--predictor roofline --format json --batch 16 --dp 16");
  REQUIRE(l4.code == 0);
  const json l4j = json::parse(l4.out);
  const json& c = l4j["parallel"]["cluster"];
  CHECK(c["nodes"] == 2);
  CHECK(c["intra"]["bw_gbps"] == 32.0);
  CHECK(c["inter"]["bw_gbps"] == 32.0);
  const json h100 = json::parse(run_cli("predict --model gpt2_large --gpu h100 --mode train --optimizer none "
                                        "--seq 1024 --predictor roofline --format json --batch 16 --dp 16").out);
  CHECK(h100["parallel"]["cluster"]["inter"]["bw_gbps"] == 50.0);
  // a cluster file's own network is kept as given
  temp_dir t;
  const auto file = t.write("fast.toml", "gpus_per_node = 8\n[inter]\nbw_gbps = 50.0\n");
  const json given = predict("--batch 16 --dp 16 --cluster '" + file.string() + "'");
  CHECK(given["parallel"]["cluster"]["inter"]["bw_gbps"] == 50.0);
}

TEST_CASE("parallel: expert parallelism exchanges tokens with all-to-all and shards the experts", "[cli][parallel]") {
  const std::string base = "predict --model switchxl4 --gpu A100-SXM4-40GB --mode train --optimizer none --seq 512 "
                           "--batch 8 --predictor roofline --format json --dp 4";
  const auto dense = run_cli(base);
  const auto moe = run_cli(base + " --ep 4");
  REQUIRE(dense.code == 0);
  INFO(moe.err);
  REQUIRE(moe.code == 0);
  const json d = json::parse(dense.out), m = json::parse(moe.out);
  CHECK(m["parallel"]["ep"] == 4);
  CHECK(m["parallel"]["devices"][0]["ep_comm_ms"].get<double>() > 0);
  CHECK(d["parallel"]["devices"][0]["ep_comm_ms"].get<double>() == 0);
  int a2a = 0;
  for (const auto& op : m["ops"]) a2a += op["kernel"] == "ALLTOALL" ? 1 : 0;
  CHECK(a2a > 0);
  // One of the 4 experts per rank instead of all 4: less model state per GPU, and fewer gradients to all-reduce.
  CHECK(m["state_gb"].get<double>() < 0.6 * d["state_gb"].get<double>());
  CHECK(m["parallel"]["devices"][0]["dp_comm_ms"].get<double>() < d["parallel"]["devices"][0]["dp_comm_ms"].get<double>());
  const auto bad = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --batch 8 --seq 512 --dp 4 --ep 2");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("parallel.ep: the gpt model builder (scripts/neusight/models/gpt.lua) has no experts to spread; use "
                     "ep = 1") != std::string::npos);
}

TEST_CASE("parallel: memory per GPU, and full recomputation trading time for activations", "[cli][parallel]") {
  const json plain = predict("--batch 16 --pp 4 --microbatches 8");
  const json re = predict("--batch 16 --pp 4 --microbatches 8 --recompute full");
  const json& p = plain["parallel"];
  CHECK(re["parallel"]["recompute"] == "full");
  CHECK(p["recompute"] == "none");
  // 1F1B: the first stage holds the most microbatches in flight
  CHECK(p["devices"][0]["activation_gb"].get<double>() > p["devices"][3]["activation_gb"].get<double>());
  for (const auto& d : p["devices"])
    CHECK(d["memory_gb"].get<double>() == Approx(d["state_gb"].get<double>() + d["activation_gb"].get<double>() +
                                                 d["temporary_gb"].get<double>() + d["workspace_gb"].get<double>()));
  // the fullest GPU: stage 0 (the most microbatches in flight); top-level memory_gb is the same
  CHECK(p["memory_gb"].get<double>() == Approx(p["devices"][0]["memory_gb"].get<double>()));
  CHECK(plain["memory_gb"].get<double>() == p["memory_gb"].get<double>());
  CHECK(plain["memory"]["stage"] == 0);
  // capacity: the datasheet's 40 GB (scripts/neusight/memory.lua)
  CHECK(plain["memory"]["capacity_gb"].get<double>() == 40);
  CHECK(p["fits"] == (p["memory_gb"].get<double>() <= 40.0));
  CHECK(plain["fits"] == p["fits"]);
  CHECK(re["parallel"]["memory_gb"].get<double>() < 0.5 * p["memory_gb"].get<double>());
  CHECK(re["latency_ms"].get<double>() > 1.2 * plain["latency_ms"].get<double>());
  // selective recomputation (core attention only) sits in between on both counts
  const json sel = predict("--batch 16 --pp 4 --microbatches 8 --recompute selective");
  CHECK(sel["parallel"]["memory_gb"].get<double>() < p["memory_gb"].get<double>());
  CHECK(sel["parallel"]["memory_gb"].get<double>() > re["parallel"]["memory_gb"].get<double>());
  CHECK(sel["latency_ms"].get<double>() > plain["latency_ms"].get<double>());
  CHECK(sel["latency_ms"].get<double>() < re["latency_ms"].get<double>());
}

TEST_CASE("parallel: sequence parallelism flag", "[cli][parallel]") {
  const json tp = predict("--batch 4 --tp 4");
  const json sp = predict("--batch 4 --tp 4 --sequence-parallel");
  CHECK(sp["parallel"]["sequence_parallel"] == true);
  CHECK(tp["parallel"]["sequence_parallel"] == false);
  int gathers = 0, backward = 0;
  for (const auto& op : sp["ops"])
    if (op["kernel"] == "ALLGATHER") {
      gathers += op["count"].get<int>();
      if (op["phase"] == "backward") backward += op["count"].get<int>();
    }
  // per layer 2 forward (before c_attn, c_fc) + 2 backward (after the c_projs); the embedding's backward and
  // lm_head's forward (the column-parallel inputs' re-gather for the weight gradient runs under the dgrad GEMM)
  CHECK(gathers == 36 * 2 * 2 + 2);
  CHECK(backward == 36 * 2 + 1);  // the row-parallel layers' g and the embedding's
  CHECK(sp["latency_ms"].get<double>() < tp["latency_ms"].get<double>());
  const auto r = run_cli("predict --model bert_large --gpu A100-SXM4-40GB --mode train --batch 8 --seq 512 --tp 4 "
                         "--sequence-parallel");
  CHECK(r.code == 1);
  CHECK(r.err.find("parallel.sequence_parallel: the bert model builder (scripts/neusight/models/bert.lua) does not "
                   "implement it") != std::string::npos);
  // and what runs instead (matrix sweep: bert, opt, switch --sequence-parallel said why, not what to do)
  CHECK(r.err.find("drop sequence_parallel (--sequence-parallel): tensor parallelism alone runs") != std::string::npos);
}

TEST_CASE("parallel: the distributed optimizer shards optimizer state and step over dp", "[cli][parallel]") {
  const auto run = [](const std::string& extra) {
    const auto r = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --optimizer adam --seq 1024 "
                           "--batch 8 --predictor roofline --format json --dp 8" + extra);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out);
  };
  const json plain = run(""), zero = run(" --distributed-optimizer");
  const json &a = plain["parallel"]["devices"][0], &b = zero["parallel"]["devices"][0];
  CHECK(zero["parallel"]["distributed_optimizer"] == true);
  CHECK(b["optimizer_ms"].get<double>() == Approx(a["optimizer_ms"].get<double>() / 8));
  // fp32 Adam: 4 B weights + 4 B gradients + 8 B moments per parameter; the moments shard over 8 ranks
  CHECK(b["state_gb"].get<double>() == Approx(a["state_gb"].get<double>() * (4 + 4 + 1.0) / 16));
  CHECK(b["dp_exposed_ms"].get<double>() > a["dp_exposed_ms"].get<double>());  // the parameter all-gather
}

TEST_CASE("search: layouts ranked, each the same forecast predict makes, bad ones skipped with a reason", "[cli][search]") {
  const auto r = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 16 --batch 16 --seq 1024 "
                         "--optimizer none --predictor roofline --format json --top 50");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["gpus"] == 16);
  REQUIRE(j["layouts"].size() > 3);
  double last = 0;
  for (const auto& l : j["layouts"]) {
    CHECK(l["dp"].get<int>() * l["tp"].get<int>() * l["pp"].get<int>() == 16);
    CHECK(l["fits"] == true);
    CHECK(l["iteration_ms"].get<double>() >= last);  // ranked
    last = l["iteration_ms"].get<double>();
  }
  // GPT-2 Large has 20 heads: tp = 8 and 16 cannot split them
  CHECK(j["skipped"].contains("gpt model 'gpt2_large': n_head = 20 is not divisible by tp = 8: give a tp that divides 20 (1, 2, 4, 5, 10, 20)"));
  // the winner, forecast on its own, gives the same iteration
  const json& best = j["layouts"][0];
  const auto one = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --batch 16 --seq 1024 --optimizer none "
                           "--mode train --predictor roofline --format json --dp " + std::to_string(best["dp"].get<int>()) +
                           " --tp " + std::to_string(best["tp"].get<int>()) + " --pp " + std::to_string(best["pp"].get<int>()) +
                           " --microbatches " + std::to_string(best["microbatches"].get<int>()) + " --recompute " +
                           best["recompute"].get<std::string>());
  REQUIRE(one.code == 0);
  CHECK(json::parse(one.out)["latency_ms"].get<double>() == Approx(best["iteration_ms"].get<double>()).epsilon(1e-12));
  // nothing that can be forecast: a clear error listing why
  const auto none = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 3 --batch 4 --seq 1024");
  CHECK(none.code == 1);
  CHECK(none.err.find("search: no layout of 3 GPUs could be forecast") != std::string::npos);
}

// tester5 #15(e): the table's parts did not add up to the iteration (the optimizer step had no column, JSON no field).
// Training with an optimizer: an "optimizer ms" column and optimizer_ms in JSON/CSV rows, iteration = compute +
// exposed comm + bubble + optimizer; without an optimizer step (inference, --optimizer none) neither.
TEST_CASE("search: the optimizer step has its column when the forecast has one", "[cli][search]") {
  const std::string args = "search --model gpt2_large --gpu A100-SXM4-40GB --gpus 4 --batch 16 --seq 1024 "
                           "--predictor roofline --top 50 ";
  const auto table = run_cli(args + "--optimizer adamw");
  INFO(table.err);
  REQUIRE(table.code == 0);
  // (the imbalance column beside it: these layouts include pipelines)
  CHECK_THAT(table.out, Catch::Contains(" exposed comm  bubble ms optimizer ms imbalance ms  memory GB\n"));
  const json j = json::parse(run_cli(args + "--optimizer adamw --format json").out);
  REQUIRE(j["layouts"].size() > 1);
  for (const auto& l : j["layouts"]) {
    INFO(l.dump());
    CHECK(l["optimizer_ms"].get<double>() > 0);
    CHECK_THAT(l["compute_ms"].get<double>() + l["exposed_comm_ms"].get<double>() + l["bubble_ms"].get<double>() +
                   l["optimizer_ms"].get<double>(),
               Catch::Matchers::WithinRel(l["iteration_ms"].get<double>(), 1e-9));
  }
  CHECK_THAT(run_cli(args + "--optimizer adamw --format csv").out,
             Catch::Contains(",bubble_ms,optimizer_ms,imbalance_ms,memory_gb,"));
  for (const char* none : {"--optimizer none", "--mode inference"}) {
    INFO(none);
    CHECK_THAT(run_cli(args + none).out, !Catch::Contains("optimizer ms"));
    CHECK_FALSE(json::parse(run_cli(args + none + " --format json").out)["layouts"][0].contains("optimizer_ms"));
  }
}

// What no layout changes (the GPU, the model, the dtype, the cluster) is resolved once before the layouts: a typo is
// one error, predict's, with its did-you-mean, not "no layout could be forecast" with the reason repeated per layout.
// The pipeline's imbalance (the busiest stage's busy time less the least busy one's: parallel.imbalance_ms, the
// parallel report's one number) in every search row of JSON and CSV, as predict gives it for the layout; the table's
// column only where a layout shown has one (no pipeline, no column).
TEST_CASE("search: each layout's stage imbalance is predict's imbalance_ms", "[cli][search]") {
  const std::string args = "search --model gpt2_large --gpu A100-SXM4-40GB --gpus 4 --batch 16 --seq 1024 "
                           "--predictor roofline --top 50 ";
  const auto r = run_cli(args + "--format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const json* staged = nullptr;
  for (const auto& l : j["layouts"]) {
    INFO(l.dump());
    REQUIRE(l.contains("imbalance_ms"));
    if (l["pp"].get<int>() == 1) CHECK(l["imbalance_ms"].get<double>() == 0);
    if (l["pp"].get<int>() > 1 && !staged) staged = &l;
  }
  REQUIRE(staged);
  const json& l = *staged;
  const auto one = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --batch 16 --seq 1024 --mode train "
                           "--predictor roofline --format json --dp " + std::to_string(l["dp"].get<int>()) +
                           " --tp " + std::to_string(l["tp"].get<int>()) + " --pp " + std::to_string(l["pp"].get<int>()) +
                           " --microbatches " + std::to_string(l["microbatches"].get<int>()) + " --recompute " +
                           l["recompute"].get<std::string>());
  INFO(one.err);
  REQUIRE(one.code == 0);
  const double imbalance = json::parse(one.out)["parallel"]["imbalance_ms"].get<double>();
  CHECK(imbalance > 0);  // GPT-2 Large's stages: the first holds the embeddings, the last the head
  CHECK(l["imbalance_ms"].get<double>() == Approx(imbalance).epsilon(1e-12));
  CHECK_THAT(run_cli(args).out, Catch::Contains(" optimizer ms imbalance ms  memory GB\n"));
  // one GPU, no pipeline: no column (the JSON keeps its zeros)
  const auto flat = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 1 --batch 16 --seq 1024 "
                            "--predictor roofline");
  INFO(flat.err);
  REQUIRE(flat.code == 0);
  CHECK_THAT(flat.out, !Catch::Contains("imbalance"));
}

TEST_CASE("search: an unknown GPU model dtype or cluster stops the search once before any layout", "[cli][search]") {
  const std::string base = "search --gpus 8 --batch 8 --seq 2048 --mode inference --predictor roofline";
  const struct {
    std::string args, says;
  } cases[] = {
      {"--model gpt3_27 --gpu a100x", "unknown GPU 'a100x' (close matches: 'A100', 'A10', 'A10G', 'H100'"},
      {"--model gpt3_2x --gpu h100", "unknown model preset \"gpt3_2x\" (did you mean 'gpt3_27'?)"},
      {"--model gpt3_27 --gpu h100 --dtype bf17", "command line: --dtype must be a dtype name"},
      {"--model gpt3_27 --gpu h100 --cluster dgx_x", "unknown cluster 'dgx_x'; known: dgx_a100"},
  };
  for (const auto& c : cases) {
    temp_dir t;
    const std::filesystem::path out = t.path / "out.json";
    const auto r = run_cli(base + " " + c.args + " --format json -o '" + out.string() + "'");
    INFO(c.args << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(r.err.find("no layout") == std::string::npos);
    CHECK(r.err.find("layout(s)") == std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line: the message, once
    CHECK_FALSE(std::filesystem::exists(out));
  }
}

// The memos one process keeps across forecasts (node expansions, tiles, features, MLP batches; engine/lua/session.cpp,
// engine/core/neusight_predictor.cpp) must not change a bit: the same search without them gives the same bytes. So
// must the build the GPipe and 1F1B variants of a layout share (search_cmd.cpp; off without the memos), between
// expert-parallel degrees and beside interleaved variants that build their own.
TEST_CASE("search: the same JSON with and without the per-process memos (NEUSIGHT_NO_CACHE=1)", "[cli][search][memo]") {
  for (const std::string args : {
           "search --model gpt3_175b --gpu h100 --gpus 64 --batch 64 --seq 2048 --dtype bf16 --cluster dgx_h100 "
           "--sequence-parallel --recompute all",
           "search --model switchxl4 --gpu h100 --gpus 16 --batch 32 --seq 512 --dtype bf16 --distributed-optimizer",
           "search --model gpt2_large --gpu A100-SXM4-40GB --gpus 8 --batch 16 --seq 1024 --predictor roofline "
           "--schedule gpipe",
           "search --model mixtral_8x7b --gpu h100 --gpus 16 --batch 16 --seq 2048 --dtype bf16 "
           "--schedule 1f1b,interleaved --virtual-stages 2,4",
           "search --model mixtral_8x7b --gpu h100 --gpus 16 --batch 16 --seq 2048 --dtype bf16 "
           "--schedule gpipe,interleaved,1f1b --recompute all"}) {
    INFO(args);
    const std::string all = args + " --all --top 100000 --format json";
    const auto cached = run_cli(all);
    const auto fresh = run_cli(all, "NEUSIGHT_NO_CACHE=1");
    INFO(cached.err << fresh.err);
    REQUIRE(cached.code == 0);
    REQUIRE(fresh.code == 0);
    CHECK(json::parse(cached.out)["evaluated"].get<int>() > 10);
    CHECK(cached.out == fresh.out);  // JSON numbers round-trip: equal text is equal bits
  }
}

// issue 15: list-valued --schedule and --virtual-stages search those too; interleaved combos that cannot run (pp < 2,
// layers not divisible by pp × virtual_stages) are skipped and counted; every row is the forecast predict makes.
TEST_CASE("search --schedule/--virtual-stages: every schedule asked for, bad interleaved combos counted as skipped",
          "[cli][search]") {
  const std::string base = "--model gpt2_large --gpu A100-SXM4-40GB --batch 32 --seq 1024 --predictor roofline";
  const auto r = run_cli("search " + base + " --gpus 16 --schedule gpipe,1f1b,interleaved --virtual-stages 2,3 "
                         "--all --top 100000 --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  std::map<std::string, json> best;  // "schedule/v" → its fastest row
  for (const auto& l : j["layouts"]) {
    const std::string sched = l["schedule"].get<std::string>();
    const int v = l["virtual_stages"].get<int>(), pp = l["pp"].get<int>();
    if (sched == "interleaved") {
      CHECK(pp >= 2);
      CHECK(36 % (pp * v) == 0);  // GPT-2 Large: 36 layers
    } else {
      CHECK(v == 1);
    }
    const std::string key = sched + "/" + std::to_string(v);
    if (!best.count(key)) best[key] = l;
  }
  CHECK(best.size() == 4);  // gpipe, 1f1b, interleaved with 2 and with 3 chunks per device
  for (const auto& [key, l] : best) {
    INFO(key);
    const std::string sched = l["schedule"].get<std::string>();
    const auto one = run_cli("predict " + base + " --mode train --format json --dp " + std::to_string(l["dp"].get<int>()) +
                             " --tp " + std::to_string(l["tp"].get<int>()) + " --pp " + std::to_string(l["pp"].get<int>()) +
                             " --microbatches " + std::to_string(l["microbatches"].get<int>()) + " --recompute " +
                             l["recompute"].get<std::string>() + " --schedule " + sched +
                             (sched == "interleaved" ? " --virtual-stages " + std::to_string(l["virtual_stages"].get<int>()) : ""));
    INFO(one.err);
    REQUIRE(one.code == 0);
    CHECK(json::parse(one.out)["latency_ms"].get<double>() == l["iteration_ms"].get<double>());
    CHECK(json::parse(one.out)["memory_gb"].get<double>() == l["memory_gb"].get<double>());
  }
  const json& sk = j["skipped"];
  CHECK(sk["the interleaved schedule needs pp >= 2"].get<int>() > 0);
  CHECK(sk["the interleaved schedule needs the model's 36 layers divisible by pp x virtual_stages"].get<int>() > 0);
  int total = 0;
  for (const auto& [why, n] : sk.items()) total += n.get<int>();
  CHECK(j["skipped_layouts"].get<int>() == total);
  // the table says so on its first line
  const auto table = run_cli("search " + base + " --gpus 16 --schedule 1f1b,interleaved --top 1000");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("layouts skipped") != std::string::npos);
  CHECK(table.out.find("interleaved/2") != std::string::npos);
  // --virtual-stages without the interleaved schedule is a mistake, said as such
  const auto bad = run_cli("search " + base + " --gpus 16 --virtual-stages 2");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("--virtual-stages applies to the interleaved schedule only") != std::string::npos);
  // which schedules run model chunks is scripts/neusight/parallel/config.lua's CHUNKED: an override naming none
  // refuses --virtual-stages, saying where the list is
  ns_test::temp_dir t;
  const std::string none =
      ns_test::override_dir(t, "s", "parallel/config", "", {{"M.CHUNKED = { interleaved = 2 }", "M.CHUNKED = {}"}});
  const auto refused = run_cli("search " + base + " --gpus 16 --schedule 1f1b --virtual-stages 2" + none);
  CHECK(refused.code == 1);
  CHECK(refused.err.find("no schedule runs model chunks (scripts/neusight/parallel/config.lua CHUNKED names none)") !=
        std::string::npos);
}

// A --scripts parallel/config.lua written before chunks_refusal returned the field and the reason apart (one string,
// "parallel.<field>: <reason>", and one_chunk_only's reason so prefixed): search still skips what cannot run, by the
// same reason, and predict's note names the field once
TEST_CASE("search and predict take an older parallel/config.lua's one-string refusals", "[cli][search]") {
  ns_test::temp_dir t;
  const std::string old = ns_test::override_dir(
      t, "old", "parallel/config", "",
      {{"return \"virtual_stages\", (\"the %s schedule needs at least 2", "return (\"parallel.virtual_stages: the %s schedule needs at least 2"},
       {"return \"schedule\", (\"the %s schedule needs pp >= 2\")", "return (\"parallel.schedule: the %s schedule needs pp >= 2\")"},
       {"return \"virtual_stages\", M.one_chunk_only(schedule)", "return M.one_chunk_only(schedule)"},
       {"return (\"only the %s schedule runs", "return (\"parallel.virtual_stages: only the %s schedule runs"},
       {"if field then error((\"parallel.%s: %s\"):format(field, why), 0) end", "if field then error(field, 0) end"}});
  const std::string base = "--model gpt2_large --gpu A100-SXM4-40GB --batch 32 --seq 1024 --predictor roofline";
  const auto r = run_cli("search " + base + " --gpus 16 --schedule interleaved --virtual-stages 2 --all --top 100000 "
                         "--format json" + old);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["skipped"]["the interleaved schedule needs pp >= 2"].get<int>() > 0);
  for (const auto& l : j["layouts"]) CHECK(l["pp"].get<int>() >= 2);
  const json p = predict("--batch 32 --pp 2 --microbatches 4 --schedule 1f1b --virtual-stages 1" + old);
  bool noted = false;
  for (const auto& w : p["warnings"]) {
    const std::string text = w.get<std::string>();
    if (text.find("has no effect: only the") == std::string::npos) continue;
    noted = true;
    CHECK(text.find("parallel.virtual_stages (--virtual-stages) has no effect: only the") == 0);
  }
  CHECK(noted);
}

// What search says of --virtual-stages without a chunked schedule is scripts/neusight/search.lua choices' to word
// (virtual_stages_refusal): the engine passes it on, it builds no text of its own from the schedule names.
TEST_CASE("search --virtual-stages: the refusal without a chunked schedule is search.lua's", "[cli][search]") {
  ns_test::temp_dir t;
  const std::string shipped = ns_test::slurp(ns_test::source_dir / "scripts/neusight/search.lua");
  const size_t end = shipped.rfind("return M");
  REQUIRE(end != std::string::npos);
  t.write("s/neusight/search.lua", shipped.substr(0, end) +
                                       "local choices = M.choices\n"
                                       "M.choices = function(...)\n"
                                       "  local c = choices(...)\n"
                                       "  if c.virtual_stages_refusal then\n"
                                       "    c.virtual_stages_refusal = 'search.lua says: ' .. c.virtual_stages_refusal\n"
                                       "  end\n"
                                       "  return c\n"
                                       "end\n"
                                       "return M\n");
  const std::string scripts = " --scripts '" + (t.path / "s").string() + "'";
  const std::string run = "search --model gpt2_med --gpu A100-SXM4-40GB --mode train --seq 1024 --batch 8 --gpus 16 "
                          "--predictor roofline --virtual-stages 2";
  const auto said = run_cli(run + scripts);
  CHECK(said.code == 1);
  CHECK(said.err == "neusight: search.lua says: search: --virtual-stages applies to the interleaved schedule only (add it "
                    "to --schedule)\n");
  // a chunked schedule among those tried: no refusal
  const auto ok = run_cli(run + " --schedule 1f1b,interleaved --format json" + scripts);
  INFO(ok.err);
  CHECK(ok.code == 0);
}

TEST_CASE("search --recompute: auto takes the cheapest mode that fits, all lists every mode, a mode only itself",
          "[cli][search]") {
  auto layouts = [](const std::string& mode) {
    const auto r = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 8 --batch 16 --seq 1024 "
                           "--predictor roofline --all --top 1000 --format json --recompute " + mode);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out);
  };
  const json all = layouts("all"), full = layouts("full"), aut = layouts("auto");
  std::map<std::string, int> modes;
  for (const auto& l : all["layouts"]) ++modes[l["recompute"].get<std::string>()];
  CHECK(modes["none"] == modes["selective"]);
  CHECK(modes["none"] == modes["full"]);
  CHECK(all["evaluated"].get<int>() == 3 * modes["none"]);
  for (const auto& l : full["layouts"]) CHECK(l["recompute"] == "full");
  CHECK(full["evaluated"].get<int>() == modes["full"]);
  CHECK(aut["evaluated"].get<int>() <= all["evaluated"].get<int>());
  const auto bad = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 8 --batch 16 --seq 1024 --recompute ful");
  CHECK(bad.code == 1);
  CHECK(bad.err == "neusight: search: --recompute: \"auto\", \"all\", \"none\", \"selective\" or \"full\" expected, "
                   "got \"ful\" (did you mean 'full'?)\n");
}

// search lists no schedule or recomputation mode of its own: the names are neusight.parallel's (the schedule registry,
// parallel/config.lua's CHOICES.recompute), so a --scripts override that adds or drops one changes what search tries
// and accepts, and its message for an unknown name.
TEST_CASE("search --schedule/--recompute: the names are neusight.parallel's", "[cli][search]") {
  const std::string base = "search --model gpt2_large --gpu A100-SXM4-40GB --gpus 8 --batch 16 --seq 1024 "
                           "--predictor roofline --all --top 1000 --format json";
  const auto bad = run_cli(base + " --schedule 1f1b,gpip");
  CHECK(bad.code == 1);
  CHECK(bad.err == "neusight: search: --schedule: one of \"1f1b\", \"gpipe\", \"interleaved\" expected, got \"gpip\" "
                   "(did you mean 'gpipe'?)\n");
  // the bundled modules, copied with one schedule more and one recomputation mode fewer
  temp_dir t;
  const auto bundled = [](const std::string& rel) { return ns_test::slurp(ns_test::source_dir / "scripts" / rel); };
  std::string schedule = bundled("neusight/parallel/schedule.lua");
  const size_t ret = schedule.rfind("\nreturn M");
  REQUIRE(ret != std::string::npos);
  schedule.insert(ret, "\nM.schedules.gpipe2 = M.schedules.gpipe\n");
  t.write("s/neusight/parallel/schedule.lua", schedule);
  std::string config = bundled("neusight/parallel/config.lua");
  const std::string modes = "recompute = { \"none\", \"selective\", \"full\" }";
  const size_t at = config.find(modes);
  REQUIRE(at != std::string::npos);
  config.replace(at, modes.size(), "recompute = { \"none\", \"full\" }");
  t.write("s/neusight/parallel/config.lua", config);
  const std::string scripts = " --scripts '" + (t.path / "s").string() + "'";
  const auto mine = run_cli(base + scripts + " --schedule gpipe,gpipe2 --recompute all");
  INFO(mine.err);
  REQUIRE(mine.code == 0);
  std::map<std::string, int> modes_seen;
  std::map<std::string, double> gpipe, gpipe2;  // "dp/tp/pp/mb/recompute" → iteration
  const json ranked = json::parse(mine.out);
  for (const auto& l : ranked["layouts"]) {
    ++modes_seen[l["recompute"].get<std::string>()];
    std::string key;
    for (const char* k : {"dp", "tp", "pp", "microbatches"}) key += std::to_string(l[k].get<int>()) + "/";
    key += l["recompute"].get<std::string>();
    (l["schedule"] == "gpipe2" ? gpipe2 : gpipe)[key] = l["iteration_ms"].get<double>();
  }
  CHECK(modes_seen.count("selective") == 0);
  CHECK(modes_seen["none"] > 0);
  CHECK(modes_seen["none"] == modes_seen["full"]);
  REQUIRE(!gpipe2.empty());
  CHECK(gpipe2.size() == gpipe.size());
  for (const auto& [key, ms] : gpipe2) CHECK(ms == Approx(gpipe[key]).epsilon(1e-12));
  const auto dropped = run_cli(base + scripts + " --recompute selective");
  CHECK(dropped.code == 1);
  CHECK(dropped.err.find("search: --recompute: \"auto\", \"all\", \"none\" or \"full\" expected, got \"selective\"") !=
        std::string::npos);
  const auto unknown = run_cli(base + scripts + " --schedule gpipe3");
  CHECK(unknown.code == 1);
  CHECK(unknown.err.find("one of \"1f1b\", \"gpipe\", \"gpipe2\", \"interleaved\" expected, got \"gpipe3\"") !=
        std::string::npos);
}

TEST_CASE("parallel: a workload adds a pipeline schedule in Lua", "[cli][parallel]") {
  temp_dir t;
  // GPipe written out again under a new name: same op order, so the same iteration as the built-in one.
  const auto script = t.write(
      "w.lua",
      "local P = require 'neusight.parallel'\n"
      "P.schedules.mine = function(stages, microbatches, chunks, training)\n"
      "  local orders = {}\n"
      "  for d = 1, stages do\n"
      "    local o = {}\n"
      "    for m = 0, microbatches - 1 do o[#o + 1] = { fw = true, chunk = 0, mb = m } end\n"
      "    if training then for m = 0, microbatches - 1 do o[#o + 1] = { fw = false, chunk = 0, mb = m } end end\n"
      "    orders[d] = o\n"
      "  end\n"
      "  return orders\n"
      "end\n"
      "return { model = 'gpt2_large', gpu = 'A100-SXM4-40GB', mode = 'train', optimizer = 'none', batch = 16,\n"
      "  seq = 1024, parallel = { pp = 4, microbatches = 8, schedule = 'mine' } }\n");
  const auto r = run_cli("run '" + script.string() + "' --format json --predictor roofline");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json mine = json::parse(r.out);
  const json gpipe = predict("--batch 16 --pp 4 --microbatches 8 --schedule gpipe");
  CHECK(mine["parallel"]["schedule"] == "mine");
  CHECK(mine["latency_ms"].get<double>() == Approx(gpipe["latency_ms"].get<double>()).epsilon(1e-12));
}

namespace {
// eval models over `labels` (roofline): each row the forecast predict --graph makes of its graph in `graphs` (a
// distributed one with its timeline); the rows' JSON.
json eval_as_graphs(const std::string& labels, const std::string& graphs) {
  const auto r = run_cli("eval models '" + labels + "' --predictor roofline --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  for (const auto& row : j["rows"]) {
    const std::string config = row["config"];
    INFO(config);
    const auto p = run_cli("predict --graph '" + graphs + "/" + config + ".csv' --gpu A100-SXM4-40GB --predictor "
                           "roofline --format json");
    REQUIRE(p.code == 0);
    const json one = json::parse(p.out);
    CHECK(one.contains("parallel") == (config.find("-dp") != std::string::npos || config.find("-tp") != std::string::npos ||
                                       config.find("-pp") != std::string::npos));
    CHECK(row["predicted_ms"].get<double>() == Approx(one["latency_ms"].get<double>()).epsilon(1e-12));
  }
  return j["rows"];
}
}  // namespace

TEST_CASE("eval models: distributed labels get the same timeline as predict --graph", "[cli][parallel][eval]") {
  const json rows = eval_as_graphs("tests/fixtures/distributed/label", "tests/fixtures/distributed/opgraph");
  REQUIRE(rows.size() == 3);
  for (const auto& row : rows) CHECK(row["layers"] == 36);
  CHECK(rows[0]["measured_ms"] == 452.3);
}

TEST_CASE("eval models: a plain label after distributed ones is forecast alone", "[cli][parallel][eval]") {
  temp_dir t;
  const fs::path dist = ns_test::source_dir / "tests/fixtures/distributed";
  for (const char* f : {"opgraph/gpt2_large-train-1024-4-dp4.csv", "opgraph/gpt2_large-train-1024-4-tp4.csv",
                         "DLmodel_configs/gpt2_large.json", "label/NVIDIA_A100-SXM4-40GB/gpt2_large-train-1024-4-dp4.json",
                         "label/NVIDIA_A100-SXM4-40GB/gpt2_large-train-1024-4-tp4.json"}) {
    fs::create_directories((t.path / f).parent_path());
    fs::copy_file(dist / f, t.path / f);
  }
  // the plain graph of the same batch: the one-layer training graph of the miniature NeuSight data, under that name
  fs::copy_file(ns_test::source_dir / "tests/fixtures/neusight/opgraph/gpt2_large-train-1024-1.csv",
                t.path / "opgraph/gpt2_large-train-1024-4.csv");
  fs::copy_file(dist / "label/NVIDIA_A100-SXM4-40GB/gpt2_large-train-1024-4-dp4.json",
                t.path / "label/NVIDIA_A100-SXM4-40GB/gpt2_large-train-1024-4.json");
  CHECK(eval_as_graphs((t.path / "label").string(), (t.path / "opgraph").string()).size() == 3);
}

// Under pipeline parallelism each rank holds and reduces its own stage's gradients: grad_bytes_per_rank is the largest
// stage's (as state_gb and memory_gb are the largest GPU's), each stage's own is parallel.devices[i].grad_bytes.
TEST_CASE("parallel: grad_bytes_per_rank is one stage's under pipeline parallelism", "[cli][parallel]") {
  const json j = predict("--batch 16 --pp 2 --microbatches 2");  // fp32: 4-byte gradients
  const json& p = j["parallel"];
  double most = 0, total = 0;
  for (const auto& d : p["devices"]) {
    CHECK(d["grad_bytes"].get<double>() == 4 * d["params"].get<double>());
    most = std::max(most, d["grad_bytes"].get<double>());
    total += d["grad_bytes"].get<double>();
  }
  CHECK(p["grad_bytes_per_rank"].get<double>() == most);
  CHECK(p["grad_bytes_per_rank"].get<double>() < 0.6 * total);  // not the whole model's (two stages of ~half each)
  // a run without backward has no gradient to reduce
  for (const std::string mode : {"inference --seq 512", "prefill --seq 512", "decode --context 128"}) {
    const auto r = run_cli("predict --model llama3_8b --gpu h100 --dtype bf16 --batch 8 --tp 2 --pp 2 "
                           "--microbatches 2 --format json --mode " + mode);
    INFO(mode << " " << r.err);
    REQUIRE(r.code == 0);
    const json q = json::parse(r.out)["parallel"];
    CHECK(q["grad_bytes_per_rank"].get<double>() == 0);
    for (const auto& d : q["devices"]) CHECK(d["grad_bytes"].get<double>() == 0);
  }
}

// The top-level optimizer_ms (and its op row) is the graph's whole step of one tp shard; what each GPU steps (its
// stage's parameters, 1/dp of them under the distributed optimizer) is parallel.devices[i].optimizer_ms: the table's
// optimizer line says both and the HTML page's stage bars show each GPU's.
TEST_CASE("parallel: the optimizer line says the whole step and each GPU's", "[cli][parallel]") {
  temp_dir t;
  const auto page = t.path / "p.html";
  const std::string run = "predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --optimizer adam --seq 1024 "
                          "--predictor roofline --batch 16 --pp 4 --microbatches 8 --dp 2 --distributed-optimizer";
  const auto r = run_cli(run + " --format json --report '" + page.string() + "'");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  double most = 0;
  for (const auto& d : j["parallel"]["devices"]) most = std::max(most, d["optimizer_ms"].get<double>());
  REQUIRE(most > 0);
  CHECK(most < j["optimizer_ms"].get<double>() / 2);
  const auto table = run_cli(run);
  REQUIRE(table.code == 0);
  const size_t at = table.out.find("\noptimizer ");
  REQUIRE(at != std::string::npos);
  const std::string line = table.out.substr(at + 1, table.out.find('\n', at + 1) - at - 1);
  char want[64];
  std::snprintf(want, sizeof want, "each GPU steps at most %.3f ms", most);
  CHECK(line.find("the whole step of one tp shard, all stages") != std::string::npos);
  CHECK(line.find(want) != std::string::npos);
  CHECK(line.find("split over pp 4") != std::string::npos);
  CHECK(line.find("sharded over dp 2") != std::string::npos);
  const std::string html = ns_test::slurp(page);
  CHECK(html.find("data-key=\"parallel.devices[0].optimizer_ms\"") != std::string::npos);
  // without a step to split (pp 1, no distributed optimizer) the line is as before
  const auto plain = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --optimizer adam --seq 1024 "
                             "--predictor roofline --batch 16 --dp 2");
  REQUIRE(plain.code == 0);
  CHECK(plain.out.find("each GPU steps") == std::string::npos);
  // nor where the devices' shares round otherwise than the step's total (review: "each GPU steps 49.014 ms: ;")
  for (const std::string layout : {"--dp 2", "--tp 2", "--dp 2 --tp 2"}) {
    const auto other = run_cli("predict --model bert_large --gpu h100 --batch 8 --seq 512 --dtype bf16 --mode train "
                               "--optimizer adamw " + layout);
    INFO(layout);
    REQUIRE(other.code == 0);
    CHECK(other.out.find("each GPU steps") == std::string::npos);
  }
}

// state_gb is the largest model state of any GPU (the stage with the most parameters); the fullest GPU by its whole
// memory (memory.stage) may be another stage, whose own state is memory.state_gb: the table says both.
TEST_CASE("parallel: state_gb is the largest stage state and the table names the fullest GPU's", "[cli][parallel]") {
  const std::string run = "predict --model gpt2_large --gpu h100 --mode train --optimizer adam --dtype bf16 --seq 1024 "
                          "--predictor roofline --batch 16 --pp 4 --microbatches 8 --recompute full";
  const auto r = run_cli(run + " --format json");
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const json& devices = j["parallel"]["devices"];
  double most = 0;
  int most_stage = -1;
  for (const auto& d : devices)
    if (d["state_gb"].get<double>() > most) most = d["state_gb"].get<double>(), most_stage = d["stage"].get<int>();
  CHECK(j["state_gb"].get<double>() == most);
  const int fullest = j["memory"]["stage"].get<int>();
  REQUIRE(fullest != most_stage);  // the case the report must tell apart
  CHECK(j["memory"]["state_gb"].get<double>() == devices[fullest]["state_gb"].get<double>());
  const auto table = run_cli(run);
  REQUIRE(table.code == 0);
  char want[200];
  std::snprintf(want, sizeof want,
                "state     per GPU: at most %.3f GB (stage %d, JSON state_gb); stage %d, the GPU with the most memory in "
                "all, holds %.3f GB of state (memory.state_gb)",
                most, most_stage, fullest, j["memory"]["state_gb"].get<double>());
  CHECK(table.out.find(want) != std::string::npos);
}

// A parallel run's memory object is the fullest GPU's with the breakdown a one-GPU run's has (neusight.memory's one
// builder): state parts, workspace parts and the node of the largest temporary.
TEST_CASE("parallel: the memory object has the one-GPU breakdown of the fullest GPU", "[cli][parallel]") {
  for (const std::string layout : {"--dp 2", "--pp 2 --microbatches 2"}) {
    INFO(layout);
    const auto r = run_cli("predict --model gpt2_large --gpu h100 --mode train --optimizer adam --dtype bf16 --seq 1024 "
                           "--predictor roofline --batch 16 --format json " + layout);
    REQUIRE(r.code == 0);
    const json m = json::parse(r.out)["memory"];
    REQUIRE(m.contains("state"));
    REQUIRE(m.contains("workspace"));
    const json& s = m["state"];
    CHECK(s["weights_gb"].get<double>() + s["gradients_gb"].get<double>() + s["master_gb"].get<double>() +
              s["optimizer_gb"].get<double>() == Approx(m["state_gb"].get<double>()).epsilon(1e-12));
    const json& w = m["workspace"];
    CHECK(w["cublas_gb"].get<double>() + w["autocast_weight_cache_gb"].get<double>() ==
          Approx(m["workspace_gb"].get<double>()).epsilon(1e-12));
    // one stage holds every node: the LM head (its input and the bf16 logits; Megatron's vocab-parallel loss works in
    // place in its saved fp32 softmax, ops/cross_entropy.lua inplace); a pipeline's fullest stage its own
    if (layout == "--dp 2") CHECK(m["temporary_node"].get<std::string>() == "lm_head");
    else CHECK(!m["temporary_node"].get<std::string>().empty());
  }
}

// A layout search skips for want of a microbatch count says why: none of pp, 2pp, 4pp, 8pp divides batch / dp (10
// sequences over pp 7: batch / dp >= pp holds, so the old reason was wrong).
TEST_CASE("search: the microbatch skip names the counts tried", "[cli][search]") {
  const auto r = run_cli("search --model gpt2_large --gpu h100 --gpus 7 --batch 10 --seq 1024 --dtype bf16 "
                         "--predictor roofline");
  CHECK(r.code == 1);  // no layout of 7 GPUs runs gpt2_large (n_head 20) with batch 10
  CHECK(r.err.find("1 layout(s): no microbatch count tried (pp, 2pp, 4pp or 8pp) divides the replica's batch "
                   "(batch / dp)") != std::string::npos);
  CHECK(r.err.find("pp needs batch / dp >= pp") == std::string::npos);
}

// Only a layout that cannot run (neusight.infeasible: heads not divisible by tp, more stages than layers, a router
// skew the ep cannot take) is a skip reason; a script's bug met in some layouts only (here the all-reduce rule, which
// the tp > 1 layouts price) stops the search with its file:line and exit 1, as it stops predict and serve --sweep. It
// used to become "3 layout(s): …ops/all_reduce.lua:3: attempt to index a nil value" under a ranking of the others.
TEST_CASE("search: a script error stops it with its file and line and only infeasible layouts are skipped",
          "[cli][search]") {
  temp_dir t;
  const auto op = t.write("ops/all_reduce.lua", "-- a broken rule\nlocal rule = nil\nreturn rule.all_reduce\n");
  const std::filesystem::path out = t.path / "out.json";
  const auto r = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 4 --batch 4 --seq 1024 "
                         "--predictor roofline --ops '" + (t.path / "ops").string() + "' -o '" + out.string() + "'");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK_FALSE(std::filesystem::exists(out));  // nothing half-written
  CHECK(r.err.find(op.string() + ":3: attempt to index a nil value (local 'rule')") != std::string::npos);
  CHECK(r.err.find("layout(s)") == std::string::npos);
  // the settings' own reasons stay skips: GPT-2 Medium's 24 layers over pp 32 and 64, n_head 16 over tp 32 is not
  // tried (--max-tp 8)
  const auto deep = run_cli("search --model gpt2_med --gpu h100 --gpus 64 --batch 64 --seq 1024 --predictor roofline "
                            "--format json");
  INFO(deep.err);
  REQUIRE(deep.code == 0);
  const json j = json::parse(deep.out);
  CHECK(j["skipped"]["parallel: 32 pipeline stage(s) (pp × virtual_stages) but the model has only 24 layer(s)"] == 2);
  CHECK(j["skipped"]["parallel: 64 pipeline stage(s) (pp × virtual_stages) but the model has only 24 layer(s)"] == 1);
  // a router skew one expert-parallel degree cannot take (ep 2: at most 2 x the mean) skips those layouts only
  const auto skew = run_cli("search --model mixtral_8x7b --gpu h100 --gpus 16 --batch 16 --seq 2048 --predictor "
                            "roofline --router-skew 3 --format json");
  INFO(skew.err);
  REQUIRE(skew.code == 0);
  const json k = json::parse(skew.out);
  CHECK(k["skipped"]["router_skew 3: the busiest of 2 expert-parallel ranks can receive at most 2 x the mean (each "
                     "token's 2 picks among that rank's 4 experts); give a factor from 1 to 2"] == 10);
  CHECK(k["layouts"].size() > 0);
}

// On A100 PCIe cards (a 2-GPU NVLink bridge) search said the bridge warning once per distinct text, 7 near-identical
// lines ("tp 4 on a100_pcie_80gb: …", "dp 2 on …", "dp 4 on …", …). It says it once, naming every group size its
// layouts priced over PCIe (scripts/neusight/parallel/layout.lua bridge_warnings_merge).
TEST_CASE("search: the layouts' bridge warnings are one line naming their groups", "[cli][search]") {
  const auto r = run_cli("search --model gpt2_large --gpu a100_pcie_80gb --gpus 8 --batch 16 --seq 1024 "
                         "--predictor roofline --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  std::vector<std::string> bridge;
  for (const auto& w : j["warnings"])
    if (w.get<std::string>().find("bridge joins") != std::string::npos) bridge.push_back(w.get<std::string>());
  REQUIRE(bridge.size() == 1);
  CHECK(bridge[0] == "the tp 4, dp 2/4/8 and pp 2/4/8 groups of some layouts on a100_pcie_80gb: its NVLink bridge "
                     "joins 2 GPUs; collectives and pipeline sends beyond a pair are priced over PCIe (32 GB/s per "
                     "direction); give --cluster for your system");
  size_t on_stderr = 0;
  for (size_t at = r.err.find("bridge joins"); at != std::string::npos; at = r.err.find("bridge joins", at + 1)) ++on_stderr;
  CHECK(on_stderr == 1);
}

// search's skip reasons, when no layout could be forecast, said "while building the model of command line (--model …)":
// they name what search was building, the layout, and the model given.
TEST_CASE("search: a skipped layout's context names the layout, not the command line", "[cli][search]") {
  temp_dir t;
  const auto config = t.write("config.json", R"({"model_type": "llama", "vocab_size": 128, "hidden_size": 48,
    "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 3})");
  const auto r = run_cli("search --model '" + config.string() + "' --gpu h100 --gpus 2 --batch 1 --seq 64 "
                         "--predictor roofline");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("num_attention_heads = 3 is not divisible by tp = 2") != std::string::npos);
  CHECK(r.err.find("\n      while building layout dp 1 x tp 2 x pp 1 (the model of --model " + config.string() + ")") !=
        std::string::npos);
  CHECK(r.err.find("command line") == std::string::npos);
}

// A tp group across nodes (tp 16 on nodes of 8) was priced over the inter-node network without a word; Megatron-LM
// keeps tp within a node. predict warns (scripts/neusight/parallel/layout.lua tp_nodes_text), tp 8 does not, and
// search, which ranks such layouts under --max-tp 16, says it once.
TEST_CASE("parallel: a tp group across nodes warns once", "[cli][parallel][search]") {
  const std::string what = "spans nodes of 8 GPUs";
  const auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const auto across = run_cli("predict --model gpt2_med --gpu h100 --mode train --tp 16 --dp 2 --batch 8 --seq 1024 "
                              "--predictor roofline --format json");
  INFO(across.err);
  REQUIRE(across.code == 0);
  CHECK(count(across.err) == 1);
  CHECK(across.err.find("parallel: tp 16 spans nodes of 8 GPUs: its tensor-parallel collectives (every layer's) are "
                        "priced over the inter-node network (50 GB/s per direction), not the intra-node links (450 "
                        "GB/s); Megatron-LM keeps tp within a node: keep tp a divisor of 8") != std::string::npos);
  const auto inside = run_cli("predict --model gpt2_med --gpu h100 --mode train --tp 8 --dp 4 --batch 8 --seq 1024 "
                              "--predictor roofline --format json");
  INFO(inside.err);
  REQUIRE(inside.code == 0);
  CHECK(count(inside.err) == 0);
  const auto search = run_cli("search --model gpt2_med --gpu h100 --gpus 32 --max-tp 16 --batch 64 --seq 1024 "
                              "--predictor roofline --format json");
  INFO(search.err);
  REQUIRE(search.code == 0);
  CHECK(count(search.err) == 1);
  const json j = json::parse(search.out);
  size_t in_json = 0;
  for (const auto& w : j["warnings"]) in_json += count(w.get<std::string>());
  CHECK(in_json == 1);
}

// predict runs an interleaved layout whose chunks do not divide the layers (a model may be uneven on purpose) but
// warns in search's words for skipping it; gpipe or 1f1b outside training change nothing and say so.
TEST_CASE("parallel: uneven interleaved chunks warn and an inference schedule has no effect", "[cli][parallel]") {
  const std::string uneven = "the interleaved schedule needs the model's 36 layers divisible by pp x virtual_stages";
  CHECK(warned(predict("--batch 16 --pp 2 --microbatches 2 --schedule interleaved --virtual-stages 5")["warnings"], uneven));
  CHECK(!warned(predict("--batch 16 --pp 2 --microbatches 2 --schedule interleaved --virtual-stages 2")["warnings"], uneven));
  const auto infer = [](const std::string& schedule) {
    const auto r = run_cli("predict --model gpt2_large --gpu A100-SXM4-40GB --mode inference --seq 1024 --batch 16 "
                           "--predictor roofline --format json --pp 2 --microbatches 2 --schedule " + schedule);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out);
  };
  const std::string none = "parallel.schedule (--schedule) has no effect: without a backward pass";
  const json gpipe = infer("gpipe"), one_f_one_b = infer("1f1b");
  CHECK(warned(gpipe["warnings"], none));
  CHECK(warned(one_f_one_b["warnings"], none));
  CHECK(gpipe["latency_ms"] == one_f_one_b["latency_ms"]);  // the same timeline indeed
  CHECK(!warned(infer("interleaved")["warnings"], none));
  CHECK(!warned(predict("--batch 16 --pp 2 --microbatches 2 --schedule gpipe")["warnings"], none));  // training: it matters
}

// A model search cannot probe (its build at batch 1 fails: model_facts, here a --scripts search.lua that refuses)
// has no layer count before the forecasts: an interleaved layout whose chunks do not divide its layers was ranked,
// with predict's warning saying "search skips this layout". It is skipped by the same reason once its forecast shows
// the layers, so the warning is true in both commands.
TEST_CASE("search: uneven interleaved layouts are skipped when the model probe fails", "[cli][search]") {
  temp_dir t;
  std::string search = ns_test::slurp(ns_test::source_dir / "scripts/neusight/search.lua");
  const std::string head = "function M.model_facts(w)\n";
  REQUIRE(search.find(head) != std::string::npos);
  search.replace(search.find(head), head.size(), head + "  error('this model cannot be built at batch 1', 0)\n");
  t.write("s/neusight/search.lua", search);
  const std::string args = "search --model gpt2_large --gpu A100-SXM4-40GB --gpus 4 --batch 16 --seq 1024 "
                           "--predictor roofline --schedule 1f1b,interleaved --virtual-stages 5 --all --top 1000 "
                           "--format json --scripts '" + (t.path / "s").string() + "'";
  const auto r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const std::string uneven = "the interleaved schedule needs the model's 36 layers divisible by pp x virtual_stages";
  CHECK(j["skipped"][uneven].get<int>() > 0);
  for (const json& l : j["layouts"]) CHECK(l["schedule"] != "interleaved");
  CHECK(r.err.find("search skips this layout") == std::string::npos);
  CHECK(j.value("warnings", json::array()).dump().find("search skips this layout") == std::string::npos);
}

// tester3 problem 10: a pipeline whose stages do not divide the layers (llama3_8b's 32 over pp 3) was forecast and
// ranked without a word, where uneven interleaved chunks warn. predict says the split; search, which ranks such
// layouts, says it once per pipeline depth.
TEST_CASE("parallel: layers that do not divide over pp warn with the stages' split", "[cli][parallel][search]") {
  // gpt2_large: 36 layers
  const std::string five = "the model's 36 layers do not divide over pp 5: its stages run 8/7/7/7/7 layers";
  const json p5 = predict("--batch 10 --pp 5 --microbatches 5");
  CHECK(warned(p5["warnings"], five));
  CHECK(p5["parallel"]["devices"][0]["layers"] == 8);
  CHECK(!warned(predict("--batch 16 --pp 4 --microbatches 4")["warnings"], "do not divide over pp"));
  // the interleaved one keeps its own words (search skips it)
  CHECK(!warned(predict("--batch 16 --pp 2 --microbatches 2 --schedule interleaved --virtual-stages 5")["warnings"],
                "do not divide over pp"));
  const auto r = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 5 --batch 10 --seq 1024 "
                         "--predictor roofline --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(warned(json::parse(r.out)["warnings"], "do not divide over pp 5: its stages run 8/7/7/7/7 layers"));
  CHECK(r.err.find("do not divide over pp 5") != std::string::npos);
}

// tester3 problem 11: search's JSON did not record the optimizer (null), the cluster, --distributed-optimizer or
// --sequence-parallel it searched with; it now says them under predict's keys.
TEST_CASE("search: the JSON records the optimizer and the parallel flags under predict's keys", "[cli][search]") {
  const std::string base = "search --model gpt2_large --gpu A100-SXM4-40GB --gpus 4 --batch 8 --seq 1024 --dtype bf16 "
                           "--predictor roofline --format json ";
  const auto r = run_cli(base + "--optimizer adamw --distributed-optimizer --sequence-parallel");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json s = json::parse(r.out);
  CHECK(s["optimizer"] == "adamw");
  CHECK(s["optimizer_impl"] == "fused");  // adamw's default
  CHECK(s["parallel"]["distributed_optimizer"] == true);
  CHECK(s["parallel"]["sequence_parallel"] == true);
  // the cluster as predict reports it for one of the layouts
  const json p = predict("--dtype bf16 --batch 8 --dp 2 --tp 2");
  CHECK(s["parallel"]["cluster"] == p["parallel"]["cluster"]);
  // defaults: adam in training
  const auto d = run_cli(base);
  REQUIRE(d.code == 0);
  const json sd = json::parse(d.out);
  CHECK(sd["optimizer"] == "adam");
  CHECK(sd["parallel"]["distributed_optimizer"] == false);
  CHECK(sd["parallel"]["sequence_parallel"] == false);
}

// tester7 P2: the summary (JSON parallel.compute_ms / exposed_comm_ms / bubble_ms / optimizer_ms, search's columns) was
// the device that finishes last, which in 1F1B is always stage 0: with DeepSeek's dense first layer(s) the lightest
// stage, so the summary showed its small compute and a bubble swollen by the other stages' extra work (DeepSeek-V3
// dp8 pp32 ep8: 9304 ms compute, 24685 ms "bubble"; the MoE stages 21373 ms compute, 10456 ms bubble). Now it is the
// busiest device (largest compute + exposed comm + optimizer step), its bubble the iteration less that, and
// imbalance_ms its busy time less the least busy device's. DeepSeek-V2-Lite (1 dense layer of 27) at pp 4: stages
// 7/7/7/6 layers, stage 0 holds the dense layer and the embedding, stage 3 the head; stages 1 and 2 are the busiest.
TEST_CASE("parallel: the summary is the busiest device's parts with uneven stages", "[cli][parallel]") {
  const std::string args = "predict --model deepseek_v2_lite --gpu h100 --mode train --batch 8 --seq 256 --dtype bf16 "
                           "--optimizer adamw --pp 4 --microbatches 8 --predictor roofline ";
  const auto r = run_cli(args + "--format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json p = json::parse(r.out)["parallel"];
  const json& devices = p["devices"];
  REQUIRE(devices.size() == 4);
  const auto busy = [](const json& d) {
    return d["compute_ms"].get<double>() + d["exposed_comm_ms"].get<double>() + d["optimizer_ms"].get<double>();
  };
  size_t busiest = 0;
  double least = busy(devices[0]);
  for (size_t i = 0; i < devices.size(); ++i) {
    if (busy(devices[i]) > busy(devices[busiest])) busiest = i;
    least = std::min(least, busy(devices[i]));
  }
  const json& b = devices[busiest];
  CHECK(busiest != 0);  // stage 0 finishes last but is not the busiest (the old summary's device)
  CHECK(p["critical_stage"].get<size_t>() == busiest);
  CHECK(p["compute_ms"].get<double>() == b["compute_ms"].get<double>());
  CHECK(p["exposed_comm_ms"].get<double>() == b["exposed_comm_ms"].get<double>());
  CHECK(p["optimizer_ms"].get<double>() == b["optimizer_ms"].get<double>());
  CHECK(p["bubble_ms"].get<double>() == b["bubble_ms"].get<double>());
  // the least idle device: every other device's bubble is at least its
  for (const auto& d : devices) CHECK(d["bubble_ms"].get<double>() >= p["bubble_ms"].get<double>());
  CHECK_THAT(p["compute_ms"].get<double>() + p["exposed_comm_ms"].get<double>() + p["optimizer_ms"].get<double>() +
                 p["bubble_ms"].get<double>(),
             Catch::Matchers::WithinRel(p["iteration_ms"].get<double>(), 1e-12));
  CHECK(p["imbalance_ms"].get<double>() > 0);
  CHECK_THAT(p["imbalance_ms"].get<double>(), Catch::Matchers::WithinRel(busy(b) - least, 1e-12));
  // the table says which device the summary is and its parts
  const auto t = run_cli(args);
  REQUIRE(t.code == 0);
  CHECK_THAT(t.out, Catch::Contains("\nbusiest   stage " + std::to_string(busiest) + ": compute "));
}

// The bubble is a difference of sums (iteration less compute, exposed communication and the optimizer step): a device
// that never waits read 4.3e-14 ms of bubble in the JSON, 2.8e-14 in search's CSV (GPT-2 Large at tp 4), so a
// script testing bubble_ms > 0 found a pipeline bubble without a pipeline.
TEST_CASE("parallel: a layout without a pipeline has a bubble of exactly 0", "[cli][parallel]") {
  for (const std::string layout : {"--tp 4", "--dp 4", "--tp 2 --dp 2 --distributed-optimizer"}) {
    const auto r = run_cli("predict --model gpt2_large --gpu a100_sxm4_40gb --mode train --optimizer adam --batch 4 "
                           "--seq 1024 --format json " + layout);
    INFO(layout << "\n" << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["parallel"]["bubble_ms"].get<double>() == 0.0);
    for (const auto& d : j["parallel"]["devices"]) CHECK(d["bubble_ms"].get<double>() == 0.0);
  }
  // a pipeline keeps its fill and drain
  const auto r = run_cli("predict --model gpt2_large --gpu a100_sxm4_40gb --mode train --optimizer adam --batch 4 "
                         "--seq 1024 --format json --pp 2 --microbatches 4");
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["parallel"]["bubble_ms"].get<double>() > 1.0);
}

// Megatron-LM's vocab-parallel cross-entropy all-reduces max, sum of exp and the target logit of every token after
// .float(): 3 × 4 bytes per token in a bf16 or fp8 run (they were priced at the compute dtype's 2 or 1 bytes).
TEST_CASE("parallel: the vocab-parallel loss all-reduce moves fp32 values", "[cli][parallel]") {
  for (const std::string dtype : {"bf16", "fp8", "fp32"}) {
    const auto r = run_cli("predict --model llama3_8b --gpu h100 --mode train --batch 2 --seq 2048 --tp 2 --format json "
                           "--dtype " + dtype);
    INFO(dtype << "\n" << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    size_t seen = 0;
    for (const auto& o : j["ops"]) {
      if (o["name"] != "loss.tp_all_reduce") continue;
      ++seen;
      CHECK(o["bytes"].get<double>() == 3.0 * 2 * 2047 * 4);  // 2 sequences of 2047 predicted tokens
    }
    CHECK(seen == 1);
  }
}

// search --mode inference --zero 1 showed a `zero 1` column beside the warning that --zero has no effect outside
// data-parallel training: the table drops the column outside training (as it drops recompute); the JSON keeps the
// stage as asked.
TEST_CASE("search: no zero column outside training - the JSON keeps the stage asked", "[cli][search][zero]") {
  const std::string args = " --model gpt2_large --gpu h100 --gpus 8 --batch 16 --seq 1024 --zero 1 --predictor roofline";
  const auto table = run_cli("search --mode inference" + args);
  INFO(table.err);
  REQUIRE(table.code == 0);
  CHECK(table.err.find("parallel.zero (--zero) has no effect") != std::string::npos);
  CHECK(table.out.find("rank   dp   tp   pp   mb  iteration ms") != std::string::npos);
  CHECK(table.out.find(" zero ") == std::string::npos);
  CHECK(table.out.find("zero = ZeRO stage") == std::string::npos);
  const json j = json::parse(run_cli("search --mode inference --format json" + args).out);
  REQUIRE(!j["layouts"].empty());
  for (const auto& l : j["layouts"]) CHECK(l["zero"] == 1);
  const auto train = run_cli("search --mode train" + args);
  REQUIRE(train.code == 0);
  CHECK(train.out.find("mb zero recompute") != std::string::npos);
}
