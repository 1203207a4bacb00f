// engine/lua/floor_inputs.h — what scripts/neusight/figures.lua forecast_floor holds a serve phase to, as figure
// inputs (predict's figures get the same from scripts/neusight/report.lua figure_inputs and
// scripts/neusight/pipeline.lua, search's layouts from report.lua's timing_inputs and layout_inputs).
#pragma once

#include <string>

#include "lua/session.h"

namespace ns {

// The forecast's latency_s (a parallel run's iteration), parallel (whether `tl`, its timeline, is given), dtype (the
// compute dtype), its model FLOPs flops_forward, flops_backward and flops_accumulate (forecast::phase_model_flops, as
// report.lua timing_inputs reads them), the dtype's dense
// peak_tflops (session::dense_peak_tflops, the dtype as people write it; absent where the GPU has no unit for it), calibration_source (`cal`, the calibration its kernel times
// were corrected by; nullptr: none) and its kernels' floors: a parallel run's layout and busiest device's
// (parallel_report::figures: dp, tp, pp, microbatches, device_floor_s), else floor_s.<family> of each family.
inline figure_inputs floor_inputs_make(session& s, double latency_s, const forecast& fc, const parallel_report* tl,
                                       const gpu_spec& gpu, const std::string& dtype, const calibration* cal) {
  figure_inputs in = {{"latency_s", latency_s}, {"parallel", tl != nullptr}, {"dtype", dtype},
                      {"flops_forward", fc.phase_model_flops(phase::forward)},
                      {"flops_backward", fc.phase_model_flops(phase::backward)},
                      {"flops_accumulate", fc.phase_model_flops(phase::accumulate)}};
  if (const auto peak = s.dense_peak_tflops(gpu, dtype)) in.emplace_back("peak_tflops", *peak);
  if (cal) in.emplace_back("calibration_source", cal->source);
  if (tl) {
    in.insert(in.end(), tl->figures.begin(), tl->figures.end());
  } else {
    family_floor_inputs_add(in, fc.seconds_by_family(gpu));
  }
  return in;
}

}  // namespace ns
