// engine/ingest/label.h — a NeuSight label file (label/<GPU>/<tag>.json): the measured time of one iteration. Read by
// `eval models` (the end-to-end time a forecast is scored against) and by `scale` (the origin of a label CSV beside it).
#pragma once
#include <cstdint>
#include <filesystem>

namespace ns {

struct label_times {
  double e2e_ms = 0;             // e2e_latency: one iteration, measured end to end
  double fw_ms = 0, bwall_ms = 0;  // fw_latency, bwall_latency: its forward and backward parts (0: not given / none)
  int64_t num_layer = 0;
};

// Reads and checks a label file: the four keys NeuSight's labels have (num_layer, e2e_latency, fw_latency,
// bwall_latency; any other is an error with close matches), e2e_latency a measured time (core/time_limits.h),
// fw_latency and bwall_latency 0 or one, num_layer an integer 0 to 100000. Errors name file:line of the key.
label_times label_read(const std::filesystem::path& file);

}  // namespace ns
