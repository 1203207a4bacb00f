// tests/lua_api/test_predict.cpp — ns.predict and Lua predictors behind the C++ interface (issue 14): a Lua predictor
// that hands its kernels to ns.predict gives the C++ predictor's numbers bit for bit; ns.predict deduplicates, keeps a
// given tile, selects a missing one, and reads a GPU table or name.
#include <catch2/catch.hpp>

#include <filesystem>

#include "core/gpu_spec.h"
#include "core/roofline.h"
#include "lua/session.h"
#include "test_util.h"
#include "weights_util.h"

using ns_test::source_dir;
using ns_test::temp_dir;

namespace {

ns::kernel make(ns::kernel_kind kind, const char* name, const char* dtype, int64_t b, int64_t m, int64_t n, int64_t k,
                int64_t rows, int64_t hidden, double flops, double bytes, const char* op = "") {
  ns::kernel x;
  x.kind = kind, x.name = name, x.dtype = dtype, x.op = op;
  x.b = b, x.m = m, x.n = n, x.k = k, x.rows = rows, x.hidden = hidden, x.flops = flops, x.bytes = bytes;
  return x;
}

// One kernel of each kind the predictors price, fp32 and bf16, a duplicate, and a fixed-latency kernel.
std::vector<ns::kernel_instance> kernel_mix() {
  using kk = ns::kernel_kind;
  std::vector<ns::kernel> ks = {
      make(kk::gemm, "Linear", "fp32", 1, 4096, 1024, 4096, 0, 0, 2.0 * 4096 * 1024 * 4096, 4.0 * (4096 * 1024 + 1024 * 4096 + 4096 * 4096)),
      make(kk::bmm, "BMM", "fp32", 16, 512, 64, 512, 0, 0, 2.0 * 16 * 512 * 64 * 512, 4.0 * 16 * (512 * 64 * 2 + 512 * 512)),
      make(kk::gemm, "Linear", "bf16", 1, 8192, 4096, 4096, 0, 0, 2.0 * 8192 * 4096 * 4096, 2.0 * (8192 * 4096 * 2 + 4096 * 4096)),
      make(kk::elementwise, "VECadd", "fp32", 0, 0, 0, 0, 4096, 1024, 4096.0 * 1024, 12.0 * 4096 * 1024, "add"),
      make(kk::softmax, "VECsoftmax", "fp32", 0, 0, 0, 0, 8192, 512, 5.0 * 8192 * 512, 8.0 * 8192 * 512),
      make(kk::layernorm, "VECln", "fp32", 0, 0, 0, 0, 4096, 1024, 6.0 * 4096 * 1024, 8.0 * 4096 * 1024),
      make(kk::memory, "MEM", "fp32", 0, 0, 0, 0, 0, 0, 0, 1e8),
  };
  ks.push_back(ks[0]);  // a duplicate
  ns::kernel fixed = make(kk::memory, "MEM", "fp32", 0, 0, 0, 0, 0, 0, 0, 1e6);
  fixed.seconds = 3e-5;
  ks.push_back(fixed);
  std::vector<ns::kernel_instance> out;
  for (auto& k : ks) out.push_back({0, ns::phase::forward, k});
  return out;
}

ns::session_options options(const temp_dir& t) {
  ns::session_options o;
  o.data_root = source_dir;
  o.script_dirs.push_back(t.path);
  return o;
}

}  // namespace

TEST_CASE("ns.predict: a Lua predictor handing its kernels to ns.predict equals the C++ predictor", "[lua][predict]") {
  temp_dir t;
  for (const char* name : {"neusight", "roofline"})
    t.write(std::string("neusight/predictors/via_") + name + ".lua",
            std::string("local ns = require 'neusight'\n"
                        "return { predict = function(kernels, gpu) return ns.predict(kernels, gpu, '") + name +
                "') end }\n");
  ns::session s(options(t));
  for (const char* gpu_name : {"l4", "h100", "mi300x"}) {
    const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve(gpu_name);
    auto ks = kernel_mix();
    s.tiles_select(ks, gpu);
    for (const char* name : {"neusight", "roofline"}) {
      INFO(gpu_name << " " << name);
      // the session's built-in (with scripts/neusight/efficiency.lua for the families it has no weights of: MI300X)
      const auto want = s.predictor_make(name, source_dir / "weights")->predict(ks, gpu);
      const auto lua = s.predictor_make(std::string("via_") + name, source_dir / "weights");
      const auto got = lua->predict(ks, gpu);
      REQUIRE(got.size() == ks.size());
      for (size_t i = 0; i < ks.size(); ++i) CHECK(got[i] == want[i]);  // bit for bit
      CHECK(got.back() == 3e-5);  // a fixed latency bypasses the predictor
      CHECK(lua->name() == std::string("via_") + name);
    }
  }
}

TEST_CASE("ns.predict: duplicates, given and selected tiles, GPU tables and names", "[lua][predict]") {
  temp_dir t;
  // Each test_* function raises on failure (session::lua_test_run).
  const auto file = t.write("test_ns_predict.lua", R"lua(
local ns = require "neusight"
local function gemm(m, n, k) return { kind = "gemm", name = "Linear", dtype = "fp32", b = 1, m = m, n = n, k = k,
                                      flops = 2 * m * n * k, bytes = 4 * (m * n + n * k + m * k) } end
return {
  test_duplicates_and_order = function()
    local a, b = gemm(1024, 1024, 1024), gemm(64, 4096, 64)
    local s = ns.predict({ a, b, a, b, a }, "t4", "neusight")
    assert(#s == 5)
    assert(s[1] == s[3] and s[3] == s[5] and s[2] == s[4], "identical kernels, identical times")
    assert(s[1] > 0 and s[2] > 0 and s[1] ~= s[2])
  end,
  test_given_tile_is_kept = function()
    local k = gemm(4096, 4096, 4096)
    local auto = ns.predict({ k }, "t4", "neusight")[1]
    local small = gemm(4096, 4096, 4096)
    small.tile = { m = 32, k = 32, split = 1 }
    local forced = ns.predict({ small }, "t4", "neusight")[1]
    assert(forced ~= auto, "a 32x32 tile is not the library's choice and prices differently")
    local partial = gemm(4096, 4096, 4096)
    partial.tile = { blocks = 64 }
    local ok, err = pcall(ns.predict, { partial }, "t4", "neusight")
    assert(not ok and err:find("tile: field 'flops' must be a number (got nil)", 1, true), err)
  end,
  test_bad_arguments = function()
    local ok, err = pcall(ns.predict, "x", "t4", "roofline")
    assert(not ok and err:find("bad argument #1 to 'predict'", 1, true), err)
    ok, err = pcall(ns.predict, {}, 42, "roofline")
    assert(not ok and err:find("bad argument #2 to 'predict'", 1, true), err)
    ok, err = pcall(ns.predict, {}, "t4")
    assert(not ok and err:find("bad argument #3 to 'predict'", 1, true), err)
    ok, err = pcall(ns.predict, { gemm(1, 1, 1) }, "t4", "rooflin")
    assert(not ok and err:find("unknown built-in predictor 'rooflin' (did you mean 'roofline'?)", 1, true), err)
    ok, err = pcall(ns.predict, { { kind = "gemm", name = "x" } }, "t4", "roofline")
    assert(not ok and err:find("argument #1 (kernels) kernel #1: field 'flops' must be a number", 1, true), err)
    -- a dtype no engine name answers: named with the kernel and its field, as the reader's other errors
    local odd = gemm(1, 1, 1)
    odd.dtype = "fp33"
    ok, err = pcall(ns.predict, { gemm(1, 1, 1), odd }, "t4", "roofline")
    assert(not ok and err:find("argument #1 (kernels) kernel #2: field 'dtype': unknown dtype 'fp33'", 1, true), err)
    ok, err = pcall(ns.predict, { { kind = "attention", name = "SDPA", dtype = "bf16", b = 1, m = 128, n = 128, k = 64,
      rows = 8, hidden = 8, flops = 4 * 8 * 128 * 128 * 64, bytes = 2 * 3 * 8 * 128 * 64, kv_dtype = "fp33" } },
      "t4", "roofline")
    assert(not ok and err:find("argument #1 (kernels) kernel #1: field 'kv_dtype': unknown dtype 'fp33'", 1, true), err)
    ok, err = pcall(ns.predict, { gemm(1, 1, 1) }, { name = "x" }, "roofline")
    assert(not ok and err:find("argument #2 (gpu): missing GPU field", 1, true), err)
  end,
  test_empty = function()
    assert(#ns.predict({}, "t4", "neusight") == 0)
  end,
}
)lua");
  ns::session s(options(t));
  const auto names = s.lua_test_names(file);
  REQUIRE(names.size() == 4);
  for (const auto& name : names) {
    DYNAMIC_SECTION(name) {
      try {
        s.lua_test_run(file, name);
      } catch (const std::exception& e) {
        FAIL(e.what());
      }
    }
  }
}

TEST_CASE("ns.predict: a GPU table with changed numbers is priced as that GPU", "[lua][predict]") {
  temp_dir t;
  // predict() prices each kernel on the GPU it got and on a copy with twice the DRAM bandwidth; returns the ratio
  t.write("neusight/predictors/ratio.lua", R"lua(
local ns = require "neusight"
return {
  predict = function(kernels, gpu)
    local fast = {}
    for k, v in pairs(gpu) do fast[k] = v end
    fast.mem_bw_gbps = gpu.mem_bw_gbps * 2
    local typo = {}
    for k, v in pairs(gpu) do typo[k] = v end
    typo.mem_bw_gbs = 1  -- a misspelt field is an error, not the unchanged GPU
    local ok, err = pcall(ns.predict, kernels, typo, "roofline")
    assert(not ok and err:find("argument #2 (gpu): unknown field 'mem_bw_gbs' (did you mean 'mem_bw_gbps'?)", 1, true), err)
    local a, b = ns.predict(kernels, gpu, "roofline"), ns.predict(kernels, fast, "roofline")
    local out = {}
    for i = 1, #kernels do out[i] = a[i] / b[i] end
    return out
  end,
})lua");
  ns::session s(options(t));
  const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve("t4");
  ns::kernel mem;
  mem.kind = ns::kernel_kind::memory, mem.name = "MEM", mem.bytes = 1e9;
  const auto got = s.predictor_make("ratio", source_dir / "weights")->predict({{0, ns::phase::forward, mem}}, gpu);
  REQUIRE(got.size() == 1);
  CHECK_THAT(got[0], Catch::Matchers::WithinRel(2.0, 1e-12));
}

// The built-in neusight predictor's efficiency table (scripts/neusight/efficiency.lua, for the families it has no
// weights of), kept per session: each session uses its own script set's, every predictor_make of a session the same;
// a table that fails its check is refused again on the next make, not kept. (That it is read only once is not
// observable here: the module is require's, read-only, so a second read gives the same numbers.)
TEST_CASE("predictor_make: each session its own efficiency table and a bad one refused each time",
          "[lua][predict]") {
  const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve("mi300x");
  const auto bf16_gemm = [&gpu](ns::session& s) {  // the bf16 GEMM of kernel_mix: neusight over roofline
    auto ks = kernel_mix();
    s.tiles_select(ks, gpu);
    const double neusight = s.predictor_make("neusight", source_dir / "weights")->predict(ks, gpu)[2];
    return neusight / s.predictor_make("roofline", source_dir / "weights")->predict(ks, gpu)[2];
  };
  temp_dir half, quarter, bad;
  half.write("neusight/efficiency.lua", "return { gemm_tc16 = 0.5 }\n");
  quarter.write("neusight/efficiency.lua", "return { gemm_tc16 = 0.25 }\n");
  bad.write("neusight/efficiency.lua", "return { gemm_tc16 = 1.5 }\n");
  ns::session a(options(half)), b(options(quarter));
  for (int i = 0; i < 2; ++i) {
    CHECK_THAT(bf16_gemm(a), Catch::Matchers::WithinRel(2.0, 1e-12));
    CHECK_THAT(bf16_gemm(b), Catch::Matchers::WithinRel(4.0, 1e-12));
  }
  ns::session c(options(bad));
  for (int i = 0; i < 2; ++i)
    CHECK_THROWS_WITH(c.predictor_make("neusight", source_dir / "weights"),
                      Catch::Matchers::Contains("field 'gemm_tc16' must be a number in (0, 1]"));
  // a misspelt family is refused, not left to price the real one at the bare roofline
  temp_dir typo;
  typo.write("neusight/efficiency.lua", "return { gemm_tc61 = 0.5 }\n");
  ns::session d(options(typo));
  CHECK_THROWS_WITH(d.predictor_make("neusight", source_dir / "weights"),
                    Catch::Matchers::Contains("unknown family 'gemm_tc61' (did you mean 'gemm_tc16'?)"));
  // roofline_derated reads the table itself: the same range, checked once as it loads (it was checked again for
  // every kernel it priced)
  temp_dir bad_full;  // every family, one out of range
  bad_full.write("neusight/efficiency.lua",
                 "return { linear = 0.8, bmm = 0.7, gemm_tc16 = 1.5, gemm_fp8 = 0.5, elementwise = 0.8, softmax = 0.7, "
                 "layernorm = 0.6, attention_prefill = 0.4, attention_decode = 0.7, memory = 0.8 }\n");
  ns::session e(options(bad_full));
  CHECK_THROWS_WITH(e.predictor_make("roofline_derated", source_dir / "weights"),
                    Catch::Matchers::Contains("field 'gemm_tc16' must be a number in (0, 1]"));
}

// the dense peak of a dtype as people write it: the engine's name neusight.kernels dtype_name reads (the one
// normaliser, as run.peak_tflops gives the figures theirs), then the GPU file's peak; an unknown name is an error
TEST_CASE("session dense_peak_tflops: people's dtype spellings read as the engine's names", "[lua][roofline]") {
  ns::session_options o;
  o.data_root = source_dir;
  ns::session s(o);
  const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve("h100");
  const auto bf16 = ns::dense_peak_tflops(gpu, "bf16");
  REQUIRE(bf16.has_value());
  CHECK(*bf16 > 900);  // the tensor peak, not the fp32 vector peak
  for (const char* spelt : {"bf16", "BF16", "bfloat16", "torch.bfloat16"}) {
    INFO(spelt);
    CHECK(s.dense_peak_tflops(gpu, spelt) == bf16);
  }
  CHECK(s.dense_peak_tflops(gpu, "half") == ns::dense_peak_tflops(gpu, "fp16"));
  CHECK_THROWS_WITH(s.dense_peak_tflops(gpu, "bf17"), Catch::Contains("unknown dtype 'bf17'"));
}

// --predictor neusight_vector_form (scripts/neusight/predictors/neusight_vector_form.lua, constants in
// scripts/neusight/vector_form.lua; weights/VECTOR_FORM_RULE.md): on an NVIDIA GPU beyond the fp32 weights' per-SM
// bandwidth (H100) or memory (L4) range a softmax kernel takes max(floor, (roofline + s_half · SMs / bw) / e); every
// other kernel there, and every kernel on a GPU in range (the A100-PCIE-40GB holds the range's bandwidth maximum) or of
// another vendor, is the neusight predictor's bit for bit.
TEST_CASE("neusight_vector_form: softmax by the form beyond the fp32 range, neusight elsewhere bit for bit",
          "[lua][predict]") {
  ns::session_options o;
  o.data_root = source_dir;
  ns::session s(o);
  const double e = 0.6105, s_half = 155872, floor_s = 31.92e-6;  // scripts/neusight/vector_form.lua softmax
  using kk = ns::kernel_kind;
  for (const char* gpu_name : {"h100", "l4", "a100-pcie-40gb", "a10", "l40s", "mi300x"}) {
    const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve(gpu_name);
    auto ks = kernel_mix();
    ks.push_back({0, ns::phase::forward, make(kk::softmax, "VECsoftmax", "bf16", 0, 0, 0, 0, 4, 1024, 5.0 * 4 * 1024,
                                              4.0 * 4 * 1024)});
    ks.push_back({0, ns::phase::forward, make(kk::softmax, "VECsoftmax", "fp32", 0, 0, 0, 0, 65536, 4096,
                                              5.0 * 65536 * 4096, 8.0 * 65536 * 4096)});
    s.tiles_select(ks, gpu);
    const auto mlp = s.predictor_make("neusight", source_dir / "weights")->predict(ks, gpu);
    const auto roof = s.predictor_make("roofline", source_dir / "weights")->predict(ks, gpu);
    const auto got = s.predictor_make("neusight_vector_form", source_dir / "weights")->predict(ks, gpu);
    REQUIRE(got.size() == ks.size());
    const bool beyond = gpu.vendor == "nvidia" && (gpu.mem_bw_gbps / gpu.num_sm > 1555.0 / 108 ||
                                                   gpu.mem_gb / gpu.num_sm > 0.4);
    CHECK(beyond == (std::string(gpu_name) == "h100" || std::string(gpu_name) == "l4"));
    int formed = 0, above_floor = 0;
    for (size_t i = 0; i < ks.size(); ++i) {
      INFO(gpu_name << " kernel " << i << " " << ks[i].k.name << " " << ks[i].k.dtype);
      if (beyond && ks[i].k.kind == kk::softmax) {
        const double want = std::max(floor_s, (roof[i] + s_half * gpu.num_sm / (gpu.mem_bw_gbps * 1e9)) / e);
        CHECK_THAT(got[i], Catch::Matchers::WithinRel(want, 1e-12));
        CHECK(got[i] != mlp[i]);
        ++formed, above_floor += got[i] > floor_s;
      } else {
        CHECK(got[i] == mlp[i]);  // bit for bit
      }
    }
    CHECK(formed == (beyond ? 3 : 0));
    CHECK((above_floor >= 1) == beyond);  // at least the 65536 x 4096 fp32 one: the form, not its floor
  }
}

// Which GPUs are beyond the range is the weights' manifests' word (ns.trained_gpus: the softmax manifest's training.gpus
// under --weights DIR), through the range warning's one rule (scripts/neusight/uncertainty.lua per_sm_beyond), not a
// typed-in copy of the shipped weights' range: a fold trained without the A100-PCIE-40GB (the range's bandwidth
// maximum) takes the form on that GPU, and one trained with the B200 too keeps the MLP on it.
TEST_CASE("neusight_vector_form: the range is the --weights DIR's softmax manifest's training GPUs", "[lua][predict]") {
  namespace fs = std::filesystem;
  const auto weights_with = [](const temp_dir& t, const std::string& softmax_gpus) {
    return ns_test::weights_with_training_gpus(t, softmax_gpus, [](const std::string& f) { return f == "softmax"; });
  };
  ns::session_options o;
  o.data_root = source_dir;
  ns::session s(o);
  const double e = 0.6105, s_half = 155872, floor_s = 31.92e-6;  // scripts/neusight/vector_form.lua softmax
  using kk = ns::kernel_kind;
  // the softmax kernels' forecasts by the given weights root: { by the form?, … } (the form's value checked)
  const auto formed = [&](const fs::path& root, const char* gpu_name) {
    const ns::gpu_spec gpu = ns::gpu_catalog(source_dir / "gpus").resolve(gpu_name);
    auto ks = kernel_mix();
    s.tiles_select(ks, gpu);
    const auto mlp = s.predictor_make("neusight", root)->predict(ks, gpu);
    const auto roof = s.predictor_make("roofline", root)->predict(ks, gpu);
    const auto got = s.predictor_make("neusight_vector_form", root)->predict(ks, gpu);
    std::vector<bool> out;
    for (size_t i = 0; i < ks.size(); ++i) {
      INFO(gpu_name << " " << root << " kernel " << i << " " << ks[i].k.name);
      if (ks[i].k.kind != kk::softmax) {
        CHECK(got[i] == mlp[i]);
        continue;
      }
      if (got[i] == mlp[i]) {
        out.push_back(false);
        continue;
      }
      const double want = std::max(floor_s, (roof[i] + s_half * gpu.num_sm / (gpu.mem_bw_gbps * 1e9)) / e);
      CHECK_THAT(got[i], Catch::Matchers::WithinRel(want, 1e-12));
      out.push_back(true);
    }
    REQUIRE(out.size() == 1);
    return bool(out[0]);
  };
  const fs::path bundled = source_dir / "weights";
  temp_dir t1, t2;
  const fs::path no_a100 = weights_with(t1, "[ 'P100-PCIE-16GB', 'P4', 'T4', 'V100-PCIE-32GB' ]");
  const fs::path with_b200 = weights_with(t2, "[ 'A100-PCIE-40GB', 'B200', 'P100-PCIE-16GB', 'P4', 'T4', 'V100-PCIE-32GB' ]");
  CHECK_FALSE(formed(bundled, "a100-pcie-40gb"));  // a training GPU: inside
  CHECK(formed(no_a100, "a100-pcie-40gb"));        // 14.4 GB/s per SM > the V100's 11.25: beyond that fold's range
  CHECK(formed(bundled, "b200"));                  // 54 GB/s and 1.22 GB per SM: beyond the shipped range
  CHECK_FALSE(formed(with_b200, "b200"));          // one of that manifest's training GPUs
}

// its table (a --scripts DIR/neusight/vector_form.lua replaces it) is checked as the predictor loads: a misspelt key is
// an error, never the default
TEST_CASE("neusight_vector_form: a misspelt or out-of-range constant in vector_form.lua is an error", "[lua][predict]") {
  const std::pair<const char*, const char*> cases[] = {
      {"return { softmax = { efficency = 0.6, s_half_bytes = 1, floor_s = 0 } }\n", "softmax: unknown field 'efficency'"},
      {"return { sofmax = { efficiency = 0.6, s_half_bytes = 1, floor_s = 0 } }\n", "unknown field 'sofmax'"},
      {"return { softmax = { efficiency = 1.6, s_half_bytes = 1, floor_s = 0 } }\n", "softmax must be { efficiency in (0, 1]"},
      // a typed-in range (the file's before the weights' manifests gave it) is refused, not silently ignored
      {"return { range = { bw_per_sm_gbps = 14, mem_per_sm_gb = 0.4 }, "
       "softmax = { efficiency = 0.6, s_half_bytes = 1, floor_s = 0 } }\n",
       "field 'range' is no longer read: the training range is the weights' manifests'"},
  };
  for (const auto& [text, want] : cases) {
    INFO(text);
    temp_dir t;
    t.write("neusight/vector_form.lua", text);
    ns::session s(options(t));
    CHECK_THROWS_WITH(s.predictor_make("neusight_vector_form", source_dir / "weights"), Catch::Matchers::Contains(want));
  }
}
