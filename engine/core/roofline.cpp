// engine/core/roofline.cpp — the roofline baseline: a kernel takes as long as its slower bound.
#include "core/roofline.h"

#include <algorithm>

#include "core/infeasible.h"
#include "core/text.h"

namespace ns {

namespace {

// The peak a kernel of `kind` and `dtype` (an engine dtype name) can use on the GPU in TFLOP/s, 0 where the GPU has no
// unit for it, and the GPU file's key it comes from (roofline_peak_flops says it).
struct unit_peak {
  double tflops;
  const char* key;
};
unit_peak unit_peak_of(const gpu_spec& gpu, kernel_kind kind, const std::string& dtype) {
  if (kind == kernel_kind::gemm || kind == kernel_kind::bmm || kind == kernel_kind::attention) {
    if (dtype == "fp32") return {gpu.peak_fp32_matrix_tflops, "peak_fp32_matrix_tflops"};
    if (dtype == "tf32") return {gpu.peak_tf32_tflops, "peak_tf32_tflops"};
    if (dtype == "fp16") return {gpu.peak_fp16_tflops, "peak_fp16_tflops"};
    if (dtype == "bf16") return {gpu.peak_bf16_tflops, "peak_bf16_tflops"};
    if (dtype == "fp8") return {gpu.peak_fp8_tflops, "peak_fp8_tflops"};
  }
  return {gpu.peak_fp32_tflops, "peak_fp32_tflops"};
}

}  // namespace

std::string roofline_peak_key(const kernel& k) { return unit_peak_of(gpu_spec{}, k.kind, k.dtype).key; }

double roofline_peak_flops(const gpu_spec& gpu, const kernel& k) {
  const unit_peak p = unit_peak_of(gpu, k.kind, k.dtype);
  if (!(p.tflops > 0)) {
    // what to do: the dtypes this kernel kind has units for on the GPU (fp32 always runs on its vector units)
    std::string fits;
    for (const char* d : {"fp32", "tf32", "fp16", "bf16", "fp8"})
      if (unit_peak_of(gpu, k.kind, d).tflops > 0) fits += std::string(fits.empty() ? "" : ", ") + d;
    throw infeasible(gpu.source + ": GPU '" + gpu.name + "' has no " + k.dtype + " units (" + p.key +
                     " = 0) for kernel " + k.name + (fits.empty() ? "" : ": give a dtype it has units for (" + fits + ")"));
  }
  return p.tflops * 1e12;
}

std::optional<double> dense_peak_tflops(const gpu_spec& gpu, const std::string& dtype) {
  // an engine name only: any other spelling ("bfloat16", "BF16") is no GEMM dtype below and would read as the fp32
  // vector peak; session::dense_peak_tflops reads people's spellings (neusight.kernels dtype_name) first
  if (std::find(dtype_names().begin(), dtype_names().end(), dtype) == dtype_names().end())
    throw error("dense peak: unknown dtype '" + dtype + "'" + text_did_you_mean(dtype, dtype_names()) +
                " (an engine name; neusight.kernels dtype_name reads the others)");
  const unit_peak p = unit_peak_of(gpu, kernel_kind::gemm, dtype);
  if (!(p.tflops > 0)) return std::nullopt;  // a known dtype the GPU has no units of: no MFU
  return p.tflops;
}

double roofline_compute_seconds(const kernel& k, const gpu_spec& gpu) {
  return k.flops > 0 ? k.flops / roofline_peak_flops(gpu, k) : 0.0;
}

double roofline_memory_seconds(const kernel& k, const gpu_spec& gpu) { return k.bytes / (gpu.mem_bw_gbps * 1e9); }

double roofline_seconds(const kernel& k, const gpu_spec& gpu) {
  if (k.seconds) return *k.seconds;
  return std::max(roofline_compute_seconds(k, gpu), roofline_memory_seconds(k, gpu));
}

double roofline_floor_seconds(const kernel& k, const gpu_spec& gpu) {
  if (k.seconds) return 0;
  // no unit for its dtype: the DRAM term alone bounds it
  const double tflops = k.flops > 0 ? unit_peak_of(gpu, k.kind, k.dtype).tflops : 0;
  const double compute = tflops > 0 ? k.flops / (tflops * 1e12) : 0;
  return std::max(compute, roofline_memory_seconds(k, gpu));
}

double roofline_reference_seconds(const kernel& k, const gpu_spec& gpu) {
  if (k.seconds) return *k.seconds;
  if (k.dtype != "fp32")
    throw error("predictor roofline-reference models fp32 only (the reference hard-codes 4-byte elements); kernel " +
                k.name + " is " + k.dtype + ": use --predictor roofline");
  constexpr double gib = 1073741824.0;  // 2^30
  const double bw = gpu.mem_bw_gbps;    // the reference's Mem_Bw, GB/s
  switch (k.kind) {
    case kernel_kind::gemm:
    case kernel_kind::bmm: {
      // The kernel's FLOPs (2·B·M·N·K: neusight.kernels, the one cost formula); the reference's AI is per batch
      // (k.flops / B, exact for integer FLOPs below 2^53) over its 4-byte operands, a property of its baseline.
      if (!(k.flops > 0)) throw error("predictor roofline-reference: kernel " + k.name + " has no FLOPs");
      const double B = double(k.b), M = double(k.m), N = double(k.n), K = double(k.k);
      const double peak = gpu.peak_fp32_tflops * 1e3;  // GFLOP/s (SingleFLOPs)
      const double ai = (k.flops / B / 1e9) / (4 * (M * N + N * K + M * K) / gib);
      return k.flops / 1e9 / std::min(peak, ai * bw);
    }
    case kernel_kind::elementwise:
    case kernel_kind::softmax:
    case kernel_kind::layernorm: return k.bytes / 1e9 / bw;
    case kernel_kind::memory: return k.bytes / (bw * gib);
    case kernel_kind::attention:
      throw error("predictor roofline-reference has no fused attention kernel (" + k.name + "): use --predictor roofline");
    case kernel_kind::collective: return 0;  // always carries fixed seconds
  }
  return 0;
}

namespace {
class roofline_predictor final : public predictor {
 public:
  using seconds_fn = double (*)(const kernel&, const gpu_spec&);
  roofline_predictor(std::string name, seconds_fn fn) : name_(std::move(name)), fn_(fn) {}
  std::string name() const override { return name_; }
  std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const override {
    std::vector<double> out;
    out.reserve(kernels.size());
    for (const auto& ki : kernels) out.push_back(fn_(ki.k, gpu));
    return out;
  }

 private:
  std::string name_;
  seconds_fn fn_;
};
}  // namespace

std::vector<std::string> predictor_names() { return {"neusight", "roofline", "roofline-reference"}; }

std::unique_ptr<predictor> predictor_make(const std::string& name, const std::filesystem::path& weights_root) {
  if (name == "roofline") return std::make_unique<roofline_predictor>(name, roofline_seconds);
  if (name == "roofline-reference") return std::make_unique<roofline_predictor>(name, roofline_reference_seconds);
  if (name == "neusight") return neusight_predictor_make(weights_root);
  std::string known;
  for (const auto& n : predictor_names()) known += (known.empty() ? "" : ", ") + n;
  throw error("unknown predictor '" + name + "'" + text_did_you_mean(name, predictor_names()) + "; known: " + known);
}

}  // namespace ns
