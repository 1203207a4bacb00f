// engine/core/tile_model.h — the NeuSight tile predictor: tiles and waves, roofline per wave, MLP utilisation.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_spec.h"
#include "core/graph.h"
#include "core/mlp.h"

namespace ns {

// bmm/linear: fp32 GEMMs on CUDA cores (SIMT) or FP32 MFMA, as the NeuSight measurements.
// gemm_tc16: GEMMs and BMMs on tensor cores with 16-bit operands (bf16, fp16; tf32 follows it at its own peak),
// gemm_fp8: fp8 tensor-core GEMMs; trained on the AIConfigurator measurements (../shared/data/aiconfigurator).
// Their kernels with act_quant = "dynamic_tensor" (AIConfigurator's fp8 rows, forward fp8 Linears and grouped expert
// GEMMs in inference) carry the activation quantisation those measurements include, priced outside the MLP
// (tile_fixed_seconds, weights/README.md).
// attention_prefill: fused attention kernels (FlashAttention-style forward, and its backward priced by the same
// model on its own work); attention_decode: one query token per sequence over a KV cache. Both trained on the
// AIConfigurator context/generation attention measurements.
enum class family { bmm, linear, elementwise, softmax, layernorm, gemm_tc16, gemm_fp8, attention_prefill, attention_decode };
constexpr std::array<family, 9> families = {family::bmm,       family::linear,    family::elementwise, family::softmax,
                                            family::layernorm, family::gemm_tc16, family::gemm_fp8,
                                            family::attention_prefill, family::attention_decode};
std::string_view family_name(family f);
std::optional<family> family_parse(std::string_view s);
std::vector<std::string> family_name_list();  // every family's name, in `families` order
// fp32 gemm → linear, fp32 bmm → bmm, tensor-core dtypes → gemm_tc16 / gemm_fp8, vector kinds → themselves,
// memory → none (analytic).
std::optional<family> family_of(const kernel& k);
// The input of a family's kernels whose trained range its weights' manifest records ([training.range], written by
// `neusight train` from the rows it trained on: the largest value among them), or "" for a family without one. A
// forecast's kernels of the family beyond it are extrapolated by the MLP (scripts/neusight/uncertainty.lua says so):
//   attention_prefill  "keys"           the keys a prefill (or training / encoder sdpa) kernel attends over, or its
//                                       queries if more: max(k, m); AIConfigurator's context_attention, prompts
//   attention_decode   "cached_tokens"  the cached tokens a decode kernel attends over (context + the new token): k
std::string_view family_range_input(family f);
// That input of kernel `k` of family `f` (family_of(k) == f and family_range_input(f) not ""), 0 otherwise.
double family_range_value(family f, const kernel& k);

// The reference's four MLP inputs are log2 ratios, bit-for-bit in its units (spec §1.3): tile GFLOP / per-SM
// TFLOP/s, tile MB / per-SM GB/s, W·tile MB / per-SM memory MB, W·tile MB / per-SM L2 KB (`ref` below).
// Our MLP keeps the first three, drops the L2 ratio and adds log2(W) and the last-wave fill (blocks / (W·SMs)).
// Why drop L2: among the training GPUs only the A100 has a large L2 (40 MB vs 2–6 MB), so the ratio is a
// feature no leave-one-out model can learn; with it the A100-held-out BMM error was 63 %, without it 6 %
// (weights/ACCURACY.md). Every unseen GPU we are judged on (H100, L4, A100-80GB) has a large L2.
//
// The tensor-core and attention families (trained on seven GPUs of three architectures, judged on Hopper) use
// a set built to transfer across GPUs and to respect the roofline's physics: no feature is a per-SM resource on
// its own (with the fp32 set, leaving the A100 out doubled its attention forecasts: the memory features placed
// it between Ada and Blackwell), and none carries the resource that does not bind. Their five: log2 tile time
// at the kernel's roofline throughput min(peak, AI·bw) (ms), log2 tile elements per FLOP (the tile's shape, the
// same on every GPU and for every 16/32-bit dtype: a tf32 GEMM is the bf16 GEMM at half the peak), log2(W), the last-wave fill, and the kernel's distance from the ridge point
// log2(peak / (AI·bw)) clamped to ±transfer_ridge_clamp. A kernel more than 2× from the ridge then gets the same
// features, `base` and forecast on two GPUs that differ only in the resource it is not bound by
// (tests/core/test_forecast_physics.cpp).
//
// For NVIDIA BMM and Linear (flops_at_roofline) the first is taken against the roofline throughput
// min(peak, AI·bw) instead of the peak: tile GFLOP / per-SM roofline TFLOP/s. For a compute-bound kernel that is
// the reference's ratio; for a bandwidth-bound one it is the tile's time at the bandwidth, so neither a feature
// nor `base` depends on the FLOP peaks and two GPUs that differ only in peaks get the same forecast.
// Kept only where leave-one-GPU-out got better and nothing else broke (weights/ACCURACY.md; mean MAPE over the
// five held-out GPUs): BMM 23.9 → 17.3 % (V100 held out 42.2 → 14.9 %), Linear 25.1 → 23.5 %. Not kept:
// layer norm 22.2 → 24.7 % over five seeds (T4 held out 7.5 → 28.5 %); elementwise A100 / V100 held out
// 10.9 / 13.6 → 15.8 / 17.7 % over three seeds; softmax improved (23.6 → 21.9 %, five seeds) but a model
// trained on the grids alone then put rows far beyond them at the utilisation floor (1.3 M rows × 1024 on the
// A100: 356× the measured time, 5× with the peak). With four training GPUs the peak per SM is one of the two
// descriptors from which these MLPs infer how much of the bandwidth a GPU achieves. AMD keeps the peak in every
// family: two AMD GPUs allow no leave-one-GPU-out, and in distribution the change made the MI210 end-to-end labels
// worse (mean APE 8.2 → 12.2 %, mostly the softmax of 2048-long rows).
// The converse property does not hold for any family: the second ratio keeps the bandwidth for compute-bound
// GEMMs. Taking it at the roofline as well (tile MB / (roof / AI)) made leave-one-GPU-out far worse (A100 held
// out: BMM 8.3 → 337 %, Linear 22 → 60 %; dropping it only beyond 4× or 16× from the ridge: Linear 69 % and
// 57 %). Tiled GEMMs re-read their operands (an fp32 SIMT tile of 32×128 to 128×128 does 13–32 FLOP per byte
// it loads, near every GPU's ridge), so bandwidth is not irrelevant to them.
constexpr size_t tile_feature_count = 5;
bool family_transfer_features(family f);
// log2 distance from the ridge beyond which the transfer families see a kernel as purely memory- or compute-bound.
constexpr double transfer_ridge_clamp = 1;

// The convention the vector families' MLPs were trained in: per vector family (element-wise, softmax, layer norm), the
// FLOPs per element and the range of DRAM bytes per element of the training data's fp32 kernels. Its one source is
// scripts/neusight/kernels.lua train_convention() (those kernels' costs as forecasts compute them), which
// session::training_convention() reads once per session and hands to the tile model: no copy of it here. Vector
// kernels outside the bytes range are shown to the MLP as the fp32 kernel moving the same bytes
// (tile_features_compute). The GEMM and attention families have none.
struct vector_convention {
  double flops = 0;                     // per element
  double bytes_min = 0, bytes_max = 0;  // per element
};
struct train_convention {
  std::map<family, vector_convention> by_family;
  // The family's entry; throws ns::error when there is none (a predictor the session did not hand it to).
  const vector_convention& of(family f) const;
};
// x0 against min(peak, AI·bw) rather than the peak: NVIDIA bmm and linear.
bool flops_at_roofline(std::string_view vendor, family f);
// The footprint input log2(waves·tile_mb/(mem_gb·1024/sms)) is shifted by the log2 amount log2(waves) was clipped by,
// before its own clip (NVIDIA bmm and linear; weights/FOOTPRINT_CLIP_RULE.md): for one GPU and tile the two differ by
// a constant, so a kernel past the top of log2(waves) stays on the training manifold instead of walking the footprint
// input alone to its top (the MLP's steep fall there priced llama3_8b's fp32 lm_head on a B200 ~46x its roofline).
bool footprint_clips_with_waves(std::string_view vendor, family f);
// tile_model_train sets util_floor from the data (half the lowest utilisation a training row reached): the
// tensor-core and attention families, and NVIDIA linear (weights/UTIL_FLOOR_RULE.md); the others keep 1e-4.
bool util_floor_from_data(std::string_view vendor, family f);
const std::array<const char*, tile_feature_count>& tile_feature_names(std::string_view vendor, family f);

// How a partial wave — the last (or only) wave, of b < SMs blocks — shares the memory system in `base` (the
// weights' `partial_wave` in model.toml, tile_model::partial_wave; weights/PARTIAL_WAVE_RULE.md):
// - fair_share (absent from the manifest; weights trained before the key, gemm_fp8, the fp32 / attention families):
//   every wave is priced as all SMs each running one tile at its 1/SMs share of the roofline, full or not;
// - sm_share (gemm_tc16 weights of variant D3 of weights/PARTIAL_WAVE_RULE.md, adopted with the 16-bit split of
//   scripts/tiling/gemm.lua; `neusight train` now writes sm_persist, whose base this is; gemm_fp8 keeps fair_share): in a partial wave compute stays per SM (a tile
//   at peak / SMs) while the b blocks share the bandwidth, each drawing bw / max(b, SMs / c) — no SM more than c times
//   its fair share bw / SMs (one SM cannot saturate DRAM alone), c = tile_sm_bandwidth_share. Full waves are priced
//   as under fair_share (the same expression at b = SMs).
// - sm_persist (written by `neusight train` for gemm_tc16: candidate F of weights/WEIGHT_STREAM_RULE.md's second rule):
//   sm_share's base, and a GEMM / BMM whose real arithmetic intensity (2·M·N·K FLOPs over its bytes, without the
//   tile's padded rows) puts it at least transfer_ridge_clamp on the bandwidth side of the ridge is shown to the
//   network as one wave of tiles W times as long (first feature log2(W × tile time), log2(W) feature 0, fill
//   blocks / (W·SMs) as before: the fill of its blocks over whole waves); its latency form keeps W. Such a kernel streams
//   its bytes across waves (a CTA of the next wave starts when one ends); the data's large streaming rows reach W 3 at
//   most while their single-wave rows cover the long tile times (weights/WEIGHT_STREAM_RULE.md). The padded AI would
//   leave a 1-row GEMM on 128-row tiles 0.93 from the RTX PRO 6000's ridge: not streaming by that measure.
enum class wave_share { fair_share, sm_share, sm_persist };
std::string_view wave_share_name(wave_share s);
std::optional<wave_share> wave_share_parse(std::string_view s);
// The manifest's names of every wave_share (fair_share, sm_share, sm_persist), for messages.
const std::vector<std::string>& wave_share_names();
// What `neusight train` gives a family's new weights: sm_persist for gemm_tc16, fair_share otherwise (gemm_fp8 included).
wave_share wave_share_trained(family f);
// The waves the network sees (its log2(W) feature, and W / shown × the tile time in its first): 1 under sm_persist for
// a kernel with log2(peak / (AI_real·bw)) = real_ridge_log2 ≥ transfer_ridge_clamp, else `waves`. The one source of the rule.
double tile_shown_waves(double waves, double real_ridge_log2, wave_share share);
// c: how many times its fair share of the bandwidth (bw / SMs) one SM's blocks draw at most. Not fitted: Little's law
// (a tensor-core mainloop CTA keeps ≈ 48–96 KB in flight; at ≈ 0.6–0.8 µs DRAM latency 60–160 GB/s, 2.4–6.3× the H100
// SXM's 25 GB/s per SM) and the training rows' K slopes at a few CTAs (L40S ≈ 5.4×, B200 1.7–3.4× their fair
// shares); a per-SM rate from clocks fits those rows worse (weights/PARTIAL_WAVE_RULE.md).
constexpr double tile_sm_bandwidth_share = 4;
// The latency at utilisation 1 of `blocks` tiles of tile_gflop GFLOP each on `sms` SMs, at a GPU peak of
// peak_gflops GFLOP/s and a kernel bandwidth roof of ai_bw_gflops (arithmetic intensity × bandwidth, GFLOP/s):
//   fair_share: W · tile_gflop · SMs / min(peak, AI·bw), W = ⌈blocks / SMs⌉;
//   sm_share:   (W − 1) · tile_gflop · SMs / min(peak, AI·bw) + tile_gflop · max(SMs / peak, max(b, SMs / c) / (AI·bw)),
//               b = blocks − (W − 1) · SMs, the last wave's blocks.
// The one source of the formula (tile_features_compute's base_seconds, before weight-only quantisation's scale).
double tile_base_seconds(double blocks, double sms, double tile_gflop, double peak_gflops, double ai_bw_gflops,
                         wave_share share);

struct tile_features {
  std::array<float, tile_feature_count> x{};
  std::array<double, 4> ref{};  // the reference's four inputs, for inspection and the worked-example test
  double waves = 0;         // W = ceil(blocks / SMs)
  double blocks = 0;
  double roof_gflops = 0;   // min(peak, AI · bandwidth) in the reference's units
  double base_seconds = 0;  // W · tile GFLOP · SMs / roof: the latency at utilisation 1
  double compute_seconds = 0;  // the kernel's real FLOPs / its peak (roofline_peak_flops): the forecast's floor
  double overhead_scale = 1;   // multiplies the learned launch overhead (tile_overhead_reference_mhz / boost clock)
  // Kernels whose act_quant is "dynamic_tensor" (gemm_fp8 only): the activation quantisation before the GEMM
  // (quant_stage below), not learned by the MLP. quant_row_seconds = M / boost clock (tile_model::quant.row_cycles
  // multiplies it); quant_bytes_seconds = M · K / bandwidth (quant.bytes_per_element multiplies it).
  double quant_row_seconds = 0;
  double quant_bytes_seconds = 0;
  double quant_in = 0, quant_out = 0;  // the GEMM's K (in-features) and N (out-features): the stage's fit selects on them
};

// Needs the kernel's tile (tile_m/tile_k for GEMMs, tile_elems for vector kernels). Throws for memory kernels.
//
// The rule for vector kernels (elementwise, softmax, layernorm): the MLP sees the kernel in the convention it
// was trained in, i.e. its tile features, roof and base are those of the kernel's bytes with the family's
// training FLOPs per element (`conv`'s, × rows × hidden), whatever FLOPs the kernel
// reports. In the training data FLOPs are a fixed multiple of the elements, so the FLOP feature is collinear
// with the byte feature; a kernel with more FLOPs per byte (Adam's 3-FLOP lerp/addcmul/addcdiv, a SiLU, a fused
// chain) is off that manifold and the MLP answered it with the utilisation floor, 10²–10⁴× the roofline.
// The real FLOPs enter only through the compute bound `compute_seconds` = FLOPs / fp32 peak (the vector peak,
// roofline_peak_flops), and tile_seconds never returns less: a kernel with more FLOPs and the same bytes is
// never faster, and is at most max(its representative's forecast, its roofline compute time).
// For a kernel in the convention (1-FLOP element-wise ops, softmax, layer norm as emitted by neusight.kernels)
// nothing changes: base_seconds ≥ FLOPs / peak already (tiles cover the kernel and roof ≤ peak, util < 1), so
// the bound never binds — the same holds for every GEMM/BMM, whose FLOPs are taken as they are.
// `conv`: the training convention (session::training_convention()), read for vector kernels only.
// `share`: how the weights that will price the features share a partial wave's bandwidth (tile_model::partial_wave).
tile_features tile_features_compute(const kernel& k, const gpu_spec& gpu, const train_convention& conv,
                                    wave_share share);
// The kernel's compute bound: its FLOPs / roofline_peak_flops (fp32 for vector kernels, the dtype's for GEMMs).
double tile_compute_seconds(const kernel& k, const gpu_spec& gpu);

// util = σ(o1) · (1 − σ(o0) / W): the paper's α − β/W with 0 < β ≤ α, so utilisation stays in (0, 1)
// (the reference's σ(o2) − σ(o0)/W can reach ≤ 0 and then predicts 0 s).
double tile_utilization(float o0, float o1, double waves, double floor = 1e-4);

// Our third output: a fixed per-launch cost overhead = σ(o2) · tile_overhead_max_s, added to the wave time.
// Tiny kernels (bias-gradient adds, small layer norms) take microseconds whatever their roofline says;
// without it the MLP must push utilisation towards 0 to reach them, which it learns badly.
constexpr double tile_overhead_max_s = 20e-6;
// The tensor-core and attention families count that overhead in cycles: it is scaled by
// tile_overhead_reference_mhz / the GPU's boost clock (tile_features::overhead_scale; 1 for the fp32 families).
constexpr double tile_overhead_reference_mhz = 1500;
constexpr int tile_outputs = 3;

// The activation quantisation of an fp8 GEMM whose kernel says act_quant = "dynamic_tensor" (vLLM's dynamic
// per-tensor scaling, as in AIConfigurator's fp8 rows; the op rules set it: ops' rules.linear, ops/grouped_linear.lua,
// neusight.workload.quantise_activations): an absmax reduction over the bf16 activations that ends with one atomic
// max per token row on the single scale (serialised on one address: a fixed number of cycles per row), then the
// quantising pass over the activations:
//   seconds = row_cycles · M / boost clock + bytes_per_element · M · K / bandwidth
// row_cycles: cycles per token row, fitted by tile_model_train (see there); bytes_per_element: the passes' bytes per
// activation element, tile_quant_bytes_per_element (both in model.toml).
// The nominal bytes per activation element of the passes: the absmax reads bf16 (2 B), the quantising pass reads
// it again and writes fp8 (2 + 1 B).
constexpr double tile_quant_bytes_per_element = 5;
struct quant_stage {
  double row_cycles = 0;
  double bytes_per_element = 0;
};
// The unlearned part of a forecast (0 but for gemm_fp8 kernels with act_quant): the one source of the formula.
double tile_fixed_seconds(const tile_features& f, const quant_stage& q);

// seconds = max(base / max(util, util_floor) + overhead + fixed, compute_seconds, min_seconds)
double tile_seconds(const tile_features& f, float o0, float o1, float o2, double util_floor = 1e-4,
                    const quant_stage& q = {}, double min_seconds = 0);

struct tile_model {
  family fam = family::bmm;
  std::string vendor;  // the GPUs it was trained on (weights manifest); the features depend on it
  mlp net;
  std::array<float, tile_feature_count> mean{}, scale{};  // x_norm = (x − mean) / scale
  // Training range of each feature: inputs are clipped to it, so a kernel larger than anything measured
  // keeps the utilisation of the largest measured ones (the roofline still scales) instead of trusting
  // the MLP's extrapolation, which was off by 20× on A100 elementwise kernels of 3·10⁹ elements.
  std::array<float, tile_feature_count> lo{}, hi{};
  // Lowest utilisation a forecast may claim: half the lowest the training rows beyond the launch overhead's reach
  // (measured ≥ 2 × tile_overhead_max_s) reached (base / measured), so a
  // feature combination off the training manifold cannot send a kernel to 10^4 × its roofline. 1e-4 for weights
  // trained before this bound existed (the manifest's optional util_floor).
  double util_floor = 1e-4;
  // gemm_fp8: the activation quantisation stage (tile_fixed_seconds), fitted by tile_model_train; zero for every
  // other family (the manifest's quant_row_cycles and quant_bytes_per_element, required for gemm_fp8).
  quant_stage quant;
  // The least seconds a kernel of the family takes: the smallest measured latency among the rows it was trained on
  // (tile_min_seconds; the manifest's optional min_seconds, 0 = none: weights from before it keep their forecasts).
  // The MLP's learnt launch term holds on the training manifold only: off it (a 1×1×1 bf16 GEMM, a decode attention
  // over a handful of keys) it answered 0.04–0.9 µs where no kernel the data measured took under 1.5 µs.
  double min_seconds = 0;
  // How the features it is given price a partial wave (the manifest's optional partial_wave; absent = fair_share, the
  // formula of weights trained before the key). Forecasts compute the features with it (tile_features_compute).
  wave_share partial_wave = wave_share::fair_share;

  // The MLP's raw outputs (tile_outputs × rows) for each feature row (one Eigen evaluation for all of them).
  Eigen::MatrixXf outputs(const std::vector<tile_features>& rows) const;
  // Seconds for each feature row: tile_seconds of outputs().
  std::vector<double> predict(const std::vector<tile_features>& rows) const;
};

struct train_sample {
  tile_features f;
  double seconds = 0;  // measured
};

struct train_options {
  std::vector<int> hidden = {64, 64, 64};
  int max_epochs = 300;
  int batch = 256;
  float lr = 2e-3f;
  float weight_decay = 1e-4f;
  uint64_t seed = 0;
  double val_fraction = 0.2;
  int patience = 30;  // epochs without validation improvement before stopping (lr halves at patience/3)
  int threads = 2;
  std::string vendor;  // the training rows' vendor (neusight train sets it): util_floor_from_data reads it; required
                       // (tile_model_train refuses an empty one)
};

struct train_progress {
  int epoch = 0, max_epochs = 0, best_epoch = 0;
  double train_smape = 0, val_mape = 0, best_val_mape = 0, seconds = 0;
  float lr = 0;
};

struct train_result {
  tile_model model;
  double val_mape = 0, train_mape = 0;  // percent, at the best epoch
  int epochs_run = 0, best_epoch = 0;
  size_t train_rows = 0, val_rows = 0;
  std::vector<size_t> val_index;  // the validation rows, indices into the samples
};

// The fewest rows tile_model_train takes: its validation split (val_fraction, at least one row) and a training set
// beside it. `neusight train` refuses fewer before it starts, naming the files (engine/cli/kernels_cmd.cpp).
constexpr size_t tile_train_rows_needed = 10;

// The least measured seconds among `samples` (every row read: training and validation split alike, so that no row of
// the data is below it) for the tensor-core and attention families (family_transfer_features: CUDA-graph timings,
// in which the shortest kernels are GPU time, not the host's); 0 for the others, whose eager per-op timings carry
// the host's launch path. tile_model_train sets tile_model::min_seconds to it; `neusight train --dry-run` prints it.
double tile_min_seconds(family fam, const std::vector<train_sample>& samples);

// Adam on SMAPE of per-wave time, random train/validation split, best-validation checkpoint, early stop.
// Deterministic for a given seed and thread count.
train_result tile_model_train(family fam, const std::vector<train_sample>& samples, const train_options& opts,
                              const std::function<void(const train_progress&)>& progress);

}  // namespace ns
