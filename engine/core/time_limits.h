// engine/core/time_limits.h — the range of a measured time, one rule for the readers of an end-to-end or per-op time:
// NeuSight label files (cli/models_cmd.cpp), label-trace CSVs (ingest/trace.cpp), calibration measurements
// (core/calibration.cpp) and a kernel's given seconds (lua/wrap_graph.cpp). Two readers keep their own, wider
// bounds: a profiler event's duration (ingest/trace.cpp event_max_us: 0 to 1e10 µs, a Chrome trace's `dur` and a
// wavescale trace's duration_ns and wall_ns; profiler traces hold zero-length events) and a training dataset's
// latencies (ingest/dataset.cpp: |v| <= 1e7 ms).
#pragma once
#include <optional>
#include <string>

namespace ns {

// A measured time is 1e-6 ms (1 ns: no GPU runs a kernel, let alone a model, faster; less is a unit slip, e.g.
// 1e-300, and fitted every calibration factor to its limit) to 1e9 ms (11 days for one op or iteration; 1e10 fitted
// every factor to its limit too). The messages print the limits as "1e-6", "1e9" (core/text.h text_limit).
inline constexpr double time_min_ms = 1e-6;
inline constexpr double time_max_ms = 1e9;

enum class time_unit { ms, s };

// The limits in `unit` (seconds: 1e-9 and 1e6, as the literals are).
inline double time_min(time_unit unit) { return unit == time_unit::s ? time_min_ms * 1e-3 : time_min_ms; }
inline double time_max(time_unit unit) { return unit == time_unit::s ? time_max_ms * 1e-3 : time_max_ms; }

// Whether `x` (in `unit`) is a measured time: finite and within the limits, or 0 where `zero_ok` (0: not measured,
// no backward pass).
bool time_ok(double x, time_unit unit, bool zero_ok);

// `x` when time_ok, else throws ns::error
//   "<what> must be [0 or ]a time of 1e-6 to 1e9 ms (got <got>)[: a time that short|long is a unit slip, not a
//   measurement]"
// (seconds: "1e-9 to 1e6 s"). nullopt: not a number at all. `got` is the value as the input wrote it (a JSON dump, a
// CSV cell); empty: `x` printed with %g.
double time_check(std::optional<double> x, time_unit unit, bool zero_ok, const std::string& what,
                  const std::string& got = "");

}  // namespace ns
