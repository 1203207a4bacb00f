// engine/core/occupancy.cpp — CUDA occupancy from the published per-cc limits (see occupancy.h).
#include "core/occupancy.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "core/gpu_spec.h"
#include "core/text.h"

namespace ns {
namespace {

constexpr int64_t kib = 1024;
constexpr int64_t unlimited = std::numeric_limits<int64_t>::max();

int64_t round_up(int64_t x, int64_t unit) { return unit <= 0 ? x : (x + unit - 1) / unit * unit; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::vector<int64_t> kib_list(std::initializer_list<int64_t> v) {
  std::vector<int64_t> out;
  for (int64_t x : v) out.push_back(x * kib);
  return out;
}

// CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" and the per-architecture
// shared-memory sections (Volta 0/8/16/32/64/96 KB; Turing 32/64 KB; A100 up to 164 KB; GA10x/AD10x up to
// 100 KB; H100 up to 228 KB; 1 KB reserved per block from cc 8.0). Allocation units: 256 registers per warp
// everywhere; shared memory 256 B up to cc 7.x and 128 B from cc 8.0. Sub-partitions: 2 on GP100 (cc 6.0), 4
// elsewhere.
occupancy_limits make(const char* cc, int64_t threads_sm, int64_t blocks_sm, int64_t smem_sm_kib,
                      int64_t optin_kib, int64_t subp, int64_t smem_unit, int64_t reserved,
                      std::vector<int64_t> carveouts) {
  occupancy_limits l;
  l.compute_capability = cc;
  l.rules_cc = cc;
  l.warp_size = 32;
  l.max_threads_per_sm = threads_sm;
  l.max_threads_per_block = 1024;
  l.max_blocks_per_sm = blocks_sm;
  l.regs_per_sm = 65536;
  l.regs_per_block = 65536;
  l.max_regs_per_thread = 255;
  l.reg_alloc_unit = 256;
  l.sub_partitions = subp;
  l.smem_per_sm = smem_sm_kib * kib;
  l.smem_per_block = 48 * kib;
  l.smem_per_block_optin = optin_kib * kib;
  l.smem_alloc_unit = smem_unit;
  l.smem_reserved_per_block = reserved;
  l.smem_carveouts = std::move(carveouts);
  return l;
}

const std::vector<occupancy_limits>& cc_table() {
  static const std::vector<occupancy_limits> t = {
      make("6.0", 2048, 32, 64, 48, 2, 256, 0, {}),
      make("6.1", 2048, 32, 96, 48, 4, 256, 0, {}),
      make("7.0", 2048, 32, 96, 96, 4, 256, 0, kib_list({0, 8, 16, 32, 64, 96})),
      make("7.5", 1024, 16, 64, 64, 4, 256, 0, kib_list({32, 64})),
      make("8.0", 2048, 32, 164, 163, 4, 128, 1 * kib, kib_list({0, 8, 16, 32, 64, 100, 132, 164})),
      make("8.6", 1536, 16, 100, 99, 4, 128, 1 * kib, kib_list({0, 8, 16, 32, 64, 100})),
      make("8.9", 1536, 24, 100, 99, 4, 128, 1 * kib, kib_list({0, 8, 16, 32, 64, 100})),
      make("9.0", 2048, 32, 228, 227, 4, 128, 1 * kib, kib_list({0, 8, 16, 32, 64, 100, 132, 164, 196, 228})),
      // Blackwell. Threads, block slots and shared memory per SM and the opt-in per block: the same Programming Guide
      // table, columns 10.0, 10.3 and 12.0, as gpus/b200.toml, gb200.toml (10.0), b300_sxm.toml, gb300.toml (10.3) and
      // rtx_pro_6000_server.toml (12.0) cite them: 2048 threads, 32 blocks, 228 KB (227 KB opt-in) on 10.x; 1536
      // threads, 32 blocks, 100 KB (99 KB opt-in) on 12.0. Carve-outs: the guide's Blackwell shared-memory section,
      // 0/8/16/32/64/100/132/164/196/228 KB on 10.x (as 9.0) and 0/8/16/32/64/100 KB on 12.0 (as 8.6/8.9). The guide
      // states no allocation units or sub-partitions for them: taken as for 9.0 on datacenter Blackwell (10.x: 4
      // sub-partitions, 128 B shared-memory units, 1 KB reserved per block) and as for 8.9 on 12.0 (the same numbers).
      make("10.0", 2048, 32, 228, 227, 4, 128, 1 * kib, kib_list({0, 8, 16, 32, 64, 100, 132, 164, 196, 228})),
      make("10.3", 2048, 32, 228, 227, 4, 128, 1 * kib, kib_list({0, 8, 16, 32, 64, 100, 132, 164, 196, 228})),
      make("12.0", 1536, 32, 100, 99, 4, 128, 1 * kib, kib_list({0, 8, 16, 32, 64, 100})),
  };
  return t;
}

// Warps a block may hold given the register file, for `subp` sub-partitions (registers of one warp live
// in one sub-partition, so each sub-partition holds floor((regs_per_sm/subp)/regs_per_warp) warps).
int64_t register_limit(const occupancy_limits& l, int64_t regs_per_warp, int64_t warps, int64_t subp) {
  if (regs_per_warp == 0) return unlimited;
  const int64_t per_subp = (l.regs_per_sm / subp) / regs_per_warp;
  return (subp * per_subp) / warps;
}

}  // namespace

std::string_view occupancy_limiter_name(occupancy_limiter l) {
  switch (l) {
    case occupancy_limiter::block_size: return "block_size";
    case occupancy_limiter::register_count: return "register_count";
    case occupancy_limiter::smem_size: return "smem_size";
    case occupancy_limiter::warps: return "warps";
    case occupancy_limiter::block_slots: return "block_slots";
    case occupancy_limiter::registers: return "registers";
    case occupancy_limiter::shared_memory: return "shared_memory";
  }
  return "?";
}

occupancy_limits occupancy_limits_for_cc(std::string_view cc) {
  std::string known;
  for (const auto& l : cc_table()) {
    if (l.compute_capability == cc) return l;
    known += (known.empty() ? "" : ", ") + l.compute_capability;
  }
  throw error("unsupported compute capability '" + std::string(cc) + "' (known: " + known + ")");
}

namespace {
// "major.minor" as a number to compare (9.5 → 905); nullopt when it is not that form.
std::optional<int64_t> cc_number(std::string_view cc) {
  const size_t dot = cc.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= cc.size() || cc.size() > 8) return std::nullopt;
  int64_t major = 0, minor = 0;
  for (size_t i = 0; i < cc.size(); ++i) {
    if (i == dot) continue;
    if (cc[i] < '0' || cc[i] > '9') return std::nullopt;
    (i < dot ? major : minor) = (i < dot ? major : minor) * 10 + (cc[i] - '0');
  }
  return minor > 99 ? std::nullopt : std::optional<int64_t>(major * 100 + minor);
}

// The table's highest cc below `cc` (nullopt: not a "major.minor" or below every entry).
std::optional<occupancy_limits> occupancy_limits_below(std::string_view cc) {
  const std::optional<int64_t> n = cc_number(cc);
  if (!n) return std::nullopt;
  std::optional<occupancy_limits> best;
  int64_t best_n = -1;
  for (const auto& l : cc_table()) {
    const int64_t m = *cc_number(l.compute_capability);
    if (m < *n && m > best_n) best = l, best_n = m;
  }
  return best;
}
}  // namespace

occupancy_limits occupancy_limits_from_gpu(const gpu_spec& gpu) {
  // An AMD GPU's compute_capability is its LLVM target (gfx942): its wavefronts, LDS and VGPR file follow rules this
  // table does not hold, and guessing them would be a silent wrong occupancy.
  if (gpu.vendor == "amd")
    throw error(gpu.source + ": " + gpu.name + " is an AMD GPU (compute_capability '" + gpu.compute_capability +
                "'): occupancy is computed from the CUDA C++ Programming Guide's per-compute-capability limits, which "
                "cover NVIDIA GPUs only");
  occupancy_limits l;
  try {
    l = occupancy_limits_for_cc(gpu.compute_capability);
  } catch (const error& e) {
    // A cc the table lacks (a new part, a what-if file): every device size below is the file's own (gpu_spec requires
    // them all); the allocation rules a file does not state (register and shared-memory units, sub-partitions, the
    // 48 KiB static block limit, carve-outs) are the table's nearest lower cc's, which the table carries over within
    // and across generations (8.0 → 9.0 → 10.0). Below every entry (or not "major.minor"): refused.
    const std::optional<occupancy_limits> below = occupancy_limits_below(gpu.compute_capability);
    if (!below) throw error(gpu.source + ": " + e.what());
    l = *below;
    l.compute_capability = gpu.compute_capability;  // rules_cc stays the lower cc's: occupancy_rules_warning says so
  }
  // The GPU file's own numbers win over the cc table where it states them (> 0).
  auto take = [](int64_t& dst, int64_t v) {
    if (v > 0) dst = v;
  };
  take(l.warp_size, gpu.warp_size);
  take(l.max_threads_per_sm, gpu.max_threads_per_sm);
  take(l.max_threads_per_block, gpu.max_threads_per_block);
  take(l.max_blocks_per_sm, gpu.max_blocks_per_sm);
  take(l.regs_per_sm, gpu.max_regs_per_sm);
  take(l.regs_per_block, gpu.max_regs_per_block);
  take(l.max_regs_per_thread, gpu.max_regs_per_thread);
  take(l.smem_per_sm, static_cast<int64_t>(gpu.max_smem_per_sm_kb * kib));
  take(l.smem_per_block_optin, static_cast<int64_t>(gpu.max_smem_per_block_kb * kib));
  l.smem_per_block = std::min(l.smem_per_block, l.smem_per_block_optin);
  return l;
}

std::string occupancy_rules_warning(const gpu_spec& gpu, const occupancy_limits& l) {
  if (l.rules_cc.empty() || l.rules_cc == l.compute_capability) return "";
  const std::string at = gpu_key_at(gpu, "compute_capability");
  return "gpu '" + gpu.name + "' (" + at + "): compute capability " + l.compute_capability +
         " is not in the occupancy table; its allocation rules (register and shared-memory allocation units, "
         "shared-memory carve-outs) are taken from cc " + l.rules_cc + ", its sizes from its file";
}

occupancy_result occupancy_compute(const occupancy_limits& l, const kernel_launch_shape& k,
                                   const occupancy_options& opts) {
  if (k.threads_per_block < 0 || k.regs_per_thread < 0 || k.smem_per_block < 0)
    throw error("occupancy: negative launch value (threads " + std::to_string(k.threads_per_block) + ", registers " +
                std::to_string(k.regs_per_thread) + ", shared memory " + std::to_string(k.smem_per_block) + ")");
  if (l.warp_size <= 0 || l.sub_partitions <= 0)
    throw error("occupancy: limits for cc '" + l.compute_capability + "' have no warp size / sub-partitions");

  occupancy_result r;
  // Carve-out: largest by default; a request rounds up to the next selectable size.
  r.smem_per_sm = l.smem_per_sm;
  if (opts.smem_carveout >= 0 && !l.smem_carveouts.empty()) {
    auto it = std::lower_bound(l.smem_carveouts.begin(), l.smem_carveouts.end(), opts.smem_carveout);
    if (it == l.smem_carveouts.end())
      throw error("occupancy: shared-memory carve-out " + std::to_string(opts.smem_carveout) +
                  " bytes exceeds the largest for cc " + l.compute_capability + " (" +
                  std::to_string(l.smem_carveouts.back()) + ")");
    r.smem_per_sm = std::min(*it, l.smem_per_sm);
  }

  const int64_t w = ceil_div(k.threads_per_block, l.warp_size);
  r.warps_per_block = w;

  // Warps.
  const int64_t max_warps = l.max_threads_per_sm / l.warp_size;
  const bool bad_block = k.threads_per_block == 0 || k.threads_per_block > l.max_threads_per_block;
  r.limit_warps = bad_block ? 0 : max_warps / w;

  // Block slots.
  r.limit_blocks = l.max_blocks_per_sm;

  // Registers.
  const int64_t regs_per_warp = round_up(k.regs_per_thread * l.warp_size, l.reg_alloc_unit);
  bool bad_regs = k.regs_per_thread > l.max_regs_per_thread;
  if (!bad_block) {
    if (regs_per_warp * round_up(w, l.sub_partitions) > l.regs_per_block) bad_regs = true;
    if (regs_per_warp * w > l.regs_per_block) bad_regs = true;
  }
  if (bad_regs || bad_block) {
    r.limit_regs = 0;
  } else {
    r.limit_regs = register_limit(l, regs_per_warp, w, l.sub_partitions);
    if (opts.sm60_quirk && l.compute_capability == "6.0" && register_limit(l, regs_per_warp, w, 4) == 0)
      r.limit_regs = 0;
  }

  // Shared memory.
  const int64_t block_limit = opts.smem_optin ? l.smem_per_block_optin : l.smem_per_block;
  bool bad_smem = k.smem_per_block > block_limit;
  if (k.smem_per_block == 0 && l.smem_reserved_per_block == 0) {
    r.smem_per_block = 0;
    r.limit_smem = unlimited;
  } else {
    r.smem_per_block = round_up(k.smem_per_block + l.smem_reserved_per_block, l.smem_alloc_unit);
    r.limit_smem = bad_smem ? 0 : r.smem_per_sm / r.smem_per_block;
  }

  // Report the reason: invalid configurations first, then the tightest limit.
  if (bad_block) {
    r.limiter = occupancy_limiter::block_size;
  } else if (bad_regs) {
    r.limiter = occupancy_limiter::register_count;
  } else if (bad_smem) {
    r.limiter = occupancy_limiter::smem_size;
  } else {
    const int64_t m = std::min({r.limit_warps, r.limit_blocks, r.limit_regs, r.limit_smem});
    if (m == r.limit_warps) r.limiter = occupancy_limiter::warps;
    else if (m == r.limit_blocks) r.limiter = occupancy_limiter::block_slots;
    else if (m == r.limit_regs) r.limiter = occupancy_limiter::registers;
    else r.limiter = occupancy_limiter::shared_memory;
  }
  r.blocks_per_sm = (bad_block || bad_regs || bad_smem)
                        ? 0
                        : std::min({r.limit_warps, r.limit_blocks, r.limit_regs, r.limit_smem});
  return r;
}

}  // namespace ns
