// engine/lua/session_report.cpp — reports computed in Lua (`neusight models`, the HTML page, a single forecast's
// report: scripts/neusight/report.lua, a comparison's rows: compare.lua) and the session's GPU lookup: the engine hands
// over what only it has (the forecast, the GPU, the figures), a module's function returns a table, and the engine
// writes it as JSON or asks the module for its text.
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <variant>

#include "core/calibration.h"
#include "lua/session_impl.h"

namespace ns {

const gpu_spec& session::gpu(const std::string& query) { return p_->gpu_resolve(query); }

session::lua_report session::report(const std::string& module, const std::string& fn) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, module.c_str());  // stack: M
  const int M = lua_gettop(L);
  const std::string& where = function_get(*p_, M, module.c_str(), fn.c_str());
  ns_call(L, 0, 1, "in " + where + " " + fn);  // stack: M report
  if (!lua_istable(L, -1)) throw error(where + ": " + fn + " returned " + luaL_typename(L, -1) + ", expected a table");
  lua_report out;
  out.json = json_text_of(L, -1);
  for (auto [name, text] : {std::pair<const char*, std::string*>{"format_table", &out.table}, {"format_csv", &out.csv}}) {
    function_get(*p_, M, module.c_str(), name);
    lua_pushvalue(L, -2);
    ns_call(L, 1, 1, "in " + where + " " + name);  // stack: M report text
    if (!lua_isstring(L, -1)) throw error(where + ": " + name + " must return a string");
    *text = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return out;
}

namespace {
// [-0, +1, m] a figure's value (not available: nil, JSON null)
void figure_value_push(lua_State* L, const figure_value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) lua_pushnil(L);
        else if constexpr (std::is_same_v<T, int64_t>) lua_pushinteger(L, lua_Integer(v));
        else if constexpr (std::is_same_v<T, double>) lua_pushnumber(L, v);
        else if constexpr (std::is_same_v<T, bool>) lua_pushboolean(L, v);
        else lua_pushlstring(L, v.data(), v.size());
      },
      value);
}
}  // namespace

void report_gpu_push(lua_State* L, const gpu_spec& gpu) {
  lua_createtable(L, 0, 5);
  lua_pushstring(L, gpu.name.c_str()), lua_setfield(L, -2, "name");
  lua_pushstring(L, gpu.vendor.c_str()), lua_setfield(L, -2, "vendor");  // the table's launch wording (launch.lua graph_name)
  lua_pushstring(L, gpu.source.c_str()), lua_setfield(L, -2, "file");
  lua_pushnumber(L, gpu.mem_gb), lua_setfield(L, -2, "mem_gb");
  lua_pushnumber(L, gpu.price_per_hour_usd), lua_setfield(L, -2, "price_per_hour_usd");
}

void figures_push(lua_State* L, const figures& figs) {
  lua_createtable(L, int(figs.fields.size()), 0);
  for (size_t i = 0; i < figs.fields.size(); ++i) {
    const figure& x = figs.fields[i];
    lua_createtable(L, 0, 5);
    lua_pushstring(L, x.key.c_str()), lua_setfield(L, -2, "key");
    figure_value_push(L, x.value);
    lua_setfield(L, -2, "value");
    lua_pushlstring(L, x.column.data(), x.column.size()), lua_setfield(L, -2, "column");
    lua_pushlstring(L, x.cell.data(), x.cell.size()), lua_setfield(L, -2, "cell");
    lua_pushboolean(L, x.top), lua_setfield(L, -2, "top");
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
}

void strings_push(lua_State* L, const std::vector<std::string>& v) {
  lua_createtable(L, int(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i)
    lua_pushlstring(L, v[i].data(), v[i].size()), lua_rawseti(L, -2, lua_Integer(i + 1));
}

void figure_inputs_push(lua_State* L, const figure_inputs& in) {
  lua_createtable(L, int(in.size()), 0);
  for (size_t i = 0; i < in.size(); ++i) {
    lua_createtable(L, 2, 0);
    lua_pushlstring(L, in[i].first.data(), in[i].first.size()), lua_rawseti(L, -2, 1);
    figure_value_push(L, in[i].second);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
}

void figure_table_push(lua_State* L, const figure_inputs& in) {
  lua_createtable(L, 0, int(in.size()) + 2);
  const int r = lua_gettop(L);
  for (const auto& [key, v] : in) {
    if (std::holds_alternative<std::monostate>(v)) continue;
    // "a.b.c": field c of the table r.a.b (each made on first use)
    int t = r;
    size_t from = 0;
    for (size_t dot; (dot = key.find('.', from)) != std::string::npos; from = dot + 1) {
      const std::string outer = key.substr(from, dot - from);
      if (raw_getfield(L, t, outer.c_str()) != LUA_TTABLE) {  // stack: r … t.outer
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, t, outer.c_str());
      }
      t = lua_gettop(L);
    }
    if (const auto* i = std::get_if<int64_t>(&v)) lua_pushinteger(L, lua_Integer(*i));
    else if (const auto* d = std::get_if<double>(&v)) lua_pushnumber(L, *d);
    else if (const auto* b = std::get_if<bool>(&v)) lua_pushboolean(L, *b);
    else lua_pushstring(L, std::get<std::string>(v).c_str());
    lua_setfield(L, t, key.c_str() + from);
    lua_settop(L, r);  // stack: r
  }
}

figure_inputs figure_inputs_read(lua_State* L, int idx, const std::string& bad) {
  stack_guard guard(L);
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx)) throw error(bad);
  figure_inputs out;
  for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, idx)); i <= n; ++i) {
    lua_rawgeti(L, idx, i);  // stack: pair
    if (!lua_istable(L, -1)) throw error(bad);
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);  // stack: pair key value
    if (lua_type(L, -2) != LUA_TSTRING) throw error(bad);
    const std::string key = lua_tostring(L, -2);
    if (lua_isinteger(L, -1)) out.emplace_back(key, int64_t(lua_tointeger(L, -1)));
    else if (lua_type(L, -1) == LUA_TNUMBER) out.emplace_back(key, double(lua_tonumber(L, -1)));
    else if (lua_type(L, -1) == LUA_TBOOLEAN) out.emplace_back(key, bool(lua_toboolean(L, -1)));
    else if (lua_type(L, -1) == LUA_TSTRING) out.emplace_back(key, std::string(lua_tostring(L, -1)));
    else throw error(bad + " (" + key + " is a " + luaL_typename(L, -1) + ")");
    lua_pop(L, 3);
  }
  return out;
}


session::forecast_facts session::forecast_facts_of(const run_state& st, const forecast& f, const gpu_spec& gpu) {
  if (!run_state_has(p_->L(), st, "fields")) throw error("forecast_facts_of: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, "neusight.report");  // stack: R
  const int R = lua_gettop(L);
  forecast_facts out;
  const std::string& where = function_get(*p_, R, "neusight.report", "memory_warnings");
  run_state_push(L, st, "fields");
  ns_call(L, 1, 1, "in " + where + " memory_warnings");  // stack: R warnings
  if (!lua_istable(L, -1)) throw error(where + ": memory_warnings must return an array of strings");
  for (lua_Integer i = 1, n = lua_Integer(lua_rawlen(L, -1)); i <= n; ++i) {
    lua_rawgeti(L, -1, i);
    if (lua_type(L, -1) != LUA_TSTRING) throw error(where + ": memory_warnings must return an array of strings");
    out.memory_warnings.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);  // stack: R
  function_get(*p_, R, "neusight.report", "figure_inputs");
  run_state_push(L, st, "fields");
  forecast_push(L, f, false);
  report_gpu_push(L, gpu);
  ns_call(L, 3, 1, "in " + where + " figure_inputs");  // stack: R inputs
  out.inputs = figure_inputs_read(L, -1, where + ": figure_inputs must return an array of { key, value } (a number, "
                                            "boolean or string)");
  return out;
}

run_state session::compare_begin(const std::vector<compare_input>& inputs, const std::string& source) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, "neusight.compare", "new");
  lua_createtable(L, int(inputs.size()), 0);  // stack: new inputs
  for (size_t i = 0; i < inputs.size(); ++i) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, inputs[i].key.c_str()), lua_setfield(L, -2, "key");
    lua_pushstring(L, inputs[i].column.c_str()), lua_setfield(L, -2, "column");
    lua_pushboolean(L, inputs[i].integer), lua_setfield(L, -2, "integer");
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_pushlstring(L, source.data(), source.size());
  ns_call(L, 2, 1, "in " + file + " new");  // stack: doc
  if (!lua_istable(L, -1)) throw error(file + " new must return a table");
  run_state cmp = run_state_new(L);
  run_state_set(L, cmp, "comparison");  // pops doc
  return cmp;
}

namespace {

// [-0, +2, e] neusight.compare and the comparison `cmp` (compare_begin's); returns the chunk name of the module's file
// (module_file)
const std::string& compare_push(session::impl& p, const run_state& cmp, const char* fn) {
  if (!run_state_has(p.L(), cmp, "comparison"))
    throw error(std::string("compare_") + fn + ": no comparison (compare_begin)");
  require_push(p, "neusight.compare");  // stack: C
  run_state_push(p.L(), cmp, "comparison");  // stack: C doc
  return p.module_file("neusight.compare").display;
}

// [-1, +0, e] the row add / add_error returned (nil and why when it cannot be made) joins the comparison
void compare_result(lua_State* L, const std::string& where) {
  if (lua_isnil(L, -2)) throw error(lua_isstring(L, -1) ? lua_tostring(L, -1) : where + " returned nil");
}

}  // namespace

void session::compare_add(const run_state& cmp, const run_state& st, const gpu_spec& gpu, double latency_ms, const figures& figs,
                          const std::vector<std::string>& warnings) {
  if (!run_state_has(p_->L(), st, "fields")) throw error("compare_add: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  compare_push(*p_, cmp, "add");  // stack: C doc
  const std::string& file = function_get(*p_, -2, "neusight.compare", "add");
  lua_pushvalue(L, -2);
  run_state_push(L, st, "fields");
  report_gpu_push(L, gpu);
  lua_pushnumber(L, latency_ms);
  figures_push(L, figs);
  strings_push(L, warnings);  // stack: C doc add doc fields gpu latency figures warnings
  ns_call(L, 6, 2, "in " + file + " add");  // stack: C doc row why
  compare_result(L, file + " add");
}

void session::compare_add_error(const run_state& cmp, const std::vector<std::string>& given, const std::string& message,
                                const std::string& gpu_file) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  compare_push(*p_, cmp, "add_error");  // stack: C doc
  const std::string& file = function_get(*p_, -2, "neusight.compare", "add_error");
  lua_pushvalue(L, -2);
  strings_push(L, given);
  lua_pushlstring(L, message.data(), message.size());
  lua_pushlstring(L, gpu_file.data(), gpu_file.size());  // stack: C doc add_error doc given message gpu_file
  ns_call(L, 4, 2, "in " + file + " add_error");  // stack: C doc row why
  compare_result(L, file + " add_error");
}

std::vector<std::string> session::gpu_labels(const std::vector<std::string>& given,
                                             const std::vector<std::string>& names) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, "neusight.compare", "gpu_labels");
  strings_push(L, given);
  strings_push(L, names);  // stack: gpu_labels given names
  ns_call(L, 2, 1, "in " + file + " gpu_labels");  // stack: labels
  const std::string bad = file + " gpu_labels must return an array of strings, one for each GPU";
  if (!lua_istable(L, -1) || lua_rawlen(L, -1) != given.size()) throw error(bad);
  std::vector<std::string> out;
  for (lua_Integer i = 1, n = lua_Integer(given.size()); i <= n; ++i) {
    if (lua_rawgeti(L, -1, i) != LUA_TSTRING) throw error(bad);
    size_t len = 0;
    const char* text = lua_tolstring(L, -1, &len);
    out.emplace_back(text, len);
    lua_pop(L, 1);
  }
  return out;
}

std::string session::compare_repeated(const std::string& key, const std::vector<std::string>& given) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, "neusight.compare", "repeated");
  lua_pushlstring(L, key.data(), key.size());
  strings_push(L, given);  // stack: repeated key given
  ns_call(L, 2, 1, "in " + file + " repeated");  // stack: why
  if (lua_isnil(L, -1)) return {};
  if (lua_type(L, -1) != LUA_TSTRING)
    throw error(file + " repeated returned " + luaL_typename(L, -1) +
                ", expected a reason (string) or nil");
  size_t n = 0;
  const char* why = lua_tolstring(L, -1, &n);
  return std::string(why, n);
}

std::string session::compare_render(const run_state& cmp, const std::string& format) {
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  compare_push(*p_, cmp, "render");  // stack: C doc
  const bool html = format == "html";
  if (html) {  // the page holds what the JSON document does: a text JSON cannot hold (bad UTF-8) stops both alike
    function_get(*p_, -2, "neusight.compare", "json");
    lua_pushvalue(L, -2);
    ns_call(L, 1, 1, "in module neusight.compare json");  // stack: C doc json
    if (!lua_istable(L, -1)) throw error("module neusight.compare json must return a table");
    (void)json_text_of(L, -1);
    lua_pop(L, 1);  // stack: C doc
  }
  function_get(*p_, -2, "neusight.compare", html ? "page" : format.c_str());
  if (format == "table" || format == "csv") {
    // the rows as their JSON text reads back, as these layouts have always had them: a text that is not UTF-8 (a
    // script's error message, a path) shows U+FFFD where JSON cannot hold its bytes
    using ojson = nlohmann::ordered_json;
    const std::string text = json_from_lua(L, -2, "comparison").dump(-1, ' ', false, ojson::error_handler_t::replace);
    json_text_push(L, text, "comparison");
  } else {
    lua_pushvalue(L, -2);
  }
  const std::string fn = "module neusight.compare " + (html ? std::string("page") : format);
  ns_call(L, 1, 1, "in " + fn);  // stack: C doc out
  if (format == "json" || html) {
    if (!lua_istable(L, -1)) throw error(fn + " must return a table");
    if (!html) return json_text_of(L, -1);
    require_push(*p_, "neusight.html");  // stack: C doc page H
    function_get(*p_, -1, "neusight.html", "render_compare");
    lua_pushvalue(L, -3);  // stack: C doc page H render_compare page
    ns_call(L, 1, 1, "in module neusight.html render_compare");  // stack: C doc page H text
  }
  const std::string where = html ? "module neusight.html render_compare" : fn;
  if (!lua_isstring(L, -1)) throw error(where + " must return a string");
  size_t n = 0;
  const char* s = lua_tolstring(L, -1, &n);
  return std::string(s, n);
}

std::string session::forecast_summary(const run_state& st) {
  if (!run_state_has(p_->L(), st, "fields")) throw error("forecast_summary: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(*p_, "neusight.report", "summary");
  run_state_push(L, st, "fields");
  ns_call(L, 1, 1, "in " + file + " summary");  // stack: line
  if (lua_type(L, -1) != LUA_TSTRING) throw error(file + " summary must return a string");
  return lua_tostring(L, -1);
}


std::optional<double> session::forecast_model_params(const run_state& st, double params) {
  if (!run_state_has(p_->L(), st, "fields")) throw error("forecast_model_params: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, "neusight.report");  // stack: R
  // absent from an older --scripts report.lua: no count, as before it was there
  if (!function_find(*p_, -1, "neusight.report", "model_params")) return std::nullopt;
  const std::string& file = p_->module_file("neusight.report").display;
  run_state_push(L, st, "fields");
  lua_pushnumber(L, params);
  ns_call(L, 2, 1, "in " + file + " model_params");  // stack: R count|nil
  if (lua_isnil(L, -1)) return std::nullopt;
  const double n = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
  if (!(n >= 1 && n < calibration_model_params_max))  // NaN and inf too: a calibration would record them
    throw error(file + " model_params must return a number of parameters (1 to 2^48) or nil");
  return std::round(n);  // whole, as a calibration records it
}

std::vector<std::string> session::forecast_render(const run_state& st, const forecast& f, const gpu_spec& gpu, const std::string& predictor,
                                                  const std::vector<std::string>& warnings, const figures& figs,
                                                  const std::vector<std::string>& formats) {
  if (!run_state_has(p_->L(), st, "fields")) throw error("forecast_render: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(*p_, "neusight.report");  // stack: R
  const int R = lua_gettop(L);
  const std::string& where = function_get(*p_, R, "neusight.report", "result");
  run_state_push(L, st, "fields");
  forecast_push(L, f);
  lua_createtable(L, 0, 6);  // stack: R result fields fc extras
  report_gpu_push(L, gpu);
  lua_setfield(L, -2, "gpu");
  lua_pushstring(L, predictor.c_str()), lua_setfield(L, -2, "predictor");
  strings_push(L, warnings), lua_setfield(L, -2, "warnings");
  strings_push(L, figs.lines), lua_setfield(L, -2, "figure_lines");
  figures_push(L, figs);  // stack: … extras figures
  lua_setfield(L, -2, "figures");
  ns_call(L, 3, 1, "in " + where + " result");  // stack: R r
  if (!lua_istable(L, -1)) throw error(where + ": result returned " + luaL_typename(L, -1) + ", expected a table");
  const int r = lua_gettop(L);
  std::vector<std::string> out;
  for (const std::string& format : formats) {  // each from the one result (its workload hook ran once)
    const std::string fn = format == "json" ? "format_json" : format == "csv" ? "format_csv" : "format_table";
    function_get(*p_, R, "neusight.report", fn.c_str());
    lua_pushvalue(L, r);
    ns_call(L, 1, 1, "in " + where + " " + fn);  // stack: R r text
    if (format == "json") {
      if (!lua_istable(L, -1)) throw error(where + ": format_json must return a table");
      out.push_back(json_text_of(L, -1));
    } else {
      if (!lua_isstring(L, -1)) throw error(where + ": " + fn + " must return a string");
      size_t n = 0;
      const char* text = lua_tolstring(L, -1, &n);
      out.emplace_back(text, n);
    }
    lua_pop(L, 1);  // stack: R r
  }
  return out;
}


nlohmann::ordered_json session::report_fields_json(const run_state& st, const std::string& module,
                                                   const std::string& fn) {
  if (!run_state_has(p_->L(), st, "fields")) throw error("report_fields_json: no workload or graph to report");
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string where = "module " + module + " " + fn;
  function_push(*p_, module.c_str(), fn.c_str());
  run_state_push(L, st, "fields");  // stack: fn fields
  ns_call(L, 1, 1, "in " + where);  // stack: doc
  if (!lua_istable(L, -1)) throw error(where + " must return a table (got " + luaL_typename(L, -1) + ")");
  return json_from_lua(L, -1, where);
}

namespace {
// session::render's body: `push` pushes the report (`where` names the function for messages).
std::string render_with(session::impl& p, const std::string& module, const std::string& fn, const run_state* st,
                        const std::function<void(lua_State*, const std::string&)>& push) {
  lua_State* L = p.L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string where = "module " + module + " " + fn;
  function_push(p, module.c_str(), fn.c_str());
  push(L, where);  // stack: fn report
  if (st) run_state_push(L, *st, "fields");  // stack: fn report fields (nil when the state has none)
  else lua_pushnil(L);
  ns_call(L, 2, 1, "in " + where);  // stack: text|doc
  if (lua_istable(L, -1)) return json_text_of(L, -1);
  if (!lua_isstring(L, -1)) throw error(where + " must return a string or a table");
  size_t n = 0;
  const char* s = lua_tolstring(L, -1, &n);
  return std::string(s, n);
}
}  // namespace

std::string session::render(const std::string& module, const std::string& fn, const std::string& json,
                            const run_state* st) {
  return render_with(*p_, module, fn, st, [&](lua_State* L, const std::string& where) { json_text_push(L, json, where); });
}

std::string session::render(const std::string& module, const std::string& fn, const nlohmann::ordered_json& doc,
                            const run_state* st) {
  return render_with(*p_, module, fn, st, [&](lua_State* L, const std::string&) { json_push_ordered(L, doc); });
}


}  // namespace ns
