// tests/core/test_occupancy.cpp — occupancy calculator: spec §1.13 table and hand-checked cases per cc.
#include <catch2/catch.hpp>

#include "core/gpu_spec.h"
#include "core/occupancy.h"
#include "core/text.h"
#include "test_util.h"

using namespace ns;

namespace {
// Habitat devices.yml (spec §3.1): cc and shared memory per SM; the rest equals the cc table.
occupancy_limits habitat_limits(const char* cc, int64_t threads_sm, int64_t smem_sm) {
  occupancy_limits l = occupancy_limits_for_cc(cc);
  l.max_threads_per_sm = threads_sm;
  l.smem_per_sm = smem_sm;
  l.smem_per_block = 49152;
  return l;
}
int64_t occ(const occupancy_limits& l, int64_t t, int64_t r, int64_t s_st, int64_t s_dyn) {
  return occupancy_compute(l, {t, r, s_st + s_dyn}).blocks_per_sm;
}
}  // namespace

TEST_CASE("occupancy: spec §1.13 table (Habitat's calculator settings)", "[occupancy]") {
  struct gpu {
    const char* name;
    occupancy_limits l;
  };
  const std::vector<gpu> gpus = {
      {"P4000", habitat_limits("6.1", 2048, 98304)},    {"P100", habitat_limits("6.0", 2048, 65536)},
      {"GTX1080Ti", habitat_limits("6.1", 2048, 98304)}, {"P4", habitat_limits("6.1", 2048, 98304)},
      {"V100", habitat_limits("7.0", 2048, 98304)},     {"T4", habitat_limits("7.5", 1024, 65536)},
      {"RTX2070", habitat_limits("7.5", 1024, 65536)},  {"RTX2080Ti", habitat_limits("7.5", 1024, 65536)},
  };
  struct row {
    int64_t t, r, s_st, s_dyn;
    std::vector<int64_t> expected;  // in the order of `gpus`
  };
  const std::vector<row> rows = {
      {256, 32, 0, 0, {8, 8, 8, 8, 8, 4, 4, 4}},         {256, 64, 0, 0, {4, 4, 4, 4, 4, 4, 4, 4}},
      {128, 128, 0, 0, {4, 4, 4, 4, 4, 4, 4, 4}},        {1024, 32, 0, 0, {2, 2, 2, 2, 2, 1, 1, 1}},
      {256, 32, 16384, 0, {6, 4, 6, 6, 6, 4, 4, 4}},     {128, 96, 0, 32768, {3, 2, 3, 3, 3, 2, 2, 2}},
      {64, 255, 0, 0, {4, 4, 4, 4, 4, 4, 4, 4}},         {256, 72, 49152, 0, {2, 1, 2, 2, 2, 1, 1, 1}},
      {128, 40, 0, 49408, {0, 0, 0, 0, 0, 0, 0, 0}},
  };
  for (const row& rw : rows) {
    for (size_t g = 0; g < gpus.size(); ++g) {
      INFO(gpus[g].name << " T=" << rw.t << " r=" << rw.r << " smem=" << rw.s_st << "+" << rw.s_dyn);
      CHECK(occ(gpus[g].l, rw.t, rw.r, rw.s_st, rw.s_dyn) == rw.expected[g]);
    }
  }
  // The last row fails because 49408 B > 48 KiB without opt-in.
  CHECK(occupancy_compute(gpus[4].l, {128, 40, 49408}).limiter == occupancy_limiter::smem_size);
}

TEST_CASE("occupancy: limiter reporting", "[occupancy]") {
  const occupancy_limits v100 = occupancy_limits_for_cc("7.0");
  auto r = occupancy_compute(v100, {256, 32, 0});
  CHECK(r.blocks_per_sm == 8);
  CHECK(r.limiter == occupancy_limiter::warps);
  CHECK(r.limit_warps == 8);
  CHECK(r.limit_regs == 8);  // 256 regs/warp ... 64 warps / 8
  r = occupancy_compute(v100, {32, 16, 0});
  CHECK(r.blocks_per_sm == 32);
  CHECK(r.limiter == occupancy_limiter::block_slots);
  r = occupancy_compute(v100, {256, 128, 0});
  CHECK(r.blocks_per_sm == 2);
  CHECK(r.limiter == occupancy_limiter::registers);
  r = occupancy_compute(v100, {64, 16, 20000});
  CHECK(r.smem_per_block == 20224);
  CHECK(r.blocks_per_sm == 4);
  CHECK(r.limiter == occupancy_limiter::shared_memory);
  r = occupancy_compute(v100, {2048, 16, 0});
  CHECK(r.blocks_per_sm == 0);
  CHECK(r.limiter == occupancy_limiter::block_size);
  r = occupancy_compute(v100, {0, 16, 0});
  CHECK(r.blocks_per_sm == 0);
  CHECK(r.limiter == occupancy_limiter::block_size);
  r = occupancy_compute(v100, {64, 256, 0});
  CHECK(r.blocks_per_sm == 0);
  CHECK(r.limiter == occupancy_limiter::register_count);
  r = occupancy_compute(v100, {1024, 255, 0});  // 8192 regs/warp · 32 warps > 65536 per block
  CHECK(r.blocks_per_sm == 0);
  CHECK(r.limiter == occupancy_limiter::register_count);
  CHECK_THROWS_WITH(occupancy_compute(v100, {-1, 16, 0}),
                    "occupancy: negative launch value (threads -1, registers 16, shared memory 0)");
}

TEST_CASE("occupancy: hand-checked cases per compute capability", "[occupancy]") {
  SECTION("6.0: two sub-partitions, 64 KiB per SM") {
    const auto l = occupancy_limits_for_cc("6.0");
    CHECK(l.sub_partitions == 2);
    // r=80: 2560 regs/warp; 32768/2560 = 12 per sub-partition -> 24 warps -> 3 blocks of 8 warps.
    CHECK(occ(l, 256, 80, 0, 0) == 3);
    CHECK(occ(l, 128, 0, 12000, 0) == 5);  // 12032 B blocks in 65536
  }
  SECTION("6.1: four sub-partitions, 96 KiB per SM") {
    const auto l = occupancy_limits_for_cc("6.1");
    // r=80: 16384/2560 = 6 per sub-partition -> 24 warps -> 3 blocks.
    CHECK(occ(l, 256, 80, 0, 0) == 3);
    CHECK(occ(l, 128, 0, 12000, 0) == 8);  // 98304 / 12032
  }
  SECTION("7.0: carve-outs and opt-in up to 96 KiB") {
    const auto l = occupancy_limits_for_cc("7.0");
    CHECK(occ(l, 128, 32, 65536, 0) == 0);  // no opt-in
    occupancy_options o;
    o.smem_optin = true;
    CHECK(occupancy_compute(l, {128, 32, 65536}, o).blocks_per_sm == 1);
    o.smem_carveout = 40000;  // rounds up to the 64 KiB carve-out
    auto r = occupancy_compute(l, {128, 32, 16384}, o);
    CHECK(r.smem_per_sm == 65536);
    CHECK(r.blocks_per_sm == 4);
    o.smem_carveout = 100000;
    CHECK_THROWS_WITH(occupancy_compute(l, {128, 32, 0}, o),
                      "occupancy: shared-memory carve-out 100000 bytes exceeds the largest for cc 7.0 (98304)");
  }
  SECTION("7.5: 16 block slots, 32 warps") {
    const auto l = occupancy_limits_for_cc("7.5");
    CHECK(occ(l, 32, 16, 0, 0) == 16);
    CHECK(occ(l, 512, 32, 0, 0) == 2);
  }
  SECTION("8.0: 1 KiB reserved per block, 128-byte units, 164 KiB") {
    const auto l = occupancy_limits_for_cc("8.0");
    auto r = occupancy_compute(l, {128, 32, 16384});
    CHECK(r.smem_per_block == 17408);
    CHECK(r.blocks_per_sm == 9);  // 167936 / 17408
    CHECK(r.limiter == occupancy_limiter::shared_memory);
    CHECK(occ(l, 64, 16, 0, 0) == 32);  // reserved 1 KiB alone: 164 blocks, slots bind
    CHECK(occ(l, 64, 16, 100, 0) == 32);
    occupancy_options o;
    o.smem_optin = true;
    CHECK(occupancy_compute(l, {256, 32, 100 * 1024}, o).blocks_per_sm == 1);
    CHECK(occupancy_compute(l, {256, 32, 164 * 1024}, o).blocks_per_sm == 0);
  }
  SECTION("8.6: 1536 threads, 16 slots, 100 KiB") {
    const auto l = occupancy_limits_for_cc("8.6");
    CHECK(occ(l, 256, 32, 0, 0) == 6);
    CHECK(occ(l, 32, 16, 0, 0) == 16);
    CHECK(occ(l, 128, 32, 32768, 0) == 3);  // 102400 / 33792
  }
  SECTION("8.9: 24 block slots") {
    const auto l = occupancy_limits_for_cc("8.9");
    CHECK(occ(l, 32, 16, 0, 0) == 24);
    CHECK(occ(l, 1024, 32, 0, 0) == 1);
  }
  SECTION("9.0: 228 KiB, opt-in 227 KiB") {
    const auto l = occupancy_limits_for_cc("9.0");
    CHECK(occ(l, 128, 32, 32768, 0) == 6);  // 233472 / 33792 = 6.9
    occupancy_options o;
    o.smem_optin = true;
    CHECK(occupancy_compute(l, {128, 32, 227 * 1024}, o).blocks_per_sm == 1);
    CHECK(occ(l, 128, 168, 0, 0) == 3);  // 5376 regs/warp: 3 per sub-partition -> 12 warps / 4
  }
  SECTION("10.0 and 10.3: as 9.0 (228 KiB, opt-in 227 KiB, 32 slots)") {
    for (const char* cc : {"10.0", "10.3"}) {
      INFO(cc);
      const auto l = occupancy_limits_for_cc(cc);
      CHECK(l.max_threads_per_sm == 2048);
      CHECK(l.max_blocks_per_sm == 32);
      CHECK(occ(l, 128, 32, 32768, 0) == 6);  // 233472 / 33792 = 6.9
      CHECK(occ(l, 32, 16, 0, 0) == 32);
      occupancy_options o;
      o.smem_optin = true;
      CHECK(occupancy_compute(l, {128, 32, 227 * 1024}, o).blocks_per_sm == 1);
      o.smem_carveout = 150 * 1024;  // rounds up to the 164 KiB carve-out
      CHECK(occupancy_compute(l, {128, 32, 16384}, o).smem_per_sm == 164 * 1024);
    }
  }
  SECTION("12.0: 1536 threads, 32 slots, 100 KiB, opt-in 99 KiB") {
    const auto l = occupancy_limits_for_cc("12.0");
    CHECK(occ(l, 32, 16, 0, 0) == 32);      // 48 warps, 32 block slots bind
    CHECK(occ(l, 256, 32, 0, 0) == 6);      // 1536 / 256
    CHECK(occ(l, 128, 32, 32768, 0) == 3);  // 102400 / 33792
    occupancy_options o;
    o.smem_optin = true;
    CHECK(occupancy_compute(l, {128, 32, 99 * 1024}, o).blocks_per_sm == 1);
    CHECK(occupancy_compute(l, {128, 32, 100 * 1024}, o).blocks_per_sm == 0);
  }
  CHECK_THROWS_WITH(occupancy_limits_for_cc("5.2"), "unsupported compute capability '5.2' (known: 6.0, 6.1, 7.0, 7.5, "
                                                    "8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 12.0)");
}

// Every NVIDIA GPU file's compute capability is in the table, and the per-SM limits it cites from the Programming
// Guide's table agree with the row (the file's numbers win where they differ: a disagreement is a mistake in one of
// them); an AMD GPU is refused by name, its LLVM target being no compute capability.
TEST_CASE("occupancy: every bundled NVIDIA GPU has its compute capability's row and agrees with it", "[occupancy]") {
  size_t nvidia = 0, amd = 0;
  for (const auto& g : gpu_catalog(ns_test::source_dir / "gpus").load_all()) {
    INFO(g.source << " cc " << g.compute_capability);
    if (g.vendor == "amd") {
      ++amd;
      CHECK_THROWS_WITH(occupancy_limits_from_gpu(g),
                        g.source + ": " + g.name + " is an AMD GPU (compute_capability '" + g.compute_capability +
                            "'): occupancy is computed from the CUDA C++ Programming Guide's per-compute-capability "
                            "limits, which cover NVIDIA GPUs only");
      continue;
    }
    ++nvidia;
    const occupancy_limits row = occupancy_limits_for_cc(g.compute_capability);
    const occupancy_limits l = occupancy_limits_from_gpu(g);
    CHECK(l.max_threads_per_sm == row.max_threads_per_sm);
    CHECK(l.max_blocks_per_sm == row.max_blocks_per_sm);
    CHECK(l.smem_per_sm == row.smem_per_sm);
    CHECK(l.smem_per_block_optin == row.smem_per_block_optin);
    CHECK(l.regs_per_sm == row.regs_per_sm);
    if (!row.smem_carveouts.empty()) CHECK(row.smem_carveouts.back() == l.smem_per_sm);  // the largest is the SM's
  }
  CHECK(nvidia >= 20);
  CHECK(amd >= 4);
}

TEST_CASE("occupancy: limits from a GPU file", "[occupancy]") {
  gpu_spec g;
  g.name = "X";
  g.source = "gpus/x.toml";
  g.compute_capability = "8.0";
  g.max_smem_per_sm_kb = 164;
  g.max_smem_per_block_kb = 163;
  g.max_blocks_per_sm = 32;
  auto l = occupancy_limits_from_gpu(g);
  CHECK(l.smem_per_sm == 167936);
  CHECK(l.smem_per_block_optin == 166912);
  CHECK(l.smem_per_block == 49152);
  // a cc the table lacks: the file's sizes, the allocation rules of the nearest lower cc (10.3 for 11.0)
  g.compute_capability = "11.0";
  l = occupancy_limits_from_gpu(g);
  CHECK(l.compute_capability == "11.0");
  CHECK(l.smem_per_sm == 167936);
  CHECK(l.smem_alloc_unit == occupancy_limits_for_cc("10.3").smem_alloc_unit);
  g.compute_capability = "5.2";  // below the table
  CHECK_THROWS_WITH(occupancy_limits_from_gpu(g), "gpus/x.toml: unsupported compute capability '5.2' (known: 6.0, "
                                                  "6.1, 7.0, 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 12.0)");
}
