// tests/lua_api/test_session_state.cpp — what a session keeps of a workload is the workload's (ns::run_state): no
// "last workload" behind the calls that report or time a forecast, registry references released, the op cache of an
// op search path that changed forgotten.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/roofline.h"
#include "lua/session.h"
#include "test_util.h"

using namespace ns;
using ns_test::source_dir;
using ns_test::temp_dir;

namespace {

session_options bundled() {
  session_options o;
  o.data_root = source_dir;
  return o;
}

workload_overrides gpt2_train(const std::string& layout, int64_t n) {
  return {{"model", std::string("gpt2_large")}, {"gpu", std::string("h100")},  {"mode", std::string("train")},
          {"optimizer", std::string("none")},   {"batch", int64_t(4)},          {"seq", int64_t(1024)},
          {"parallel." + layout, n}};
}

session::finished forecast_of(session& s, const workload_overrides& ov, std::unique_ptr<predictor>& pred) {
  session::workload_request req;
  req.overrides = ov;
  req.predictor_make = [&]() -> const predictor& {
    if (!pred) pred = s.predictor_make("roofline", source_dir / "weights");
    return *pred;
  };
  return s.forecast_workload(std::move(req), {});
}

std::string json_of(session& s, const session::finished& d) {
  return s.forecast_render(d.state, *d.fc, d.gpu, "roofline", d.warnings, d.figs, {"json"}).front();
}

}  // namespace

TEST_CASE("a workload's report and timeline stay its own after another workload loads", "[session]") {
  session s(bundled());
  std::unique_ptr<predictor> pred;
  const session::finished dp = forecast_of(s, gpt2_train("dp", 2), pred);
  REQUIRE(dp.parallel);
  const std::string dp_json = json_of(s, dp);
  const std::string dp_timeline = s.timeline(dp.state, *dp.fc, dp.gpu)->json.dump();
  const std::string dp_summary = s.forecast_summary(dp.state);

  const session::finished pp = forecast_of(s, gpt2_train("pp", 2), pred);  // another layout, loaded after it
  REQUIRE(pp.parallel);
  const std::string pp_json = json_of(s, pp);
  CHECK(pp_json != dp_json);

  // the first workload's state, read after the second loaded: its own report, timeline and summary
  CHECK(json_of(s, dp) == dp_json);
  CHECK(s.timeline(dp.state, *dp.fc, dp.gpu)->json.dump() == dp_timeline);
  CHECK(s.forecast_summary(dp.state) == dp_summary);
  CHECK(dp_summary.find("dp 2 tp 1 pp 1") != std::string::npos);
  CHECK(s.forecast_summary(pp.state).find("dp 1 tp 1 pp 2") != std::string::npos);
  // and the second's, read after the first's again
  CHECK(json_of(s, pp) == pp_json);

  // a plan change is the state's own: re-timing the first under another recomputation leaves the second alone
  s.plan_set(dp.state, "recompute", "full");
  CHECK(s.timeline(dp.state, *dp.fc, dp.gpu)->json.dump() != dp_timeline);
  CHECK(json_of(s, pp) == pp_json);
}

TEST_CASE("a workload without a parallel plan has no timeline whatever loaded before it", "[session]") {
  session s(bundled());
  const workload par = s.workload_load("", gpt2_train("dp", 2));
  workload_overrides single = gpt2_train("dp", 1);
  single.erase("parallel.dp");
  const workload one = s.workload_load("", single);
  CHECK(par.parallel);
  CHECK_FALSE(one.parallel);
  // its fields are read from its own workload table, whatever loaded after it
  CHECK(par.field<std::string>("mode") == "train");
  CHECK(par.field<int64_t>("batch") == 4);
  CHECK(par.training());
  CHECK_THROWS_WITH(par.field<std::string>("batch"), "command line: workload field 'batch' is number, expected a string");
  CHECK_THROWS_WITH(par.field<bool>("no_such_field"), "command line: workload field 'no_such_field' is nil, expected a boolean");
  std::unique_ptr<predictor> pred = s.predictor_make("roofline", source_dir / "weights");
  const forecast fc = s.forecast_run(one.g, s.expand(one.g, one.gpu_resolved, true).kernels, one.gpu_resolved, *pred,
                                     "default");
  CHECK_FALSE(s.timeline(one.state, fc, one.gpu_resolved));
  CHECK_THROWS_WITH(s.plan_set(one.state, "recompute", "full"), "plan_set: the last workload has no parallel plan");
}

TEST_CASE("loading workloads does not grow the Lua registry: each state's reference is released", "[session]") {
  session s(bundled());
  int first_max = 0, later_max = 0;
  for (int i = 0; i < 24; ++i) {
    const workload w = s.workload_load("", gpt2_train("dp", 2));
    REQUIRE(w.state);
    (i < 3 ? first_max : later_max) = std::max(i < 3 ? first_max : later_max, w.state.ref());
  }
  // luaL_ref hands out a released slot before a new one: references held forever would climb with every load
  CHECK(later_max <= first_max);
}

TEST_CASE("a workload's ops folder replaces the rules an earlier workload's search path cached", "[session][ops]") {
  temp_dir t;
  const std::string script = R"(
local function model(opts)
  local x = { opts.batch, opts.seq, 64 }
  return { { op = "gelu", name = "act", inputs = { x }, output = x } }, "one_gelu"
end
return { model = model, gpu = "H100-SXM5-80GB", mode = "inference", batch = 2, seq = 8 }
)";
  t.write("a/w.lua", script);
  t.write("b/w.lua", script);
  t.write("b/ops/gelu.lua", "return require('neusight.rules').elementwise { name = 'gelu', doc = 'b/ops gelu', "
                            "unary = true, grad = 'same' }\n");
  session s(bundled());
  const std::string bundled_doc = s.op_load("gelu").doc;
  REQUIRE(bundled_doc != "b/ops gelu");
  s.workload_load((t.path / "a/w.lua").string(), {});
  CHECK(s.op_load("gelu").doc == bundled_doc);
  s.workload_load((t.path / "b/w.lua").string(), {});
  CHECK(s.op_load("gelu").doc == "b/ops gelu");  // b's folder is on the path now, before the bundled ops/
  s.workload_load((t.path / "a/w.lua").string(), {});
  CHECK(s.op_load("gelu").doc == bundled_doc);  // and gone again
}

TEST_CASE("session call: a module function with JSON arguments and a GPU, its results as JSON", "[session]") {
  session s(bundled());
  const gpu_spec& h100 = s.gpu("h100");
  const auto r = s.call("neusight.scale", "route_of", {nlohmann::json("aten::mm")}, 2, "while routing");
  REQUIRE(r.size() == 2);
  CHECK(r[0] == "ratio");
  CHECK(r[1].is_null());  // a second result it does not return
  const auto k = s.call("neusight.scale", "destination",
                        {nlohmann::json{{"peak", "peak_fp32_tflops"}, {"from_s", 1e-3}, {"to_s", 5e-4},
                                        {"compute_from_s", 1e-3}, {"memory_from_s", 1e-4}, {"compute_to_s", 5e-4},
                                        {"memory_to_s", 5e-5}},
                         &h100, &h100},
                        1, "while scaling");
  REQUIRE(k[0].is_number());
  CHECK(k[0].get<double>() > 0);
  CHECK(s.module_display("neusight.scale") == "scripts/neusight/scale.lua");
  CHECK_THROWS_WITH(s.call("neusight.scale", "no_such_function", {}, 1, ""),
                    Catch::Contains("no_such_function"));
}

TEST_CASE("two comparisons begun in one session keep their own rows", "[session]") {
  session s(bundled());
  std::unique_ptr<predictor> pred;
  const session::finished dp = forecast_of(s, gpt2_train("dp", 2), pred);
  const run_state a = s.compare_begin({{"gpu", "gpu", false}}, "command line");
  const run_state b = s.compare_begin({{"gpu", "gpu", false}}, "command line");  // begun after a
  s.compare_add(a, dp.state, dp.gpu, dp.latency_s() * 1e3, dp.figs, dp.warnings);
  s.compare_add_error(b, {"no_such_gpu"}, "unknown GPU", "");
  s.compare_add_error(b, {"other_gpu"}, "unknown GPU", "");
  const auto ja = nlohmann::json::parse(s.compare_render(a, "json"));
  const auto jb = nlohmann::json::parse(s.compare_render(b, "json"));
  REQUIRE(ja["rows"].size() == 1);
  CHECK(ja["rows"][0]["latency_ms"].get<double>() > 0);
  REQUIRE(jb["rows"].size() == 2);
  CHECK(jb["rows"][0]["gpu"] == "no_such_gpu");
  CHECK_THROWS_WITH(s.compare_render(run_state(), "json"), "compare_render: no comparison (compare_begin)");
}
