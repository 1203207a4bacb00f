// engine/ingest/measurement.h — a measured time to calibrate with (`predict --calibrate FILE`, `serve --batch …
// --calibrate FILE`): the file a calibration (core/calibration.h) is fitted to.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace ns {

// A measurement to calibrate with: a TOML file of measured milliseconds with an optional `note = "…"` (how it was
// measured). `use` says which: `predict --calibrate FILE` reads `latency_ms` (the measured time of the workload),
// `serve --batch … --calibrate FILE` reads `ttft_ms` (the batch's prefill: time to first token) and/or `tpot_ms` (the
// mean decode step: time per output token after the first). Throws ns::error "<file>:<line>:<col>: …" when the
// use's time is missing (serve: neither is given), for a value that is not a positive finite number of milliseconds,
// a note that is not a string and an unknown key (another use's key among them).
enum class measurement_use { predict, serve };
struct measurement {
  std::string source;
  std::optional<double> latency_ms;        // predict: always set
  std::optional<double> ttft_ms, tpot_ms;  // serve: one of them at least
  std::string note;
};
measurement measurement_load(const std::string& path, measurement_use use);
// The same from the file's text, named `source` in messages (what measurement_load calls; the fuzz target too).
measurement measurement_parse(std::string_view text, const std::string& source, measurement_use use);

}  // namespace ns
