// tests/cli/test_rule_contracts_cli.cpp — what a user test (tester5, persona: extender) found of the op-rule contract:
// fusion priced element-wise runs from its own table of bundled op names, so an overriding rule was bypassed and a new
// rules.elementwise op was never fused (scripts/neusight/fusion.lua now asks the rules in force: field `fusion`).
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
  std::string text = ns_test::slurp(ns_test::source_dir / "scripts" / "tiling" / "gemm.lua");
  const size_t end = text.rfind("return M");
  REQUIRE(end != std::string::npos);
  text = text.substr(0, end) + "local select = M.select\nfunction M.select(k, gpu)\n  local s = select(k, gpu)\n" +
         "  s.tile_m, s.tile_k = 100000, 100000\n  return s\nend\nreturn M\n";
  t.write("s/tiling/gemm.lua", text);
  const auto r = run_cli("predict --model gpt2_large --mode inference --batch 1 --seq 8 --gpu h100 --scripts '" +
                         (t.path / "s").string() + "'");
  CHECK(r.code == 1);
  CHECK(r.err.find("select(): tile_m and tile_k must be at most 1024 (got 100000 x 100000)") != std::string::npos);
  CHECK(r.err.find("tiling/gemm.lua") != std::string::npos);
}
