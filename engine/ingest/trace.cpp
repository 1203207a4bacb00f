// engine/ingest/trace.cpp — readers for PyTorch Chrome traces, wavescale CSV traces and label CSVs (see trace.h).
#include "ingest/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ingest/csv.h"
#include "ingest/pyliteral.h"
#include "core/text.h"
#include "core/time_limits.h"

namespace ns {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string read_file(const fs::path& p) { return text_file_read(p.string(), p.string(), text_file_max_data); }

size_t line_of_offset(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

// nlohmann's parse errors carry a byte offset; turn them into "<source>:<line>: invalid JSON: <what>".
json json_parse_or_throw(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    const size_t colon = what.find(": ", what.find("column"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    const size_t at = e.byte == 0 ? 0 : e.byte - 1;
    throw error(source + ":" + std::to_string(line_of_offset(text, at)) + ": invalid JSON: " + what);
  } catch (const json::exception& e) {  // out_of_range 406: a number beyond double ("1E999"); nlohmann gives no position
    std::string what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) what = what.substr(what.find("] ") + 2);
    throw error(source + ": invalid JSON: " + what);
  }
}

// ---- cells ----------------------------------------------------------------------------------------------

int64_t cell_int(const std::string& s, const std::string& where, std::string_view col) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE)
    throw error(where + ": column '" + std::string(col) + "': expected an integer, got '" + s + "'");
  return v;
}

double cell_double(const std::string& s, const std::string& where, std::string_view col) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  // decimal only: strtod also reads hex (0x10) and inf
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v) ||
      s.find_first_not_of("0123456789+-.eE") != std::string::npos)
    throw error(where + ": column '" + std::string(col) + "': expected a number, got '" + s + "'");
  return v;
}

double cell_nonneg(const std::string& s, const std::string& where, std::string_view col) {
  const double v = cell_double(s, where, col);
  if (v < 0) throw error(where + ": column '" + std::string(col) + "': negative value " + s);
  return v;
}

std::optional<double> cell_opt(const csv_table& t, size_t row, std::string_view col) {
  if (!t.has_column(col)) return std::nullopt;
  const std::string& s = t.rows[row][t.column(col)];
  if (s.empty()) return std::nullopt;
  return cell_nonneg(s, t.where(row), col);
}

// The longest profiler event, in µs: 1e10 (almost 3 hours), a Chrome trace's 'dur' and a wavescale trace's duration_ns
// and wall_ns alike. Longer is a unit slip or garbage that would dominate every figure computed from the trace (and
// two events near 1e308 ns sum to inf, a forecast of null).
constexpr double event_max_us = 1e10;

// A wavescale nanosecond cell (`v` read from it) of at most event_max_us.
double event_ns_check(double v, const std::string& where, std::string_view col, const std::string& cell) {
  if (!(v <= event_max_us * 1e3))
    throw error(where + ": column '" + std::string(col) + "': must be at most 1e13 ns (1e10 microseconds, the longest "
                "profiler event), got '" + cell + "'");
  return v;
}

// ---- kernels ----------------------------------------------------------------------------------------------

// Launch limits of the GPUs the engine models (CUDA and HIP alike): grid dimensions up to 2^31 - 1, at most 1024
// threads per block, 512 registers per thread (AMD's VGPRs + AGPRs; NVIDIA allows 255), 1 MiB of shared memory per
// block (no GPU has more than 256 KB per SM). Blocks in all are capped at 2^53 (exact in a double). They keep
// blocks(), threads_per_block() and the occupancy arithmetic (registers x warp size) far from int64 overflow.
constexpr int64_t kernel_max_grid_dim = 2147483647, kernel_max_threads = 1024, kernel_max_registers = 512;
constexpr int64_t kernel_max_shared_bytes = int64_t(1) << 20;
constexpr double kernel_max_blocks = 9007199254740992.0;  // 2^53

// `at` is "<file>:<line>: <kernel>"; grid and block dimensions are already known to be >= 1.
void kernel_check(const trace_kernel& k, const std::string& at) {
  const auto dims = [](const std::array<int64_t, 3>& v) {
    return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
  };
  if (*std::max_element(k.grid.begin(), k.grid.end()) > kernel_max_grid_dim ||
      double(k.grid[0]) * double(k.grid[1]) * double(k.grid[2]) > kernel_max_blocks)
    throw error(at + ": grid " + dims(k.grid) + " is out of range (each dimension at most 2^31-1, 2^53 blocks in all)");
  if (double(k.block[0]) * double(k.block[1]) * double(k.block[2]) > double(kernel_max_threads))
    throw error(at + ": block " + dims(k.block) + " has more than " + std::to_string(kernel_max_threads) + " threads");
  if (k.registers > kernel_max_registers)
    throw error(at + ": " + std::to_string(k.registers) + " registers per thread is out of range (at most " +
                std::to_string(kernel_max_registers) + ")");
  if (k.shared_bytes > kernel_max_shared_bytes)
    throw error(at + ": " + std::to_string(k.shared_bytes) + " bytes of shared memory per block is out of range (at most " +
                std::to_string(kernel_max_shared_bytes) + ")");
}

// ---- label CSV ------------------------------------------------------------------------------------------

trace_shape shape_from(const py_value& v, const std::string& where, std::string_view col) {
  if (!v.is_sequence()) throw error(where + ": column '" + std::string(col) + "': expected a shape, got an integer");
  trace_shape s;
  for (const py_value& d : v.items) {
    if (d.t != py_value::type::integer)
      throw error(where + ": column '" + std::string(col) + "': shape dimensions must be integers");
    if (d.i < 0 || d.i > (int64_t(1) << 32))  // a larger dimension wraps the products computed from it
      throw error(where + ": column '" + std::string(col) + "': shape dimensions must be in 0..2^32, got " +
                  std::to_string(d.i));
    s.push_back(d.i);
  }
  return s;
}

py_value cell_py(const std::string& s, const std::string& where, std::string_view col) {
  try {
    return py_parse(s);
  } catch (const error& e) {
    throw error(where + ": column '" + std::string(col) + "': " + e.what());
  }
}

// "<built-in function add>" -> "add", "<built-in method arange of type object at 0x..>" -> "arange",
// "<function gelu at 0x..>" -> "gelu"; method and module targets are kept as they are.
std::string fx_kind(const std::string& target) {
  if (target.size() < 2 || target.front() != '<') return target;
  for (const char* prefix : {"<built-in function ", "<built-in method ", "<function ", "<method "}) {
    const std::string_view p(prefix);
    if (target.compare(0, p.size(), p) == 0) {
      std::string rest = target.substr(p.size());
      const size_t end = rest.find_first_of(" >");
      return rest.substr(0, end);
    }
  }
  return target;
}

// ---- chrome trace ---------------------------------------------------------------------------------------

// Line of each element of the trace-event array (root["traceEvents"], or the root array itself), in order.
// A small scanner over the already-validated JSON text: nlohmann keeps no positions.
std::vector<size_t> chrome_event_lines(std::string_view text) {
  std::vector<size_t> lines;
  std::vector<char> stack;  // '{' or '['
  size_t line = 1;
  std::string last_string;
  std::string root_key;       // last key read directly in the root object
  int events_depth = -1;      // stack depth of the event array once opened
  bool expect_key = false;
  bool expect_elem = false;   // at the event array's level, after '[' or ','
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool at_events = events_depth >= 0 && static_cast<int>(stack.size()) == events_depth;
    if (at_events && expect_elem && c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != ']') {
      lines.push_back(line);  // first character of an element, whatever its type
      expect_elem = false;
    }
    if (at_events && c == ',') expect_elem = true;
    if (c == '\n') {
      ++line;
    } else if (c == '"') {
      std::string s;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
        else s += text[i];
        if (i < text.size() && text[i] == '\n') ++line;
      }
      last_string = std::move(s);
      expect_key = stack.size() == 1 && stack[0] == '{';
    } else if (c == ':') {
      if (expect_key) root_key = last_string;
      expect_key = false;
    } else if (c == '{' || c == '[') {
      if (c == '[' && events_depth == -1 &&
          (stack.empty() || (stack.size() == 1 && stack[0] == '{' && root_key == "traceEvents"))) {
        events_depth = static_cast<int>(stack.size()) + 1;
        expect_elem = true;
      }
      stack.push_back(c);
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
      if (events_depth >= 0 && static_cast<int>(stack.size()) < events_depth) events_depth = -2;  // closed
    }
  }
  return lines;
}

struct cpu_event {
  size_t index;     // position in traceEvents
  std::string name;
  int64_t pid = 0, tid = 0;
  double ts = 0, dur = 0;
  enum class role { op, backward, optimizer } r = role::op;
  const json* args = nullptr;
  size_t root = 0;  // index into the cpu_event vector of the outermost enclosing event
};

std::string lower(std::string s) { return text_lower(s); }

// A JSON value named for an error: its type and, for a scalar, its text ('a string "12.5"', 'a boolean true').
std::string json_got(const json& v) {
  if (v.is_string()) return "a string " + v.dump();
  if (v.is_boolean()) return "a boolean " + v.dump();
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "the number " + v.dump();
}

// pid/tid are integers or strings in Kineto output; anything else (a fraction, a boolean, null) is an edited trace,
// whose events would be nested under the wrong thread.
int64_t json_id(const json& v, const std::string& at, const char* key) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) return static_cast<int64_t>(std::hash<std::string>{}(v.get<std::string>()));
  throw error(at + ": '" + key + "' must be an integer or a string (got " + json_got(v) + ")");
}

// A cpu_op's "Input Dims" and "Input type" (Kineto with record_shapes). A non-tensor argument has dims [] and a
// tensor list nested dims: both give an empty shape. Any other entry (a size that is a string, a fraction, null; an
// entry that is no list) is an edited or broken trace, an error naming the event: read as a non-tensor argument it
// left the op unpriced, wave-scaled under a warning that named no event.
void chrome_inputs(const json* args, trace_op& op, const std::string& at, const std::string& event) {
  op.input_shapes.clear();
  op.input_types.clear();
  op.input_values.clear();
  if (!args) return;
  if (args->contains("Input Dims") && !(*args)["Input Dims"].is_array())
    throw error(at + ": args.Input Dims of '" + event + "' must be a list (got " + json_got((*args)["Input Dims"]) + ")");
  if (args->contains("Input Dims")) {
    const auto sizes = [](const json& v) {
      return v.is_array() && std::all_of(v.begin(), v.end(), [](const json& d) { return d.is_number_integer(); });
    };
    for (const json& dims : (*args)["Input Dims"]) {
      trace_shape s;
      if (!sizes(dims) && !(dims.is_array() && std::all_of(dims.begin(), dims.end(), sizes)))
        throw error(at + ": args.Input Dims of '" + event + "' must hold lists of integer sizes (got " + dims.dump() + ")");
      if (sizes(dims)) {
        for (const json& d : dims) {
          if (d.get<int64_t>() < 0)
            throw error(at + ": args.Input Dims of '" + event + "' must hold sizes >= 0 (got " + d.dump() + ")");
          s.push_back(d.get<int64_t>());
        }
      }
      op.input_shapes.push_back(std::move(s));
    }
  }
  if (args->contains("Input type") && (*args)["Input type"].is_array())
    for (const json& t : (*args)["Input type"]) op.input_types.push_back(t.is_string() ? t.get<std::string>() : "");
  // One per input; a trace without dims has none. Dims without types (an edited or converted trace) give "" each, a
  // type not recorded, which scripts/neusight/scale.lua kernels() does not price: no element type is guessed (an
  // empty list is a wavescale trace's, whose data is fp32; a bf16 GEMM taken as fp32 moved 4x off to an L4).
  op.input_types.resize(op.input_shapes.size());
  if (args->contains("Concrete Inputs") && (*args)["Concrete Inputs"].is_array()) {
    for (const json& v : (*args)["Concrete Inputs"]) op.input_values.push_back(v.is_string() ? v.get<std::string>() : "");
    op.input_values.resize(op.input_shapes.size());
  }
}

// The autograd sequence number of a cpu_op (-1 or absent: none).
std::optional<int64_t> chrome_seq(const json* args) {
  if (!args || !args->contains("Sequence number")) return std::nullopt;
  const json& v = (*args)["Sequence number"];
  if (!v.is_number_integer() || v.get<int64_t>() < 0) return std::nullopt;
  return v.get<int64_t>();
}

}  // namespace

std::string_view trace_phase_name(trace_phase p) {
  switch (p) {
    case trace_phase::forward: return "forward";
    case trace_phase::backward: return "backward";
    case trace_phase::accumulate: return "accumulate";
    case trace_phase::optimizer: return "optimizer";
    case trace_phase::other: return "other";
  }
  return "?";
}

std::string_view trace_format_name(trace_format f) {
  switch (f) {
    case trace_format::chrome_json: return "chrome_json";
    case trace_format::wavescale: return "wavescale";
    case trace_format::label_csv: return "label_csv";
  }
  return "?";
}

// The columns of the reference's per-op label traces (every file of ../shared/data/neusight/label has these, 27 of 61
// also _sort_key). Others are carried along unread; one a letter or two from a known name is a typo, not extra data.
const std::vector<std::string> label_csv_columns = {
    "op",       "target",        "_input_nodes", "_args",           "_kwargs",    "users",      "type",
    "_prev",    "_next",         "_erased",      "_sort_key",       "_repr_fn",   "meta",       "input_shapes",
    "input_contiguous", "contiguous", "latency", "fw_latency", "bw_latency", "acc_latency", "output_shape",
    "dtype",    "Name"};

trace trace_parse_label_csv(std::string_view text, const std::string& source, const std::string& device) {
  const csv_table t = csv_parse(text, source);
  // a typo stands for a column the header lacks: only those are compared ('time' beside 'type', 'name' beside 'Name'
  // are extra data, not misspellings of columns that are there)
  std::vector<std::string> missing;
  for (const std::string& known : label_csv_columns)
    if (std::find(t.header.begin(), t.header.end(), known) == t.header.end()) missing.push_back(known);
  for (const std::string& h : t.header) {
    if (std::find(label_csv_columns.begin(), label_csv_columns.end(), h) != label_csv_columns.end()) continue;
    for (const std::string& known : missing)
      if (known.size() >= 4 && text_edit_distance(text_lower(h), text_lower(known)) <= 2)
        throw error(source + ":1: unknown column '" + h + "' (did you mean '" + known + "'?)");
  }
  // the columns read: one missing is named at the header's line, with the others (csv_table::column's did-you-mean
  // would offer a column that is there for another purpose: 'input_shapes' for a missing 'output_shape')
  for (const char* need : {"Name", "input_shapes", "output_shape", "fw_latency", "bw_latency", "acc_latency"})
    if (!t.has_column(need))
      throw error(source + ":1: missing column '" + need + "' (a label CSV has the columns Name, input_shapes, "
                  "output_shape, fw_latency, bw_latency and acc_latency)");
  const size_t c_name = t.column("Name"), c_in = t.column("input_shapes"), c_out = t.column("output_shape");
  const size_t c_fw = t.column("fw_latency"), c_bw = t.column("bw_latency"), c_acc = t.column("acc_latency");
  const bool has_target = t.has_column("target");
  trace tr;
  tr.format = trace_format::label_csv;
  tr.source = source;
  tr.origin_device = device;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    const std::string where = t.where(i);
    std::vector<trace_shape> inputs;
    const py_value in = cell_py(row[c_in], where, "input_shapes");
    if (!in.is_sequence()) throw error(where + ": column 'input_shapes': expected a list of shapes");
    for (const py_value& s : in.items) inputs.push_back(shape_from(s, where, "input_shapes"));
    std::optional<trace_shape> output;
    if (!row[c_out].empty()) output = shape_from(cell_py(row[c_out], where, "output_shape"), where, "output_shape");
    const std::pair<size_t, trace_phase> phases[] = {
        {c_fw, trace_phase::forward}, {c_bw, trace_phase::backward}, {c_acc, trace_phase::accumulate}};
    for (const auto& [col, phase] : phases) {
      // a measured time (core/time_limits.h); 0 is "not measured"
      const double ms = time_check(cell_nonneg(row[col], where, t.header[col]), time_unit::ms, true,
                                   where + ": column '" + t.header[col] + "'", row[col]);
      if (ms == 0) continue;
      trace_op op;
      op.id = static_cast<int64_t>(i);
      op.name = row[c_name];
      op.kind = has_target ? fx_kind(row[t.column("target")]) : row[c_name];
      op.phase = phase;
      op.measured_ms = ms;
      op.input_shapes = inputs;
      op.output_shape = output;
      tr.ops.push_back(std::move(op));
    }
  }
  if (tr.ops.empty())  // nothing measured: scaling it would forecast 0 ms
    throw error(source + ": no op with a measured latency (fw_latency, bw_latency, acc_latency all 0 or no rows)");
  return tr;
}

trace trace_load_wavescale(const fs::path& manifest) {
  const fs::path dir = manifest.parent_path();
  return trace_parse_wavescale(read_file(manifest), manifest.string(), [&](const std::string& name) {
    const fs::path p = dir / name;
    return std::make_pair(read_file(p), p.string());
  });
}

trace trace_parse_wavescale(std::string_view text, const std::string& src, const trace_file_reader& read) {
  const json m = json_parse_or_throw(text, src);
  if (!m.is_object()) throw error(src + ": manifest must be a JSON object");
  auto str_key = [&](const char* key, bool required) -> std::string {
    if (!m.contains(key)) {
      if (required) throw error(src + ": missing key '" + key + "'");
      return "";
    }
    if (!m[key].is_string()) throw error(src + ": key '" + key + "' must be a string");
    return m[key].get<std::string>();
  };
  const std::string format = str_key("format", true);
  if (format != "wavescale-trace/1")
    throw error(src + ": unsupported format '" + format + "' (expected 'wavescale-trace/1')");
  trace tr;
  tr.format = trace_format::wavescale;
  tr.source = src;
  tr.origin_device = str_key("origin_gpu", false);
  const std::string ops_name = str_key("ops", true), kernels_name = str_key("kernels", true);
  const auto [ops_text, ops_source] = read(ops_name);
  const csv_table ops = csv_parse(ops_text, ops_source);
  const size_t c_id = ops.column("op_id"), c_name = ops.column("op_name"), c_pass = ops.column("pass");
  std::map<int64_t, size_t> by_id;
  for (size_t i = 0; i < ops.rows.size(); ++i) {
    const auto& row = ops.rows[i];
    trace_op op;
    op.id = cell_int(row[c_id], ops.where(i), "op_id");
    if (op.id < 0) throw error(ops.where(i) + ": column 'op_id': must be >= 0, got " + row[c_id]);
    if (!by_id.emplace(op.id, tr.ops.size()).second)
      throw error(ops.where(i) + ": duplicate op_id " + row[c_id]);
    op.name = row[c_name];
    op.kind = row[c_name];
    if (op.name.empty()) throw error(ops.where(i) + ": column 'op_name' is empty");
    const std::string& pass = row[c_pass];
    if (pass == "fwd") op.phase = trace_phase::forward;
    else if (pass == "bwd") op.phase = trace_phase::backward;
    else if (pass == "opt") op.phase = trace_phase::optimizer;
    else if (pass == "other") op.phase = trace_phase::other;
    else throw error(ops.where(i) + ": unknown pass '" + pass + "' (expected fwd, bwd, opt or other)");
    if (auto wall = cell_opt(ops, i, "wall_ns"))
      op.measured_ms = event_ns_check(*wall, ops.where(i), "wall_ns", row[ops.column("wall_ns")]) / 1e6;
    tr.ops.push_back(std::move(op));
  }

  const auto [kernels_text, kernels_source] = read(kernels_name);
  const csv_table k = csv_parse(kernels_text, kernels_source);
  const size_t k_op = k.column("op_id"), k_seq = k.column("seq"), k_name = k.column("kernel_name");
  const char* grid_cols[] = {"grid_x", "grid_y", "grid_z"};
  const char* block_cols[] = {"block_x", "block_y", "block_z"};
  const size_t k_regs = k.column("regs_per_thread"), k_sst = k.column("smem_static_bytes");
  const size_t k_sdyn = k.column("smem_dynamic_bytes"), k_dur = k.column("duration_ns");
  std::vector<std::vector<std::pair<int64_t, trace_kernel>>> per_op(tr.ops.size());
  std::vector<std::pair<int64_t, trace_kernel>> loose;
  for (size_t i = 0; i < k.rows.size(); ++i) {
    const auto& row = k.rows[i];
    const std::string where = k.where(i);
    trace_kernel kern;
    kern.name = row[k_name];
    if (kern.name.empty()) throw error(where + ": column 'kernel_name' is empty");
    for (int d = 0; d < 3; ++d) {
      kern.grid[d] = cell_int(row[k.column(grid_cols[d])], where, grid_cols[d]);
      kern.block[d] = cell_int(row[k.column(block_cols[d])], where, block_cols[d]);
      if (kern.grid[d] < 1) throw error(where + ": column '" + grid_cols[d] + "': must be >= 1");
      if (kern.block[d] < 1) throw error(where + ": column '" + block_cols[d] + "': must be >= 1");
    }
    kern.registers = cell_int(row[k_regs], where, "regs_per_thread");
    const int64_t sst = cell_int(row[k_sst], where, "smem_static_bytes");
    const int64_t sdyn = cell_int(row[k_sdyn], where, "smem_dynamic_bytes");
    if (kern.registers < 0 || sst < 0 || sdyn < 0) throw error(where + ": negative registers or shared memory");
    if (sst > kernel_max_shared_bytes || sdyn > kernel_max_shared_bytes)  // before the sum, which could overflow
      throw error(where + ": kernel '" + kern.name + "': shared memory " + row[k_sst] + " + " + row[k_sdyn] +
                  " bytes is out of range (at most " + std::to_string(kernel_max_shared_bytes) + " per block)");
    kern.shared_bytes = sst + sdyn;
    kernel_check(kern, where + ": kernel '" + kern.name + "'");
    kern.duration_ns = event_ns_check(cell_nonneg(row[k_dur], where, "duration_ns"), where, "duration_ns", row[k_dur]);
    kern.dram_read_bytes = cell_opt(k, i, "dram_read_bytes");
    kern.dram_write_bytes = cell_opt(k, i, "dram_write_bytes");
    kern.flop_eff_pct = cell_opt(k, i, "flop_sp_eff_pct");
    kern.flops_sp = cell_opt(k, i, "flops_sp");
    const int64_t seq = cell_int(row[k_seq], where, "seq");
    const int64_t op_id = cell_int(row[k_op], where, "op_id");
    if (op_id == -1) {
      loose.emplace_back(seq, std::move(kern));
      continue;
    }
    auto it = by_id.find(op_id);
    if (it == by_id.end()) throw error(where + ": op_id " + row[k_op] + " is not in " + ops_source);
    per_op[it->second].emplace_back(seq, std::move(kern));
  }
  // nothing to scale, as a Chrome trace without kernel time (trace_parse_chrome): the forecast would be the ops'
  // host time alone
  if (k.rows.empty()) throw error(kernels_source + ": no kernel rows: a trace with no kernels cannot be scaled");
  for (const auto& op : per_op)
    for (const auto& [seq, kern] : op) tr.zero_duration_kernels += kern.duration_ns == 0 ? 1 : 0;
  for (const auto& [seq, kern] : loose) tr.zero_duration_kernels += kern.duration_ns == 0 ? 1 : 0;
  if (tr.zero_duration_kernels == k.rows.size())
    throw error(kernels_source + ": every one of its " + std::to_string(k.rows.size()) +
                " kernel rows has 'duration_ns' 0: a trace with no kernel time cannot be scaled");
  auto by_seq = [](const auto& a, const auto& b) { return a.first < b.first; };
  for (size_t i = 0; i < per_op.size(); ++i) {
    std::stable_sort(per_op[i].begin(), per_op[i].end(), by_seq);
    for (auto& [seq, kern] : per_op[i]) tr.ops[i].kernels.push_back(std::move(kern));
  }
  std::stable_sort(loose.begin(), loose.end(), by_seq);
  for (auto& [seq, kern] : loose) tr.unattributed.push_back(std::move(kern));
  return tr;
}

// The steps a Chrome trace holds (trace::steps): `meta` is hf_trace.py's metadata (a JSON object, or the JSON text of
// one as torch.profiler's add_metadata_json stores it; null when absent), then the ProfilerStep#N ranges, then the
// Optimizer.step calls. A "steps" that is no positive integer is an error naming `where`.
static void chrome_steps(const json* meta, const std::string& where, size_t profiler_steps, size_t optimizer_steps, trace& tr) {
  std::optional<int64_t> from_meta;
  if (meta) {
    json m = *meta;
    if (m.is_string()) m = json::parse(m.get<std::string>(), nullptr, false);  // discarded (not an object) when not JSON
    if (m.is_object() && m.contains("steps")) {
      const json& v = m["steps"];
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000000)
        throw error(where + ": 'steps' must be a positive integer (the profiled steps the trace holds), got " + v.dump());
      from_meta = v.get<int64_t>();
    }
    if (m.is_object() && m.contains("mode")) {
      // hf_trace.py's --mode (and a serving prefill's): a misspelled one would calibrate as a non-decode step
      const json& v = m["mode"];
      const std::string mode = v.is_string() ? v.get<std::string>() : "";
      if (mode != "train" && mode != "inference" && mode != "prefill" && mode != "decode")
        throw error(where + ": 'mode' must be \"train\", \"inference\", \"prefill\" or \"decode\", got " + v.dump());
      tr.mode = mode;
    }
    if (m.is_object() && m.contains("step_ms_mean")) {
      const json& v = m["step_ms_mean"];
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        throw error(where + ": 'step_ms_mean' must be a positive number of milliseconds, got " + v.dump());
      tr.step_ms = v.get<double>();
    }
  }
  std::vector<std::pair<int64_t, std::string>> counts;  // in order of precedence
  if (from_meta) counts.push_back({*from_meta, fmt::format("{} says steps = {}", where, *from_meta)});
  if (profiler_steps) counts.push_back({int64_t(profiler_steps), text_count(profiler_steps, "ProfilerStep# range")});
  if (optimizer_steps) counts.push_back({int64_t(optimizer_steps), text_count(optimizer_steps, "Optimizer.step call")});
  if (counts.empty()) return;
  tr.steps = counts.front().first;
  if (tr.steps > 1 || from_meta) tr.steps_source = counts.front().second;
  for (size_t i = 1; i < counts.size(); ++i)
    if (counts[i].first != tr.steps) {
      tr.steps_note = fmt::format("{}: {}, but it holds {}: taken as {}", tr.source, counts.front().second,
                                  counts[i].second, text_count(size_t(tr.steps), "step"));
      break;
    }
}

trace trace_parse_chrome(std::string_view text, const std::string& source, const trace_sidecar& sidecar) {
  const json root = json_parse_or_throw(text, source);
  const json* events = nullptr;
  if (root.is_array()) events = &root;
  else if (root.is_object() && root.contains("traceEvents")) events = &root["traceEvents"];
  if (!events || !events->is_array()) throw error(source + ": no 'traceEvents' array");
  const std::vector<size_t> lines = chrome_event_lines(text);
  auto where = [&](size_t i) { return source + ":" + std::to_string(i < lines.size() ? lines[i] : 0); };

  trace tr;
  tr.format = trace_format::chrome_json;
  tr.source = source;
  // deviceProperties: the GPUs of the process (Kineto lists every visible one, by "id"); the origin is the one its
  // kernels ran on (args.device), chosen below.
  const json* devices = root.is_object() && root.contains("deviceProperties") && root["deviceProperties"].is_array()
                            ? &root["deviceProperties"] : nullptr;
  std::map<int64_t, size_t> kernels_on;  // args.device -> kernels

  static const std::string eval_prefix = "autograd::engine::evaluate_function: ";
  std::vector<cpu_event> cpu;
  struct kernel_event {
    size_t index;
    double ts;
    std::optional<int64_t> ext;
    trace_kernel k;
    int64_t stream = -1;
  };
  std::vector<kernel_event> kernels;
  std::set<std::string> profiler_steps;
  std::vector<std::pair<double, double>> step_ranges;  // their [start, end] in µs
  size_t optimizer_steps = 0;
  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object()) throw error(where(i) + ": trace event must be an object");
    if (!e.contains("ph") || e["ph"] != "X") continue;  // complete events only
    const std::string cat = e.contains("cat") && e["cat"].is_string() ? lower(e["cat"].get<std::string>()) : "";
    const std::string name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";
    const bool is_kernel = cat == "kernel";
    const bool is_cpu = cat == "cpu_op" || cat == "operator";
    const bool is_optim = cat == "user_annotation" && name.rfind("Optimizer.step#", 0) == 0;
    if (name.rfind("ProfilerStep#", 0) == 0) {  // torch.profiler's step() ranges
      profiler_steps.insert(name);
      if (e.contains("ts") && e["ts"].is_number() && e.contains("dur") && e["dur"].is_number())
        step_ranges.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
    }
    if (is_optim) ++optimizer_steps;
    if (cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset") {
      // no kernel (no launch grid): counted with its time, which the caller reports as not scaled
      ++tr.copy_events;
      if (e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() > 0 &&
          e["dur"].get<double>() <= event_max_us)
        tr.copy_ms += e["dur"].get<double>() / 1e3;
      continue;
    }
    if (!is_kernel && !is_cpu && !is_optim) continue;
    const std::string what = (is_kernel ? "kernel '" : "event '") + name + "'";
    auto number = [&](const char* key) {
      if (!e.contains(key)) throw error(where(i) + ": " + what + ": missing number '" + key + "'");
      if (!e[key].is_number())
        throw error(where(i) + ": " + what + ": '" + key + "' must be a number (got " + json_got(e[key]) + ")");
      return e[key].get<double>();
    };
    const double ts = number("ts"), dur = number("dur");
    if (dur < 0) throw error(where(i) + ": " + what + ": negative 'dur'");
    // The profiler counts time stamps up from its clock's origin: a negative one is an edited or corrupt trace, whose
    // kernel order, launch containment and GPU span cannot be trusted.
    if (ts < 0) throw error(where(i) + ": " + what + ": negative 'ts' (" + fmt::format("{}", ts) + ")");
    // physical ranges (µs): an event over 1e10 µs (almost 3 hours) or a time stamp past 1e17 µs (3000 years of epoch
    // time) is a unit slip or garbage, and would dominate every figure computed from the trace
    if (!(dur <= event_max_us)) throw error(where(i) + ": " + what + ": 'dur' must be at most 1e10 microseconds");
    if (!(std::fabs(ts) <= 1e17)) throw error(where(i) + ": " + what + ": 'ts' must be a time stamp within 1e17 microseconds");
    const json* args = e.contains("args") && e["args"].is_object() ? &e["args"] : nullptr;
    std::optional<int64_t> ext;
    if (args && args->contains("External id")) {
      if (!(*args)["External id"].is_number_integer())
        throw error(where(i) + ": " + what + ": args.External id must be an integer (got " +
                    json_got((*args)["External id"]) + ")");
      ext = (*args)["External id"].get<int64_t>();
    }
    if (is_kernel) {
      if (!args) throw error(where(i) + ": " + what + ": missing 'args'");
      kernel_event ke{i, ts, ext, {}};
      ke.k.name = name;
      for (const char* key : {"grid", "block"}) {
        const json* v = args->contains(key) ? &(*args)[key] : nullptr;
        if (!v) throw error(where(i) + ": " + what + ": missing args." + key);
        // CUDA and HIP limits: grid dimensions below 2^31, at most 1024 threads a block
        const int64_t most = std::string(key) == "grid" ? (int64_t(1) << 31) - 1 : 1024;
        if (!v->is_array() || v->size() != 3 ||
            !std::all_of(v->begin(), v->end(), [&](const json& d) {
              return d.is_number_integer() && d.get<int64_t>() >= 1 && d.get<int64_t>() <= most;
            }))
          throw error(where(i) + ": " + what + ": args." + key + " must be 3 positive integers of at most " +
                      std::to_string(most) + " (got " + (v->is_array() && v->size() <= 8 ? v->dump() : json_got(*v)) + ")");
        auto& dst = std::string(key) == "grid" ? ke.k.grid : ke.k.block;
        for (int d = 0; d < 3; ++d) dst[d] = (*v)[d].get<int64_t>();
      }
      for (const char* key : {"registers per thread", "shared memory"}) {
        const json* v = args->contains(key) ? &(*args)[key] : nullptr;
        if (!v) throw error(where(i) + ": " + what + ": missing args." + key);
        const int64_t most = std::string(key) == "shared memory" ? int64_t(1) << 30 : 65536;  // bytes; registers
        if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > most)
          throw error(where(i) + ": " + what + ": args." + key + " must be a non-negative integer of at most " +
                      std::to_string(most) + " (got " + json_got(*v) + ")");
        (std::string(key) == "shared memory" ? ke.k.shared_bytes : ke.k.registers) = v->get<int64_t>();
      }
      kernel_check(ke.k, where(i) + ": " + what);
      if (args->contains("device")) {
        const json& d = (*args)["device"];
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          throw error(where(i) + ": " + what + ": args.device must be a non-negative integer (got " + json_got(d) + ")");
        ++kernels_on[d.get<int64_t>()];
      }
      if (args->contains("stream") && (*args)["stream"].is_number_integer())
        ke.stream = (*args)["stream"].get<int64_t>();
      ke.k.duration_ns = dur * 1000.0;  // Chrome-trace times are microseconds
      kernels.push_back(std::move(ke));
      continue;
    }
    cpu_event c;
    c.index = i;
    c.name = name;
    c.pid = e.contains("pid") ? json_id(e["pid"], where(i) + ": " + what, "pid") : 0;
    c.tid = e.contains("tid") ? json_id(e["tid"], where(i) + ": " + what, "tid") : 0;
    c.ts = ts;
    c.dur = dur;
    c.args = args;
    c.r = is_optim ? cpu_event::role::optimizer
                   : (name.rfind(eval_prefix, 0) == 0 ? cpu_event::role::backward : cpu_event::role::op);
    cpu.push_back(std::move(c));
  }

  if (root.is_object() && root.contains("neusight")) {
    chrome_steps(&root["neusight"], source + ": key 'neusight'", profiler_steps.size(), optimizer_steps, tr);
  } else if (!sidecar.text.empty()) {
    const json meta = json_parse_or_throw(sidecar.text, sidecar.source);
    chrome_steps(&meta, sidecar.source, profiler_steps.size(), optimizer_steps, tr);
  } else {
    chrome_steps(nullptr, source, profiler_steps.size(), optimizer_steps, tr);
  }
  if (kernels.empty())  // nothing to scale: the forecast would be 0 ms
    throw error(source + ": no GPU kernel events (\"ph\": \"X\", \"cat\": \"kernel\") in the trace");
  for (const kernel_event& ke : kernels) tr.zero_duration_kernels += ke.k.duration_ns == 0 ? 1 : 0;
  if (tr.zero_duration_kernels == kernels.size())
    throw error(source + ": every one of its " + std::to_string(kernels.size()) +
                " kernel events has 'dur' 0: a trace with no kernel time cannot be scaled");
  {
    std::set<int64_t> streams;
    for (const kernel_event& ke : kernels)
      if (ke.stream >= 0) streams.insert(ke.stream);
    tr.kernel_streams = streams.size();
  }
  // The origin GPU: the deviceProperties entry of the device the kernels ran on. Kernels of several devices are no
  // one GPU's step.
  if (kernels_on.size() > 1) {
    std::string list;
    for (const auto& [d, n] : kernels_on) list += (list.empty() ? "" : ", ") + fmt::format("device {}: {} kernels", d, n);
    throw error(source + ": its kernels ran on " + std::to_string(kernels_on.size()) + " devices (" + list +
                "): a trace is one GPU's work; record one process per GPU (each rank's profiler writes its own file)");
  }
  auto device_name = [&](const json& p) -> std::string {
    return p.is_object() && p.contains("name") && p["name"].is_string() ? p["name"].get<std::string>() : "";
  };
  const size_t listed = devices ? devices->size() : 0;
  if (!kernels_on.empty()) {
    const int64_t dev = kernels_on.begin()->first;
    bool found = false;
    for (size_t i = 0; i < listed && !found; ++i) {
      const json& p = (*devices)[i];
      const bool has_id = p.is_object() && p.contains("id") && p["id"].is_number_integer();
      if (has_id ? p["id"].get<int64_t>() == dev : int64_t(i) == dev) found = true, tr.origin_device = device_name(p);
    }
    if (!found)
      tr.origin_unknown = listed == 0 ? fmt::format("its kernels ran on device {} and it has no deviceProperties", dev)
                                      : fmt::format("its kernels ran on device {}, which deviceProperties does not list", dev);
  } else if (listed == 1) {
    tr.origin_device = device_name((*devices)[0]);
  } else if (listed > 1) {
    tr.origin_unknown = fmt::format("deviceProperties lists {} GPUs and its kernels do not say which one they ran on "
                                    "(no args.device)", listed);
  } else {
    tr.origin_unknown = "no deviceProperties";
  }
  // Outermost enclosing event per (pid, tid): sort by start, longer first, and keep a containment stack.
  std::vector<size_t> order(cpu.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const cpu_event &x = cpu[a], &y = cpu[b];
    if (x.pid != y.pid) return x.pid < y.pid;
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.ts != y.ts) return x.ts < y.ts;
    return x.dur > y.dur;
  });
  std::vector<size_t> stack;
  std::vector<size_t> roots;  // cpu indices of outermost events
  for (size_t idx : order) {
    cpu_event& c = cpu[idx];
    while (!stack.empty()) {
      const cpu_event& top = cpu[stack.back()];
      const bool same_thread = top.pid == c.pid && top.tid == c.tid;
      if (same_thread && c.ts + c.dur <= top.ts + top.dur + 1e-6) break;
      stack.pop_back();
    }
    if (stack.empty()) {
      c.root = idx;
      roots.push_back(idx);
    } else {
      c.root = cpu[stack.back()].root;
    }
    stack.push_back(idx);
  }

  std::sort(roots.begin(), roots.end(), [&](size_t a, size_t b) {
    return cpu[a].ts != cpu[b].ts ? cpu[a].ts < cpu[b].ts : cpu[a].index < cpu[b].index;
  });
  std::map<size_t, size_t> op_of_root;  // cpu index -> position in tr.ops
  for (size_t r : roots) {
    const cpu_event& c = cpu[r];
    trace_op op;
    op.id = static_cast<int64_t>(tr.ops.size());
    if (c.r == cpu_event::role::backward) {
      op.name = c.name.substr(eval_prefix.size());
      op.phase = op.name.rfind("torch::autograd::AccumulateGrad", 0) == 0 || op.name == "AccumulateGrad"
                     ? trace_phase::accumulate
                     : trace_phase::backward;
    } else if (c.r == cpu_event::role::optimizer) {
      op.name = c.name;
      op.phase = trace_phase::optimizer;
    } else {
      op.name = c.name;
      op.phase = trace_phase::forward;
      chrome_inputs(c.args, op, where(c.index), c.name);
    }
    op.kind = op.name;
    op.measured_ms = 0.0;
    op_of_root[r] = tr.ops.size();
    tr.ops.push_back(std::move(op));
  }

  // Backward ops take their forward op's inputs: the innermost forward cpu_op with the node's sequence number.
  std::map<int64_t, size_t> fwd_of_seq;  // Sequence number -> cpu index
  for (size_t i = 0; i < cpu.size(); ++i) {
    const std::optional<int64_t> seq = chrome_seq(cpu[i].args);
    if (!seq || cpu[cpu[i].root].r != cpu_event::role::op) continue;
    auto [it, fresh] = fwd_of_seq.emplace(*seq, i);
    const cpu_event& prev = cpu[it->second];
    if (!fresh && (cpu[i].ts > prev.ts || (cpu[i].ts == prev.ts && cpu[i].dur < prev.dur))) it->second = i;
  }
  for (const auto& [r, pos] : op_of_root) {
    if (cpu[r].r != cpu_event::role::backward) continue;
    const std::optional<int64_t> seq = chrome_seq(cpu[r].args);
    const auto f = seq ? fwd_of_seq.find(*seq) : fwd_of_seq.end();
    if (f == fwd_of_seq.end()) continue;
    trace_op& op = tr.ops[pos];
    op.forward_kind = cpu[f->second].name;
    chrome_inputs(cpu[f->second].args, op, where(cpu[f->second].index), cpu[f->second].name);
  }

  std::map<int64_t, size_t> by_ext;  // External id -> cpu index (first event carrying it)
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (cpu[i].args && cpu[i].args->contains("External id"))
      by_ext.emplace((*cpu[i].args)["External id"].get<int64_t>(), i);
  }
  std::stable_sort(kernels.begin(), kernels.end(), [](const kernel_event& a, const kernel_event& b) { return a.ts < b.ts; });
  {  // the GPU's span and the part of it no kernel covers (kernels of several streams may overlap: their union)
    double start = kernels.front().ts, covered = 0, cur_lo = start, cur_hi = start, end = start;
    for (const kernel_event& ke : kernels) {
      const double lo = ke.ts, hi = ke.ts + ke.k.duration_ns / 1e3;
      end = std::max(end, hi);
      if (lo > cur_hi) {
        covered += cur_hi - cur_lo;
        cur_lo = lo, cur_hi = hi;
      } else {
        cur_hi = std::max(cur_hi, hi);
      }
    }
    covered += cur_hi - cur_lo;
    tr.gpu_span_ms = (end - start) / 1e3;
    tr.gpu_idle_ms = std::max(0.0, end - start - covered) / 1e3;
    tr.gpu_busy_ms = covered / 1e3;
  }
  for (kernel_event& ke : kernels) {
    auto it = ke.ext ? by_ext.find(*ke.ext) : by_ext.end();
    if (it == by_ext.end()) {
      tr.unattributed.push_back(std::move(ke.k));
      continue;
    }
    trace_op& op = tr.ops[op_of_root.at(cpu[it->second].root)];
    *op.measured_ms += ke.k.duration_ns / 1e6;
    op.kernels.push_back(std::move(ke.k));
  }
  // every kernel launched by no op the trace records (no cpu_op carries its External id: CPU activity not recorded, a
  // trace cut to its kernels, CUDA-graph replays outside any op): no op time to scale, the forecast would be 0 ms
  if (tr.unattributed.size() == kernels.size()) {
    double ms = 0;
    for (const trace_kernel& k : tr.unattributed) ms += k.duration_ns / 1e6;
    throw error(fmt::format("{}: none of its {} kernels ({:.4f} ms) was launched by an op it records (no cpu_op with "
                            "the kernel's 'External id': record with CPU activity, "
                            "torch.profiler.ProfilerActivity.CPU): nothing to scale", source, kernels.size(), ms));
  }
  if (!step_ranges.empty())  // ops with kernels that start in no ProfilerStep# range: counted, said by the caller
    for (const auto& [r, pos] : op_of_root) {
      const trace_op& op = tr.ops[pos];
      const double ts = cpu[r].ts;
      if (op.kernels.empty() ||
          std::any_of(step_ranges.begin(), step_ranges.end(), [&](const auto& s) { return ts >= s.first && ts <= s.second; }))
        continue;
      ++tr.outside_steps_ops;
      tr.outside_steps_ms += *op.measured_ms;
    }
  return tr;
}

trace_format trace_detect_text(std::string_view text, const std::string& src) {
  // torch.profiler's export_chrome_trace and tensorboard_trace_handler(use_gzip=True) write gzip when asked (*.json.gz):
  // read as CSV its bytes gave a message about quotes
  if (text.size() >= 2 && text[0] == '\x1f' && text[1] == '\x8b')
    throw error(src + ": a gzip-compressed file: decompress it first (zcat " + src + " > trace.json) and give the JSON");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    const json j = json_parse_or_throw(text, src);
    if (j.is_array()) return trace_format::chrome_json;
    if (j.is_object() && j.contains("format") && j["format"].is_string() &&
        j["format"].get<std::string>().rfind("wavescale-trace/", 0) == 0)
      return trace_format::wavescale;
    if (j.is_object() && j.contains("traceEvents")) return trace_format::chrome_json;
    throw error(src + ": not a trace: JSON without 'traceEvents' or a 'wavescale-trace/' format");
  }
  const csv_table t = csv_parse(text, src);
  if (t.has_column("fw_latency")) return trace_format::label_csv;
  throw error(src + ": not a trace: expected Chrome-trace JSON, a wavescale manifest or a label CSV (fw_latency column)");
}

trace_format trace_detect(const fs::path& file) { return trace_detect_text(read_file(file), file.string()); }

trace trace_load(const fs::path& file) {
  const std::string text = read_file(file);
  switch (trace_detect_text(text, file.string())) {
    case trace_format::chrome_json: {
      // hf_trace.py's sidecar <trace>.meta.json: read for its steps when the trace itself carries no metadata
      // (hf_trace.py writes <out>.meta.json; a copy may be named <stem>.meta.json, as tests/fixtures/traces/hf are)
      trace_sidecar sidecar;
      for (const fs::path& meta : {fs::path(file.string() + ".meta.json"), fs::path(file).replace_extension(".meta.json")})
        if (fs::is_regular_file(meta)) {
          sidecar = {read_file(meta), meta.string()};
          break;
        }
      return trace_parse_chrome(text, file.string(), sidecar);
    }
    case trace_format::wavescale: return trace_load_wavescale(file);
    case trace_format::label_csv:
      // its folder (label/<GPU>/…) names the GPU: of the absolute path, so that `x.csv` or `./x.csv` has one too
      return trace_parse_label_csv(text, file.string(), fs::absolute(file).lexically_normal().parent_path().filename().string());
  }
  throw error(file.string() + ": unknown trace format");
}

wave_kernel wave_kernel_of(const trace_kernel& k) {
  wave_kernel w;
  w.name = k.name;
  w.blocks = k.blocks();
  w.threads_per_block = k.threads_per_block();
  w.regs_origin = k.registers;
  w.smem_per_block = k.shared_bytes;
  w.duration_ns = k.duration_ns;
  w.flop_eff_pct = k.flop_eff_pct;
  w.dram_read_bytes = k.dram_read_bytes;
  w.dram_write_bytes = k.dram_write_bytes;
  return w;
}

}  // namespace ns
