// engine/ingest/measurement.cpp — reading a measurement file (measurement.h).
#include "ingest/measurement.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/text.h"
#include "core/time_limits.h"
#include "core/toml_read.h"

namespace ns {

measurement measurement_load(const std::string& path, measurement_use use) {
  return measurement_parse(text_file_read(path, path, text_file_max_script), path, use);
}

measurement measurement_parse(std::string_view text, const std::string& path, measurement_use use) {
  const bool serve = use == measurement_use::serve;
  measurement m;
  m.source = path;
  const toml::table t = toml_parse_text(text, path);
  const std::vector<std::string> keys =
      serve ? std::vector<std::string>{"ttft_ms", "tpot_ms", "note"} : std::vector<std::string>{"latency_ms", "note"};
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw error(toml_where(path, k.source().begin) + ": unknown key '" + key + "'" + text_did_you_mean(key, keys) +
                  (serve ? std::string(" (a serve measurement has ttft_ms, tpot_ms and note") +
                               (key == "latency_ms" ? "; latency_ms is predict --calibrate's" : "") + ")"
                         : " (a measurement has latency_ms and note)"));
  }
  using time = std::pair<const char*, std::optional<double>*>;
  const std::vector<time> times = serve ? std::vector<time>{{"ttft_ms", &m.ttft_ms}, {"tpot_ms", &m.tpot_ms}}
                                        : std::vector<time>{{"latency_ms", &m.latency_ms}};
  for (const auto& [key, into] : times) {
    const toml::node* n = t.get(key);
    if (!n) continue;
    // a measured time (core/time_limits.h): 1e-300 or 1e10 fitted every factor to its limit
    // an integer a double cannot hold exactly (9007199254740993) is no value<double>(): said as written
    *into = time_check(n->value<double>(), time_unit::ms, false, toml_where(path, n->source().begin) + ": " + key,
                       n->is_integer()  ? std::to_string(n->as_integer()->get())
                       : n->is_number() ? ""
                                        : std::string("a ") + toml_type_name(*n));
  }
  if (serve && !m.ttft_ms && !m.tpot_ms)
    throw error(path + ": needs ttft_ms (the measured prefill of the batch) or tpot_ms (its mean decode step), or "
                "both (milliseconds)");
  if (!serve && !m.latency_ms)
    throw error(path + ": missing key 'latency_ms' (the measured time of the workload, milliseconds)");
  if (const toml::node* n = t.get("note")) {
    const auto s = n->value<std::string>();
    if (!s) throw error(toml_where(path, n->source().begin) + ": note must be a string");
    m.note = *s;
  }
  return m;
}

}  // namespace ns
