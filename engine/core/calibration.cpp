// engine/core/calibration.cpp — a GPU's calibration file: read, written, applied.
#include "core/calibration.h"

#include <cmath>
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/text.h"
#include "core/tile_model.h"
#include "core/toml_read.h"

namespace ns {

namespace fs = std::filesystem;

namespace {
// A TOML basic string.
std::string toml_quote(const std::string& v) {
  std::string out = "\"";
  for (unsigned char ch : v) {
    if (ch == '"' || ch == '\\') out += '\\', out += char(ch);
    else if (ch < 0x20 || ch == 0x7f) out += fmt::format("\\u{:04x}", ch);
    else out += char(ch);
  }
  return out + "\"";
}
}  // namespace

namespace {
// A GPU field's value as [gpu_file] records it, a TOML value that reads back to the same value (numbers exactly,
// shortest form; a whole double keeps its ".0" so that it reads back as a float); nullopt for an optional field the
// spec leaves out.
std::optional<std::string> gpu_field_toml(const gpu_spec& gpu, const gpu_field& f) {
  if (!gpu_field_present(gpu, f)) return std::nullopt;
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::decay_t<decltype(gpu.*member)>;
        const T& v = gpu.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          return toml_quote(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + toml_quote(v[i]);
          return out + "]";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else {
          std::string out = fmt::format("{}", v);
          if (out.find_first_of(".en") == std::string::npos) out += ".0";
          return out;
        }
      },
      f.member);
}

// The same of a [gpu_file] value as read back (nullopt: not the field's type, which the caller reports).
std::optional<std::string> gpu_field_toml(const toml::node& n, const gpu_field& f) {
  return std::visit(
      [&](auto member) -> std::optional<std::string> {
        using T = std::decay_t<std::remove_reference_t<decltype(std::declval<gpu_spec&>().*member)>>;
        gpu_spec one;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!n.is_string()) return std::nullopt;
          one.*member = n.as_string()->get();
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          const toml::array* arr = n.as_array();
          if (!arr) return std::nullopt;
          for (const toml::node& item : *arr) {
            if (!item.is_string()) return std::nullopt;
            (one.*member).push_back(item.as_string()->get());
          }
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (!n.is_integer()) return std::nullopt;
          one.*member = n.as_integer()->get();
        } else {
          if (n.is_floating_point()) one.*member = n.as_floating_point()->get();
          else if (n.is_integer()) one.*member = double(n.as_integer()->get());
          else return std::nullopt;
          if (!(one.*member > 0 || one.*member == 0)) return std::nullopt;  // nan: never a GPU file's
        }
        gpu_field whole = f;
        whole.optional = false;  // present in the table: its value, 0 included
        return gpu_field_toml(one, whole);
      },
      f.member);
}
}  // namespace

std::string calibration_stale_warning(const calibration& c, const gpu_spec& gpu) {
  if (c.gpu_changed.empty()) return "";
  std::string keys;
  for (const auto& k : c.gpu_changed) keys += (keys.empty() ? "" : ", ") + k;
  return c.source + " was fitted to another version of " + gpu.source + " (changed since: " + keys +
         "): its factors correct the forecasts of the old numbers; refit it (`neusight predict --gpu " + gpu.source +
         " … --calibrate FILE`), or give --no-calibration";
}

namespace {
// The predictor `c` was fitted to: its key, else the default one (calibration_default_predictor).
std::string fitted_predictor(const calibration& c) {
  return c.predictor.empty() ? calibration_default_predictor : c.predictor;
}
// What a warning says of a file without a `predictor` key.
std::string unnamed_note(const calibration& c) {
  return c.predictor.empty() ? " (it names no predictor, so it is read as the default " +
                                   std::string(calibration_default_predictor) + " predictor's; every file `--calibrate` "
                                   "writes names one: refit it to record its own)"
                             : "";
}
}  // namespace

std::string calibration_predictor_warning(const calibration& c, const std::string& predictor) {
  const std::string fitted = fitted_predictor(c);
  if (predictor.empty() || fitted == predictor) return "";
  return c.source + " was fitted to the " + fitted + " predictor's forecasts" + unnamed_note(c) + ", not applied to this " +
         predictor + " forecast (its factors correct another predictor's kernel times); calibrate with --predictor " +
         predictor + " to correct these, or forecast with --predictor " + fitted;
}

std::string calibration_unnamed_warning(const calibration& c, const std::string& predictor) {
  if (!c.predictor.empty() || predictor.empty() || !calibration_predictor_warning(c, predictor).empty()) return "";
  return c.source + " names no predictor: applied as fitted to the default " + predictor +
         " predictor's forecasts, and skipped under any other --predictor; every file `--calibrate` writes names "
         "its predictor, so refit it (`neusight predict … --calibrate FILE`) to record the one it was fitted to";
}

std::string calibration_weights_warning(const calibration& c, const std::string& predictor, const std::string& weights,
                                        const std::string& weights_root, const std::string& bundled) {
  if (predictor.empty()) return "";
  // the weights the file was fitted with: its key, else the bundled ones under the neusight predictor, else none
  const bool keyed = !c.weights.empty();
  const std::string fitted = keyed ? c.weights : fitted_predictor(c) == "neusight" ? bundled : "";
  if (fitted.empty() || fitted == weights) return "";
  const bool at_bundled = weights == bundled;
  return c.source + " was fitted to the forecasts of " +
         (keyed ? (c.weights == bundled ? "the bundled weights" : "other weights (identity " + c.weights + ")")
                : "the bundled weights (it names no `weights`)") +
         ", not applied to this forecast with " +
         (at_bundled ? "the bundled weights" : "the weights of " + weights_root + " (identity " + weights + ")") +
         " (its factors correct those weights' kernel times); calibrate with these weights to correct these, or "
         "forecast with the weights it was fitted with";
}

fs::path calibration_path(const gpu_spec& gpu) {
  if (gpu.file.empty()) return {};
  const fs::path f(gpu.file);
  return f.parent_path() / (f.stem().string() + ".calibration.toml");
}

std::optional<calibration> calibration_load(const gpu_spec& gpu) {
  const fs::path path = calibration_path(gpu);
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return std::nullopt;
  const std::string source = path.lexically_normal().generic_string();
  return calibration_parse(text_file_read(path.string(), source, text_file_max_script), source, gpu);
}

calibration calibration_parse(std::string_view text, const std::string& source, const gpu_spec& gpu) {
  calibration c;
  c.source = source;
  const toml::table t = toml_parse_text(text, c.source);
  auto where = [&](const toml::node& n) { return toml_where(c.source, n.source().begin); };
  // value_exact: value<int64_t>() would cast a float such as 1.3e118 to int64 (UB; found by fuzz_calibration_toml)
  if (t["format_version"].value_exact<int64_t>() != 1)
    throw error(c.source + ": format_version = 1 expected (a calibration written by `neusight predict --calibrate`)");
  const auto gpu_name = t["gpu"].value<std::string>();
  if (!gpu_name) throw error(c.source + ": missing key 'gpu' (the GPU the factors were fitted for)");
  if (*gpu_name != gpu.name)
    throw error(where(*t.get("gpu")) + ": a calibration of " + *gpu_name + " beside the file of " + gpu.name +
                " (refit it with `neusight predict --gpu " + gpu.source + " … --calibrate FILE`)");
  // trace_device, ops, steps: a calibration from a profiler trace (`predict --gpu G --calibrate TRACE.json`; its
  // measured_ms / forecast_ms are per profiled step; trace_mode, the phase its metadata names; skipped, the families
  // too little measured for a factor); the *_ttft_ms / *_tpot_ms: from a serve measurement
  // (`serve --batch … --calibrate FILE`)
  static const std::vector<std::string> keys = {
      "format_version",    "gpu",         "measurement",      "measured_ms",      "forecast_ms",
      "workload",          "model",       "predictor",        "note",             "trace_device",     "ops", "steps",
      "measured_ttft_ms",  "forecast_ttft_ms", "measured_tpot_ms", "forecast_tpot_ms", "factors",
      "decode_factors",    "model_params",     "gpu_file",         "weights",          "trace_mode",
      "skipped"};
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw error(toml_where(c.source, k.source().begin) + ": unknown key '" + key + "'" + text_did_you_mean(key, keys));
  }
  if (const toml::node* n = t.get("model")) {
    const auto s = n->value<std::string>();
    if (!s || s->empty()) throw error(where(*n) + ": model must be a non-empty string (the model of the measurement)");
    c.model = *s;
  }
  if (const toml::node* n = t.get("predictor")) {
    const auto s = n->value<std::string>();
    if (!s || s->empty())
      throw error(where(*n) + ": predictor must be a non-empty string (the predictor whose forecasts were fitted)");
    c.predictor = *s;
  }
  if (const toml::node* n = t.get("weights")) {
    const auto s = n->value<std::string>();
    if (!s || s->empty())
      throw error(where(*n) + ": weights must be a non-empty string (the identity of the weights whose forecasts "
                  "were fitted)");
    c.weights = *s;
  }
  if (const toml::node* n = t.get("model_params")) {
    const auto x = n->value<double>();
    if (!x || !std::isfinite(*x) || *x < 1 || *x >= calibration_model_params_max)
      throw error(where(*n) + ": model_params must be a number of parameters, 1 to 2^48 (the measured model's)");
    c.model_params = *x;
  }
  const auto known = family_name_list();
  // a table of family = factor, each known and within the loader's range
  auto factors_of = [&](const toml::table& tab) {
    std::map<std::string, double> out;
    for (const auto& [k, v] : tab) {
      const std::string name(k.str());
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw error(where(v) + ": unknown kernel family '" + name + "'" + text_did_you_mean(name, known) +
                    " (families: " + fmt::format("{}", fmt::join(known, ", ")) + ")");
      const auto x = v.value<double>();
      if (!x || !std::isfinite(*x) || *x < 0.05 || *x > 20)
        throw error(where(v) + ": factor of " + name + " must be a number in [0.05, 20]");
      out[name] = *x;
    }
    return out;
  };
  const toml::table* factors = t["factors"].as_table();
  if (!factors) throw error(c.source + ": missing table [factors]");
  c.factors = factors_of(*factors);
  if (const toml::node* d = t.get("decode_factors")) {
    if (!d->is_table()) throw error(where(*d) + ": decode_factors must be a table (family = factor)");
    c.decode_factors = factors_of(*d->as_table());
  }
  // [gpu_file]: the GPU file the fit saw, compared with the file now (an older calibration has none: applied as it is)
  if (const toml::node* g = t.get("gpu_file")) {
    const toml::table* tab = g->as_table();
    if (!tab) throw error(where(*g) + ": gpu_file must be a table (the GPU file's keys and values the fit saw)");
    std::vector<std::string> names;
    for (const auto& f : gpu_fields()) names.emplace_back(f.key);
    for (const auto& [k, v] : *tab) {
      const std::string key(k.str());
      if (std::find(names.begin(), names.end(), key) == names.end())
        throw error(toml_where(c.source, k.source().begin) + ": unknown GPU file key 'gpu_file." + key + "'" +
                    text_did_you_mean(key, names));
    }
    c.gpu_recorded = true;
    for (const auto& f : gpu_fields()) {
      const toml::node* n = tab->get(f.key);
      std::optional<std::string> then;
      if (n) {
        then = gpu_field_toml(*n, f);
        if (!then) throw error(where(*n) + ": gpu_file." + f.key + " is not of the GPU file key's type");
      }
      if (then != gpu_field_toml(gpu, f)) c.gpu_changed.emplace_back(f.key);
    }
  }
  return c;
}

std::string calibration_text(const gpu_spec& gpu, const std::map<std::string, double>& factors,
                             const std::optional<std::map<std::string, double>>& decode_factors,
                             const std::vector<std::string>& header,
                             const std::vector<std::pair<std::string, std::variant<std::string, double>>>& facts) {
  std::string out;
  for (const auto& h : header) out += "# " + h + "\n";
  out += "format_version = 1\n";
  out += fmt::format("gpu = {}\n", toml_quote(gpu.name));
  for (const auto& [k, v] : facts) {
    if (const auto* x = std::get_if<double>(&v))  // a count (model_params, ops) exactly; a time to 6 digits
      out += std::isfinite(*x) && *x == std::floor(*x) && std::fabs(*x) < 0x1p53 ? fmt::format("{} = {:.0f}\n", k, *x)
                                                                                 : fmt::format("{} = {:.6g}\n", k, *x);
    else out += fmt::format("{} = {}\n", k, toml_quote(std::get<std::string>(v)));
  }
  out += factors.empty() ? "\n[factors]  # none: only decode steps are calibrated (a decode step was measured)\n"
                         : "\n[factors]  # predicted time of each kernel family x factor\n";
  for (const auto& [k, v] : factors) out += fmt::format("{} = {:.10g}\n", k, v);
  if (decode_factors) {
    out += decode_factors->empty()
               ? "\n[decode_factors]  # none: decode steps keep their forecast (no decode step was measured)\n"
               : "\n[decode_factors]  # a decode step's kernels take these instead (fitted to a measured decode step)\n";
    for (const auto& [k, v] : *decode_factors) out += fmt::format("{} = {:.10g}\n", k, v);
  }
  out += "\n[gpu_file]  # the GPU file the factors were fitted with: forecasts warn once the file says otherwise\n";
  for (const auto& f : gpu_fields())
    if (const auto v = gpu_field_toml(gpu, f)) out += fmt::format("{} = {}\n", f.key, *v);
  return out;
}

const std::map<std::string, double>& calibration_factors(const calibration& c, bool decode) {
  return decode && c.decode_factors ? *c.decode_factors : c.factors;
}

const std::map<std::string, double>* calibration_applied(const calibration* c, bool decode) {
  if (!c) return nullptr;
  const auto& f = calibration_factors(*c, decode);
  return f.empty() ? nullptr : &f;
}

void calibration_apply(const std::vector<kernel_instance>& kernels, std::vector<double>& seconds, const calibration& c,
                       bool decode) {
  const std::map<std::string, double>& factors = calibration_factors(c, decode);
  for (size_t i = 0; i < kernels.size(); ++i) {
    const kernel& k = kernels[i].k;
    if (k.seconds) continue;
    const auto fam = family_of(k);
    if (!fam) continue;
    if (auto it = factors.find(std::string(family_name(*fam))); it != factors.end()) seconds[i] *= it->second;
  }
}

}  // namespace ns
