// engine/core/cluster_spec.h — cluster descriptions (gpus/clusters/*.toml): GPUs per node and the intra/inter-node links.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ns {

// The ranges of a cluster, one source for a cluster file (cluster_spec_parse) and a workload's inline cluster
// (scripts/neusight/topology.lua reads them as require("neusight").cluster_limits()): a link's bandwidth is > 0 and
// at most cluster_max_bw_gbps, its latency >= 0 and at most cluster_max_latency_us (2^62 µs forecast 10^11 years), and
// gpus_per_node and nodes are 1 … cluster_max_count (a larger count is a typo, and would overflow the layouts).
inline constexpr double cluster_max_bw_gbps = 1e6;       // GB/s per direction
inline constexpr double cluster_max_latency_us = 1e6;    // microseconds per message
inline constexpr int64_t cluster_max_count = 1048576;    // 2^20 GPUs in a node, or nodes in a cluster

// One link level. Unset fields take scripts/neusight/topology.lua's defaults (intra bandwidth: the GPU file's
// interconnect; latencies 1 / 5 µs; efficiencies 0.72 / 0.8).
struct link_spec {
  std::optional<double> bw_gbps, latency_us, efficiency;
};

struct cluster_spec {
  std::string source;  // as shown in messages, e.g. "gpus/clusters/dgx_h100.toml"
  std::string name, description;
  // The GPUs the cluster was built for (key `gpu`: a name, or an array of them, each a GPU's name, alias or file stem as
  // gpu_spec_named reads it), empty when the file does not say (older files, GPU-agnostic ones such as pcie_8gpu): a
  // run on another GPU warns that it keeps these links (scripts/neusight/parallel/layout.lua cluster_gpu_warning).
  std::vector<std::string> gpus;
  // `--cluster none` / parallel.cluster = "none": no cluster file, the GPU's own links (what a run without a cluster
  // gets); every other field is unset.
  bool none = false;
  int64_t gpus_per_node = 0;
  std::optional<int64_t> nodes;  // unset: as many as the run needs
  link_spec intra, inter;
};

// Strict parse: unknown keys (with a suggestion), wrong types and out-of-range values are errors at file:line:col.
cluster_spec cluster_spec_parse(std::string_view toml_text, const std::string& source);

// A cluster by name (<dir>/<name>.toml) or by path (contains '/' or ends in .toml); "none" is no cluster file (the
// GPU's own links: cluster_spec::none), which drops a workload's cluster from the command line.
cluster_spec cluster_resolve(const std::filesystem::path& dir, const std::string& query);

}  // namespace ns
