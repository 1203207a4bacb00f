// tests/cli/test_rule_contracts_cli.cpp — what a user test (tester5, persona: extender) found of the op-rule contract:
// fusion priced element-wise runs from its own table of bundled op names, so an overriding rule was bypassed and a new
// rules.elementwise op was never fused (scripts/neusight/fusion.lua now asks the rules in force: field `fusion`).
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;

namespace {

// add → act → mul over one (64, 256) tensor, inference with fusion, a roofline forecast (no weights needed).
const char* const chain_workload = R"lua(
return {
  gpu = "h100", mode = "inference", batch = 1, seq = 64, fusion = true,
  model = function(opts)
    local x = { 64, 256 }
    return {
      { op = "add", name = "bias_add", inputs = { x, x }, output = x },
      { op = "ACT", name = "act", inputs = { x }, output = x },
      { op = "mul", name = "gate", inputs = { x, x }, output = x },
    }, "chain"
  end,
})lua";

// The rows of `run` on the chain with op ACT = `act` and the rule files `rules` (name → text) in an --ops folder.
json chain_rows(const std::string& act, const std::vector<std::pair<std::string, std::string>>& rules) {
  temp_dir t;
  std::string wl = chain_workload;
  wl.replace(wl.find("ACT"), 3, act);
  const auto script = t.write("chain.lua", wl);
  for (const auto& [name, text] : rules) t.write("myops/" + name + ".lua", text);
  const auto r = run_cli("run '" + script.string() + "' --ops '" + (t.path / "myops").string() +
                         "' --predictor roofline --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out)["ops"];
}

// A bundled Lua module (`rel` below the source tree) up to its final `return M`: a --scripts copy appends overrides
// of its functions and returns M.
std::string bundled_head(const std::string& rel) {
  const std::string text = ns_test::slurp(ns_test::source_dir / rel);
  const size_t end = text.rfind("return M");
  REQUIRE(end != std::string::npos);
  return text.substr(0, end);
}

}  // namespace

TEST_CASE("fusion: an element-wise op a user makes with rules.elementwise joins the fused run", "[cli][fusion][rules]") {
  const json ops = chain_rows("softplus", {{"softplus", "return require('neusight.rules').elementwise { name = "
                                                        "'softplus', doc = 'as silu', op = 'silu', unary = true, "
                                                        "grad = 'same' }\n"}});
  REQUIRE(ops.size() == 1);
  CHECK(ops[0]["name"] == "bias_add~gate");
  CHECK(ops[0]["fused"] == json::array({"bias_add", "act", "gate"}));
  CHECK(ops[0]["flops"].get<double>() == 64.0 * 256 * (1 + 4 + 1));  // add, silu's 4 FLOPs (neusight.kernels), mul
}

TEST_CASE("fusion: an overriding rule's forward kernels are what the fused run computes", "[cli][fusion][rules]") {
  // gelu as 8 VECmul passes (HF's gelu_new in eager mode)
  const std::string body = "  forward = function(node)\n"
                           "    local rows, hidden = K.vec_shape(node.output)\n"
                           "    local ks = {}\n"
                           "    for i = 1, 8 do ks[i] = K.vec('mul', rows, hidden, node.dtype) end\n"
                           "    return ks\n"
                           "  end,\n  backward = false,\n}\n";
  const std::string head = "local K = require 'neusight.kernels'\nreturn {\n  name = 'gelu', doc = 'eight muls',\n";
  SECTION("one that says fusion = \"elementwise\" is fused with its 8 passes' FLOPs") {
    const json ops = chain_rows("gelu", {{"gelu", head + "  fusion = 'elementwise',\n" + body}});
    REQUIRE(ops.size() == 1);
    CHECK(ops[0]["fused"] == json::array({"bias_add", "act", "gate"}));
    CHECK(ops[0]["flops"].get<double>() == 64.0 * 256 * (1 + 8 + 1));
  }
  SECTION("one that says nothing is not fused: its own kernels stay, priced as the rule says") {
    const json ops = chain_rows("gelu", {{"gelu", head + body}});
    REQUIRE(ops.size() == 10);  // add, 8 x VECmul, mul
    int muls = 0;
    for (const auto& o : ops) muls += o["name"] == "act" && o["kernel"] == "VECmul";
    CHECK(muls == 8);
    CHECK(!ops[0].contains("fused"));
  }
}

TEST_CASE("tiling: a GEMM tile larger than any thread block is an error naming the tiling script", "[cli][tiling][rules]") {
  // the bundled scripts/tiling/gemm.lua, its select() returning a 100000 x 100000 tile (a user test: gpt2_large was
  // forecast at 11 years, no warning)
  temp_dir t;
  const std::string text = bundled_head("scripts/tiling/gemm.lua") +
                           "local select = M.select\nfunction M.select(k, gpu)\n  local s = select(k, gpu)\n" +
                           "  s.tile_m, s.tile_k = 100000, 100000\n  return s\nend\nreturn M\n";
  t.write("s/tiling/gemm.lua", text);
  const auto r = run_cli("predict --model gpt2_large --mode inference --batch 1 --seq 8 --gpu h100 --scripts '" +
                         (t.path / "s").string() + "'");
  CHECK(r.code == 1);
  CHECK(r.err.find("select(): tile_m and tile_k must be at most 1024 (got 100000 x 100000)") != std::string::npos);
  CHECK(r.err.find("tiling/gemm.lua") != std::string::npos);
}

TEST_CASE("tiling: an error a tiling rule raises keeps the rule's file and line through predict and eval kernels",
          "[cli][tiling][rules]") {
  // the bundled scripts/tiling/gemm.lua with a select() that raises: error() at level 1 (the rule's line) and a runtime
  // error (indexing nil), each reported at that line with the kernel being tiled, never rewrapped without it
  temp_dir t;
  const std::string head = bundled_head("scripts/tiling/gemm.lua") + "function M.select(k, gpu)\n";
  const auto line = std::count(head.begin(), head.end(), '\n') + 1;  // the body's first line
  const std::pair<const char*, const char*> bodies[] = {
      {"raise", "  error('this rule refuses a ' .. k.family .. ' kernel')\n"},
      {"index", "  local none = nil\n  return none.tile\n"}};
  for (const auto& [name, body] : bodies) {
    const std::string dir = (t.path / name).string();
    t.write(std::string(name) + "/tiling/gemm.lua", head + body + "end\nreturn M\n");
    const std::string at = dir + "/tiling/gemm.lua:" + std::to_string(line + (std::string(name) == "index"));
    for (const std::string& cmd : std::vector<std::string>
         {"predict --model gpt2_large --mode inference --batch 1 --seq 8 --gpu h100 --scripts '" + dir + "'",
          "eval kernels '" + (ns_test::source_dir / "tests" / "fixtures" / "bench" / "bmm_small.csv").string() +
              "' --scripts '" + dir + "' --format json"}) {
      INFO(cmd);
      const auto r = run_cli(cmd);
      INFO(r.err);
      CHECK(r.code == 1);
      CHECK(r.err.find("neusight: " + at + ": ") != std::string::npos);
      CHECK(r.err.find("while selecting the tile of kernel ") != std::string::npos);
    }
  }
}

TEST_CASE("kernel costs: an error neusight.kernels raises keeps its file and line and names the reader's row",
          "[cli][kernels][rules]") {
  // session::kernel_costs's catch: a message with a position (this rule's line) is kept as raised, with the row being
  // read (bmm_small.csv:2) after it; it is neither swallowed nor rewrapped into one without the rule's line
  temp_dir t;
  const std::string head = bundled_head("scripts/neusight/kernels.lua") + "function M.bmm(b, m, n, k, dtype)\n";
  const auto line = std::count(head.begin(), head.end(), '\n') + 1;
  t.write("s/neusight/kernels.lua", head + "  error('this rule refuses bmm')\nend\nreturn M\n");
  const std::string csv = (ns_test::source_dir / "tests" / "fixtures" / "bench" / "bmm_small.csv").string();
  const auto r = run_cli("eval kernels '" + csv + "' --scripts '" + (t.path / "s").string() + "' --format json");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("neusight: " + (t.path / "s").string() + "/neusight/kernels.lua:" + std::to_string(line) +
                   ": this rule refuses bmm") != std::string::npos);
  CHECK(r.err.find("while costing kernel BMM of " + csv + ":2") != std::string::npos);
}
