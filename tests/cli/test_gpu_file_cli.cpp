// tests/cli/test_gpu_file_cli.cpp — what a run takes from GPU files and cluster files: a cluster built for another GPU
// warns (and --cluster none gives the GPU's own links), a calibration warns once its GPU file was edited, and a
// script's relative GPU path is the script's. Every calibration works on a copy of a GPU file in a temp folder.
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
