// engine/core/calibration.h — per-family correction factors of one GPU, fitted from a measurement of the user's own
// (`neusight predict … --calibrate FILE`, `neusight serve --batch … --calibrate FILE`, scripts/neusight/calibration.lua)
// and kept beside the GPU's file as <stem>.calibration.toml; every later forecast on that GPU multiplies its kernel
// families' predicted times by them.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/gpu_spec.h"
#include "core/graph.h"

namespace ns {

// The largest whole-model parameter count a calibration records (workload.lua's bound on a model's parameters).
constexpr double calibration_model_params_max = 0x1p48;

struct calibration {
  std::string source;                     // the file, as shown in messages and reports
  std::map<std::string, double> factors;  // kernel family (tile_model.h family_name) → factor on its predicted time
  // [decode_factors]: what a decode step's kernels take instead of [factors] (serve's decode steps, predict --mode
  // decode), fitted to a measured decode step (serve's TPOT, predict --mode decode); empty when none was measured, so
  // decode steps stay uncalibrated (a prefill's or a training step's compute-bound bias is not a decode step's:
  // weights/PHASE_CALIBRATION_RULE.md). nullopt (a profiler trace's, or an older file): [factors] for every forecast.
  std::optional<std::map<std::string, double>> decode_factors;
  std::string model;  // the model of the measurement it was fitted to (key `model`); "" for a trace or an older file
  // the predictor whose forecasts the factors correct (key `predictor`: the fit's); "" for a file without it, which
  // is read as the default predictor's (calibration_default_predictor). Another predictor's forecasts skip the file
  // (calibration_predictor_warning).
  std::string predictor;
  // the identity of the weights whose forecasts the factors correct (key `weights`: engine/core/weights.h
  // weights_identity of the fit's weights root), written when the fit's predictor read weights; "" for a file without
  // it, which is read as fitted with the bundled weights when its predictor is the neusight one
  // (calibration_weights_warning).
  std::string weights;
  // its whole-model parameter count (key `model_params`), when the measured run held the whole model (one GPU, or data-
  // and pipeline-parallel only): what later forecasts tell the model by (scripts/neusight/calibration.lua model_warning)
  std::optional<double> model_params;
  // [gpu_file]: the GPU file's values the factors were fitted with (every gpu_fields() key present in the spec);
  // false for an older file without it, which is applied as it is. gpu_changed: the keys whose value the GPU's file
  // now gives otherwise (or adds, or drops), in gpu_fields() order; empty when it is the file the fit saw.
  bool gpu_recorded = false;
  std::vector<std::string> gpu_changed;
};

// The warning of a forecast that applies `c` after its GPU's file was edited (c.gpu_changed not empty), "" otherwise:
// the factors were fitted to other numbers, so they correct another forecast. Every forecast that applies the file
// says it (figures.lua, serve.lua, sweep.lua, search).
std::string calibration_stale_warning(const calibration& c, const gpu_spec& gpu);

// The warning of a forecast with `predictor` on a GPU whose calibration `c` was fitted to another predictor's
// forecasts (a file that names none: to calibration_default_predictor's), "" when it applies or `predictor` is "". Such a forecast does not apply the
// file: its factors are the ratio of a measurement to that predictor's kernel times (a roofline fit of a T4 doubled
// the neusight predictor's forecast), not to this one's. Every forecast that skips the file says it.
std::string calibration_predictor_warning(const calibration& c, const std::string& predictor);

// The predictor a file without a `predictor` key is read as fitted to: the default one (`--predictor`'s default,
// "neusight"). Every file `--calibrate` wrote names its predictor; one without the key (written by hand, or edited)
// applies under the default predictor only, with calibration_unnamed_warning.
inline constexpr const char* calibration_default_predictor = "neusight";
// The warning of a forecast with `predictor` that applies `c` although `c` names no predictor (read as the default
// predictor's): "" when the file names one, or when it is not applied (calibration_predictor_warning says that).
std::string calibration_unnamed_warning(const calibration& c, const std::string& predictor);

// The warning of a forecast with `predictor` and the weights `weights` (weights_identity of its root; `weights_root`
// as shown, `bundled`: weights_identity of the bundled weights) on a GPU whose calibration `c` was fitted to the
// forecasts of other weights, "" when it applies. The weights `c` was fitted with: its `weights` key, else the
// bundled ones when its predictor (calibration_default_predictor when unnamed) is the neusight one, else none (a
// roofline fit read no weights: every weights root applies it). Such a forecast does not apply the file (its factors
// are a ratio to those weights' kernel times), as for another predictor.
std::string calibration_weights_warning(const calibration& c, const std::string& predictor, const std::string& weights,
                                        const std::string& weights_root, const std::string& bundled);

// The factors a forecast applies: a decode step's (`decode`) are [decode_factors] when the file has them.
const std::map<std::string, double>& calibration_factors(const calibration& c, bool decode);
// The same of a GPU's calibration (nullptr: none), nullptr when they are empty (a decode step under an empty
// [decode_factors]): whether a forecast was calibrated at all.
const std::map<std::string, double>* calibration_applied(const calibration* c, bool decode);

// Where `gpu`'s calibration lives: <dir of gpu.file>/<stem>.calibration.toml (empty when the spec has no file).
std::filesystem::path calibration_path(const gpu_spec& gpu);

// The calibration beside `gpu`'s file, nullopt when there is none. Throws ns::error "<file>:<line>:<col>: …" on a
// syntax error, a factor outside [0.05, 20] or not finite, an unknown family, or a calibration of another GPU (by
// name). A calibration of an earlier version of the GPU's file loads, with calibration::gpu_changed set.
std::optional<calibration> calibration_load(const gpu_spec& gpu);
// The same from the file's text, named `source` in messages (what calibration_load calls; the fuzz target too).
calibration calibration_parse(std::string_view text, const std::string& source, const gpu_spec& gpu);

// The calibration file of `gpu` (what calibration_load reads): `header` lines become comments at the top, `facts`
// key = "value" lines before the factors (what was measured, how it was fitted); decode_factors, when given, its
// [decode_factors] table (empty: decode steps uncalibrated); last, [gpu_file]: `gpu`'s values (what a later load
// compares the GPU's file with).
std::string calibration_text(const gpu_spec& gpu, const std::map<std::string, double>& factors,
                             const std::optional<std::map<std::string, double>>& decode_factors,
                             const std::vector<std::string>& header,
                             const std::vector<std::pair<std::string, std::variant<std::string, double>>>& facts);

// seconds[i] *= the factor of kernels[i]'s family (kernels with a fixed latency or no family are left as they are),
// from calibration_factors(c, decode): `decode`, the kernels are a decode step's.
void calibration_apply(const std::vector<kernel_instance>& kernels, std::vector<double>& seconds, const calibration& c,
                       bool decode);

}  // namespace ns
