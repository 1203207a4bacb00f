// tests/core/test_opgraph.cpp — importing the reference's operator graphs, layer replication, and the
// roofline-reference formulas against hand-computed numbers.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <map>

#include "core/forecast.h"
#include "ingest/opgraph.h"
#include "core/roofline.h"
#include "core/text.h"
#include "lua/session.h"
#include "session_util.h"
#include "test_util.h"

using namespace ns;
using Catch::Matchers::WithinRel;

namespace {
const std::string fixture = (ns_test::source_dir / "tests/fixtures/neusight/opgraph").string();

session& lua() {
  static session s(ns_test::session_opts(ns_test::source_dir));
  return s;
}
// neusight.kernels' cost formulas for the graphs' Linear and BMM kernels.
kernel_costing costs() { return lua().costing(); }

size_t count_phase(const opgraph& og, phase p) {
  size_t n = 0;
  for (const auto& ki : og.kernels) n += ki.ph == p;
  return n;
}

const node& node_named(const opgraph& og, const std::string& name) {
  for (const auto& n : og.g.nodes)
    if (n.name == name) return n;
  FAIL("no node " << name);
  throw;
}

const kernel_instance& first_kernel(const opgraph& og, const std::string& node_name, phase p) {
  for (const auto& ki : og.kernels)
    if (og.g.nodes[ki.node].name == node_name && ki.ph == p) return ki;
  FAIL("no " << phase_name(p) << " kernel for " << node_name);
  throw;
}

const std::string header = "Name,OpName,FwOps,BwOps,AccOps,Prev,Next,InputShapes,OutputShape\n";
}  // namespace

TEST_CASE("opgraph: the GPT2-Large training fixture imports row by row", "[opgraph]") {
  opgraph og = opgraph_load(fixture + "/gpt2_large-train-1024-1.csv", costs());
  REQUIRE(og.tag);
  CHECK(og.tag->model == "gpt2_large");
  CHECK(og.tag->mode == "train");
  CHECK(og.tag->seq == 1024);
  CHECK(og.tag->batch == 1);
  CHECK(og.g.nodes.size() == 125);
  CHECK(count_phase(og, phase::forward) == 46);
  CHECK(count_phase(og, phase::backward) == 86);
  CHECK(count_phase(og, phase::accumulate) == 17);
  CHECK(og.collectives.empty());
  CHECK(og.warnings.empty());

  // addmm: Linear (T=1024, I=1280, O=3840) → gemm b=1 m=T n=I k=O
  const kernel& qkv = first_kernel(og, "addmm", phase::forward).k;
  CHECK(qkv.kind == kernel_kind::gemm);
  CHECK(qkv.name == "Linear");
  CHECK((qkv.b == 1 && qkv.m == 1024 && qkv.n == 1280 && qkv.k == 3840));
  CHECK(qkv.flops == 2.0 * 1024 * 1280 * 3840);
  CHECK(qkv.bytes == 4.0 * (1024 * 1280 + 1280 * 3840 + 1024 * 3840));
  CHECK(qkv.dtype == "fp32");
  // its gradient accumulation: VECadd [1, O·I] then [1, O]; the node's parameters come from AccOps
  const kernel& acc = first_kernel(og, "addmm", phase::accumulate).k;
  CHECK(acc.kind == kernel_kind::elementwise);
  CHECK(acc.op == "add");
  CHECK((acc.rows == 1 && acc.hidden == 4915200));
  CHECK(node_named(og, "addmm").params == 4915200.0 + 3840);

  // add_1 = wte + wpe, a broadcast add: MemPerO = 4·(2·1280·1024 + 1280·1024) / (1280·1024) = 12
  const kernel& add = first_kernel(og, "add_1", phase::forward).k;
  CHECK(add.flops == 1024.0 * 1280);
  CHECK(add.bytes == 12.0 * 1024 * 1280);
  // its backward: one MEM ((B,H),) per input, 4 bytes per element
  const kernel& mem = first_kernel(og, "add_1", phase::backward).k;
  CHECK(mem.kind == kernel_kind::memory);
  CHECK(mem.bytes == 4.0 * 1024 * 1280);
  // layer norm: 6 ops per element; backward VECmul uses the row's shapes (unary: 8 B per element)
  const kernel& ln = first_kernel(og, "transformer_h_0_ln_1", phase::forward).k;
  CHECK(ln.kind == kernel_kind::layernorm);
  CHECK(ln.flops == 6.0 * 1024 * 1280);
  CHECK(first_kernel(og, "transformer_h_0_ln_1", phase::backward).k.bytes == 8.0 * 1024 * 1280);
  // getitem_5: MEM ((1,), (1, 1024, 1280)) counts the scalar too
  CHECK(first_kernel(og, "getitem_5", phase::forward).k.bytes == 4.0 * (1 + 1024 * 1280));

  // Layer replication: rows transformer_h_0_ln_1 … add_15 (102 rows) count 36 times, the rest once.
  REQUIRE(og.layer);
  CHECK(og.g.nodes[og.layer->first].name == "transformer_h_0_ln_1");
  CHECK(og.g.nodes[og.layer->second].name == "add_15");
  CHECK(og.layer->second - og.layer->first + 1 == 102);
  const auto layers = opgraph_config_layers(og);
  REQUIRE(layers);
  CHECK(*layers == 36);
  opgraph_replicate(og, *layers);
  size_t replicated = 0;
  for (const auto& n : og.g.nodes) replicated += n.count == 36;
  CHECK(replicated == 102);
  CHECK(node_named(og, "addmm").count == 36);
  CHECK(node_named(og, "addmm").layer == "layer");
  CHECK(node_named(og, "transformer_wte").count == 1);
  CHECK(node_named(og, "lm_head").count == 1);

  CHECK(opgraph_kernels(og, false).size() == 46);
  CHECK(opgraph_kernels(og, true).size() == 46 + 86 + 17);
}

// kernels.lua is the one cost formula: a --scripts copy with other FLOPs per element changes what the importer's VEC
// kernels cost (opgraph.cpp once counted 1 / 5 / 6 itself); their bytes stay the file's MemPerO.
TEST_CASE("opgraph: VEC kernels take their FLOPs from neusight.kernels and keep the file's MemPerO bytes", "[opgraph]") {
  const ns_test::temp_dir t;
  ns_test::override_dir(t, "k", "kernels", "",
                        {{"local SOFTMAX_FLOPS = 5", "local SOFTMAX_FLOPS = 7"},
                         {"local LAYERNORM_FLOPS = 6", "local LAYERNORM_FLOPS = 9"},
                         {"add  = { flops = 1, reads = 2 }", "add  = { flops = 3, reads = 2 }"}});
  session user(ns_test::session_opts(ns_test::source_dir, {t.path / "k"}));
  const opgraph og = opgraph_load(fixture + "/gpt2_large-train-1024-1.csv", user.costing());
  const double bh = 1024.0 * 1280;
  CHECK(first_kernel(og, "transformer_h_0_ln_1", phase::forward).k.flops == 9 * bh);
  CHECK(first_kernel(og, "add_1", phase::forward).k.flops == 3 * bh);
  CHECK(first_kernel(og, "softmax", phase::forward).k.flops == 7 * 20480.0 * 1024);
  // bytes: the rows' own shapes (a broadcast add 12 B per element, the layer norm's backward VECmul 8), not vec()'s
  CHECK(first_kernel(og, "add_1", phase::forward).k.bytes == 12 * bh);
  CHECK(first_kernel(og, "transformer_h_0_ln_1", phase::backward).k.bytes == 8 * bh);
  // the bundled kernels.lua: the reference's 1, 5 and 6
  const opgraph base = opgraph_load(fixture + "/gpt2_large-train-1024-1.csv", costs());
  CHECK(first_kernel(base, "transformer_h_0_ln_1", phase::forward).k.flops == 6 * bh);
  CHECK(first_kernel(base, "add_1", phase::forward).k.flops == bh);
  CHECK(first_kernel(base, "softmax", phase::forward).k.flops == 5 * 20480.0 * 1024);
  CHECK(first_kernel(base, "transformer_h_0_ln_1", phase::backward).k.bytes == 8 * bh);
}

TEST_CASE("opgraph: a VEC kernel of more than 2^48 elements is an error naming file:line", "[opgraph]") {
  const std::string row = "big,add,\"[['VECadd', (4294967296, 65537)]]\",[],[],set(),set(),\"[(4, 4)]\",\"(4, 4)\"\n";
  CHECK_THROWS_WITH(opgraph_parse(header + row, "g.csv", costs()),
                    "g.csv:2: column 'FwOps': kernel 'VECadd': bad argument #2 to 'vec' (rows × hidden is more than "
                    "2^48 elements)");
  // 2^32 × 2^32 is 2^64 elements, which an integer product wraps to 0: refused too, never a kernel of 0 FLOPs
  const std::string wraps =
      "ok,add,[],[],[],set(),set(),\"[(4, 4)]\",\"(4, 4)\"\n"
      "ln,layer_norm,[],\"[['VECln', (4294967296, 4294967296)]]\",[],set(),set(),\"[(4, 4)]\",\"(4, 4)\"\n";
  CHECK_THROWS_WITH(opgraph_parse(header + wraps, "g.csv", costs()),
                    "g.csv:3: column 'BwOps': kernel 'VECln': bad argument #1 to 'layernorm' (rows × hidden is more "
                    "than 2^48 elements)");
}

// One rule for a kernel's tensors: neusight.kernels refuses a GEMM operand of more than 2^48 elements, and the reader
// relies on it (through the costing callback, which names the row): a kernels.lua with another limit is the one obeyed.
TEST_CASE("opgraph: a GEMM operand past neusight.kernels' limit is an error at its row and column", "[opgraph]") {
  const std::string ok_row = "add_1,add,\"[['VECadd', (4, 8)]]\",[],[],set(),set(),\"[(4, 8), (4, 8)]\",\"(4, 8)\"\n";
  const std::string linear = "fc,linear,[],[],\"[['Linear', (4096, 65537, 4294967296)]]\",set(),set(),[],\"(1,)\"\n";
  CHECK_THROWS_WITH(opgraph_parse(header + ok_row + linear, "g.csv", costs()),
                    "g.csv:3: column 'AccOps': kernel 'Linear': bad argument to 'linear' (operand W has more than 2^48 "
                    "elements)");
  const std::string bmm = "bmm,bmm,\"[['BMM', (65536, 65536, 65537, 2)]]\",[],[],set(),set(),[],\"(1,)\"\n";
  CHECK_THROWS_WITH(opgraph_parse(header + bmm, "g.csv", costs()),
                    "g.csv:2: column 'FwOps': kernel 'BMM': bad argument to 'bmm' (operand A has more than 2^48 elements)");
  // a user's kernels.lua of a smaller limit (2^20 elements): the reader refuses what it refuses, at the row, and the
  // message gives that limit (MAX_LOG2 makes the limit and its text: the messages said 2^48 whatever the limit)
  const ns_test::temp_dir t;
  ns_test::override_dir(t, "k", "kernels", "", {{"local MAX_LOG2 = 48", "local MAX_LOG2 = 20"}});
  session user(ns_test::session_opts(ns_test::source_dir, {t.path / "k"}));
  const std::string small = "fc,linear,\"[['Linear', (2048, 1024, 512)]]\",[],[],set(),set(),[],\"(1,)\"\n";
  CHECK_NOTHROW(opgraph_parse(header + small, "g.csv", costs()));
  CHECK_THROWS_WITH(opgraph_parse(header + ok_row + small, "g.csv", user.costing()),
                    "g.csv:3: column 'FwOps': kernel 'Linear': bad argument to 'linear' (operand X has more than 2^20 "
                    "elements)");
}

TEST_CASE("opgraph: layer count from --layers, the model config, or 1 with a warning", "[opgraph]") {
  const opgraph og = opgraph_load(fixture + "/gpt2_large-inf-1024-4.csv", costs());
  std::vector<std::string> warnings;
  CHECK(opgraph_layers(og, 5, warnings) == 5);
  CHECK(opgraph_layers(og, 0, warnings) == 36);  // ../DLmodel_configs/gpt2_large.json: n_layer
  CHECK(warnings.empty());

  // The same graph elsewhere, without a config beside it.
  ns_test::temp_dir t;
  const auto copy = t.write("opgraph/gpt2_large-inf-1024-4.csv", ns_test::slurp(fixture + "/gpt2_large-inf-1024-4.csv"));
  const opgraph lone = opgraph_load(copy.string(), costs());
  CHECK(opgraph_layers(lone, 0, warnings) == 1);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == copy.string() + ": no layer count given and no model config at " +
                           (t.path / "DLmodel_configs/gpt2_large.json").string() +
                           ": the traced layer counts once (pass --layers N)");
  // A config without the key is an error, not a silent 1.
  t.write("DLmodel_configs/gpt2_large.json", R"({"num_hidden_layers": 12})");
  CHECK_THROWS_WITH(opgraph_layers(lone, 0, warnings),
                    (t.path / "DLmodel_configs/gpt2_large.json").string() +
                        ": key 'n_layer' must be a positive integer (the layer count)");
}

TEST_CASE("opgraph: file-name tags", "[opgraph]") {
  auto t = opgraph_tag_parse("gpt3_xl-train-2048-4-pp4_1");
  REQUIRE(t);
  CHECK(t->model == "gpt3_xl");
  CHECK(t->mode == "train");
  CHECK(t->seq == 2048);
  CHECK(t->batch == 4);
  CHECK(t->option == "pp4_1");
  CHECK(opgraph_tag_parse("bert_large-inf-512-8")->mode == "inference");
  CHECK(opgraph_tag_parse("bert_large-inf-512-8")->option.empty());
  CHECK_FALSE(opgraph_tag_parse("bert_large-eval-512-8"));
  CHECK_FALSE(opgraph_tag_parse("bert_large-inf-512"));
  CHECK_FALSE(opgraph_tag_parse("bert_large-inf-x-8"));
  CHECK_FALSE(opgraph_tag_parse("mygraph"));
}

TEST_CASE("opgraph: malformed rows name file:line and the column", "[opgraph]") {
  const std::string ok_row = "add_1,VECadd,\"[['VECadd', (4, 8)]]\",[],[],set(),{'x'},\"[(4, 8), (4, 8)]\",\"(4, 8)\"\n";
  const std::pair<std::string, std::string> cases[] = {
      {"a,misc,\"[['Linear', (4096, 1280)]]\",[],[],set(),set(),[],\"(1,)\"\n",
       "g.csv:3: column 'FwOps': kernel 'Linear' needs 3 positive integers (T, I, O), got (4096, 1280)"},
      {"a,misc,\"[['Linear', (1, 2, 3)]\",[],[],set(),set(),[],\"(1,)\"\n",
       "g.csv:3: column 'FwOps': expected ',' or ']', found end of input at character 23"},
      {"a,misc,[],\"[['VECfoo', (1, 2)]]\",[],set(),set(),\"[(1, 2)]\",\"(1, 2)\"\n",
       "g.csv:3: column 'BwOps': unknown vector kernel 'VECfoo'"},
      {"a,misc,[],[],\"[['CONV', (1, 2)]]\",set(),set(),[],\"(1,)\"\n",
       "g.csv:3: column 'AccOps': unknown kernel 'CONV'"},
      {"a,misc,\"[['MEM', (1, 2)]]\",[],[],set(),set(),[],\"(1,)\"\n",
       "g.csv:3: column 'FwOps': kernel 'MEM': expected a shape (a tuple of integers of at most 2^32, at most 2^48 elements), got 1"},
      {"a,misc,[],[],[],set(),set(),\"[(1, 2), 3]\",\"(1,)\"\n",
       "g.csv:3: column 'InputShapes': expected a shape (a tuple of integers of at most 2^32, at most 2^48 elements), got 3"},
      {"a,misc,[],[],[],set(),\"{'b', 1}\",[],\"(1,)\"\n",
       "g.csv:3: column 'Next': expected a set of node names, got {'b', 1}"},
      {"a,misc,[],[],[],set(),set(),[],1.5\n", "g.csv:3: column 'OutputShape': floats are not supported at character 1"},
      {"a,misc,\"[['VECadd', (4, 8)]]\",[],[],set(),set(),[],[]\n",
       "g.csv:3: column 'OutputShape': vector kernel 'VECadd' needs the row's output shape (bytes per element)"},
      {"a,misc,\"['Linear', (1, 2, 3)]\",[],[],set(),set(),[],\"(1,)\"\n",
       "g.csv:3: column 'FwOps': expected a [name, args] kernel, got 'Linear'"},
  };
  for (const auto& [row, message] : cases) {
    INFO("row: " << row);
    CHECK_THROWS_WITH(opgraph_parse(header + ok_row + row, "g.csv", costs()), message);
  }
  CHECK_THROWS_WITH(opgraph_parse("Name,OpName\nx,y\n", "g.csv", costs()), "g.csv: missing column 'FwOps'");
}

TEST_CASE("opgraph: collectives are collective kernels — a distributed graph needs its layout in the name", "[opgraph]") {
  const std::string rows = header +
                           "a_grad,allreduce,[],\"[['ALLREDUCE_ASYNC', (2560,)]]\",[],set(),set(),[],[]\n"
                           "b,allreduce,\"[['ALLREDUCE', (10,)]]\",\"[['ALLREDUCE', (10,)]]\",[],set(),set(),[],[]\n"
                           "c,sendrecv,\"[['SENDRECV', (7,)]]\",[],[],set(),set(),[],[]\n";
  const opgraph og = opgraph_parse(rows, "dir/custom.csv", costs());
  CHECK(og.collectives.at("ALLREDUCE_ASYNC") == 1);
  CHECK(og.collectives.at("ALLREDUCE") == 2);
  CHECK(og.collective_rows == 3);
  REQUIRE(og.kernels.size() == 4);
  CHECK(og.kernels[0].k.kind == kernel_kind::collective);
  CHECK(og.kernels[0].ph == phase::backward);
  CHECK(og.kernels[0].k.bytes == 4 * 2560);
  CHECK(og.kernels[0].k.op == "all_reduce");
  CHECK(!og.kernels[0].k.seconds);  // priced by scripts/neusight/parallel.lua, never by a kernel predictor
  CHECK(og.kernels[3].k.op == "send_recv");
  CHECK(og.layer == std::nullopt);
  CHECK_THROWS_WITH(opgraph_check_supported(og),
                    "dir/custom.csv: 3 rows hold collective kernels (ALLREDUCE ×2, ALLREDUCE_ASYNC ×1, SENDRECV ×1), first at "
                    "dir/custom.csv:2: a distributed graph needs its layout in the file name "
                    "(<model>-train-<seq>-<batch>-dp4, -tp4 or -pp4_1)");
  const opgraph named = opgraph_parse(rows, "dir/custom-train-8-4-pp4_2.csv", costs());
  CHECK_NOTHROW(opgraph_check_supported(named));
  const auto p = opgraph_parallel_of(named);
  REQUIRE(p);
  CHECK(p->pp == 4);
  CHECK(p->microbatches == 2);
  CHECK(p->dp == 1);
  CHECK(opgraph_parallel_of(opgraph_parse(rows, "d/x-train-8-4-tp8.csv", costs()))->tp == 8);
  CHECK(opgraph_parallel_of(opgraph_parse(rows, "d/x-train-8-4-pp4.csv", costs()))->microbatches == 1);
  CHECK(!opgraph_parallel_of(opgraph_parse(rows, "d/x-train-8-4-fusion.csv", costs())));
  CHECK(!opgraph_parallel_of(opgraph_parse(rows, "d/x-train-8-4-dpx.csv", costs())));
}

TEST_CASE("opgraph: a GPT graph without its layer markers is an error", "[opgraph]") {
  const std::string rows = header + "x,misc,[],[],[],set(),set(),[],\"(1,)\"\n";
  CHECK_THROWS_WITH(opgraph_parse(rows, "d/gpt2_large-inf-1024-4.csv", costs()),
                    "d/gpt2_large-inf-1024-4.csv: layer start marker 'transformer_h_0_ln_1' not found (model family "
                    "'gpt', spec §1.7)");
  const std::string start_only = header + "transformer_h_0_ln_1,misc,[],[],[],set(),set(),[],\"(1,)\"\n";
  CHECK_THROWS_WITH(opgraph_parse(start_only, "d/gpt2_large-inf-1024-4.csv", costs()),
                    "d/gpt2_large-inf-1024-4.csv:2: layer end marker 'add_15' not found after the start marker "
                    "'transformer_h_0_ln_1'");
  // Switch is traced whole; unknown models count once with a warning.
  CHECK_FALSE(opgraph_parse(rows, "d/switchxl4-inf-512-1.csv", costs()).layer);
  CHECK(opgraph_parse(rows, "d/switchxl4-inf-512-1.csv", costs()).warnings.empty());
  const opgraph other = opgraph_parse(rows, "d/llama-inf-1-1.csv", costs());
  REQUIRE(other.warnings.size() == 1);
  CHECK(other.warnings[0] == "d/llama-inf-1-1.csv: no layer markers known for model 'llama': every row counts once (whole model)");
}

TEST_CASE("roofline-reference: the reference's closed forms", "[roofline][opgraph]") {
  gpu_spec p100;  // Tesla P100 as the reference describes it
  p100.name = "P100-ref";
  p100.peak_fp32_tflops = 9.519;
  p100.mem_bw_gbps = 732;
  const double gib = 1073741824.0;

  kernel g;  // BMM (20, 1024, 8, 1024): memory-bound by its arithmetic intensity (no B in AI)
  g.kind = kernel_kind::bmm, g.b = 20, g.m = 1024, g.n = 8, g.k = 1024;
  std::vector<kernel*> costed{&g};
  costs()(costed, {});  // its FLOPs: neusight.kernels
  const double ai = (2.0 * 1024 * 8 * 1024 / 1e9) / (4.0 * (1024 * 8 + 8 * 1024 + 1024 * 1024) / gib);
  const double expected = 2.0 * 20 * 1024 * 8 * 1024 / 1e9 / std::min(9519.0, ai * 732);
  CHECK_THAT(roofline_reference_seconds(g, p100), WithinRel(expected, 1e-12));
  CHECK(ai * 732 < 9519);  // this one is on the bandwidth slope

  kernel big = g;  // a large GEMM is compute-bound: 2·M·N·K / F
  big.kind = kernel_kind::gemm, big.b = 1, big.m = big.n = big.k = 4096;
  costed = {&big};
  costs()(costed, {});
  CHECK_THAT(roofline_reference_seconds(big, p100), WithinRel(2.0 * 4096 * 4096 * 4096 / 1e9 / 9519, 1e-12));
  // the kernel's FLOPs (neusight.kernels, the one cost formula), not a second 2·B·M·N·K: other FLOPs, other time
  kernel twice = big;
  twice.flops *= 2;
  CHECK_THAT(roofline_reference_seconds(twice, p100), WithinRel(2 * 2.0 * 4096 * 4096 * 4096 / 1e9 / 9519, 1e-12));
  kernel uncosted = big;
  uncosted.flops = 0;
  CHECK_THROWS_WITH(roofline_reference_seconds(uncosted, p100), "predictor roofline-reference: kernel Linear has no FLOPs");

  kernel v;  // vector: bytes / 1e9 / BW (bytes = MemPerO·B·H)
  v.kind = kernel_kind::elementwise, v.rows = 4096, v.hidden = 1280, v.bytes = 12.0 * 4096 * 1280, v.flops = 4096.0 * 1280;
  CHECK_THAT(roofline_reference_seconds(v, p100), WithinRel(12.0 * 4096 * 1280 / 1e9 / 732, 1e-12));

  kernel m;  // MEM: bytes over GiB/s
  m.kind = kernel_kind::memory, m.bytes = 8;
  CHECK_THAT(roofline_reference_seconds(m, p100), WithinRel(8 / (732 * gib), 1e-12));

  kernel h = big;
  h.dtype = "fp16";
  h.name = "Linear";
  CHECK_THROWS_WITH(roofline_reference_seconds(h, p100),
                    "predictor roofline-reference models fp32 only (the reference hard-codes 4-byte elements); kernel "
                    "Linear is fp16: use --predictor roofline");
  CHECK(predictor_make("roofline-reference")->name() == "roofline-reference");
}

// The reference's Switch graphs dispatch each expert's routed tokens into a (capacity, d_model) buffer and run the
// expert on the whole buffer; HuggingFace runs the expert on the routed rows only (none: no call). Rows in the shape
// of switchxl4's trace (capacity 4, d_model 8, d_ff 16): expert 0 routed 0 tokens, expert 1 routed 3.
TEST_CASE("opgraph: capacity-padded MoE experts are priced at the tokens the trace routed to them", "[opgraph]") {
  const std::string rows =
      header +
      "zeros_1,misc,[],[],[],set(),\"{'setitem'}\",\"[(1,), (1,)]\",\"(4, 8)\"\n"
      "setitem,setitem,\"[['MEM', ((4, 8), (1,), (0, 8), (1,))]]\",[],[],\"{'zeros_1'}\",set(),"
      "\"[(4, 8), (1,), (0, 8)]\",\"(1,)\"\n"
      "b_1_mlp_experts_expert_0_wi,Linear,\"[['Linear', (4, 8, 16)]]\",\"[['Linear', (4, 16, 8)], ['Linear', (16, 4, 8)]]\","
      "\"[['VECadd', (1, 128)]]\",set(),set(),\"[(4, 8)]\",\"(4, 16)\"\n"
      "b_1_mlp_experts_expert_0_act,VECrelu,\"[['VECrelu', (4, 16)]]\",[],[],set(),set(),\"[(4, 16)]\",\"(4, 16)\"\n"
      "b_1_mlp_experts_expert_0_wo,Linear,\"[['Linear', (4, 16, 8)]]\",[],[],set(),set(),\"[(4, 16)]\",\"(4, 8)\"\n"
      "setitem_1,setitem,\"[['MEM', ((1, 6, 8), (1, 6), (0, 8), (1,))]]\",[],[],set(),set(),"
      "\"[(1, 6, 8), (1, 6), (0, 8)]\",\"(1,)\"\n"
      "setitem_2,setitem,\"[['MEM', ((4, 8), (1,), (3, 8), (1,))]]\",[],[],set(),set(),"
      "\"[(4, 8), (1,), (3, 8)]\",\"(1,)\"\n"
      "b_1_mlp_experts_expert_1_wi,Linear,\"[['Linear', (4, 8, 16)]]\",\"[['Linear', (4, 16, 8)], ['Linear', (16, 4, 8)]]\","
      "\"[['VECadd', (1, 128)]]\",set(),set(),\"[(4, 8)]\",\"(4, 16)\"\n"
      "b_1_mlp_experts_expert_1_act,VECrelu,\"[['VECrelu', (4, 16)]]\",[],[],set(),set(),\"[(4, 16)]\",\"(4, 16)\"\n"
      "b_1_mlp_experts_expert_1_wo,Linear,\"[['Linear', (4, 16, 8)]]\",[],[],set(),set(),\"[(4, 16)]\",\"(4, 8)\"\n"
      "lm_head,Linear,\"[['Linear', (4, 8, 16)]]\",[],[],set(),set(),\"[(4, 8)]\",\"(4, 16)\"\n";
  const opgraph padded = opgraph_parse(rows, "d/switchxl4-train-6-1.csv", costs(), opgraph_options{false, {}});
  CHECK(padded.warnings.empty());
  CHECK(padded.kernels.size() == 3 /*setitems*/ + 2 * 6 /*experts*/ + 1 /*lm_head*/);
  CHECK(first_kernel(padded, "b_1_mlp_experts_expert_1_wi", phase::forward).k.m == 4);

  const opgraph og = opgraph_parse(rows, "d/switchxl4-train-6-1.csv", costs());
  REQUIRE(og.warnings.size() == 1);
  CHECK(og.warnings[0] ==
        "d/switchxl4-train-6-1.csv: 2 capacity-padded MoE expert calls priced at the tokens the trace routed to them "
        "(1 routed none: no kernels), as HuggingFace runs them");
  for (const auto& ki : og.kernels) {
    INFO(og.g.nodes[ki.node].name);
    CHECK(og.g.nodes[ki.node].name.find("expert_0") == std::string::npos);  // never called
  }
  CHECK(og.kernels.size() == 3 + 6 + 1);
  const kernel& wi = first_kernel(og, "b_1_mlp_experts_expert_1_wi", phase::forward).k;
  CHECK(wi.m == 3);
  CHECK(wi.n == 8);
  CHECK(wi.k == 16);
  CHECK(wi.flops == 2.0 * 3 * 8 * 16);  // costed after the rows changed
  std::vector<std::array<int64_t, 3>> bw;
  for (const auto& ki : og.kernels)
    if (og.g.nodes[ki.node].name == "b_1_mlp_experts_expert_1_wi" && ki.ph == phase::backward)
      bw.push_back({ki.k.m, ki.k.n, ki.k.k});
  CHECK(bw == std::vector<std::array<int64_t, 3>>{{3, 16, 8}, {16, 3, 8}});  // data gradient; weight gradient over tokens
  CHECK(first_kernel(og, "b_1_mlp_experts_expert_1_wi", phase::accumulate).k.hidden == 128);  // the weight is whole
  const kernel& act = first_kernel(og, "b_1_mlp_experts_expert_1_act", phase::forward).k;
  const kernel& act_padded = first_kernel(padded, "b_1_mlp_experts_expert_1_act", phase::forward).k;
  CHECK(act.rows == 3);
  CHECK(act.bytes == Approx(act_padded.bytes * 3 / 4));
  CHECK(first_kernel(og, "b_1_mlp_experts_expert_1_wo", phase::forward).k.m == 3);
  CHECK(first_kernel(og, "lm_head", phase::forward).k.m == 4);  // not an expert: as traced
  // The dispatch/combine copies keep the traced shapes (they already move the routed rows).
  CHECK(first_kernel(og, "setitem_2", phase::forward).k.bytes == first_kernel(padded, "setitem_2", phase::forward).k.bytes);
}

// The measured Switch graphs: with their untrained routers every sparse layer sent all routed tokens (the capacity,
// 64 per sequence) to one expert, none to the other three. Priced as HuggingFace runs it: one expert per sparse layer.
TEST_CASE("opgraph: switchxl4's expert GEMMs are the routed ones", "[opgraph][models]") {
  const auto shared = ns_test::shared_data("neusight/opgraph");
  if (!shared) return;
  for (const auto& [stem, cap] : std::vector<std::pair<std::string, int64_t>>{{"switchxl4-inf-512-1", 64},
                                                                             {"switchxl4-inf-512-2", 128}}) {
    INFO(stem);
    const std::string file = (*shared / (stem + ".csv")).string();
    const opgraph padded = opgraph_load(file, costs(), opgraph_options{false, {}});
    const opgraph og = opgraph_load(file, costs());
    std::map<std::array<int64_t, 3>, int> experts, experts_padded;
    for (const auto& ki : og.kernels)
      if (ki.k.kind == kernel_kind::gemm && og.g.nodes[ki.node].name.find("_experts_expert_") != std::string::npos)
        ++experts[{ki.k.m, ki.k.n, ki.k.k}];
    for (const auto& ki : padded.kernels)
      if (ki.k.kind == kernel_kind::gemm && padded.g.nodes[ki.node].name.find("_experts_expert_") != std::string::npos)
        ++experts_padded[{ki.k.m, ki.k.n, ki.k.k}];
    // 12 sparse encoder + 12 sparse decoder layers, 4 experts each, wi (d_model→d_ff) and wo
    CHECK(experts_padded == std::map<std::array<int64_t, 3>, int>{{{cap, 1024, 16384}, 96}, {{cap, 16384, 1024}, 96}});
    CHECK(experts == std::map<std::array<int64_t, 3>, int>{{{cap, 1024, 16384}, 24}, {{cap, 16384, 1024}, 24}});
    // everything else as traced
    CHECK(padded.kernels.size() - og.kernels.size() == 72 * 3);  // wi, relu, wo of the 72 unrouted calls
    REQUIRE(og.warnings.size() == 1);
    CHECK(og.warnings[0].find("96 capacity-padded MoE expert calls") != std::string::npos);
    CHECK(og.warnings[0].find("(72 routed none") != std::string::npos);
  }
}

// HuggingFace OPT clamps its attention scores with torch.max(scores, torch.tensor(finfo.min)); the reference traced
// the row ('max_1', misc) without kernels. It is an element-wise kernel over the scores (forward), and PyTorch's
// maximum backward for the scores (eq, grad / 2, where, lt, masked_fill_) in training.
// Its kernels come from the op rule (ops/maximum.lua), the same source as a forecast's torch.maximum node.
TEST_CASE("opgraph: OPT's attention-score clamp max_<n> is an element-wise kernel", "[opgraph]") {
  const std::string rows =
      header +
      "tensor,misc,[],[],[],set(),\"{'max_1'}\",\"[(1,), (1,)]\",\"(1,)\"\n"
      "max_1,misc,[],[],[],\"{'tensor', 'add_6'}\",\"{'view_9'}\",\"[(2, 4, 8, 8), (1,)]\",\"(2, 4, 8, 8)\"\n"
      "max_2,misc,[],[],[],set(),set(),\"[(2, 4, 8, 8)]\",\"(1,)\"\n"            // a reduction: not the clamp
      "maxpool,misc,[],[],[],set(),set(),\"[(2, 4, 8, 8), (1,)]\",\"(2, 4, 8, 8)\"\n"  // not named max
      "max_3,VECadd,\"[['VECadd', (64, 8)]]\",[],[],set(),set(),\"[(2, 4, 8, 8), (1,)]\",\"(2, 4, 8, 8)\"\n";
  const opgraph og = opgraph_parse(rows, "d/custom-train-8-2.csv", costs(), {true, lua().rule_kernels()});
  REQUIRE(og.kernels.size() == 1 + 5 + 1);
  const kernel& fw = first_kernel(og, "max_1", phase::forward).k;
  CHECK(fw.kind == kernel_kind::elementwise);
  CHECK(fw.name == "VECmaxu");
  CHECK(fw.rows == 64);
  CHECK(fw.hidden == 8);
  CHECK(fw.flops == 512);
  CHECK(fw.bytes == 4.0 * (512 + 1 + 512));  // MemPerO from the row's shapes, as the VEC rows
  double bw_bytes = 0;
  std::vector<std::string> bw;
  for (const auto& ki : og.kernels)
    if (og.g.nodes[ki.node].name == "max_1" && ki.ph == phase::backward) bw.push_back(ki.k.name), bw_bytes += ki.k.bytes;
  CHECK(bw == std::vector<std::string>{"VECeq", "VECdivu", "VECwhere", "VEClt", "VECmasked_fill"});
  CHECK(bw_bytes == 40.0 * 512);
  CHECK(opgraph_kernels(og, false).size() == 2);  // inference: the forward kernels only
  REQUIRE(og.warnings.size() == 2);
  CHECK(og.warnings[0] == "d/custom-train-8-2.csv: no layer markers known for model 'custom': every row counts once (whole model)");
  CHECK(og.warnings[1] == "d/custom-train-8-2.csv: 1 'max (attention score clamp)' rows without kernels in the graph priced "
                          "as the element-wise kernels they launch");

  SECTION("a rule written by the user prices the row: the reader has no kernels of its own") {
    const ns_test::temp_dir ops;
    ops.write("maximum.lua",
        "local K = require 'neusight.kernels'\n"
           "return { name = 'maximum', doc = 'a test rule', check = function() end, saves = function() return 0 end,\n"
           "  forward = function(node) return { K.vec('maxu', 64, 8, node.dtype, { bytes = 7 }) } end,\n"
           "  backward = false }\n");
    session user(ns_test::session_opts(ns_test::source_dir, {}, {ops.path}));
    const opgraph mine = opgraph_parse(rows, "d/custom-train-8-2.csv", costs(), {true, user.rule_kernels()});
    REQUIRE(mine.kernels.size() == 1 + 1);  // its forward (backward = false) and max_3's VECadd
    CHECK(first_kernel(mine, "max_1", phase::forward).k.bytes == 7);
  }
  SECTION("without a rule the row keeps no kernels, and the warning says so") {
    const opgraph bare = opgraph_parse(rows, "d/custom-train-8-2.csv", costs());
    CHECK(bare.kernels.size() == 1);
    REQUIRE(bare.warnings.size() == 2);
    CHECK(bare.warnings[1] == "d/custom-train-8-2.csv: 1 'max (attention score clamp)' rows without kernels in the graph "
                              "left without kernels (no op rule to price them)");
  }
}
