// engine/core/wave_scaling.cpp — Habitat wave scaling (see wave_scaling.h and spec §1.4–1.9).
#include "core/wave_scaling.h"

#include <cmath>

#include "core/gpu_spec.h"
#include "core/text.h"

namespace ns {
namespace {

std::string kernel_label(const wave_kernel& k) { return k.name.empty() ? "kernel" : "kernel '" + k.name + "'"; }

struct waves {
  occupancy_result occ_o, occ_d;
  int64_t w_o = 0, w_d = 0;
  bool sub_wave = false;
};

// Occupancy on both GPUs (destination with r_d, same T and shared memory) and the case-A test.
waves waves_compute(const wave_kernel& k, const wave_gpu& o, const wave_gpu& d, const wave_options& opts) {
  if (k.blocks <= 0) throw error(kernel_label(k) + ": grid has " + std::to_string(k.blocks) + " blocks");
  waves w;
  w.occ_o = occupancy_compute(o.limits, {k.threads_per_block, k.regs_origin, k.smem_per_block}, opts.occupancy);
  w.occ_d = occupancy_compute(d.limits, {k.threads_per_block, k.regs_dest.value_or(k.regs_origin), k.smem_per_block},
                              opts.occupancy);
  w.w_o = o.num_sm * w.occ_o.blocks_per_sm;
  w.w_d = d.num_sm * w.occ_d.blocks_per_sm;
  for (auto [gpu, occ] : {std::pair{&o, &w.occ_o}, std::pair{&d, &w.occ_d}}) {
    if (occ->blocks_per_sm == 0 && opts.zero_occupancy == zero_occupancy_policy::error)
      throw error(kernel_label(k) + ": occupancy is 0 on " + gpu->name + " (limited by " +
                  std::string(occupancy_limiter_name(occ->limiter)) + ")");
  }
  // A wave size of 0 (small_kernel policy) counts as sub-wave.
  const bool small_o = w.w_o == 0 || k.blocks / w.w_o == 0;
  const bool small_d = w.w_d == 0 || k.blocks / w.w_d == 0;
  w.sub_wave = small_o && small_d;
  return w;
}

wave_result result_from(const waves& w, wave_method m) {
  wave_result r;
  r.method = m;
  r.sub_wave = w.sub_wave;
  r.occupancy_origin = w.occ_o;
  r.occupancy_dest = w.occ_d;
  r.wave_origin = w.w_o;
  r.wave_dest = w.w_d;
  return r;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::string_view wave_method_name(wave_method m) {
  switch (m) {
    case wave_method::roofline: return "roofline";
    case wave_method::metric_free: return "metric_free";
    case wave_method::paper_waves: return "paper_waves";
  }
  return "?";
}

wave_gpu wave_gpu_from_spec(const gpu_spec& gpu) {
  wave_gpu g;
  g.name = gpu.name;
  g.num_sm = gpu.num_sm;
  g.clock_mhz = static_cast<double>(gpu.base_clock_mhz);  // Habitat's devices.yml: base clock (§3.1)
  g.mem_bw_gbps = gpu.mem_bw_gbps;
  g.peak_gflops = gpu.peak_fp32_tflops * 1000.0;
  auto need = [&](double v, const char* key) {
    if (!(v > 0)) throw error(gpu.source + ": wave scaling needs '" + key + "' > 0");
  };
  need(static_cast<double>(g.num_sm), "num_sm");
  need(g.clock_mhz, "base_clock_mhz");
  need(g.mem_bw_gbps, "mem_bw_gbps");
  need(g.peak_gflops, "peak_fp32_tflops");
  g.limits = occupancy_limits_from_gpu(gpu);
  return g;
}

double wave_memory_factor(const wave_gpu& o, const wave_gpu& d, double gamma) {
  return std::pow(o.mem_bw_gbps / d.mem_bw_gbps, gamma);
}

double wave_gamma(const wave_kernel& k, const wave_gpu& o, const wave_gpu& d) {
  if (!k.has_counters())
    throw error(kernel_label(k) + ": roofline γ needs flop_eff_pct, dram_read_bytes and dram_write_bytes");
  const double flops_g = (*k.flop_eff_pct / 100.0) * o.peak_gflops * k.duration_ns / 1e9;  // "GFLOP", origin units
  const double mem_gib = (*k.dram_read_bytes + *k.dram_write_bytes) / 1073741824.0;        // GiB (§1.12 item 1)
  if (flops_g < 1e-9) return 1.0;
  if (mem_gib == 0) return 0.0;
  const double x = flops_g / mem_gib;
  const double ridge = d.peak_gflops / d.mem_bw_gbps;  // destination ridge point only
  return x <= ridge ? 1.0 - x / (2.0 * ridge) : ridge / (2.0 * x);
}

wave_result wave_scale_roofline(const wave_kernel& k, const wave_gpu& o, const wave_gpu& d, const wave_options& opts) {
  const double gamma = wave_gamma(k, o, d);
  const waves w = waves_compute(k, o, d, opts);
  wave_result r = result_from(w, wave_method::roofline);
  r.gamma = gamma;
  if (w.sub_wave) {
    // Case A: most blocks any SM receives; the memory-bound share is left unscaled.
    const double m_o = static_cast<double>(ceil_div(k.blocks, o.num_sm));
    const double m_d = static_cast<double>(ceil_div(k.blocks, d.num_sm));
    r.duration_ns = k.duration_ns * std::pow((o.clock_mhz / d.clock_mhz) * (m_d / m_o), 1.0 - gamma);
  } else {
    // Case B: bandwidth^γ · (clock · SM count)^(1−γ); wave sizes only chose the case.
    r.duration_ns = k.duration_ns * wave_memory_factor(o, d, gamma) * std::pow(o.clock_mhz / d.clock_mhz, 1.0 - gamma) *
                    std::pow(static_cast<double>(o.num_sm) / static_cast<double>(d.num_sm), 1.0 - gamma);
  }
  return r;
}

wave_result wave_scale_metric_free(const wave_kernel& k, const wave_gpu& o, const wave_gpu& d,
                                   const wave_options& opts) {
  const waves w = waves_compute(k, o, d, opts);
  wave_result r = result_from(w, wave_method::metric_free);
  r.duration_ns = w.sub_wave ? k.duration_ns : k.duration_ns * wave_memory_factor(o, d, 1.0);
  return r;
}

wave_result wave_scale(const wave_kernel& k, const wave_gpu& o, const wave_gpu& d, const wave_options& opts) {
  const bool counters = opts.use_counters && k.has_counters();
  if (opts.variant == wave_variant::code)
    return counters ? wave_scale_roofline(k, o, d, opts) : wave_scale_metric_free(k, o, d, opts);

  // §1.9 paper form. Without counters γ = 1 (the metric-free rule's bandwidth-only assumption).
  const waves w = waves_compute(k, o, d, opts);
  wave_result r = result_from(w, wave_method::paper_waves);
  const double gamma = counters ? wave_gamma(k, o, d) : 1.0;
  if (counters) r.gamma = gamma;
  const double wave_ratio = (w.w_o == 0 || w.w_d == 0)
                                ? 1.0
                                : static_cast<double>(ceil_div(k.blocks, w.w_d)) /
                                      static_cast<double>(ceil_div(k.blocks, w.w_o));
  r.duration_ns = k.duration_ns * wave_ratio * wave_memory_factor(o, d, gamma) *
                  std::pow(o.clock_mhz / d.clock_mhz, 1.0 - gamma);
  return r;
}

}  // namespace ns
