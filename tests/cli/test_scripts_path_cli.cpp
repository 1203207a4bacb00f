// tests/cli/test_scripts_path_cli.cpp — the script module search path (issue 15): --scripts DIR (repeatable) and
// NEUSIGHT_SCRIPTS_PATH put a researcher's modules before the bundled scripts/, first hit wins; -v names the files
// that shadow bundled ones; `neusight paths` shows the path; require still cannot leave the script roots. A
// pipeline.lua there changes a forecast's steps (scripts/neusight/pipeline.lua, issue 14): a post-processing step shows
// in the JSON and in a comparison's rows, kernels' latencies can be changed before they are summed; an error in it
// names its file and line, exits non-zero and writes no -o file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_csv.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::source_dir;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

json parse_json(const ns_test::run_result& r) {
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// 1 GFLOP and 1 GB per call: on Tiny-1 (2 TFLOP/s fp32, 100 GB/s) the roofline is 10 ms, 3 calls → 30 ms.
const char* const fancy_rule = R"lua(return {
  name = "fancy", doc = "1 GFLOP, 1 GB", backward = false,
  forward = function(node, gpu)
    return { { kind = "elementwise", name = "VECfancy", op = "fancy", rows = 1, hidden = node.output[1],
               flops = 1e9, bytes = 1e9 } }
  end,
})lua";

const char* const fancy_workload = R"lua(
return {
  gpu = "tests/fixtures/gpus/tiny.toml", mode = "inference", batch = 1, seq = 1,
  model = function(opts)
    return { { op = "fancy", name = "f0", inputs = { { 1000 } }, output = { 1000 }, count = 3 } }
  end,
})lua";

// A neusight.launch whose eager mode multiplies every kernel's time by `factor`.
std::string launch_override(const std::string& factor) {
  return "local M = { MODES = { 'eager', 'graph' } }\n"
         "function M.apply(kernels, seconds, gpu, mode)\n"
         "  local out = {}\n"
         "  for i = 1, #seconds do out[i] = seconds[i] * " + factor + " end\n"
         "  return out\n"
         "end\n"
         "return M\n";
}

// A pipeline of a researcher's own: the bundled steps in short (the workload's warnings left out), then a
// post-processing step — the latency with a
// 10 % margin as a figure of its own — and a warning that says so.
const char* const margin_pipeline = R"lua(local report = require "neusight.report"
local M = {}
function M.finish(run)
  local totals = run.forecast()
  run.timeline()
  local inputs = report.figure_inputs(run.fields, totals, run.gpu)
  if run.row_keys then inputs[#inputs + 1] = { "row_keys", run.row_keys } end
  local figures = run.figures(inputs)
  figures.fields[#figures.fields + 1] =
    { key = "latency_margin_ms", value = totals.total * 1.1e3, column = "margin ms", cell = "m" }
  return { figures = figures, warnings = { "pipeline: latency_margin_ms adds 10 %" } }
end
function M.forecast(run)
  local w = run.workload()
  run.fields, run.gpu = w.fields, w.gpu
  run.expand()
  run.predictor()
  return M.finish(run)
end
return M
)lua";

struct fixture {
  temp_dir t;
  std::string script, ops, tiny;
  fixture() {
    t.write("myops/fancy.lua", fancy_rule);
    script = t.write("work/custom.lua", fancy_workload).string();
    ops = (t.path / "myops").string();
    tiny = (source_dir / "tests/fixtures/gpus/tiny.toml").string();
  }
  std::string args(const std::string& extra = "") const {
    return "run '" + script + "' --predictor roofline --gpu '" + tiny + "' --ops '" + ops + "' --format json " + extra;
  }
};


// A run stopped by neusight.needs' error of an older --scripts copy: the override dir `dir`'s neusight/`file`.lua
// lacking function `fn`, named with the bundled file to compare it with; nothing on stdout.
void older_copy_named(const ns_test::run_result& r, const std::string& dir, const std::string& file,
                      const std::string& fn) {
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("/" + dir + "/neusight/" + file + ".lua has no function " + fn + " (module neusight." + file +
                   "): a --scripts copy from an older neusight? compare it with the bundled scripts/neusight/" + file +
                   ".lua") != std::string::npos);
}

}  // namespace

TEST_CASE("scripts path: --scripts overrides a bundled module, without it the bundled one runs", "[cli][scripts]") {
  fixture f;
  f.t.write("s1/neusight/launch.lua", launch_override("2"));
  f.t.write("s2/neusight/launch.lua", launch_override("3"));
  const std::string s1 = (f.t.path / "s1").string(), s2 = (f.t.path / "s2").string();
  // bundled launch.lua: eager leaves the predicted seconds alone
  CHECK_THAT(double(parse_json(run_cli(f.args()))["latency_ms"]), Catch::Matchers::WithinRel(30.0, 1e-12));
  // the override doubles them
  CHECK_THAT(double(parse_json(run_cli(f.args("--scripts '" + s1 + "'")))["latency_ms"]),
             Catch::Matchers::WithinRel(60.0, 1e-12));
  // repeatable, first hit wins
  CHECK_THAT(double(parse_json(run_cli(f.args("--scripts '" + s2 + "' --scripts '" + s1 + "'")))["latency_ms"]),
             Catch::Matchers::WithinRel(90.0, 1e-12));
  // a directory without the module: the bundled one
  f.t.write("s3/other/thing.lua", "return {}\n");
  CHECK_THAT(double(parse_json(run_cli(f.args("--scripts '" + (f.t.path / "s3").string() + "'")))["latency_ms"]),
             Catch::Matchers::WithinRel(30.0, 1e-12));
  // predict takes the flag too (a bundled model, fp16 eager on l4: times double)
  const std::string pargs = "predict --model gpt2_large --gpu l4 --mode inference --batch 1 --seq 64 --format json ";
  const double base = parse_json(run_cli(pargs))["latency_ms"];
  CHECK_THAT(double(parse_json(run_cli(pargs + "--scripts '" + s1 + "'"))["latency_ms"]),
             Catch::Matchers::WithinRel(2 * base, 1e-9));
}

TEST_CASE("scripts path: NEUSIGHT_SCRIPTS_PATH, an empty entry (two separators in a row) splicing the bundled scripts", "[cli][scripts]") {
  fixture f;
  f.t.write("s1/neusight/launch.lua", launch_override("2"));
  f.t.write("s2/neusight/launch.lua", launch_override("3"));
  const std::string s1 = (f.t.path / "s1").string(), s2 = (f.t.path / "s2").string();
  auto ms = [&](const std::string& env, const std::string& extra = "") {
    return double(parse_json(run_cli(f.args(extra), "NEUSIGHT_SCRIPTS_PATH='" + env + "'"))["latency_ms"]);
  };
  CHECK_THAT(ms(s1 + ";;"), Catch::Matchers::WithinRel(60.0, 1e-12));
  CHECK_THAT(ms(s2 + ";" + s1 + ";;"), Catch::Matchers::WithinRel(90.0, 1e-12));
  CHECK_THAT(ms(";;" + s1), Catch::Matchers::WithinRel(30.0, 1e-12));  // the bundled module comes first
  CHECK_THAT(ms("", ""), Catch::Matchers::WithinRel(30.0, 1e-12));      // empty: the defaults
  // --scripts comes before the variable
  CHECK_THAT(ms(s1 + ";;", "--scripts '" + s2 + "'"), Catch::Matchers::WithinRel(90.0, 1e-12));
  // without ";;" the bundled scripts are not searched: neusight.pipeline, the first module a forecast runs, cannot be
  // found
  const auto r = run_cli(f.args(), "NEUSIGHT_SCRIPTS_PATH='" + s1 + "'");
  CHECK(r.code == 1);
  CHECK(r.err.find("module 'neusight.pipeline' not found") != std::string::npos);
}

TEST_CASE("scripts path: -v names each user file that shadows a bundled one — paths shows the path", "[cli][scripts]") {
  fixture f;
  f.t.write("s1/neusight/launch.lua", launch_override("2"));
  f.t.write("s1/tiling/init.lua", "return {}\n");   // module "tiling": nothing bundled to shadow
  f.t.write("s1/mine/helper.lua", "return {}\n");   // a new module
  const std::string s1 = (f.t.path / "s1").string();
  auto r = run_cli(f.args("--scripts '" + s1 + "' -v"));
  REQUIRE(r.code == 0);
  CHECK(r.err.find(fs::path(s1).lexically_normal().generic_string() +
                   "/neusight/launch.lua shadows scripts/neusight/launch.lua (module 'neusight.launch')") !=
        std::string::npos);
  CHECK(r.err.find("helper") == std::string::npos);
  CHECK(r.err.find("tiling") == std::string::npos);
  // without -v: nothing said
  r = run_cli(f.args("--scripts '" + s1 + "'"));
  REQUIRE(r.code == 0);
  CHECK(r.err.find("shadows") == std::string::npos);
  // the variable's directories are reported too
  r = run_cli(f.args("-v"), "NEUSIGHT_SCRIPTS_PATH='" + s1 + ";;'");
  CHECK(r.err.find("/neusight/launch.lua shadows scripts/neusight/launch.lua") != std::string::npos);

  const auto p = run_cli("paths --scripts '" + s1 + "'");
  REQUIRE(p.code == 0);
  CHECK(p.out.find("script search " + s1 + ":" + (source_dir / "scripts").string()) != std::string::npos);
  const auto pe = run_cli("paths", "NEUSIGHT_SCRIPTS_PATH='" + s1 + ";;'");
  CHECK(pe.out.find("script search " + s1 + ":" + (source_dir / "scripts").string()) != std::string::npos);
  CHECK(pe.out.find("is not searched") == std::string::npos);
}

TEST_CASE("paths says when a search variable without the splice leaves the bundled folder out", "[cli][scripts][ops]") {
  fixture f;
  f.t.write("o1/mine.lua", "return {}\n");
  const std::string o1 = (f.t.path / "o1").string();
  const auto p = run_cli("paths", "NEUSIGHT_OPS_PATH='" + o1 + "'");
  REQUIRE(p.code == 0);
  CHECK(p.out.find("op search     " + o1 + "   (") != std::string::npos);
  CHECK(p.out.find("the bundled ops/ is not searched: NEUSIGHT_OPS_PATH has no \";;\"") != std::string::npos);
  const auto q = run_cli("paths", "NEUSIGHT_OPS_PATH='" + o1 + ";;'");
  CHECK(q.out.find("is not searched") == std::string::npos);
}

TEST_CASE("scripts path: a missing --scripts directory is an error naming the flag", "[cli][scripts]") {
  fixture f;
  const std::string missing = (f.t.path / "no_such_dir").string();
  for (const std::string& cmd : {f.args("--scripts '" + missing + "'"), std::string("paths --scripts '" + missing + "'")}) {
    const auto r = run_cli(cmd);
    CHECK(r.code != 0);
    CHECK(r.err.find("--scripts") != std::string::npos);
    CHECK(r.err.find(missing + ": no such directory") != std::string::npos);
    CHECK(r.out.empty());
  }
  // a file is not a directory
  const auto file = f.t.write("afile", "x").string();
  const auto not_dir = run_cli(f.args("--scripts '" + file + "'"));
  CHECK(not_dir.code != 0);
  CHECK(not_dir.err.find("--scripts: " + file + ": not a directory") != std::string::npos);
}

TEST_CASE("scripts path: a module in a user dir cannot require its way out of the script roots", "[cli][scripts][safety]") {
  fixture f;
  f.t.write("secret.lua", "return { owned = true }\n");
  f.t.write("user/sub/secret.lua", "return { owned = true }\n");
  const std::string user = (f.t.path / "user").string();
  const std::string dotted = ns_test::replace_all((f.t.path / "secret").string(), "/", ".");
  for (const std::string& name : {std::string("..secret"), std::string("...secret"), std::string("../secret"),
                                  (f.t.path / "secret").string(), dotted, std::string("sub..secret"),
                                  std::string("sub/secret"), std::string("neusight.")}) {
    INFO(name);
    f.t.write("user/neusight/launch.lua", "local m = require('" + name + "')\n" + launch_override("2"));
    const auto r = run_cli(f.args("--scripts '" + user + "'"));
    CHECK(r.code == 1);
    CHECK(r.err.find("module '" + name + "' not found: invalid module name") != std::string::npos);
    CHECK(r.err.find("neusight/launch.lua:1:") != std::string::npos);
  }
  // a valid name reaches modules under the user root (and only there or in the bundled scripts)
  f.t.write("user/neusight/launch.lua", "local m = require('sub.secret')\nassert(m.owned)\n" + launch_override("2"));
  CHECK_THAT(double(parse_json(run_cli(f.args("--scripts '" + user + "'")))["latency_ms"]),
             Catch::Matchers::WithinRel(60.0, 1e-12));
  // "secret" sits one level above the root: not found
  f.t.write("user/neusight/launch.lua", "local m = require('secret')\n" + launch_override("2"));
  const auto r = run_cli(f.args("--scripts '" + user + "'"));
  CHECK(r.code == 1);
  CHECK(r.err.find("module 'secret' not found:") != std::string::npos);
  CHECK(r.err.find("no file 'scripts/secret.lua'") != std::string::npos);
}

TEST_CASE("scripts path: eval kernels, eval models, scale and ops take --scripts too", "[cli][scripts]") {
  temp_dir t;
  t.write("s/neusight/kernels.lua", "error('user neusight.kernels loaded', 0)\n");
  t.write("s/neusight/scale.lua", "error('user neusight.scale loaded', 0)\n");
  const std::string s = " --scripts '" + (t.path / "s").string() + "'";
  const std::string trace = "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.csv";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"eval kernels tests/fixtures/bench/bmm_small.csv --predictor roofline --format json", "neusight.kernels"},
      {"eval models tests/fixtures/neusight/label --predictor roofline --format json", "neusight.kernels"},
      {"scale --trace " + trace + " --from 'Tesla T4' --to t4 --format json", "neusight."},  // kernels or scale
  };
  for (const auto& [cmd, module] : runs) {
    INFO(cmd);
    REQUIRE(run_cli(cmd).code == 0);  // the bundled modules
    const auto r = run_cli(cmd + s);
    CHECK(r.code == 1);
    CHECK(r.err.find("user " + module) != std::string::npos);
  }
  // ops -v reports the script files that shadow bundled ones
  const auto o = run_cli("ops -v" + s);
  REQUIRE(o.code == 0);
  CHECK(o.err.find("/s/neusight/kernels.lua shadows scripts/neusight/kernels.lua (module 'neusight.kernels')") !=
        std::string::npos);
}

TEST_CASE("scripts path: a pipeline.lua under --scripts adds a post-processing step that shows in the JSON",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  fs::create_directories(f.t.path / "s");
  // without an override: the bundled pipeline (no such figure)
  const json plain = parse_json(run_cli(f.args(scripts)));
  CHECK_THAT(double(plain["latency_ms"]), Catch::Matchers::WithinRel(30.0, 1e-12));
  CHECK_FALSE(plain["figures"].contains("latency_margin_ms"));
  f.t.write("s/neusight/pipeline.lua", margin_pipeline);
  const auto r = run_cli(f.args(scripts));
  const json j = parse_json(r);
  CHECK_THAT(double(j["latency_ms"]), Catch::Matchers::WithinRel(30.0, 1e-12));
  CHECK_THAT(double(j["figures"]["latency_margin_ms"]), Catch::Matchers::WithinRel(33.0, 1e-12));
  CHECK(j["figures"]["tokens_per_s"] == plain["figures"]["tokens_per_s"]);  // the bundled figures are still there
  REQUIRE(j["warnings"].is_array());
  CHECK(j["warnings"].back() == "pipeline: latency_margin_ms adds 10 %");
  CHECK(r.err.find("latency_margin_ms adds 10 %") == std::string::npos);  // say is the pipeline's to honour
  // a comparison's rows go through the same pipeline: each row has the figure
  const json rows = parse_json(run_cli(f.args("--batch 1,2" + scripts)));
  REQUIRE(rows["rows"].size() == 2);
  for (const auto& row : rows["rows"]) CHECK_THAT(double(row["latency_margin_ms"]), Catch::Matchers::WithinRel(33.0, 1e-12));
}

TEST_CASE("scripts path: a pipeline.lua under --scripts post-processes the kernels' latencies before they are summed",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  // the bundled pipeline with run.forecast() in its two halves: every element-wise kernel twice as long
  f.t.write("s/neusight/pipeline.lua",
            "local report = require 'neusight.report'\n"
            "local M = {}\n"
            "function M.forecast(run)\n"
            "  local w = run.workload()\n"
            "  run.expand()\n"
            "  run.predictor()\n"
            "  assert(run.predict() == 1)\n"
            "  local kernels, seconds = run.kernels(), run.latencies()\n"
            "  for i, k in ipairs(kernels) do\n"
            "    assert(k.node == 'f0' and k.count == 3 and k.phase == 'forward' and k.name == 'VECfancy')\n"
            "    if k.kind == 'elementwise' then seconds[i] = seconds[i] * 2 end\n"
            "  end\n"
            "  run.set_latencies(seconds)\n"
            "  local totals = run.aggregate()\n"
            "  local figures = run.figures(report.figure_inputs(w.fields, totals, w.gpu))\n"
            "  return { figures = figures, warnings = w.warnings }\n"
            "end\n"
            "return M\n");
  const json j = parse_json(run_cli(f.args(scripts)));
  CHECK_THAT(double(j["latency_ms"]), Catch::Matchers::WithinRel(60.0, 1e-12));
  // a latency that is not a number >= 0 is refused where it is set
  const fs::path file = f.t.write("s/neusight/pipeline.lua",
                                  "local M = {}\nfunction M.forecast(run)\n  run.workload(); run.expand(); run.predictor()\n"
                                  "  run.predict()\n  run.set_latencies({ -1 })\nend\nreturn M\n");
  const auto r = run_cli(f.args(scripts));
  CHECK(r.code == 1);
  CHECK(r.err.find(file.lexically_normal().generic_string() +
                   ":5: run.set_latencies(): seconds[1] must be a finite number >= 0") != std::string::npos);
  // the same error with a <close> handler that calls a primitive while the error unwinds: still the primitive's own
  // error, passed through without the pipeline's context line (the handler's nested call had hidden it; review)
  // (run.expand() runs the op rules: a nested script call)
  for (const char* closing : {"run.expand()", "local x = 1"}) {
    INFO(closing);
    f.t.write("s/neusight/pipeline.lua",
              std::string("local M = {}\nfunction M.forecast(run)\n  run.workload()\n"
                          "  local guard <close> = setmetatable({}, { __close = function() ") + closing + " end })\n"
                          "  run.set_latencies({ 1 })\nend\nreturn M\n");
    const auto c = run_cli(f.args(scripts));
    CHECK(c.code == 1);
    CHECK(c.err.find(":5: run.set_latencies(): no latencies yet (call run.predict() first)") != std::string::npos);
    CHECK(c.err.find("pipeline.lua forecast") == std::string::npos);
  }
}

TEST_CASE("scripts path: an error in the pipeline.lua of --scripts names its file and line and writes no -o file",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  const fs::path file = f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  run.workload()\n"
                                                              "  error('no figures today')\nend\nreturn M\n");
  const std::string where = file.lexically_normal().generic_string();
  const fs::path out = f.t.path / "out.json";
  const auto r = run_cli(f.args("-o '" + out.string() + "'" + scripts));
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find(where + ":4: no figures today") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // a primitive used out of order: the message names the line that called it
  f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  run.timeline()\nend\nreturn M\n");
  const auto r2 = run_cli(f.args("-o '" + out.string() + "'" + scripts));
  CHECK(r2.code == 1);
  CHECK(r2.err.find(where + ":3: run.timeline(): no forecast yet") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // a pipeline that makes no forecast
  f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  return {}\nend\nreturn M\n");
  const auto r3 = run_cli(f.args("-o '" + out.string() + "'" + scripts));
  CHECK(r3.code == 1);
  CHECK(r3.err.find(where + " forecast(): the run made no forecast") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // one without the step the command takes (`run` of a workload: forecast)
  f.t.write("s/neusight/pipeline.lua", "return { finish = function(run) end }\n");
  const auto r4 = run_cli(f.args("-o '" + out.string() + "'" + scripts));
  CHECK(r4.code == 1);
  CHECK(r4.err.find("module neusight.pipeline has no function forecast") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // serve forecasts its phases through it: the error is the pipeline's, not the model's ("cannot be served")
  f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  run.workload()\n"
                                       "  error('no figures today')\nend\nreturn M\n");
  const auto served = run_cli("serve --model gpt2_med --gpu h100 --batch 2 --input-len 16 --output-len 4" + scripts);
  CHECK(served.code == 1);
  CHECK(served.err.find(where + ":4: no figures today") != std::string::npos);
  CHECK(served.err.find("cannot be served") == std::string::npos);
  // with --traceback, its traceback starts in the pipeline (the line that raised it), not where serve.lua raised it
  // again, and goes on through serve.lua; the message keeps serve.lua's context line
  const auto traced =
      run_cli("serve --model gpt2_med --gpu h100 --batch 2 --input-len 16 --output-len 4 --traceback" + scripts);
  CHECK(traced.code == 1);
  const size_t tb = traced.err.find("stack traceback:");
  REQUIRE(tb != std::string::npos);
  CHECK(traced.err.find(where + ":4: in ", tb) != std::string::npos);
  CHECK(traced.err.find("scripts/neusight/serve.lua:", tb) != std::string::npos);
  CHECK(traced.err.find("in scripts/neusight/serve.lua run") < tb);
  // the same from serve --calibrate's forecast (serve.lua calibration_inputs)
  const fs::path measured = f.t.write("m.toml", "ttft_ms = 10\n");
  const fs::path gpu = f.t.path / "tiny.toml";  // a copy: a calibration is written beside the GPU's file
  fs::copy_file(f.tiny, gpu);
  const auto fit = run_cli("serve --model gpt2_med --gpu '" + gpu.string() + "' --batch 2 --input-len 16 --output-len 4 "
                           "--calibrate '" + measured.string() + "' --traceback" + scripts);
  CHECK(fit.code == 1);
  const size_t tb2 = fit.err.find("stack traceback:");
  REQUIRE(tb2 != std::string::npos);
  CHECK(fit.err.find(where + ":4: in ", tb2) != std::string::npos);
  // the error of a script a primitive runs (the bundled pipeline's run.workload()) keeps the traceback it had when the
  // engine ran the script itself: no pipeline frames
  const fs::path bad = f.t.write("work/bad.lua", "error('bad workload')\n");
  const auto r5 = run_cli("run '" + bad.string() + "' --traceback");
  CHECK(r5.code == 1);
  CHECK(r5.err.find(bad.lexically_normal().generic_string() + ":1: bad workload") != std::string::npos);
  CHECK(r5.err.find("stack traceback:") != std::string::npos);
  CHECK(r5.err.find("pipeline.lua") == std::string::npos);
}

// A primitive's own error is told by the value that ends the pipeline, not by its text: a message over the 4,096-byte
// cap of script messages goes on as the primitive threw it; the pipeline's own error of the same length and the same
// first 4,096 bytes (the primitive's message with its last byte changed, what a comparison of capped texts took for
// the primitive's) is the pipeline's, with its context line.
TEST_CASE("scripts path: a primitive's own error over the message cap is told apart from the pipeline's by its value",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  const fs::path bad = f.t.write("work/long.lua", "error(('x'):rep(6000))\n");
  const std::string args = "run '" + bad.string() + "' --predictor roofline --gpu '" + f.tiny + "' --format json" + scripts;
  const std::string lead = bad.lexically_normal().generic_string() + ":1: " + std::string(100, 'x');
  const std::string where = (f.t.path / "s/neusight/pipeline.lua").lexically_normal().generic_string();
  // a run whose pipeline's forecast(run) has `body`: it fails with the workload's message
  const auto run = [&](const std::string& body) {
    f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n" + body + "end\nreturn M\n");
    auto r = run_cli(args + " --traceback");
    CHECK(r.code == 1);
    CHECK(r.err.find(lead) != std::string::npos);
    return r;
  };
  // the primitive's error, passed through: as run.workload() threw it (capped once, no pipeline context or frames)
  const auto r = run("  run.workload()\n");
  INFO(r.err);
  CHECK(r.err.find(" more bytes]") != std::string::npos);
  CHECK(r.err.find("pipeline.lua") == std::string::npos);
  // raised again unchanged (error(e, 0)): still the primitive's
  const auto a = run("  local ok, e = pcall(run.workload)\n  error(e, 0)\n");
  INFO(a.err);
  CHECK(a.err.find("pipeline.lua") == std::string::npos);
  // the pipeline's own error, equal to the primitive's but for its last byte: the pipeline's, named so
  const auto p = run("  local ok, e = pcall(run.workload)\n  assert(#e > 4096)\n  error(e:sub(1, -2) .. '!', 0)\n");
  INFO(p.err);
  CHECK(p.err.find("in " + where + " forecast") != std::string::npos);
  CHECK(p.err.find(where + ":5:") != std::string::npos);  // its traceback: the pipeline's frames
}

TEST_CASE("scripts path: a pipeline.lua that loops over a primitive is held to the script limits",
          "[cli][scripts][pipeline][limits]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  const fs::path file = f.t.write("s/neusight/pipeline.lua",
                                  "local M = {}\nfunction M.forecast(run)\n  run.workload()\n"
                                  "  while true do run.peak_tflops('fp32') end\nend\nreturn M\n");
  const std::string where = file.lexically_normal().generic_string();
  const std::string stop = "timeout 60";  // a loop the limits miss fails the case, it does not hang it
  // each primitive's body gets the limits afresh; the loop around them still runs over them
  const auto r = run_cli(f.args("--script-timeout 1" + scripts), stop);
  CHECK(r.code == 1);
  CHECK(r.err.find(where + ":4: script ran longer than 1 s of CPU time") != std::string::npos);
  const auto b = run_cli(f.args("--script-budget 200000 --script-timeout 0" + scripts), stop);
  CHECK(b.code == 1);
  CHECK(b.err.find(where + ":4: script ran longer than 200000 instructions") != std::string::npos);
  // the same under pcall: the loop catches each primitive's error and goes on, and still stops
  f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  run.workload()\n"
                                       "  while true do pcall(run.expand, 1); pcall(run.expand, 1) end\nend\nreturn M\n");
  const auto p = run_cli(f.args("--script-timeout 1" + scripts), stop);
  INFO(p.err);
  CHECK(p.code == 1);  // where it stops may be in the sandbox's pcall (engine/lua/prelude.lua)
  CHECK(p.err.find(".lua:") != std::string::npos);
  CHECK(p.err.find(": script ran longer than 1 s of CPU time") != std::string::npos);
}

// serve forecasts each phase through the pipeline: a pipeline.lua that runs past a script limit (the instruction
// budget, the memory cap) stops serve with the pipeline's own error, as `run` reports it (its context line, the
// limit's message), serve.lua's context line after it; not the bare limit message as if serve.lua had run over it.
TEST_CASE("scripts path: serve reports the script limit a phase's pipeline ran over as the pipeline does",
          "[cli][scripts][pipeline][limits][serve]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  const std::string stop = "timeout 60";  // a loop the limits miss fails the case, it does not hang it
  const std::string serve = "serve --model gpt2_med --gpu h100 --batch 2 --input-len 16 --output-len 4" + scripts;
  const std::pair<std::string, std::string> cases[] = {
      {"  while true do end\n", " --script-budget 200000 --script-timeout 0"},
      {"  local t = {} while true do t[#t + 1] = ('x'):rep(1e6) end\n", " --script-memory 256"}};
  for (const auto& [loop, limit] : cases) {
    const fs::path file = f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  run.workload()\n" +
                                                                   loop + "end\nreturn M\n");
    const std::string where = file.lexically_normal().generic_string();
    const auto piped = run_cli(f.args(limit + scripts), stop);
    INFO(piped.err);
    CHECK(piped.code == 1);
    CHECK(piped.err.find("neusight: " + where + ":4: script ") == 0);
    CHECK(piped.err.find("; raise with --script-") != std::string::npos);
    CHECK(piped.err.find("\n    in " + where + " forecast\n") != std::string::npos);
    const auto served = run_cli(serve + limit, stop);
    INFO(served.err);
    CHECK(served.code == 1);
    CHECK(served.err == piped.err + "    in scripts/neusight/serve.lua run\n");
  }
}

TEST_CASE("scripts path: run.peak_tflops reads dtype names as the engine does and refuses misuse",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  const std::string head = "local M = {}\nfunction M.forecast(run)\n";
  const std::string tail = "\nend\nreturn M\n";
  // Tiny-1: fp32 2, fp16 16 TFLOP/s, no bf16 units; the peaks come back in the error that ends the run
  f.t.write("s/neusight/pipeline.lua",
            head + "  run.workload()\n  local p = run.peak_tflops\n"
                   "  error(('peaks %s %s %s %s %s %s'):format(p(), p(nil), p('fp32'), p('fp16'), p('torch.Float16'), "
                   "p('bf16')), 0)" + tail);
  const auto ok = run_cli(f.args(scripts));
  CHECK(ok.code == 1);
  CHECK(ok.err.find("peaks 2.0 2.0 2.0 16.0 16.0 nil") != std::string::npos);
  const auto misuse = [&](const std::string& body, const std::string& message) {
    const fs::path file = f.t.write("s/neusight/pipeline.lua", head + body + tail);
    const auto r = run_cli(f.args(scripts));
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find(file.lexically_normal().generic_string() + ":3: run.peak_tflops" + message) != std::string::npos);
  };
  misuse("  return run.peak_tflops('fp16')", "(): no GPU yet (call run.workload() first)");
  misuse("  run.workload(); return run.peak_tflops(16)", "(dtype): dtype must be a string or nil, got number");
  misuse("  run.workload(); return run.peak_tflops('nonsense')", "(dtype): unknown dtype 'nonsense'");
}

TEST_CASE("scripts path: the engine's messages about a pipeline.lua under --scripts name that file",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  const fs::path file = f.t.write("s/neusight/pipeline.lua",
                                  "local M = {}\nfunction M.forecast(run)\n  run.workload(); run.expand(); run.predictor()\n"
                                  "  run.forecast()\n  return 5\nend\nreturn M\n");
  const std::string where = file.lexically_normal().generic_string();
  const auto r = run_cli(f.args(scripts));
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find(where + " forecast() returned number, expected a table") != std::string::npos);
  CHECK(r.err.find("scripts/neusight/pipeline.lua") == std::string::npos);
  // an error of the script: the context line names the file too
  f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  error('no figures today')\nend\nreturn M\n");
  const auto e = run_cli(f.args(scripts));
  INFO(e.err);
  CHECK(e.code == 1);
  CHECK(e.err.find(where + ":3: no figures today") != std::string::npos);
  CHECK(e.err.find("in " + where + " forecast") != std::string::npos);
  CHECK(e.err.find("in scripts/neusight/pipeline.lua") == std::string::npos);
  // one without the function: the message names the file that lacks it
  f.t.write("s/neusight/pipeline.lua", "return { finish = function(run) end }\n");
  const auto n = run_cli(f.args(scripts));
  CHECK(n.code == 1);
  CHECK(n.err.find("module neusight.pipeline has no function forecast (" + where + " defines") != std::string::npos);
}

TEST_CASE("scripts path: a module that requires itself is an error naming the cycle and the line",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string dir = (f.t.path / "s").string();
  const std::string scripts = " --scripts '" + dir + "'";
  const std::string root = fs::path(dir).lexically_normal().generic_string();
  // a pipeline.lua that means to extend the bundled one, but requires its own name
  f.t.write("s/neusight/pipeline.lua", "local base = require 'neusight.pipeline'\nreturn base\n");
  const auto r = run_cli(f.args(scripts));
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find(root + "/neusight/pipeline.lua:1: module 'neusight.pipeline' requires itself (" + root +
                   "/neusight/pipeline.lua)") != std::string::npos);
  CHECK(r.err.find("stack overflow") == std::string::npos);
  // through another module: each on the way is named
  f.t.write("s/neusight/pipeline.lua", "return require 'mine.a'\n");
  f.t.write("s/mine/a.lua", "return require 'mine.b'\n");
  f.t.write("s/mine/b.lua", "local x = 1\nlocal a = require 'mine.a'\nreturn a\n");  // not a tail call: its line shows
  const auto c = run_cli(f.args(scripts));
  INFO(c.err);
  CHECK(c.code == 1);
  CHECK(c.err.find(root + "/mine/b.lua:2: module 'mine.a' requires itself (" + root + "/mine/a.lua) through 'mine.b' (" +
                   root + "/mine/b.lua)") != std::string::npos);
  // a module whose load failed is not left as loading: required again, it fails as it did (no cycle)
  f.t.write("s/mine/bad.lua", "error('bad module', 0)\n");
  f.t.write("s/neusight/pipeline.lua",
            "local ok, e = pcall(require, 'mine.bad')\nassert(not ok)\nrequire 'mine.bad'\nreturn {}\n");
  const auto b = run_cli(f.args(scripts));
  INFO(b.err);
  CHECK(b.code == 1);
  CHECK(b.err.find("bad module") != std::string::npos);
  CHECK(b.err.find("requires itself") == std::string::npos);
}

TEST_CASE("scripts path: a script a primitive runs cannot call back into the run's primitives",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  // the pipeline keeps `run` in its module, the workload script finds it there and calls run.workload() again
  f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  M.saved = run\n  run.workload()\n"
                                       "  return {}\nend\nreturn M\n");
  const fs::path wl = f.t.write("work/reenter.lua", "local P = require 'neusight.pipeline'\n"
                                                    "if P.saved then P.saved.workload() end\n" +
                                                        std::string(fancy_workload));
  const std::string args = "run '" + wl.string() + "' --predictor roofline --gpu '" + f.tiny + "' --ops '" + f.ops +
                           "' --format json" + scripts;
  const auto r = run_cli(args, "timeout 60");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find(wl.lexically_normal().generic_string() +
                   ":2: run.workload(): called while run.workload() runs") != std::string::npos);
  CHECK(r.err.find("stack overflow") == std::string::npos);
  // another primitive of the run, the same
  f.t.write("s/neusight/pipeline.lua", "local M = {}\nfunction M.forecast(run)\n  M.saved = run\n  run.workload()\n"
                                       "  return {}\nend\nreturn M\n");
  const fs::path wl2 = f.t.write("work/reenter2.lua", "local P = require 'neusight.pipeline'\n"
                                                      "if P.saved then P.saved.predictor() end\n" +
                                                          std::string(fancy_workload));
  const auto r2 = run_cli(ns_test::replace_all(args, wl.string(), wl2.string()), "timeout 60");
  INFO(r2.err);
  CHECK(r2.code == 1);
  CHECK(r2.err.find(wl2.lexically_normal().generic_string() +
                    ":2: run.predictor(): called while run.workload() runs") != std::string::npos);
}

TEST_CASE("scripts path: run.set_latencies refuses NaN a wrong length and a non-number and says when it is too late",
          "[cli][scripts][pipeline]") {
  fixture f;
  const std::string scripts = " --scripts '" + (f.t.path / "s").string() + "'";
  const auto refused = [&](const std::string& step, const std::string& message) {
    const fs::path file = f.t.write("s/neusight/pipeline.lua",
                                    "local M = {}\nfunction M.forecast(run)\n  run.workload(); run.expand(); run.predictor()\n"
                                    "  run.predict()\n" + step + "\nend\nreturn M\n");
    const fs::path out = f.t.path / "out.json";
    const auto r = run_cli(f.args("-o '" + out.string() + "'" + scripts));
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find(file.lexically_normal().generic_string() + ":5: run." + message) != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  };
  refused("  run.set_latencies({ 0 / 0 })", "set_latencies(): seconds[1] must be a finite number >= 0");
  refused("  run.set_latencies({ 1 / 0 })", "set_latencies(): seconds[1] must be a finite number >= 0");
  refused("  run.set_latencies({ 0.1, 0.2 })", "set_latencies(): expected an array of 1 numbers (one per kernel)");
  refused("  run.set_latencies({})", "set_latencies(): expected an array of 1 numbers (one per kernel)");
  refused("  run.set_latencies(0.1)", "set_latencies(): expected an array of 1 numbers (one per kernel)");
  refused("  run.set_latencies({ '0.1' })", "set_latencies(): seconds[1] must be a finite number >= 0");
  // after run.aggregate() the latencies are the forecast's: too late to change them, or to sum them again
  refused("  run.aggregate(); run.set_latencies({ 0.1 })",
          "set_latencies(): the latencies went into the forecast (call it before run.aggregate())");
  refused("  run.aggregate(); run.latencies()",
          "latencies(): the latencies went into the forecast (call it before run.aggregate())");
  refused("  run.aggregate(); run.aggregate()", "aggregate(): the kernels are summed once per run");
}

// eval models forecasts each label's graph as predict --graph does, through scripts/neusight/pipeline.lua finish,
// serve each phase as predict does (forecast), and search each layout it builds (finish): a pipeline.lua of one's own
// is what they score, serve and rank (here one that doubles every kernel's latency), said nowhere as unused.
TEST_CASE("scripts path: eval models serve and search forecast through a user pipeline.lua", "[cli][scripts]") {
  temp_dir t;
  std::string text = ns_test::slurp(source_dir / "scripts/neusight/pipeline.lua");
  // both branches: a run that reads the kernels between the halves (run.predict(), then run.aggregate(): every run that
  // is not lean, and fp8 / fused ones) and one that does not (run.forecast(): serve's and search's lean forecasts)
  const std::string halves = "    totals, predictor_warnings = run.aggregate()";
  const std::string call = "    totals, predictor_warnings = run.forecast()";
  REQUIRE(text.find(halves) != std::string::npos);
  REQUIRE(text.find(call) != std::string::npos);
  const std::string doubled_then_summed = "    local s = run.latencies()\n"
                                          "    for i = 1, #s do s[i] = 2 * s[i] end\n"
                                          "    run.set_latencies(s)\n" + halves;
  text = ns_test::replace_all(text, halves, doubled_then_summed);
  text = ns_test::replace_all(text, call, "    run.predict()\n" + doubled_then_summed);
  t.write("p/neusight/pipeline.lua", text);
  const std::string dir = (t.path / "p").string();
  // the command's JSON with the user's pipeline and with the shipped one; the user's said nowhere as unused
  auto both = [&](const std::string& cmd) {
    const auto mine = run_cli(cmd + " --scripts '" + dir + "'");
    INFO(cmd << "\n" << mine.err);
    REQUIRE(mine.code == 0);
    CHECK(mine.err.find("is not applied") == std::string::npos);
    const auto shipped = run_cli(cmd);
    REQUIRE(shipped.code == 0);
    return std::pair{json::parse(mine.out), json::parse(shipped.out)};
  };
  // each row's `key`, twice the shipped pipeline's (within `eps`)
  auto doubled = [](const json& a, const json& b, const std::string& key, double eps) {
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() > 0);
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i][key].get<double>() == Approx(2 * b[i][key].get<double>()).epsilon(eps));
  };
  // eval models: host overhead aside (none on a T4 label: eager kernel time only)
  const auto [e2, e1] = both("eval models tests/fixtures/neusight/label/Tesla_T4 --format json");
  doubled(e2["rows"], e1["rows"], "predicted_ms", 0.02);
  // serve's phases (CUDA-graph launch: GPU kernel time only, so exactly twice)
  const auto [s2, s1] = both("serve --model gpt2_med --gpu h100 --batch 2 --input-len 16 --output-len 4 --format json");
  doubled(json::array({s2}), json::array({s1}), "ttft_ms", 1e-9);
  doubled(json::array({s2}), json::array({s1}), "tpot_ms", 1e-9);
  // search: one GPU, no communication: each layout's iteration is the doubled forecast (the ranking kept)
  const auto [r2, r1] = both("search --model gpt2_large --gpu h100 --gpus 1 --batch 4 --seq 128 --format json");
  doubled(r2["layouts"], r1["layouts"], "iteration_ms", 1e-6);
}

// A --scripts copy of a module from an older neusight, without a function the engine now calls: the error names that
// file, the function and the bundled file to compare it with, not Lua's "attempt to call a nil value" under the
// bundled file's name.
TEST_CASE("scripts path: a --scripts compare.lua without gpu_labels is an error naming that file",
          "[cli][scripts]") {
  temp_dir t;
  const std::string scripts =
      ns_test::override_dir(t, "old", "compare", "", {{"function M.gpu_labels", "function M.gpu_labels_old"}});
  const std::string file = (t.path / "old" / "neusight" / "compare.lua").lexically_normal().generic_string();
  const std::string bundled = (source_dir / "scripts" / "neusight" / "compare.lua").lexically_normal().generic_string();
  const auto r = run_cli("predict --model gpt2_med --gpu h100,l4 --mode inference --batch 1 --seq 128" + scripts);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find(file + " has no function gpu_labels (module neusight.compare): a --scripts copy from an older "
                          "neusight? compare it with the bundled " + bundled) != std::string::npos);
  CHECK(r.err.find("attempt to call a nil value") == std::string::npos);
  CHECK(r.err.find("in scripts/neusight/compare.lua") == std::string::npos);
}

TEST_CASE("scripts path: a --scripts search.lua without choices is an error naming that file", "[cli][scripts]") {
  temp_dir t;
  const std::string scripts =
      ns_test::override_dir(t, "old", "search", "", {{"function M.choices(", "function M.choices_old("}});
  const std::string file = (t.path / "old" / "neusight" / "search.lua").lexically_normal().generic_string();
  const std::string bundled = (source_dir / "scripts" / "neusight" / "search.lua").lexically_normal().generic_string();
  const auto r = run_cli("search --model gpt2_large --gpu A100-SXM4-40GB --gpus 4 --batch 4 --seq 1024" + scripts);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find(file + " has no function choices (module neusight.search): a --scripts copy from an older "
                          "neusight? compare it with the bundled " + bundled) != std::string::npos);
  CHECK(r.err.find("attempt to call a nil value") == std::string::npos);
}

// A function the engine calls that a --scripts module replaced by something else: named as such, with the file.
TEST_CASE("scripts path: a --scripts report.lua whose result is not a function is an error naming that file",
          "[cli][scripts]") {
  temp_dir t;
  const std::string scripts = ns_test::override_dir(t, "s", "report", "M.result = 3");
  const std::string file = (t.path / "s" / "neusight" / "report.lua").lexically_normal().generic_string();
  const auto r = run_cli("predict --model gpt2_med --gpu h100 --mode inference --batch 1 --seq 128" + scripts);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find(file + ": neusight.report.result is a number, not a function: a --scripts copy from an older "
                          "neusight?") != std::string::npos);
}

// An older --scripts figures.lua without the search's floor rule (search_floor): search ranks as before it was there
// (no floor warning), not failing; an older parallel/config.lua without the layers' rule would rank layouts
// Megatron-LM cannot run: an error naming the function (review findings), in predict's parallel report too (it
// skipped the rule's warning without a word)
TEST_CASE("scripts path: search takes an older figures.lua and refuses a config.lua without layers_refusal",
          "[cli][scripts][search]") {
  temp_dir t;
  const std::string base = "search --model gpt2_large --gpu h100 --gpus 8 --batch 64 --seq 1024 --dtype bf16 "
                           "--predictor roofline";
  const std::string figs = ns_test::override_dir(
      t, "f", "figures", "", {{"function M.search_floor(", "function M.search_floor_old("}});
  const auto r = run_cli(base + " --format json" + figs);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(!json::parse(r.out)["layouts"].empty());
  const std::string cfg = ns_test::override_dir(t, "c", "parallel/config", "",
                                                {{"function M.layers_refusal(", "function M.layers_refusal_old("}});
  const auto c = run_cli(base + " --schedule interleaved" + cfg);
  INFO(c.err);
  CHECK(c.code == 1);
  // neusight.needs' one message (search.lua and parallel/report.lua had their own): the override file, the function,
  // the bundled file to compare it with
  const std::string no_rule = "/c/neusight/parallel/config.lua has no function layers_refusal (module "
                              "neusight.parallel.config): a --scripts copy from an older neusight? compare it with the "
                              "bundled scripts/neusight/parallel/config.lua";
  CHECK(c.err.find(no_rule) != std::string::npos);
  // predict's parallel report warns with the same rule: without it, the same error (it said nothing and forecast on)
  const auto p = run_cli("predict --model gpt2_large --gpu h100 --mode train --batch 8 --seq 1024 --dtype bf16 "
                         "--predictor roofline --pp 2 --microbatches 4 --schedule interleaved" + cfg);
  INFO(p.err);
  CHECK(p.code == 1);
  CHECK(p.out.empty());
  CHECK(p.err.find(no_rule) != std::string::npos);
  // a report.lua older than the floor inputs' rules search_floor reads (neusight.needs): the override file and the
  // function named, not "attempt to call a nil value (field 'timing_inputs')" (review finding)
  const std::string rep = ns_test::override_dir(t, "r", "report", "",
                                                {{"function M.timing_inputs(", "function M.timing_inputs_old("}});
  const auto o = run_cli(base + rep);
  INFO(o.err);
  CHECK(o.code == 1);
  CHECK(o.err.find("/r/neusight/report.lua has no function timing_inputs (module neusight.report): a --scripts copy "
                   "from an older neusight? compare it with the bundled scripts/neusight/report.lua") !=
        std::string::npos);
}

// A --scripts precision.lua from before built_in_predictor: a fused run (--fusion) asks it whether the fusion cap
// applies (scripts/neusight/pipeline.lua fused_run) and says which file lacks which function, not "attempt to call a
// nil value (field 'built_in_predictor')".
TEST_CASE("scripts path: a precision.lua without built_in_predictor stops a fused run naming it", "[cli][scripts]") {
  temp_dir t;
  const std::string dir = ns_test::override_dir(t, "p", "precision", "",
                                                {{"function M.built_in_predictor(", "local function built_in_predictor_old("},
                                                 {"M.built_in_predictor(name)", "built_in_predictor_old(name)"}});
  const auto r = run_cli("predict --model gpt2_large --gpu h100 --mode inference --batch 1 --seq 128 --fusion" + dir);
  older_copy_named(r, "p", "precision", "built_in_predictor");
}

// A --scripts copy of tiling/attention.lua that sets M.min_kv_slice, the decode slice's name when it was a minimum:
// the split reads only M.max_kv_slice, so the value had been ignored without a word; select refuses it, naming the
// field to set.
TEST_CASE("scripts path: an attention tiling copy that sets min_kv_slice is refused naming max_kv_slice",
          "[cli][scripts]") {
  temp_dir t;
  std::string text = ns_test::slurp(source_dir / "scripts" / "tiling" / "attention.lua");
  const size_t end = text.rfind("return M");
  REQUIRE(end != std::string::npos);
  t.write("a/tiling/attention.lua", text.substr(0, end) + "M.min_kv_slice = 512\nreturn M\n");
  const auto r = run_cli("predict --model llama3_8b --gpu h100 --mode decode --batch 1 --context 4096 --dtype bf16 "
                         "--predictor roofline --scripts '" + (t.path / "a").string() + "'");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("M.min_kv_slice is set (512), a name the decode split does not read: its slice is M.max_kv_slice") !=
        std::string::npos);
}

// search's CSV is written with the one number rule of every CSV (scripts/neusight/report.lua number_csv, by
// scripts/neusight/search.lua format_csv); it used C++ fmt's {} (review finding): a --scripts report.lua whose rule
// differs shows in it, and the shipped rule gives the JSON's numbers exactly
TEST_CASE("scripts path: search's CSV numbers are report.lua number_csv's", "[cli][scripts][search][csv]") {
  temp_dir t;
  const std::string base = "search --model gpt2_large --gpu h100 --gpus 8 --batch 64 --seq 1024 --dtype bf16 "
                           "--predictor roofline";
  const auto c = run_cli(base + " --format csv");
  const auto j = run_cli(base + " --format json");
  INFO(c.err);
  REQUIRE(c.code == 0);
  REQUIRE(j.code == 0);
  const nlohmann::ordered_json layouts = nlohmann::ordered_json::parse(j.out)["layouts"];  // in the JSON's order
  REQUIRE(!layouts.empty());
  const auto [header, rows] = ns_test::csv_table(c.out);
  REQUIRE(rows.size() == layouts.size());
  std::vector<std::string> keys;
  for (const auto& [key, value] : layouts[0].items()) keys.push_back(key);
  CHECK(header == keys);
  for (size_t i = 0; i < layouts.size(); ++i) {  // each cell reads back as the JSON's value
    const auto& cells = rows[i];
    size_t k = 0;
    for (const auto& [key, value] : layouts[i].items()) {
      INFO(key << " = " << value.dump() << ", CSV " << cells.at(k));
      if (value.is_number()) CHECK(std::stod(cells.at(k)) == value.get<double>());
      else if (value.is_boolean()) CHECK(cells.at(k) == (value.get<bool>() ? "true" : "false"));
      else CHECK(cells.at(k) == value.get<std::string>());
      ++k;
    }
  }
  // the rule is report.lua's: a --scripts copy that writes numbers otherwise writes search's CSV otherwise
  const std::string rep = ns_test::override_dir(t, "r", "report", "M.number_csv = function(v) return \"#\" .. v end");
  const auto o = run_cli(base + " --format csv" + rep);
  INFO(o.err);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("\n#") != std::string::npos);
  CHECK(o.out.find(",#") != std::string::npos);
}

// r.forecast_with(t), the engine's callback a parallel run's calibration fit (scripts/neusight/calibration.lua) forecasts
// the run again with: a misuse names the calling script's line, as the pipeline's primitives do (it named none).
TEST_CASE("scripts path: r.forecast_with refuses a bad argument naming the calling script's file and line",
          "[cli][scripts][calibrate]") {
  temp_dir t;
  const std::string gpu = ns_test::gpu_copy(t, "v100_pcie_32gb").string();  // the calibration goes beside the copy
  const fs::path measured = t.write("m.toml", "latency_ms = 50\n");
  const std::string call = "local latency = r.forecast_with(factors_at(lambda))";
  const auto misuse = [&](const std::string& name, const std::string& arg, const std::string& message) {
    const std::string scripts = ns_test::override_dir(t, name, "calibration", "", {{call, "local latency = r.forecast_with(" + arg + ")"}});
    const std::string text = ns_test::slurp(t.path / name / "neusight/calibration.lua");
    const size_t line = size_t(std::count(text.begin(), text.begin() + long(text.find("r.forecast_with(" + arg + ")")), '\n')) + 1;
    const auto r = run_cli("predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 2 --seq 128 --tp 2 "
                           "--predictor roofline --calibrate '" + measured.string() + "'" + scripts);
    INFO(r.err);
    CHECK(r.code == 1);
    // the file's path from the temp folder on (Lua shortens a chunk name longer than 60 characters from the left)
    CHECK(r.err.find("/" + name + "/neusight/calibration.lua:" + std::to_string(line) + ": r.forecast_with(t): " +
                     message) != std::string::npos);
    CHECK_FALSE(fs::exists(t.path / "v100_pcie_32gb.calibration.toml"));  // nothing half-written
  };
  misuse("number", "5", "t must be a table of numbers by name (got number)");
  misuse("entry", "{ gemm = 'x' }", "t must be a table of numbers by name (got a string at a string key)");
  misuse("array", "{ 1.5 }", "t must be a table of numbers by name (got a number at a number key)");
}

// serve holds each phase to its floor with the inputs search's layouts get (scripts/neusight/figures.lua floor_inputs,
// of report.lua's timing_inputs and layout_inputs; the engine made them itself before): a report.lua older than those
// rules is named with the function it lacks (neusight.needs), not a raw "attempt to call a nil value"; an older
// figures.lua without floor_inputs serves without the floor check, as one without forecast_floor did.
TEST_CASE("scripts path: serve's floor check takes report.lua's inputs - an older copy without them is named",
          "[cli][scripts][serve][floor]") {
  temp_dir t;
  const std::string base = "serve --model llama3_8b --gpu h100 --batch 1 --input-len 128 --output-len 4 --format json";
  const std::string rep = ns_test::override_dir(t, "r", "report", "",
                                                {{"function M.timing_inputs(", "function M.timing_inputs_old("}});
  older_copy_named(run_cli(base + rep), "r", "report", "timing_inputs");
  const std::string figs = ns_test::override_dir(t, "f", "figures", "",
                                                 {{"function M.floor_inputs(", "function M.floor_inputs_old("}});
  const auto f = run_cli(base + figs);
  INFO(f.err);
  CHECK(f.code == 0);
  CHECK(json::parse(f.out)["ttft_ms"].get<double>() > 0);
}
