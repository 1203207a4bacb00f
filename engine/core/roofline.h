// engine/core/roofline.h — kernel latency predictors: the roofline bound and the predictor interface.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu_spec.h"
#include "core/graph.h"

namespace ns {

struct train_convention;  // core/tile_model.h

// Peak FLOP/s the kernel can use on this GPU: GEMMs use the tensor/matrix rate of their dtype
// (fp32 = CUDA-core SIMT, as in the measured data: TF32 off), vector kernels the fp32 rate.
// Throws ns::error if the GPU has no unit for the dtype (peak 0).
double roofline_peak_flops(const gpu_spec& gpu, const kernel& k);
// The GPU file's key of that peak ("peak_fp32_tflops" for vector kernels and fp32 SIMT GEMMs, "peak_bf16_tflops" for a
// bf16 GEMM, …): the one unit the kernel's compute runs on (scripts/neusight/scale.lua destination() compares it alone).
std::string roofline_peak_key(const kernel& k);
// The dtypes a kernel is priced in, each with a GEMM peak of its own in a GPU file (fp32, tf32, fp16, bf16, fp8, in that
// order): the engine's dtypes (dtype_names) but fp64, which it sizes and never prices. The one list (a benchmark CSV's
// GEMM rows, engine/ingest/dataset.cpp, are read in these).
const std::vector<std::string>& matrix_dtypes();

// The dense peak of a GEMM of `dtype` (an engine dtype name: fp32, tf32, fp16, bf16, fp8) in TFLOP/s, nullopt when
// the GPU has no unit for it: what the figures' MFU and floor divide by. Throws ns::error for another name ("bfloat16",
// "BF16"): session::dense_peak_tflops reads those (neusight.kernels dtype_name, the one normaliser) and calls this.
std::optional<double> dense_peak_tflops(const gpu_spec& gpu, const std::string& dtype);

// The roofline's two terms in seconds: flops / roofline_peak_flops (0 without FLOPs) and bytes / DRAM bandwidth.
// Neither looks at a fixed `seconds`.
double roofline_compute_seconds(const kernel& k, const gpu_spec& gpu);
double roofline_memory_seconds(const kernel& k, const gpu_spec& gpu);

// max(flops / peak, bytes / bandwidth) in seconds; `seconds` of a fixed kernel wins.
double roofline_seconds(const kernel& k, const gpu_spec& gpu);

// The least time physics allows the kernel on this GPU's peaks: max(flops / peak, bytes / bandwidth), the compute term
// 0 where the GPU has no unit for its dtype, and 0 for a fixed-latency kernel (collectives, given times: no peak
// bounds them). The predictors never price a kernel below it; a forecast under the sum of its kernels' floors was
// brought there by a calibration or by the GPU file's peaks (scripts/neusight/figures.lua floor_warning).
double roofline_floor_seconds(const kernel& k, const gpu_spec& gpu);

// The reference implementation's roofline baseline, bit for bit (spec §8; its shipped
// prediction/<GPU>/roofline/*.json are reproducible with it). fp32 only; F = peak_fp32_tflops in GFLOP/s:
//   GEMM/BMM  FLOPs/1e9 / min(F, AI·BW), AI = FLOPs/B/1e9 / (4·(MN + NK + MK)/2^30)  (no B in AI; FLOPs the kernel's,
//             2·B·M·N·K from neusight.kernels)
//   vector    bytes/1e9 / BW       (bytes = MemPerO·B·H: the kernel's bytes)
//   memory    bytes / (BW·2^30)    (bytes over GiB/s, as the reference's MEM fallback)
// Throws ns::error for a non-fp32 kernel. A fixed `seconds` wins, as in the roofline.
double roofline_reference_seconds(const kernel& k, const gpu_spec& gpu);

// What a forecast's uncertainty band reads of its predictor for GPUs of one vendor (predictor::uncertainty).
struct uncertainty_source {
  // The leave-one-GPU-out error table (weights/<vendor>/uncertainty.toml, written by weights/uncertainty.sh; the
  // nvidia table when the vendor has none). Empty: none.
  std::filesystem::path table;
  // The GPUs each family's weights for the vendor were trained on (family_name → the manifest's training.gpus): whether
  // the GPU is one of them (the band's centre, the calibration prior) and their range (out of distribution, the per-SM
  // range warning), both in scripts/neusight/uncertainty.lua.
  std::map<std::string, std::vector<std::string>> trained_gpus;
  // The range of its input each family's weights were trained on (family_name → the manifest's [training.range]:
  // { family_range_input → the largest value among the rows }): a forecast's kernels beyond it are said
  // (scripts/neusight/uncertainty.lua); a family absent (no weights, or weights from before the key) says nothing.
  std::map<std::string, std::map<std::string, double>> trained_range;
  uncertainty_source() = default;
  uncertainty_source(std::filesystem::path t) : table(std::move(t)) {}  // a table alone (tests, fuzz targets)
};

class predictor {
 public:
  virtual ~predictor() = default;
  virtual std::string name() const = 0;
  // Seconds per kernel, same order as `kernels`.
  virtual std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const = 0;
  // What the last predict() could not do as asked (e.g. kernels priced by the roofline for lack of weights).
  virtual std::vector<std::string> warnings() const { return {}; }
  // Which kernels of the last predict() its alternative tile priced (kernel::tile_alt_*: the neusight predictor takes
  // the lesser of the two tiles), one per kernel; empty: none did, or the predictor does not say.
  virtual std::vector<bool> tiles_switched() const { return {}; }
  // Whether predict() may reuse work of earlier calls with the same inputs (on by default; results are the same
  // bit for bit either way). NEUSIGHT_NO_CACHE=1 turns it off.
  virtual void memo_enable(bool) {}
  // What the uncertainty band and the out-of-distribution check of a forecast on a GPU of `vendor` read of the
  // predictor (scripts/neusight/uncertainty.lua): see uncertainty_source. Empty: the predictor has none (roofline),
  // and forecasts carry no band.
  virtual uncertainty_source uncertainty(const std::string& /*vendor*/) const { return {}; }
  // Whether predict() prices kernels of `family` (tile_model.h family_name) on GPUs of `vendor` with its own model
  // (false: the roofline stands in, e.g. no weights for that family): only those carry its error table's spread.
  virtual bool models_family(const std::string& /*vendor*/, const std::string& /*family*/) const { return false; }
  // The fraction of the roofline each family reaches (family_name → (0, 1]; scripts/neusight/efficiency.lua, set by the
  // session): what a predictor that has no model of a family on a GPU divides the roofline by. Unset: the roofline.
  virtual void roofline_efficiency_set(std::map<std::string, double> /*by_family*/) {}
  // The least seconds such a kernel takes on a GPU (a launch plus a near-empty kernel: scripts/neusight/launch.lua
  // params(gpu).floor_s, set by the session): a roofline over an efficiency has no floor of its own, and a tiny decode
  // attention kernel came out far below any measured one. Unset: no floor.
  virtual void roofline_floor_set(std::function<double(const gpu_spec&)> /*floor_s*/) {}
  // Costs (scripts/neusight/kernels.lua linear / bmm, from each kernel's kind, dims, dtype and weight bytes) and tiles
  // (scripts/tiling/gemm.lua select) GEMM kernels on a GPU, set by the session: how the neusight predictor makes the
  // pieces of its sub-additivity envelope (neusight_predictor.cpp, weights/SUBADDITIVE_RULE.md). Unset: no such
  // envelope.
  virtual void gemm_pieces_set(std::function<void(std::vector<kernel*>&, const gpu_spec&)> /*complete*/) {}
  // The convention its vector families' MLPs were trained in (scripts/neusight/kernels.lua train_convention, set by the
  // session): how the neusight predictor shows a vector kernel to them (tile_features_compute). Unset there: pricing a
  // vector kernel with a model is an error.
  virtual void train_convention_set(const train_convention& /*conv*/) {}
};

std::vector<std::string> predictor_names();
// Throws ns::error naming the known predictors for an unknown name. `weights_root` holds
// <vendor>/<family>/ folders for the neusight predictor.
std::unique_ptr<predictor> predictor_make(const std::string& name, const std::filesystem::path& weights_root = {});

// NeuSight tile predictor (engine/core/tile_model.h) for GEMM/BMM/vector kernels; memory kernels and
// fixed-latency kernels as in the roofline. Kernels must carry tiles (session::tiles_select).
std::unique_ptr<predictor> neusight_predictor_make(const std::filesystem::path& weights_root);
// The same predictor over one family's model held in memory (`neusight train` scoring what it trained as forecasts
// price it, the envelope included); other families have no weights.
struct tile_model;
// `trained_gpus`: the GPUs the model was trained on (its manifest's training.gpus; the forecast of split element-wise
// tensors depends on them, neusight_predictor.cpp).
std::unique_ptr<predictor> neusight_predictor_make(const std::string& vendor, const tile_model& model,
                                                   std::vector<std::string> trained_gpus = {});

}  // namespace ns
