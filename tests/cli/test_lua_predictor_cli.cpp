// tests/cli/test_lua_predictor_cli.cpp — Lua predictors end to end (issue 14): a predictor written in Lua, in a test's
// temp dir, gives the forecast it computes through `neusight predict`; found as a module on the script search path
// (--scripts, NEUSIGHT_SCRIPTS_PATH, the bundled scripts/neusight/predictors/) or given as a file; accepted by every
// command with --predictor; its mistakes are errors with file:line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::temp_dir;
using ns_test::warned;
using Catch::Matchers::WithinRel;

namespace {

json parse_json(const ns_test::run_result& r) {
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// 1 µs per kernel, whatever the kernel.
const char* const const_us = R"lua(-- a constant predictor
return {
  description = "1 us per kernel",
  predict = function(kernels, gpu)
    local out = {}
    for i = 1, #kernels do out[i] = 1e-6 end
    return out
  end,
})lua";

const std::string gpt2 = "predict --model gpt2_large --gpu t4 --batch 1 --seq 128 --overhead off --format json ";

// latency = kernels × 1 µs: every op's ms_each is 1e-3 and the total is the kernel count (ops[].count) × 1e-3 ms.
void check_one_us_per_kernel(const json& j) {
  double kernels = 0;
  for (const auto& op : j["ops"]) {
    INFO(op.dump());
    CHECK_THAT(double(op["ms_each"]), WithinRel(1e-3, 1e-12));
    kernels += double(op["count"]);
  }
  CHECK(kernels > 100);
  CHECK_THAT(double(j["latency_ms"]), WithinRel(kernels * 1e-3, 1e-12));
}

// Runs `predict` with the predictor file `body` as "p.lua" in a temp dir; returns stderr with the dir as "TMP".
std::string predict_error(const std::string& body) {
  temp_dir t;
  const std::string file = t.write("p.lua", body).string();
  const auto r = run_cli(gpt2 + "--mode inference --predictor '" + file + "'");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  return ns_test::replace_all(r.err, t.path.string(), "TMP");
}

}  // namespace

TEST_CASE("Lua predictor: a constant 1 us predictor gives kernels x 1 us through neusight predict", "[cli][predictor]") {
  temp_dir t;
  t.write("mine/neusight/predictors/const_us.lua", const_us);
  const std::string dir = (t.path / "mine").string();
  SECTION("a module on --scripts, inference and training") {
    for (const char* mode : {"--mode inference", "--mode train --optimizer none"}) {
      const json j = parse_json(run_cli(gpt2 + mode + " --predictor const_us --scripts '" + dir + "'"));
      CHECK(j["predictor"] == "const_us");
      check_one_us_per_kernel(j);
    }
  }
  SECTION("a module on NEUSIGHT_SCRIPTS_PATH") {
    check_one_us_per_kernel(parse_json(
        run_cli(gpt2 + "--mode inference --predictor const_us", "NEUSIGHT_SCRIPTS_PATH='" + dir + ";;'")));
  }
  SECTION("a file") {
    const std::string file = t.write("elsewhere/one_us.lua", const_us).string();
    check_one_us_per_kernel(parse_json(run_cli(gpt2 + "--mode inference --predictor '" + file + "'")));
  }
  SECTION("without the search path entry the name is unknown") {
    const auto r = run_cli(gpt2 + "--mode inference --predictor const_us");
    CHECK(r.code == 1);
    CHECK(r.err.find("neusight: unknown predictor 'const_us': not a built-in and no neusight/predictors/const_us.lua "
                     "on the script search path (scripts); built-in: neusight, roofline, roofline-reference; Lua: ") == 0);
  }
}

TEST_CASE("Lua predictor: a pass-through to ns.predict gives the built-in's forecast bit for bit", "[cli][predictor]") {
  temp_dir t;
  const std::string file = t.write("via.lua", R"lua(local ns = require "neusight"
return { predict = function(kernels, gpu) return ns.predict(kernels, gpu, "neusight") end })lua").string();
  const std::string args = "predict --model gpt2_large --gpu h100 --mode train --dtype bf16 --batch 4 --seq 1024 "
                           "--format json --predictor ";
  const json want = parse_json(run_cli(args + "neusight"));
  const json got = parse_json(run_cli(args + ns_test::quoted(file)));
  CHECK(double(got["latency_ms"]) == double(want["latency_ms"]));
  REQUIRE(got["ops"].size() == want["ops"].size());
  for (size_t i = 0; i < got["ops"].size(); ++i) CHECK(double(got["ops"][i]["ms"]) == double(want["ops"][i]["ms"]));
}

TEST_CASE("Lua predictor: the bundled roofline_derated is the roofline over its family efficiency", "[cli][predictor]") {
  const std::string args = gpt2 + "--mode inference --predictor ";
  const json roof = parse_json(run_cli(args + "roofline"));
  const json derated = parse_json(run_cli(args + "roofline_derated"));
  REQUIRE(roof["ops"].size() == derated["ops"].size());
  // fp32: gemm → linear 0.779, bmm 0.723, elementwise 0.764, softmax 0.665, layernorm 0.574, memory 0.764
  const std::map<std::string, double> eff = {{"gemm", 0.779},    {"bmm", 0.723},       {"elementwise", 0.764},
                                             {"softmax", 0.665}, {"layernorm", 0.574}, {"memory", 0.764}};
  for (size_t i = 0; i < roof["ops"].size(); ++i) {
    const auto& r = roof["ops"][i];
    INFO(r.dump());
    CHECK_THAT(double(derated["ops"][i]["ms"]), WithinRel(double(r["ms"]) / eff.at(r["kind"]), 1e-12));
  }
}

// AMD GPUs have no tensor-core or fused-attention weights: the neusight predictor prices those families by the roofline
// over the same efficiency table (scripts/neusight/efficiency.lua) roofline_derated divides by, never the bare roofline;
// a --scripts efficiency.lua moves both; a bad table is an error that names it.
TEST_CASE("neusight predictor: families without weights take the roofline over scripts/neusight/efficiency.lua",
          "[cli][predictor]") {
  const std::string mi = "predict --model gpt2_large --gpu mi300x --batch 2 --seq 512 --dtype bf16 --mode inference "
                         "--overhead off --format json ";
  const json neu = parse_json(run_cli(mi + "--predictor neusight"));
  const json der = parse_json(run_cli(mi + "--predictor roofline_derated"));
  const json roof = parse_json(run_cli(mi + "--predictor roofline"));
  REQUIRE(neu["ops"].size() == der["ops"].size());
  std::set<std::string> priced;
  for (size_t i = 0; i < neu["ops"].size(); ++i) {
    const auto& o = neu["ops"][i];
    if (!(o["kind"] == "gemm" || o["kind"] == "attention")) continue;  // the fp32 families have AMD weights
    INFO(o.dump());
    CHECK_THAT(double(o["ms"]), WithinRel(double(der["ops"][i]["ms"]), 1e-12));
    CHECK(double(o["ms"]) > double(roof["ops"][i]["ms"]) * 1.3);  // 1 / 0.697 (gemm_tc16), 1 / 0.424 (prefill)
    priced.insert(o["kind"].get<std::string>());
  }
  CHECK(priced == std::set<std::string>{"attention", "gemm"});
  CHECK(warned(neu["warnings"], "priced by the roofline (peak of their dtype) over 0.697"));
  temp_dir t;
  t.write("s/neusight/efficiency.lua", "return { gemm_tc16 = 0.5, attention_prefill = 0.25 }\n");
  const json mine = parse_json(run_cli(mi + "--scripts '" + (t.path / "s").string() + "'"));
  for (size_t i = 0; i < neu["ops"].size(); ++i)
    if (neu["ops"][i]["kind"] == "gemm")
      CHECK_THAT(double(mine["ops"][i]["ms"]), WithinRel(double(roof["ops"][i]["ms"]) / 0.5, 1e-12));
  t.write("s/neusight/efficiency.lua", "return { gemm_tc16 = 1.5 }\n");
  const auto bad = run_cli(mi + "--scripts '" + (t.path / "s").string() + "'");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("neusight.efficiency (scripts/neusight/efficiency.lua or its --scripts override): field "
                     "'gemm_tc16' must be a number in (0, 1]") != std::string::npos);
}

// The roofline over an efficiency has no per-kernel floor: a decode attention kernel at batch 1 over a short context
// came out at a fraction of a microsecond on an MI300X. Such a kernel takes at least scripts/neusight/launch.lua's
// params(gpu).floor_s (the floor every other near-empty kernel is given), and a --scripts launch.lua moves it.
TEST_CASE("neusight predictor: families without weights take at least the launch floor of scripts/neusight/launch.lua",
          "[cli][predictor]") {
  const std::string mi = "predict --model llama3_8b --gpu mi300x --mode decode --batch 1 --context 16 --dtype bf16 "
                         "--overhead off --format json ";
  const json roof = parse_json(run_cli(mi + "--predictor roofline"));
  temp_dir t;
  const auto launch_with = [&](const std::string& name, const std::string& patch) {
    return run_cli(mi + ns_test::override_dir(t, name, "launch", patch));
  };
  const json bundled = parse_json(run_cli(mi));
  const json none = parse_json(launch_with("none", "M.PARAMS.default.floor_s = 0"));
  const json five = parse_json(launch_with("five", "M.PARAMS.default.floor_s = 5e-6"));
  // per GPU name, as the graph launch mode reads it
  const json mine = parse_json(launch_with("mine", "M.PARAMS.MI300X = { floor_s = 5e-6, bandwidth_efficiency = 0.8 }"));
  REQUIRE(roof["ops"].size() == bundled["ops"].size());
  REQUIRE(roof["ops"].size() == five["ops"].size());
  bool attention = false;
  for (size_t i = 0; i < roof["ops"].size(); ++i) {
    const auto& r = roof["ops"][i];
    if (!(r["kind"] == "gemm" || r["kind"] == "attention")) continue;  // gemm_tc16 and attention: no AMD weights
    INFO(r.dump());
    const double eff = r["kind"] == "gemm" ? 0.697 : 0.736;  // scripts/neusight/efficiency.lua
    const double derated = double(r["ms_each"]) / eff;
    CHECK_THAT(double(none["ops"][i]["ms_each"]), WithinRel(derated, 1e-12));  // no floor: the roofline over e
    CHECK(double(bundled["ops"][i]["ms_each"]) >= derated * (1 - 1e-12));
    CHECK_THAT(double(five["ops"][i]["ms_each"]), WithinRel(std::max(derated, 5e-3), 1e-12));
    if (r["kind"] == "attention") {
      attention = true;
      CHECK(derated < 1e-3);  // the roofline over e alone: a fraction of a microsecond
      CHECK(double(bundled["ops"][i]["ms_each"]) >= 1e-3);  // launch.lua's floor: at least a microsecond
      CHECK_THAT(double(five["ops"][i]["ms_each"]), WithinRel(5e-3, 1e-12));
    }
  }
  CHECK(attention);
  CHECK(double(five["latency_ms"]) > double(bundled["latency_ms"]));
  CHECK(double(mine["latency_ms"]) == double(five["latency_ms"]));
  CHECK(warned(five["warnings"], "and at least 5 µs each (floor_s, scripts/neusight/launch.lua)"));
  const auto bad = launch_with("bad", "M.PARAMS.default.floor_s = -1");
  CHECK(bad.code == 1);
  CHECK(bad.err.find("neusight/launch.lua: params(MI300X).floor_s must be a number >= 0 (seconds: the least a kernel "
                     "takes; got -1)") != std::string::npos);
}

TEST_CASE("Lua predictor: every command with --predictor takes one", "[cli][predictor]") {
  for (const std::string cmd :
       {"eval kernels tests/fixtures/bench/bmm_small.csv --format json",
        "eval models tests/fixtures/neusight/label/Tesla_T4 --format json",
        "search --model gpt2_large --gpu h100 --gpus 4 --batch 8 --seq 1024 --format json",
        "serve --model llama3_8b --gpu h100 --rate 2 --requests 20 --input-len 256 --output-len 8 --format json",
        "run examples/gpt3_train.lua --format json"}) {
    INFO(cmd);
    const json j = parse_json(run_cli(cmd + " --predictor roofline_derated"));
    CHECK(j["predictor"] == "roofline_derated");
  }
}

TEST_CASE("Lua predictor: mistakes are errors that say where", "[cli][predictor]") {
  SECTION("an unknown name suggests a built-in or a Lua predictor") {
    const auto r = run_cli(gpt2 + "--mode inference --predictor roofline_derate");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "neusight: unknown predictor 'roofline_derate' (did you mean 'roofline_derated'?): not a built-in and no "
          "neusight/predictors/roofline_derate.lua on the script search path (scripts); built-in: neusight, roofline, "
          "roofline-reference; Lua: neusight_vector_form, roofline_derated (or give a .lua file)\n");
    CHECK(run_cli(gpt2 + "--mode inference --predictor nope/p.lua").err == "neusight: predictor nope/p.lua: no such file\n");
  }
  SECTION("the schema: a table, predict required, no unknown keys") {
    CHECK(predict_error("return 42\n") ==
          "neusight: TMP/p.lua: a predictor must return a table { predict = function(kernels, gpu) … end } (got number)\n"
          "    while loading predictor 'TMP/p.lua' (TMP/p.lua)\n");
    CHECK(predict_error("return { description = 'x' }\n") ==
          "neusight: TMP/p.lua: missing required field 'predict' (function(kernels, gpu) returning seconds per kernel)\n"
          "    while loading predictor 'TMP/p.lua' (TMP/p.lua)\n");
    CHECK(predict_error("return { predikt = function() end }\n") ==
          "neusight: TMP/p.lua: unknown field 'predikt' (did you mean 'predict'?)\n"
          "    while loading predictor 'TMP/p.lua' (TMP/p.lua)\n");
    CHECK(predict_error("return { predict = 'fast' }\n") ==
          "neusight: TMP/p.lua: field 'predict' must be a function (got string)\n"
          "    while loading predictor 'TMP/p.lua' (TMP/p.lua)\n");
  }
  SECTION("what predict returns: the count, numbers, finite and >= 0 (file:line of predict)") {
    CHECK(predict_error("return {\n  predict = function(k, gpu)\n    return { 1 }\n  end,\n}\n") ==
          "neusight: TMP/p.lua:2: predict() returned 1 values for 22 kernels (one number of seconds per kernel, in "
          "order)\n");
    CHECK(predict_error("return {\n  predict = function(k, gpu) return nil end,\n}\n") ==
          "neusight: TMP/p.lua:2: predict() returned nil, expected an array of 22 numbers (seconds per kernel, in "
          "order)\n");
    const std::string each = "return {\n  predict = function(k, gpu)\n    local o = {}\n"
                             "    for i = 1, #k do o[i] = i == 2 and VALUE or 1e-6 end\n    return o\n  end,\n}\n";
    for (const auto& [value, shown] : {std::pair{"-1", "-1"}, {"0/0", "nan"}, {"math.huge", "inf"}}) {
      INFO(value);
      CHECK(predict_error(ns_test::replace_all(each, "VALUE", value)) ==
            std::string("neusight: TMP/p.lua:2: predict() returned ") + shown +
                " for kernel #2 'VECadd' (elementwise): seconds must be finite and >= 0\n");
    }
    CHECK(predict_error(ns_test::replace_all(each, "VALUE", "'1e-6'")) ==
          "neusight: TMP/p.lua:2: predict() returned a string for kernel #2 'VECadd' (elementwise), expected a number "
          "of seconds\n");
  }
  SECTION("a runtime error, in predict or in ns.predict, names its line") {
    CHECK(predict_error("return {\n  predict = function(k, gpu)\n    return k.nope.x\n  end,\n}\n") ==
          "neusight: TMP/p.lua:3: attempt to index a nil value (field 'nope')\n"
          "    while predicting 22 kernels on T4 with predictor 'TMP/p.lua' (TMP/p.lua:2)\n");
    CHECK(predict_error("local ns = require 'neusight'\nreturn {\n  predict = function(k, gpu)\n"
                        "    local s = ns.predict(k, gpu, 'neusigth')\n    return s\n  end,\n}\n") ==
          "neusight: TMP/p.lua:4: ns.predict: unknown built-in predictor 'neusigth' (did you mean 'neusight'?); "
          "built-in: neusight, roofline, roofline-reference (a Lua predictor is a module: "
          "require(\"neusight.predictors.<name>\").predict)\n"
          "    while predicting 22 kernels on T4 with predictor 'TMP/p.lua' (TMP/p.lua:3)\n");
  }
}

namespace {
// The warnings of `j` that start with `prefix`.
std::vector<std::string> warnings_starting(const json& j, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& w : j["warnings"])
    if (w.get<std::string>().rfind(prefix, 0) == 0) out.push_back(w.get<std::string>());
  return out;
}
}  // namespace

// tester5 #8: a Lua predictor answering in milliseconds (54 s for GPT-2 Large) was accepted without a word, and one
// faster than the GPU's peaks passed unless the whole forecast's MFU went over 100 %. Each is one warning per
// forecast (scripts/neusight/figures.lua predictor_warnings) naming the file:line and the furthest kernel.
TEST_CASE("Lua predictor: answers far above or below the roofline are warned of once per forecast", "[cli][predictor]") {
  temp_dir t;
  const std::string ms = t.write("ms.lua", "return { predict = function(kernels, gpu) local o = {} for i, k in "
                                           "ipairs(kernels) do o[i] = k.bytes / (gpu.mem_bw_gbps * 1e6) end return o "
                                           "end }\n").string();
  const std::string fast = t.write("fast.lua", "return { predict = function(kernels, gpu) local o = {} for i, k in "
                                               "ipairs(kernels) do o[i] = k.bytes / (gpu.mem_bw_gbps * 1e12) end "
                                               "return o end }\n").string();
  const std::string pass = t.write("pass.lua", "local ns = require 'neusight'\nreturn { predict = function(k, gpu) "
                                               "return ns.predict(k, gpu, 'neusight') end }\n").string();
  SECTION("milliseconds: one warning naming the file, the count and the furthest kernel") {
    const json j = parse_json(run_cli(gpt2 + "--mode inference --predictor " + ns_test::quoted(ms)));
    const auto w = warnings_starting(j, "predictor " + ms + ":1 priced ");
    REQUIRE(w.size() == 1);
    CHECK_THAT(w[0], Catch::Contains(" kernels on T4 over 100 times their roofline time (max(FLOPs / peak, bytes / "
                                     "bandwidth)), the furthest '"));
    CHECK_THAT(w[0], Catch::Contains("(x1000): predict() returns seconds per kernel, not milliseconds"));
    CHECK(warnings_starting(j, "predictor ").size() == 1);
  }
  SECTION("faster than the peaks: one warning") {
    const json j = parse_json(run_cli(gpt2 + "--mode inference --predictor " + ns_test::quoted(fast)));
    const auto w = warnings_starting(j, "predictor " + fast + ":1 priced 22 of 22 kernels on T4 below their roofline "
                                        "time (max(FLOPs / peak, bytes / bandwidth)), faster than the GPU's peaks "
                                        "allow, the furthest '");
    CHECK(w.size() == 1);
    CHECK(warnings_starting(j, "predictor ").size() == 1);
  }
  SECTION("the built-ins through ns.predict and the bundled roofline_derated: none") {
    for (const std::string& p : {pass, std::string("roofline_derated"), std::string("neusight_vector_form")})
      for (const char* mode : {"--mode inference", "--mode train"}) {
        INFO(p << " " << mode);
        CHECK(warnings_starting(parse_json(run_cli(gpt2 + mode + " --predictor " + ns_test::quoted(p))), "predictor ")
                  .empty());
      }
  }
}

// tester5 #15(j): a Lua predictor wrapping ns.predict(…, "neusight") dropped the built-in's out-of-distribution
// warnings (0 on an H100, where --predictor neusight gives them): they reach the forecast as the built-in's do.
TEST_CASE("Lua predictor: a wrapper of ns.predict neusight keeps its out-of-distribution warnings", "[cli][predictor]") {
  temp_dir t;
  const std::string file = t.write("via.lua", R"lua(local ns = require "neusight"
return { predict = function(kernels, gpu) return ns.predict(kernels, gpu, "neusight") end })lua").string();
  const std::string args = "predict --model gpt2_large --gpu h100 --mode inference --batch 4 --seq 1024 --format json "
                           "--predictor ";
  const json want = parse_json(run_cli(args + "neusight"));
  const json got = parse_json(run_cli(args + ns_test::quoted(file)));
  const auto ood = warnings_starting(want, "H100-SXM5-80GB is out of distribution for the ");
  REQUIRE_FALSE(ood.empty());
  CHECK(warnings_starting(got, "H100-SXM5-80GB is out of distribution for the ") == ood);
  // a roofline wrapper has none to keep
  const std::string roof = t.write("roof.lua", R"lua(local ns = require "neusight"
return { predict = function(kernels, gpu) return ns.predict(kernels, gpu, "roofline") end })lua").string();
  CHECK(warnings_starting(parse_json(run_cli(args + ns_test::quoted(roof))), "H100-SXM5-80GB is out of").empty());
}

// ns.predict ran the out-of-distribution rule (neusight.uncertainty warnings) on every call: a predictor asking kernel
// by kernel ran it once per distinct kernel (hundreds of times per forecast) for the same few warnings. It runs once per
// forecast and set of families now, with the same warnings. Counted by a copy of uncertainty.lua on --scripts whose
// warnings() adds one "uncertainty warnings run N" line per run.
TEST_CASE("Lua predictor: ns.predict runs the out-of-distribution rule once per forecast and family set",
          "[cli][predictor]") {
  temp_dir t;
  std::string src = ns_test::slurp(ns_test::source_dir / "scripts" / "neusight" / "uncertainty.lua");
  const size_t end = src.rfind("return M");
  REQUIRE(end != std::string::npos);
  src.insert(end, R"lua(local runs, warnings_of = 0, M.warnings
function M.warnings(r)
  runs = runs + 1
  local out = warnings_of(r)
  out.warnings[#out.warnings + 1] = "uncertainty warnings run " .. runs
  return out
end
)lua");
  t.write("mine/neusight/uncertainty.lua", src);
  const std::string each = t.write("each.lua", R"lua(local ns = require "neusight"
return { predict = function(kernels, gpu)
  local out = {}
  for i, k in ipairs(kernels) do out[i] = ns.predict({ k }, gpu, "neusight")[1] end
  return out
end })lua").string();
  const json j = parse_json(run_cli("predict --model gpt2_large --gpu h100 --mode inference --batch 4 --seq 1024 "
                                    "--format json --scripts '" + (t.path / "mine").string() + "' --predictor " +
                                    ns_test::quoted(each)));
  const auto runs = warnings_starting(j, "uncertainty warnings run ");
  INFO(j["warnings"].dump());
  CHECK(runs.size() >= 1);
  CHECK(runs.size() <= 8);  // one per family (each kernel alone is its family's set); before: one per distinct kernel
  CHECK(warnings_starting(j, "H100-SXM5-80GB is out of distribution for the ").size() >= 1);  // still said
}
