// engine/core/occupancy.h — CUDA thread-block occupancy (blocks resident per SM) from the published rules.
//
// Written from the CUDA C++ Programming Guide ("Technical Specifications per Compute Capability",
// "Shared Memory" per architecture) and the occupancy-calculator method paraphrased in spec
// method-habitat.md §1.3. NVIDIA's cuda_occupancy.h is NOT vendored (NVIDIA EULA).
//
//   w        = ceil(T / warp_size)                        warps per block
//   L_warps  = floor(max_warps_per_sm / w)                0 if T > max_threads_per_block
//   L_blocks = max_blocks_per_sm                          block slots per cc
//   L_regs   = registers, allocated per warp in units of reg_alloc_unit, split over sub-partitions
//   L_smem   = floor(smem budget per SM / per-block allocation), unlimited when a block uses none
//   occ      = min(L_warps, L_blocks, L_regs, L_smem)
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ns {

struct gpu_spec;

// Architectural limits of one compute capability. Sizes are in bytes / registers / threads.
struct occupancy_limits {
  std::string compute_capability;        // "major.minor"
  std::string rules_cc;                  // the table's cc whose allocation rules these are (occupancy_limits_from_gpu)
  int64_t warp_size = 32;
  int64_t max_threads_per_sm = 0;
  int64_t max_threads_per_block = 0;
  int64_t max_blocks_per_sm = 0;         // block slots
  int64_t regs_per_sm = 0;
  int64_t regs_per_block = 0;
  int64_t max_regs_per_thread = 0;       // 255 on every cc here
  int64_t reg_alloc_unit = 256;          // registers are allocated per warp in multiples of this
  int64_t sub_partitions = 4;            // warp schedulers; registers are split evenly between them (2 on 6.0)
  int64_t smem_per_sm = 0;               // largest shared-memory carve-out per SM
  int64_t smem_per_block = 49152;        // static limit per block without opt-in (48 KiB)
  int64_t smem_per_block_optin = 0;      // per-block limit with cudaFuncAttributeMaxDynamicSharedMemorySize
  int64_t smem_alloc_unit = 256;         // per-block allocation granularity (128 on cc >= 8.0)
  int64_t smem_reserved_per_block = 0;   // system-reserved shared memory per block (1 KiB on cc >= 8.0)
  std::vector<int64_t> smem_carveouts;   // selectable shared-memory sizes per SM (bytes, ascending); empty = fixed
};

// The published table for cc 6.0, 6.1, 7.0, 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 12.0 (NVIDIA only).
// Throws ns::error "unsupported compute capability 'x' (known: 6.0, ...)".
occupancy_limits occupancy_limits_for_cc(std::string_view compute_capability);

// The cc table, with the device sizes the GPU file states (threads, blocks, registers, shared memory)
// taking precedence. gpu_spec's max_smem_per_sm_kb / max_smem_per_block_kb are KiB; the latter is the
// opt-in limit. A cc the table lacks takes the file's sizes (a GPU file states all of them) with the allocation rules of
// the table's nearest lower cc. Throws ns::error "<source>: ..." for a cc below the table (or not "major.minor") or
// an AMD GPU (whose LLVM target is no cc).
occupancy_limits occupancy_limits_from_gpu(const gpu_spec& gpu);

// The warning that `l` (occupancy_limits_from_gpu(gpu)) takes its allocation rules from another cc than the GPU's own,
// naming the GPU, where its file states the cc and the cc borrowed from; empty when the table has the GPU's cc.
std::string occupancy_rules_warning(const gpu_spec& gpu, const occupancy_limits& l);

struct occupancy_options {
  // false: Habitat's DEFAULT shared-memory config (§1.3): per-block limit smem_per_block (48 KiB), no opt-in.
  // true: the kernel opted in, so a block may use up to smem_per_block_optin.
  bool smem_optin = false;
  // Requested shared-memory carve-out per SM in bytes (cudaFuncAttributePreferredSharedMemoryCarveout as a
  // size). -1: the largest carve-out (what the calculator assumes under the default cache config). A request
  // is rounded up to the next selectable size; one above the largest is an error.
  int64_t smem_carveout = -1;
  // Reproduce the CUDA-10.1 calculator's cc 6.0 register rule (§1.3): the result is also 0 when the same
  // computation with 4 sub-partitions gives 0.
  bool sm60_quirk = true;
};

struct kernel_launch_shape {
  int64_t threads_per_block = 0;  // blockX*blockY*blockZ
  int64_t regs_per_thread = 0;
  int64_t smem_per_block = 0;     // static + dynamic bytes (only the sum matters under the default config)
};

// Which rule set the occupancy. When several tie, the first in this order is reported.
enum class occupancy_limiter {
  block_size,     // T = 0 or T > max_threads_per_block: cannot launch (occupancy 0)
  register_count, // r > max_regs_per_thread or the block's registers exceed regs_per_block (occupancy 0)
  smem_size,      // the block's shared memory exceeds the per-block limit (occupancy 0)
  warps,
  block_slots,
  registers,
  shared_memory,
};
std::string_view occupancy_limiter_name(occupancy_limiter l);

struct occupancy_result {
  int64_t blocks_per_sm = 0;
  occupancy_limiter limiter = occupancy_limiter::warps;
  // Each limit on its own (INT64_MAX where a resource does not limit, e.g. no shared memory).
  int64_t limit_warps = 0, limit_blocks = 0, limit_regs = 0, limit_smem = 0;
  int64_t smem_per_sm = 0;       // carve-out used
  int64_t smem_per_block = 0;    // allocated per block (rounded, reserved included)
  int64_t warps_per_block = 0;
};

// Throws ns::error on negative inputs or an unsupported carve-out request.
occupancy_result occupancy_compute(const occupancy_limits& limits, const kernel_launch_shape& launch,
                                   const occupancy_options& opts = {});

}  // namespace ns
