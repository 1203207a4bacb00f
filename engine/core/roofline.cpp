// engine/core/roofline.cpp — the roofline baseline: a kernel takes as long as its slower bound.
#include "core/roofline.h"

#include <algorithm>

#include "core/text.h"

namespace ns {

double roofline_peak_flops(const gpu_spec& gpu, const kernel& k) {
  const bool matrix = k.kind == kernel_kind::gemm || k.kind == kernel_kind::bmm;
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

double roofline_seconds(const kernel& k, const gpu_spec& gpu) {
  if (k.seconds) return *k.seconds;
  const double t_mem = k.bytes / (gpu.mem_bw_gbps * 1e9);
  const double t_flop = k.flops > 0 ? k.flops / roofline_peak_flops(gpu, k) : 0.0;
  return std::max(t_flop, t_mem);
}

namespace {
class roofline_predictor final : public predictor {
 public:
  std::string name() const override { return "roofline"; }
  std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const override {
    std::vector<double> out;
    out.reserve(kernels.size());
    for (const auto& ki : kernels) out.push_back(roofline_seconds(ki.k, gpu));
    return out;
  }
};
}  // namespace

std::vector<std::string> predictor_names() { return {"neusight", "roofline"}; }

std::unique_ptr<predictor> predictor_make(const std::string& name, const std::filesystem::path& weights_root) {
  if (name == "roofline") return std::make_unique<roofline_predictor>();
  if (name == "neusight") return neusight_predictor_make(weights_root);
  std::string known;
  for (const auto& n : predictor_names()) known += (known.empty() ? "" : ", ") + n;
  throw error("unknown predictor '" + name + "'" + text_did_you_mean(name, predictor_names()) + "; known: " + known);
}

}  // namespace ns
