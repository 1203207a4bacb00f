// tests/core/test_wave_scaling.cpp — Habitat wave scaling: every value of spec §1.13, plus the variants.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/gpu_spec.h"
#include "core/text.h"
#include "core/wave_scaling.h"

using namespace ns;

namespace {
// Habitat devices.yml rows (spec §3.1): name, cc, SMs, base clock, bandwidth, peak, threads/SM, smem/SM.
wave_gpu habitat_gpu(const char* name, const char* cc, int64_t sms, double clock, double bw, double peak,
                     int64_t threads_sm, int64_t smem_sm) {
  wave_gpu g;
  g.name = name;
  g.num_sm = sms;
  g.clock_mhz = clock;
  g.mem_bw_gbps = bw;
  g.peak_gflops = peak;
  g.limits = occupancy_limits_for_cc(cc);
  g.limits.max_threads_per_sm = threads_sm;
  g.limits.smem_per_sm = smem_sm;
  g.limits.smem_per_block = 49152;
  return g;
}
const wave_gpu v100 = habitat_gpu("V100", "7.0", 80, 1312, 739, 6716, 2048, 98304);
const std::vector<wave_gpu> dests = {
    habitat_gpu("P4000", "6.1", 14, 1227, 195, 6054, 2048, 98304),
    habitat_gpu("P100", "6.0", 56, 1126, 501, 9504, 2048, 65536),
    habitat_gpu("GTX1080Ti", "6.1", 28, 1480, 484, 10609, 2048, 98304),
    habitat_gpu("P4", "6.1", 20, 810, 192, 4147, 2048, 98304),
    habitat_gpu("T4", "7.5", 40, 585, 239, 1804, 1024, 65536),
    habitat_gpu("RTX2070", "7.5", 36, 1410, 383, 4318, 1024, 65536),
    habitat_gpu("RTX2080Ti", "7.5", 68, 1350, 524, 5938, 1024, 65536),
};
constexpr double gib = 1073741824.0;

wave_kernel kernel(const char* name, int64_t b, int64_t t, int64_t r, int64_t smem, double t_o, double e, double rb,
                   double wb) {
  wave_kernel k;
  k.name = name;
  k.blocks = b;
  k.threads_per_block = t;
  k.regs_origin = r;
  k.smem_per_block = smem;
  k.duration_ns = t_o;
  k.flop_eff_pct = e;
  k.dram_read_bytes = rb;
  k.dram_write_bytes = wb;
  return k;
}

struct golden {
  wave_kernel k;
  std::vector<double> gamma, roofline, metric_free;  // in the order of `dests`
  bool sub_wave;
};
}  // namespace

TEST_CASE("wave scaling: spec §1.13 golden vectors, V100 to each destination", "[wave]") {
  const std::vector<golden> cases = {
      {kernel("k1", 65536, 256, 32, 0, 2e6, 1, 0.5 * gib, 0.5 * gib),
       {0.9978, 0.9965, 0.9969, 0.9969, 0.9911, 0.9940, 0.9941},
       {7587323, 2951362, 3058458, 7710392, 6204604, 3860599, 2817105},
       {7579487, 2950100, 3053719, 7697917, 6184100, 3859008, 2820611},
       false},
      {kernel("k2", 4096, 256, 128, 16384, 5e6, 70, 0.2 * gib, 0.05 * gib),
       {0.1651, 0.1009, 0.1166, 0.1149, 0.0401, 0.0600, 0.0603},
       {28234057, 8221900, 11938588, 30514181, 22094949, 10296040, 5789525},
       {18948718, 7375250, 7634298, 19244792, 15460251, 9647520, 7051527},
       false},
      {kernel("k3", 20000, 128, 64, 0, 1e6, 20, 0.3 * gib, 0.1 * gib),
       {0.9459, 0.9115, 0.9234, 0.9223, 0.7776, 0.8511, 0.8518},
       {3888915, 1490914, 1587215, 4007968, 3358800, 1949494, 1367133},
       {3789744, 1475050, 1526860, 3848958, 3092050, 1929504, 1410305},
       false},
      {kernel("k4", 40, 256, 64, 0, 5e4, 30, 1e6, 1e6),
       {0.2870, 0.1754, 0.2026, 0.1997, 0.0698, 0.1042, 0.1048},
       {114786, 56718, 78936, 128091, 105991, 87217, 48738},
       {50000, 50000, 50000, 50000, 50000, 50000, 50000},
       true},
  };
  for (const golden& c : cases) {
    for (size_t i = 0; i < dests.size(); ++i) {
      INFO(c.k.name << " V100 -> " << dests[i].name);
      CHECK(wave_gamma(c.k, v100, dests[i]) == Approx(c.gamma[i]).margin(5e-5));
      const wave_result rf = wave_scale_roofline(c.k, v100, dests[i]);
      CHECK(rf.sub_wave == c.sub_wave);
      CHECK(std::abs(rf.duration_ns - c.roofline[i]) <= 0.5);  // the table is rounded to whole ns
      const wave_result mf = wave_scale_metric_free(c.k, v100, dests[i]);
      CHECK(std::abs(mf.duration_ns - c.metric_free[i]) <= 0.5);
      // The dispatcher picks roofline with counters, metric-free without.
      CHECK(wave_scale(c.k, v100, dests[i]).duration_ns == rf.duration_ns);
      CHECK(wave_scale(c.k, v100, dests[i]).method == wave_method::roofline);
      wave_kernel bare = c.k;
      bare.dram_write_bytes.reset();
      CHECK(wave_scale(bare, v100, dests[i]).duration_ns == mf.duration_ns);
      CHECK(wave_scale(bare, v100, dests[i]).method == wave_method::metric_free);
      wave_options no_counters;
      no_counters.use_counters = false;
      CHECK(wave_scale(c.k, v100, dests[i], no_counters).duration_ns == mf.duration_ns);
    }
  }
}

TEST_CASE("wave scaling: spec hand checks and γ edge cases", "[wave]") {
  const wave_gpu& p100 = dests[1];
  const wave_kernel k1 = kernel("k1", 65536, 256, 32, 0, 2e6, 1, 0.5 * gib, 0.5 * gib);
  CHECK(wave_gamma(k1, v100, p100) == Approx(1 - 0.13432 / (2 * 9504.0 / 501)).epsilon(1e-12));
  const wave_result r = wave_scale_roofline(kernel("k4", 40, 256, 64, 0, 5e4, 30, 1e6, 1e6), v100, p100);
  CHECK(r.duration_ns == Approx(5e4 * std::pow(1312.0 / 1126, 1 - *r.gamma)).epsilon(1e-12));
  CHECK(r.occupancy_origin.blocks_per_sm == 4);
  CHECK(r.wave_origin == 320);
  CHECK(wave_gamma(kernel("z", 1, 32, 32, 0, 1e3, 0, 1, 1), v100, p100) == 1.0);   // no FLOPs
  CHECK(wave_gamma(kernel("z", 1, 32, 32, 0, 1e3, 50, 0, 0), v100, p100) == 0.0);  // no DRAM traffic
  wave_kernel bare = k1;
  bare.flop_eff_pct.reset();
  CHECK_THROWS_WITH(wave_gamma(bare, v100, p100),
                    "kernel 'k1': roofline γ needs flop_eff_pct, dram_read_bytes and dram_write_bytes");
  CHECK_THROWS_WITH(wave_scale_roofline(bare, v100, p100),
                    "kernel 'k1': roofline γ needs flop_eff_pct, dram_read_bytes and dram_write_bytes");
}

TEST_CASE("wave scaling: zero occupancy policy and destination registers", "[wave]") {
  const wave_gpu& t4 = dests[4];
  wave_kernel big = kernel("big", 1000, 128, 40, 49408, 1e5, 10, 1e6, 1e6);  // > 48 KiB, no opt-in
  CHECK_THROWS_WITH(wave_scale(big, v100, t4), "kernel 'big': occupancy is 0 on V100 (limited by smem_size)");
  wave_options o;
  o.zero_occupancy = zero_occupancy_policy::small_kernel;
  const wave_result r = wave_scale_metric_free(big, v100, t4, o);
  CHECK(r.sub_wave);
  CHECK(r.duration_ns == 1e5);
  // r_d changes only the destination's occupancy: with 255 registers T4 holds 1 block per SM (W_d = 40).
  wave_kernel k = kernel("k", 100, 256, 32, 0, 1e5, 10, 1e6, 1e6);
  k.regs_dest = 255;
  const wave_result rd = wave_scale_metric_free(k, v100, t4);
  CHECK(rd.occupancy_origin.blocks_per_sm == 8);
  CHECK(rd.occupancy_dest.blocks_per_sm == 1);
  CHECK(rd.wave_dest == 40);
  CHECK_FALSE(rd.sub_wave);  // 100 / 40 >= 1 on T4
  CHECK(rd.duration_ns == Approx(1e5 * 739.0 / 239).epsilon(1e-12));
}

TEST_CASE("wave scaling: the paper's wave-count variant (§1.9)", "[wave]") {
  const wave_gpu& p100 = dests[1];
  wave_options o;
  o.variant = wave_variant::paper_waves;
  const wave_kernel k3 = kernel("k3", 20000, 128, 64, 0, 1e6, 20, 0.3 * gib, 0.1 * gib);
  const wave_result r = wave_scale(k3, v100, p100, o);
  // V100: occ 8 (regs 2048/warp: 8 per sub-partition = 32 warps / 4) -> W 640; P100: occ 8 -> W 448.
  CHECK(r.wave_origin == 640);
  CHECK(r.wave_dest == 448);
  const double g = wave_gamma(k3, v100, p100);
  CHECK(r.method == wave_method::paper_waves);
  CHECK(*r.gamma == g);
  CHECK(r.duration_ns ==
        Approx(1e6 * (45.0 / 32.0) * std::pow(739.0 / 501, g) * std::pow(1312.0 / 1126, 1 - g)).epsilon(1e-12));
  wave_kernel bare = k3;
  bare.flop_eff_pct.reset();
  CHECK(wave_scale(bare, v100, p100, o).duration_ns == Approx(1e6 * (45.0 / 32.0) * 739.0 / 501).epsilon(1e-12));
}

TEST_CASE("wave scaling: GPU numbers from a gpu_spec", "[wave]") {
  gpu_spec g;
  g.name = "V100";
  g.source = "gpus/v100.toml";
  g.compute_capability = "7.0";
  g.num_sm = 80;
  g.base_clock_mhz = 1230;
  g.boost_clock_mhz = 1380;
  g.mem_bw_gbps = 900;
  g.peak_fp32_tflops = 14.0;
  g.max_smem_per_sm_kb = 96;
  g.max_smem_per_block_kb = 96;
  const wave_gpu w = wave_gpu_from_spec(g);
  CHECK(w.clock_mhz == 1230);  // base clock, as Habitat's tables
  CHECK(w.peak_gflops == 14000);
  CHECK(w.limits.smem_per_sm == 98304);
  g.mem_bw_gbps = 0;
  CHECK_THROWS_WITH(wave_gpu_from_spec(g), "gpus/v100.toml: wave scaling needs 'mem_bw_gbps' > 0");
}
