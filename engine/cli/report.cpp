// engine/cli/report.cpp — comparison and GPU-list renderings, the figures' inputs and emit(); a single forecast is
// rendered by scripts/neusight/report.lua (session::forecast_render).
#include "cli/report.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <map>

#include "core/forecast.h"
#include "core/text.h"
#include <nlohmann/json.hpp>
#include <type_traits>

namespace ns {

namespace {
using json = nlohmann::ordered_json;
}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

json figure_json(const figure_value& v) {
  return std::visit(
      [](const auto& x) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) return nullptr;
        else return x;
      },
      v);
}

std::string figure_csv(const figure_value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{:.17g}", *d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v)) return csv_field(*s);
  return "";
}

std::string report_compare(const std::vector<compare_row>& rows, const std::string& format, const std::string& source) {
  auto failed = [](const compare_row& r) { return !r.empty() && r.back().key == "error"; };
  if (format == "json") {
    json arr = json::array();
    for (const auto& r : rows) {
      json o = json::object();
      for (const auto& c : r) o[c.key] = figure_json(c.value);
      arr.push_back(std::move(o));
    }
    json j;
    j["rows"] = std::move(arr);
    return j.dump(2) + "\n";
  }
  if (format == "csv") {
    std::vector<std::string> keys;  // the successful rows' keys first, then what error rows add ("error")
    for (bool errors : {false, true})
      for (const auto& r : rows)
        if (failed(r) == errors)
          for (const auto& c : r)
            if (std::find(keys.begin(), keys.end(), c.key) == keys.end()) keys.push_back(c.key);
    std::string out;
    for (size_t i = 0; i < keys.size(); ++i) out += (i ? "," : "") + keys[i];
    out += "\n";
    for (const auto& r : rows) {
      for (size_t i = 0; i < keys.size(); ++i) {
        if (i) out += ",";
        for (const auto& c : r)
          if (c.key == keys[i]) out += figure_csv(c.value);
      }
      out += "\n";
    }
    return out;
  }
  // table: inputs that differ between rows are columns, the others are said once; then latency and the figures
  const size_t n_in = compare_input_cells;
  std::vector<bool> varies(n_in, false);
  std::string fixed;
  for (size_t i = 0; i < n_in; ++i) {
    std::vector<std::string> seen;
    for (const auto& r : rows)
      if (i < r.size() && r[i].cell != "-" && std::find(seen.begin(), seen.end(), r[i].cell) == seen.end())
        seen.push_back(r[i].cell);
    varies[i] = seen.size() > 1;
    if (seen.size() == 1 && !rows.empty()) fixed += fmt::format("{}{} {}", fixed.empty() ? "" : ", ", rows[0][i].key, seen[0]);
  }
  std::vector<size_t> shown;  // cell indices of a successful row
  const compare_row* model_row = nullptr;
  for (const auto& r : rows)
    if (!failed(r)) {
      model_row = &r;
      break;
    }
  for (size_t i = 0; i < n_in; ++i)
    if (varies[i]) shown.push_back(i);
  if (model_row)
    for (size_t i = n_in; i < model_row->size(); ++i)
      if (!(*model_row)[i].column.empty()) shown.push_back(i);
  std::vector<size_t> width(shown.size());
  const auto& head = model_row ? *model_row : rows.front();
  for (size_t k = 0; k < shown.size(); ++k) {
    width[k] = head[shown[k]].column.size();
    for (const auto& r : rows)
      if (shown[k] < r.size() && (shown[k] < n_in || !failed(r))) width[k] = std::max(width[k], r[shown[k]].cell.size());
  }
  auto left = [](const figure_value& v) { return std::holds_alternative<std::string>(v) || std::holds_alternative<bool>(v); };
  auto pad = [](const std::string& t, size_t w, bool l) {
    const std::string fill(w > t.size() ? w - t.size() : 0, ' ');
    return l ? t + fill : fill + t;
  };
  size_t errors = 0;
  for (const auto& r : rows) errors += failed(r);
  std::string out = fmt::format("compare   {} combination(s) from {}{}\n", rows.size(), source,
                                errors ? fmt::format(", {} could not be forecast", errors) : std::string());
  if (!fixed.empty()) out += "fixed     " + fixed + "\n";
  out += "\n";
  std::string line;
  for (size_t k = 0; k < shown.size(); ++k)
    line += (k ? "  " : "") + pad(head[shown[k]].column, width[k], left(head[shown[k]].value));
  out += line + "\n";
  for (const auto& r : rows) {
    line.clear();
    size_t k = 0;
    for (; k < shown.size(); ++k) {
      if (shown[k] >= n_in && failed(r)) break;
      line += (k ? "  " : "") + pad(r[shown[k]].cell, width[k], left(head[shown[k]].value));
    }
    if (failed(r)) line += (k ? "  " : "") + std::string("error: ") + r.back().cell;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += "\nlatency: one iteration (train), forward pass (inference, prefill) or step (decode), the slowest device of a "
         "parallel run; MFU = model FLOPs (the graph's forward + backward) / GPUs / latency / the dtype's dense peak; "
         "memory per GPU; $ from price_per_hour_usd in the GPU file (- without one). --format json|csv has every "
         "figure and the warnings.\n";
  return out;
}

void emit(const std::string& text, const std::string& output) {
  if (output.empty() || output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  // A symbolic link is written through: its final target is the file replaced (the link stays a link). A target
  // that exists and is not a regular file (/dev/null, /dev/stdout, a pipe) is written in place, never replaced.
  namespace fs = std::filesystem;
  fs::path target(output);
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops == 40) throw error(output + ": too many levels of symbolic links");
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) throw error(output + ": cannot write (unreadable symbolic link)");
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw error(output + ": is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    // O_NONBLOCK: a FIFO without a reader is an error (ENXIO) rather than a wait
    const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      throw error(output + (errno == ENXIO ? ": a FIFO with no reader" : ": cannot write"));
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        throw error(output + ": cannot write");
      }
      done += size_t(n);
    }
    ::close(fd);
    return;
  }
  const std::string tmp = target.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out || !out.write(text.data(), std::streamsize(text.size())) || !out.flush()) {
      std::remove(tmp.c_str());
      throw error(output + ": cannot write");
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw error(output + ": cannot write");
  }
}

std::string gpus_table(const std::vector<gpu_spec>& gpus) {
  std::string out = fmt::format("{:<18} {:<24} {:<7} {:<10} {:>5} {:>6} {:>8} {:>6} {:>8} {:>8}\n", "name", "file",
                                "vendor", "arch", "SMs", "mem GB", "BW GB/s", "L2 MB", "fp32 TF", "fp16 TF");
  for (const auto& g : gpus)
    out += fmt::format("{:<18} {:<24} {:<7} {:<10} {:>5} {:>6.0f} {:>8.0f} {:>6.1f} {:>8.1f} {:>8.1f}\n", g.name,
                       g.source, g.vendor, g.architecture, g.num_sm, g.mem_gb, g.mem_bw_gbps, g.l2_mb,
                       g.peak_fp32_tflops, g.peak_fp16_tflops);
  return out;
}

std::string gpus_json(const std::vector<gpu_spec>& gpus) {
  json arr = json::array();
  for (const auto& g : gpus) {
    json j;
    for (const auto& f : gpu_fields()) {
      if (!gpu_field_present(g, f)) continue;  // optional keys the file leaves out
      std::visit([&](auto member) { j[f.key] = g.*member; }, f.member);
    }
    j["file"] = g.source;
    arr.push_back(std::move(j));
  }
  return arr.dump(2) + "\n";
}

}  // namespace ns
