// tests/cli/test_gpu_file_cli.cpp — what a run takes from GPU files and cluster files: a cluster built for another GPU
// warns (and --cluster none gives the GPU's own links), a calibration warns once its GPU file was edited, a
// script's relative GPU path is the script's, and a file's architecture is the tile rules' to know. Every calibration works on a copy of a GPU file in a temp folder.
#include <algorithm>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

bool has(const json& warnings, const std::string& text) { return warnings.dump().find(text) != std::string::npos; }

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("cluster file of another GPU: the run warns naming its links and --cluster none takes the GPU's own",
          "[cli][parallel][cluster]") {
  const std::string run = "run examples/gpt3_train.lua --predictor roofline";
  const json l4 = run_json(run + " --gpu l4");
  INFO(l4["warnings"].dump());
  CHECK(l4["parallel"]["cluster"]["file"] == "gpus/clusters/dgx_h100.toml");
  CHECK(has(l4["warnings"], "parallel.cluster: gpus/clusters/dgx_h100.toml describes nodes of H100-SXM5-80GB, not of "
                            "the L4 this run forecasts; its links price the communication (intra-node 450 GB/s"));
  CHECK(has(l4["warnings"], "For the L4's own links (intra-node 32 GB/s per direction) give --cluster none"));
  // --cluster none: the L4's own links, the forecast of the same layout without a cluster, and nothing to warn of
  const json own = run_json(run + " --gpu l4 --cluster none");
  CHECK_FALSE(has(own["warnings"], "parallel.cluster"));
  CHECK(own["parallel"]["cluster"]["file"] == "");
  const json flags = run_json("predict --model gpt3_175b --mode train --batch 64 --seq 2048 --dtype bf16 --optimizer adamw "
                              "--precision amp --attention sdpa --tp 8 --pp 8 --microbatches 64 --schedule 1f1b "
                              "--sequence-parallel --gpu l4 --predictor roofline");
  CHECK(own["latency_ms"].get<double>() == flags["latency_ms"].get<double>());
  CHECK(own["latency_ms"].get<double>() > l4["latency_ms"].get<double>());  // PCIe, not NVLink
  // the script's own GPU, and a DGX A100 of either A100 SXM4 part: the cluster's GPU, nothing said
  CHECK_FALSE(has(run_json(run)["warnings"], "parallel.cluster"));
  for (const char* gpu : {"A100-SXM4-40GB", "a100_sxm4_80gb"}) {
    const json a = run_json("predict --model gpt2_large --gpu " + std::string(gpu) + " --mode train --batch 8 --seq 1024 "
                            "--tp 4 --dp 4 --cluster dgx_a100 --predictor roofline");
    CHECK_FALSE(has(a["warnings"], "parallel.cluster"));
  }
  // a GPU-agnostic cluster file (no `gpu` key: pcie_8gpu, and every cluster file written before the key) says nothing
  CHECK_FALSE(has(run_json(run + " --gpu l4 --cluster pcie_8gpu")["warnings"], "parallel.cluster"));
}

TEST_CASE("calibration of an edited GPU file: every forecast applying it warns naming the changed keys",
          "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = ns_test::gpu_copy(t, "a100_sxm4_40gb").string();
  const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 1 --seq 512";
  const double ms = run_json(args)["latency_ms"].get<double>();
  const fs::path m = t.write("m.toml", "latency_ms = " + std::to_string(ms * 1.5) + "\n");
  const auto fit = run_cli(args + " --calibrate '" + m.string() + "'");
  INFO(fit.err);
  REQUIRE(fit.code == 0);
  const fs::path cal = t.path / "a100_sxm4_40gb.calibration.toml";
  const std::string written = ns_test::slurp(cal);
  CHECK(written.find("\n[gpu_file]") != std::string::npos);
  CHECK(written.find("\nmem_bw_gbps = 1555.0\n") != std::string::npos);
  const json fresh = run_json(args);
  CHECK_FALSE(has(fresh["warnings"], "another version"));
  // the GPU file edited: bandwidth and memory
  const std::string text = ns_test::slurp(gpu);
  t.write("a100_sxm4_40gb.toml", replaced(replaced(text, "mem_bw_gbps = 1555.0", "mem_bw_gbps = 3110.0"),
                                          "mem_gb = 40", "mem_gb = 48"));
  const std::string stale = "a100_sxm4_40gb.calibration.toml was fitted to another version of " + gpu +
                            " (changed since: mem_gb, mem_bw_gbps): its factors correct the forecasts of the old "
                            "numbers; refit it";
  // (decode steps: a calibration from an inference measurement leaves them uncalibrated, so nothing is applied there)
  for (const char* mode : {"--mode inference --batch 1 --seq 512", "--mode train --batch 1 --seq 512",
                           "--mode prefill --batch 2 --seq 256"}) {
    const json after = run_json("predict --model gpt2_large --gpu '" + gpu + "' " + mode);
    INFO(mode << ": " << after["warnings"].dump());
    CHECK(has(after["warnings"], stale));
    CHECK(has(after["warnings"], "or give --no-calibration"));
  }
  const auto table = run_cli(args);
  CHECK(table.err.find(stale) != std::string::npos);  // stderr too
  CHECK_FALSE(has(run_json(args + " --no-calibration")["warnings"], "another version"));
  // serve and search say it too
  const auto serve = run_cli("serve --model gpt2_large --gpu '" + gpu + "' --batch 2 --input-len 128 --output-len 16");
  CHECK(serve.out.find(stale) != std::string::npos);  // serve's report lists its warnings
  const auto search = run_cli("search --model gpt2_large --gpu '" + gpu + "' --gpus 2 --batch 8 --seq 512 --mode train");
  CHECK(search.err.find(stale) != std::string::npos);
  // an older calibration without [gpu_file] is applied as it is, silently
  const std::string old = written.substr(0, written.find("\n[gpu_file]")) + "\n";
  t.write("a100_sxm4_40gb.calibration.toml", old);
  const json older = run_json(args);
  CHECK_FALSE(has(older["warnings"], "another version"));
  CHECK(older["figures"]["calibration"].is_string());
  // a strict reader: an unknown key in [gpu_file] is an error at its line
  t.write("a100_sxm4_40gb.calibration.toml", old + "\n[gpu_file]\nmem_bw_gbsp = 1555.0\n");
  const auto bad = run_cli(args);
  CHECK(bad.code != 0);
  CHECK(bad.err.find("unknown GPU file key 'gpu_file.mem_bw_gbsp' (did you mean 'mem_bw_gbps'?)") != std::string::npos);
}

TEST_CASE("workload script: a relative GPU file path is the script's - from any folder", "[cli][workload]") {
  temp_dir t;
  ns_test::gpu_copy(t, "l4", "wl");
  t.write("wl/own.toml", replaced(ns_test::slurp(ns_test::source_dir / "gpus" / "l4.toml"), "name = \"L4\"",
                                  "name = \"L4-own\""));
  t.write("wl/w.lua", "return { model = \"gpt2_large\", gpu = \"own.toml\", mode = \"inference\", batch = 1, seq = 64 }\n");
  // from the source folder (run_cli's), where no own.toml is
  const json j = run_json("run '" + (t.path / "wl" / "w.lua").string() + "' --predictor roofline");
  CHECK(j["gpu"] == "L4-own");
  CHECK(j["gpu_file"] == (t.path / "wl" / "own.toml").lexically_normal().generic_string());
  // a bundled GPU by name, and a path only the current folder has (as before), still resolve
  t.write("wl/n.lua", "return { model = \"gpt2_large\", gpu = \"h100\", mode = \"inference\", batch = 1, seq = 64 }\n");
  CHECK(run_json("run '" + (t.path / "wl" / "n.lua").string() + "' --predictor roofline")["gpu"] == "H100-SXM5-80GB");
  t.write("wl/c.lua", "return { model = \"gpt2_large\", gpu = \"gpus/l40s.toml\", mode = \"inference\", batch = 1, "
                      "seq = 64 }\n");
  CHECK(run_json("run '" + (t.path / "wl" / "c.lua").string() + "' --predictor roofline")["gpu"] == "L40S");
}

// A GPU file's architecture is the tile rules' to know (scripts/tiling/gemm.lua M.vendors, the one list, with each
// architecture's vendor): one they do not know is an error at the file's architecture line when it loads (it was the
// tile rule's error, without the line, once a GEMM was tiled), one a --scripts gemm.lua adds loads and forecasts, and
// the vendor it gives is the one the file is held to (the engine kept its own list, which the scripts could not change).
TEST_CASE("GPU file: its architecture is checked against the tile rules' list - a --scripts gemm.lua may add one",
          "[cli][gpu][scripts]") {
  temp_dir t;
  const std::string shipped = ns_test::slurp(ns_test::source_dir / "gpus" / "h100_sxm5_80gb.toml");
  const std::string text = replaced(shipped, "architecture = \"hopper\"", "architecture = \"rubin\"");
  const fs::path gpu = t.write("rubin.toml", text);
  const auto line_of = [&](const std::string& prefix) {
    const size_t at = text.find("\n" + prefix);
    REQUIRE(at != std::string::npos);
    return std::to_string(std::count(text.begin(), text.begin() + long(at) + 1, '\n') + 1);
  };
  const std::string args = "predict --model gpt2_med --mode inference --batch 1 --seq 128 --dtype bf16 --predictor "
                           "roofline --format json --gpu '" + gpu.string() + "'";
  const auto unknown = run_cli(args);
  INFO(unknown.err);
  CHECK(unknown.code == 1);
  CHECK(unknown.out.empty());
  CHECK(unknown.err.find(gpu.string() + ":" + line_of("architecture =") + ":1: architecture 'rubin' is not one the tile "
                         "rules know (scripts/tiling/gemm.lua M.vendors knows ") != std::string::npos);
  // a gemm.lua of your own that knows it, with the rules it follows
  std::string gemm = ns_test::slurp(ns_test::source_dir / "scripts" / "tiling" / "gemm.lua");
  gemm = replaced(gemm, "M.families = {\n", "M.families = {\n  rubin = \"ampere\",\n");
  gemm = replaced(gemm, "M.tc_families = {\n", "M.tc_families = {\n  rubin = { set = \"wgmma\", prefix = \"sm100_xmma_gemm\" },\n");
  t.write("s/tiling/gemm.lua", replaced(gemm, "M.vendors = {\n", "M.vendors = {\n  rubin = \"nvidia\",\n"));
  const auto added = run_cli(args + " --scripts '" + (t.path / "s").string() + "'");
  INFO(added.err);
  REQUIRE(added.code == 0);
  CHECK(json::parse(added.out)["latency_ms"].get<double>() > 0);
  // its vendor is the list's: a file of the other vendor is refused at its architecture line, naming the vendor's
  t.write("a/tiling/gemm.lua", replaced(gemm, "M.vendors = {\n", "M.vendors = {\n  rubin = \"amd\",\n"));
  const auto other = run_cli(args + " --scripts '" + (t.path / "a").string() + "'");
  INFO(other.err);
  CHECK(other.code == 1);
  CHECK(other.err.find(gpu.string() + ":" + line_of("architecture =") + ":1: architecture 'rubin' is an AMD "
                       "architecture, but vendor = \"nvidia\" (line " + line_of("vendor =") + ")") != std::string::npos);
}
