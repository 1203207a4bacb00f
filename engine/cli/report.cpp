// engine/cli/report.cpp — the GPU list's renderings, calibration files and emit(); a single forecast and a comparison
// are rendered by scripts/neusight/report.lua and compare.lua (session::forecast_render, session::compare_render).
#include "cli/report.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>

#include "core/calibration.h"
#include "core/forecast.h"
#include "core/text.h"
#include <nlohmann/json.hpp>

namespace ns {

namespace {
using json = nlohmann::ordered_json;
}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

// The file `output` names, through its symbolic links: a link is written through (the link stays a link).
std::filesystem::path emit_target(const std::string& output) {
  namespace fs = std::filesystem;
  fs::path target(output);
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops == 40) throw error(output + ": too many levels of symbolic links");
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) throw error(output + ": cannot write (unreadable symbolic link)");
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  return target;
}

// The descriptor of this process `output` names, itself or through symbolic links to one: /dev/stdout (1),
// /dev/stderr (2), /dev/fd/N, /proc/self/fd/N (also thread-self's and this pid's). Such a path is written as the
// descriptor stands (a pipe, or a file the shell opened: `>> log` appends), never reopened by its link's target (the
// log replaced, or overwritten from its start) nor replaced. nullopt for any other path.
std::optional<int> emit_descriptor(const std::string& output) {
  namespace fs = std::filesystem;
  const std::string prefixes[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/",
                                  "/proc/" + std::to_string(::getpid()) + "/fd/"};
  fs::path p = fs::path(output).lexically_normal();
  std::error_code ec;
  for (int hops = 0; hops <= 40; ++hops) {
    const std::string s = p.string();
    if (s == "/dev/stdout") return 1;
    if (s == "/dev/stderr") return 2;
    for (const std::string& pre : prefixes)
      if (s.size() > pre.size() && s.size() <= pre.size() + 9 && s.compare(0, pre.size(), pre) == 0 &&
          s.find_first_not_of("0123456789", pre.size()) == std::string::npos)
        return std::stoi(s.substr(pre.size()));
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return std::nullopt;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) return std::nullopt;
    p = (link.is_absolute() ? link : p.parent_path() / link).lexically_normal();
  }
  return std::nullopt;
}

// "OUTPUT: cannot write: <the OS's reason>" (errno of the call that failed), and the file's folder when that is where
// the reason lies.
error write_error(const std::string& output, const std::string& where = "") {
  return error(output + ": cannot write: " + (where.empty() ? "" : where + ": ") + std::strerror(errno));
}

}  // namespace

namespace {
// What a forecast reads of a calibration (core/calibration.h), its numbers bit for bit: two copies of a GPU file with
// calibrations alike in it forecast alike (comments, notes and what was measured aside, as the GPU's own fields).
std::string calibration_key(const calibration& c) {
  const auto factors = [](const std::map<std::string, double>& f) {
    std::string out;
    for (const auto& [family, x] : f) out += fmt::format("{}={:a};", family, x);
    return out;
  };
  return "factors:" + factors(c.factors) +
         (c.decode_factors ? "\ndecode_factors:" + factors(*c.decode_factors) : std::string()) + "\nmodel:" +
         c.model + (c.model_params ? fmt::format("\nmodel_params:{:a}", *c.model_params) : std::string());
}
}  // namespace

void gpu_list_once(const std::vector<std::string>& given,
                   const std::function<const gpu_spec*(const std::string&)>& resolve,
                   const std::function<const calibration*(const gpu_spec&)>& calibration_of) {
  namespace fs = std::filesystem;
  // the GPU's file (canonical; its name when not read from a file), and every field of the spec as read (two copies of
  // one file, e.g. a folder's own gpus/ beside the bundled one: the same rows twice; the spec the resolver parsed, not
  // the file read again) → as given
  std::map<std::string, std::string> first;
  for (const auto& g : given) {
    const gpu_spec* gpu = resolve(g);
    if (!gpu) continue;
    std::error_code ec;
    const fs::path file = gpu->file.empty() ? fs::path() : fs::weakly_canonical(gpu->file, ec);
    std::vector<std::string> keys = {gpu->file.empty() ? "name:" + gpu->name : "file:" + (ec ? gpu->file : file.string())};
    if (!gpu->file.empty()) {
      gpu_spec fields = *gpu;  // where it was read from aside: gpu_spec_key holds every field, numbers bit for bit
      fields.source.clear();
      // and the calibration its forecasts apply (calibration_of: none under --no-calibration): a copy calibrated
      // otherwise (or only one of the two calibrated) forecasts otherwise, a GPU of its own. One that does not load is
      // its rows' error, said by the forecast: a GPU of its own here.
      std::string cal = "uncalibrated";
      try {
        if (const calibration* c = calibration_of(*gpu)) cal = calibration_key(*c);
      } catch (const error&) {
        cal = "unloadable:" + calibration_path(*gpu).string();
      }
      keys.push_back("copy:" + gpu_spec_key(fields) + "\ncalibration:" + cal);
    }
    for (const auto& key : keys)
      if (const auto [at, fresh] = first.emplace(key, g); !fresh)
        throw error("--gpu: " + at->second + " and " + g + " name the same GPU (" + gpu->name +
                    (key.rfind("copy:", 0) == 0 ? ", files alike" : "") + "): give each GPU once");
  }
}

emit_kind emit_kind_of(const std::string& output) {
  // /dev/stdout is this process's standard output, whatever it is: a pipe (its link names no file to open, "pipe:[…]":
  // "cannot write") or a file the shell opened (`>> log`: replaced by the report, the log lost), so written as "-";
  // and so are /dev/fd/1 and /proc/self/fd/1. Another descriptor's path (/dev/stderr, /dev/fd/3) is written in place,
  // to the descriptor itself (emit_descriptor)
  if (output.empty() || output == "-") return emit_kind::standard_output;
  if (const auto fd = emit_descriptor(output)) return *fd == 1 ? emit_kind::standard_output : emit_kind::in_place;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(output, ec);  // through its symbolic links, as emit_target
  if (fs::is_directory(st)) return emit_kind::folder;
  if (fs::exists(st) && !fs::is_regular_file(st)) return emit_kind::in_place;
  return emit_kind::file;
}

void emit_check(const std::string& output) {
  const emit_kind kind = emit_kind_of(output);
  if (kind == emit_kind::standard_output) return;
  namespace fs = std::filesystem;
  const fs::path target = emit_target(output);
  if (kind == emit_kind::folder) throw error(output + ": is a directory");
  if (kind == emit_kind::in_place) return;  // a device or a pipe: written in place
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) throw write_error(output, "folder " + dir.string());
  if (!S_ISDIR(ds.st_mode)) throw error(output + ": cannot write: " + dir.string() + " is not a folder");
  if (::access(dir.c_str(), W_OK) != 0) throw write_error(output, "folder " + dir.string());
}

void emit(const std::string& text, const std::string& output) {
  const emit_kind kind = emit_kind_of(output);
  if (kind == emit_kind::standard_output) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  // A symbolic link is written through: its final target is the file replaced (the link stays a link). A target
  // that exists and is not a regular file (/dev/null, a pipe) is written in place, never replaced.
  namespace fs = std::filesystem;
  const fs::path target = emit_target(output);
  if (kind == emit_kind::folder) throw error(output + ": is a directory");
  if (kind == emit_kind::in_place) {
    // a descriptor of this process (/dev/stderr, /dev/fd/3: emit_descriptor) written as it stands, at its offset and
    // in its append mode (a /proc/self/fd link's target is no path to reopen: /dev/fd/63 of `-o >(gzip > r.gz)` reads
    // "pipe:[…]"); any other path opened by its own name, through its links as the kernel follows them.
    // O_NONBLOCK: a FIFO without a reader is an error (ENXIO) rather than a wait
    const std::optional<int> own = emit_descriptor(output);
    const int fd = own ? *own : ::open(output.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || (own && ::fcntl(fd, F_GETFD) < 0))
      throw errno == ENXIO ? error(output + ": a FIFO with no reader") : write_error(output);
    if (!own) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const auto done_with = [&] {
      if (!own) ::close(fd);
    };
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const error e = write_error(output);
        done_with();
        throw e;
      }
      done += size_t(n);
    }
    done_with();
    return;
  }
  const std::string tmp = target.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out || !out.write(text.data(), std::streamsize(text.size())) || !out.flush()) {
      const error e = write_error(output);  // errno of the failed open or write, before remove() changes it
      std::remove(tmp.c_str());
      throw e;
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const error e = write_error(output);
    std::remove(tmp.c_str());
    throw e;
  }
}

std::string gpus_table(const std::vector<gpu_spec>& gpus) {
  // the name and file columns as wide as their longest entry (RTX-PRO-6000-Server, a --gpus-dir path), so that every
  // row's columns line up under the header
  size_t name_w = 18, file_w = 24;
  for (const auto& g : gpus) name_w = std::max(name_w, g.name.size()), file_w = std::max(file_w, g.source.size());
  std::string out = fmt::format("{:<{}} {:<{}} {:<7} {:<10} {:>5} {:>6} {:>8} {:>6} {:>8} {:>8}\n", "name", name_w,
                                "file", file_w, "vendor", "arch", "SMs", "mem GB", "BW GB/s", "L2 MB", "fp32 TF",
                                "fp16 TF");
  for (const auto& g : gpus)
    out += fmt::format("{:<{}} {:<{}} {:<7} {:<10} {:>5} {:>6.0f} {:>8.0f} {:>6.1f} {:>8.1f} {:>8.1f}\n", g.name,
                       name_w, g.source, file_w, g.vendor, g.architecture, g.num_sm, g.mem_gb, g.mem_bw_gbps, g.l2_mb,
                       g.peak_fp32_tflops, g.peak_fp16_tflops);
  // what a file is of where its name alone misleads (its `note`: the MI250 file is one GCD, not the package)
  for (const auto& g : gpus)
    if (!g.note.empty()) out += fmt::format("note: {} is {}\n", g.name, g.note);
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

// Writes `gpu`'s calibration file at `path` (written by `by`); returns the path as messages show it.
std::string calibration_write(const gpu_spec& gpu, const std::filesystem::path& path, const std::map<std::string, double>& factors,
                              const std::optional<std::map<std::string, double>>& decode_factors, const std::string& by, const std::string& output,
                              const std::vector<std::pair<std::string, std::variant<std::string, double>>>& facts) {
  emit_check(output);  // a run that cannot write its report writes no calibration either
  // the file goes beside the GPU's: a bundled GPU of an installation shared by its users is not one of them's to
  // calibrate (its folder is read-only), a copy of it is
  const auto beside = [&](const std::function<void()>& write) {
    try {
      write();
    } catch (const error& e) {
      throw error(std::string(e.what()) + " (a calibration is written beside its GPU's file: copy " + gpu.file +
                  " into a folder of yours and calibrate the copy, --gpu ./" +
                  std::filesystem::path(gpu.file).filename().string() + ")");
    }
  };
  beside([&] { emit_check(path.string()); });
  const std::string text = calibration_text(
      gpu, factors, decode_factors,
      {path.filename().string() + " — written by " + by + "; refit to change.",
       "Every forecast on " + gpu.name + " multiplies each kernel family's predicted time by its factor",
       "(a decode step's by [decode_factors] when the file has them)",
       "(--no-calibration or NEUSIGHT_NO_CALIBRATION=1 ignores this file)."},
      facts);
  // the reader's rules (factor ranges, families, model and its size): never a file every later forecast would refuse
  calibration_parse(text, path.lexically_normal().generic_string() + " (as it would be written)", gpu);
  beside([&] { emit(text, path.string()); });
  return path.lexically_normal().generic_string();
}

}  // namespace ns
