// engine/core/wave_scaling.h — Habitat's "wave scaling" of one measured kernel to another GPU (spec §1.4–1.9).
//
// Forms implemented (all from spec method-habitat.md; no reference code copied):
//   wave_gamma               §1.4  γ from a destination roofline, FLOP efficiency % and DRAM bytes
//   wave_scale_roofline      §1.5  case A (sub-wave on both GPUs) / case B (everything else)
//   wave_scale_metric_free   §1.6  unchanged when sub-wave, else bandwidth ratio
//   wave_scale               §1.7  dispatcher: roofline when all three counters are present, else metric-free;
//                            §1.9  or the paper's wave-count form when options.variant says so
// Strict Habitat units are kept (§1.12 items 1–2): F in the origin's peak_gflops units, M in GiB.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/occupancy.h"

namespace ns {

struct gpu_spec;

// The GPU numbers wave scaling uses (Habitat's devices.yml row, spec §3.1).
struct wave_gpu {
  std::string name;
  int64_t num_sm = 0;
  double clock_mhz = 0;     // f_i: Habitat uses the BASE clock (devices.yml base_clock_mhz)
  double mem_bw_gbps = 0;   // BW_i in GB/s
  double peak_gflops = 0;   // P_i in "GFLOP/s" (Habitat's units, which differ by generation: §1.12 item 2)
  occupancy_limits limits;  // for occ_i
};

// From a gpus/*.toml entry: clock = base_clock_mhz (Habitat's tables use the base clock, §3.1), bandwidth =
// mem_bw_gbps, peak = peak_fp32_tflops·1000 (true FLOP/s, i.e. "flop" units), occupancy limits from the cc
// table plus the file's sizes. Throws ns::error "<source>: ..." when a number the method needs is 0.
wave_gpu wave_gpu_from_spec(const gpu_spec& gpu);

// One measured kernel launch on the origin.
struct wave_kernel {
  std::string name;                      // for messages only
  int64_t blocks = 0;                    // B = gridX·gridY·gridZ
  int64_t threads_per_block = 0;         // T
  int64_t regs_origin = 0;               // r_o
  std::optional<int64_t> regs_dest;      // r_d (per-arch register LUT); unset = r_o
  int64_t smem_per_block = 0;            // static + dynamic bytes
  double duration_ns = 0;                // t_o
  std::optional<double> flop_eff_pct;    // e (percent), SinglePrecisionFLOPEfficiency
  std::optional<double> dram_read_bytes; // Rb
  std::optional<double> dram_write_bytes;// Wb
  bool has_counters() const { return flop_eff_pct && dram_read_bytes && dram_write_bytes; }
};

enum class wave_variant {
  code,        // the released code's form (§1.5/§1.6) — the default, matches the artifact
  paper_waves, // §1.9: t_o · ceil(B/W_d)/ceil(B/W_o) · (BW_o/BW_d)^γ · (f_o/f_d)^(1−γ); γ = 1 without counters
};

// What to do when occupancy is 0 on either GPU (§1.12 item 3).
enum class zero_occupancy_policy {
  error,        // throw ns::error (Habitat itself crashes with ZeroDivisionError)
  small_kernel, // DeepView.Predict's guard: a wave size of 0 counts as the sub-wave case
};

struct wave_options {
  wave_variant variant = wave_variant::code;
  bool use_counters = true;  // false: always the metric-free rule (what the published harness mostly did)
  zero_occupancy_policy zero_occupancy = zero_occupancy_policy::error;
  occupancy_options occupancy;  // default: Habitat's DEFAULT smem config, no opt-in
};

enum class wave_method { roofline, metric_free, paper_waves };
std::string_view wave_method_name(wave_method m);

struct wave_result {
  double duration_ns = 0;  // t_d
  wave_method method = wave_method::metric_free;
  std::optional<double> gamma;  // set when counters were used
  bool sub_wave = false;        // case A: floor(B/W_o) = 0 and floor(B/W_d) = 0
  occupancy_result occupancy_origin, occupancy_dest;
  int64_t wave_origin = 0, wave_dest = 0;  // W = N·occ
};

// The memory-bound share's factor, (BW_o/BW_d)^γ (§1.5 case B, §1.6 and §1.9 with γ = 1): what a kernel's memory
// share moves by. `neusight scale` also applies it to the sub-wave kernels scripts/neusight/scale.lua sub_wave_streams()
// says stream through every SM (Habitat keeps them).
double wave_memory_factor(const wave_gpu& origin, const wave_gpu& dest, double gamma);

// γ ∈ [0,1] (§1.4): 1 without FLOPs, 0 without DRAM traffic. Throws ns::error when a counter is missing.
double wave_gamma(const wave_kernel& k, const wave_gpu& origin, const wave_gpu& dest);

// §1.5 (throws when counters are missing), §1.6, and the dispatcher §1.7/§1.9.
wave_result wave_scale_roofline(const wave_kernel& k, const wave_gpu& origin, const wave_gpu& dest,
                                const wave_options& opts = {});
wave_result wave_scale_metric_free(const wave_kernel& k, const wave_gpu& origin, const wave_gpu& dest,
                                   const wave_options& opts = {});
wave_result wave_scale(const wave_kernel& k, const wave_gpu& origin, const wave_gpu& dest,
                       const wave_options& opts = {});

}  // namespace ns
