// engine/core/roofline.cpp — the roofline baseline: a kernel takes as long as its slower bound.
#include "core/roofline.h"

#include <algorithm>

#include "core/text.h"

namespace ns {

double roofline_peak_flops(const gpu_spec& gpu, const kernel& k) {
  const bool matrix = k.kind == kernel_kind::gemm || k.kind == kernel_kind::bmm || k.kind == kernel_kind::attention;
  double tflops = gpu.peak_fp32_tflops;
  const char* key = "peak_fp32_tflops";
  if (matrix) {
    if (k.dtype == "fp32") tflops = gpu.peak_fp32_matrix_tflops, key = "peak_fp32_matrix_tflops";
    else if (k.dtype == "tf32") tflops = gpu.peak_tf32_tflops, key = "peak_tf32_tflops";
    else if (k.dtype == "fp16") tflops = gpu.peak_fp16_tflops, key = "peak_fp16_tflops";
    else if (k.dtype == "bf16") tflops = gpu.peak_bf16_tflops, key = "peak_bf16_tflops";
    else if (k.dtype == "fp8") tflops = gpu.peak_fp8_tflops, key = "peak_fp8_tflops";
  }
  if (!(tflops > 0))
    throw error(gpu.source + ": GPU '" + gpu.name + "' has no " + k.dtype + " units (" + key + " = 0) for kernel " +
                k.name);
  return tflops * 1e12;
}

std::optional<double> dense_peak_tflops(const gpu_spec& gpu, const std::string& dtype) {
  kernel gemm;
  gemm.kind = kernel_kind::gemm, gemm.name = "peak", gemm.dtype = dtype;
  try {
    return roofline_peak_flops(gpu, gemm) / 1e12;
  } catch (const error&) {
    return std::nullopt;  // a known dtype the GPU has no units of: no MFU
  }
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
  double compute = 0;
  try {
    compute = roofline_compute_seconds(k, gpu);
  } catch (const error&) {
    // no unit for its dtype: the DRAM term alone bounds it
  }
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
      const double B = double(k.b), M = double(k.m), N = double(k.n), K = double(k.k);
      const double peak = gpu.peak_fp32_tflops * 1e3;  // GFLOP/s (SingleFLOPs)
      const double ai = (2 * M * N * K / 1e9) / (4 * (M * N + N * K + M * K) / gib);
      return 2 * B * M * N * K / 1e9 / std::min(peak, ai * bw);
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
