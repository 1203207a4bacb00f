// tests/core/test_trace.cpp — trace readers: Chrome trace, wavescale CSV pair, label CSV; exact error messages.
#include <catch2/catch.hpp>

#include "core/text.h"
#include "ingest/pyliteral.h"
#include "ingest/trace.h"
#include "test_util.h"

using namespace ns;
namespace fs = std::filesystem;

namespace {
const fs::path fixtures = ns_test::source_dir / "tests" / "fixtures" / "traces";
std::string at(const fs::path& p) { return p.string(); }
}  // namespace

TEST_CASE("trace: PyTorch profiler Chrome trace", "[trace]") {
  const fs::path p = fixtures / "chrome" / "tiny.json";
  CHECK(trace_detect(p) == trace_format::chrome_json);
  const trace t = trace_load(p);
  CHECK(t.format == trace_format::chrome_json);
  CHECK(t.source == p.string());
  CHECK(t.origin_device == "Tesla V100-PCIE-32GB");
  REQUIRE(t.ops.size() == 4);

  const trace_op& lin = t.ops[0];
  CHECK(lin.id == 0);
  CHECK(lin.name == "aten::linear");
  CHECK(lin.kind == "aten::linear");
  CHECK(lin.phase == trace_phase::forward);
  CHECK(lin.input_shapes == std::vector<trace_shape>{{4, 8}, {16, 8}, {16}});
  REQUIRE(lin.kernels.size() == 1);  // launched by the nested aten::addmm
  const trace_kernel& k = lin.kernels[0];
  CHECK(k.name == "volta_sgemm_32x32");
  CHECK(k.grid == std::array<int64_t, 3>{4, 1, 1});
  CHECK(k.threads_per_block() == 256);
  CHECK(k.registers == 64);
  CHECK(k.shared_bytes == 8192);
  CHECK(k.duration_ns == 2500.0);
  CHECK_FALSE(k.dram_read_bytes);
  CHECK(*lin.measured_ms == Approx(0.0025));

  CHECK(t.ops[1].name == "aten::add");
  CHECK(t.ops[1].input_shapes == std::vector<trace_shape>{{4, 16}, {4, 16}, {}});
  REQUIRE(t.ops[1].kernels.size() == 1);
  CHECK(t.ops[1].kernels[0].duration_ns == 1000.0);

  const trace_op& bw = t.ops[2];
  CHECK(bw.name == "AddmmBackward0");
  CHECK(bw.phase == trace_phase::backward);
  REQUIRE(bw.kernels.size() == 1);
  CHECK(bw.kernels[0].name == "volta_sgemm_nt");
  CHECK(bw.kernels[0].blocks() == 4);
  CHECK(bw.kernels[0].shared_bytes == 16384);

  CHECK(t.ops[3].name == "torch::autograd::AccumulateGrad");
  CHECK(t.ops[3].phase == trace_phase::accumulate);
  CHECK(t.ops[3].kernels.empty());
  CHECK(*t.ops[3].measured_ms == 0.0);

  REQUIRE(t.unattributed.size() == 1);
  CHECK(t.unattributed[0].name == "nccl_kernel");
}

TEST_CASE("trace: malformed Chrome traces", "[trace]") {
  const fs::path bad_kernel = fixtures / "chrome" / "bad_kernel.json";
  CHECK_THROWS_WITH(trace_load(bad_kernel), at(bad_kernel) + ":5: kernel 'elementwise_add': missing args.grid");
  const fs::path bad_grid = fixtures / "chrome" / "bad_grid.json";
  CHECK_THROWS_WITH(trace_load(bad_grid), at(bad_grid) + ":2: kernel 'k': args.grid must be 3 positive integers of at most 2147483647 (got [64,1])");
  const fs::path bad_syntax = fixtures / "chrome" / "bad_syntax.json";
  CHECK_THROWS_WITH(trace_load(bad_syntax), at(bad_syntax) + ":3: invalid JSON: syntax error while parsing object key "
                                                             "- unexpected ','; expected string literal");
  CHECK_THROWS_WITH(trace_parse_chrome(R"({"traceEvents": {}})", "inline.json"), "inline.json: no 'traceEvents' array");
  CHECK_THROWS_WITH(trace_parse_chrome("{\"traceEvents\": [\n 1\n]}", "inline.json"),
                    "inline.json:2: trace event must be an object");
  CHECK_THROWS_WITH(trace_parse_chrome("[\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"ts\": 1}]",
                                       "inline.json"),
                    "inline.json:2: event 'aten::mm': missing number 'dur'");
  // a number of the wrong JSON type is named with its type and text, not reported missing
  auto event = [](const std::string& fields) {
    return trace_parse_chrome("[\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", " + fields + "}]",
                              "trace.json");
  };
  CHECK_THROWS_WITH(event(R"("ts": 1, "dur": "12.5")"),
                    "trace.json:2: event 'aten::mm': 'dur' must be a number (got a string \"12.5\")");
  CHECK_THROWS_WITH(event(R"("ts": "1", "dur": 2)"), "trace.json:2: event 'aten::mm': 'ts' must be a number (got a string \"1\")");
  CHECK_THROWS_WITH(event(R"("ts": 1, "dur": null)"), "trace.json:2: event 'aten::mm': 'dur' must be a number (got null)");
  CHECK_THROWS_WITH(event(R"("ts": 1, "dur": {})"), "trace.json:2: event 'aten::mm': 'dur' must be a number (got an object)");
  CHECK_THROWS_WITH(event(R"("pid": 1.5, "tid": 1, "ts": 1, "dur": 2)"),
                    "trace.json:2: event 'aten::mm': 'pid' must be an integer or a string (got the number 1.5)");
  CHECK_THROWS_WITH(event(R"("pid": 1, "tid": false, "ts": 1, "dur": 2)"),
                    "trace.json:2: event 'aten::mm': 'tid' must be an integer or a string (got a boolean false)");
  // hf_trace.py's metadata: a mode it does not write is an error (a misspelled "decode" calibrated as another phase)
  const std::string events = R"("traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}])";
  CHECK_THROWS_WITH(trace_parse_chrome("{\"neusight\": {\"mode\": \"decoding\"}, " + events + "}", "m.json"),
                    "m.json: key 'neusight': 'mode' must be \"train\", \"inference\", \"prefill\" or \"decode\", got "
                    "\"decoding\"");
  CHECK_THROWS_WITH(trace_parse_chrome("{\"neusight\": {\"mode\": 3}, " + events + "}", "m.json"),
                    "m.json: key 'neusight': 'mode' must be \"train\", \"inference\", \"prefill\" or \"decode\", got 3");
}

TEST_CASE("trace: wavescale manifest + ops.csv + kernels.csv (spec §7.3)", "[trace]") {
  const fs::path p = fixtures / "wavescale" / "trace.json";
  CHECK(trace_detect(p) == trace_format::wavescale);
  const trace t = trace_load(p);
  CHECK(t.origin_device == "V100");
  REQUIRE(t.ops.size() == 4);
  const trace_op& op0 = t.ops[0];
  CHECK(op0.id == 0);
  CHECK(op0.name == "linear");
  CHECK(op0.phase == trace_phase::forward);
  CHECK(*op0.measured_ms == Approx(0.052));
  REQUIRE(op0.kernels.size() == 2);
  CHECK(op0.kernels[0].name == "volta_sgemm_32x32");  // ordered by seq, not by row
  CHECK(op0.kernels[0].blocks() == 8);
  CHECK(op0.kernels[0].shared_bytes == 9216);
  CHECK(*op0.kernels[0].dram_read_bytes == 1048576);
  CHECK(*op0.kernels[0].dram_write_bytes == 524288);
  CHECK(*op0.kernels[0].flop_eff_pct == 35.5);
  CHECK_FALSE(op0.kernels[0].flops_sp);
  CHECK(op0.kernels[1].name == "volta_sgemm_epilogue");
  CHECK_FALSE(t.ops[1].measured_ms);
  CHECK(t.ops[2].phase == trace_phase::backward);
  CHECK(*t.ops[2].measured_ms == Approx(0.0610005));
  CHECK(*t.ops[2].kernels[0].flops_sp == 2.5e8);
  CHECK(t.ops[3].phase == trace_phase::optimizer);
  REQUIRE(t.unattributed.size() == 1);
  CHECK(t.unattributed[0].name == "memset_kernel");
}

TEST_CASE("trace: malformed wavescale traces", "[trace]") {
  const fs::path bad = fixtures / "wavescale_bad";
  CHECK_THROWS_WITH(trace_load(bad / "trace.json"),
                    at(bad / "ops.csv") + ":3: unknown pass 'forward' (expected fwd, bwd, opt or other)");
  CHECK_THROWS_WITH(trace_load(bad / "trace_v2.json"),
                    at(bad / "trace_v2.json") + ": unsupported format 'wavescale-trace/2' (expected 'wavescale-trace/1')");
  const fs::path badk = fixtures / "wavescale_badk";
  CHECK_THROWS_WITH(trace_load(badk / "trace.json"),
                    at(badk / "kernels.csv") + ":3: column 'grid_x': expected an integer, got 'x1'");
  const fs::path badid = fixtures / "wavescale_badid";
  CHECK_THROWS_WITH(trace_load(badid / "trace.json"),
                    at(badid / "kernels.csv") + ":3: op_id 7 is not in " + at(badid / "ops.csv"));
  const fs::path none = fixtures / "not_a_trace.csv";
  CHECK_THROWS_WITH(trace_load(none), at(none) + ": not a trace: expected Chrome-trace JSON, a wavescale manifest or "
                                                 "a label CSV (fw_latency column)");
}

// As a Chrome trace whose kernels all have 'dur' 0 (or that has none): nothing to scale, refused; some kernels of 0 ns
// are counted (scale warns about them).
TEST_CASE("trace: a wavescale trace with no kernel time is refused", "[trace]") {
  const std::string manifest = R"({"format": "wavescale-trace/1", "ops": "ops.csv", "kernels": "kernels.csv"})";
  const std::string ops = "op_id,op_name,pass,wall_ns\n0,add_,fwd,5000\n1,mul_,opt,\n";
  const std::string head = "op_id,seq,kernel_name,grid_x,grid_y,grid_z,block_x,block_y,block_z,regs_per_thread,"
                           "smem_static_bytes,smem_dynamic_bytes,duration_ns\n";
  auto parse = [&](const std::string& kernels) {
    return trace_parse_wavescale(manifest, "w/trace.json", [&](const std::string& name) {
      return std::make_pair(name == "ops.csv" ? ops : kernels, "w/" + name);
    });
  };
  CHECK_THROWS_WITH(parse(head + "0,0,add,4,1,1,256,1,1,16,0,0,0\n1,0,mul,4,1,1,256,1,1,16,0,0,0\n"
                                 "-1,0,memset,1,1,1,32,1,1,8,0,0,0\n"),
                    "w/kernels.csv: every one of its 3 kernel rows has 'duration_ns' 0: a trace with no kernel time "
                    "cannot be scaled");
  CHECK_THROWS_WITH(parse(head), "w/kernels.csv: no kernel rows: a trace with no kernels cannot be scaled");
  const trace t = parse(head + "0,0,add,4,1,1,256,1,1,16,0,0,0\n1,0,mul,4,1,1,256,1,1,16,0,0,1000\n");
  CHECK(t.zero_duration_kernels == 1);
}

// Durations past the longest profiler event (1e10 µs, a Chrome trace's 'dur' limit) are an error at file:line: two
// kernels of 1.7e308 ns summed to inf, and `scale` wrote null for the op, its pass and the total (exit 0).
TEST_CASE("trace: a wavescale duration or wall time past 1e13 ns is an error naming file:line", "[trace]") {
  const std::string manifest = R"({"format": "wavescale-trace/1", "ops": "ops.csv", "kernels": "kernels.csv"})";
  const std::string head = "op_id,seq,kernel_name,grid_x,grid_y,grid_z,block_x,block_y,block_z,regs_per_thread,"
                           "smem_static_bytes,smem_dynamic_bytes,duration_ns\n";
  auto parse = [&](const std::string& wall, const std::string& dur) {
    return trace_parse_wavescale(manifest, "w/trace.json", [&](const std::string& name) {
      return std::make_pair(name == "ops.csv" ? "op_id,op_name,pass,wall_ns\n0,add_,fwd," + wall + "\n"
                                              : head + "0,0,add,4,1,1,256,1,1,16,0,0,1000\n0,1,add,4,1,1,256,1,1,16,0,0," + dur + "\n",
                            "w/" + name);
    });
  };
  CHECK(*parse("1e13", "1e13").ops[0].measured_ms == 1e7);  // the limit itself: 1e10 µs
  CHECK_THROWS_WITH(parse("5000", "1.7e308"), "w/kernels.csv:3: column 'duration_ns': must be at most 1e13 ns (1e10 "
                                             "microseconds, the longest profiler event), got '1.7e308'");
  CHECK_THROWS_WITH(parse("2e13", "1000"), "w/ops.csv:2: column 'wall_ns': must be at most 1e13 ns (1e10 microseconds, "
                                          "the longest profiler event), got '2e13'");
  CHECK_THROWS_WITH(parse("5000", "nan"), "w/kernels.csv:3: column 'duration_ns': expected a number, got 'nan'");
  CHECK_THROWS_WITH(parse("inf", "1000"), "w/ops.csv:2: column 'wall_ns': expected a number, got 'inf'");
}

TEST_CASE("trace: per-op label CSV of the shared data", "[trace]") {
  const fs::path p = fixtures / "label" / "Tesla_V100-PCIE-32GB" / "tiny-train-8-1.csv";
  CHECK(trace_detect(p) == trace_format::label_csv);
  const trace t = trace_load(p);
  CHECK(t.origin_device == "Tesla_V100-PCIE-32GB");
  REQUIRE(t.ops.size() == 5);  // the placeholder has no latency; the embedding has three phases
  CHECK(t.ops[0].name == "add");
  CHECK(t.ops[0].kind == "add");
  CHECK(t.ops[0].id == 1);
  CHECK(t.ops[0].input_shapes == std::vector<trace_shape>{{4, 8}, {4, 8}});
  CHECK(*t.ops[0].output_shape == trace_shape{4, 8});
  CHECK(*t.ops[0].measured_ms == 0.01);
  CHECK(t.ops[1].name == "transformer_wte");
  CHECK(t.ops[1].kind == "transformer.wte");
  CHECK(t.ops[1].phase == trace_phase::forward);
  CHECK(t.ops[2].phase == trace_phase::backward);
  CHECK(*t.ops[2].measured_ms == 0.5);
  CHECK(t.ops[3].phase == trace_phase::accumulate);
  CHECK(*t.ops[3].measured_ms == 0.75);
  CHECK(*t.ops[4].output_shape == trace_shape{32});
  CHECK(t.ops[4].kernels.empty());

  const fs::path bad_shape = fixtures / "label" / "bad_shape.csv";
  CHECK_THROWS_WITH(trace_load(bad_shape), at(bad_shape) + ":3: column 'input_shapes': " + [] {
    try {
      py_parse("[[4, 8.5]]");
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("?");
  }());
  const fs::path bad_lat = fixtures / "label" / "bad_latency.csv";
  CHECK_THROWS_WITH(trace_load(bad_lat), at(bad_lat) + ":2: column 'bw_latency': expected a number, got 'fast'");
  CHECK_THROWS_WITH(trace_parse_label_csv("Name,input_shapes,output_shape,fw_latency,bw_latency,acc_latency\n"
                                          "x,\"[[1]]\",7,1,0,0\n",
                                          "inline.csv", ""),
                    "inline.csv:2: column 'output_shape': expected a shape, got an integer");
  // extra columns near a column the file has are extra data ('time' beside 'type', 'name' beside 'Name'); near one it
  // lacks, a typo
  const std::string row = "x,\"[[1]]\",\"[1]\",1,0,0,5\n";
  CHECK(trace_parse_label_csv("Name,input_shapes,output_shape,fw_latency,bw_latency,acc_latency,name\n" + row,
                              "extra.csv", "")
            .ops.size() == 1);
  CHECK(trace_parse_label_csv("Name,type,input_shapes,output_shape,fw_latency,bw_latency,acc_latency,time\n"
                              "x,call_function,\"[[1]]\",\"[1]\",1,0,0,5\n",
                              "extra.csv", "")
            .ops.size() == 1);
  CHECK_THROWS_WITH(trace_parse_label_csv("Name,input_shapes,output_shape,fw_latency,bw_latency,acc_latency,targt\n" + row,
                                          "typo.csv", ""),
                    "typo.csv:1: unknown column 'targt' (did you mean 'target'?)");
}

TEST_CASE("trace: a real label file of the shared data, when present", "[trace]") {
  const auto shared = ns_test::shared_data("neusight/label/Tesla_V100-PCIE-32GB/gpt2_large-train-1024-1.csv");
  if (!shared) return;
  const fs::path p = *shared;
  const trace t = trace_load(p);
  CHECK(t.origin_device == "Tesla_V100-PCIE-32GB");
  CHECK(t.ops.size() > 100);
  bool any_backward = false;
  for (const trace_op& op : t.ops) any_backward = any_backward || op.phase == trace_phase::backward;
  CHECK(any_backward);
}

// A real PyTorch 2.11 profiler trace (tests/fixtures/traces/hf/README.md: GPT-2, 2 layers, fp32 training with AdamW,
// recorded on an H200): backward nodes carry their forward op's shapes through the autograd sequence number.
TEST_CASE("trace: a real PyTorch-profiler trace links backward nodes to their forward op", "[trace]") {
  const trace t = trace_load(fixtures / "hf" / "gpt2-fp32-train.json");
  CHECK(t.format == trace_format::chrome_json);
  CHECK(t.origin_device == "NVIDIA H200");
  auto find = [&](const std::string& name, trace_phase ph) -> const trace_op* {
    for (const auto& op : t.ops)
      if (op.name == name && op.phase == ph) return &op;
    return nullptr;
  };
  const trace_op* addmm = find("aten::addmm", trace_phase::forward);
  REQUIRE(addmm);
  CHECK(addmm->input_shapes == std::vector<trace_shape>{{2304}, {2048, 768}, {768, 2304}, {}, {}});
  CHECK(addmm->input_types == std::vector<std::string>{"float", "float", "float", "Scalar", "Scalar"});
  CHECK(addmm->input_values == std::vector<std::string>{"", "", "", "1", "1"});
  CHECK(addmm->forward_kind.empty());
  REQUIRE_FALSE(addmm->kernels.empty());

  const trace_op* mm = find("MmBackward0", trace_phase::backward);  // the tied LM head
  REQUIRE(mm);
  CHECK(mm->forward_kind == "aten::mm");
  CHECK(mm->input_shapes == std::vector<trace_shape>{{2048, 768}, {768, 50257}});
  CHECK(mm->input_types == std::vector<std::string>{"float", "float"});

  const trace_op* sdpa = find("ScaledDotProductEfficientAttentionBackward0", trace_phase::backward);
  REQUIRE(sdpa);
  CHECK(sdpa->forward_kind == "aten::_scaled_dot_product_efficient_attention");
  REQUIRE(sdpa->input_values.size() == 8);
  CHECK(sdpa->input_values[6] == "True");  // is_causal

  // Every backward node but the leaves' gradient accumulation has its forward op.
  size_t backward = 0, opt = 0;
  for (const auto& op : t.ops) {
    if (op.phase == trace_phase::backward) {
      ++backward;
      INFO(op.name);
      CHECK_FALSE(op.forward_kind.empty());
    }
    if (op.phase == trace_phase::optimizer) {
      ++opt;
      CHECK(op.name.rfind("Optimizer.step#AdamW.step", 0) == 0);
      CHECK_FALSE(op.kernels.empty());
    }
  }
  CHECK(backward > 50);
  CHECK(opt == 1);
}
