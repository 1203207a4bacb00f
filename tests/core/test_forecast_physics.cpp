// tests/core/test_forecast_physics.cpp — physical properties of the shipped NeuSight forecasts (weights/nvidia):
// element-wise kernels with several FLOPs per element stay near their roofline and never get faster with more
// FLOPs; a GPU's FLOP peaks do not move bandwidth-bound forecasts and its bandwidth does not move compute-bound ones
// (the parts that do not hold with the shipped weights are tagged [!mayfail], with the reason, or bounded).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "core/roofline.h"
#include "core/tile_model.h"
#include "core/weights.h"
#include "lua/session.h"
#include "session_util.h"
#include "test_util.h"

using namespace ns;

namespace {

// the kernels of a list of (what, kernel) pairs
template <class List>
std::vector<kernel> kernels_of(const List& ks) {
  std::vector<kernel> v;
  for (const auto& [what, k] : ks) v.push_back(k);
  return v;
}

struct forecaster {
  session s;
  std::unique_ptr<predictor> pred;
  forecaster() : s(ns_test::session_opts(ns_test::source_dir)),
                 pred(predictor_make("neusight", ns_test::source_dir / "weights")) {
    pred->train_convention_set(s.training_convention());
  }

  // Seconds of each kernel with the library tiles of scripts/tiling/ and the shipped weights.
  std::vector<double> seconds(std::vector<kernel> ks, const gpu_spec& gpu) {
    std::vector<kernel_instance> kis;
    for (auto& k : ks) kis.push_back({0, phase::forward, std::move(k)});
    s.tiles_select(kis, gpu);
    return pred->predict(kis, gpu);
  }
  double seconds(const kernel& k, const gpu_spec& gpu) { return seconds(std::vector<kernel>{k}, gpu).front(); }

  // The forward kernels of one op rule applied to a node with a single 1-D input of n elements.
  std::vector<kernel> op_kernels(const std::string& op, int64_t n, const gpu_spec& gpu) {
    graph g;
    node nd;
    nd.op = op, nd.name = op, nd.inputs = {{n}}, nd.output = {n}, nd.dtype = "fp32";
    g.nodes.push_back(nd);
    std::vector<kernel> out;
    for (auto& ki : s.expand(g, gpu, false).kernels) out.push_back(ki.k);
    return out;
  }
};

// The forward kernel of ops/sdpa.lua (prefill/training) or ops/decode_attention.lua on bf16 Q[b, h, sq, d],
// K/V[b, h, skv, d].
kernel attention_kernel(forecaster& f, const std::string& op, int64_t b, int64_t h, int64_t sq, int64_t skv,
                        int64_t d, const gpu_spec& gpu) {
  graph g;
  node nd;
  nd.op = op, nd.name = op, nd.dtype = "bf16";
  nd.inputs = {{b, h, sq, d}, {b, h, skv, d}, {b, h, skv, d}}, nd.output = {b, h, sq, d};
  g.nodes.push_back(nd);
  return f.s.expand(g, gpu, false).kernels.at(0).k;
}

gpu_spec gpu_named(const std::string& name) { return gpu_catalog(ns_test::source_dir / "gpus").resolve(name); }

// A user element-wise op (SiLU-like): reads one fp32 tensor, writes one, `flops_per` FLOPs per element.
kernel user_vec(int64_t rows, int64_t hidden, double flops_per, double bytes_per = 8) {
  kernel k;
  k.kind = kernel_kind::elementwise, k.name = "VECsilu", k.op = "silu", k.dtype = "fp32";
  k.rows = rows, k.hidden = hidden;
  k.flops = flops_per * double(rows) * double(hidden);
  k.bytes = bytes_per * double(rows) * double(hidden);
  return k;
}

// 1e5, 3e5, 1e6, …, 1e9 elements.
std::vector<int64_t> sizes_1e5_1e9() {
  std::vector<int64_t> out;
  for (int e = 5; e <= 9; ++e) {
    out.push_back(int64_t(std::llround(std::pow(10.0, e))));
    if (e < 9) out.push_back(int64_t(std::llround(3 * std::pow(10.0, e))));
  }
  return out;
}

}  // namespace

// The measured element-wise kernels have a per-launch floor: a 1-FLOP add of 1e5 fp32 elements takes 26.7 µs on
// the A100-PCIE-40GB (dataset/train/collect/add: median of 92 rows), 35× its 0.77 µs roofline, flat up to 1e6
// elements. The model's per-launch cost is at most tile_overhead_max_s (20 µs), so "near the roofline" means
// within [1×, 3×] of max(roofline, 20 µs): exactly [1×, 3×] of the roofline once that exceeds 20 µs
// (≥ 3·10⁶ elements on the A100, 7·10⁶ on the H100), and under 60 µs below it.
TEST_CASE("multi-FLOP element-wise kernels (Adam lerp/addcmul/addcdiv, an 8-FLOP user op) stay within 1-3x of "
          "the roofline and grow with size",
          "[neusight][physics]") {
  forecaster f;
  for (const std::string gpu_name : {"A100-PCIE-40GB", "h100"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    std::map<std::string, std::pair<double, double>> last;  // name → (seconds, roofline) at the previous size
    for (const int64_t n : sizes_1e5_1e9()) {
      std::vector<kernel> ks;
      for (const auto& k : f.op_kernels("adam", n, gpu))
        if (k.op == "lerp" || k.op == "addcmul" || k.op == "addcdiv") ks.push_back(k);
      REQUIRE(ks.size() == 3);
      ks.push_back(user_vec(1, n, 8));
      // The same kernels with 1 FLOP per element: the training convention, forecast as before the rule.
      std::vector<kernel> ones = ks;
      for (auto& k : ones) k.flops = double(n);
      std::vector<kernel> all = ks;
      all.insert(all.end(), ones.begin(), ones.end());
      const auto t = f.seconds(all, gpu);
      for (size_t i = 0; i < ks.size(); ++i) {
        const double roof = roofline_seconds(ks[i], gpu);
        INFO(gpu.name << " " << ks[i].name << " n=" << n << ": " << t[i] * 1e3 << " ms, roofline " << roof * 1e3
                      << " ms, ratio " << t[i] / roof);
        CHECK(t[i] >= roof);
        CHECK(t[i] <= 3 * std::max(roof, tile_overhead_max_s));
        // Memory-bound: the forecast is its 1-FLOP representative's (same bytes), bit for bit.
        CHECK(t[i] == t[ks.size() + i]);
        if (last.count(ks[i].name)) {
          const auto [prev, prev_roof] = last[ks[i].name];
          INFO("previous size: " << prev * 1e3 << " ms");
          if (prev_roof >= tile_overhead_max_s) CHECK(t[i] >= prev);
          // In the launch-floor regime the shipped 1-FLOP forecasts (kept bit-identical) wobble by up to 15 %
          // on the H100 (30.9 → 27.7 → 26.3 µs from 1e5 to 1e6 elements); the measured A100 floor is flat.
          else CHECK(t[i] >= 0.8 * prev);
        }
        last[ks[i].name] = {t[i], roof};
      }
    }
  }
}

TEST_CASE("a vector kernel with more FLOPs per element and the same bytes is never faster", "[neusight][physics]") {
  forecaster f;
  for (const std::string gpu_name : {"A100-PCIE-40GB", "h100", "t4"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 100000}, {1, 10000000}, {1, 1000000000}, {64, 1024}, {4096, 1024}, {16384, 5120}, {65536, 2048}}) {
      for (const kernel_kind kind : {kernel_kind::elementwise, kernel_kind::softmax, kernel_kind::layernorm}) {
        // Softmax and layer norm run one row per block: a 10⁵-element row is far outside their data.
        if (kind != kernel_kind::elementwise && hidden > 16384) continue;
        std::vector<kernel> ks;
        for (double per = 0.5; per <= 4096; per *= 2) {
          kernel k = user_vec(rows, hidden, per);
          k.kind = kind;
          ks.push_back(k);
        }
        const auto t = f.seconds(ks, gpu);
        for (size_t i = 1; i < ks.size(); ++i) {
          INFO(gpu.name << " " << kernel_kind_name(kind) << " (" << rows << ", " << hidden << "): " << ks[i].flops / double(rows * hidden)
                        << " FLOPs/element " << t[i] * 1e3 << " ms vs " << t[i - 1] * 1e3 << " ms");
          CHECK(t[i] >= t[i - 1]);
          // and never absurdly slower than the roofline
          CHECK(t[i] <= 3 * std::max(roofline_seconds(ks[i], gpu), t[0]));
        }
      }
    }
  }
}

TEST_CASE("a vector kernel with more rows is not priced far above a larger one (GPUs outside the data)",
          "[neusight][physics]") {
  // The utilisation MLP is not monotone in size beyond its training GPUs: on an H100 a 768-wide mul of 49-66 rows
  // (blocks just under one wave) came back at up to 13x its neighbours before the envelope of neusight_predictor.cpp.
  forecaster f;
  for (const std::string gpu_name : {"h100", "h200", "b200", "l4", "A100-PCIE-40GB"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const double bytes_per : {12.0, 6.0}) {  // an fp32 and a bf16 binary op
      for (const kernel_kind kind : {kernel_kind::elementwise, kernel_kind::softmax, kernel_kind::layernorm}) {
        std::vector<kernel> ks;
        for (int64_t rows = 1; rows <= 400; ++rows) {
          kernel k = user_vec(rows, 768, 1, bytes_per);
          k.kind = kind;
          ks.push_back(k);
        }
        const auto t = f.seconds(ks, gpu);
        double later_min = t.back();  // the fastest forecast of any larger kernel
        for (size_t i = ks.size() - 1; i-- > 0;) {
          INFO(gpu.name << " " << kernel_kind_name(kind) << " " << bytes_per << " B/element, rows " << ks[i].rows
                        << ": " << t[i] * 1e6 << " us, a larger kernel " << later_min * 1e6 << " us");
          CHECK(t[i] <= later_min);  // one forecast: exact (the envelope's suffix minimum over the graph's rows)
          later_min = std::min(later_min, t[i]);
        }
        // each kernel forecast alone: only the envelope's larger copies (1.125-16x the rows) bound it; 1.36x remains
        // (H100 layer norm of one row; L4 layer norm 1.32x)
        std::vector<double> alone;
        for (size_t i = 0; i < ks.size(); i += 7) alone.push_back(f.seconds(ks[i], gpu));
        double least = alone.back();
        for (size_t i = alone.size() - 1; i-- > 0;) {
          INFO(gpu.name << " " << kernel_kind_name(kind) << " alone, rows " << ks[7 * i].rows << ": " << alone[i] * 1e6);
          CHECK(alone[i] <= 1.4 * least);
          least = std::min(least, alone[i]);
        }
      }
    }
  }
}

// A tensor over 2^31 bytes runs as several 32-bit-indexable launches (scripts/tiling/vec.lua): the tile rule's
// measured convention doubles the tile per split, and off the data the MLP priced the larger tile non-monotonically
// (H100: a bf16 add of 4000 x 2^20 elements 10.34 ms, of 4200 x 2^20 9.44 ms; a fused fp32 AdamW step of 2^31
// parameters 24.45 ms, of 2.2e9 36.09 ms, of 4.3e9 43.00 ms). Now such a kernel is its largest launch scaled by its
// elements (neusight_predictor.cpp, split_by_piece): monotone across the thresholds and linear beyond the first.
TEST_CASE("element-wise forecasts grow monotonically and linearly across the 32-bit split thresholds",
          "[neusight][physics]") {
  forecaster f;
  for (const std::string gpu_name : {"h100", "b200", "A100-SXM4-80GB"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const std::string dtype : {"fp32", "bf16"}) {
      const double e = dtype == "fp32" ? 4 : 2;
      // a binary add over [rows, 1024] (3 tensors) and a fused AdamW step over one flat tensor (28 B a parameter
      // in fp32, 16 in bf16: 2 w + g + 2 moments, the moments in the parameter dtype)
      for (const double bytes_per : {3 * e, 2 * e + e + 2 * e + (dtype == "fp32" ? 12.0 : 6.0)}) {
        const bool flat = bytes_per != 3 * e;
        std::vector<int64_t> sizes;  // elements: 2^27 … 2^33 in steps of 2^(1/4), and each threshold ± 1
        for (int q = 27 * 4; q <= 33 * 4; ++q) sizes.push_back(int64_t(std::llround(std::pow(2.0, q / 4.0))) / 1024 * 1024);
        for (int s = 28; s <= 33; ++s)
          for (int64_t d : {-1024, 0, 1024}) sizes.push_back((int64_t(1) << s) / int64_t(e) * 4 + d);
        std::sort(sizes.begin(), sizes.end());
        sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
        double prev = 0, prev_rate = 0;
        int64_t prev_n = 0;
        for (const int64_t n : sizes) {
          kernel k;
          k.kind = kernel_kind::elementwise, k.name = flat ? "VECadamw" : "VECadd", k.op = flat ? "adamw" : "add";
          k.dtype = dtype, k.rows = flat ? 1 : n / 1024, k.hidden = flat ? n : 1024;
          k.flops = double(n), k.bytes = bytes_per * double(n);
          const double t = f.seconds(k, gpu), rate = t / k.bytes;  // each kernel its own forecast
          INFO(gpu.name << " " << dtype << " " << k.name << " " << n << " elements (" << k.bytes / 1e9 << " GB): " << t * 1e3
                        << " ms; " << prev_n << " elements: " << prev * 1e3 << " ms");
          // 1e-5: below the first split a kernel 1024 elements larger may come back a few parts in 10^6 faster
          // (the MLP's float32 features; the split moved forecasts by 10-50 %)
          CHECK(t >= prev * (1 - 1e-5));
          // beyond the first split (2^31 bytes of the element type) the time per byte is the largest launch's
          if (double(prev_n) * e > 2147483648.0) CHECK(std::abs(rate / prev_rate - 1) < 1e-9);
          prev = t, prev_rate = rate, prev_n = n;
        }
      }
    }
  }
}

// Where the MLP was fit to measured split kernels (fp32, 8-12 B per element, its training GPUs: model.toml's
// training.gpus) it keeps its forecast; the same kernel on a GPU it was not trained on, or in bf16, is its largest
// launch scaled by its elements.
TEST_CASE("a split element-wise kernel keeps the MLP's forecast only where the data measured split kernels",
          "[neusight][physics]") {
  forecaster f;
  const gpu_spec a100 = gpu_named("A100-PCIE-40GB");
  const tile_model m = weights_load(ns_test::source_dir / "weights/nvidia/elementwise");
  const auto trained = neusight_predictor_make("nvidia", m, {"A100-PCIE-40GB"});
  const auto untrained = neusight_predictor_make("nvidia", m, {});
  trained->train_convention_set(f.s.training_convention());
  untrained->train_convention_set(f.s.training_convention());
  for (const std::string dtype : {"fp32", "bf16"}) {
    const double e = dtype == "fp32" ? 4 : 2;
    kernel k;  // an add of [2047 * 1024, 1024]: split (over 2^31 bytes in both dtypes)
    k.kind = kernel_kind::elementwise, k.name = "VECadd", k.op = "add", k.dtype = dtype;
    k.rows = 2047 * 1024, k.hidden = 1024, k.flops = double(k.rows) * 1024, k.bytes = 3 * e * k.flops;
    std::vector<kernel_instance> one{{0, phase::forward, k}};
    f.s.tiles_select(one, a100);
    const kernel& tiled = one[0].k;
    REQUIRE(tiled.tile_piece == int64_t(2147483648.0 / e));
    REQUIRE(tiled.tile_piece_elems == 512);
    // the launch: the rows of 1024 that fit in it, the block tile
    kernel piece = tiled;
    piece.rows = tiled.tile_piece / 1024, piece.tile_elems = 512, piece.tile_piece = piece.tile_piece_elems = 0;
    piece.flops = double(piece.rows) * 1024, piece.bytes = 3 * e * piece.flops;
    kernel unsplit_rule = tiled;  // the MLP's own price of the split tile
    unsplit_rule.tile_piece = unsplit_rule.tile_piece_elems = 0;
    const auto price = [&](const predictor& p, const kernel& x) {
      return p.predict({{0, phase::forward, x}}, a100).at(0);
    };
    const double by_piece = price(*untrained, piece) * double(tiled.rows) / double(piece.rows);
    INFO(dtype << ": MLP " << price(*trained, unsplit_rule) * 1e3 << " ms, by the launch " << by_piece * 1e3 << " ms");
    CHECK(price(*untrained, tiled) == by_piece);
    CHECK(price(*trained, tiled) == (dtype == "fp32" ? price(*trained, unsplit_rule) : by_piece));
  }
}

namespace {
// The kernel of ops/decode_attention.lua: one new bf16 token per sequence over a cache of skv tokens, `heads` query
// heads sharing kv_heads key/value heads.
kernel decode_kernel(forecaster& f, int64_t b, int64_t heads, int64_t kv_heads, int64_t skv, int64_t d,
                     const gpu_spec& gpu) {
  graph g;
  node nd;
  nd.op = "decode_attention", nd.name = "decode_attention", nd.dtype = "bf16";
  nd.inputs = {{b, heads, 1, d}, {b, kv_heads, skv, d}, {b, kv_heads, skv, d}}, nd.output = {b, heads, 1, d};
  g.nodes.push_back(nd);
  return f.s.expand(g, gpu, false).kernels.at(0).k;
}
}  // namespace

// A decode kernel that reads more cache, for more sequences, cannot take less time. The attention_decode MLP priced
// Llama-3.2-1B's decode on the B200 (batch 8, 32 / 8 heads, head dim 64) 16.56 us at 1024 cached tokens and 13.42 us
// at 2048 (measured 10.81 / 13.21) before the envelope of neusight_predictor.cpp took in the KV length and batch.
TEST_CASE("a decode attention kernel is never priced above one with a longer cache and more sequences",
          "[neusight][physics]") {
  forecaster f;
  const std::vector<int64_t> contexts = {128, 192, 256, 384, 512, 768, 1000, 1023, 1024, 1025, 1536, 2048, 3072, 4096, 6144, 8192};
  const std::vector<int64_t> batches = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  for (const std::string gpu_name : {"h100", "h200", "b200", "l40s", "A100-SXM4-80GB"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const int64_t d : {64, 128}) {
      std::vector<kernel> ks;
      for (const int64_t b : batches)
        for (const int64_t c : contexts) ks.push_back(decode_kernel(f, b, 32, 8, c, d, gpu));
      const auto t = f.seconds(ks, gpu);  // one forecast: exact (the envelope's order over KV length and batch)
      size_t violations = 0;
      for (size_t i = 0; i < ks.size(); ++i)
        for (size_t j = 0; j < ks.size(); ++j)
          if (ks[j].k >= ks[i].k && ks[j].b >= ks[i].b && t[i] > t[j]) {
            if (++violations > 5) continue;  // the first few are enough to read
            INFO(gpu.name << " head dim " << d << ": batch " << ks[i].b << " x " << ks[i].k << " tokens " << t[i] * 1e6
                          << " us, batch " << ks[j].b << " x " << ks[j].k << " tokens " << t[j] * 1e6 << " us");
            CHECK(t[i] <= t[j]);
          }
      INFO(gpu.name << " head dim " << d);
      CHECK(violations == 0);
      // each kernel forecast alone, along the KV length: the KV-length copies (1.125-16x the cache, the same
      // launch) and the split copies (more slices of the same length within one wave, weights/DECODE_SPLIT_RULE.md)
      // bound it. Before the split copies up to 1.89x remained where the split changes with the length (A100-SXM4
      // head dim 128, batch 1: 2048 tokens in 64 blocks 26.2 us, 3072 in 96 blocks 13.9 us; 1.93x before the
      // envelope). Then 1.48x below 512 tokens, where a one-slice kernel met a two-slice one of shorter slices,
      // which neither copy reaches (L40S head dim 128, batch 1: 384 tokens in 8 blocks 30.2 us, 512 in 16 blocks
      // 20.4 us); with slices of at most max_kv_slice (weights/DECODE_SPLIT_RULE.md, C1) 1.30x at most, the same
      // meeting at half the slice (L40S head dim 128, batch 1: 256 tokens in 8 blocks 20.4 us, 384 in 16 blocks of
      // 192 tokens 15.7 us); elsewhere at most 1.08x (L40S head dim 64, 1023 -> 1025 tokens).
      double worst = 0;
      std::string where;
      for (const int64_t b : {1, 8, 64}) {
        std::vector<double> alone;
        for (const int64_t c : contexts) alone.push_back(f.seconds(decode_kernel(f, b, 32, 8, c, d, gpu), gpu));
        for (size_t i = 0; i < alone.size(); ++i)
          for (size_t j = i + 1; j < alone.size(); ++j)
            if (alone[i] / alone[j] > worst) {
              worst = alone[i] / alone[j];
              where = "batch " + std::to_string(b) + ": " + std::to_string(contexts[i]) + " tokens " +
                      std::to_string(alone[i] * 1e6) + " us, " + std::to_string(contexts[j]) + " tokens " +
                      std::to_string(alone[j] * 1e6) + " us";
            }
      }
      INFO(gpu.name << " head dim " << d << ", alone: a shorter cache at most " << worst << "x a longer one (" << where
                    << ")");
      CHECK(worst <= 1.35);
    }
  }
}

// No saw-tooth along the context (issue 13; weights/DECODE_SPLIT_RULE.md): one decode step's attention, each context
// its own forecast (as `neusight predict --mode decode --context C` prices it), never gets cheaper with a longer cache
// by more than 1 %. Before the fix, Llama-3-8B's decode attention (32 / 8 heads, head dim 128), batch 1: on the H100
// 16.5 us at 2816 tokens, 13.8 at 3072 (the MLP along the fill of one wave while the split grows), on the A100-SXM4
// 21.0 us at 2304, 14.7 at 2560; on the H100 14.3 us at 4096, 13.1 at 4352 (the split rounded up, 8 x 17 = 136 blocks
// on 132 SMs: a second wave of 4 blocks no split-KV kernel launches; on the L40S the same boundary was +69 % for
// +12.5 % of the bytes). The 1 %: beyond the context where the split fills the SMs the launch is fixed and only the
// KV-length copies (1.125-16x, the same launch) bound the MLP along the slice; between them it dips by up to 0.73 %
// (B200, head dim 64, batch 1, 5632 -> 5888 tokens), as the measurements do (B200, batch 1, 256 -> 512 tokens
// 9.26 -> 9.05 us, aiconfigurator b200_sxm). Steps up are not bounded here: the measured kernels have them (B200,
// batch 32, 512 -> 1024 tokens 12.96 -> 29.40 us, 2.27x for 2x the bytes), and the forecast follows (768 -> 1024
// tokens 16.9 -> 29.7 us).
TEST_CASE("decode attention alone never gets cheaper with a longer cache (no saw-tooth along the context)",
          "[neusight][physics]") {
  forecaster f;
  for (const std::string gpu_name : {"h100", "h200", "A100-SXM4-80GB", "l40s", "b200"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const int64_t d : {64, 128})
      for (const int64_t b : {1, 8, 32, 64}) {
        std::optional<std::pair<int64_t, double>> last;  // context, seconds
        size_t drops = 0;
        for (int64_t c = 512; c <= 32768; c += 256) {
          const double t = f.seconds(decode_kernel(f, b, 32, 8, c, d, gpu), gpu);
          if (last) {
            const auto [c0, t0] = *last;
            if (t < 0.99 * t0 && ++drops <= 3) {
              INFO(gpu.name << " head dim " << d << " batch " << b << ": " << c0 << " tokens " << t0 * 1e6 << " us, "
                            << c << " tokens " << t * 1e6 << " us");
              CHECK(t >= 0.99 * t0);
            }
          }
          last = {c, t};
        }
        INFO(gpu.name << " head dim " << d << " batch " << b);
        CHECK(drops == 0);
      }
  }
}

// Along the batch (issue 13; weights/DECODE_SPLIT_RULE.md, B2): a split-KV decode kernel (split >= 2, one wave of
// the SMs) with one more sequence at the same split is the same launch with more blocks of the same slice in the same
// wave, so each batch's forecast alone (as `neusight predict --mode decode --batch B` prices it) does not get cheaper.
// Before the batch copies, Llama-3-8B's decode attention (32 / 8 heads, head dim 128) on the A100-SXM4 at 1024 tokens
// went 25.4 -> 18.1 us from batch 5 to 6 (split 2, 80 -> 96 blocks; x0.71), on the H100 at 2048 tokens 29.2 -> 23.3
// us from 6 to 7 (split 2, 96 -> 112 blocks). The 5 %: the larger batch's own KV-length and split copies, which the
// smaller one's batch copies do not reach, leave dips of up to 4 % (B200, 1024 tokens, batch 2 -> 3, split 4). Head
// dim 128 only (Llama-3, Qwen3, Mistral): at head dim 64 the B200 keeps two such dips of 11 % (512 tokens batch
// 4 -> 5, split 2; 1024 tokens 2 -> 3, split 4: 10.59 -> 9.40 us), the larger kernel's KV-length copies again. Not
// checked: a split switch (the rule's floor(SMs / pairs) drops as the batch grows) and an unsplit kernel (more than
// half the SMs' worth of pairs), whose copies failed the keep rule (B1: RTX PRO 6000 fold +3.3).
TEST_CASE("a one-wave split-KV decode kernel alone never gets cheaper with one more sequence at the same split",
          "[neusight][physics]") {
  forecaster f;
  for (const std::string gpu_name : {"h100", "h200", "A100-SXM4-80GB", "l40s", "b200"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const int64_t d : {128})
      for (const int64_t c : {512, 1024, 2048, 4096, 8192}) {
        std::optional<std::pair<kernel, double>> last;  // the kernel of the previous batch, its seconds
        size_t drops = 0, pairs = 0;
        for (int64_t b = 1; b <= 64; ++b) {
          std::vector<kernel_instance> tiled{{0, phase::forward, decode_kernel(f, b, 32, 8, c, d, gpu)}};
          f.s.tiles_select(tiled, gpu);  // the tile rule's split (tile_kernel, tile_blocks)
          const kernel& k = tiled.front().k;
          const double t = f.pred->predict(tiled, gpu).front();
          const bool split = k.tile_blocks >= 2 * double(b * 8);  // the rule split the cache
          if (last && split && last->first.tile_kernel == k.tile_kernel) {
            ++pairs;
            if (t < 0.95 * last->second && ++drops <= 3) {
              INFO(gpu.name << " head dim " << d << ", " << c << " tokens, " << k.tile_kernel << ": batch " << b - 1
                            << " " << last->second * 1e6 << " us, batch " << b << " " << t * 1e6 << " us");
              CHECK(t >= 0.95 * last->second);
            }
          }
          last = {k, t};
        }
        INFO(gpu.name << " head dim " << d << ", " << c << " tokens: " << pairs << " same-split steps");
        CHECK(drops == 0);
      }
  }
}

// The same order for causal prefill attention (ops/sdpa.lua, GQA 32 / 8), along the sequence length and the batch.
// Before the envelope took in prefill (the order alone, no copies) 8 of these 10 sweeps had 1-15 violating pairs,
// mostly a partial last query tile priced above the full one: L40S head dim 128, 128 tokens 24.9 us, 256 tokens
// 18.9 us (1.32x); A100-SXM4 head dim 64 1.27x; H100 head dim 128 1.09x.
TEST_CASE("a causal prefill attention kernel is never priced above one with longer sequences and more of them",
          "[neusight][physics]") {
  forecaster f;
  const std::vector<int64_t> lengths = {64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096, 8192};
  const std::vector<int64_t> batches = {1, 2, 3, 4, 6, 8, 12, 16, 32, 64};
  for (const std::string gpu_name : {"h100", "h200", "b200", "l40s", "A100-SXM4-80GB"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const int64_t d : {64, 128}) {
      std::vector<kernel> ks;
      for (const int64_t b : batches)
        for (const int64_t s : lengths) {
          graph g;
          node nd;
          nd.op = "sdpa", nd.name = "sdpa", nd.dtype = "bf16";
          nd.inputs = {{b, 32, s, d}, {b, 8, s, d}, {b, 8, s, d}}, nd.output = {b, 32, s, d};
          g.nodes.push_back(nd);
          ks.push_back(f.s.expand(g, gpu, false).kernels.at(0).k);
        }
      const auto t = f.seconds(ks, gpu);
      size_t violations = 0;
      double worst = 1;
      for (size_t i = 0; i < ks.size(); ++i)
        for (size_t j = 0; j < ks.size(); ++j)
          if (ks[j].m >= ks[i].m && ks[j].b >= ks[i].b && t[i] > t[j]) {
            worst = std::max(worst, t[i] / t[j]);
            if (++violations > 5) continue;
            INFO(gpu.name << " head dim " << d << ": batch " << ks[i].b << " x " << ks[i].m << " tokens " << t[i] * 1e6
                          << " us, batch " << ks[j].b << " x " << ks[j].m << " tokens " << t[j] * 1e6 << " us");
            CHECK(t[i] <= t[j]);
          }
      INFO(gpu.name << " head dim " << d << ": worst " << worst << "x");
      CHECK(violations == 0);
    }
  }
}

namespace {
kernel gemm_kernel(int64_t m, int64_t n, int64_t k, const std::string& dtype) {
  kernel g;
  g.kind = kernel_kind::gemm, g.name = "Linear", g.dtype = dtype;
  g.b = 1, g.m = m, g.n = n, g.k = k;
  g.flops = 2.0 * double(m) * double(n) * double(k);
  g.bytes = (dtype == "fp32" ? 4.0 : 2.0) * double(m * n + n * k + m * k);
  return g;
}
kernel row_kernel(kernel_kind kind, int64_t rows, int64_t hidden) {
  kernel v = user_vec(rows, hidden, kind == kernel_kind::softmax ? 5 : 6);
  v.kind = kind, v.op = "", v.name = kind == kernel_kind::softmax ? "VECsoftmax" : "VECln";
  return v;
}

// Two H100 files that differ only in their FLOP peaks (all scaled together), or only in memory bandwidth.
struct h100_variants {
  gpu_spec base = gpu_spec_load(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml", "gpus/h100_sxm5_80gb.toml");
  gpu_spec peaks(double s) const {
    gpu_spec g = base;
    for (double gpu_spec::*p : {&gpu_spec::peak_fp32_tflops, &gpu_spec::peak_fp32_matrix_tflops,
                                &gpu_spec::peak_tf32_tflops, &gpu_spec::peak_fp16_tflops, &gpu_spec::peak_bf16_tflops,
                                &gpu_spec::peak_fp8_tflops})
      g.*p *= s;
    return g;
  }
  gpu_spec bandwidth(double s) const {
    gpu_spec g = base;
    g.mem_bw_gbps *= s;
    return g;
  }
};

// The activation quantisation stage of a kernel with act_quant (tile_fixed_seconds with the shipped gemm_fp8
// weights): a memory-bound pass of its own, which moves with the bandwidth as it should; 0 for other kernels.
double quant_seconds(const kernel& k, const gpu_spec& gpu) {
  if (k.act_quant.empty()) return 0;
  static const quant_stage q = weights_load(ns_test::source_dir / "weights/nvidia/gemm_fp8").quant;
  kernel t = k;
  t.tile_m = t.tile_k = 128;  // the stage's features do not depend on the tile
  return tile_fixed_seconds(tile_features_compute(t, gpu, train_convention{}, wave_share::fair_share), q);  // a GEMM: no convention read
}

bool compute_bound(const kernel& k, const gpu_spec& gpu) {
  return k.flops / roofline_peak_flops(gpu, k) > k.bytes / (gpu.mem_bw_gbps * 1e9);
}
}  // namespace

namespace {
// Forecasts of `ks` on the H100 and on the H100 with every FLOP peak scaled by 0.5 and 2 must agree within 2 %.
void check_peaks_do_not_move(forecaster& f, const std::vector<kernel>& ks,
                             const std::vector<double>& scales = {0.5, 2.0}) {
  const h100_variants v;
  const auto t0 = f.seconds(ks, v.base);
  for (const double s : scales) {
    const gpu_spec pk = v.peaks(s);
    const auto t = f.seconds(ks, pk);
    for (size_t i = 0; i < ks.size(); ++i) {
      const kernel& k = ks[i];
      INFO(k.name << " " << k.dtype << " (" << k.rows << ", " << k.hidden << " | " << k.m << ", " << k.n << ", " << k.k
                  << "), FLOP peaks x" << s << ": " << t[i] * 1e3 << " ms vs " << t0[i] * 1e3 << " ms, ratio "
                  << t[i] / t0[i]);
      REQUIRE(!compute_bound(k, pk));
      CHECK(t[i] / t0[i] == Approx(1).margin(0.02));
    }
  }
}

// Forecasts of compute-bound `ks` on the H100 and on the H100 with its bandwidth scaled by 0.5 and 2 must agree
// within 2 % (an fp8 Linear: its GEMM, without the memory-bound activation quantisation before it).
void check_bandwidth_does_not_move(forecaster& f, const std::vector<kernel>& ks) {
  const h100_variants v;
  const auto t0 = f.seconds(ks, v.base);
  for (const double s : {0.5, 2.0}) {
    const gpu_spec bw = v.bandwidth(s);
    const auto t = f.seconds(ks, bw);
    for (size_t i = 0; i < ks.size(); ++i) {
      const kernel& k = ks[i];
      const double g0 = t0[i] - quant_seconds(k, v.base), g = t[i] - quant_seconds(k, bw);
      INFO(k.name << " " << k.dtype << " (" << k.m << ", " << k.n << ", " << k.k << "), bandwidth x" << s << ": "
                  << g * 1e3 << " ms vs " << g0 * 1e3 << " ms, ratio " << g / g0);
      REQUIRE(compute_bound(k, bw));
      REQUIRE(g0 > 0);
      CHECK(g / g0 == Approx(1).margin(0.02));
    }
  }
}
}  // namespace

// A GPU's FLOP peaks cannot change how long a bandwidth-bound kernel takes. The NVIDIA BMM and Linear MLPs see
// the tile's FLOPs against the roofline throughput (engine/core/tile_model.h), so none of their inputs carries
// the peak once the kernel is bandwidth-bound.
TEST_CASE("FLOP peaks do not move bandwidth-bound forecasts (GEMMs)", "[neusight][physics]") {
  forecaster f;
  // fp32: the library tiles pad a GEMM's rows to >= 32 (>= 16 FLOP/B), compute-bound on the H100 once its peaks
  // are halved, so the peaks are raised (x2, x4) instead.
  check_peaks_do_not_move(f, {gemm_kernel(8, 8192, 8192, "fp32"), gemm_kernel(16, 4096, 4096, "fp32"),
                              gemm_kernel(1, 12288, 49152, "fp32")},
                          {2.0, 4.0});
}

// The same does not hold for element-wise, softmax and layer-norm kernels: their MLPs keep
// log2(tile GFLOP / per-SM peak), because without it leave-one-GPU-out got worse or extrapolation broke
// (tile_model.h). A known failure, kept visible.
TEST_CASE("FLOP peaks do not move bandwidth-bound forecasts (elementwise, softmax, layer norm)",
          "[neusight][physics][!mayfail]") {
  forecaster f;
  kernel add = user_vec(1, 100000000, 1, 12);
  add.op = "add", add.name = "VECadd";
  check_peaks_do_not_move(f, {add, row_kernel(kernel_kind::layernorm, 16384, 4096),
                              row_kernel(kernel_kind::softmax, 65536, 2048)});
}

// The tensor-core and attention families hold both properties: their features are taken at the kernel's
// roofline throughput, the tile's bytes per FLOP and a distance from the ridge clamped at 2× (tile_model.h), so a
// kernel further than that from the ridge sees nothing of the resource it is not bound by.
TEST_CASE("tensor-core and attention forecasts: peaks do not move bandwidth-bound kernels, bandwidth does not "
          "move compute-bound ones", "[neusight][physics]") {
  forecaster f;
  const h100_variants v;
  check_peaks_do_not_move(f, {gemm_kernel(8, 8192, 8192, "bf16"), gemm_kernel(16, 4096, 4096, "bf16"),
                              gemm_kernel(1, 12288, 49152, "bf16"), gemm_kernel(8, 8192, 8192, "fp8"),
                              attention_kernel(f, "decode_attention", 64, 32, 1, 4096, 128, v.base)});
  kernel quantised = gemm_kernel(8192, 8192, 8192, "fp8");
  quantised.act_quant = "dynamic_tensor";  // an inference fp8 Linear: its activation quantisation stage set apart
  check_bandwidth_does_not_move(f, {gemm_kernel(8192, 8192, 8192, "bf16"), gemm_kernel(4096, 4096, 16384, "bf16"),
                                     gemm_kernel(8192, 8192, 8192, "fp8"), quantised,
                                     attention_kernel(f, "sdpa", 2, 32, 8192, 8192, 128, v.base)});
}

// A GPU's bandwidth cannot change how long a compute-bound kernel takes. This does not hold for the fp32 GEMM
// families (bmm, linear): their MLPs see log2(tile MB / per-SM bandwidth) whatever binds, and taking that feature
// at the roofline instead (tile MB / (roof / AI)) made leave-one-GPU-out accuracy far worse (engine/core/tile_model.h,
// weights/ACCURACY.md), so the property is recorded here as a known failure (fp32 H100 → H200: GEMMs 0.83×). The
// tensor-core families hold it (the test above).
TEST_CASE("bandwidth does not move compute-bound forecasts", "[neusight][physics][!mayfail]") {
  forecaster f;
  check_bandwidth_does_not_move(f, {gemm_kernel(8192, 8192, 8192, "fp32"), gemm_kernel(4096, 4096, 16384, "fp32")});
}

// A GEMM of more rows (M, a BMM's per batch) and the same N, K cannot be faster: the smaller one is the larger one
// with rows padded. The utilisation MLP is not monotone in M, off its training GPUs and on them (without the envelope
// an L4 fp32 BMM was priced 3.8× a larger one, a B200 bf16 Linear 1.83×, an H200 fp8 Linear 1.89×); the envelope of
// engine/core/neusight_predictor.cpp orders the GEMMs along M within one forecast (weights/MONOTONE_GEMM_RULE.md),
// so the property is exact here. Forecasts of one GEMM each are not ordered (no copies of more rows for GEMMs).
TEST_CASE("within a forecast a GEMM with fewer rows is never priced above one with more (GPUs outside the data)",
          "[neusight][physics]") {
  forecaster f;
  struct shape {
    kernel_kind kind;
    int64_t b, n, k;  // n: the reduction (data convention)
  };
  const std::vector<shape> shapes = {{kernel_kind::gemm, 1, 2048, 768},  {kernel_kind::gemm, 1, 768, 2048},
                                     {kernel_kind::gemm, 1, 4096, 4096}, {kernel_kind::gemm, 1, 4096, 14336},
                                     {kernel_kind::bmm, 32, 128, 128}};
  size_t sweeps = 0;
  for (const std::string gpu_name : {"h100", "h200", "b200", "l4", "A100-PCIE-40GB", "A100-SXM4-80GB"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const std::string dtype : {"bf16", "fp32", "fp8"}) {
      if (dtype == "fp8" && !(gpu.peak_fp8_tflops > 0)) continue;
      for (const shape& sh : shapes) {
        if (dtype == "fp8" && sh.kind == kernel_kind::bmm) continue;
        std::vector<kernel> ks;
        for (int64_t m = 1; m <= 600; ++m) {
          kernel g = gemm_kernel(m, sh.n, sh.k, dtype);
          g.kind = sh.kind, g.name = sh.kind == kernel_kind::bmm ? "BMM" : "Linear", g.b = sh.b;
          g.flops *= double(sh.b);
          ks.push_back(g);
        }
        const auto t = f.seconds(ks, gpu);
        double later_min = t.back();  // the fastest forecast of any larger GEMM
        for (size_t i = ks.size() - 1; i-- > 0;) {
          INFO(gpu.name << " " << dtype << " " << kernel_kind_name(sh.kind) << " b " << sh.b << " M " << ks[i].m
                        << " N " << sh.n << " K " << sh.k << ": " << t[i] * 1e6 << " us, a larger GEMM "
                        << later_min * 1e6 << " us");
          CHECK(t[i] <= later_min);
          later_min = std::min(later_min, t[i]);
        }
        ++sweeps;
      }
    }
  }
  CHECK(sweeps == 6 * 3 * 5 - 4 - 2 * 5);  // GPUs x dtypes x shapes, less fp8 BMMs (4 GPUs) and fp8 on the two A100s
}

// The sub-additivity envelope (weights/SUBADDITIVE_RULE.md): a library can run a batched GEMM as its b single GEMMs
// one after another, so it is never forecast slower than b times one of them. The predictor is the session's (it
// costs and tiles the pieces: predictor::gemm_pieces_set); each kernel is its own forecast, so the order along M
// within a forecast plays no part. Exact here: the BMM's one piece is the single BMM (1, m, n, k), b times, and a
// single GEMM has no piece (candidate S1: the batch split only). Without the envelope the H100's Mixtral-8x7B expert
// BMM (8 x 2 x 4096 x 28672, one-wave view of six waves) was priced above its 8 GEMMs.
TEST_CASE("a tensor-core BMM is never forecast slower than its b single GEMMs back to back",
          "[neusight][physics][envelope]") {
  session s(ns_test::session_opts(ns_test::source_dir));
  const std::unique_ptr<predictor> pred = s.predictor_make("neusight", ns_test::source_dir / "weights");
  const auto one = [&](kernel k, const gpu_spec& gpu) {  // costed by neusight.kernels, tiled by tiling.gemm
    std::vector<kernel*> ks{&k};
    s.kernel_costs(ks);
    std::vector<kernel_instance> kis{{0, phase::forward, k}};
    s.tiles_select(kis, gpu);
    return pred->predict(kis, gpu).at(0);
  };
  const auto gemm = [](kernel_kind kind, int64_t b, int64_t m, int64_t n, int64_t k) {
    kernel g;
    g.kind = kind, g.name = kind == kernel_kind::bmm ? "BMM" : "Linear", g.dtype = "bf16";
    g.b = b, g.m = m, g.n = n, g.k = k;
    return g;
  };
  struct shape {
    int64_t b, m, n, k;  // n: the reduction
  };
  // Mixtral-8x7B's decode expert GEMMs (gate-up, down), Qwen3-30B-A3B's and DeepSeek-V2-Lite's, a prefill-sized one
  const std::vector<shape> shapes = {{8, 2, 4096, 28672}, {8, 2, 14336, 4096}, {8, 16, 4096, 14336},
                                     {64, 1, 2048, 1536}, {128, 4, 768, 2048},  {4, 512, 4096, 4096}};
  size_t checks = 0;
  for (const std::string gpu_name : {"h100", "h200", "b200", "l4", "A100-SXM4-80GB"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const shape& sh : shapes) {
      const double batched = one(gemm(kernel_kind::bmm, sh.b, sh.m, sh.n, sh.k), gpu);
      const double single = one(gemm(kernel_kind::gemm, 1, sh.m, sh.n, sh.k), gpu);
      const double bmm1 = one(gemm(kernel_kind::bmm, 1, sh.m, sh.n, sh.k), gpu);
      INFO(gpu.name << " b " << sh.b << " m " << sh.m << " n " << sh.n << " k " << sh.k << ": BMM " << batched * 1e6
                    << " us, one GEMM " << single * 1e6 << " us, one BMM " << bmm1 * 1e6 << " us");
      CHECK(batched <= double(sh.b) * bmm1 * (1 + 1e-12));
      CHECK(batched <= double(sh.b) * single * (1 + 1e-12));
      ++checks;
    }
  }
  CHECK(checks == 5 * 6);
}

// The sub-additivity envelope is the batch split only (weights/SUBADDITIVE_RULE.md candidate S1): a single GEMM is
// never priced by a half of its rows or of its output columns. Candidate S also took such halves (up to three
// halvings each way) and the least of up to 31 noisy forecasts priced small GEMMs low (gemm_tc16's m <= 16 cell
// 12.29 -> 13.72 %). Here a b = 1 GEMM's forecast by the session's predictor (which has the pieces callback) equals
// that of a predictor built directly (no pieces), on GPUs and small-m shapes where the MLP is not sub-additive along M
// or N — at least one GEMM is forecast slower than twice its half, so a half-piece would have bound it (that guard
// keeps the equality from being empty).
TEST_CASE("a tensor-core GEMM is not bounded by a half of its rows or output columns (the batch split only)",
          "[neusight][physics][envelope]") {
  session s(ns_test::session_opts(ns_test::source_dir));
  const std::unique_ptr<predictor> with_pieces = s.predictor_make("neusight", ns_test::source_dir / "weights");
  const std::unique_ptr<predictor> direct = predictor_make("neusight", ns_test::source_dir / "weights");
  direct->train_convention_set(s.training_convention());
  const auto tiled = [&](int64_t m, int64_t n, int64_t k, const std::string& dtype, const gpu_spec& gpu) {
    kernel g;  // costed by neusight.kernels, tiled by tiling.gemm
    g.kind = kernel_kind::gemm, g.name = "Linear", g.dtype = dtype, g.b = 1, g.m = m, g.n = n, g.k = k;
    std::vector<kernel*> ks{&g};
    s.kernel_costs(ks);
    std::vector<kernel_instance> kis{{0, phase::forward, g}};
    s.tiles_select(kis, gpu);
    return kis;
  };
  struct shape {
    int64_t n, k;  // n: the reduction, k: the output columns
  };
  const std::vector<shape> shapes = {{4096, 4096}, {4096, 14336}, {14336, 4096}, {2048, 1536}, {5120, 27648}};
  size_t checks = 0, half_would_bind = 0;
  for (const std::string gpu_name : {"l40s", "rtx_pro_6000_server", "h100", "b200"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const std::string dtype : {"bf16", "fp8"}) {
      for (const shape& sh : shapes) {
        for (const int64_t m : {1, 2, 4, 8, 16, 32, 64}) {
          const auto kis = tiled(m, sh.n, sh.k, dtype, gpu);
          const double t = with_pieces->predict(kis, gpu).at(0);
          const double half_rows = m > 1 ? with_pieces->predict(tiled((m + 1) / 2, sh.n, sh.k, dtype, gpu), gpu).at(0)
                                         : t;
          const double half_cols = with_pieces->predict(tiled(m, sh.n, (sh.k + 1) / 2, dtype, gpu), gpu).at(0);
          INFO(gpu.name << " " << dtype << " M " << m << " N " << sh.n << " K " << sh.k << ": " << t * 1e6
                        << " us, half the rows " << half_rows * 1e6 << " us, half the columns " << half_cols * 1e6
                        << " us");
          const double alone = direct->predict(kis, gpu).at(0);
          CHECK(std::abs(t - alone) <= 1e-9 * alone);  // the same MLP row, evaluated in another batch
          if (t > 2 * std::min(half_rows, half_cols)) ++half_would_bind;
          ++checks;
        }
      }
    }
  }
  CHECK(checks == 4 * 2 * 5 * 7);
  CHECK(half_would_bind > 0);
}

// Weight-only quantisation (W8A16 / W4A16): the GEMM predictors saw no such kernels, so the MLP is shown the
// compute-dtype GEMM of the same shape and only the roof moves to the quantised weight bytes
// (engine/core/tile_model.cpp). A bandwidth-bound decode GEMV then gets faster by its bytes — it was forecast only
// 1.5x faster in int4 than in bf16 (A100-SXM4-40GB, 1 x 4096 x 14336) where the weight bytes shrink 4x and Marlin-style
// kernels measure 3.5-3.9x — and a compute-bound GEMM does not move (the dequantisation is not priced).
TEST_CASE("weight-only quantised GEMMs keep the utilisation of the unquantised GEMM of their shape",
          "[neusight][physics]") {
  forecaster f;
  for (const std::string gpu_name : {"A100-SXM4-40GB", "h100", "l40s", "b200"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const double wb : {1.0, 0.5}) {
      for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 4096, 14336}, {1, 14336, 4096},
                                                                        {4, 4096, 4096}, {8192, 4096, 14336}}) {
        const kernel full = gemm_kernel(m, n, k, "bf16");
        kernel q = full;
        q.weight_bytes = wb;
        q.bytes = 2.0 * double(m * n + m * k) + wb * double(n * k);
        const double r_full = roofline_seconds(full, gpu), r_q = roofline_seconds(q, gpu);
        const auto t = f.seconds(std::vector<kernel>{full}, gpu).front(), tq = f.seconds(std::vector<kernel>{q}, gpu).front();
        INFO(gpu.name << " weight bytes " << wb << " (" << m << ", " << n << ", " << k << "): bf16 " << t * 1e6
                      << " us, quantised " << tq * 1e6 << " us; roofline " << r_full * 1e6 << " -> " << r_q * 1e6 << " us");
        // t = base / util + launch overhead: the quantised kernel is the bf16 one with its base scaled by the
        // rooflines' ratio, the same overhead (at most tile_overhead_max_s, x1.5 for a slow clock) on top
        const double scaled = t * r_q / r_full;
        CHECK(tq <= t * 1.0001);  // never slower than the bf16 GEMM
        CHECK(tq >= 0.97 * scaled);
        CHECK(tq <= scaled + 1.5 * tile_overhead_max_s);
      }
    }
  }
}

namespace {
// A per-family set of kernels for the GPU-resource tests: fp32 and bf16 Linears and BMMs, element-wise, softmax and
// layer-norm kernels (fp32 and their bf16 copies), bf16 decode and prefill attention.
std::vector<kernel> resource_kernels(forecaster& f, const gpu_spec& gpu) {
  const auto bmm = [](int64_t b, int64_t m, int64_t n, int64_t k, const std::string& dtype) {
    kernel g = gemm_kernel(m, n, k, dtype);
    g.kind = kernel_kind::bmm, g.name = "BMM", g.b = b, g.flops *= double(b), g.bytes *= double(b);
    return g;
  };
  const auto vec16 = [](kernel v) {  // the bf16 kernel of the same shape: half the bytes
    v.dtype = "bf16", v.bytes /= 2;
    return v;
  };
  kernel add = user_vec(4096, 1280, 1, 12);
  add.op = "add", add.name = "VECadd";
  std::vector<kernel> ks;
  for (const std::string dtype : {"fp32", "bf16"}) {
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {4096, 1280, 3840}, {128, 1280, 5120}, {1, 4096, 4096}, {8192, 8192, 8192}, {4096, 5120, 1280}})
      ks.push_back(gemm_kernel(m, n, k, dtype));
    ks.push_back(bmm(80, 1024, 64, 1024, dtype));
    ks.push_back(bmm(20, 128, 128, 64, dtype));
  }
  for (const kernel& v : {add, user_vec(128, 5120, 1, 8), row_kernel(kernel_kind::softmax, 81920, 1024),
                          row_kernel(kernel_kind::softmax, 640, 128), row_kernel(kernel_kind::layernorm, 4096, 1280),
                          row_kernel(kernel_kind::layernorm, 1, 4096)}) {
    ks.push_back(v);
    ks.push_back(vec16(v));
  }
  ks.push_back(attention_kernel(f, "decode_attention", 8, 32, 1, 2048, 128, gpu));
  ks.push_back(attention_kernel(f, "decode_attention", 64, 32, 1, 4096, 128, gpu));
  ks.push_back(attention_kernel(f, "sdpa", 1, 20, 1024, 1024, 64, gpu));
  ks.push_back(attention_kernel(f, "sdpa", 2, 32, 8192, 8192, 128, gpu));
  return ks;
}

const char* resource_name(double gpu_spec::*res) {
  return res == &gpu_spec::mem_bw_gbps ? "bandwidth" : res == &gpu_spec::mem_gb ? "memory" : "L2";
}
}  // namespace

// A GPU with more memory bandwidth, DRAM capacity or L2 and nothing else changed cannot run a kernel slower. The fp32
// MLPs see the per-SM bandwidth and capacity and are not monotone in them beyond the training GPUs' range: an H100
// with its bandwidth doubled is priced an fp32 GPT-2 Large inference (batch 4 × 1024) 221 → 640 ms, its c_attn GEMM
// 0.844 → 4.483 ms; 160 GB instead of 80: 221 → 260 ms. A known failure, kept visible. A GPU envelope (a kernel
// priced no slower than on copies of its GPU with 1/1.25, 1/1.5, 1/2 of the bandwidth and capacity) removed most of it
// but was not adopted: it could not make this exact (the two GPUs' windows are not nested) and it made
// leave-one-GPU-out worse where the held-out GPU is below the others' per-SM bandwidth (T4 held out: BMM 30.6 → 38.7 %,
// end to end 26.4 → 33.6 %; weights/MONOTONE_GPU_RULE.md). Variant 2 (one copy of a GPU beyond the range, at its
// top) took the violations 108 → 53 and improved leave-one-GPU-out, but was not adopted either: not exact (the copy
// missed the size envelope's larger copies; the batched MLP rounds a row differently by batch). A forecast on such a
// GPU warns (the test below). No input reads the L2: its copies give the same forecast (that part holds).
TEST_CASE("a GPU with more bandwidth or memory or L2 is never forecast slower (per kernel family)",
          "[neusight][physics][!mayfail]") {
  forecaster f;
  size_t checks = 0;
  for (const std::string gpu_name : {"h100", "A100-PCIE-40GB"}) {
    const gpu_spec base = gpu_named(gpu_name);
    const std::vector<kernel> ks = resource_kernels(f, base);
    const auto t0 = f.seconds(ks, base);
    for (double gpu_spec::*res : {&gpu_spec::mem_bw_gbps, &gpu_spec::mem_gb, &gpu_spec::l2_mb})
      for (const double s : {1.25, 1.5, 2.0}) {
        gpu_spec more = base;
        more.*res *= s;
        const auto t = f.seconds(ks, more);
        for (size_t i = 0; i < ks.size(); ++i) {
          const kernel& k = ks[i];
          INFO(base.name << " " << resource_name(res) << " x" << s << ": " << k.name << " " << k.dtype << " (" << k.b
                         << " | " << k.m << ", " << k.n << ", " << k.k << " | " << k.rows << ", " << k.hidden << "): "
                         << t[i] * 1e6 << " us vs " << t0[i] * 1e6 << " us, ratio " << t[i] / t0[i]);
          if (res == &gpu_spec::l2_mb) CHECK(t[i] == t0[i]);
          else CHECK(t[i] <= t0[i]);
          ++checks;
        }
      }
  }
  CHECK(checks == 2 * 3 * 3 * 30);
}

// The fp32 families' MLPs read the per-SM bandwidth and memory and are not monotone in them beyond their training GPUs'
// range (the test above); the GPU envelopes tried were not adopted (weights/MONOTONE_GPU_RULE.md). A forecast on a GPU
// beyond that range says so, with the range (the weights' training.gpus, their GPU files); one within it, or of the
// tensor-core families only (no per-SM input), does not. The rule is scripts/neusight/uncertainty.lua range_warnings
// (the warnings a forecast's band figures carry), over what the predictor hands on (uncertainty(): the manifests).
TEST_CASE("a forecast on a GPU beyond the fp32 families' per-SM bandwidth or memory range warns that it may not be "
          "monotone there",
          "[neusight][physics]") {
  forecaster f;
  const auto warning = [&](std::vector<kernel> ks, const gpu_spec& gpu) {
    std::vector<kernel_instance> kis;
    for (auto& k : ks) kis.push_back({0, phase::forward, std::move(k)});
    f.s.tiles_select(kis, gpu);
    const std::vector<double> seconds = f.pred->predict(kis, gpu);
    graph one;
    one.nodes.emplace_back();  // each kernel once
    const forecast fc = forecast_make(std::move(one), kis, seconds);
    figure_inputs in;
    family_inputs_add(in, fc.seconds_by_family(), *f.pred, gpu.vendor);
    std::string found;
    for (const auto& w :
         f.s.figures_call("neusight.uncertainty", "warnings", in, gpu, f.pred->uncertainty(gpu.vendor)).warnings)
      if (w.find("may not be monotone in bandwidth or memory") != std::string::npos) {
        CHECK(found.empty());  // one line
        found = w;
      }
    return found;
  };
  const kernel fp32 = gemm_kernel(4096, 1280, 3840, "fp32"), bf16 = gemm_kernel(4096, 1280, 3840, "bf16");
  const gpu_spec h100 = gpu_named("h100"), a100 = gpu_named("A100-PCIE-40GB");
  CHECK(warning({fp32, bf16}, h100) ==
        "H100-SXM5-80GB is beyond the range the linear weights were trained on with 25.4 GB/s of memory bandwidth per "
        "SM (the most of their training GPUs: 14.4, A100-PCIE-40GB) and 0.606 GB of memory per SM (the most of their "
        "training GPUs: 0.4, P4): their forecasts there may not be monotone in bandwidth or memory (a GPU with more of "
        "either may be forecast slower; weights/MONOTONE_GPU_RULE.md)");
  CHECK(warning({bf16}, h100).empty());  // the tensor-core families read no per-SM resource
  CHECK(warning({fp32, bf16}, a100).empty());  // a training GPU is inside
  gpu_spec more = a100;
  more.mem_bw_gbps *= 1.25;
  const std::string w = warning({fp32, row_kernel(kernel_kind::softmax, 640, 128)}, more);
  CHECK(w.find("the linear, softmax weights") != std::string::npos);
  CHECK(w.find("18 GB/s of memory bandwidth per SM (the most of their training GPUs: 14.4, A100-PCIE-40GB):") !=
        std::string::npos);
  CHECK(w.find("GB of memory per SM") == std::string::npos);
}

// The least a tensor-core or attention kernel takes: its family's min_seconds (weights/nvidia/<family>/model.toml,
// the smallest latency measured among the family's training rows over all its training GPUs; tile_min_seconds). The
// MLP learnt a launch term on the training manifold, but off it answered below any launch: a bf16 1×1×1 GEMM at
// 0.04 µs on the B200 and 0.07 µs on the H100, where the smallest GEMM the data measured took 1.50 µs.
namespace {
// The shipped weights of a family, with min_seconds as given.
std::unique_ptr<predictor> family_predictor(forecaster& f, family fam, std::optional<double> min_seconds = {}) {
  weights_provenance prov;
  tile_model m = weights_load(ns_test::source_dir / "weights/nvidia" / std::string(family_name(fam)), &prov);
  if (min_seconds) m.min_seconds = *min_seconds;
  auto p = neusight_predictor_make("nvidia", m, prov.gpus);
  p->train_convention_set(f.s.training_convention());
  return p;
}
double family_seconds(forecaster& f, const predictor& p, const kernel& k, const gpu_spec& gpu) {
  std::vector<kernel_instance> kis = {{0, phase::forward, k}};
  f.s.tiles_select(kis, gpu);
  return p.predict(kis, gpu).front();
}
}  // namespace

TEST_CASE("tiny tensor-core GEMMs and attention kernels are never forecast below their family's least measured latency") {
  forecaster f;
  for (const char* name : {"B200", "H100"}) {
    const gpu_spec gpu = gpu_named(name);
    kernel fp8 = gemm_kernel(1, 1, 1, "fp8"), fp8_quant = gemm_kernel(1, 1, 1, "fp8");
    fp8.bytes = fp8_quant.bytes = 3;
    fp8_quant.act_quant = "dynamic_tensor";
    const std::vector<std::pair<std::string, kernel>> ks = {
        {"bf16 1x1x1 GEMM", gemm_kernel(1, 1, 1, "bf16")},
        {"bf16 1x8x8 GEMM", gemm_kernel(1, 8, 8, "bf16")},
        {"fp8 1x1x1 GEMM", fp8},
        {"fp8 1x1x1 GEMM with activation quantisation", fp8_quant},
        {"decode attention, batch 1, one head, 1 cached token", decode_kernel(f, 1, 1, 1, 1, 64, gpu)},
        {"prefill attention, batch 1, one head, 1 token", attention_kernel(f, "sdpa", 1, 1, 1, 1, 64, gpu)}};
    const auto t = f.seconds(kernels_of(ks), gpu);
    for (size_t i = 0; i < ks.size(); ++i) {
      const family fam = *family_of(ks[i].second);
      const tile_model m = weights_load(ns_test::source_dir / "weights/nvidia" / std::string(family_name(fam)));
      INFO(name << " " << ks[i].first << " (" << family_name(fam) << "): " << t[i] * 1e6 << " us, least measured "
                << m.min_seconds * 1e6 << " us");
      REQUIRE(m.min_seconds > 0);
      CHECK(t[i] >= m.min_seconds);
    }
  }
}

TEST_CASE("min_seconds binds on a 1x1x1 bf16 GEMM, and leaves a large GEMM unchanged to the last digit") {
  forecaster f;
  const auto with = family_predictor(f, family::gemm_tc16), without = family_predictor(f, family::gemm_tc16, 0.0);
  const double least = weights_load(ns_test::source_dir / "weights/nvidia/gemm_tc16").min_seconds;
  REQUIRE(least > 0);
  for (const char* name : {"B200", "H100"}) {
    const gpu_spec gpu = gpu_named(name);
    const kernel tiny = gemm_kernel(1, 1, 1, "bf16"), large = gemm_kernel(8192, 8192, 8192, "bf16");
    const double tiny_without = family_seconds(f, *without, tiny, gpu);
    INFO(name << ": 1x1x1 bf16 " << tiny_without * 1e6 << " us without the floor, least measured " << least * 1e6);
    CHECK(tiny_without < least);  // the MLP's answer off its manifold (why the floor exists)
    CHECK(family_seconds(f, *with, tiny, gpu) == least);
    CHECK(family_seconds(f, *with, large, gpu) == family_seconds(f, *without, large, gpu));
  }
}

// No kernel the neusight predictor prices is faster than its roofline floor, max(FLOPs / peak, bytes / bandwidth)
// (roofline_floor_seconds; figures.lua's floor warnings count on it). The tile model's base reads the bandwidth in
// GiB/s (its training convention), 7.4 % above the GPU's, and the MLP's utilisation saturates on the largest streams:
// Llama-3-8B's bf16 decode attention on an H100 (batch 64, 32 / 8 heads, head dim 128, 32768 cached tokens) read its
// 8.59 GB at 3433 GB/s of the 3350 (2.4 % under the floor; 3.6 % at batch 16 x 131000), and the H200's batch-1 LM head
// (1 x 4096 x 128256) 1.5 % under it.
TEST_CASE("no neusight kernel forecast is faster than its roofline floor (large decode attention and GEMV streams)",
          "[neusight][physics]") {
  forecaster f;
  for (const char* name : {"H100", "H200", "B200", "A100-SXM4-80GB", "L40S"}) {
    const gpu_spec gpu = gpu_named(name);
    const std::vector<std::pair<std::string, kernel>> ks = {
        {"decode attention, batch 64 x 32768 tokens", decode_kernel(f, 64, 32, 8, 32768, 128, gpu)},
        {"decode attention, batch 16 x 131000 tokens", decode_kernel(f, 16, 32, 8, 131000, 128, gpu)},
        {"decode attention, batch 256 x 1024 tokens", decode_kernel(f, 256, 32, 8, 1024, 128, gpu)},
        {"bf16 LM head GEMV 1 x 4096 x 128256", gemm_kernel(1, 4096, 128256, "bf16")},
        {"bf16 GEMV 8 x 4096 x 28672", gemm_kernel(8, 4096, 28672, "bf16")},
        {"bf16 GEMM 8192 x 8192 x 8192", gemm_kernel(8192, 8192, 8192, "bf16")}};
    const auto t = f.seconds(kernels_of(ks), gpu);
    for (size_t i = 0; i < ks.size(); ++i) {
      const double floor = roofline_floor_seconds(ks[i].second, gpu);
      INFO(name << " " << ks[i].first << ": " << t[i] * 1e6 << " us, roofline floor " << floor * 1e6 << " us ("
                << ks[i].second.bytes / t[i] / 1e9 << " GB/s of " << gpu.mem_bw_gbps << ")");
      CHECK(t[i] >= floor);
    }
  }
}

namespace {
// One kernel priced as a forecast prices it: costed by neusight.kernels, tiled by tiling.gemm, by the session's
// neusight predictor (with its split-K and sub-additive pieces), each kernel its own forecast.
struct session_pricer {
  session s{ns_test::session_opts(ns_test::source_dir)};
  std::unique_ptr<predictor> pred = s.predictor_make("neusight", ns_test::source_dir / "weights");
  double seconds(kernel k, const gpu_spec& gpu) {
    std::vector<kernel*> ks{&k};
    s.kernel_costs(ks);
    std::vector<kernel_instance> kis{{0, phase::forward, k}};
    s.tiles_select(kis, gpu);
    return pred->predict(kis, gpu).at(0);
  }
};
}  // namespace

// Whole-forecast physics sweep (2026-11-30, sweepphys): `predict --format json` over llama3_8b, qwen3_8b, mistral_7b,
// gpt3_xl, bert_large, mixtral_8x7b, llama3_70b x H100/H200/A100-SXM4/L40S/B200/MI300X x train/inference/prefill.
// Almost every violation of "a GPU with more of every resource is not slower" and of "throughput does not fall off a
// cliff" came from fp32 GEMMs (family linear) far beyond the sizes the fp32 MLP was trained on, on GPUs beyond its
// training GPUs: llama3_8b fp32 training at batch 64 x 8192 is forecast 1594 s on a B200 and 905 s on an H200, its
// lm_head GEMMs alone 1121 s and 403 s (roofline at the fp32 peak: ~22 s). Not fixed (a size or GPU envelope changes
// the linear family's leave-one-GPU-out scores and needs a keep rule; weights/MONOTONE_GEMM_RULE.md and
// MONOTONE_GPU_RULE.md record the envelopes tried); pinned here for the next session.
TEST_CASE("a large fp32 GEMM is not forecast slower on a GPU with more of every resource (H100 H200 B200)",
          "[neusight][physics][!mayfail]") {
  session_pricer f;
  // llama3_8b's lm_head at 48 and 64 sequences of 8192 tokens: forward, and its weight gradient (reduction over tokens)
  const std::vector<std::array<int64_t, 3>> shapes = {
      {393216, 4096, 128256}, {524288, 4096, 128256}, {128256, 524288, 4096}, {524288, 14336, 4096},
      // gpt3_xl's c_fc weight gradient at 64 x 1024 (B200 1.53x the H200) and bert_large's intermediate at 1 x 128
      {12288, 65536, 3072}, {128, 1024, 4096}};
  const gpu_spec h100 = gpu_named("h100"), h200 = gpu_named("h200"), b200 = gpu_named("b200");
  for (const auto& [m, n, k] : shapes) {
    const kernel g = gemm_kernel(m, n, k, "fp32");
    const double t100 = f.seconds(g, h100), t200 = f.seconds(g, h200), tb = f.seconds(g, b200);
    INFO("fp32 Linear (" << m << ", " << n << ", " << k << "): H100 " << t100 << " s, H200 " << t200 << " s, B200 "
                         << tb << " s, roofline at the H100's fp32 peak " << g.flops / (h100.peak_fp32_tflops * 1e12)
                         << " s");
    CHECK(t200 <= t100 * 1.01);
    CHECK(tb <= t200 * 1.01);
  }
}

// Twice the work of a GEMM that already fills the GPU many waves over costs about twice the time; the fp32 MLP on
// the B200 prices llama3_8b's lm_head weight gradient (128256 x 4096 over 131072 tokens -> 262144) 19 s -> 306 s.
// Seen (not fixed): the linear MLP's inputs are clipped one by one to their training range, and its two size inputs
// clip at different sizes. log2(waves) passes its top (13.8) first; 'log2(waves * tile_mb / (mem_gb * 1024 / sms))'
// (top 6.95) still grows, so the kernel leaves the training manifold (for one GPU and tile the two differ by a
// constant) and the MLP's steep fall near that feature's top multiplies the time until it clips too. The lm_head
// forward (4096 -> 128256, 128x64 tiles) on the H200: rows 196608 -> 393216 take that input 6.08 -> 7.08 and the time
// 4.8 s -> 75 s; on the H100 (80 GB: 6.90 -> clipped) 7.1 s -> 18 s. The same shift puts the H200 (141 GB) above the
// H100 from ~200k rows. A candidate: clip the footprint input by the same log2 amount as log2(waves) (the largest
// measured wave count's utilisation); it changes the linear and bmm forecasts past the top, so a keep rule first.
// Tried as information only (2026-11-30, not committed, leave-one-GPU-out not run): on tests/bench/physics_sweep.py's
// 7,686 forecasts B200 above H200 89 -> 80 (worst 2.11x -> 1.30x), H200 above H100 38 -> 36 (1.25x -> 1.06x),
// batch cliffs 42 -> 33, seq cliffs 44 -> 32; the test above 8 -> 2 failures, this one 17 -> 5 (the L40S BMMs stay:
// their cliff is along the reduction, the tile inputs, not the wave count).
// Adopted (2026-11-30, clipfoot; weights/FOOTPRINT_CLIP_RULE.md, engine/core/tile_model.cpp footprint_clips_with_waves):
// the test above 8 -> 2 failures, this one 17 -> 5, the tile-switch test below unchanged (12: its GEMMs are far below
// the waves top; fixed since by weights/TILE_SWITCH_RULE.md, which leaves this test's 5 and the one above's 2 as they were). Left: the B200 above the H200 for the gpt3_xl and bert_large shapes above; here three Linear
// doublings of 2.22-2.33x and the two L40S BMMs (2.7x, 64x).
TEST_CASE("doubling one dimension of a large fp32 GEMM costs at most 2.2 times its time (no cliff)",
          "[neusight][physics][!mayfail]") {
  session_pricer f;
  const std::vector<std::array<int64_t, 3>> shapes = {
      {128256, 131072, 4096}, {196608, 4096, 128256}, {262144, 4096, 14336}, {131072, 14336, 4096}};
  for (const std::string gpu_name : {"h100", "h200", "b200"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const auto& [m, n, k] : shapes)
      for (int dim = 0; dim < 3; ++dim) {
        const kernel g = gemm_kernel(m, n, k, "fp32");
        const kernel g2 = gemm_kernel(dim == 0 ? 2 * m : m, dim == 1 ? 2 * n : n, dim == 2 ? 2 * k : k, "fp32");
        const double t = f.seconds(g, gpu), t2 = f.seconds(g2, gpu);
        INFO(gpu.name << " fp32 Linear (" << m << ", " << n << ", " << k << ") " << t << " s, dimension " << dim
                      << " doubled " << t2 << " s, ratio " << t2 / t);
        CHECK(t2 <= 2.2 * t);
      }
  }
  // mixtral_8x7b's grouped experts in fp32 on the L40S (family bmm): the up/gate BMM 8 x (65536 -> 131072 rows) x
  // 4096 x 28672 is priced 1186 s -> 3258 s, its weight gradient over 65536 -> 131072 tokens 139 s -> 3427 s
  // (roofline at the fp32 peak: 2.7 s for the larger).
  const gpu_spec l40s = gpu_named("l40s");
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{65536, 4096, 28672}, {4096, 65536, 28672}}) {
    const auto bmm = [](int64_t m, int64_t n, int64_t k) {
      kernel g = gemm_kernel(m, n, k, "fp32");
      g.kind = kernel_kind::bmm, g.name = "BMM", g.b = 8, g.flops *= 8, g.bytes *= 8;
      return g;
    };
    const kernel g = bmm(m, n, k), g2 = m > n ? bmm(2 * m, n, k) : bmm(m, 2 * n, k);
    const double t = f.seconds(g, l40s), t2 = f.seconds(g2, l40s);
    INFO("L40S fp32 BMM 8 x (" << m << ", " << n << ", " << k << ") " << t << " s, doubled " << t2 << " s, ratio "
                               << t2 / t);
    CHECK(t2 <= 2.2 * t);
  }
}

// llama3_8b fp32 training at 64 x 8192 tokens: its lm_head forward (524288 rows, 4096 -> 128256) was priced 372 s on a
// B200 (roofline at its fp32 peak ~8 s) and above the H100 on the H200: log2(waves) clipped at its training top while
// the footprint input kept growing alone (weights/FOOTPRINT_CLIP_RULE.md: both now clip by the same log2 amount).
TEST_CASE("llama3_8b fp32 lm_head forward at 64 x 8192 tokens is within 4 times its roofline on the B200",
          "[neusight][physics]") {
  session_pricer f;
  const kernel g = gemm_kernel(524288, 4096, 128256, "fp32");
  const gpu_spec h100 = gpu_named("h100"), h200 = gpu_named("h200"), b200 = gpu_named("b200");
  const double tb = f.seconds(g, b200), t200 = f.seconds(g, h200), t100 = f.seconds(g, h100);
  const double roof = g.flops / (b200.peak_fp32_tflops * 1e12);
  INFO("B200 " << tb << " s (roofline " << roof << " s), H200 " << t200 << " s, H100 " << t100 << " s");
  CHECK(tb <= 4 * roof);
  CHECK(t200 <= t100 * 1.01);
}

// A prompt of 1000 tokens must not be slower than one of 1024: on the H100 llama3_8b fp32 inference at batch 2 was
// forecast 818 ms at seq 1000 and 704 ms at 1024. The tile rule (scripts/tiling/gemm.lua, ampere linear: rows < 2048
// with a reduction >= 4096 take 128x32, else 128x64, as cuBLAS does) switches at 2048 rows, and the MLP priced the
// 128x32 tile of 2000 rows up to 1.45x above the 128x64 tile of 2048 (B200; A100-SXM4 1.01-1.05x, H200 1.05-1.10x).
// Fixed by the tile switch (weights/TILE_SWITCH_RULE.md): an NVIDIA fp32 GEMM is priced at the lesser of its rule tile
// and the rule's tile for twice its rows, and 2000 rows in 128x64 tiles are the 32 row bands of 2048. Each kernel is
// its own forecast here: within one forecast no suffix minimum spans them across two forecasts.
namespace {
// An fp32 Linear of `less` rows is not priced above one of `more` rows (1 %), for llama3_8b's MLP and attention shapes
// on the GPUs beyond the data and the A100-SXM4.
void check_fewer_rows_not_above(int64_t less, int64_t more) {
  session_pricer f;
  for (const std::string gpu_name : {"h100", "h200", "b200", "A100-SXM4-80GB"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const auto& [n, k] : std::vector<std::array<int64_t, 2>>{{14336, 4096}, {4096, 14336}, {4096, 4096}}) {
      const double t_less = f.seconds(gemm_kernel(less, n, k, "fp32"), gpu);
      const double t_more = f.seconds(gemm_kernel(more, n, k, "fp32"), gpu);
      INFO(gpu.name << " fp32 Linear N " << n << " K " << k << ": " << less << " rows " << t_less * 1e3 << " ms, "
                    << more << " rows " << t_more * 1e3 << " ms");
      CHECK(t_less <= t_more * 1.01);
    }
  }
}
}  // namespace

TEST_CASE("an fp32 GEMM with fewer rows is not priced above one with more across the 128x32 / 128x64 tile switch",
          "[neusight][physics]") {
  check_fewer_rows_not_above(2000, 2048);
}

// The alternative of the tile switch follows whole row bands (weights/TILE_SWITCH_RULE.md, second round, T3): with the
// rule's tile for exactly twice the rows, 1024 rows (2048: the ampere Linear's 128x64) got the alternative and 1000
// rows (2000: 128x32 still) did not, though both are 32 row bands of the 128x32 tile; llama3_8b fp32 inference at
// batch 1 on the H100 fell x1/1.156 from seq 1000 to 1024 (physics sweep: 38 forecasts falling along seq, 3 after).
TEST_CASE("an fp32 GEMM of 1000 rows is not priced above one of 1024 (the tile switch's alternative by row bands)",
          "[neusight][physics]") {
  check_fewer_rows_not_above(1000, 1024);
}

// Where the remaining row threshold sits (weights/TILE_SWITCH_RULE.md, T3): the alternative tile is offered from the
// row count whose doubled whole row bands reach the rule's switch, so one row more can still cost less — T1's step at
// 1023 -> 1024 rows moved to 992 -> 993 (x1/1.06-1.20 here, 2026-11-30; the H100's llama3_8b fp32 inference, batch
// 1: seq 992 403.3 ms, seq 1000 357.8 ms). Every row count from 900 to 1100 is scanned, so this sees the step wherever a rule change moves it;
// T4 (the large-row tile offered always) would remove it but failed the in-distribution clause. Tagged until fixed.
TEST_CASE("an fp32 GEMM is not priced above one with one row more from 900 to 1100 rows", "[neusight][physics][!mayfail]") {
  session_pricer f;
  for (const std::string gpu_name : {"h100", "b200"}) {
    const gpu_spec gpu = gpu_named(gpu_name);
    for (const auto& [n, k] : std::vector<std::array<int64_t, 2>>{{14336, 4096}, {4096, 14336}}) {
      double worst = 0;
      int64_t at = 0;
      double prev = f.seconds(gemm_kernel(900, n, k, "fp32"), gpu);
      for (int64_t m = 901; m <= 1100; ++m) {
        const double t = f.seconds(gemm_kernel(m, n, k, "fp32"), gpu);
        if (prev / t > worst) worst = prev / t, at = m;
        prev = t;
      }
      INFO(gpu.name << " fp32 Linear N " << n << " K " << k << ": the largest fall with one row more is x1/" << worst
                    << " at " << at - 1 << " -> " << at << " rows");
      CHECK(worst <= 1.01);
    }
  }
}
