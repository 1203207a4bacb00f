// tests/core/test_tensor_core.cpp — tensor-core GEMMs: the AIConfigurator reader, the family of a kernel, the
// shipped gemm_tc16/gemm_fp8 predictors' physical sanity, and the roofline fallback where a vendor has no weights.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ingest/dataset.h"
#include "core/roofline.h"
#include "core/tile_model.h"
#include "core/weights.h"
#include "lua/session.h"
#include "session_util.h"
#include "test_util.h"

using namespace ns;
using ns_test::source_dir;

namespace {
kernel linear(int64_t m, int64_t in, int64_t out, const std::string& dtype) {
  kernel g;
  g.kind = kernel_kind::gemm, g.name = "Linear", g.dtype = dtype, g.b = 1, g.m = m, g.n = in, g.k = out;
  g.flops = 2.0 * double(m) * double(in) * double(out);
  g.bytes = dtype_bytes(dtype) * double(m * in + in * out + m * out);
  return g;
}

// neusight.kernels' cost formulas for the rows bench_load reads.
kernel_costing costs() {
  static session s(ns_test::session_opts(source_dir));
  return s.costing();
}

// Seconds for each kernel with the rule tiles and the shipped weights.
std::vector<double> predict(std::vector<kernel> ks, const gpu_spec& gpu, const std::string& predictor = "neusight") {
  session_options o;
  o.data_root = source_dir;
  session s(o);
  std::vector<kernel_instance> inst;
  for (auto& k : ks) inst.push_back({0, phase::forward, k});
  s.tiles_select(inst, gpu);
  const auto pred = predictor_make(predictor, source_dir / "weights");
  pred->train_convention_set(s.training_convention());
  return pred->predict(inst, gpu);
}
}  // namespace

// What the rows are read for has no default (a caller that forgot it trained on rows meant for evaluation alone): a
// call without a bench_use does not compile, with one it does.
template <class Void, class... A>
struct loads_with : std::false_type {};
template <class... A>
struct loads_with<std::void_t<decltype(bench_load(std::declval<A>()...))>, A...> : std::true_type {};
template <class Void, class... A>
struct parses_with : std::false_type {};
template <class... A>
struct parses_with<std::void_t<decltype(bench_parse(std::declval<A>()...))>, A...> : std::true_type {};
using paths_t = const std::vector<std::string>&;
using cost_t = const kernel_costing&;
using resolve_t = const bench_device_resolver&;
static_assert(!loads_with<void, paths_t, const gpu_catalog&, cost_t, std::optional<family>>::value, "no bench_use");
static_assert(!loads_with<void, paths_t, gpu_data_resolver&, cost_t, std::optional<family>>::value, "no bench_use");
static_assert(loads_with<void, paths_t, const gpu_catalog&, cost_t, bench_use, std::optional<family>>::value, "one");
static_assert(!parses_with<void, std::string_view, std::string, resolve_t>::value, "no bench_use");
static_assert(!parses_with<void, std::string_view, std::string, resolve_t, std::optional<family>>::value, "no bench_use");
static_assert(parses_with<void, std::string_view, std::string, resolve_t, bench_use>::value, "one");

TEST_CASE("AIConfigurator gemm.csv: m, n, k map to Linear (T, I, O) — unmodelled dtypes are counted, not read") {
  const gpu_catalog cat(source_dir / "gpus");
  const auto d = bench_load({(source_dir / "tests/fixtures/aiconfigurator/gemm.csv").string()}, cat, costs(), bench_use::train, std::nullopt);
  REQUIRE(d.rows.size() == 3);
  const auto& r = d.rows[0];
  CHECK(r.gpu->name == "B200");
  CHECK(r.fam == family::gemm_tc16);
  CHECK(r.k.dtype == "bf16");
  CHECK(r.latency_ms == Approx(0.0902257760365804));
  CHECK(r.k.flops == Approx(2.0 * 4096 * 4096 * 4096));
  // Y[m,n] = X[m,k]·W[n,k]ᵀ with m = 1, n = 4096 out-features, k = 4096 in-features.
  const auto& gemv = d.rows[1];
  CHECK((gemv.k.m == 1 && gemv.k.n == 4096 && gemv.k.k == 4096));
  CHECK(gemv.k.bytes == Approx(2.0 * (4096 + 4096.0 * 4096 + 4096)));
  CHECK(d.rows[2].fam == family::gemm_fp8);
  CHECK(d.rows[2].k.bytes == Approx(1.0 * (2048.0 * 4096 + 4096.0 * 8192 + 2048.0 * 8192)));
  CHECK(d.skipped.at("gemm_dtype 'nvfp4' is not modelled") == 1);
  CHECK(d.skipped.at("gemm_dtype 'fp8_block' is not modelled") == 1);
  // Family filter and GPU exclusion apply to these rows as to the NeuSight ones.
  CHECK(bench_load({(source_dir / "tests/fixtures/aiconfigurator/gemm.csv").string()}, cat, costs(), bench_use::train, family::gemm_fp8).rows.size() == 1);
  CHECK(bench_load({(source_dir / "tests/fixtures/aiconfigurator/gemm.csv").string()}, cat, costs(), bench_use::train, std::nullopt, {"B200"}).rows.empty());
}

// neusight.kernels refuses a GEMM operand of more than 2^48 elements (m = k = 2^31: X is 2^62): bench_load's costing
// names the row (it named none: "bad argument to 'linear' (…)" and "while costing kernel Linear").
TEST_CASE("AIConfigurator gemm.csv: a row whose GEMM neusight.kernels refuses is an error at its file:line") {
  const gpu_catalog cat(source_dir / "gpus");
  const ns_test::temp_dir t;
  const std::string head = "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n";
  const std::string ok = "VLLM,0.24.0,NVIDIA B200,gemm,torch.nn.functional.linear,bfloat16,4096,4096,4096,0.09\n";
  const auto file = t.write("gemm.csv", head + ok + "VLLM,0.24.0,NVIDIA B200,gemm,torch.nn.functional.linear,bfloat16,"
                                                   "2147483648,4096,2147483648,0.09\n");
  CHECK_THROWS_WITH(bench_load({file.string()}, cat, costs(), bench_use::train, std::nullopt),
                    file.string() + ":3: bad argument to 'linear' (operand X has more than 2^48 elements)");
}

TEST_CASE("AIConfigurator nccl.csv beside gemm.csv: its collective rows are counted as skipped, not an error") {
  // a device folder's *.csv (the README's eval kernels $DATA/aiconfigurator/l40s/*.csv) holds nccl.csv too; it
  // stopped the run with "missing column 'OPName'"
  const gpu_catalog cat(source_dir / "gpus");
  const auto d = bench_load({(source_dir / "tests/fixtures/aiconfigurator/gemm.csv").string(),
                             (source_dir / "tests/fixtures/aiconfigurator/nccl.csv").string()},
                            cat, costs(), bench_use::train, std::nullopt);
  CHECK(d.rows.size() == 3);  // gemm.csv's, as alone
  size_t nccl = 0;
  for (const auto& [why, n] : d.skipped)
    if (why.find("AIConfigurator NCCL collective rows (nccl.csv) have no kernel family") == 0) nccl += n;
  CHECK(nccl == 2);
}

// tests/fixtures/aiconfigurator/generation_attention.csv: rows 2-4 are ../shared/data/aiconfigurator/b200_sxm's (decode
// of 8 sequences, 32 query / 8 KV heads of 128, 4096 keys: bf16 cache, fp8 cache, fp8 cache with a 128-token window);
// row 5 is made up (fp8 compute: the data has none). context_attention.csv, b200_sxm's too: prefills of 4 sequences, 32
// query / 8 KV heads of 128, over an fp8 and a bf16 cache at 1024 tokens, an fp8 one at 512, both at 8192, and an fp8
// one at 512 with a 128-token window.
namespace {
const std::string fixture_decode = (source_dir / "tests/fixtures/aiconfigurator/generation_attention.csv").string();
const std::string fixture_prefill = (source_dir / "tests/fixtures/aiconfigurator/context_attention.csv").string();
const std::string skip_fp8_kv_train =
    "decode attention over an fp8 KV cache is never trained on (the shipped weights saw 16-bit caches only; eval "
    "kernels scores these rows)";
const std::string skip_fp8_kv_prefill_train =
    "prefill attention over an fp8 KV cache is never trained on (the shipped weights saw 16-bit caches only; eval "
    "kernels scores these rows)";
}  // namespace

TEST_CASE("AIConfigurator generation_attention.csv for eval: an fp8 KV cache under bf16 compute reads K and V at 1 byte") {
  const gpu_catalog cat(source_dir / "gpus");
  const auto d = bench_load({fixture_decode}, cat, costs(), bench_use::evaluate, std::nullopt);
  REQUIRE(d.rows.size() == 2);
  const auto &bf16 = d.rows[0], &fp8 = d.rows[1];
  CHECK(fp8.fam == family::attention_decode);
  CHECK(fp8.k.dtype == "bf16");
  CHECK(fp8.k.kv_dtype == "fp8");
  CHECK(bf16.k.kv_dtype.empty());
  CHECK(fp8.kv_cache == "fp8");  // its cell: attention_decode/kv_fp8
  CHECK(bf16.kv_cache.empty());
  CHECK(fp8.latency_ms == Approx(0.01526933287580808));
  // the README's decode bytes: Q read and O written at the compute dtype, K and V of every cached key at the cache's
  const double b = 8, heads = 32, kv_heads = 8, d_head = 128, keys = 4096;
  const double q_o = 2 * b * heads * 2 * d_head, kv = b * kv_heads * 2 * d_head * keys;
  CHECK(bf16.k.bytes == Approx(q_o + 2 * kv));
  CHECK(fp8.k.bytes == Approx(q_o + 1 * kv));
  CHECK(fp8.k.flops == Approx(bf16.k.flops));  // the kernel dequantises: the same FLOPs at the compute dtype
  CHECK(fp8.k.kv_bytes == Approx(b * kv_heads * 2 * d_head));  // one more key: its K and V at 1 byte
  // still not modelled, counted: fp8 compute, and the window (as for a bf16 cache)
  CHECK(d.skipped.at("attention with fp8 compute (attn_dtype fp8) is not modelled") == 1);
  CHECK(d.skipped.at("sliding-window attention is not modelled") == 1);
  CHECK(d.skipped.count(skip_fp8_kv_train) == 0);
}

TEST_CASE("AIConfigurator attention rows of a family not requested are counted under it, not as not modelled") {
  // train --family attention_prefill over generation_attention.csv: every row is the decode family's, its fp8 compute
  // and sliding-window rows included (they were counted under their "not modelled" reasons)
  const gpu_catalog cat(source_dir / "gpus");
  for (const auto use : {bench_use::train, bench_use::evaluate}) {
    const auto d = bench_load({fixture_decode}, cat, costs(), use, family::attention_prefill);
    CHECK(d.rows.empty());
    REQUIRE(d.skipped.size() == 1);
    CHECK(d.skipped.at("family attention_decode not requested") == 4);
  }
  const auto p = bench_load({fixture_prefill}, cat, costs(), bench_use::evaluate, family::attention_decode);
  REQUIRE(p.skipped.size() == 1);
  CHECK(p.skipped.count("family attention_prefill not requested") == 1);
}

TEST_CASE("AIConfigurator attention rows for training: decode over an fp8 KV cache is skipped and counted") {
  // train reads the same files (weights/train.sh: generation_attention.csv); the shipped weights were fitted without
  // these rows, and training on them would change them
  const gpu_catalog cat(source_dir / "gpus");
  for (const auto only : {std::optional<family>(), std::optional<family>(family::attention_decode)}) {
    const auto d = bench_load({fixture_decode}, cat, costs(), bench_use::train, only);
    REQUIRE(d.rows.size() == 1);
    CHECK(d.rows[0].k.kv_dtype.empty());
    CHECK(d.rows[0].latency_ms == Approx(0.029498666524887085));
    CHECK(d.skipped.at(skip_fp8_kv_train) == 2);  // window or not
    CHECK(d.skipped.at("attention with fp8 compute (attn_dtype fp8) is not modelled") == 1);
  }
}

TEST_CASE("AIConfigurator context_attention.csv for eval: a prefill over an fp8 KV cache is the compute dtype's kernel") {
  // a forecast with --kv-dtype fp8 prices prefill attention at the compute dtype whatever the cache (ops/sdpa.lua takes
  // no kv_dtype; the cache write is a kernel of its own): eval kernels scores the measured fp8-cache rows against that
  // kernel, marked by their cache (bench_row::kv_cache, the cell attention_prefill/kv_fp8)
  const gpu_catalog cat(source_dir / "gpus");
  const auto d = bench_load({fixture_prefill}, cat, costs(), bench_use::evaluate, std::nullopt);
  REQUIRE(d.rows.size() == 5);
  std::string caches;
  for (const auto& r : d.rows) {
    CHECK(r.fam == family::attention_prefill);
    CHECK(r.k.dtype == "bf16");
    CHECK(r.k.kv_dtype.empty());
    caches += (caches.empty() ? "" : " ") + (r.kv_cache.empty() ? std::string("-") : r.kv_cache);
  }
  CHECK(caches == "fp8 - fp8 fp8 -");
  for (const auto& [fp8, bf16] : {std::pair{0, 1}, std::pair{3, 4}}) {  // 1024 and 8192 tokens, each cache
    const auto &a = d.rows[fp8].k, &b = d.rows[bf16].k;
    CHECK(a.m == b.m);
    CHECK(a.flops == b.flops);
    CHECK(a.bytes == b.bytes);  // K and V at 2 bytes, as the forecast reads them
    CHECK(a.kv_bytes == b.kv_bytes);
  }
  CHECK(d.rows[0].latency_ms == Approx(0.08285333216190338));
  CHECK(d.skipped.at("sliding-window attention is not modelled") == 1);  // as for a bf16 cache
  CHECK(d.skipped.count(skip_fp8_kv_prefill_train) == 0);
}

TEST_CASE("AIConfigurator attention rows for training: a prefill over an fp8 KV cache is skipped and counted") {
  // train reads the same files (weights/train.sh: context_attention.csv); the shipped weights were fitted without them
  const gpu_catalog cat(source_dir / "gpus");
  for (const auto only : {std::optional<family>(), std::optional<family>(family::attention_prefill)}) {
    const auto d = bench_load({fixture_prefill}, cat, costs(), bench_use::train, only);
    REQUIRE(d.rows.size() == 2);
    for (const auto& r : d.rows) CHECK(r.kv_cache.empty());
    CHECK(d.rows[0].latency_ms == Approx(0.0745600014925003));
    CHECK(d.skipped.at(skip_fp8_kv_prefill_train) == 4);  // window or not
    CHECK(d.skipped.count("sliding-window attention is not modelled") == 0);
  }
}

TEST_CASE("kernel family by dtype: fp32 GEMMs stay SIMT families, tensor-core dtypes get their own") {
  CHECK(family_of(linear(8, 8, 8, "fp32")) == family::linear);
  CHECK(family_of(linear(8, 8, 8, "bf16")) == family::gemm_tc16);
  CHECK(family_of(linear(8, 8, 8, "fp16")) == family::gemm_tc16);
  CHECK(family_of(linear(8, 8, 8, "tf32")) == family::gemm_tc16);
  CHECK(family_of(linear(8, 8, 8, "fp8")) == family::gemm_fp8);
  kernel b = linear(8, 8, 8, "bf16");
  b.kind = kernel_kind::bmm;
  CHECK(family_of(b) == family::gemm_tc16);
  CHECK(family_parse("gemm_tc16") == family::gemm_tc16);
}

TEST_CASE("shipped tensor-core predictors: large GEMMs run at 40-100 % of the dtype's peak, never above it") {
  const gpu_catalog cat(source_dir / "gpus");
  for (const char* name : {"H100", "A100-SXM4-80GB", "L4", "B200"}) {
    const gpu_spec gpu = cat.resolve(name);
    for (const char* dtype : {"bf16", "fp16", "fp8", "tf32"}) {
      if (std::string(dtype) == "fp8" && !(gpu.peak_fp8_tflops > 0)) continue;
      const std::vector<kernel> ks = {linear(8192, 8192, 8192, dtype), linear(16384, 4096, 14336, dtype)};
      const auto t = predict(ks, gpu);
      const auto roof = predict(ks, gpu, "roofline");
      for (size_t i = 0; i < ks.size(); ++i) {
        INFO(name << " " << dtype << " kernel " << i << ": " << t[i] << " s vs roofline " << roof[i] << " s");
        CHECK(t[i] >= roof[i]);
        CHECK(t[i] <= 2.5 * roof[i]);
      }
    }
  }
}

TEST_CASE("shipped tensor-core predictors: decode GEMMs are bounded by the weights' bytes, and grow with them") {
  const gpu_spec gpu = gpu_catalog(source_dir / "gpus").resolve("H100");
  std::vector<kernel> ks;
  for (int64_t out : {4096, 8192, 16384, 32768}) ks.push_back(linear(1, 4096, out, "bf16"));
  const auto t = predict(ks, gpu);
  for (size_t i = 0; i < ks.size(); ++i) {
    INFO("out-features " << ks[i].k << ": " << t[i] * 1e6 << " us");
    CHECK(t[i] >= ks[i].bytes / (gpu.mem_bw_gbps * 1e9));            // never faster than the weights' bytes
    CHECK(t[i] <= 4 * ks[i].bytes / (gpu.mem_bw_gbps * 1e9) + 20e-6);  // nor absurdly slower
    if (i) CHECK(t[i] > t[i - 1]);
  }
}

TEST_CASE("fp8 Linear: the activation quantisation (one atomic per token row, then the passes' bytes) is priced") {
  // AIConfigurator's fp8 rows (vLLM, dynamic per-tensor scale) take about 12 cycles per token row beyond the GEMM:
  // 32768 tokens of a 32 x 32 Linear take 213.2 us in fp8 on a B200 (16384: 110.0 us) and 4.5 us in bf16
  // (../shared/data/aiconfigurator/b200_sxm/gemm.csv; B200 is a training GPU of the shipped weights).
  const quant_stage q = weights_load(source_dir / "weights/nvidia/gemm_fp8").quant;
  CHECK(q.row_cycles > 5);
  CHECK(q.row_cycles < 40);
  CHECK(q.bytes_per_element > 0);
  CHECK(weights_load(source_dir / "weights/nvidia/gemm_tc16").quant.row_cycles == 0);
  const gpu_spec gpu = gpu_catalog(source_dir / "gpus").resolve("B200");
  kernel fp8 = linear(32768, 32, 32, "fp8"), half = linear(16384, 32, 32, "fp8");
  fp8.act_quant = half.act_quant = "dynamic_tensor";
  const auto t = predict({fp8, linear(32768, 32, 32, "bf16"), half, linear(32768, 32, 32, "fp8")}, gpu);
  INFO("fp8 " << t[0] * 1e6 << " us (measured 213.2), 16384 tokens " << t[2] * 1e6 << " us (110.0), bf16 "
              << t[1] * 1e6 << " us, fp8 without the stage " << t[3] * 1e6 << " us");
  CHECK(t[0] == Approx(213.2e-6).epsilon(0.15));
  CHECK(t[2] == Approx(110.0e-6).epsilon(0.15));
  CHECK(t[0] > 10 * t[1]);
  CHECK(t[3] < 0.1 * t[0]);  // a kernel without act_quant (training's GEMMs) has no stage
}

TEST_CASE("a vendor without tensor-core weights: roofline for those GEMMs, with a warning") {
  const gpu_spec gpu = gpu_catalog(source_dir / "gpus").resolve("MI300X");
  session_options o;
  o.data_root = source_dir;
  session s(o);
  std::vector<kernel_instance> inst = {{0, phase::forward, linear(4096, 4096, 4096, "bf16")}};
  s.tiles_select(inst, gpu);
  const auto pred = predictor_make("neusight", source_dir / "weights");
  const auto t = pred->predict(inst, gpu);
  CHECK(t[0] == Approx(roofline_seconds(inst[0].k, gpu)));
  REQUIRE(pred->warnings().size() == 1);
  CHECK_THAT(pred->warnings()[0], Catch::Matchers::Contains("no gemm_tc16 weights for amd GPUs"));
}

TEST_CASE("sdpa attention end to end: fused kernels each way, no scores tensor, faster than eager in bf16") {
  auto run = [](const std::string& attention) {
    const auto r = ns_test::run_cli("predict --model gpt2_large --gpu h100 --mode train --optimizer none --batch 4 "
                                    "--seq 1024 --dtype bf16 --format json --attention " + attention);
    INFO(r.err);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto sdpa = run("sdpa"), eager = run("eager");
  int fwd = 0, bwd = 0, softmax = 0;
  for (const auto& op : sdpa["ops"]) {
    if (op["kind"] == "attention") {
      (op["phase"] == "forward" ? fwd : bwd) += 1;
      CHECK(op["tile"]["blocks"].get<double>() == 4 * 20 * (1024 / 128));
      CHECK(op["dims"]["heads"] == 20);
    }
    if (op["kind"] == "softmax" && op["layer"] == "h") ++softmax;
  }
  CHECK(fwd == 1);
  CHECK(bwd == 1);
  CHECK(softmax == 0);
  CHECK(sdpa["latency_ms"].get<double>() < eager["latency_ms"].get<double>());
  // Same parameters and GEMMs: only the attention core differs.
  CHECK(sdpa["params"] == eager["params"]);
}
