// engine/core/tile_model.cpp — NeuSight features (spec §1.3), utilisation, batched inference and training.
#include "core/tile_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <numeric>
#include <random>

#include "core/roofline.h"
#include "core/text.h"

namespace ns {

namespace {
constexpr std::pair<family, std::string_view> family_names[] = {
    {family::bmm, "bmm"}, {family::linear, "linear"}, {family::elementwise, "elementwise"},
    {family::softmax, "softmax"}, {family::layernorm, "layernorm"}, {family::gemm_tc16, "gemm_tc16"},
    {family::gemm_fp8, "gemm_fp8"}, {family::attention_prefill, "attention_prefill"},
    {family::attention_decode, "attention_decode"}};

double ceil_div(double a, double b) { return std::ceil(a / b); }
constexpr double gib = 1073741824.0, mib = 1048576.0;
}  // namespace

std::string_view family_name(family f) {
  for (const auto& [fam, name] : family_names)
    if (fam == f) return name;
  return "?";
}

std::vector<std::string> family_name_list() {
  std::vector<std::string> out;
  for (family f : families) out.emplace_back(family_name(f));
  return out;
}

std::optional<family> family_parse(std::string_view s) {
  for (const auto& [fam, name] : family_names)
    if (name == s) return fam;
  return std::nullopt;
}

std::optional<family> family_of(const kernel& k) {
  switch (k.kind) {
    case kernel_kind::gemm:
    case kernel_kind::bmm:
      if (k.dtype == "bf16" || k.dtype == "fp16" || k.dtype == "tf32") return family::gemm_tc16;
      if (k.dtype == "fp8") return family::gemm_fp8;
      return k.kind == kernel_kind::gemm ? family::linear : family::bmm;
    case kernel_kind::elementwise: return family::elementwise;
    case kernel_kind::softmax: return family::softmax;
    case kernel_kind::layernorm: return family::layernorm;
    case kernel_kind::attention: return k.op == "decode" ? family::attention_decode : family::attention_prefill;
    case kernel_kind::memory:
    case kernel_kind::collective: return std::nullopt;
  }
  return std::nullopt;
}

std::string_view family_range_input(family f) {
  switch (f) {
    case family::attention_prefill: return "keys";
    case family::attention_decode: return "cached_tokens";
    default: return "";
  }
}

double family_range_value(family f, const kernel& k) {
  switch (f) {
    case family::attention_prefill: return double(std::max(k.k, k.m));
    case family::attention_decode: return double(k.k);
    default: return 0;
  }
}

bool family_transfer_features(family f) {
  return f == family::gemm_tc16 || f == family::gemm_fp8 || f == family::attention_prefill ||
         f == family::attention_decode;
}

const vector_convention& train_convention::of(family f) const {
  const auto it = by_family.find(f);
  if (it == by_family.end())
    throw error("no training convention for the " + std::string(family_name(f)) +
                " family (scripts/neusight/kernels.lua train_convention, which the session hands to the predictor)");
  return it->second;
}

namespace {
// NVIDIA's fp32 GEMM families (CUDA cores): the ones flops_at_roofline and footprint_clips_with_waves concern
bool nvidia_fp32_gemm(std::string_view vendor, family f) {
  return vendor == "nvidia" && (f == family::bmm || f == family::linear);
}
}  // namespace

bool flops_at_roofline(std::string_view vendor, family f) { return nvidia_fp32_gemm(vendor, f); }

bool footprint_clips_with_waves(std::string_view vendor, family f) { return nvidia_fp32_gemm(vendor, f); }

bool util_floor_from_data(std::string_view vendor, family f) {
  return family_transfer_features(f) || (vendor == "nvidia" && f == family::linear);
}

const std::array<const char*, tile_feature_count>& tile_feature_names(std::string_view vendor, family f) {
  static const std::array<const char*, tile_feature_count> at_peak = {
      "log2(tile_gflop / (peak_tflops / sms))", "log2(tile_mb / (mem_bw_gbps / sms))",
      "log2(waves * tile_mb / (mem_gb * 1024 / sms))", "log2(waves)", "blocks / (waves * sms)"};
  static const std::array<const char*, tile_feature_count> at_roofline = {
      "log2(tile_gflop / (min(peak, ai * bw) tflops / sms))", at_peak[1], at_peak[2], at_peak[3], at_peak[4]};
  static const std::array<const char*, tile_feature_count> transfer = {
      "log2(tile_gflop / (min(peak, ai * bw) tflops / sms))", "log2(tile_mb / element_bytes / tile_gflop)", "log2(waves)",
      "blocks / (waves * sms)", "clamp(log2(peak / (ai * bw)), -1, 1)"};
  if (family_transfer_features(f)) return transfer;
  return flops_at_roofline(vendor, f) ? at_roofline : at_peak;
}

namespace {
// the manifest's names of wave_share, in the enum's order: the one list (name, parse, names)
constexpr std::array<std::pair<wave_share, std::string_view>, 3> wave_share_table = {
    {{wave_share::fair_share, "fair_share"}, {wave_share::sm_share, "sm_share"}, {wave_share::sm_persist, "sm_persist"}}};
}  // namespace

std::string_view wave_share_name(wave_share s) {
  for (const auto& [v, name] : wave_share_table)
    if (v == s) return name;
  return "fair_share";
}

std::optional<wave_share> wave_share_parse(std::string_view s) {
  for (const auto& [v, name] : wave_share_table)
    if (name == s) return v;
  return std::nullopt;
}

const std::vector<std::string>& wave_share_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [v, name] : wave_share_table) out.emplace_back(name);
    return out;
  }();
  return names;
}

wave_share wave_share_trained(family f) {
  return f == family::gemm_tc16 ? wave_share::sm_persist : wave_share::fair_share;
}

double tile_shown_waves(double waves, double real_ridge_log2, wave_share share) {
  return share == wave_share::sm_persist && real_ridge_log2 >= transfer_ridge_clamp ? 1 : waves;
}

double tile_base_seconds(double blocks, double sms, double tile_gflop, double peak_gflops, double ai_bw_gflops,
                         wave_share share) {
  const double waves = std::ceil(blocks / sms);
  // (written as before the partial-wave form, so fair_share forecasts keep their digits)
  if (share == wave_share::fair_share) return waves * tile_gflop * sms / std::min(peak_gflops, ai_bw_gflops);
  const double full = tile_gflop * sms / std::min(peak_gflops, ai_bw_gflops);  // one wave of every SM's fair share
  const double last = blocks - (waves - 1) * sms;  // the last wave's blocks, in (0, SMs]
  const double draw = std::max(last, sms / tile_sm_bandwidth_share);  // the bandwidth's divisor per block
  return (waves - 1) * full + tile_gflop * std::max(sms / peak_gflops, draw / ai_bw_gflops);
}

tile_features tile_features_compute(const kernel& k, const gpu_spec& gpu, const train_convention& conv,
                                    wave_share share) {
  const double sms = double(gpu.num_sm);
  const double peak = roofline_peak_flops(gpu, k) / 1e9;  // GFLOP/s
  const double bw = gpu.mem_bw_gbps;
  double blocks = 0, tile_gflop = 0, tile_mb = 0, ai = 0;
  double ai_real = -1;  // a GEMM's FLOPs without the tile's padded rows over its bytes (sm_persist's test); -1: = ai
  double base_scale = 1;  // weight-only quantisation: the quantised kernel's roofline over the unquantised one's
  if (k.kind == kernel_kind::attention) {
    // The tile is given by its work (scripts/tiling/attention.lua): blocks, FLOPs and bytes per block.
    if (!(k.tile_blocks >= 1) || !(k.tile_flops > 0) || !(k.tile_bytes > 0))
      throw error("kernel " + k.name + " has no tile (blocks, flops and bytes per block)");
    if (!(k.flops > 0) || !(k.bytes > 0)) throw error("kernel " + k.name + " needs flops > 0 and bytes > 0");
    blocks = k.tile_blocks;
    tile_gflop = k.tile_flops / 1e9;
    tile_mb = k.tile_bytes / mib;
    ai = (k.flops / 1e9) / (k.bytes / gib);
  } else if (k.kind == kernel_kind::gemm || k.kind == kernel_kind::bmm) {
    const double tm = double(k.tile_m), tk = double(k.tile_k);
    if (tm <= 0 || tk <= 0) throw error("kernel " + k.name + " has no tile (tile_m, tile_k)");
    const double B = double(k.b), M = double(k.m), N = double(k.n), K = double(k.k), e = dtype_bytes(k.dtype);
    const double split = double(std::max<int64_t>(1, k.tile_split)), Ns = ceil_div(N, split);  // reduction per block
    blocks = B * ceil_div(M, tm) * ceil_div(K, tk) * split;
    tile_gflop = 2 * tm * Ns * tk / 1e9;
    tile_mb = (e * tm * Ns + e * Ns * tk + e * tm * tk) / mib;
    ai = (2 * ceil_div(M, tm) * tm * N * ceil_div(K, tk) * tk / 1e9) / ((e * (M * N + M * K + N * K)) / gib);
    ai_real = (2 * M * N * K / 1e9) / ((e * (M * N + M * K + N * K)) / gib);
    // Weight-only quantisation (W8A16 / W4A16: the N × K operand at weight_bytes < e). No predictor saw such kernels:
    // the MLP is shown the compute-dtype GEMM of the same shape (the features above), and its base moves by the
    // kernel-level rooflines' ratio, so the kernel reaches the fraction of its roofline the unquantised one reaches
    // of its own. A bandwidth-bound decode GEMV gets faster by its bytes (Marlin-style int4 kernels measure
    // 3.5-3.9x over fp16 at batch 1); a compute-bound GEMM does not move (the dequantisation is not priced). The
    // tile's padded rows do not enter: a 64-row tile of a 1-row int4 GEMV is not compute-bound.
    if (k.weight_bytes > 0 && k.weight_bytes != e) {
      kernel full = k;
      full.weight_bytes = 0, full.bytes = k.bytes + (e - k.weight_bytes) * B * N * K;
      base_scale = roofline_seconds(k, gpu) / roofline_seconds(full, gpu);
    }
  } else if (k.kind != kernel_kind::memory && k.kind != kernel_kind::collective) {
    double T = double(k.tile_elems), R = double(k.rows), H = double(k.hidden);
    if (T <= 0) throw error("kernel " + k.name + " has no tile (tile_elems)");
    const double numel = R * H;
    if (!(k.flops > 0) || !(k.bytes > 0)) throw error("kernel " + k.name + " needs flops > 0 and bytes > 0 per element");
    // The training convention's FLOPs for the kernel's bytes (see tile_model.h); the real FLOPs only bound below.
    const family fam = *family_of(k);
    const vector_convention& c = conv.of(fam);
    const double ops = c.flops;
    double mem = k.bytes / numel;
    // And the convention's bytes per element: a kernel moving more or fewer bytes per element (16-bit tensors,
    // a fused optimizer step's 28 B per parameter) is shown as the fp32 kernel that moves the same bytes — the
    // same rows with its elements scaled by mem / mem_in_convention (row kernels: their one-row tile with them).
    const double lo = c.bytes_min, hi = c.bytes_max;
    if (mem < lo || mem > hi) {
      const double conv = std::clamp(mem, lo, hi), scale = mem / conv;
      H *= scale;
      if (fam != family::elementwise) T *= scale;
      mem = conv;
    }
    blocks = R * ceil_div(H, T);
    tile_gflop = ops * T / 1e9;
    tile_mb = mem * T / mib;
    ai = (ops * ceil_div(H, T) * T / 1e9) / (mem * H / gib);
  } else {
    throw error("memory kernels have no tile model");
  }
  tile_features f;
  f.blocks = blocks;
  f.waves = std::ceil(blocks / sms);
  f.roof_gflops = std::min(peak, ai * bw);
  f.base_seconds = tile_base_seconds(blocks, sms, tile_gflop, peak, ai * bw, share) * base_scale;
  f.compute_seconds = tile_compute_seconds(k, gpu);
  f.ref = {std::log2(tile_gflop / (peak / 1000 / sms)), std::log2(tile_mb / (bw / sms)),
           std::log2(f.waves * tile_mb / (gpu.mem_gb * 1024 / sms)),
           std::log2(f.waves * tile_mb / (gpu.l2_mb * 1024 / sms))};
  const auto fam = family_of(k);
  // The launch floor of the transfer families is counted in clock cycles: the shortest kernels take a fixed
  // number of cycles (1.5 µs on Blackwell at 1.9–2.0 GHz, 2.5 µs on the A100 at 1.41 GHz in the CUDA-graph data).
  if (fam && family_transfer_features(*fam) && gpu.boost_clock_mhz > 0)
    f.overhead_scale = tile_overhead_reference_mhz / double(gpu.boost_clock_mhz);
  if (!k.act_quant.empty()) {
    if (fam != family::gemm_fp8 || (k.kind != kernel_kind::gemm && k.kind != kernel_kind::bmm))
      throw error("kernel " + k.name + ": act_quant '" + k.act_quant + "' is for fp8 GEMMs only (dtype " + k.dtype + ")");
    if (!(gpu.boost_clock_mhz > 0))
      throw error("GPU " + gpu.name + " has no boost_clock_mhz: the fp8 activation quantisation is counted in cycles");
    // tokens (all batches: a grouped expert GEMM's b × m rows) × in-features (the reduction)
    const double M = double(k.b) * double(k.m), K = double(k.n);
    f.quant_row_seconds = M / (double(gpu.boost_clock_mhz) * 1e6);
    f.quant_bytes_seconds = M * K / (bw * 1e9);
    f.quant_in = K, f.quant_out = double(k.k);
  }
  if (fam && family_transfer_features(*fam)) {
    // sm_persist (tile_model.h): a streaming kernel shown as one wave of tiles W times as long (fill unchanged: the
    // fill of its blocks over whole waves); any other kernel shown = W, the features as before
    const double shown = tile_shown_waves(f.waves, std::log2(peak / ((ai_real < 0 ? ai : ai_real) * bw)), share);
    f.x = {float(std::log2(f.waves / shown * tile_gflop / (f.roof_gflops / 1000 / sms))), float(std::log2(tile_mb / dtype_bytes(k.dtype) / tile_gflop)),
           float(std::log2(shown)), float(blocks / (f.waves * sms)),
           float(std::clamp(std::log2(peak / (ai * bw)), -transfer_ridge_clamp, transfer_ridge_clamp))};
  } else {
    // x0 divides the tile's FLOPs by the per-SM roofline throughput min(peak, AI·bw) rather than by the peak
    // (NVIDIA BMM and Linear): a bandwidth-bound kernel's features and base then carry no FLOP peak (tile_model.h).
    const double x0 = fam && flops_at_roofline(gpu.vendor, *fam) ? std::log2(tile_gflop / (f.roof_gflops / 1000 / sms))
                                                                  : f.ref[0];
    f.x = {float(x0), float(f.ref[1]), float(f.ref[2]), float(std::log2(f.waves)), float(blocks / (f.waves * sms))};
  }
  return f;
}

double tile_compute_seconds(const kernel& k, const gpu_spec& gpu) { return k.flops / roofline_peak_flops(gpu, k); }

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Eigen::MatrixXf features_matrix(const std::vector<const tile_features*>& rows, const tile_model& m) {
  Eigen::MatrixXf x(int(tile_feature_count), int(rows.size()));
  const bool joint = footprint_clips_with_waves(m.vendor, m.fam);
  for (size_t j = 0; j < rows.size(); ++j) {
    auto r = rows[j]->x;
    if (joint) r[2] -= r[3] - std::clamp(r[3], m.lo[3], m.hi[3]);  // weights/FOOTPRINT_CLIP_RULE.md
    for (size_t i = 0; i < tile_feature_count; ++i)
      x(int(i), int(j)) = (std::clamp(r[i], m.lo[i], m.hi[i]) - m.mean[i]) / m.scale[i];
  }
  return x;
}
}  // namespace

double tile_utilization(float o0, float o1, double waves, double floor) {
  // 1 − σ(o0)/W written as ((W − 1) + σ(−o0)) / W so that it stays positive in floating point at W = 1;
  // the floor bounds a forecast at 10^4 × the roofline time.
  return std::max(sigmoid(o1) * ((waves - 1.0) + sigmoid(-double(o0))) / waves, floor);
}

double tile_fixed_seconds(const tile_features& f, const quant_stage& q) {
  return q.row_cycles * f.quant_row_seconds + q.bytes_per_element * f.quant_bytes_seconds;
}

double tile_seconds(const tile_features& f, float o0, float o1, float o2, double util_floor, const quant_stage& q,
                    double min_seconds) {
  return std::max({f.base_seconds / tile_utilization(o0, o1, f.waves, util_floor) +
                       sigmoid(o2) * tile_overhead_max_s * f.overhead_scale + tile_fixed_seconds(f, q),
                   f.compute_seconds, min_seconds});
}

Eigen::MatrixXf tile_model::outputs(const std::vector<tile_features>& rows) const {
  std::vector<const tile_features*> ptrs;
  ptrs.reserve(rows.size());
  for (const auto& r : rows) ptrs.push_back(&r);
  return net.forward(features_matrix(ptrs, *this));
}

std::vector<double> tile_model::predict(const std::vector<tile_features>& rows) const {
  const Eigen::MatrixXf out = outputs(rows);
  std::vector<double> s(rows.size());
  for (size_t j = 0; j < rows.size(); ++j)
    s[j] = tile_seconds(rows[j], out(0, int(j)), out(1, int(j)), out(2, int(j)), util_floor, quant, min_seconds);
  return s;
}

namespace {

// Forward + SMAPE gradient + backward over one chunk of a batch; returns the summed SMAPE.
double chunk_grad(const tile_model& m, const std::vector<const train_sample*>& chunk, mlp::grad& g) {
  std::vector<const tile_features*> fs;
  fs.reserve(chunk.size());
  for (const auto* s : chunk) fs.push_back(&s->f);
  mlp::cache c;
  const Eigen::MatrixXf out = m.net.forward(features_matrix(fs, m), c);
  Eigen::MatrixXf dout(tile_outputs, int(chunk.size()));
  double loss = 0;
  for (size_t j = 0; j < chunk.size(); ++j) {
    const int col = int(j);
    // tile_seconds without its compute floor: training rows are in the FLOP convention, where it never binds.
    const double W = chunk[j]->f.waves, y = chunk[j]->seconds;
    const double s0 = sigmoid(out(0, col)), s1 = sigmoid(out(1, col)), s2 = sigmoid(out(2, col));
    const double util = tile_utilization(out(0, col), out(1, col), W);
    const double wave_time = chunk[j]->f.base_seconds / util;
    const double ov = tile_overhead_max_s * chunk[j]->f.overhead_scale;
    const double yh = wave_time + s2 * ov + tile_fixed_seconds(chunk[j]->f, m.quant);
    const double sum = y + yh, diff = yh - y;
    loss += std::abs(diff) / sum;
    const double dl_dyh = ((diff > 0 ? 1.0 : -1.0) * sum - std::abs(diff)) / (sum * sum);
    const double dl_dutil = util > 1e-4 ? dl_dyh * (-wave_time / util) : 0.0;  // no gradient through the floor
    dout(0, col) = float(dl_dutil * (-s1 * s0 * (1 - s0) / W));
    dout(1, col) = float(dl_dutil * (s1 * (1 - s1) * (1 - s0 / W)));
    dout(2, col) = float(dl_dyh * s2 * (1 - s2) * ov);
  }
  m.net.backward(c, dout, g);
  return loss;
}

double mape_percent(const tile_model& m, const std::vector<const train_sample*>& rows) {
  if (rows.empty()) return 0;
  std::vector<tile_features> fs;
  fs.reserve(rows.size());
  for (const auto* s : rows) fs.push_back(s->f);
  const auto pred = m.predict(fs);
  double sum = 0;
  for (size_t i = 0; i < rows.size(); ++i) sum += std::abs(pred[i] - rows[i]->seconds) / rows[i]->seconds;
  return 100 * sum / double(rows.size());
}

}  // namespace

double tile_min_seconds(family fam, const std::vector<train_sample>& samples) {
  if (!family_transfer_features(fam)) return 0;
  double least = 0;
  for (const auto& s : samples)
    if (s.seconds > 0 && (least == 0 || s.seconds < least)) least = s.seconds;
  return least;
}

train_result tile_model_train(family fam, const std::vector<train_sample>& samples, const train_options& opts,
                              const std::function<void(const train_progress&)>& progress) {
  // the rows' vendor decides the utilisation floor (util_floor_from_data): an empty one had trained an NVIDIA Linear
  // as no NVIDIA family, without a word
  if (opts.vendor.empty())
    throw error("tile_model_train: train_options.vendor is empty: name the training rows' vendor (nvidia, amd, …); "
                "the utilisation floor depends on it");
  if (samples.size() < tile_train_rows_needed)
    throw error("too few training rows (" + std::to_string(samples.size()) + "; at least " +
                std::to_string(tile_train_rows_needed) + " are needed)");
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(opts.seed);
  std::vector<size_t> order(samples.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  const size_t n_val = std::max<size_t>(1, size_t(double(samples.size()) * opts.val_fraction));
  std::vector<const train_sample*> val, train;
  for (size_t i = 0; i < order.size(); ++i) (i < n_val ? val : train).push_back(&samples[order[i]]);

  train_result r;
  r.train_rows = train.size();
  r.val_rows = val.size();
  r.val_index.assign(order.begin(), order.begin() + std::ptrdiff_t(n_val));
  tile_model& m = r.model;
  m.fam = fam;
  // Normalisation from the training split only.
  for (size_t i = 0; i < tile_feature_count; ++i) {
    double s = 0, s2 = 0;
    for (const auto* t : train) s += t->f.x[i], s2 += double(t->f.x[i]) * t->f.x[i];
    const double mean = s / double(train.size());
    const double var = std::max(s2 / double(train.size()) - mean * mean, 1e-12);
    m.mean[i] = float(mean);
    m.scale[i] = float(std::max(std::sqrt(var), 1e-3));
    m.lo[i] = m.hi[i] = train.front()->f.x[i];
    for (const auto* t : train) m.lo[i] = std::min(m.lo[i], t->f.x[i]), m.hi[i] = std::max(m.hi[i], t->f.x[i]);
  }
  // gemm_fp8: the activation quantisation stage. bytes_per_element is the passes' nominal 2 + 2 + 1 B
  // (tile_quant_bytes_per_element); row_cycles is the least-squares slope (with an intercept: the three launches,
  // left to the MLP's overhead term) of (measured − bytes time) over M / clock on the tiny GEMMs (K and N ≤ 256)
  // whose GEMM roofline is under 10 % of the measured time: there the per-row atomic is all there is. The data give
  // 9.7–14.0 cycles per row on each training GPU alone, 11.5 pooled. Fitting on every row the stage dominates
  // (b253129) put the passes' shortfall from the bandwidth on large activations into the per-row slope, which M and
  // M · K share (18.4 cycles: B200's 32768 × 32 × 32 forecast 314 µs, measured 213); fitting that shortfall as
  // bytes per element instead (about 14 B, pooled over Blackwell's 8 TB/s) over-prices the L40S and RTX PRO 6000
  // (leaving each out: 47.8 and 48.4 % MAPE, weights/ACCURACY.md), so the MLP learns it.
  if (fam == family::gemm_fp8) {
    m.quant.bytes_per_element = tile_quant_bytes_per_element;
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto* t : train)
      if (t->f.quant_row_seconds > 0 && t->f.base_seconds < 0.1 * t->seconds && t->f.quant_in <= 256 &&
          t->f.quant_out <= 256) {
        const double x = t->f.quant_row_seconds, y = t->seconds - tile_fixed_seconds(t->f, {0, m.quant.bytes_per_element});
        n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
      }
    // no such rows (no kernel with act_quant): no per-row term
    if (const double d = n * sxx - sx * sx; n >= 2 && d > 0) m.quant.row_cycles = std::max(0.0, (n * sxy - sx * sy) / d);
  }
  std::vector<int> sizes = {int(tile_feature_count)};
  sizes.insert(sizes.end(), opts.hidden.begin(), opts.hidden.end());
  sizes.push_back(tile_outputs);
  m.net = mlp::make(sizes, opts.seed + 1);

  adam opt;
  opt.lr = opts.lr;
  opt.weight_decay = opts.weight_decay;
  tile_model best = m;
  double best_val = mape_percent(m, val);
  int since_best = 0, since_decay = 0;
  const int threads = std::max(1, opts.threads);
  for (int epoch = 1; epoch <= opts.max_epochs; ++epoch) {
    std::shuffle(train.begin(), train.end(), rng);
    double loss_sum = 0;
    for (size_t at = 0; at < train.size(); at += size_t(opts.batch)) {
      const size_t end = std::min(train.size(), at + size_t(opts.batch));
      const size_t per = (end - at + size_t(threads) - 1) / size_t(threads);
      std::vector<mlp::grad> grads(static_cast<size_t>(threads));
      std::vector<std::future<double>> jobs;
      for (int t = 0; t < threads; ++t) {
        const size_t lo = at + size_t(t) * per, hi = std::min(end, lo + per);
        grads[size_t(t)].zero_like(m.net);
        if (lo >= hi) continue;
        std::vector<const train_sample*> chunk(train.begin() + long(lo), train.begin() + long(hi));
        auto work = [&m, chunk = std::move(chunk), &g = grads[size_t(t)]] { return chunk_grad(m, chunk, g); };
        jobs.push_back(t + 1 < threads ? std::async(std::launch::async, work) : std::async(std::launch::deferred, work));
      }
      for (auto& j : jobs) loss_sum += j.get();
      for (int t = 1; t < threads; ++t) grads[0].add(grads[size_t(t)]);
      const float inv = 1.0f / float(end - at);
      for (size_t l = 0; l < grads[0].w.size(); ++l) grads[0].w[l] *= inv, grads[0].b[l] *= inv;
      opt.step(m.net, grads[0]);
    }
    const double val_mape = mape_percent(m, val);
    if (val_mape < best_val) {
      best_val = val_mape, best = m, r.best_epoch = epoch;
      since_best = since_decay = 0;
    } else {
      ++since_best, ++since_decay;
      if (since_decay >= std::max(1, opts.patience / 3)) opt.lr *= 0.5f, since_decay = 0;
    }
    r.epochs_run = epoch;
    if (progress) {
      train_progress p;
      p.epoch = epoch, p.max_epochs = opts.max_epochs, p.best_epoch = r.best_epoch;
      p.train_smape = 100 * loss_sum / double(train.size());
      p.val_mape = val_mape, p.best_val_mape = best_val, p.lr = opt.lr;
      p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress(p);
    }
    if (since_best >= opts.patience) break;
  }
  r.model = std::move(best);
  // The utilisation floor of forecasts: half the lowest utilisation any training row reached. The transfer-feature
  // families and NVIDIA linear get it (util_floor_from_data); the other fp32 families keep the historical 1e-4, so
  // retraining them reproduces their shipped manifests and accuracy tables.
  if (util_floor_from_data(opts.vendor, fam)) {
    // Rows under twice the overhead ceiling are launch-bound (their base / measured says nothing of utilisation).
    double lowest = 1.0;
    bool any = false;
    for (const auto* t : train)
      if (const double s = t->seconds - tile_fixed_seconds(t->f, r.model.quant);
          t->seconds >= 2 * tile_overhead_max_s && s > 0)
        lowest = std::min(lowest, t->f.base_seconds / s), any = true;
    if (any) r.model.util_floor = std::clamp(0.5 * lowest, 1e-4, 1.0);
  }
  // Set after the epochs, as util_floor: the best epoch is chosen without it, so weights trained before it are
  // reproduced bit for bit.
  r.model.min_seconds = tile_min_seconds(fam, samples);
  r.val_mape = best_val;
  r.train_mape = mape_percent(r.model, train);
  return r;
}

}  // namespace ns
