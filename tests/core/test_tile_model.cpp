// tests/core/test_tile_model.cpp — NeuSight features (spec §1.5 golden intermediates), MLP, training, weights IO.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "ingest/dataset.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "core/weights.h"
#include "lua/session.h"
#include "session_util.h"
#include "test_util.h"

using namespace ns;
using ns::error;
using ns_test::source_dir;

namespace {
const gpu_spec h100 =
    gpu_spec_load(source_dir / "tests/fixtures/gpus/h100_reference.toml", "tests/fixtures/gpus/h100_reference.toml");

// The bundled scripts' training convention (scripts/neusight/kernels.lua train_convention), as a session reads it.
const train_convention& bundled_convention() {
  static session s(ns_test::session_opts(source_dir));
  return s.training_convention();
}

kernel gemm(kernel_kind kind, int64_t b, int64_t m, int64_t n, int64_t k, int64_t tm, int64_t tk) {
  kernel g;
  g.kind = kind;
  g.name = kind == kernel_kind::bmm ? "BMM" : "Linear";
  g.b = b, g.m = m, g.n = n, g.k = k, g.tile_m = tm, g.tile_k = tk;
  g.flops = 2.0 * b * m * n * k;
  g.bytes = 4.0 * b * (m * n + n * k + m * k);
  return g;
}

kernel vec(kernel_kind kind, int64_t rows, int64_t hidden, double ops, double mem, int64_t tile) {
  kernel v;
  v.kind = kind;
  v.name = "VEC";
  v.rows = rows, v.hidden = hidden, v.tile_elems = tile;
  v.flops = ops * double(rows) * double(hidden);
  v.bytes = mem * double(rows) * double(hidden);
  return v;
}

struct worked {
  const char* name;
  kernel k;
  double blocks, waves, roof;
  std::array<double, 4> inputs;
};
}  // namespace

TEST_CASE("features reproduce the spec's worked example (GPT-3 2.7B on H100)", "[neusight]") {
  const auto L = kernel_kind::gemm, B = kernel_kind::bmm;
  const std::vector<worked> cases = {
      {"addmm QKV", gemm(L, 1, 2048, 2560, 7680, 64, 128), 1920, 15, 66908, {-3.60, -3.77, -4.44, -3.76}},
      {"addmm_1", gemm(L, 1, 2048, 2560, 2560, 128, 32), 1280, 10, 66908, {-4.60, -4.04, -5.30, -4.62}},
      {"addmm_3", gemm(L, 1, 2048, 10240, 2560, 32, 128), 1280, 10, 66908, {-2.60, -2.05, -3.31, -2.63}},
      {"lm_head", gemm(L, 1, 2048, 2560, 50257, 64, 128), 12576, 96, 66908, {-3.60, -3.77, -1.76, -1.08}},
      {"matmul QK", gemm(B, 32, 2048, 80, 2048, 128, 128), 8192, 63, 66908, {-7.60, -7.53, -6.13, -5.45}},
      {"matmul_1 PV", gemm(B, 32, 2048, 2048, 80, 128, 128), 512, 4, 66908, {-2.92, -3.66, -6.23, -5.56}},
      {"add_1", vec(kernel_kind::elementwise, 2048, 2560, 1, 12, 512), 10240, 78, 306.9, {-19.92, -12.11, -10.41, -9.73}},
      {"truediv", vec(kernel_kind::elementwise, 65536, 2048, 1, 8, 512), 262144, 1986, 460.4, {-19.92, -12.70, -6.32, -5.64}},
      {"softmax", vec(kernel_kind::softmax, 65536, 2048, 5, 8, 2048), 65536, 497, 2301.8, {-15.60, -10.70, -6.32, -5.64}},
      {"ln_1", vec(kernel_kind::layernorm, 2048, 2560, 6, 8, 2560), 2048, 16, 2762.2, {-15.01, -10.38, -10.96, -10.28}},
      {"tanh", vec(kernel_kind::elementwise, 2048, 10240, 1, 8, 512), 40960, 311, 460.4, {-19.92, -12.70, -9.00, -8.32}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const tile_features f = tile_features_compute(c.k, h100, bundled_convention(), wave_share::fair_share);
    CHECK(f.blocks == c.blocks);
    CHECK(f.waves == c.waves);
    CHECK(f.roof_gflops == Approx(c.roof).margin(0.06));
    for (size_t i = 0; i < 4; ++i) CHECK(f.ref[i] == Approx(c.inputs[i]).margin(0.006));  // spec prints 2 decimals
    // x0 is the first ratio against the roofline throughput for BMM and Linear: the same for compute-bound
    // kernels (the GEMMs here).
    const double peak = roofline_peak_flops(h100, c.k) / 1e9;
    const bool at_roof = flops_at_roofline(h100.vendor, *family_of(c.k));
    CHECK(at_roof == (c.k.kind == kernel_kind::gemm || c.k.kind == kernel_kind::bmm));
    CHECK(f.x[0] == Approx(at_roof ? f.ref[0] + std::log2(peak / f.roof_gflops) : f.ref[0]));
    if (c.k.kind == kernel_kind::gemm || c.k.kind == kernel_kind::bmm) CHECK(f.x[0] == Approx(f.ref[0]));
    for (size_t i = 1; i < 3; ++i) CHECK(f.x[i] == Approx(f.ref[i]));
    CHECK(f.x[3] == Approx(std::log2(c.waves)));
    CHECK(f.x[4] == Approx(c.blocks / (c.waves * 132)));
  }
}

TEST_CASE("vector kernels are seen with their family's training FLOPs — the real FLOPs only bound below", "[neusight]") {
  for (const auto& [kind, per] : std::vector<std::pair<kernel_kind, double>>{
           {kernel_kind::elementwise, 1}, {kernel_kind::softmax, 5}, {kernel_kind::layernorm, 6}}) {
    const kernel conv = vec(kind, 4096, 1024, per, 8, 1024);
    CHECK(bundled_convention().of(*family_of(conv)).flops == per);
    const tile_features f = tile_features_compute(conv, h100, bundled_convention(), wave_share::fair_share);
    for (const double ops : {0.5, 3.0, 8.0, 4096.0}) {
      INFO(family_name(*family_of(conv)) << " " << ops << " FLOPs/element");
      const tile_features g = tile_features_compute(vec(kind, 4096, 1024, ops, 8, 1024), h100, bundled_convention(), wave_share::fair_share);
      CHECK(g.x == f.x);
      CHECK(g.base_seconds == f.base_seconds);
      CHECK(g.compute_seconds == Approx(ops * 4096 * 1024 / (h100.peak_fp32_tflops * 1e12)));
      // seconds = max(base / util + overhead, FLOPs / peak)
      CHECK(tile_seconds(g, 0, 0, -50) ==
            Approx(std::max(g.base_seconds / tile_utilization(0, 0, g.waves), g.compute_seconds)));
    }
    // In the convention the bound never binds, even at utilisation ~1 and no overhead.
    CHECK(f.compute_seconds < f.base_seconds);
    CHECK(tile_seconds(f, -50, 50, -50) == f.base_seconds / tile_utilization(-50, 50, f.waves) +
                                               1 / (1 + std::exp(50.0)) * tile_overhead_max_s);
  }
}

// kernels.lua is the one source of the training convention: a --scripts copy whose layer norm counts other FLOPs per
// element changes what the tile model shows the MLP (tile_model.cpp once held 1 / 5 / 6 and 8–12 / 8 bytes itself).
TEST_CASE("the tile model sees the training convention of neusight.kernels (a Lua-only change moves it)", "[neusight]") {
  const ns_test::temp_dir t;
  ns_test::override_dir(t, "k", "kernels", "", {{"local LAYERNORM_FLOPS = 6", "local LAYERNORM_FLOPS = 12"},
                                                {"add  = { flops = 1, reads = 2 }", "add  = { flops = 1, reads = 4 }"}});
  session user(ns_test::session_opts(source_dir, {t.path / "k"}));
  session base(ns_test::session_opts(source_dir));
  CHECK(user.training_convention().of(family::layernorm).flops == 12);
  CHECK(user.training_convention().of(family::elementwise).bytes_max == 20);  // VECadd fp32: 4 reads + 1 write
  CHECK(base.training_convention().of(family::layernorm).flops == 6);
  CHECK(base.training_convention().of(family::elementwise).bytes_min == 8);
  CHECK(base.training_convention().of(family::elementwise).bytes_max == 12);
  CHECK(base.training_convention().of(family::softmax).flops == 5);
  const gpu_spec gpu = gpu_catalog(source_dir / "gpus").resolve("h100_sxm5_80gb");
  // a layer norm as forecasts price it: costed, tiled and predicted by each session
  auto seconds = [&](session& s) {
    std::vector<kernel_instance> ks(1);
    kernel& k = ks[0].k;
    k.kind = kernel_kind::layernorm, k.rows = 4096, k.hidden = 1024, k.dtype = "fp32";
    std::vector<kernel*> one{&k};
    s.kernel_costs(one);
    s.tiles_select(ks, gpu);
    return s.predictor_make("neusight", source_dir / "weights")->predict(ks, gpu)[0];
  };
  CHECK(seconds(user) != seconds(base));
  // the features themselves: the same kernel (same FLOPs and bytes) seen through each convention
  kernel ln = vec(kernel_kind::layernorm, 4096, 1024, 6, 8, 1024);
  const tile_features fu = tile_features_compute(ln, h100, user.training_convention(), wave_share::fair_share);
  const tile_features fb = tile_features_compute(ln, h100, base.training_convention(), wave_share::fair_share);
  CHECK(fu.x[0] == Approx(fb.x[0] + 1));  // log2 of twice the tile FLOPs
  // an element-wise kernel of 16 B per element: beyond the bundled range (8–12 B, shown as the 12 B kernel of as many
  // bytes), inside the changed one (8–20 B)
  kernel add = vec(kernel_kind::elementwise, 4096, 1024, 1, 16, 1024);
  CHECK(tile_features_compute(add, h100, user.training_convention(), wave_share::fair_share).x != tile_features_compute(add, h100, base.training_convention(), wave_share::fair_share).x);
  // a predictor no session handed the convention refuses vector kernels instead of guessing one
  CHECK_THROWS_WITH(tile_features_compute(ln, h100, train_convention{}, wave_share::fair_share),
                    "no training convention for the layernorm family (scripts/neusight/kernels.lua train_convention, "
                    "which the session hands to the predictor)");
}

TEST_CASE("a kernels.lua train_convention with a misspelt family or bad numbers is an error and not a default", "[neusight]") {
  const ns_test::temp_dir t;
  const std::string fam = "{ flops = 1, bytes_min = 8, bytes_max = 12 }";
  ns_test::override_dir(t, "typo", "kernels",
                        "function M.train_convention() return { elementwise = " + fam + ", softmax = " + fam +
                            ", layernrom = " + fam + " } end");
  ns_test::override_dir(t, "bad", "kernels",
                        "function M.train_convention() return { elementwise = { flops = 1, bytes_min = 12, bytes_max = 8 }, "
                        "softmax = " + fam + ", layernorm = " + fam + " } end");
  session typo(ns_test::session_opts(source_dir, {t.path / "typo"}));
  CHECK_THROWS_WITH(typo.training_convention(), Catch::Matchers::Contains("train_convention(): unknown family 'layernrom' "
                                                                           "(did you mean 'layernorm'?)"));
  session bad(ns_test::session_opts(source_dir, {t.path / "bad"}));
  CHECK_THROWS_WITH(bad.training_convention(),
                    Catch::Matchers::Contains("train_convention(): family 'elementwise' needs flops > 0 and 0 < bytes_min "
                                              "<= bytes_max (per element), got 1, 12, 8"));
}

TEST_CASE("utilisation stays in (0, 1) and follows alpha - beta / waves", "[neusight]") {
  CHECK(tile_utilization(0, 0, 1) == Approx(0.25));            // 0.5 · (1 − 0.5)
  CHECK(tile_utilization(0, 0, 100) == Approx(0.5 * (1 - 0.005)));
  CHECK(tile_utilization(50, -50, 1) > 0);                        // never ≤ 0, unlike the reference form
  CHECK(tile_utilization(-50, 50, 1e6) <= 1.0);
}

TEST_CASE("MLP forward matches a hand-computed network", "[mlp]") {
  mlp net = mlp::make({2, 2, 1}, 0);
  net.w[0] << 1, -1, 0.5f, 2;
  net.b[0] << 0, -1;
  net.w[1] << 3, -2;
  net.b[1] << 0.25f;
  Eigen::MatrixXf x(2, 2);
  x << 1, -2,   // sample 0 = (1, 2), sample 1 = (-2, 1)
      2, 1;
  const Eigen::MatrixXf y = net.forward(x);
  // sample 0: h = relu(1-2, 0.5+4-1) = (0, 3.5) → 3·0 − 2·3.5 + 0.25 = −6.75
  // sample 1: h = relu(-2-1, -1+2-1) = (0, 0) → 0.25
  CHECK(y(0, 0) == Approx(-6.75f));
  CHECK(y(0, 1) == Approx(0.25f));
}

TEST_CASE("MLP backward agrees with finite differences", "[mlp]") {
  mlp net = mlp::make({3, 5, 2}, 7);
  Eigen::MatrixXf x = Eigen::MatrixXf::Random(3, 4);
  Eigen::MatrixXf dout = Eigen::MatrixXf::Random(2, 4);  // loss = sum(dout ∘ y)
  mlp::cache c;
  net.forward(x, c);
  mlp::grad g;
  g.zero_like(net);
  net.backward(c, dout, g);
  auto loss = [&](const mlp& n) { return double((n.forward(x).array() * dout.array()).sum()); };
  for (int i = 0; i < 3; ++i) {
    mlp plus = net, minus = net;
    plus.w[0](i, 1) += 1e-2f, minus.w[0](i, 1) -= 1e-2f;
    CHECK(g.w[0](i, 1) == Approx((loss(plus) - loss(minus)) / 2e-2).margin(2e-2));
  }
  mlp plus = net, minus = net;
  plus.b[1](0) += 1e-2f, minus.b[1](0) -= 1e-2f;
  CHECK(g.b[1](0) == Approx((loss(plus) - loss(minus)) / 2e-2).margin(2e-2));
}

namespace {
std::vector<train_sample> fixture_samples() {
  const gpu_catalog cat(source_dir / "gpus");
  session s(ns_test::session_opts(source_dir));
  const bench_data d =
      bench_load({(source_dir / "tests/fixtures/bench/ln_small.csv").string()}, cat, s.costing(), bench_use::train, family::layernorm);
  std::vector<train_sample> out;
  for (const auto& r : d.rows) {
    kernel k = r.k;
    k.tile_elems = k.hidden;  // one row per block
    out.push_back({tile_features_compute(k, *r.gpu, s.training_convention(), wave_share::fair_share), r.latency_ms / 1e3});
  }
  return out;
}
}  // namespace

TEST_CASE("a short training run on fixture data learns (validation MAPE below 15%)", "[mlp][train]") {
  const auto samples = fixture_samples();
  REQUIRE(samples.size() == 400);
  train_options o;
  o.hidden = {32, 32};
  o.max_epochs = 120;
  o.batch = 32;
  o.lr = 3e-3f;
  o.seed = 3;
  o.vendor = "nvidia";
  const train_result r = tile_model_train(family::layernorm, samples, o, nullptr);
  CHECK(r.val_rows == 80);
  CHECK(r.val_mape < 15.0);
  CHECK(r.train_mape < 15.0);
  // Same seed and threads → identical weights.
  const train_result again = tile_model_train(family::layernorm, samples, o, nullptr);
  CHECK(again.model.net.w[0] == r.model.net.w[0]);
  CHECK(again.val_mape == r.val_mape);
}

// train_options.vendor decides the utilisation floor (util_floor_from_data: NVIDIA Linear reads it from the rows): an
// empty one had trained an NVIDIA Linear as another vendor's without a word; it is required
TEST_CASE("training without the rows' vendor is refused", "[mlp][train]") {
  train_options o;
  o.hidden = {4};
  o.max_epochs = 1;
  CHECK_THROWS_WITH(tile_model_train(family::linear, fixture_samples(), o, nullptr),
                    Catch::Contains("train_options.vendor is empty"));
}

TEST_CASE("weights round-trip — corrupt or truncated files are rejected", "[weights]") {
  ns_test::temp_dir t;
  tile_model m;
  m.fam = family::softmax;
  m.net = mlp::make({int(tile_feature_count), 8, tile_outputs}, 5);
  for (size_t i = 0; i < tile_feature_count; ++i)
    m.mean[i] = float(i), m.scale[i] = 1.0f + float(i), m.lo[i] = -10.0f - float(i), m.hi[i] = 5.0f + float(i);
  weights_provenance p;
  p.vendor = "nvidia";
  p.command = "test";
  const auto dir = t.path / "softmax";
  weights_save(dir, m, p);
  const tile_model back = weights_load(dir);
  CHECK(back.fam == family::softmax);
  CHECK(back.net.w[0] == m.net.w[0]);
  CHECK(back.net.b[1] == m.net.b[1]);
  CHECK(back.mean == m.mean);
  CHECK(back.scale == m.scale);
  CHECK(back.lo == m.lo);
  CHECK(back.hi == m.hi);

  const std::string bin = ns_test::slurp(dir / "weights.bin");
  const std::string where = (dir / "weights.bin").generic_string();
  SECTION("checksum") {
    std::string bad = bin;
    bad[10] = char(bad[10] ^ 1);
    std::ofstream(dir / "weights.bin", std::ios::binary) << bad;
    CHECK_THROWS_WITH(weights_load(dir), Catch::StartsWith(where + ": checksum mismatch"));
  }
  SECTION("truncated") {
    std::ofstream(dir / "weights.bin", std::ios::binary) << bin.substr(0, bin.size() - 4);
    CHECK_THROWS_WITH(weights_load(dir), where + ": " + std::to_string(bin.size() - 4) + " bytes, expected " +
                                             std::to_string(bin.size()) + " (truncated or from another model)");
  }
  SECTION("manifest from another engine") {
    std::string toml = ns_test::slurp(dir / "model.toml");
    toml = ns_test::replace_all(toml, "format_version = 1", "format_version = 9");
    std::ofstream(dir / "model.toml") << toml;
    CHECK_THROWS_WITH(weights_load(dir), (dir / "model.toml").generic_string() +
                                             ": format_version 9 is not supported (this engine reads 1)");
  }
}

// min_seconds: the least a kernel of a tensor-core or attention family takes, the smallest latency measured among the
// rows the family is trained on (train and validation split alike: no row of the data is below it). The fp32 families'
// rows are eager per-op timings (their least is the host's launch path): they get none.
TEST_CASE("min_seconds: the least measured latency of a transfer family's rows, written and read back", "[weights]") {
  const gpu_catalog cat(source_dir / "gpus");
  session s(ns_test::session_opts(source_dir));
  const bench_data d = bench_load({(source_dir / "tests/fixtures/aiconfigurator/gemm.csv").string()}, cat, s.costing(),
                                  bench_use::train, family::gemm_tc16);
  REQUIRE(d.rows.size() >= 2);
  std::vector<kernel_instance> kis;
  for (const auto& r : d.rows) kis.push_back({0, phase::forward, r.k});
  s.tiles_select(kis, *d.rows.front().gpu);
  std::vector<train_sample> samples;
  double least = 1;
  // each row five times, the copies slower (at least the tile_model_train's 10 rows), the first copies unchanged
  for (int copy = 0; copy < 5; ++copy)
    for (size_t i = 0; i < d.rows.size(); ++i) {
      const double seconds = d.rows[i].latency_ms / 1e3 * (1 + 0.25 * copy);
      samples.push_back({tile_features_compute(kis[i].k, *d.rows[i].gpu, s.training_convention(), wave_share::fair_share), seconds});
      least = std::min(least, seconds);
    }
  CHECK(tile_min_seconds(family::gemm_tc16, samples) == least);
  CHECK(tile_min_seconds(family::attention_decode, samples) == least);
  CHECK(tile_min_seconds(family::linear, samples) == 0);  // eager timings: no such floor
  CHECK(tile_min_seconds(family::layernorm, fixture_samples()) == 0);

  train_options o;
  o.hidden = {4};
  o.max_epochs = 2;
  o.vendor = "nvidia";
  const train_result r = tile_model_train(family::gemm_tc16, samples, o, nullptr);
  CHECK(r.model.min_seconds == least);  // over every row, the validation split's too

  ns_test::temp_dir t;
  weights_provenance p;
  p.vendor = "nvidia";
  weights_save(t.path / "tc", r.model, p);
  CHECK(weights_load(t.path / "tc").min_seconds == least);  // to the last bit
  const std::string toml = ns_test::slurp(t.path / "tc/model.toml");
  CHECK(toml.find("min_seconds = ") != std::string::npos);
  tile_model none = r.model;
  none.min_seconds = 0;  // weights from before it: no key, and none read
  weights_save(t.path / "old", none, p);
  CHECK(ns_test::slurp(t.path / "old/model.toml").find("min_seconds") == std::string::npos);
  CHECK(weights_load(t.path / "old").min_seconds == 0);
  for (const char* bad : {"0.0", "-1e-6", "1.5", "'2us'", "nan"}) {
    const size_t at = toml.find("min_seconds = ");
    const size_t end = toml.find('\n', at);
    std::ofstream(t.path / "tc/model.toml") << toml.substr(0, at) + "min_seconds = " + bad + toml.substr(end);
    INFO("min_seconds = " << bad);
    CHECK_THROWS_WITH(weights_load(t.path / "tc"),
                      Catch::StartsWith((t.path / "tc/model.toml").generic_string() + ":") &&
                          Catch::Contains(": 'min_seconds' must be a number of seconds in (0, 1)"));
  }
}

// Partial waves (weights/PARTIAL_WAVE_RULE.md): under sm_share the b < SMs blocks of the last (or only) wave share the
// bandwidth among themselves, each at most tile_sm_bandwidth_share × its fair share, and compute stays per SM. Full
// waves are priced as under fair_share, today's formula, which weights without the manifest key keep.
// util_floor: half the lowest utilisation (base / measured) a training row beyond the launch overhead's reach reached,
// for the transfer families and NVIDIA linear (weights/UTIL_FLOOR_RULE.md); the other fp32 families and AMD keep 1e-4.
TEST_CASE("util_floor is taken from the training rows for NVIDIA linear and not for AMD linear or NVIDIA bmm",
          "[neusight][train]") {
  std::vector<train_sample> samples;
  for (int i = 0; i < 40; ++i) {
    train_sample t;
    t.f.x = {float(i % 7), float(i % 5), float(i % 3), float(i % 11), 1.0f};
    t.f.waves = 1;
    t.f.base_seconds = 1e-4, t.seconds = 1e-3;  // utilisation 0.1 on every row the floor reads
    if (i % 4 == 0) t.f.base_seconds = 1e-9, t.seconds = 2e-5;  // launch-bound (< 2 x the overhead ceiling): not read
    samples.push_back(t);
  }
  train_options o;
  o.hidden = {4};
  o.max_epochs = 1;
  const auto floor_of = [&](family f, const char* vendor) {
    o.vendor = vendor;
    return tile_model_train(f, samples, o, nullptr).model.util_floor;
  };
  CHECK(util_floor_from_data("nvidia", family::linear));
  CHECK(floor_of(family::linear, "nvidia") == 0.5 * (1e-4 / 1e-3));
  CHECK(floor_of(family::linear, "amd") == 1e-4);
  CHECK(floor_of(family::bmm, "nvidia") == 1e-4);
  CHECK(floor_of(family::gemm_tc16, "nvidia") == 0.5 * (1e-4 / 1e-3));
}

TEST_CASE("partial-wave base: sm_share shares the bandwidth among the wave's blocks and keeps compute per SM", "[neusight]") {
  const double sms = 132, g = 0.5, c = tile_sm_bandwidth_share;
  const auto base = [&](double blocks, double peak, double ai_bw, wave_share s) {
    return tile_base_seconds(blocks, sms, g, peak, ai_bw, s);
  };
  const double peak = 1e6, bw = 1000;  // bandwidth-bound: AI·bw far below the peak
  // fair_share: W · tile · SMs / roof, whatever the last wave's fill
  CHECK(base(12, peak, bw, wave_share::fair_share) == g * sms / bw);
  CHECK(base(276, peak, bw, wave_share::fair_share) == 3 * g * sms / bw);
  // sm_share: full waves the same; 12 blocks draw bw / max(12, SMs / c) each
  CHECK(base(264, peak, bw, wave_share::sm_share) == Approx(base(264, peak, bw, wave_share::fair_share)));
  CHECK(base(132, peak, bw, wave_share::sm_share) == Approx(g * sms / bw));
  CHECK(base(12, peak, bw, wave_share::sm_share) == Approx(g * (sms / c) / bw));
  CHECK(base(100, peak, bw, wave_share::sm_share) == Approx(g * 100 / bw));
  CHECK(base(276, peak, bw, wave_share::sm_share) == Approx(2 * g * sms / bw + g * (sms / c) / bw));
  // compute-bound: a tile takes its time at the per-SM peak however few blocks run
  CHECK(base(12, 100, 1e5, wave_share::sm_share) == Approx(g * sms / 100));
  CHECK(base(12, 100, 1e5, wave_share::sm_share) == Approx(base(12, 100, 1e5, wave_share::fair_share)));
  // never above fair_share, never below the kernel's bytes over the whole bandwidth, monotone in the blocks
  double before = 0;
  for (double b = 1; b <= 700; ++b) {
    const double s = base(b, peak, bw, wave_share::sm_share);
    CHECK(s <= base(b, peak, bw, wave_share::fair_share) * (1 + 1e-12));
    CHECK(s >= b * g / bw * (1 - 1e-12));
    CHECK(s >= before);
    before = s;
  }
  CHECK(wave_share_trained(family::gemm_tc16) == wave_share::sm_persist);
  for (family f : {family::gemm_fp8, family::bmm, family::linear, family::elementwise, family::softmax, family::layernorm,
                   family::attention_prefill, family::attention_decode})
    CHECK(wave_share_trained(f) == wave_share::fair_share);
}

TEST_CASE("a partial-wave bandwidth-bound GEMM forecast goes below the full-wave fair share under sm_share", "[neusight]") {
  const gpu_spec h100sxm = gpu_spec_load(source_dir / "gpus/h100_sxm5_80gb.toml", "gpus/h100_sxm5_80gb.toml");
  // Qwen3-30B-A3B's expert gate at 64 rows: 64 × 2048 → 768 in bf16 on 64 × 64 tiles, 12 blocks on 132 SMs
  kernel k = gemm(kernel_kind::gemm, 1, 64, 2048, 768, 64, 64);
  k.dtype = "bf16";
  k.bytes = 2.0 * (64 * 2048 + 2048 * 768 + 64 * 768);
  const tile_features fair = tile_features_compute(k, h100sxm, train_convention{}, wave_share::fair_share);
  const tile_features part = tile_features_compute(k, h100sxm, train_convention{}, wave_share::sm_share);
  REQUIRE(fair.blocks == 12);
  CHECK(part.x == fair.x);  // the MLP's inputs do not change: only the base
  CHECK(part.base_seconds == Approx(fair.base_seconds * 33 / 132));  // max(12, 132 / 4) of 132
  // at utilisation → 1 and no launch term the forecast is the base: below the fair-share one's least
  tile_model m;
  m.fam = family::gemm_tc16;
  m.vendor = "nvidia";
  m.net = mlp::make({int(tile_feature_count), 4, tile_outputs}, 1);
  for (auto& w : m.net.w) w.setZero();
  for (auto& b : m.net.b) b.setZero();
  m.net.b.back() << -40, 40, -40;  // σ(o0) → 0, σ(o1) → 1, σ(o2) → 0
  for (size_t i = 0; i < tile_feature_count; ++i) m.scale[i] = 1, m.lo[i] = -100, m.hi[i] = 100;
  m.partial_wave = wave_share::sm_share;
  kernel_instance ki{0, phase::forward, k};
  const double sm = neusight_predictor_make("nvidia", m, {})->predict({ki}, h100sxm)[0];
  m.partial_wave = wave_share::fair_share;
  const double fs = neusight_predictor_make("nvidia", m, {})->predict({ki}, h100sxm)[0];
  CHECK(fs == Approx(fair.base_seconds).epsilon(1e-6));
  CHECK(sm == Approx(part.base_seconds).epsilon(1e-6));
  CHECK(sm < 0.3 * fs);
  CHECK(sm >= k.bytes / (h100sxm.mem_bw_gbps * 1e9));  // never faster than its bytes over the whole bandwidth
}

TEST_CASE("partial_wave in model.toml: written when not fair_share, read back, a misspelt value refused", "[weights]") {
  ns_test::temp_dir t;
  tile_model m;
  m.fam = family::gemm_tc16;
  m.net = mlp::make({int(tile_feature_count), 4, tile_outputs}, 2);
  for (size_t i = 0; i < tile_feature_count; ++i) m.scale[i] = 1, m.hi[i] = 1;
  weights_provenance p;
  p.vendor = "nvidia";
  weights_save(t.path / "old", m, p);  // fair_share: no key, as weights from before it
  CHECK(ns_test::slurp(t.path / "old/model.toml").find("partial_wave") == std::string::npos);
  CHECK(weights_load(t.path / "old").partial_wave == wave_share::fair_share);
  m.partial_wave = wave_share::sm_share;
  weights_save(t.path / "tc", m, p);
  const std::string toml = ns_test::slurp(t.path / "tc/model.toml");
  CHECK(toml.find("partial_wave = 'sm_share'") != std::string::npos);
  CHECK(weights_load(t.path / "tc").partial_wave == wave_share::sm_share);
  const std::string where = (t.path / "tc/model.toml").generic_string();
  for (const char* bad : {"'sm_shares'", "'SM_SHARE'", "'fair'", "4", "''"}) {
    std::ofstream(t.path / "tc/model.toml") << ns_test::replace_all(toml, "partial_wave = 'sm_share'",
                                                                    std::string("partial_wave = ") + bad);
    INFO("partial_wave = " << bad);
    CHECK_THROWS_WITH(weights_load(t.path / "tc"),
                      Catch::StartsWith(where + ":") &&
                          Catch::Contains("'partial_wave' must be \"fair_share\", \"sm_share\" or \"sm_persist\""));
  }
  m.partial_wave = wave_share::sm_persist;
  weights_save(t.path / "persist", m, p);
  CHECK(ns_test::slurp(t.path / "persist/model.toml").find("partial_wave = 'sm_persist'") != std::string::npos);
  CHECK(weights_load(t.path / "persist").partial_wave == wave_share::sm_persist);
  std::ofstream(t.path / "tc/model.toml") << ns_test::replace_all(toml, "partial_wave = 'sm_share'",
                                                                  "partial_wave = 'sm_shares'");
  CHECK_THROWS_WITH(weights_load(t.path / "tc"), Catch::Contains("did you mean 'sm_share'"));
  std::ofstream(t.path / "tc/model.toml") << ns_test::replace_all(toml, "partial_wave = 'sm_share'",
                                                                  "partial_wav = 'sm_share'");
  CHECK_THROWS_WITH(weights_load(t.path / "tc"), Catch::Contains("unknown key 'partial_wav'"));
}

// One-wave view keyed on the real arithmetic intensity (weights/WEIGHT_STREAM_RULE.md, second rule, candidate F): under
// sm_persist a GEMM whose real AI (no tile padding) is ≥ 2× on the bandwidth side of the ridge is shown one wave of tiles
// W times as long; its base is sm_share's and its latency form keeps W; compute-side kernels keep their features.
TEST_CASE("one-wave view: sm_persist shows a streaming GEMM one wave of W-times-longer tiles at its real AI", "[neusight]") {
  CHECK(tile_shown_waves(6, 1.0, wave_share::sm_persist) == 1);
  CHECK(tile_shown_waves(6, 3.5, wave_share::sm_persist) == 1);
  CHECK(tile_shown_waves(6, 0.99, wave_share::sm_persist) == 6);  // not purely bandwidth-bound
  CHECK(tile_shown_waves(6, -2, wave_share::sm_persist) == 6);
  CHECK(tile_shown_waves(6, 3.5, wave_share::sm_share) == 6);
  CHECK(tile_shown_waves(6, 3.5, wave_share::fair_share) == 6);
  const gpu_spec h100sxm = gpu_spec_load(source_dir / "gpus/h100_sxm5_80gb.toml", "gpus/h100_sxm5_80gb.toml");
  // Mixtral-8x7B's grouped gate-up at decode: 7 experts × 3 rows × 4096 → 28672 on 64 × 256 tiles, 784 blocks, 6 waves
  kernel k = gemm(kernel_kind::bmm, 7, 3, 4096, 28672, 64, 256);
  k.dtype = "bf16";
  k.bytes = 7 * 2.0 * (3 * 4096 + 4096 * 28672 + 3 * 28672);
  const tile_features share = tile_features_compute(k, h100sxm, train_convention{}, wave_share::sm_share);
  const tile_features pers = tile_features_compute(k, h100sxm, train_convention{}, wave_share::sm_persist);
  REQUIRE(share.waves == 6);
  CHECK(share.x[2] == Approx(std::log2(6.0)));
  CHECK(pers.x[2] == 0);
  CHECK(pers.x[0] == Approx(share.x[0] + std::log2(6.0)));
  CHECK(pers.waves == 6);
  CHECK(pers.base_seconds == share.base_seconds);
  for (size_t i : {1, 3, 4}) CHECK(pers.x[i] == share.x[i]);
  // the padded AI would not catch it: a 1-row GEMM on 128-row tiles on a GPU whose ridge is 1.9× the padded AI
  gpu_spec g = h100sxm;
  g.mem_bw_gbps = roofline_peak_flops(h100sxm, k) / 1e9 / (128 * 1.07 * 1.9);  // GFLOP/s over a ridge 1.9× the padded AI
  kernel v = gemm(kernel_kind::gemm, 1, 1, 4096, 65536, 128, 256);  // 256 blocks, 2 waves
  v.dtype = "bf16";
  v.bytes = 2.0 * (4096 + 4096.0 * 65536 + 65536);
  const tile_features vs = tile_features_compute(v, g, train_convention{}, wave_share::sm_share);
  const tile_features vp = tile_features_compute(v, g, train_convention{}, wave_share::sm_persist);
  REQUIRE(vs.waves >= 2);
  REQUIRE(vs.x[4] < 1);  // the fifth feature (padded AI) inside the clamp
  CHECK(vp.x[2] == 0);
  CHECK(vp.x[0] == Approx(vs.x[0] + std::log2(vs.waves)));
  // a compute-bound GEMM keeps its waves: 4096 × 4096 → 28672 on 128 × 256 tiles
  kernel c = gemm(kernel_kind::gemm, 1, 4096, 4096, 28672, 128, 256);
  c.dtype = "bf16";
  c.bytes = 2.0 * (4096.0 * 4096 + 4096.0 * 28672 + 4096.0 * 28672);
  const tile_features cs = tile_features_compute(c, h100sxm, train_convention{}, wave_share::sm_share);
  const tile_features cp = tile_features_compute(c, h100sxm, train_convention{}, wave_share::sm_persist);
  REQUIRE(cs.waves > 2);
  CHECK(cp.x == cs.x);
}
