// engine/lua/session_serve.cpp — `neusight serve`: the two primitives scripts/neusight/serve.lua drives (a phase
// forecast, a progress line) and the call into it.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "lua/session_impl.h"

namespace ns {

namespace {

struct serve_context {
  serve_context(session* s_, session::impl* p_, const predictor* pred_) : s(s_), p(p_), pred(pred_) {}
  session* s = nullptr;
  session::impl* p = nullptr;  // s's state
  const predictor* pred = nullptr;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last;
  bool printed = false;
  bool tty = false;
  // The last script error a phase's pipeline raised, as the phase primitive passed it to serve.lua: serve_pcall gives
  // it back whole (its traceback the pipeline's frames, then serve.lua's) when it ends the call, passed through, raised
  // again unchanged or stopped by the limit it ran over, instead of an error that starts where serve.lua raised it.
  raised_error failure;
};

serve_context* context_of(lua_State* L) { return static_cast<serve_context*>(lua_touserdata(L, lua_upvalueindex(1))); }

// The workload fields of a phase() argument as CLI-style overrides ("parallel.tp" = 2 …). [-0, +0, e]
workload_overrides overrides_read(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  workload_overrides o;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {  // stack: key value
    if (lua_type(L, -2) != LUA_TSTRING) throw error("phase(): field names must be strings");
    const std::string k = lua_tostring(L, -2);
    switch (lua_type(L, -1)) {
      case LUA_TSTRING: o[k] = std::string(lua_tostring(L, -1)); break;
      case LUA_TBOOLEAN: o[k] = bool(lua_toboolean(L, -1)); break;
      case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) o[k] = int64_t(lua_tointeger(L, -1));
        else o[k] = double(lua_tonumber(L, -1));
        break;
      default: throw error("phase(): field '" + k + "' must be a string, number or boolean");
    }
    lua_pop(L, 1);
  }
  return o;
}

// phase(fields[, with_band]) -> { latency_ms, latency_ms_p10, latency_ms_p90, band_spread (with_band: the band and
// its table's width factor; nil without one), out_of_distribution, band_widened, band_borrowed_from,
// band_fallback_share (with_band: predict's figures of those names, where the band gives them),
// band_warnings, families (family_s.<family> seconds, family_n.<family> effective kernels, roofline.<family> = true
// for families the roofline priced: family_inputs_add's, flat), kv_cache_gb, state_gb, params, model_params (the
// whole model's, when the phase holds it: session::forecast_model_params), layout_warnings (the parallel layout's
// warnings, scripts/neusight/report.lua layout_warnings: predict's of the same layout), active_params
// (mixtures of experts), max_positions (a rotary model's max_position_embeddings: scripts/neusight/workload.lua
// position_limit), kv_window and kv_window_share (a sliding-window model's window and its layers' share of a cached
// token's bytes: workload.lua kv_cache_window), flops, launch, calibration (the GPU's calibration file its kernel times were corrected by, and
// calibration_model and calibration_model_params, the model it was fitted to and its size, when the file says;
// nil without one), calibration_stale (the warning of a calibration fitted to another version of the GPU's file),
// totals (the forecast's totals as neusight.report reads them: forecast_push's), parallel (a parallel phase's report
// as figures.lua reads it: iteration, its timeline's slowest device, and figures, the layout and device_floor_s; nil on
// one GPU), peak_tflops (the dtype's dense peak, session::dense_peak_tflops; nil where the GPU has no unit for it):
// what scripts/neusight/serve.lua holds the phase to its floor by (neusight.figures floor_inputs), dtype,
// gpu = the GPU's file
// fields and source (gpu_push), kernels = { {name, op, kernel, kind, dtype, count, ms, compute_ms, memory_ms; a GEMM's
// b, m, n, k, weight_bytes}, … } }: one serving phase
// forecast as `predict` makes it (ms, compute_ms, memory_ms include the node's count; compute_ms / memory_ms are
// the roofline's FLOP and DRAM terms). The phase is forecast as predict forecasts a workload: scripts/neusight/
// pipeline.lua forecast (a pipeline.lua of your own under --scripts applies), its figures and warnings unused here
// (serve.lua makes its own report). [-1, +1, e]
int l_serve_phase(lua_State* L) {
  return ns_catch(L, [&] {
    serve_context* c = context_of(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    session::workload_request req;
    req.overrides = overrides_read(L, 1);
    req.predictor_make = [c]() -> const predictor& { return *c->pred; };
    // lean: serve reads the latency, the families and the fields (its band below, for the phases a report shows)
    std::optional<session::finished> run;
    try {
      run = c->s->forecast_workload(std::move(req), {"default", "", false, true});
    } catch (const script_error& e) {
      c->failure.keep(L, e, std::current_exception());
      throw;
    }
    const session::finished& done = *run;
    const forecast& fc = *done.fc;  // a run without one is the pipeline's error (pipeline_call)
    const gpu_spec& gpu = done.gpu;
    const double latency_s = done.latency_s();
    // the per-family inputs (family_s.<f>, family_n.<f>, roofline.<f>): the band's and a calibration fit's, made once
    figure_inputs fam;
    family_inputs_add(fam, fc.seconds_by_family(gpu), *c->pred, gpu.vendor);
    // not the grid's longest.<family>.<input> (a power of two past the longest request): serve says the range of its
    // requests (scripts/neusight/serve.lua, against the phase's trained_range below)
    fam.erase(std::remove_if(fam.begin(), fam.end(), [](const auto& kv) { return kv.first.rfind("longest.", 0) == 0; }),
              fam.end());
    // with_band: the phase's uncertainty band, as predict's (scripts/neusight/uncertainty.lua; a few ms each, so only
    // for the phases a report shows)
    figures band;
    if (lua_toboolean(L, 2)) {
      figure_inputs band_in = {{"latency_s", latency_s}};
      band_in.insert(band_in.end(), fam.begin(), fam.end());
      band = c->s->figures_call("neusight.uncertainty", "figures", band_in, gpu, c->pred->uncertainty(gpu.vendor));
    }
    lua_createtable(L, 0, 13);  // stack: result
    set_number(L, "latency_ms", latency_s * 1e3);
    {  // families: the inputs a calibration fit reads, flat
      lua_createtable(L, 0, int(fam.size()));  // stack: result families
      for (const auto& [k, v] : fam) {
        if (const double* d = std::get_if<double>(&v)) lua_pushnumber(L, *d);
        else if (const bool* b = std::get_if<bool>(&v)) lua_pushboolean(L, *b);
        else continue;
        lua_setfield(L, -2, k.c_str());
      }
      lua_setfield(L, -2, "families");
    }
    for (const auto& x : band.fields) {
      if (const auto v = figure_number(x.value);
          v && (x.key == "latency_ms_p10" || x.key == "latency_ms_p90" || x.key == "band_spread" ||
                x.key == "band_widened" || x.key == "band_fallback_share"))
        set_number(L, x.key.c_str(), *v);
      // what the band says the forecast is outside of, as predict's JSON figures say it (serve.lua phase_report)
      if (const bool* b = std::get_if<bool>(&x.value); b && x.key == "out_of_distribution")
        lua_pushboolean(L, *b), lua_setfield(L, -2, "out_of_distribution");
      if (const auto* t = std::get_if<std::string>(&x.value); t && x.key == "band_borrowed_from")
        lua_pushlstring(L, t->data(), t->size()), lua_setfield(L, -2, "band_borrowed_from");
    }
    lua_createtable(L, int(band.warnings.size()), 0);  // stack: result warnings (out of distribution)
    for (size_t i = 0; i < band.warnings.size(); ++i)
      lua_pushstring(L, band.warnings[i].c_str()), lua_rawseti(L, -2, lua_Integer(i + 1));
    lua_setfield(L, -2, "band_warnings");
    // the range of its input each family's weights were trained on (the manifests' [training.range], of the weights
    // this phase was priced with): what serve.lua says its requests beyond (neusight.uncertainty range_warning)
    trained_range_push(L, c->pred->uncertainty(gpu.vendor).trained_range);
    lua_setfield(L, -2, "trained_range");
    // the workload's facts, from its report fields (scripts/neusight/report.lua workload of workload.lua's build)
    run_state_push(L, done.state, "fields");  // stack: result fields (a table: report_fields_keep)
    const table_reader fields(L, -1, "scripts/neusight/report.lua workload result");
    const std::string mode = fields.str("mode"), dtype = fields.str("dtype"), &model = fc.g.model;
    const double kv = fields.number_or("kv_cache_bytes", 0);
    if (!(kv > 0))  // a serving phase holds a cache; 0 would be infinite room
      throw error("serve: the " + mode + " forecast of " + model + " holds no KV cache (scripts/neusight/workload.lua "
                  "build's kv_cache_bytes, as scripts/neusight/report.lua workload passes it on)");
    lua_pushnumber(L, kv / 1e9), lua_setfield(L, -3, "kv_cache_gb");
    if (fields.has("active_params"))  // mixtures of experts
      lua_pushnumber(L, fields.number("active_params")), lua_setfield(L, -3, "active_params");
    if (fields.has("max_positions"))  // a rotary model's max_position_embeddings (workload.lua position_limit)
      lua_pushnumber(L, fields.number("max_positions")), lua_setfield(L, -3, "max_positions");
    // a sliding-window model: the window and its layers' share of a cached token (workload.lua kv_cache_window)
    for (const char* k : {"kv_window", "kv_window_share"})
      if (fields.has(k)) lua_pushnumber(L, fields.number(k)), lua_setfield(L, -3, k);
    // what the model's config file says that the forecast does not read (workload.lua model_warnings): serve's report
    // says them, as predict's does among its workload's warnings
    if (raw_getfield(L, -1, "model_warnings") == LUA_TTABLE) {  // stack: result fields warnings
      for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
        const bool text = lua_rawgeti(L, -1, i) == LUA_TSTRING;
        lua_pop(L, 1);
        if (!text) throw error("scripts/neusight/report.lua workload result: field 'model_warnings' must be strings");
      }
      lua_setfield(L, -3, "model_warnings");  // stack: result fields
    } else {
      lua_pop(L, 1);  // stack: result fields
    }
    // the layout's warnings (scripts/neusight/report.lua layout_warnings: a tensor-parallel group priced over PCIe
    // beyond the GPU's NVLink bridge, neusight.parallel.layout), which predict says of the same layout: serve.lua says
    // them too; an empty array on one GPU
    {
      const std::string& file = function_push(*c->p, "neusight.report", "layout_warnings");  // stack: result fields fn
      lua_pushvalue(L, -2);                                              // stack: result fields fn fields
      ns_call(L, 1, 1, "in " + file + " layout_warnings");               // stack: result fields warnings
      lua_setfield(L, -3, "layout_warnings");                            // stack: result fields
    }
    if (raw_getfield(L, -1, "state") != LUA_TTABLE)  // stack: result fields state (precision.lua state_report)
      throw error("scripts/neusight/report.lua workload result: field 'state' is " + std::string(luaL_typename(L, -1)) +
                  ", expected the model-state report (scripts/neusight/precision.lua state_report)");
    lua_pushnumber(L, table_reader(L, -1, "scripts/neusight/report.lua workload result's state").number("state_gb"));
    lua_setfield(L, -4, "state_gb");
    lua_pop(L, 2);  // stack: result
    set_number(L, "params", fc.params_total());
    // the whole model's count, when the phase holds it (scripts/neusight/report.lua model_params: what a calibration's
    // model is told by)
    if (const auto n = c->s->forecast_model_params(done.state, fc.params_total())) set_number(L, "model_params", *n);
    set_number(L, "flops", fc.flops_total());
    set_string(L, "launch", done.launch);
    set_string(L, "dtype", dtype);
    set_string(L, "model", model);
    // the GPU's calibration when it corrects this phase or the other (a decode step under an empty [decode_factors]
    // has none, a prefill under an empty [factors] neither): the run's report names it and says which phases it corrects
    const calibration* cal = c->s->calibration_of(gpu, c->pred->name());
    const bool phase_calibrated = calibration_applied(cal, done.decode) != nullptr;
    if (!phase_calibrated && !calibration_applied(cal, !done.decode)) cal = nullptr;
    // a file fitted to another predictor's forecasts or other weights, not applied (or one that names no predictor,
    // applied): the warning (serve.lua, sweep.lua say it)
    if (auto w = c->s->calibration_skipped(gpu, c->pred->name()); !w.empty()) set_string(L, "calibration_skipped", w);
    // what scripts/neusight/serve.lua holds the phase to its floor by (neusight.figures floor_inputs), as predict's
    // figures hold its forecast: the totals, a parallel phase's iteration and layout, the dtype's dense peak
    forecast_push(L, fc, false);
    lua_setfield(L, -2, "totals");
    if (done.parallel) {
      figure_inputs par = {{"iteration", done.parallel->iteration_s}};
      for (const auto& [k, v] : done.parallel->figures) par.emplace_back("figures." + k, v);
      figure_table_push(L, par);
      lua_setfield(L, -2, "parallel");
    }
    if (const auto peak = c->s->dense_peak_tflops(gpu, dtype)) set_number(L, "peak_tflops", *peak);
    if (cal) {
      set_string(L, "calibration", cal->source);
      if (!cal->model.empty()) set_string(L, "calibration_model", cal->model);  // the model it was fitted to
      if (cal->model_params) set_number(L, "calibration_model_params", *cal->model_params);  // and its size
      // fitted to another version of the GPU's file: the warning (serve.lua, sweep.lua say it)
      if (const auto w = calibration_stale_warning(*cal, gpu); !w.empty()) set_string(L, "calibration_stale", w);
      // whether its decode steps are corrected too (an empty [decode_factors]: no decode step was measured)
      lua_pushboolean(L, !(cal->decode_factors && cal->decode_factors->empty()));
      lua_setfield(L, -2, "decode_calibrated");
      // and the prefill (an empty [factors]: only a decode step was measured)
      lua_pushboolean(L, !cal->factors.empty());
      lua_setfield(L, -2, "prefill_calibrated");
      // whether this phase's kernel times are corrected
      lua_pushboolean(L, phase_calibrated);
      lua_setfield(L, -2, "phase_calibrated");
    }
    // every key the GPU's file gives, and source (gpu_push): mem_reported_gib, what serve's budget takes its share of
    // (memory.lua budget_gb), and the GPU ns.predict prices the bf16 twins of fp8 GEMMs on (serve.lua)
    gpu_push(L, gpu);  // stack: result gpu
    lua_setfield(L, -2, "gpu");
    lua_createtable(L, int(fc.kernels.size()), 0);  // stack: result kernels
    for (size_t i = 0; i < fc.kernels.size(); ++i) {
      const kernel_instance& ki = fc.kernels[i];
      const node& n = fc.g.nodes[ki.node];
      const double count = double(n.count);
      double compute_s = 0;
      try {
        compute_s = roofline_compute_seconds(ki.k, gpu);
      } catch (const error&) {
        compute_s = 0;  // a fixed-latency kernel in a dtype the GPU has no unit for: the predictor never priced it
      }
      lua_createtable(L, 0, 8);
      set_string(L, "name", n.name);
      set_string(L, "op", n.op);
      set_string(L, "kernel", ki.k.name);
      set_string(L, "kind", std::string(kernel_kind_name(ki.k.kind)));
      set_string(L, "kernel_op", ki.k.op);
      set_string(L, "dtype", ki.k.dtype);
      // a GEMM's shape (b, m, n, k as neusight.kernels has them), a BMM's too: a mixture of experts' grouped expert
      // GEMMs, which serve.lua's fp8 comparison prices in bf16 as well
      if (ki.k.kind == kernel_kind::gemm || ki.k.kind == kernel_kind::bmm) {
        lua_pushinteger(L, lua_Integer(ki.k.b)), lua_setfield(L, -2, "b");
        lua_pushinteger(L, lua_Integer(ki.k.m)), lua_setfield(L, -2, "m");
        lua_pushinteger(L, lua_Integer(ki.k.n)), lua_setfield(L, -2, "n");
        lua_pushinteger(L, lua_Integer(ki.k.k)), lua_setfield(L, -2, "k");
        if (ki.k.weight_bytes > 0) set_number(L, "weight_bytes", ki.k.weight_bytes);
      }
      lua_pushinteger(L, lua_Integer(n.count)), lua_setfield(L, -2, "count");
      set_number(L, "ms", fc.seconds(i) * 1e3);
      set_number(L, "compute_ms", compute_s * count * 1e3);
      set_number(L, "memory_ms", roofline_memory_seconds(ki.k, gpu) * count * 1e3);
      lua_rawseti(L, -2, lua_Integer(i + 1));
    }
    lua_setfield(L, -2, "kernels");
    return 1;
  });
}

// progress(text[, done]) — a progress line on stderr, at most every 0.5 s and only once the run has taken 1 s;
// done = true ends it. On a terminal the line is rewritten in place. Each call starts the script limits' count
// again (ns_limits_renew). [-2, +0, -]
int l_serve_progress(lua_State* L) {
  ns_limits_renew(L);  // a simulation that reports progress is held to the script limits per stretch, not as a whole
  serve_context* c = context_of(L);
  const bool done = lua_toboolean(L, 2);
  const auto now = std::chrono::steady_clock::now();
  if (done) {
    if (c->printed && c->tty) std::fputc('\n', stderr);
    c->printed = false;
    return 0;
  }
  const double since_start = std::chrono::duration<double>(now - c->start).count();
  const double since_last = std::chrono::duration<double>(now - c->last).count();
  if (since_start < 1.0 || (c->printed && since_last < (c->tty ? 0.5 : 2.0))) return 0;
  const char* text = luaL_optstring(L, 1, "");
  if (c->tty) std::fprintf(stderr, "\rneusight: serve: %s\033[K", text);
  else std::fprintf(stderr, "neusight: serve: %s\n", text);
  std::fflush(stderr);
  c->printed = true;
  c->last = now;
  return 0;
}

// gpu(query) -> the GPU's file fields as a plain table (name, source, mem_gb, price_per_hour_usd when the file has
// one, …); an unknown name is an error that says so. [-1, +1, e]
int l_serve_gpu(lua_State* L) {
  return ns_catch(L, [&] {
    serve_context* c = context_of(L);
    const std::string query = luaL_checkstring(L, 1);
    gpu_push(L, c->s->gpu(query));
    return 1;
  });
}

void push_value(lua_State* L, const workload_value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) lua_pushstring(L, s->c_str());
  else if (const auto* i = std::get_if<int64_t>(&v)) lua_pushinteger(L, lua_Integer(*i));
  else if (const auto* d = std::get_if<double>(&v)) lua_pushnumber(L, *d);
  else lua_pushboolean(L, std::get<bool>(v));
}

// ns_call for serve.lua's entry points: an error that is a phase pipeline's script error, raised again unchanged
// (serve.lua probe) or the script limit it ran over, comes out as the pipeline gave it, with its own traceback
// (--traceback), the context line added as ns_call adds it (ns_call_passing). [-(nargs+1), +nres, e]
// That is ns_call_passing with `context` for the errors it places; a message serve.lua or sweep.lua wrote for the user
// ("serve: the output length … must be …", a workload's "command line: …") is whole as it is: no internal
// "in scripts/neusight/serve.lua run" line under it.
void serve_pcall(lua_State* L, const serve_context& ctx, int nargs, int nres, const std::string& context) {
  try {
    ns_call_passing(L, nargs, nres, ctx.failure, context, true);
  } catch (const script_error& e) {
    const std::string msg = e.what(), tail = "\n    " + context;
    if (context.empty() || ns_message_positioned(msg) || msg.size() < tail.size() ||
        msg.compare(msg.size() - tail.size(), tail.size(), tail) != 0)
      throw;
    throw script_error(msg.substr(0, msg.size() - tail.size()), e.traceback);
  }
}

// Calls `module`.run(options (+ lists as arrays), phase, progress[, gpu]) and renders the report it returns with the
// module's format_table (and format_csv when `csv`).
session::serve_report serve_call(lua_State* L, serve_context& ctx, const char* module, const workload_overrides& options,
                                 const session::option_lists* lists, bool csv) {
  const int S = lua_gettop(L);  // the module
  const std::string& file = function_get(*ctx.p, S, module, "run");
  overrides_push_table(L, options);
  if (lists) {
    for (const auto& [k, values] : *lists) {
      lua_createtable(L, int(values.size()), 0);
      for (size_t i = 0; i < values.size(); ++i) push_value(L, values[i]), lua_rawseti(L, -2, lua_Integer(i + 1));
      lua_setfield(L, -2, k.c_str());
    }
  }
  lua_pushlightuserdata(L, &ctx);
  lua_pushcclosure(L, l_serve_phase, 1);
  lua_pushlightuserdata(L, &ctx);
  lua_pushcclosure(L, l_serve_progress, 1);  // stack: S run options phase progress
  lua_pushlightuserdata(L, &ctx);
  lua_pushcclosure(L, l_serve_gpu, 1);  // stack: S run options phase progress gpu
  serve_pcall(L, ctx, 4, 1, "in " + file + " run");  // stack: S report
  if (!lua_istable(L, -1)) throw error(file + ": run returned " + luaL_typename(L, -1) + ", expected a table");
  session::serve_report out;
  out.json = json_text_of(L, -1);
  for (const auto& [name, into] : {std::pair{"format_table", &out.table}, {"format_csv", &out.csv}}) {
    if (into == &out.csv && !csv) continue;
    function_get(*ctx.p, S, module, name);
    lua_pushvalue(L, S + 1);
    ns_call(L, 1, 1, "in " + file + " " + name);  // stack: S report text
    if (!lua_isstring(L, -1)) throw error(file + ": " + name + " must return a string");
    *into = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return out;
}

}  // namespace

figure_inputs session::serve_calibration_inputs(const workload_overrides& options, const predictor& pred) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  serve_context ctx(this, p_.get(), &pred);
  const std::string& file = function_push(*p_, "neusight.serve", "calibration_inputs");  // stack: fn
  overrides_push_table(L, options);
  lua_pushlightuserdata(L, &ctx);
  lua_pushcclosure(L, l_serve_phase, 1);  // stack: fn options phase
  serve_pcall(L, ctx, 2, 1, "in " + file + " calibration_inputs");  // stack: inputs
  if (!lua_istable(L, -1))
    throw error(file + ": calibration_inputs returned " + luaL_typename(L, -1) + ", expected a table");
  const int t = lua_gettop(L);
  figure_inputs in;
  lua_pushnil(L);
  while (lua_next(L, t) != 0) {  // stack: inputs key value
    if (lua_type(L, -2) != LUA_TSTRING) throw error(file + ": calibration_inputs: keys must be strings");
    const std::string k = lua_tostring(L, -2);
    switch (lua_type(L, -1)) {
      case LUA_TSTRING: in.emplace_back(k, std::string(lua_tostring(L, -1))); break;
      case LUA_TBOOLEAN: in.emplace_back(k, bool(lua_toboolean(L, -1))); break;
      case LUA_TNUMBER: in.emplace_back(k, double(lua_tonumber(L, -1))); break;
      default: throw error(file + ": calibration_inputs: '" + k + "' must be a string, number or boolean");
    }
    lua_pop(L, 1);
  }
  // pairs() order varies from run to run: sorted, the fit sees the same inputs every time
  std::sort(in.begin(), in.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return in;
}

session::serve_report session::serve(const workload_overrides& options, const predictor& pred) {
  return serve_sweep(options, {}, pred);
}

session::serve_report session::serve_sweep(const workload_overrides& options, const option_lists& lists,
                                           const predictor& pred) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  serve_context ctx(this, p_.get(), &pred);
  ctx.tty = isatty(fileno(stderr)) != 0;
  const bool sweep = !lists.empty();  // one setting: scripts/neusight/serve.lua; lists: scripts/neusight/sweep.lua
  const char* module = sweep ? "neusight.sweep" : "neusight.serve";
  require_push(*p_, module);  // stack: S
  return serve_call(L, ctx, module, options, sweep ? &lists : nullptr, sweep);
}

}  // namespace ns
