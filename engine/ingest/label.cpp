// engine/ingest/label.cpp — reading a NeuSight label file (label.h).
#include "ingest/label.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/json_key.h"
#include "core/text.h"
#include "core/time_limits.h"

namespace ns {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

// "<file>:<line>" of the line holding the label's key "<key>", when the text holds it exactly once (a label is one
// flat object of four keys, so that is the key's own line); else "<file>": a wrong line is worse than none.
std::string label_where(const fs::path& file, const std::string& text, const std::string& key) {
  const size_t line = text_json_key_line(text, key);
  return line ? file.string() + ":" + std::to_string(line) : file.string();
}

}  // namespace

label_times label_read(const fs::path& file) {
  const std::string text = text_file_read(file.string(), file.string(), text_file_max_script);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw error(file.string() + ": invalid JSON: " + e.what());
  }
  label_times l;
  // the four keys NeuSight's label files have: any other is a typo ("FW_LATENCY", "e2e_latancy" beside the real one)
  // and an error, not ignored
  if (j.is_object()) {
    const std::vector<std::string> keys = {"num_layer", "e2e_latency", "fw_latency", "bwall_latency"};
    for (const auto& [k, v] : j.items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end())
        throw error(label_where(file, text, k) + ": unknown key '" + k + "'" + text_did_you_mean(k, keys) +
                    " (a label has num_layer, e2e_latency, fw_latency and bwall_latency)");
  }
  // Times are measured times (core/time_limits.h); fw_latency and bwall_latency may be 0 (no backward pass).
  auto shown = [](const json& v) { return v.is_number() ? fmt::format("{:g}", v.get<double>()) : v.dump(); };
  auto number = [](const json& v) { return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt; };
  for (auto [key, into] : {std::pair{"fw_latency", &l.fw_ms}, std::pair{"bwall_latency", &l.bwall_ms}}) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    *into = time_check(number(*it), time_unit::ms, true, label_where(file, text, key) + ": key '" + key + "'", shown(*it));
  }
  const auto e2e = j.find("e2e_latency");
  if (e2e == j.end())
    throw error(file.string() + ": missing key 'e2e_latency' (the measured time of one iteration, milliseconds)");
  l.e2e_ms = time_check(number(*e2e), time_unit::ms, false, label_where(file, text, "e2e_latency") + ": key 'e2e_latency'",
                        shown(*e2e));
  const auto layers = j.find("num_layer");
  // at most 100000 layers: more is a unit slip, not a measurement
  if (layers == j.end() || !layers->is_number_integer() || layers->get<int64_t>() < 0 || layers->get<int64_t>() > 100000)
    throw error((layers == j.end() ? file.string() : label_where(file, text, "num_layer")) +
                ": key 'num_layer' must be a non-negative integer of at most 100000");
  l.num_layer = layers->get<int64_t>();
  return l;
}

}  // namespace ns
