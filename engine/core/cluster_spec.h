// engine/core/cluster_spec.h — cluster descriptions (gpus/clusters/*.toml): GPUs per node and the intra/inter-node links.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ns {

// One link level. Unset fields take scripts/neusight/topology.lua's defaults (intra bandwidth: the GPU file's
// interconnect; latencies 1 / 5 µs; efficiencies 0.72 / 0.8).
struct link_spec {
  std::optional<double> bw_gbps, latency_us, efficiency;
};

struct cluster_spec {
  std::string source;  // as shown in messages, e.g. "gpus/clusters/dgx_h100.toml"
  std::string name, description;
  int64_t gpus_per_node = 0;
  std::optional<int64_t> nodes;  // unset: as many as the run needs
  link_spec intra, inter;
};

// Strict parse: unknown keys (with a suggestion), wrong types and out-of-range values are errors at file:line:col.
cluster_spec cluster_spec_parse(std::string_view toml_text, const std::string& source);

// A cluster by name (<dir>/<name>.toml) or by path (contains '/' or ends in .toml).
cluster_spec cluster_resolve(const std::filesystem::path& dir, const std::string& query);

}  // namespace ns
