// tests/core/test_roofline.cpp — roofline bound and phase aggregation against hand-computed numbers.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "core/forecast.h"
#include "core/roofline.h"
#include "core/text.h"
#include "test_util.h"

using namespace ns;
using Catch::Matchers::WithinRel;

namespace {
// Tiny-1: 2 TFLOP/s fp32, 16 TFLOP/s fp16 tensor, 100 GB/s, no bf16.
const gpu_spec tiny = gpu_spec_parse(ns_test::slurp(ns_test::source_dir / "tests/fixtures/gpus/tiny.toml"), "tiny.toml");

kernel gemm(int64_t m, int64_t n, int64_t k, const std::string& dtype = "fp32") {
  kernel g;
  g.kind = kernel_kind::gemm;
  g.name = "Linear";
  g.dtype = dtype;
  g.b = 1, g.m = m, g.n = n, g.k = k;
  g.flops = 2.0 * m * n * k;
  g.bytes = dtype_bytes(dtype) * double(m * n + n * k + m * k);
  return g;
}
}  // namespace

TEST_CASE("roofline picks the slower of compute and memory", "[roofline]") {
  // 1024^3 GEMM: 2.147e9 FLOP / 2e12 = 1.0737 ms; 12.58 MB / 100 GB/s = 0.1258 ms -> compute-bound.
  const kernel big = gemm(1024, 1024, 1024);
  REQUIRE_THAT(roofline_seconds(big, tiny), WithinRel(2.0 * 1024 * 1024 * 1024 / 2e12, 1e-12));
  // 4096x1x4096 (outer-product-like): 33.5 MFLOP -> 16.8 us; 67.2 MB -> 0.672 ms -> memory-bound.
  const kernel thin = gemm(4096, 1, 4096);
  REQUIRE_THAT(roofline_seconds(thin, tiny), WithinRel(4.0 * (4096 + 4096 + 4096.0 * 4096) / 100e9, 1e-12));
}

TEST_CASE("GEMM peak follows the dtype, vector kernels use fp32", "[roofline]") {
  const kernel h = gemm(1024, 1024, 1024, "fp16");
  CHECK_THAT(roofline_seconds(h, tiny), WithinRel(2.0 * 1024 * 1024 * 1024 / 16e12, 1e-12));
  kernel v;
  v.kind = kernel_kind::elementwise;
  v.dtype = "fp16";
  v.flops = 1e9;
  v.bytes = 0;
  CHECK_THAT(roofline_seconds(v, tiny), WithinRel(1e9 / 2e12, 1e-12));
  try {
    roofline_seconds(gemm(64, 64, 64, "bf16"), tiny);
    FAIL("no error");
  } catch (const error& e) {
    CHECK(std::string(e.what()) == "tiny.toml: GPU 'Tiny-1' has no bf16 units (peak_bf16_tflops = 0) for kernel Linear: give a dtype it has units for (fp32, tf32, fp16)");
  }
}

// The dtypes a kernel is priced in, one list (matrix_dtypes; engine/ingest/dataset.cpp reads a benchmark's GEMM rows in
// them): the engine's dtypes but fp64, in their order, each a GEMM peak of its own; an fp64 GEMM has none (the fp32
// vector peak's key).
TEST_CASE("matrix dtypes: the engine's dtypes but fp64 - each with a GEMM peak of its own", "[roofline]") {
  std::vector<std::string> want;
  for (const std::string& d : dtype_names())
    if (d != "fp64") want.push_back(d);
  CHECK(matrix_dtypes() == want);
  std::set<std::string> keys;
  for (const std::string& d : matrix_dtypes()) {
    const std::string key = roofline_peak_key(gemm(64, 64, 64, d));
    CHECK(key != "peak_fp32_tflops");
    keys.insert(key);
  }
  CHECK(keys.size() == matrix_dtypes().size());
  CHECK(roofline_peak_key(gemm(64, 64, 64, "fp64")) == "peak_fp32_tflops");
}

// dense_peak_tflops takes engine dtype names only: another spelling is no GEMM dtype to the roofline's peak lookup and
// read as the fp32 vector peak (2 TFLOP/s on Tiny-1 for "FP16"), a silently wrong MFU and floor; people's spellings go
// through session::dense_peak_tflops (neusight.kernels dtype_name)
TEST_CASE("dense peak: engine dtype names only - another spelling is refused not read as fp32", "[roofline]") {
  CHECK(dense_peak_tflops(tiny, "fp16") == 16.0);
  CHECK_FALSE(dense_peak_tflops(tiny, "bf16").has_value());  // a known dtype the GPU has no units of: no MFU
  for (const char* spelt : {"FP16", "float16", "torch.float16", "half", "bfloat16"}) {
    INFO(spelt);
    try {
      const auto peak = dense_peak_tflops(tiny, spelt);
      FAIL("no error: " << (peak ? std::to_string(*peak) : std::string("nullopt")));
    } catch (const error& e) {
      CHECK(std::string(e.what()).find("dense peak: unknown dtype '" + std::string(spelt) + "'") == 0);
      CHECK(std::string(e.what()).find("neusight.kernels dtype_name reads the others") != std::string::npos);
    }
  }
}

// the roofline floor of a kernel whose dtype has no units on the GPU: the DRAM term alone (the peak lookup shared with
// roofline_peak_flops and dense_peak_tflops, no exception in between)
TEST_CASE("roofline floor: no units for the dtype leaves the DRAM term", "[roofline]") {
  const kernel b = gemm(1024, 1024, 1024, "bf16");  // Tiny-1 has no bf16 units
  CHECK_THAT(roofline_floor_seconds(b, tiny), WithinRel(b.bytes / 100e9, 1e-12));
  const kernel h = gemm(1024, 1024, 1024, "fp16");
  CHECK_THAT(roofline_floor_seconds(h, tiny), WithinRel(h.flops / 16e12, 1e-12));
}

TEST_CASE("a fixed-latency kernel bypasses the bound", "[roofline]") {
  kernel m;
  m.kind = kernel_kind::memory;
  m.bytes = 1e12;
  m.seconds = 3e-6;
  CHECK(roofline_seconds(m, tiny) == 3e-6);
}

TEST_CASE("forecast sums phases with node replication", "[forecast]") {
  graph g;
  g.nodes.resize(2);
  g.nodes[0].count = 1;
  g.nodes[1].count = 24;
  std::vector<kernel_instance> ks = {{0, phase::forward, gemm(8, 8, 8)},
                                     {1, phase::forward, gemm(8, 8, 8)},
                                     {1, phase::backward, gemm(8, 8, 8)},
                                     {1, phase::accumulate, gemm(8, 8, 8)},
                                     {0, phase::optimizer, gemm(8, 8, 8)}};
  const forecast f = forecast_make(g, ks, {1.0, 2.0, 3.0, 0.5, 0.25});
  CHECK(f.phase_total(phase::forward) == 1.0 + 48.0);
  CHECK(f.phase_total(phase::backward) == 72.0);
  CHECK(f.phase_total(phase::accumulate) == 12.0);
  CHECK(f.phase_total(phase::optimizer) == 0.25);
  CHECK(f.total() == 49.0 + 72.0 + 12.0 + 0.25);
  CHECK(f.flops_total() == 2.0 * 512 * (1 + 24 * 3 + 1));
}

// The model's FLOPs (scripts/neusight/figures.lua): a node's attrs.model_flops_share scales its forward and backward
// FLOPs (the busiest expert-parallel rank's extra rows are no model work; scripts/neusight/models/moe.lua), not its
// gradient accumulation; a bad value is an error naming the node.
TEST_CASE("forecast model FLOPs apply a node's model_flops_share to its forward and backward", "[forecast]") {
  graph g;
  g.nodes.resize(2);
  g.nodes[0].name = "attn", g.nodes[0].count = 1;
  g.nodes[1].name = "experts.down_proj", g.nodes[1].count = 24;
  std::vector<kernel_instance> ks = {{0, phase::forward, gemm(8, 8, 8)},
                                     {1, phase::forward, gemm(8, 8, 8)},
                                     {1, phase::backward, gemm(8, 8, 8)},
                                     {1, phase::accumulate, gemm(8, 8, 8)}};
  forecast f = forecast_make(g, ks, {1.0, 2.0, 3.0, 0.5});
  for (phase p : {phase::forward, phase::backward, phase::accumulate, phase::optimizer})
    CHECK(f.phase_model_flops(p) == f.phase_flops(p));  // no share: the graph's, bit for bit
  f.g.nodes[1].attrs["model_flops_share"] = 0.25;
  CHECK(f.phase_model_flops(phase::forward) == 1024.0 + 0.25 * 24 * 1024);
  CHECK(f.phase_model_flops(phase::backward) == 0.25 * 24 * 1024);
  CHECK(f.phase_model_flops(phase::accumulate) == 24 * 1024.0);  // the parameters' work, in full
  CHECK(f.phase_flops(phase::forward) == 25 * 1024.0);            // the graph's (priced) FLOPs unchanged
  CHECK(f.phase_total(phase::forward) == 1.0 + 48.0);             // and its time
  for (const attr_value& bad : {attr_value(0.0), attr_value(1.5), attr_value(std::string("half"))}) {
    f.g.nodes[1].attrs["model_flops_share"] = bad;
    CHECK_THROWS_WITH(f.phase_model_flops(phase::forward),
                      "node 'experts.down_proj': attrs.model_flops_share must be a number in (0, 1] (the share of its "
                      "forward and backward FLOPs that is the model's work)");
  }
}

// attrs.model_flops_copies divides every phase's FLOPs of the node, and may be fractional: Megatron's linear_qkv when
// tp is a multiple of num_key_value_heads is split in its query heads and replicated in its key/value head
// (scripts/neusight/nodes.lua qkv: Llama-3-8B at tp 16 runs 2 + 2 heads per rank, 48 in the model: 16 · 4 / 48 = 4 / 3
// copies); model_flops_shards (expert-parallel ranks) and model_flops_weight_copies stay whole numbers.
TEST_CASE("forecast model FLOPs take a fractional model_flops_copies and a whole model_flops_shards and model_flops_weight_copies", "[forecast]") {
  graph g;
  g.nodes.resize(1);
  g.nodes[0].name = "layers.self_attn.qkv_proj", g.nodes[0].count = 32;
  std::vector<kernel_instance> ks = {{0, phase::forward, gemm(8, 8, 8)},
                                     {0, phase::backward, gemm(8, 8, 8)},
                                     {0, phase::accumulate, gemm(8, 8, 8)}};
  forecast f = forecast_make(g, ks, {1.0, 2.0, 0.5});
  f.g.nodes[0].attrs["model_flops_copies"] = 4.0 / 3.0;
  for (phase p : {phase::forward, phase::backward, phase::accumulate})
    CHECK(f.phase_model_flops(p) == Approx(32 * 1024.0 * 3 / 4).epsilon(1e-15));
  CHECK(f.phase_flops(phase::forward) == 32 * 1024.0);  // the priced FLOPs unchanged
  for (const attr_value& bad : {attr_value(0.5), attr_value(std::string("two"))}) {
    f.g.nodes[0].attrs["model_flops_copies"] = bad;
    CHECK_THROWS_WITH(f.phase_model_flops(phase::forward),
                      "node 'layers.self_attn.qkv_proj': attrs.model_flops_copies must be a number >= 1 (the "
                      "tensor-parallel ranks that run the same node on the same data, on average over its work)");
  }
  f.g.nodes[0].attrs.erase("model_flops_copies");
  f.g.nodes[0].attrs["model_flops_shards"] = 1.5;
  CHECK_THROWS_WITH(f.phase_model_flops(phase::accumulate),
                    "node 'layers.self_attn.qkv_proj': attrs.model_flops_shards must be a whole number >= 1 (the "
                    "expert-parallel ranks that hold its other parts)");
  // model_flops_weight_copies (a router on the rank's n/tp tokens under sequence parallelism, its weights whole on
  // every tp rank: scripts/neusight/parallel/shard.lua mark_replicated) divides the gradient accumulation alone
  f.g.nodes[0].attrs.erase("model_flops_shards");
  f.g.nodes[0].attrs["model_flops_weight_copies"] = 8.0;
  CHECK(f.phase_model_flops(phase::forward) == 32 * 1024.0);
  CHECK(f.phase_model_flops(phase::backward) == 32 * 1024.0);
  CHECK(f.phase_model_flops(phase::accumulate) == 32 * 1024.0 / 8);
  f.g.nodes[0].attrs["model_flops_weight_copies"] = 1.5;
  CHECK_THROWS_WITH(f.phase_model_flops(phase::accumulate),
                    "node 'layers.self_attn.qkv_proj': attrs.model_flops_weight_copies must be a whole number >= 1 "
                    "(the tensor-parallel ranks that hold its weights whole and accumulate their gradient alike)");
  // beside model_flops_copies > 1 (a node every rank runs on the same data: no rows split, its accumulation counted
  // once by the copies already) it would count 1 / 64 of once: refused (rereadJ), by the pre-pricing check too
  f.g.nodes[0].attrs["model_flops_weight_copies"] = 8.0;
  f.g.nodes[0].attrs["model_flops_copies"] = 8.0;
  const std::string both = "node 'layers.self_attn.qkv_proj': attrs.model_flops_weight_copies and "
                           "attrs.model_flops_copies exclude each other (copies: ranks that run the node on the same "
                           "data, whose rows are not split)";
  CHECK_THROWS_WITH(f.phase_model_flops(phase::accumulate), both);
  CHECK_THROWS_WITH(node_model_flops_check(f.g.nodes[0], "node 'layers.self_attn.qkv_proj'"), both);
  f.g.nodes[0].attrs["model_flops_copies"] = 1.0;  // either alone, or at 1, is taken
  CHECK(f.phase_model_flops(phase::accumulate) == 32 * 1024.0 / 8);
}

TEST_CASE("unknown predictor names are rejected with a suggestion", "[roofline]") {
  CHECK(predictor_make("roofline")->name() == "roofline");
  CHECK_THROWS_WITH(predictor_make("roofine"), "unknown predictor 'roofine' (did you mean 'roofline'?); known: neusight, roofline, roofline-reference");
}
