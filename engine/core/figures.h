// engine/core/figures.h — named values computed by a Lua rule (scripts/neusight/figures.lua) and rendered as they come:
// the engine knows no figure by name.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ns {

// monostate: not available (JSON null, an empty CSV cell).
using figure_value = std::variant<std::monostate, int64_t, double, bool, std::string>;

// A figure's number, integer or not (Lua's math.min(20, x) is the integer 20); nullopt for anything else. What C++
// reads a figure as a number with (a factor clamped to an integer limit used to vanish from the calibration file).
inline std::optional<double> figure_number(const figure_value& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return double(*i);
  return std::nullopt;
}

// Inputs handed to the rule, by name.
using figure_inputs = std::vector<std::pair<std::string, figure_value>>;

struct figure {
  std::string key;           // JSON and CSV name
  figure_value value;
  std::string column, cell;  // comparison-table header and cell text; no column: not shown in the table
  bool top = false;          // a single forecast's JSON has it beside latency_ms instead of in `figures`
};

struct figures {
  std::vector<figure> fields;      // in display order
  std::vector<std::string> lines;  // summary lines of a single forecast's table
  std::vector<std::string> warnings;  // joined to the forecast's warnings (stderr, JSON `warnings`)
};

// The value of the field `key` (the first, when a rule gave it twice), nullptr when there is none: what C++ finds one
// figure by.
inline const figure_value* figure_find(const figures& f, const std::string& key) {
  for (const auto& x : f.fields)
    if (x.key == key) return &x.value;
  return nullptr;
}

// The factor.<family> fields of a calibration fit (scripts/neusight/calibration.lua fit, fit_trace, fit_serve), by
// family (`prefix` "decode_factor.": fit_serve's decode-step factors); the fit's other fields are the caller's to read.
inline std::map<std::string, double> figure_factors(const figures& fit, const std::string& prefix = "factor.") {
  std::map<std::string, double> factors;
  for (const auto& x : fit.fields)
    if (const auto v = figure_number(x.value); v && x.key.rfind(prefix, 0) == 0) factors[x.key.substr(prefix.size())] = *v;
  return factors;
}

}  // namespace ns
