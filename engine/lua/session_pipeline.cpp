// engine/lua/session_pipeline.cpp — a forecast as scripts/neusight/pipeline.lua forecast(run) and finish(run) drive it:
// the primitives they call (the engine keeps loading, expansion and the numerics: prediction, aggregation, the
// roofline's peak, the families' times) and the calls into them.
#include <cmath>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "lua/session_impl.h"

namespace ns {

namespace {

struct pipeline_context {
  session* s = nullptr;
  session::impl* p = nullptr;
  session::pipeline_graph* run = nullptr;  // what the steps work on: given (finish) or made by them (forecast)
  const session::pipeline_options* opt = nullptr;
  const session::workload_request* wl = nullptr;  // forecast_workload's; nullptr for forecast_finish
  session::finished* out = nullptr;
  std::optional<workload> w;  // run.workload()'s
  bool expanded = false;      // run->kernels are the graph's
  std::optional<std::vector<double>> seconds;  // run.predict()'s per-launch seconds, until run.aggregate()
  std::vector<std::string> overhead_notes;     // run.predict()'s host overhead's (session::overhead_apply)
  // The last error a primitive raised: when the pipeline ends with that error, it goes on as it was thrown (the
  // message and traceback the engine gave it before the pipeline was a script: ns_call_passing).
  raised_error failure;
  // The primitive running now (its name), null between two: a script one runs (a workload's) that reaches the run
  // (kept in a module) may not call back into it.
  const char* busy = nullptr;
};

// The primitives' shared first upvalue (the second is the primitive's name): a userdata holding the context, emptied when forecast() or finish() returns, so that
// a primitive a script kept refuses to run later.
pipeline_context& context_of(lua_State* L) {
  auto* slot = static_cast<pipeline_context**>(lua_touserdata(L, lua_upvalueindex(1)));
  if (!slot || !*slot) throw error(caller_where(L) + "a run's primitive called after its pipeline call returned");
  return **slot;
}

// A primitive's body, run as one call to the script limits (ns_limits_enter: the scripts it calls are held to them as
// when the engine called each itself); on return, normal or not, the calling script's own count and time go on
// (ns_limits_leave: a loop over a primitive still runs over the limits). A C++ exception becomes a Lua error with its
// message.
template <class F>
int primitive(lua_State* L, F&& body) {
  const limits_mark mark = ns_limits_enter(L);
  if (mark.over) return lua_error(L);  // the caller ran over a limit: it stops there, not in the body's scripts
  std::string msg;
  try {
    const limits_scope limits{L, mark};
    pipeline_context& c = context_of(L);
    const char* name = lua_tostring(L, lua_upvalueindex(2));
    if (c.busy)
      throw error(caller_where(L) + "run." + name + "(): called while run." + c.busy +
                  "() runs (a script a primitive runs cannot call the run's primitives)");
    struct busy_scope {
      pipeline_context& c;
      ~busy_scope() { c.busy = nullptr; }
    } const busy{c};
    c.busy = name;
    try {
      return body(c);
    } catch (const std::exception& e) {
      // kept with the limit's state now: none had tripped when it started (ns_limits_enter above); its message is what
      // the outer catch raises
      c.failure.keep(L, e, std::current_exception());
      if (const auto* se = dynamic_cast<const script_error*>(&e)) {
        // The traceback of a script the primitive called ends with the pipeline's own frames (this primitive and its
        // callers): cut, it is the traceback the script's error had when the engine called the script itself.
        luaL_traceback(L, L, nullptr, 0);
        std::string outer = lua_tostring(L, -1) ? lua_tostring(L, -1) : "";
        lua_pop(L, 1);
        const std::string header = "stack traceback:";
        if (outer.rfind(header, 0) == 0) outer.erase(0, header.size());
        const std::string& tb = se->traceback;
        if (!outer.empty() && tb.size() > outer.size() && tb.compare(tb.size() - outer.size(), outer.size(), outer) == 0) {
          const script_error cut(se->what(), tb.substr(0, tb.size() - outer.size()));
          c.failure.keep(L, cut, std::make_exception_ptr(cut));
        }
      }
      throw;
    }
  } catch (const std::exception& e) {
    msg = e.what();
  }
  lua_pushlstring(L, msg.data(), msg.size());
  return lua_error(L);
}

const gpu_spec& gpu_of(lua_State* L, const pipeline_context& c, const char* fn) {
  if (!c.run->gpu) throw error(caller_where(L) + "run." + fn + "(): no GPU yet (call run.workload() first)");
  return *c.run->gpu;
}

const predictor& predictor_of(lua_State* L, const pipeline_context& c, const char* fn) {
  if (!c.run->pred) throw error(caller_where(L) + "run." + fn + "(): no predictor yet (call run.predictor() first)");
  return *c.run->pred;
}

const forecast& forecast_of(lua_State* L, const pipeline_context& c, const char* fn) {
  if (!c.out->fc) throw error(caller_where(L) + "run." + fn + "(): no forecast yet (call run.forecast() first)");
  return *c.out->fc;
}

// run.workload() -> { source, launch, warnings, fields, gpu }: the workload script run and its model built
// (session::workload_load), once: its chunk name, launch mode, warnings, report fields (scripts/neusight/report.lua
// workload) and GPU ({ name, file, mem_gb, price_per_hour_usd }), what finish(run) reads as run.warnings, run.fields
// and run.gpu. [-0, +1, e]
int l_workload(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    if (c.w) throw error(caller_where(L) + "run.workload(): the workload is loaded once per run");
    session::pipeline_graph& r = *c.run;
    const workload& w = c.w.emplace(c.s->workload_load(c.wl->script, c.wl->overrides));
    c.out->gpu = w.gpu_resolved;
    r.g = &w.g, r.gpu = &c.out->gpu, r.source = w.source, r.launch = w.launch;
    r.decode = w.field<std::string>("mode") == "decode";
    r.state = w.state;
    static_cast<session::run_facts&>(*c.out) = r;
    lua_createtable(L, 0, 5);
    set_string(L, "source", w.source);
    set_string(L, "launch", w.launch);
    strings_push(L, w.warnings);
    lua_setfield(L, -2, "warnings");
    run_state_push(L, w.state, "fields");  // workload_load kept them
    lua_setfield(L, -2, "fields");
    report_gpu_push(L, w.gpu_resolved);
    lua_setfield(L, -2, "gpu");
    return 1;
  });
}

// run.expand() -> kernels: every node's op rule hooks → kernels (session::expand: forward; backward and accumulate
// when training), once; how many. [-0, +1, e]
int l_expand(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    if (!c.w) throw error(caller_where(L) + "run.expand(): no workload yet (call run.workload() first)");
    if (c.expanded) throw error(caller_where(L) + "run.expand(): the workload is expanded once per run");
    c.run->kernels = c.s->expand(c.w->g, c.out->gpu, c.w->training(), &c.w->state).kernels;
    c.expanded = true;
    lua_pushinteger(L, lua_Integer(c.run->kernels.size()));
    return 1;
  });
}

// run.predictor() -> name: the predictor the command names (--predictor, --weights), made on first use in the session.
// [-0, +1, e]
int l_predictor(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    if (!c.run->pred) c.run->pred = &c.wl->predictor_make();
    const std::string name = c.run->pred->name();
    lua_pushlstring(L, name.data(), name.size());
    return 1;
  });
}

// run.predict()'s per-launch seconds as they stand, for run.`fn`(): once run.aggregate() (or run.forecast()) has
// summed them they are the forecast's, and the message says so.
std::vector<double>& seconds_of(lua_State* L, pipeline_context& c, const char* fn) {
  if (c.seconds) return *c.seconds;
  throw error(caller_where(L) + "run." + fn + "(): " +
              (c.out->fc ? "the latencies went into the forecast (call it before run.aggregate())"
                         : "no latencies yet (call run.predict() first)"));
}

// The kernels' per-launch seconds (session::kernel_seconds), kept in c.seconds: `fn` names the primitive in errors.
void predict_now(lua_State* L, pipeline_context& c, const char* fn) {
  session::pipeline_graph& r = *c.run;
  const std::string at = caller_where(L) + "run." + fn + "(): ";
  if (c.out->fc || c.seconds) throw error(at + "the kernels are priced once per run");
  if (!c.expanded) throw error(at + "no kernels yet (call run.workload() and run.expand() first)");
  if (!r.pred) throw error(at + "no predictor yet (call run.predictor() first)");
  c.seconds = c.s->kernel_seconds(r.kernels, *r.gpu, *r.pred, c.opt->overhead, r.launch, r.decode, &c.overhead_notes);
}

// The forecast of the kernels and c.seconds (forecast_make); pushes its totals and its warnings: the predictor's, then
// the host overhead's (an --overhead on that changed nothing, kept in c.out too).
int aggregate_now(lua_State* L, pipeline_context& c, const char* fn) {
  session::pipeline_graph& r = *c.run;
  if (c.out->fc) throw error(caller_where(L) + "run." + fn + "(): the kernels are summed once per run");
  std::vector<double>& seconds = seconds_of(L, c, fn);
  c.out->fc.emplace(forecast_make(*r.g, std::move(r.kernels), std::move(seconds)));
  c.seconds.reset();
  std::vector<std::string> warnings = r.pred->warnings();
  warnings.insert(warnings.end(), c.overhead_notes.begin(), c.overhead_notes.end());
  c.out->overhead_notes = c.overhead_notes;
  forecast_push(L, *c.out->fc, false);
  strings_push(L, warnings);
  return 2;
}

// run.forecast() -> totals, predictor_warnings: run.predict() and run.aggregate() in one (session::forecast_run):
// library tiles, the predictor's latencies, the launch mode, calibration, host overhead and aggregation, once; the
// forecast's totals as neusight.report reads them (total, forward, …, flops_<phase>, params) and what the predictor
// warned of (with the host overhead's: an --overhead on that changed nothing). [-0, +2, e]
int l_forecast(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    predict_now(L, c, "forecast");
    return aggregate_now(L, c, "forecast");
  });
}

// run.predict() -> kernels: each kernel's library tile, the predictor's latency, the launch mode, calibration and host
// overhead (session::kernel_seconds), once: per-launch seconds, kept for run.latencies(), run.set_latencies() and
// run.aggregate(); how many kernels. [-0, +1, e]
int l_predict(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    predict_now(L, c, "predict");
    lua_pushinteger(L, lua_Integer(c.seconds->size()));
    return 1;
  });
}

// run.aggregate() -> totals, predictor_warnings: the forecast of the kernels and their latencies as they stand
// (run.set_latencies()'s, else run.predict()'s), once; as run.forecast()'s. [-0, +2, e]
int l_aggregate(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) { return aggregate_now(L, c, "aggregate"); });
}

// run.kernels() -> { kernel, … }: what each kernel is, in run.latencies()'s order: the fields a Lua predictor gets
// (kind, name, op, dtype, flops, bytes, dims, tile once priced) and its node's `node` (name), `layer`, `count`
// (replication) and `phase` ("forward", "backward", "accumulate", "optimizer"). [-0, +1, e]
int l_kernels(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    if (!c.expanded || c.out->fc)
      throw error(caller_where(L) + "run.kernels(): " +
                  (c.out->fc ? "the kernels went into the forecast (call it before run.aggregate())"
                             : "no kernels yet (call run.workload() and run.expand() first)"));
    const std::vector<kernel_instance>& ks = c.run->kernels;
    lua_createtable(L, int(ks.size()), 0);
    for (size_t i = 0; i < ks.size(); ++i) {
      const node& n = c.run->g->nodes[ks[i].node];
      kernel_push(L, ks[i].k);
      set_string(L, "node", n.name);
      set_string(L, "layer", n.layer);
      set_integer(L, "count", n.count);
      set_string(L, "phase", std::string(phase_name(ks[i].ph)));
      lua_rawseti(L, -2, lua_Integer(i + 1));
    }
    return 1;
  });
}

// run.latencies() -> { seconds, … }: each kernel's per-launch seconds from run.predict() (or run.set_latencies()), in
// run.kernels()'s order. [-0, +1, e]
int l_latencies(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    const std::vector<double>& seconds = seconds_of(L, c, "latencies");
    lua_createtable(L, int(seconds.size()), 0);
    for (size_t i = 0; i < seconds.size(); ++i) lua_pushnumber(L, seconds[i]), lua_rawseti(L, -2, lua_Integer(i + 1));
    return 1;
  });
}

// run.set_latencies(seconds): replaces the per-launch seconds run.aggregate() sums: an array with one finite number
// >= 0 per kernel. [-1, +0, e]
int l_set_latencies(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    const std::string at = caller_where(L) + "run.set_latencies(): ";
    const size_t n = seconds_of(L, c, "set_latencies").size();
    if (!lua_istable(L, 1) || lua_rawlen(L, 1) != n)
      throw error(at + "expected an array of " + std::to_string(n) + " numbers (one per kernel)");
    std::vector<double> seconds(n);
    for (size_t i = 0; i < n; ++i) {
      lua_rawgeti(L, 1, lua_Integer(i + 1));
      const bool ok = lua_type(L, -1) == LUA_TNUMBER && std::isfinite(lua_tonumber(L, -1)) && lua_tonumber(L, -1) >= 0;
      seconds[i] = ok ? lua_tonumber(L, -1) : 0;
      lua_pop(L, 1);
      if (!ok) throw error(at + "seconds[" + std::to_string(i + 1) + "] must be a finite number >= 0");
    }
    *c.seconds = std::move(seconds);
    return 0;
  });
}

// run.timeline() -> parallel: the per-device timeline of a parallel workload (session::timeline), whose report joins
// the report fields (run.fields.parallel, .memory); false when the workload is not parallel. [-0, +1, e]
int l_timeline(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    // lean: the ranking's numbers only (session::timeline's lean report; no memory report for the fields)
    const forecast& fc = forecast_of(L, c, "timeline");  // made on the GPU (its roofline floors)
    if (auto tl = c.s->timeline(c.run->state, fc, gpu_of(L, c, "timeline"), c.opt->lean)) c.out->parallel = std::move(*tl);
    lua_pushboolean(L, c.out->parallel.has_value());
    return 1;
  });
}

// run.peak_tflops(dtype) -> TFLOP/s | nil: the dense peak a GEMM of `dtype` (a dtype name as neusight.kernels
// dtype_name reads it; nil: fp32) runs at on the GPU (roofline.cpp); nil when the GPU has no unit for it. [-1, +1, e]
// run.gpu_spec() -> the run's GPU as the plain table op rules and predictors receive (every key its file gives, and
// source): what ns.predict prices other kernels on (scripts/neusight/pipeline.lua: the bf16 twins of a forecast's fp8
// GEMMs, neusight.precision fp8_gemm_warning). [-0, +1, e]
int l_gpu_spec(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    gpu_push(L, gpu_of(L, c, "gpu_spec"));
    return 1;
  });
}

int l_peak_tflops(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    const std::string at = caller_where(L) + "run.peak_tflops(dtype): ";
    const gpu_spec& gpu = gpu_of(L, c, "peak_tflops");
    std::optional<double> peak;
    const int t = lua_type(L, 1);
    if (t == LUA_TSTRING) peak = dense_peak_read(*c.p, gpu, lua_tostring(L, 1), at);
    else if (t == LUA_TNIL || t == LUA_TNONE) peak = dense_peak_tflops(gpu, kernel{}.dtype);  // fp32
    else throw error(at + "dtype must be a string or nil, got " + luaL_typename(L, 1));
    if (peak) lua_pushnumber(L, *peak);
    else lua_pushnil(L);  // a known dtype the GPU has no units of: no MFU
    return 1;
  });
}

// run.family_inputs() -> { { key, value }, … }: the forecast's time by kernel family (family_inputs_add: family_s.<f>,
// family_n.<f>, roofline.<f>). [-0, +1, e]
int l_family_inputs(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    figure_inputs in;
    const forecast& fc = forecast_of(L, c, "family_inputs");  // made with the predictor, on the GPU
    family_inputs_add(in, fc.seconds_by_family(*c.run->gpu), *c.run->pred, c.run->gpu->vendor);
    figure_inputs_push(L, in);
    return 1;
  });
}

// run.calibration_inputs() -> { { key, value }, … }: the calibration run.forecast() applied (calibration_source,
// calibration_model and calibration_model_params when the file names the measurement's model and its size,
// calibration_stale when it was fitted to another version of the GPU's file (its warning), calibration_skipped when
// the GPU's file was fitted to another predictor's forecasts or other weights and is not applied, or is applied
// although it names no predictor (its warning: session::calibration_skipped),
// calibration.<family> factors: those of this run, a decode step's when it is one); empty without one.
// [-0, +1, e]
int l_calibration_inputs(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    figure_inputs in;
    const gpu_spec& gpu = gpu_of(L, c, "calibration_inputs");
    const std::string predictor = c.run->pred ? c.run->pred->name() : "";
    const calibration* cal = c.s->calibration_of(gpu, predictor);
    // a file fitted to another predictor's forecasts or other weights, not applied (or one that names no predictor,
    // applied): the warning, said by figures.lua
    if (auto w = c.s->calibration_skipped(gpu, predictor); !w.empty()) in.emplace_back("calibration_skipped", std::move(w));
    if (const auto* applied = calibration_applied(cal, c.run->decode)) {
      in.emplace_back("calibration_source", cal->source);
      if (!cal->model.empty()) in.emplace_back("calibration_model", cal->model);
      if (cal->model_params) in.emplace_back("calibration_model_params", *cal->model_params);
      // fitted to another version of the GPU's file (calibration_stale_warning): the warning, said by figures.lua
      if (auto w = calibration_stale_warning(*cal, *c.run->gpu); !w.empty()) in.emplace_back("calibration_stale", std::move(w));
      for (const auto& [fam, x] : *applied) in.emplace_back("calibration." + fam, x);
    }
    figure_inputs_push(L, in);
    return 1;
  });
}

// run.figures(inputs) -> { fields = { { key, value, column, cell, top }, … }, lines, warnings }: scripts/neusight/figures.lua
// compute() of the inputs ({ { key, value }, … }), with the GPU, the predictor's error table and the workload's own
// figures (session::figures_compute), checked. [-1, +1, e]
int l_figures(lua_State* L) {
  return primitive(L, [&](pipeline_context& c) {
    const figure_inputs in = figure_inputs_read(
        L, 1, caller_where(L) + "run.figures(inputs): inputs must be an array of { key, value } (a number, boolean or string)");
    const gpu_spec& gpu = gpu_of(L, c, "figures");
    const figures figs =
        c.s->figures_compute(in, gpu, predictor_of(L, c, "figures").uncertainty(gpu.vendor), c.run->source);
    lua_createtable(L, 0, 3);
    figures_push(L, figs);
    lua_setfield(L, -2, "fields");
    strings_push(L, figs.lines);
    lua_setfield(L, -2, "lines");
    strings_push(L, figs.warnings);
    lua_setfield(L, -2, "warnings");
    return 1;
  });
}

}  // namespace

namespace {

// Calls pipeline.`fn`(run) with the primitives of `c` (with `workload`: run.workload, run.expand and run.predictor
// too) and reads back its { figures, warnings } into c.out. [-0, +0, e]
void pipeline_call(session::impl& p, pipeline_context& c, const char* fn, bool workload) {
  lua_State* L = p.L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const session::pipeline_graph& run = *c.run;
  const session::pipeline_options& opt = *c.opt;
  require_push(p, "neusight.pipeline");  // stack: P
  const std::string& file = p.module_file("neusight.pipeline").display;  // the file that ran: bundled, or a --scripts DIR's
  if (!lua_istable(L, -1) || raw_getfield(L, -1, fn) != LUA_TFUNCTION)
    throw error(std::string("module neusight.pipeline has no function ") + fn + " (" + file +
                " defines forecast(run), a workload's steps, and finish(run), those once the kernels are known)");
  auto** slot = static_cast<pipeline_context**>(lua_newuserdatauv(L, sizeof(pipeline_context*), 0));
  *slot = &c;
  struct slot_clear {
    pipeline_context** slot;
    ~slot_clear() { *slot = nullptr; }
  } const clear{slot};
  lua_insert(L, -2);  // stack: P ud fn — the userdata stays on the stack, alive, until `clear` has emptied it
  const int ud = lua_gettop(L) - 1;
  lua_createtable(L, 0, 20);  // stack: P ud fn run
  lua_pushboolean(L, opt.say), lua_setfield(L, -2, "say");
  lua_pushboolean(L, opt.lean), lua_setfield(L, -2, "lean");
  if (!opt.row_keys.empty()) set_string(L, "row_keys", opt.row_keys);
  if (!workload) {  // what run.workload() gives a workload's run
    strings_push(L, run.warnings), lua_setfield(L, -2, "warnings");
    run_state_push(L, run.state, "fields"), lua_setfield(L, -2, "fields");
    report_gpu_push(L, *run.gpu), lua_setfield(L, -2, "gpu");
  }
  const std::pair<const char*, lua_CFunction> primitives[] = {
      {"workload", l_workload},        {"expand", l_expand},
      {"predictor", l_predictor},      {"forecast", l_forecast},
      {"predict", l_predict},          {"aggregate", l_aggregate},
      {"kernels", l_kernels},          {"latencies", l_latencies},
      {"set_latencies", l_set_latencies},
      {"timeline", l_timeline},        {"peak_tflops", l_peak_tflops}, {"gpu_spec", l_gpu_spec},
      {"family_inputs", l_family_inputs}, {"calibration_inputs", l_calibration_inputs},
      {"figures", l_figures}};
  for (const auto& [name, f] : primitives) {
    if (!workload && (f == l_workload || f == l_expand || f == l_predictor)) continue;
    lua_pushvalue(L, ud);
    lua_pushstring(L, name);  // the primitive's name, in its errors
    lua_pushcclosure(L, f, 2);
    lua_setfield(L, -2, name);
  }
  // stack: P ud result. The error a primitive raised, or the limit it ran over, goes on as it was thrown: no context
  // line, no pipeline frames
  ns_call_passing(L, 1, 1, c.failure, "in " + file + " " + fn, false);
  const std::string what = file + " " + fn + "()";
  if (!lua_istable(L, -1)) throw error(what + " returned " + luaL_typename(L, -1) + ", expected a table { figures, warnings }");
  if (!c.out->fc) throw error(what + ": the run made no forecast (run.forecast())");
  if (raw_getfield(L, -1, "figures") == LUA_TNIL)  // the report's MFU, cost and band would vanish without a word
    throw error(what + " returned no figures (result.figures: run.figures(inputs)'s table)");
  c.out->figs = figures_read(L, -1, what + " result.figures");
  lua_pop(L, 1);
  if (raw_getfield(L, -1, "warnings") != LUA_TNIL) {
    const std::string bad = what + " result.warnings must be an array of strings";
    if (!lua_istable(L, -1)) throw error(bad);
    for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
      lua_rawgeti(L, -1, i);
      if (lua_type(L, -1) != LUA_TSTRING) throw error(bad);
      c.out->warnings.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

}  // namespace

session::finished session::forecast_workload(workload_request req, pipeline_options opt) {
  finished out;
  pipeline_graph run;
  pipeline_context ctx;
  ctx.s = this, ctx.p = p_.get(), ctx.run = &run, ctx.opt = &opt, ctx.wl = &req, ctx.out = &out;
  pipeline_call(*p_, ctx, "forecast", true);
  return out;
}

session::finished session::forecast_finish(pipeline_graph graph, pipeline_options opt) {
  if (!run_state_has(p_->L(), graph.state, "fields")) throw error("forecast_finish: no workload or graph to report");
  finished out;
  out.gpu = *graph.gpu;
  static_cast<run_facts&>(out) = graph;
  pipeline_context ctx;
  ctx.s = this, ctx.p = p_.get(), ctx.run = &graph, ctx.opt = &opt, ctx.out = &out;
  ctx.expanded = true;
  pipeline_call(*p_, ctx, "finish", false);
  return out;
}

}  // namespace ns
