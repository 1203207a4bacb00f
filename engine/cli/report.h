// engine/cli/report.h — what the commands print besides a single forecast (scripts/neusight/report.lua renders that):
// comparisons and the GPU list; and emit(), which writes any report.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/figures.h"
#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "lua/session.h"

namespace ns {

// A figure value as JSON (monostate → null).
nlohmann::ordered_json figure_json(const figure_value& v);
// A figure value as a CSV cell (monostate → empty; numbers exactly, %.17g).
std::string figure_csv(const figure_value& v);
std::string csv_field(const std::string& s);

// One row of a comparison (predict with list-valued flags): its inputs, latency_ms and figures in order, then
// `warnings` — or its inputs and `error`. `column` is the table header (empty: JSON and CSV only), `cell` the table text.
struct compare_cell {
  std::string key, column;
  figure_value value;
  std::string cell;
};
using compare_row = std::vector<compare_cell>;
// How many leading cells of every row are its inputs (model … recompute): the table shows those that differ between
// rows as columns and the others once above it.
constexpr size_t compare_input_cells = 13;

// The comparison as JSON {"rows": [...]}: each row's key → value, in order.
std::string compare_json(const std::vector<compare_row>& rows);
// The comparison as the JSON text scripts/neusight/compare.lua table / csv render (session::render):
// { source, inputs = compare_input_cells, rows = [[{ key, column, value, cell }, …], …] }.
std::string compare_doc(const std::vector<compare_row>& rows, const std::string& source);

// Writes the whole text at once: to stdout, or to a file through a temporary + rename (never half-written).
void emit(const std::string& text, const std::string& output);

std::string gpus_table(const std::vector<gpu_spec>& gpus);
std::string gpus_json(const std::vector<gpu_spec>& gpus);

// Writes `gpu`'s calibration file (core/calibration.h calibration_text) at `path`, with a header naming `by` (the
// command that fitted it) and `facts` (what was measured); returns the path as messages show it. predict's and serve's
// --calibrate.
std::string calibration_write(const gpu_spec& gpu, const std::filesystem::path& path,
                              const std::map<std::string, double>& factors, const std::string& by,
                              const std::vector<std::pair<std::string, std::variant<std::string, double>>>& facts);

}  // namespace ns
