// engine/core/weights.cpp — weight folder IO with strict manifest checks (never a silent default).
#include "core/weights.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "core/text.h"

namespace ns {
namespace fs = std::filesystem;

uint64_t fnv1a64(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

namespace {

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string weights_identity(const fs::path& root, const std::string& vendor) {
  std::error_code ec;
  std::vector<fs::path> manifests;
  for (const auto& fam : fs::directory_iterator(root / vendor, ec))
    if (std::error_code ec2; fs::is_regular_file(fam.path() / "model.toml", ec2)) manifests.push_back(fam.path());
  std::sort(manifests.begin(), manifests.end());
  std::string lines;
  for (const auto& dir : manifests) {
    std::ifstream in(dir / "model.toml");
    std::string line, sum;
    while (std::getline(in, line))  // weights_save writes `weights_fnv1a64 = '<hex>'` on a line of its own
      if (line.rfind("weights_fnv1a64", 0) == 0) sum = line;
    lines += dir.filename().generic_string() + " " + sum + "\n";
  }
  return lines.empty() ? "" : hex64(fnv1a64(lines.data(), lines.size()));
}

namespace {

// Parameters in file order: per layer, W row-major (out × in), then b; then feature mean and scale.
std::vector<float> flatten(const tile_model& m) {
  std::vector<float> out;
  for (size_t l = 0; l < m.net.w.size(); ++l) {
    const Eigen::MatrixXf& w = m.net.w[l];
    for (int i = 0; i < w.rows(); ++i)
      for (int j = 0; j < w.cols(); ++j) out.push_back(w(i, j));
    for (int i = 0; i < m.net.b[l].size(); ++i) out.push_back(m.net.b[l](i));
  }
  for (const auto* a : {&m.mean, &m.scale, &m.lo, &m.hi}) out.insert(out.end(), a->begin(), a->end());
  return out;
}

void write_whole(const fs::path& file, const std::string& bytes) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out || !out.write(bytes.data(), std::streamsize(bytes.size())) || !out.flush())
      throw error(file.string() + ": cannot write");
  }
  fs::rename(tmp, file);
}

template <class T>
toml::array to_array(const std::vector<T>& v) {
  toml::array a;
  for (const auto& x : v) a.push_back(x);
  return a;
}

// [training.range]'s table (weights_save's, weights_range_text's)
toml::table range_table(const std::map<std::string, double>& range) {
  toml::table t;
  for (const auto& [name, v] : range) t.insert(name, v);
  return t;
}

}  // namespace

std::string weights_range_text(const std::map<std::string, double>& range) {
  toml::table tr;
  tr.insert("range", range_table(range));
  toml::table t;
  t.insert("training", std::move(tr));
  std::ostringstream text;
  text << t;
  return text.str();
}

std::map<std::string, double> weights_range_of(family f, const std::vector<const kernel*>& kernels) {
  const std::string_view name = family_range_input(f);
  if (name.empty() || kernels.empty()) return {};
  double most = 0;
  for (const kernel* k : kernels) most = std::max(most, family_range_value(f, *k));
  return {{std::string(name), most}};
}

void weights_save(const fs::path& dir, const tile_model& m, const weights_provenance& p) {
  fs::create_directories(dir);
  const std::vector<float> params = flatten(m);
  std::string bin(params.size() * sizeof(float), '\0');
  std::memcpy(bin.data(), params.data(), bin.size());  // little-endian hosts only (x86-64, aarch64)

  toml::table t;
  t.insert("format_version", weights_format_version);
  t.insert("family", std::string(family_name(m.fam)));
  t.insert("vendor", p.vendor);
  t.insert("layers", to_array(m.net.sizes()));
  t.insert("activation", "relu");
  t.insert("latency", m.fam == family::gemm_fp8
                          ? "base / (sigmoid(o1) * (1 - sigmoid(o0) / waves)) + sigmoid(o2) * 20e-6 s + "
                            "quant_row_cycles * M / clock + quant_bytes_per_element * M * K / bandwidth (act_quant kernels)"
                          : "base / (sigmoid(o1) * (1 - sigmoid(o0) / waves)) + sigmoid(o2) * 20e-6 s");
  const auto& names = tile_feature_names(p.vendor, m.fam);
  std::vector<std::string> feats(names.begin(), names.end());
  t.insert("features", to_array(feats));
  if (m.util_floor != 1e-4) t.insert("util_floor", m.util_floor);
  if (m.min_seconds > 0) t.insert("min_seconds", m.min_seconds);
  if (m.partial_wave != wave_share::fair_share) t.insert("partial_wave", std::string(wave_share_name(m.partial_wave)));
  if (m.fam == family::gemm_fp8) {  // required for gemm_fp8, even when 0
    t.insert("quant_row_cycles", m.quant.row_cycles);
    t.insert("quant_bytes_per_element", m.quant.bytes_per_element);
  }
  t.insert("weights_file", "weights.bin");
  t.insert("weights_layout",
           "float32 little-endian; per layer W row-major (out x in) then b; then feature mean, scale, min, max");
  t.insert("weights_bytes", int64_t(bin.size()));
  t.insert("weights_fnv1a64", hex64(fnv1a64(bin.data(), bin.size())));
  toml::table tr;
  tr.insert("data", to_array(p.data));
  tr.insert("gpus", to_array(p.gpus));
  tr.insert("excluded_gpus", to_array(p.excluded));
  tr.insert("tiles", p.tiles);
  tr.insert("command", p.command);
  tr.insert("git_commit", p.git_commit);
  tr.insert("seed", int64_t(p.seed));
  tr.insert("rows", p.rows);
  tr.insert("train_rows", p.train_rows);
  tr.insert("val_rows", p.val_rows);
  tr.insert("epochs_run", p.epochs_run);
  tr.insert("best_epoch", p.best_epoch);
  tr.insert("val_mape_percent", p.val_mape);
  tr.insert("train_mape_percent", p.train_mape);
  tr.insert("seconds", p.seconds);
  if (!p.range.empty()) tr.insert("range", range_table(p.range));
  t.insert("training", std::move(tr));
  std::ostringstream text;
  text << "# " << (dir / "model.toml").generic_string() << " — generated by `neusight train`; do not edit\n" << t << "\n";
  write_whole(dir / "weights.bin", bin);
  write_whole(dir / "model.toml", text.str());
}

namespace {

struct manifest_reader {
  const toml::table& t;
  std::string where;

  const toml::node& get(const char* key) const {
    const toml::node* n = t.get(key);
    if (!n) throw error(where + ": missing required key '" + key + "'");
    return *n;
  }
  std::string at(const toml::node& n) const {
    return where + ":" + std::to_string(n.source().begin.line) + ":" + std::to_string(n.source().begin.column);
  }
  std::string str(const char* key) const {
    const auto& n = get(key);
    if (!n.is_string()) throw error(at(n) + ": key '" + key + "' must be a string");
    return n.as_string()->get();
  }
  int64_t integer(const char* key) const {
    const auto& n = get(key);
    if (!n.is_integer()) throw error(at(n) + ": key '" + key + "' must be an integer");
    return n.as_integer()->get();
  }
  const toml::array& array(const char* key) const {
    const auto& n = get(key);
    if (!n.is_array()) throw error(at(n) + ": key '" + key + "' must be an array");
    return *n.as_array();
  }
};

}  // namespace

tile_model weights_load(const fs::path& dir, weights_provenance* provenance) {
  const std::string mpath = (dir / "model.toml").generic_string();
  if (!fs::exists(dir / "model.toml")) throw error(text_no_such_file(mpath) + " (train with `neusight train`)");
  return weights_parse(text_file_read(mpath, mpath, text_file_max_script), dir,
                       [](const std::string& bpath) { return text_file_read(bpath, bpath, text_file_max_data); },
                       provenance);
}

tile_model weights_parse(std::string_view manifest_text, const fs::path& dir, const weights_reader& read,
                         weights_provenance* provenance) {
  const std::string mpath = (dir / "model.toml").generic_string();
  toml::table t;
  try {
    t = toml::parse(manifest_text, mpath);
  } catch (const toml::parse_error& e) {
    throw error(mpath + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                ": " + std::string(e.description()));
  }
  const manifest_reader r{t, mpath};
  static const std::set<std::string_view> known = {
      "format_version", "family",     "vendor",           "layers",          "activation",
      "latency",        "features",   "util_floor",       "quant_row_cycles", "quant_bytes_per_element", "min_seconds", "partial_wave",
      "weights_file",   "weights_layout", "weights_bytes", "weights_fnv1a64", "training"};
  for (const auto& [key, node] : t)
    if (!known.count(key.str()))
      throw error(r.at(node) + ": unknown key '" + std::string(key.str()) + "'" +
                  text_did_you_mean(std::string(key.str()), std::vector<std::string>(known.begin(), known.end())));
  if (const int64_t v = r.integer("format_version"); v != weights_format_version)
    throw error(mpath + ": format_version " + std::to_string(v) + " is not supported (this engine reads " +
                std::to_string(weights_format_version) + ")");
  tile_model m;
  const std::string fam = r.str("family");
  const auto f = family_parse(fam);
  if (!f) throw error(mpath + ": unknown family '" + fam + "'");
  m.fam = *f;
  m.vendor = r.str("vendor");
  std::vector<int> sizes;
  for (const auto& n : r.array("layers")) {
    if (!n.is_integer() || n.as_integer()->get() < 1 || n.as_integer()->get() > weights_max_layer_width)
      throw error(mpath + ": 'layers' must hold positive integers of at most " +
                  std::to_string(weights_max_layer_width));
    sizes.push_back(int(n.as_integer()->get()));
  }
  if (sizes.size() < 2 || sizes.front() != int(tile_feature_count) || sizes.back() != tile_outputs)
    throw error(mpath + ": 'layers' must start with " + std::to_string(tile_feature_count) + " inputs and end with " +
                std::to_string(tile_outputs) + " outputs");
  const auto& feats = r.array("features");
  bool same = feats.size() == tile_feature_count;
  for (size_t i = 0; same && i < tile_feature_count; ++i)
    same = feats[i].is_string() && feats[i].as_string()->get() == tile_feature_names(m.vendor, m.fam)[i];
  if (!same) throw error(mpath + ": trained on other features than this engine computes; retrain with `neusight train`");
  if (const auto* uf = t.get("util_floor")) {
    const auto v = uf->value<double>();
    if (!v || !(*v > 0 && *v <= 1)) throw error(mpath + ": 'util_floor' must be a number in (0, 1]");
    m.util_floor = *v;
  }
  // The least seconds a kernel of the family takes (tile_model::min_seconds): optional, absent in weights from before
  // it. A second or more is no launch floor (a typo of units).
  if (const auto* ms = t.get("min_seconds")) {
    const auto v = ms->value<double>();
    if (!v || !(*v > 0 && *v < 1))
      throw error(r.at(*ms) + ": 'min_seconds' must be a number of seconds in (0, 1) (the least a kernel of the "
                  "family takes)");
    m.min_seconds = *v;
  }
  // How the features price a partial wave (tile_model.h wave_share): optional, absent = fair_share (weights from
  // before the key keep their forecasts); a value this engine does not know is refused, never read as the default.
  if (const auto* pw = t.get("partial_wave")) {
    const auto v = pw->value<std::string>();
    const auto share = v ? wave_share_parse(*v) : std::nullopt;
    if (!share) {
      const auto& names = wave_share_names();
      throw error(r.at(*pw) + ": 'partial_wave' must be " + text_or_list(names, "\"") + " (how a partial wave shares the bandwidth, "
                  "engine/core/tile_model.h)" + (v ? text_did_you_mean(*v, names) : std::string()));
    }
    m.partial_wave = *share;
  }
  // The activation quantisation stage (tile_model.h quant_stage): required for gemm_fp8 (weights from before it
  // would load with a changed meaning), refused for the other families.
  for (const auto& [key, slot] : {std::pair<const char*, double*>{"quant_row_cycles", &m.quant.row_cycles},
                                  std::pair<const char*, double*>{"quant_bytes_per_element", &m.quant.bytes_per_element}}) {
    const auto* q = t.get(key);
    if (m.fam != family::gemm_fp8) {
      if (q) throw error(r.at(*q) + ": '" + key + "' is for gemm_fp8 only");
      continue;
    }
    if (!q)
      throw error(mpath + ": missing required key '" + key + "' (gemm_fp8 weights from before the activation "
                  "quantisation stage; retrain with `neusight train`)");
    const auto v = q->value<double>();
    if (!v || !(*v >= 0 && *v <= 1e6)) throw error(r.at(*q) + ": '" + key + "' must be a number in [0, 1e6]");
    *slot = *v;
  }
  if (r.str("activation") != "relu") throw error(mpath + ": unsupported activation '" + r.str("activation") + "'");

  const std::string file = r.str("weights_file");
  if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
    throw error(mpath + ": 'weights_file' must name a file beside model.toml (got '" + file + "')");
  const std::string bpath = (dir / file).generic_string();
  // From the layer sizes, before anything is allocated or read (widths are capped, so this cannot overflow).
  size_t params = 4 * tile_feature_count;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) params += (size_t(sizes[l]) + 1) * size_t(sizes[l + 1]);
  const size_t expected = params * sizeof(float);
  if (expected > text_file_max_data)
    throw error(mpath + ": 'layers' imply " + std::to_string(expected) + " bytes of weights, more than any model file holds");
  const std::string bin = read(bpath);
  const int64_t want = r.integer("weights_bytes");
  if (int64_t(bin.size()) != want || bin.size() != expected)
    throw error(bpath + ": " + std::to_string(bin.size()) + " bytes, expected " + std::to_string(expected) +
                " (truncated or from another model)");
  if (hex64(fnv1a64(bin.data(), bin.size())) != r.str("weights_fnv1a64"))
    throw error(bpath + ": checksum mismatch (file corrupted or edited; expected fnv1a64 " + r.str("weights_fnv1a64") + ")");
  m.net = mlp::make(sizes, 0);
  std::vector<float> p(bin.size() / sizeof(float));
  std::memcpy(p.data(), bin.data(), bin.size());
  // the checksum only says the file is the one written: a NaN, an infinity or a zero feature scale would make every
  // forecast of the family null or infinite
  for (size_t i = 0; i < p.size(); ++i)
    if (!std::isfinite(p[i])) throw error(bpath + ": float #" + std::to_string(i) + " is not finite (a diverged training run?)");
  for (size_t i = 0; i < tile_feature_count; ++i)
    if (!(p[p.size() - 3 * tile_feature_count + i] != 0))
      throw error(bpath + ": feature scale #" + std::to_string(i) + " is 0 (the features cannot be normalised)");
  size_t at = 0;
  for (size_t l = 0; l < m.net.w.size(); ++l) {
    Eigen::MatrixXf& w = m.net.w[l];
    for (int i = 0; i < w.rows(); ++i)
      for (int j = 0; j < w.cols(); ++j) w(i, j) = p[at++];
    for (int i = 0; i < m.net.b[l].size(); ++i) m.net.b[l](i) = p[at++];
  }
  for (auto* a : {&m.mean, &m.scale, &m.lo, &m.hi})
    for (auto& x : *a) x = p[at++];
  if (provenance) {
    provenance->vendor = r.str("vendor");
    if (const toml::table* tr = t["training"].as_table()) {
      provenance->val_mape = tr->get("val_mape_percent") ? tr->get("val_mape_percent")->value_or(0.0) : 0.0;
      provenance->command = tr->get("command") ? tr->get("command")->value_or(std::string()) : std::string();
      if (const toml::array* g = tr->get_as<toml::array>("gpus"))  // the forecast reads them (neusight_predictor.cpp)
        for (const auto& v : *g) {
          if (!v.is_string()) throw error(mpath + ": training.gpus must be strings");
          provenance->gpus.push_back(v.value_or(std::string()));
        }
      // [training.range] (weights_range_of): the family's range input alone, a positive finite number; a misspelt
      // or other family's name is refused, never read as "no range"
      if (const toml::node* rn = tr->get("range")) {
        const toml::table* range = rn->as_table();
        if (!range) throw error(r.at(*rn) + ": training.range must be a table ([training.range])");
        const std::string_view input = family_range_input(m.fam);
        for (const auto& [key, node] : *range) {
          if (key.str() != input)
            throw error(r.at(node) + ": training.range." + std::string(key.str()) + " is not an input the " +
                        std::string(family_name(m.fam)) + " family records" +
                        (input.empty() ? std::string(" (it records none)")
                                       : " (it records '" + std::string(input) + "')"));
          const auto v = node.value<double>();
          if (!v || !std::isfinite(*v) || !(*v > 0))
            throw error(r.at(node) + ": training.range." + std::string(input) + " must be a positive number");
          provenance->range.emplace(std::string(input), *v);
        }
      }
    }
  }
  return m;
}

}  // namespace ns
