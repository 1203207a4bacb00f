// engine/core/forecast.h — per-kernel latencies summed into phase totals and an end-to-end latency.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "core/graph.h"

namespace ns {

struct forecast {
  graph g;
  std::vector<kernel_instance> kernels;
  std::vector<double> seconds_each;             // per kernel, one instance
  std::array<double, 4> phase_seconds{};        // indexed by phase, replication included

  double seconds(size_t i) const { return seconds_each[i] * double(g.nodes[kernels[i].node].count); }
  double phase_total(phase p) const { return phase_seconds[size_t(p)]; }
  // forward + backward (incl. gradient accumulation) + optimizer
  double total() const;
  double flops_total() const;
  // Trainable parameters of the graph (node params × replication), optimizer nodes excluded.
  double params_total() const;
};

// Bytes of model state that must stay resident: weights, plus gradients when training, plus optimizer
// state (Adam: two fp32 moments per parameter; SGD without momentum: none). Activations are not counted,
// so this is a lower bound on the memory a run needs.
double state_bytes(double params, const std::string& dtype, bool training, const std::string& optimizer);

forecast forecast_make(graph g, std::vector<kernel_instance> kernels, std::vector<double> seconds_each);

}  // namespace ns
