// engine/core/roofline.h — kernel latency predictors: the roofline bound and the predictor interface.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/gpu_spec.h"
#include "core/graph.h"

namespace ns {

// Peak FLOP/s the kernel can use on this GPU: GEMMs use the tensor/matrix rate of their dtype
// (fp32 = CUDA-core SIMT, as in the measured data: TF32 off), vector kernels the fp32 rate.
// Throws ns::error if the GPU has no unit for the dtype (peak 0).
double roofline_peak_flops(const gpu_spec& gpu, const kernel& k);

// max(flops / peak, bytes / bandwidth) in seconds; `seconds` of a fixed kernel wins.
double roofline_seconds(const kernel& k, const gpu_spec& gpu);

class predictor {
 public:
  virtual ~predictor() = default;
  virtual std::string name() const = 0;
  // Seconds per kernel, same order as `kernels`.
  virtual std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const = 0;
};

std::vector<std::string> predictor_names();
// Throws ns::error naming the known predictors for an unknown name.
std::unique_ptr<predictor> predictor_make(const std::string& name);

}  // namespace ns
