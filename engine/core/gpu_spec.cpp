// engine/core/gpu_spec.cpp — strict TOML loading of GPU specs (every key required, unknown keys rejected).
#include "core/gpu_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "core/text.h"
#include "core/toml_read.h"

namespace ns {
namespace fs = std::filesystem;

const std::vector<gpu_field>& gpu_fields() {
  using g = gpu_spec;
  // Ranges (lo, hi) hold every part made so far with room to spare (the largest as of 2025: 304 SMs, 288 GB, 8 TB/s,
  // 5 PFLOPS fp8, 2560 threads and 131072 registers per SM, 6th-gen PCIe).
  static const std::vector<gpu_field> fields = {
      {"name", &g::name, false},
      {"aliases", &g::aliases, false},
      {"vendor", &g::vendor, false},
      {"architecture", &g::architecture, false},
      {"compute_capability", &g::compute_capability, false},
      {"num_sm", &g::num_sm, true, false, 1, 4096},                     // SMs / CUs
      {"cores_per_sm", &g::cores_per_sm, true, false, 1, 4096},         // FP32 lanes per SM
      {"base_clock_mhz", &g::base_clock_mhz, true, false, 10, 10000},   // MHz
      {"boost_clock_mhz", &g::boost_clock_mhz, true, false, 10, 10000}, // MHz
      {"mem_gb", &g::mem_gb, true, false, 0.01, 1e5},                  // GB of device memory
      {"mem_reported_gib", &g::mem_reported_gib, true, true, 0.01, 1e5},  // GiB the device reports (optional)
      {"mem_bw_gbps", &g::mem_bw_gbps, true, false, 0.1, 1e6},          // GB/s
      {"l2_mb", &g::l2_mb, true, false, 0.001, 1e5},                   // MB
      {"peak_fp32_tflops", &g::peak_fp32_tflops, true, false, 0.001, 1e6},
      {"peak_fp32_matrix_tflops", &g::peak_fp32_matrix_tflops, true, false, 0.001, 1e6},
      {"peak_tf32_tflops", &g::peak_tf32_tflops, false, false, 0.001, 1e6},  // 0: no TF32 path
      {"peak_fp16_tflops", &g::peak_fp16_tflops, true, false, 0.001, 1e6},
      {"peak_bf16_tflops", &g::peak_bf16_tflops, false, false, 0.001, 1e6},  // 0: no BF16 path
      {"peak_fp8_tflops", &g::peak_fp8_tflops, false, false, 0.001, 1e6},    // 0: no FP8 path
      {"max_threads_per_sm", &g::max_threads_per_sm, true, false, 1, 65536},
      {"max_threads_per_block", &g::max_threads_per_block, true, false, 1, 16384},
      {"max_blocks_per_sm", &g::max_blocks_per_sm, true, false, 1, 4096},
      {"max_warps_per_sm", &g::max_warps_per_sm, true, false, 1, 4096},
      {"warp_size", &g::warp_size, true, false, 1, 1024},
      {"max_regs_per_sm", &g::max_regs_per_sm, true, false, 1, 1 << 24},
      {"max_regs_per_block", &g::max_regs_per_block, true, false, 1, 1 << 24},
      {"max_regs_per_thread", &g::max_regs_per_thread, true, false, 1, 65536},
      {"max_smem_per_sm_kb", &g::max_smem_per_sm_kb, true, false, 0.001, 1e6},
      {"max_smem_per_block_kb", &g::max_smem_per_block_kb, true, false, 0.001, 1e6},
      {"interconnect", &g::interconnect, false},
      {"interconnect_bw_gbps", &g::interconnect_bw_gbps, false, false, 0.01, 1e6},  // GB/s; 0: no GPU-GPU link
      {"pcie_gen", &g::pcie_gen, true, false, 1, 16},
      {"pcie_bw_gbps", &g::pcie_bw_gbps, true, false, 0.01, 1e5},       // GB/s per direction
      {"nvlink_domain_gpus", &g::nvlink_domain_gpus, true, true, 2, 1 << 20},  // GPUs one bridge joins (optional)
      {"price_per_hour_usd", &g::price_per_hour_usd, true, true, 0.0001, 1e6},  // USD per GPU-hour
      {"what_if", &g::what_if, false, true},  // a hypothetical part: what was changed (optional; gpu_check skips it)
      {"note", &g::note, false, true},        // what the file is of, where its name misleads (optional)
  };
  return fields;
}

namespace {

// A number as people write it: 4096, 0.001, 1e+06, 9.22337e+18.
std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Assigns one TOML value to the member a field points at, or throws with the value's position.
struct field_setter {
  gpu_spec& spec;
  const toml::node& value;
  const gpu_field& field;
  const std::string& at;

  [[noreturn]] void mistyped(const char* expected) const {
    throw error(at + ": key '" + field.key + "' must be " + expected + " (got " + toml_type_name(value) + ")");
  }
  void check_sign(double x) const {
    if (field.optional && !(x > 0 && std::isfinite(x)))
      throw error(at + ": key '" + field.key + "' must be a positive finite number (got " + std::to_string(x) +
                  "); leave the key out when unknown");
    if (!std::isfinite(x))
      throw error(at + ": key '" + field.key + "' must be a finite number (got " + std::to_string(x) + ")");
    if (field.positive ? !(x > 0) : !(x >= 0))
      throw error(at + ": key '" + field.key + "' must be " + (field.positive ? "> 0" : ">= 0") + " (got " +
                  std::to_string(x) + ")");
    if (x != 0 && field.hi > 0 && !(x >= field.lo && x <= field.hi))
      throw error(at + ": key '" + field.key + "' must be " + (field.positive ? "" : "0 or ") + "between " +
                  number_text(field.lo) + " and " + number_text(field.hi) + " (got " + number_text(x) +
                  "), the physical range of this field");
  }
  void operator()(std::string gpu_spec::*m) const {
    if (!value.is_string()) mistyped("a string");
    spec.*m = value.as_string()->get();
    if ((spec.*m).empty()) throw error(at + ": key '" + field.key + "' must not be empty");
    // whitespace only: printed as a blank (a note said of every run, a name in every table); a blank what_if is
    // scripts/neusight/gpu_check.lua's to refuse, which says what it must say
    if (std::string_view(field.key) != "what_if" && (spec.*m).find_first_not_of(" \t\r\n\f\v") == std::string::npos)
      throw error(at + ": key '" + field.key + "' must not be blank (whitespace only)");
  }
  void operator()(std::vector<std::string> gpu_spec::*m) const {
    const toml::array* arr = value.as_array();
    if (!arr) mistyped("an array of strings");
    for (const toml::node& item : *arr) {
      if (!item.is_string()) mistyped("an array of strings");
      (spec.*m).push_back(item.as_string()->get());
    }
  }
  void operator()(int64_t gpu_spec::*m) const {
    if (!value.is_integer()) mistyped("an integer");
    spec.*m = value.as_integer()->get();
    check_sign(double(spec.*m));
  }
  void operator()(double gpu_spec::*m) const {
    if (value.is_integer()) spec.*m = double(value.as_integer()->get());
    else if (value.is_floating_point()) spec.*m = value.as_floating_point()->get();
    else mistyped("a number");
    check_sign(spec.*m);
  }
};

}  // namespace

std::string gpu_key_at(const gpu_spec& gpu, const std::string& key) {
  const auto it = gpu.key_at.find(key);
  return it == gpu.key_at.end() ? gpu.source : it->second;
}

gpu_spec gpu_spec_parse(std::string_view toml_text, const std::string& source) {
  const toml::table tbl = toml_parse_text(toml_text, source);
  gpu_spec spec;
  spec.source = source;
  std::map<std::string, const gpu_field*> by_key;
  std::vector<std::string> keys;
  for (const auto& f : gpu_fields()) {
    by_key[f.key] = &f;
    keys.emplace_back(f.key);
  }
  std::set<std::string> seen;
  for (auto&& [key, value] : tbl) {
    const std::string k(key.str());
    const std::string at = toml_where(source, key.source().begin);
    auto it = by_key.find(k);
    if (it == by_key.end()) throw error(at + ": unknown key '" + k + "'" + text_did_you_mean(k, keys));
    std::visit(field_setter{spec, value, *it->second, at}, it->second->member);
    seen.insert(k);
    spec.key_at[k] = at;
  }
  // A missing key is reported at the end of the file, where it would be added.
  const size_t last_line = size_t(std::count(toml_text.begin(), toml_text.end(), '\n')) +
                           (toml_text.empty() || toml_text.back() == '\n' ? 0 : 1);
  for (const auto& f : gpu_fields())
    if (!f.optional && !seen.count(f.key))
      throw error(source + ":" + std::to_string(std::max<size_t>(last_line, 1)) + ":1: missing required key '" +
                  f.key + "'");
  const auto at_key = [&](const char* key) { return spec.key_at.at(key); };  // keys read above
  if (spec.vendor != "nvidia" && spec.vendor != "amd")
    throw error(toml_where(source, tbl["vendor"].node()->source().begin) + ": key 'vendor' must be \"nvidia\" or \"amd\" (got \"" +
                spec.vendor + "\")");
  // the architecture is the tile rules' (scripts/tiling/gemm.lua M.vendors: gpu_check): where to point its errors
  spec.vendor_line = int64_t(tbl.find("vendor")->first.source().begin.line);
  // The GPU-to-GPU link: scripts/neusight/topology.lua prices a node's collectives over interconnect_bw_gbps / 2 per
  // direction, or over pcie_bw_gbps when interconnect = "none"; checked here so that a parallel run does not fail late.
  const auto& links = gpu_interconnects();
  const auto link = std::find_if(links.begin(), links.end(), [&](const auto& l) { return l.first == spec.interconnect; });
  if (link == links.end()) {
    std::vector<std::string> names;
    std::string list;
    for (const auto& l : links) names.push_back(l.first), list += (list.empty() ? "" : ", ") + l.first;
    throw error(at_key("interconnect") + ": key 'interconnect' must be one of " + list + " (got \"" +
                spec.interconnect + "\")" + text_did_you_mean(spec.interconnect, names));
  }
  if (!link->second.empty() && link->second != spec.vendor)
    throw error(at_key("interconnect") + ": interconnect '" + spec.interconnect + "' is an " +
                (link->second == "amd" ? "AMD" : "NVIDIA") + " link, but vendor = \"" + spec.vendor + "\"");
  if (spec.interconnect == "none" && spec.interconnect_bw_gbps != 0)
    throw error(at_key("interconnect_bw_gbps") + ": key 'interconnect_bw_gbps' must be 0 with interconnect = \"none\" "
                "(got " + number_text(spec.interconnect_bw_gbps) + "): a part without a GPU-to-GPU link talks over "
                "pcie_bw_gbps; name the link (" + links[1].first + ", …) to use this bandwidth");
  if (spec.interconnect != "none" && spec.interconnect_bw_gbps == 0)
    throw error(at_key("interconnect_bw_gbps") + ": key 'interconnect_bw_gbps' must be > 0 with interconnect = \"" +
                spec.interconnect + "\" (the link's total bidirectional GB/s, e.g. 900 for NVLink 4 on an H100); "
                "interconnect = \"none\" for a part without a GPU-to-GPU link (collectives then use pcie_bw_gbps)");
  // The device-reported total is the datasheet's memory less what ECC, firmware and the driver keep (H100 80GB: 79.1
  // of 80 GiB; L40S with ECC 44.4 of 48): a figure above mem_gb is GB written for GiB (84.9 for an H100), one under
  // 0.8 × mem_gb another unit's slip; either would move every serving budget.
  if (spec.mem_reported_gib != 0 && !(spec.mem_reported_gib <= spec.mem_gb && spec.mem_reported_gib >= 0.8 * spec.mem_gb))
    throw error(at_key("mem_reported_gib") + ": key 'mem_reported_gib' must lie between 0.8 x mem_gb and mem_gb (" +
                number_text(0.8 * spec.mem_gb) + " to " + number_text(spec.mem_gb) + " GiB; got " +
                number_text(spec.mem_reported_gib) + "): it is the total the device reports in GiB (2^30 bytes: "
                "torch.cuda.mem_get_info()[1] / 2**30), a little under the datasheet's binary GB");
  if (spec.interconnect == "none" && spec.nvlink_domain_gpus != 0)
    throw error(at_key("nvlink_domain_gpus") + ": key 'nvlink_domain_gpus' is the size of a GPU-to-GPU link's domain, "
                "but interconnect = \"none\": leave it out, or name the bridge's link");
  return spec;
}

const std::vector<std::pair<std::string, std::string>>& gpu_interconnects() {
  static const std::vector<std::pair<std::string, std::string>> links = {
      {"none", ""},           {"nvlink1", "nvidia"}, {"nvlink2", "nvidia"}, {"nvlink3", "nvidia"},
      {"nvlink4", "nvidia"},  {"nvlink5", "nvidia"}, {"infinity_fabric", "amd"}};
  return links;
}

bool gpu_field_present(const gpu_spec& gpu, const gpu_field& f) {
  if (!f.optional) return true;
  if (const auto* i = std::get_if<int64_t gpu_spec::*>(&f.member)) return gpu.**i != 0;
  const auto* d = std::get_if<double gpu_spec::*>(&f.member);
  return !d || gpu.**d != 0;
}

namespace {
void key_add(std::string& out, const std::string& v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
}
}  // namespace

std::string gpu_spec_key(const gpu_spec& gpu) {
  std::string out;
  for (const auto& f : gpu_fields()) {
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(gpu.*member)>;
          const T& v = gpu.*member;
          if constexpr (std::is_same_v<T, std::string>) {
            key_add(out, v);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            out += std::to_string(v.size()) + "[";
            for (const auto& s : v) key_add(out, s);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            out += std::to_string(v) + ";";
          } else {
            char buf[40];
            std::snprintf(buf, sizeof buf, "%a;", v);  // exact
            out += buf;
          }
        },
        f.member);
  }
  key_add(out, gpu.source);
  return out;
}

gpu_spec gpu_spec_load(const fs::path& file, const std::string& display_name) {
  gpu_spec spec = gpu_spec_parse(
      text_file_read(file.string(), display_name, text_file_max_script, "cannot read GPU file"), display_name);
  spec.file = file.string();
  return spec;
}

namespace {
std::string squeezed(const std::string& s) {  // lower case, without spaces, '-' and '_'
  std::string out;
  for (char c : text_lower(s))
    if (c != ' ' && c != '-' && c != '_') out += c;
  return out;
}
}  // namespace

bool gpu_spec_named(const gpu_spec& gpu, const std::string& name) {
  const std::string q = squeezed(name);
  if (squeezed(gpu.name) == q || squeezed(fs::path(gpu.source).stem().string()) == q) return true;
  for (const auto& a : gpu.aliases)
    if (squeezed(a) == q) return true;
  return false;
}

gpu_catalog::gpu_catalog(fs::path dir, gpu_check check, std::vector<gpu_dir> user_dirs)
    : dir_(std::move(dir)), check_(std::move(check)), user_dirs_(std::move(user_dirs)) {}

gpu_spec gpu_catalog::load(const fs::path& file, const std::string& display_name) const {
  gpu_spec spec = gpu_spec_load(file, display_name);
  if (check_) check_(spec);
  return spec;
}

namespace {
std::vector<fs::path> toml_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".toml" && !calibration_file_is(e.path()))
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}
std::string display(const fs::path& file) { return "gpus/" + file.filename().string(); }

// The words of a GPU name, lower case: "A100 80GB" → {a100, 80gb}; "h100_pcie_80gb" → {h100, pcie, 80gb}.
std::set<std::string> name_words(const std::string& s) {
  std::set<std::string> out;
  std::string w;
  for (char c : text_lower(s) + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) w += c;
    else if (!w.empty()) out.insert(w), w.clear();
  }
  return out;
}

// What resolve says when `query` found `hit` by an alias that other GPUs of `all` answer to in part: each word of the
// query is a word of the other GPU's name, file stem or an alias ("a100" of a100_pcie_40gb; "A100 80GB" of
// a100_sxm4_80gb). The GPU's own name or stem is never ambiguous.
std::string resolve_note(const std::string& query, const gpu_spec& hit, const std::vector<gpu_spec>& all) {
  const std::string q = squeezed(query);
  if (q == squeezed(hit.name) || q == squeezed(fs::path(hit.source).stem().string())) return {};
  const std::set<std::string> words = name_words(query);
  if (words.empty()) return {};
  std::vector<std::string> others;
  for (const auto& g : all) {
    if (g.source == hit.source) continue;
    std::set<std::string> its = name_words(g.name), stem = name_words(fs::path(g.source).stem().string());
    its.insert(stem.begin(), stem.end());
    for (const auto& a : g.aliases) {
      const auto aw = name_words(a);
      its.insert(aw.begin(), aw.end());
    }
    if (std::includes(its.begin(), its.end(), words.begin(), words.end()))
      others.push_back(fs::path(g.source).stem().string());
  }
  if (others.empty()) return {};
  return "GPU '" + query + "' taken as " + hit.name + " (" + hit.source + "); name " + text_or_list(others) +
         " for another";
}
}  // namespace

std::vector<gpu_catalog::file_entry> gpu_catalog::files() const {
  std::vector<file_entry> out;
  for (const auto& d : user_dirs_)
    for (const auto& f : toml_files(d.path)) out.push_back({f, d.display + "/" + f.filename().string(), false});
  for (const auto& f : toml_files(dir_)) out.push_back({f, display(f), true});
  return out;
}

const gpu_catalog::visible_files& gpu_catalog::visible() const {
  if (*visible_) return **visible_;
  visible_files v;
  std::vector<gpu_spec>& out = v.gpus;
  std::vector<std::string>* hidden = &v.hidden;
  std::map<std::string, std::string> seen;  // lower-case stem or GPU name → the display of the file that has it
  // per folder, each lower-case GPU name and alias → the display of the file that has it: within a folder (the bundled
  // gpus/, or one of the user's) a name or alias is one GPU's, a second file answering to it an error naming both
  std::map<std::pair<std::string, std::string>, std::string> in_folder;
  for (const auto& f : files()) {
    const std::string stem = text_lower(f.path.stem().string());
    if (auto it = seen.find(stem); it != seen.end()) {  // a file of this stem came first: not parsed
      if (hidden) hidden->push_back(it->second + " shadows " + f.display);
      continue;
    }
    gpu_spec spec = load(f.path, f.display);
    const std::string folder = f.path.parent_path().lexically_normal().string();
    std::vector<std::string> names{spec.name};
    names.insert(names.end(), spec.aliases.begin(), spec.aliases.end());
    for (const auto& n : names) {
      const auto [it, fresh] = in_folder.emplace(std::make_pair(folder, text_lower(n)), f.display);
      if (!fresh && it->second != f.display)
        throw error(f.display + ": GPU '" + spec.name + "' answers to '" + n + "', and so does a GPU of " + it->second +
                    ": a name or alias names one GPU of a folder (rename or remove one of the two files)");
    }
    if (auto it = seen.find(text_lower(spec.name)); it != seen.end()) {
      if (hidden) hidden->push_back(it->second + " shadows " + f.display + " (GPU '" + spec.name + "')");
      continue;
    }
    seen.emplace(stem, f.display), seen.emplace(text_lower(spec.name), f.display);
    out.push_back(std::move(spec));
  }
  *visible_ = std::move(v);
  return **visible_;
}

std::vector<gpu_spec> gpu_catalog::load_all() const { return visible().gpus; }

std::vector<std::string> gpu_catalog::shadows() const {
  if (user_dirs_.empty()) return {};  // one folder: no file hides another (two of one name are an error)
  return visible().hidden;
}

bool gpu_query_is_path(const std::string& query) {
  return fs::path(query).extension() == ".toml" || query.find('/') != std::string::npos;
}

gpu_spec gpu_catalog::resolve(const std::string& query) const {
  std::string note;
  return resolve(query, note);
}

gpu_spec gpu_catalog::resolve(const std::string& query, std::string& note) const {
  note.clear();
  const fs::path as_path(query);
  if (gpu_query_is_path(query)) {
    if (!fs::exists(as_path)) {
      // gpus/<file>.toml as `neusight gpus` lists it, from a folder without one: the catalogue's own file, so that
      // `--gpu gpus/l40s.toml` works from any folder with the installed binary (as `run examples/…` does)
      const fs::path own = dir_ / as_path.filename();
      std::error_code ec;
      if (as_path.is_relative() && as_path.parent_path() == "gpus" && fs::is_regular_file(own, ec))
        return load(own, query);
      throw error(text_no_such_file(query) +
                  (as_path.is_relative() && as_path.parent_path() == "gpus" ? " (nor " + own.string() + " among the bundled GPUs)"
                                                                            : std::string()));
    }
    // A local gpus/<file>.toml beside a bundled file of that name: labelled ./gpus/<file>.toml, so that its forecasts
    // are not labelled as the bundled GPU's (gpus/<file>.toml, the label of --gpu h100 and friends)
    std::error_code ec;
    const fs::path own = dir_ / as_path.filename();
    if (as_path.is_relative() && as_path.parent_path() == "gpus" && fs::is_regular_file(own, ec) &&
        !fs::equivalent(as_path, own, ec))
      return load(as_path, "./" + as_path.generic_string());
    return load(as_path, query);
  }
  const std::string q = text_lower(query);
  // Stems first, also in the name's spelling ("H100-SXM5-80GB" → h100_sxm5_80gb): no other file is parsed (once every
  // file is read, visible() below answers). With user folders every file is read (a user file may hide a bundled one
  // by its GPU name).
  std::string q_stem = q;
  std::replace_if(q_stem.begin(), q_stem.end(), [](char c) { return c == '-' || c == ' '; }, '_');
  if (user_dirs_.empty() && !*visible_)
    for (const auto& f : toml_files(dir_)) {
      const std::string stem = text_lower(f.stem().string());
      if (stem == q || stem == q_stem) {
        gpu_spec spec = load(f, display(f));
        if (stem == q || text_lower(spec.name) == q) return spec;  // a normalised hit must be the GPU's own name
      }
    }
  std::vector<std::string> candidates;
  // Every file is read (a broken one, or a name that two files answer to, is an error whichever GPU is asked for).
  const std::vector<gpu_spec>& all = visible().gpus;
  for (const auto& spec : all)
    if (text_lower(fs::path(spec.source).stem().string()) == q) return spec;
  // The GPUs whose name or an alias is `q`: one is the answer; two (a user's file and a bundled one, both answering to
  // it: visible() refuses two of one folder) are an error naming both files, never the first of them.
  std::vector<std::pair<const gpu_spec*, bool>> exact;  // the GPU, and whether by an alias
  for (const auto& spec : all) {
    bool by_alias = false;
    for (const auto& a : spec.aliases) by_alias = by_alias || text_lower(a) == q;
    if (text_lower(spec.name) == q) exact.emplace_back(&spec, false);
    else if (by_alias) exact.emplace_back(&spec, true);
    candidates.push_back(spec.name);
    candidates.insert(candidates.end(), spec.aliases.begin(), spec.aliases.end());
  }
  if (exact.size() > 1) {
    std::string which;
    for (size_t i = 0; i < exact.size(); ++i)
      which += std::string(i == 0 ? "" : i + 1 == exact.size() ? " and " : ", ") + (exact[i].second ? "an alias of " : "") +
               exact[i].first->name + " (" + exact[i].first->source + ")";
    throw error("GPU '" + query + "' is ambiguous: it names " + which + "; give the file stem or path (see `neusight gpus`)");
  }
  if (exact.size() == 1) {
    if (exact[0].second) note = resolve_note(query, *exact[0].first, all);
    return *exact[0].first;
  }
  // As people type them: "H100 SXM", "h100sxm" and "H100-SXM" are one name (case, spaces, '-' and '_' ignored),
  // when exactly one GPU has it.
  std::vector<const gpu_spec*> hits;
  for (const auto& spec : all)
    if (gpu_spec_named(spec, query)) hits.push_back(&spec);
  if (hits.size() == 1) {
    note = resolve_note(query, *hits.front(), all);
    return *hits.front();
  }
  if (hits.size() > 1) {
    std::string names;
    for (const auto* h : hits) names += (names.empty() ? "'" : ", '") + h->name + "'";
    throw error("GPU '" + query + "' is ambiguous: " + names + "; give the file stem (see `neusight gpus`)");
  }
  const auto close = text_close_matches(query, candidates, 4);
  std::string msg = "unknown GPU '" + query + "'";
  if (!close.empty()) {
    msg += " (close matches:";
    for (size_t i = 0; i < close.size(); ++i) msg += (i ? ", '" : " '") + close[i] + "'";
    msg += ")";
  }
  throw error(msg + "; `neusight gpus` lists the known GPUs");
}

gpu_data_resolver::gpu_data_resolver(const gpu_catalog& catalog, const std::vector<std::string>& files)
    : catalog_(catalog) {
  for (const auto& file : files) {
    if (!gpu_query_is_path(file))
      throw error("--gpu " + file + ": a GPU file is expected here (path/to/my_gpu.toml, or ./" + file +
                  " for a file in this folder); the bundled GPUs need none, the rows' device names find them");
    gpu_spec spec = catalog_.resolve(file);  // as predict --gpu FILE loads it: every key checked, errors at file:line
    for (const auto& g : given_)
      if (text_lower(g.name) == text_lower(spec.name))
        throw error("--gpu " + g.source + " and --gpu " + spec.source + " are both GPU '" + spec.name + "': give one");
    given_.push_back(std::move(spec));
  }
  used_.assign(given_.size(), false);
}

std::optional<gpu_spec> gpu_data_resolver::device(const std::string& device) {
  std::optional<size_t> hit;
  for (size_t i = 0; i < given_.size(); ++i) {
    if (!gpu_spec_named(given_[i], device)) continue;
    if (hit)
      throw error("--gpu " + given_[*hit].source + " and --gpu " + given_[i].source + " both name device '" + device +
                  "': give one");
    hit = i;
  }
  std::optional<gpu_spec> bundled;
  if (!hit) {
    try {
      std::string note;  // a short name several GPUs answer to ("A100") is no device of measured data: not guessed
      bundled = catalog_.resolve(device, note);
      if (!note.empty()) bundled.reset();
    } catch (const error&) {  // an unknown device: the caller skips and counts its rows
    }
    for (size_t i = 0; bundled && i < given_.size() && !hit; ++i)
      if (text_lower(given_[i].name) == text_lower(bundled->name)) hit = i;
  }
  if (!hit) return bundled;
  used_[*hit] = true;
  return given_[*hit];
}

gpu_spec gpu_data_resolver::named(const std::string& query) const {
  for (const auto& g : given_)
    if (gpu_spec_named(g, query)) return g;
  return catalog_.resolve(query);
}

namespace {
// 'a', 'b', 'c' (at most `most`, then "and N more")
std::string quoted_list(const std::vector<std::string>& items, size_t most = 4) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < most; ++i) out += (i ? ", '" : "'") + items[i] + "'";
  if (items.size() > most) out += " and " + std::to_string(items.size() - most) + " more";
  return out;
}
}  // namespace

void gpu_data_resolver::unused_check(const std::string& what, const std::vector<std::string>& unknown) const {
  for (size_t i = 0; i < given_.size(); ++i) {
    if (used_[i]) continue;
    const gpu_spec& g = given_[i];
    throw error("--gpu " + g.source + ": no device of " + what + " is GPU '" + g.name + "'" +
                (g.aliases.empty() ? std::string() : " (aliases " + quoted_list(g.aliases, SIZE_MAX) + ")") +
                (unknown.empty() ? std::string() : "; devices no GPU file names: " + quoted_list(unknown)) +
                ": the file's name or one of its aliases must be the device as the data writes it (case, spaces, '-' "
                "and '_' aside)");
  }
}

std::string gpu_data_resolver::unknown_advice(const std::vector<std::string>& devices) {
  if (devices.empty()) return {};
  return "no GPU file names " + std::string(devices.size() == 1 ? "device " : "devices ") + quoted_list(devices) +
         ": describe each GPU in a TOML file (a copy of one in `neusight paths gpus`, with the device string as its "
         "name or an alias) and pass it with --gpu FILE";
}

}  // namespace ns
