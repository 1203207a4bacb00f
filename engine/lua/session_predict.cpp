// engine/lua/session_predict.cpp — predictors in the session's Lua state: ns.predict over the built-ins, Lua predictors.
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "lua/session_impl.h"

namespace ns {

namespace {

void key_num(std::string& out, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a;", v);  // exact
  out += buf;
}

// Everything kernel_push shows a predictor, unambiguously: two kernels with one key are the same input.
std::string kernel_key(const kernel& k) {
  std::string out;
  for (const std::string* s : {&k.name, &k.op, &k.dtype, &k.kv_dtype, &k.tile_kernel, &k.tile_alt_kernel, &k.act_quant})
    out += std::to_string(s->size()) + ':' + *s;
  out += std::string(kernel_kind_name(k.kind)) + ';';
  for (int64_t v : {k.b, k.m, k.n, k.k, k.rows, k.hidden, k.tile_m, k.tile_k, k.tile_elems, k.tile_split, k.tile_piece,
                    k.tile_piece_elems, k.tile_alt_m, k.tile_alt_k, k.tile_alt_split})
    out += std::to_string(v) + ',';
  for (double v : {k.flops, k.bytes, k.weight_bytes, k.tile_blocks, k.tile_flops, k.tile_bytes}) key_num(out, v);
  if (k.seconds) key_num(out, *k.seconds);
  return out;
}

// "#3 'Linear' (gemm)" for messages about one kernel of a predict() call.
std::string kernel_label(size_t i, const kernel& k) {
  return "#" + std::to_string(i + 1) + " '" + k.name + "' (" + std::string(kernel_kind_name(k.kind)) + ")";
}

std::string names_joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A Lua predictor: the checked table E.load_predictor returned, kept in the registry, called through ns_call.
class lua_predictor final : public predictor {
 public:
  lua_predictor(session::impl& p, std::string name, std::string where, int ref)
      : p_(p), name_(std::move(name)), where_(std::move(where)), ref_(ref) {}
  std::string name() const override { return name_; }
  std::vector<std::string> warnings() const override { return warnings_; }
  void memo_enable(bool on) override {
    p_.predict_memo = on;
    for (auto& [_, b] : p_.builtin_predictors) b->memo_enable(on);
  }

  // The distinct kernels without fixed seconds go to predict() once each, in order of first appearance (a pass-through
  // to ns.predict(…, "neusight") thus sees the batch the C++ predictor would, bit for bit); fixed ones keep theirs.
  std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const override {
    std::vector<double> out(kernels.size(), 0.0);
    std::vector<size_t> slot(kernels.size(), SIZE_MAX);
    std::vector<const kernel*> unique;
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const kernel& k = kernels[i].k;
      if (k.seconds) {
        out[i] = *k.seconds;
        continue;
      }
      auto [it, fresh] = index.try_emplace(kernel_key(k), unique.size());
      if (fresh) unique.push_back(&k);
      slot[i] = it->second;
    }
    p_.predict_warnings.clear();
    p_.predict_band_warnings.clear();
    warnings_.clear();
    if (unique.empty()) return out;
    lua_State* L = p_.L();
    stack_guard guard(L);
    const stack_restore restore(L);  // also on error
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref_);
    raw_getfield(L, -1, "predict");  // stack: P predict
    lua_createtable(L, int(unique.size()), 0);
    for (size_t i = 0; i < unique.size(); ++i) {
      kernel_push(L, *unique[i]);
      lua_rawseti(L, -2, lua_Integer(i + 1));
    }
    p_.push_gpu(gpu);  // stack: P predict kernels gpu
    ns_call(L, 2, 1,
            "while predicting " + std::to_string(unique.size()) + " kernels on " + gpu.name + " with predictor '" +
                name_ + "' (" + where_ + ")");
    // stack: P seconds
    const std::string head = where_ + ": predict() returned ";
    if (!lua_istable(L, -1))
      throw error(head + luaL_typename(L, -1) + ", expected an array of " + std::to_string(unique.size()) +
                  " numbers (seconds per kernel, in order)");
    const size_t n = lua_rawlen(L, -1);
    if (n != unique.size())
      throw error(head + std::to_string(n) + " values for " + std::to_string(unique.size()) +
                  " kernels (one number of seconds per kernel, in order)");
    std::vector<double> seconds(n);
    for (size_t i = 0; i < n; ++i) {
      const int t = lua_rawgeti(L, -1, lua_Integer(i + 1));
      if (t != LUA_TNUMBER)
        throw error(head + "a " + luaL_typename(L, -1) + " for kernel " + kernel_label(i, *unique[i]) +
                    ", expected a number of seconds");
      const double v = lua_tonumber(L, -1);
      if (!std::isfinite(v) || v < 0) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%g", v);
        const std::string shown = std::isnan(v) ? "nan" : std::isinf(v) ? (v > 0 ? "inf" : "-inf") : buf;
        throw error(head + shown + " for kernel " + kernel_label(i, *unique[i]) + ": seconds must be finite and >= 0");
      }
      seconds[i] = v;
      lua_pop(L, 1);
    }
    for (size_t i = 0; i < kernels.size(); ++i)
      if (slot[i] != SIZE_MAX) out[i] = seconds[slot[i]];
    warnings_ = p_.predict_warnings;
    for (auto& w : roofline_warnings(unique, seconds, gpu)) warnings_.push_back(std::move(w));
    return out;
  }

 private:
  // neusight.figures predictor_warnings: what the answers say against each kernel's roofline floor (far above it:
  // milliseconds for seconds; below it: faster than the GPU's peaks), one line each, for this predict() call (an older
  // --scripts figures.lua without it: none).
  std::vector<std::string> roofline_warnings(const std::vector<const kernel*>& unique, const std::vector<double>& seconds,
                                             const gpu_spec& gpu) const {
    if (!p_.owner->has_function("neusight.figures", "predictor_warnings")) return {};
    lua_State* L = p_.L();
    stack_guard guard(L);
    const stack_restore restore(L);  // also on error
    const std::string& file = function_push(p_, "neusight.figures", "predictor_warnings");  // stack: fn
    lua_createtable(L, 0, 3);
    set_string(L, "where", where_);
    p_.push_gpu(gpu);
    lua_setfield(L, -2, "gpu");
    lua_createtable(L, int(unique.size()), 0);  // stack: fn t kernels
    for (size_t i = 0; i < unique.size(); ++i) {
      lua_createtable(L, 0, 3);
      set_string(L, "label", "'" + unique[i]->name + "' (" + std::string(kernel_kind_name(unique[i]->kind)) + ")");
      set_number(L, "seconds", seconds[i]);
      set_number(L, "floor_s", roofline_floor_seconds(*unique[i], gpu));
      lua_rawseti(L, -2, lua_Integer(i + 1));
    }
    lua_setfield(L, -2, "kernels");  // stack: fn t
    ns_call(L, 1, 1, "in " + file + " predictor_warnings");  // stack: warnings
    return strings_read(L, -1, file + ": predictor_warnings must return an array of strings");
  }

  session::impl& p_;
  std::string name_, where_;  // where_: "<chunk>:<line of predict>"
  int ref_;
  mutable std::vector<std::string> warnings_;
};

bool lua_name_ok(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace

// require("neusight.efficiency"): family name → the fraction of the roofline it reaches, each in (0, 1]; its `errors`
// (the fallback's error quantiles) are the band's, read in Lua.
static std::map<std::string, double> efficiency_read(session::impl& p) {
  lua_State* L = p.L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  require_push(p, "neusight.efficiency");  // stack: table
  const char* where = "neusight.efficiency (scripts/neusight/efficiency.lua or its --scripts override)";
  if (!lua_istable(L, -1)) throw error(std::string(where) + ": must return a table of family = efficiency");
  std::map<std::string, double> out;
  std::vector<std::string> known = family_name_list();  // and "memory": copies, which no family prices
  known.push_back("memory");
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {  // stack: table key value
    if (lua_type(L, -2) != LUA_TSTRING) throw error(std::string(where) + ": keys must be family names (strings)");
    const std::string key = lua_tostring(L, -2);
    if (key == "errors") {  // the fallback's error quantiles: read and checked by scripts/neusight/uncertainty.lua
      if (!lua_istable(L, -1))
        throw error(std::string(where) + ": field 'errors' must be a table (the fallback's error quantiles by family)");
      lua_pop(L, 1);
      continue;
    }
    // a misspelt family would leave the real one at the bare roofline (fallback_efficiency's 1 for a missing one)
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw error(std::string(where) + ": unknown family '" + key + "'" + text_did_you_mean(key, known));
    const double v = lua_tonumber(L, -1);
    if (lua_type(L, -1) != LUA_TNUMBER || !(v > 0 && v <= 1))
      throw error(std::string(where) + ": field '" + key + "' must be a number in (0, 1] (the fraction of the "
                  "roofline the family reaches)");
    out[key] = v;
    lua_pop(L, 1);
  }
  return out;
}

// require("neusight.launch").params(gpu).floor_s: the least seconds a kernel the neusight predictor prices by the
// roofline takes on this GPU (a family without weights for its vendor); read once per GPU and session.
static double launch_floor_read(session::impl& p, const gpu_spec& gpu) {
  const std::string key = gpu_spec_key(gpu);
  if (const auto it = p.launch_floor.find(key); it != p.launch_floor.end()) return it->second;
  lua_State* L = p.L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(p, "neusight.launch", "params");  // stack: params
  p.push_gpu(gpu);
  ns_call(L, 1, 1, "in " + file + " params");  // stack: params(gpu)
  if (!lua_istable(L, -1))
    throw error(file + ": params(gpu) must return a table (got " + luaL_typename(L, -1) + ")");
  lua_getfield(L, -1, "floor_s");  // stack: params(gpu) floor_s
  const double v = lua_tonumber(L, -1);
  if (lua_type(L, -1) != LUA_TNUMBER || !(v >= 0) || !std::isfinite(v))
    throw error(file + ": params(" + gpu.name + ").floor_s must be a number >= 0 (seconds: the least a kernel "
                "takes; got " + (lua_type(L, -1) == LUA_TNUMBER ? text_limit(v) : luaL_typename(L, -1)) + ")");
  return p.launch_floor[key] = v;
}

// neusight.kernels train_convention(): { elementwise|softmax|layernorm = { flops, bytes_min, bytes_max } } per element.
static train_convention train_convention_read(session::impl& p) {
  lua_State* L = p.L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  const std::string& file = function_push(p, "neusight.kernels", "train_convention");
  ns_call(L, 0, 1, "in " + file + " train_convention");
  const std::string where = file + ": train_convention()";
  if (!lua_istable(L, -1))
    throw error(where + " must return a table of family = { flops, bytes_min, bytes_max } (got " +
                luaL_typename(L, -1) + ")");
  const std::vector<family> vector_families = {family::elementwise, family::softmax, family::layernorm};
  std::vector<std::string> names;
  for (family f : vector_families) names.emplace_back(family_name(f));
  lua_pushnil(L);
  while (lua_next(L, -2) != 0) {  // a misspelt family would leave the real one missing: named, not skipped
    const std::string key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2);
    if (std::find(names.begin(), names.end(), key) == names.end())
      throw error(where + ": unknown family '" + key + "'" + text_did_you_mean(key, names) +
                  " (the vector families: elementwise, softmax, layernorm)");
    lua_pop(L, 1);
  }
  train_convention c;
  for (family f : vector_families) {
    const std::string name(family_name(f));
    lua_getfield(L, -1, name.c_str());
    if (!lua_istable(L, -1)) throw error(where + ": family '" + name + "' must be a table { flops, bytes_min, bytes_max }");
    const table_reader r(L, -1, where + " " + name);
    const vector_convention v{r.number("flops"), r.number("bytes_min"), r.number("bytes_max")};
    if (!(v.flops > 0) || !(v.bytes_min > 0) || !(v.bytes_max >= v.bytes_min))
      throw error(where + ": family '" + name + "' needs flops > 0 and 0 < bytes_min <= bytes_max (per element), got " +
                  text_limit(v.flops) + ", " + text_limit(v.bytes_min) + ", " + text_limit(v.bytes_max));
    c.by_family[f] = v;
    lua_pop(L, 1);
  }
  return c;
}

const train_convention& session::training_convention() {
  if (!p_->convention) p_->convention = train_convention_read(*p_);
  return *p_->convention;
}

std::function<void(std::vector<kernel*>&, const gpu_spec&)> session::gemm_pieces() {
  return [this](std::vector<kernel*>& ks, const gpu_spec& gpu) {
    kernel_costs(ks);
    tiles_select(ks, gpu);
  };
}

std::unique_ptr<predictor> session::impl::builtin_make(const std::string& name, const fs::path& root) {
  auto pred = ns::predictor_make(name, root);
  if (name == "neusight") {  // the roofline ones have no use for it
    if (root == weights_root) weights_read = true;
    if (!efficiency) efficiency = efficiency_read(*this);
    if (!convention) convention = train_convention_read(*this);
    pred->train_convention_set(*convention);
    pred->roofline_efficiency_set(*efficiency);
    pred->roofline_floor_set([this](const gpu_spec& gpu) { return launch_floor_read(*this, gpu); });
    pred->gemm_pieces_set(owner->gemm_pieces());
  }
  return pred;
}

predictor& session::impl::builtin_predictor(const std::string& name) {
  if (auto it = builtin_predictors.find(name); it != builtin_predictors.end()) return *it->second;
  const auto names = predictor_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw error("unknown built-in predictor '" + name + "'" + text_did_you_mean(name, names) + "; built-in: " +
                names_joined(names) + " (a Lua predictor is a module: require(\"neusight.predictors.<name>\").predict)");
  auto pred = builtin_make(name, weights_root);
  pred->memo_enable(predict_memo);
  return *builtin_predictors.emplace(name, std::move(pred)).first->second;
}

int l_predict(lua_State* L) {
  return ns_catch(L, [&] {
    auto& p = *static_cast<session::impl*>(lua_touserdata(L, lua_upvalueindex(1)));
    // stack: kernels gpu name (types checked by prelude.lua ns.predict)
    const std::string name = lua_tostring(L, 3);
    predictor& pred = p.builtin_predictor(name);
    const gpu_spec gpu = lua_type(L, 2) == LUA_TSTRING ? p.gpu_resolve(lua_tostring(L, 2))
                                                       : gpu_read(L, 2, "argument #2 (gpu)");
    // identical kernels are priced once by tiles_select and the predictor themselves (the neusight MLP by row)
    std::vector<kernel_instance> ks;
    for (auto& k : kernels_read(L, 1, "argument #1 (kernels)", true)) ks.push_back({0, phase::forward, std::move(k)});
    // kernels without a tile (built in Lua) get the library's, as a forecast's do; a given tile is kept
    std::vector<kernel*> untiled;
    for (auto& ki : ks)
      if (!ki.k.tile_m && !ki.k.tile_k && !ki.k.tile_elems && !(ki.k.tile_blocks > 0)) untiled.push_back(&ki.k);
    if (!untiled.empty()) p.owner->tiles_select(untiled, gpu);
    const std::vector<double> seconds = pred.predict(ks, gpu);
    std::vector<std::string> warnings = pred.warnings();
    // the training-range and out-of-distribution warnings a forecast priced by this predictor directly carries
    // (neusight.uncertainty warnings: the band's rules, without a band), for these kernels' families: a Lua predictor
    // wrapping it keeps them.
    // The rule reads the GPU and which families have time (and which the roofline priced, and their longest range
    // input: neusight.uncertainty range_warning), not how much: asked once
    // per Lua predictor call and such set (predict_band_warnings), however often the predictor calls ns.predict.
    if (const uncertainty_source src = pred.uncertainty(gpu.vendor); !src.table.empty() || !src.trained_gpus.empty()) {
      graph one;
      one.nodes.emplace_back();  // each kernel once (count 1)
      const forecast fc = forecast_make(std::move(one), ks, seconds);
      figure_inputs in;
      const auto families = fc.seconds_by_family();
      family_inputs_add(in, families, pred, gpu.vendor);
      std::string key = name + "|" + src.table.string() + "|" + gpu_spec_key(gpu);
      for (const auto& f : families)
        if (f.seconds > 0)
          key += "|" + f.family + (f.family != "other" && !pred.models_family(gpu.vendor, f.family) ? "*" : "") +
                 (f.range_most > 0 ? ":" + std::to_string(f.range_most) : "");  // the range warning reads it too
      auto it = p.predict_band_warnings.find(key);
      if (it == p.predict_band_warnings.end())
        it = p.predict_band_warnings
                 .emplace(key, p.owner->figures_call("neusight.uncertainty", "warnings", in, gpu, src).warnings)
                 .first;
      warnings.insert(warnings.end(), it->second.begin(), it->second.end());
    }
    for (const auto& w : warnings)
      if (std::find(p.predict_warnings.begin(), p.predict_warnings.end(), w) == p.predict_warnings.end())
        p.predict_warnings.push_back(w);
    lua_createtable(L, int(seconds.size()), 0);
    for (size_t i = 0; i < seconds.size(); ++i) {
      lua_pushnumber(L, seconds[i]);
      lua_rawseti(L, -2, lua_Integer(i + 1));
    }
    return 1;
  });
}

int l_trained_gpus(lua_State* L) {
  return ns_catch(L, [&] {
    auto& p = *static_cast<session::impl*>(lua_touserdata(L, lua_upvalueindex(1)));
    // stack: name vendor (types checked by prelude.lua ns.trained_gpus)
    const predictor& pred = p.builtin_predictor(lua_tostring(L, 1));
    p.trained_gpus_push(pred.uncertainty(lua_tostring(L, 2)).trained_gpus);
    return 1;
  });
}

// A predictor whose warnings() end with the session's weights_unused_note (a --weights root no predictor read).
class weights_noted_predictor final : public predictor {
 public:
  weights_noted_predictor(const session& s, std::unique_ptr<predictor> inner) : s_(s), inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  std::vector<double> predict(const std::vector<kernel_instance>& kernels, const gpu_spec& gpu) const override {
    return inner_->predict(kernels, gpu);
  }
  std::vector<std::string> warnings() const override {
    std::vector<std::string> out = inner_->warnings();
    if (std::string note = s_.weights_unused_note(); !note.empty()) out.push_back(std::move(note));
    return out;
  }
  std::vector<bool> tiles_switched() const override { return inner_->tiles_switched(); }
  void memo_enable(bool on) override { inner_->memo_enable(on); }
  uncertainty_source uncertainty(const std::string& vendor) const override { return inner_->uncertainty(vendor); }
  bool models_family(const std::string& vendor, const std::string& family) const override {
    return inner_->models_family(vendor, family);
  }
  void roofline_efficiency_set(std::map<std::string, double> by_family) override {
    inner_->roofline_efficiency_set(std::move(by_family));
  }
  void roofline_floor_set(std::function<double(const gpu_spec&)> floor_s) override {
    inner_->roofline_floor_set(std::move(floor_s));
  }
  void train_convention_set(const train_convention& conv) override { inner_->train_convention_set(conv); }
  void gemm_pieces_set(std::function<void(std::vector<kernel*>&, const gpu_spec&)> complete) override {
    inner_->gemm_pieces_set(std::move(complete));
  }

 private:
  const session& s_;
  std::unique_ptr<predictor> inner_;
};

std::string session::weights_unused_note() const {
  if (!p_->weights_given || p_->weights_read) return {};
  return "--weights " + display_of(p_->weights_root.string()) +
         " has no effect: no predictor of this run read weights (only the neusight predictor does; roofline and "
         "roofline-reference never, a Lua predictor only through ns.predict(…, \"neusight\")); drop it";
}

std::unique_ptr<predictor> session::predictor_make(const std::string& name, const fs::path& weights_root) {
  auto made = predictor_make_inner(name, weights_root);
  if (!p_->weights_given) return made;
  return std::make_unique<weights_noted_predictor>(*this, std::move(made));
}

std::unique_ptr<predictor> session::predictor_make_inner(const std::string& name, const fs::path& weights_root) {
  if (weights_root != p_->weights_root) {
    p_->builtin_predictors.clear();  // ns.predict's "neusight" reads these weights
    p_->weights_read = false;
  }
  p_->weights_root = weights_root;
  std::error_code ec;
  p_->weights_given = !fs::equivalent(weights_root, p_->opts.data_root / "weights", ec);
  const auto builtins = predictor_names();
  if (std::find(builtins.begin(), builtins.end(), name) != builtins.end()) return p_->builtin_make(name, weights_root);
  std::string path, chunk;
  const bool is_file = name.find('/') != std::string::npos ||
                       (name.size() > 4 && name.compare(name.size() - 4, 4, ".lua") == 0);
  if (is_file) {
    std::error_code ec;
    if (!fs::is_regular_file(name, ec)) throw error(text_no_such_file("predictor " + name));
    path = name;
    chunk = display_of(name);
  } else {
    for (const auto& d : p_->script_dirs) {
      std::error_code ec;
      const fs::path file = d.path / "neusight" / "predictors" / (name + ".lua");
      if (lua_name_ok(name) && fs::is_regular_file(file, ec)) {
        path = file.string(), chunk = d.display + "/neusight/predictors/" + name + ".lua";
        break;
      }
    }
    if (path.empty()) {  // the Lua predictors on the search path, for the message
      std::vector<std::string> found;
      std::string dirs;
      for (const auto& d : p_->script_dirs) {
        dirs += (dirs.empty() ? "" : ", ") + d.display;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(d.path / "neusight" / "predictors", ec)) {
          std::error_code e1;
          if (e.is_regular_file(e1) && e.path().extension() == ".lua" && lua_name_ok(e.path().stem().string()))
            found.push_back(e.path().stem().string());
        }
      }
      const std::set<std::string> lua_names(found.begin(), found.end());
      std::vector<std::string> all = builtins;
      all.insert(all.end(), lua_names.begin(), lua_names.end());
      throw error("unknown predictor '" + name + "'" + text_did_you_mean(name, all) +
                  ": not a built-in and no neusight/predictors/" + name + ".lua on the script search path (" + dirs +
                  "); built-in: " + names_joined(builtins) + "; Lua: " +
                  (lua_names.empty() ? std::string("none found")
                                     : names_joined(std::vector<std::string>(lua_names.begin(), lua_names.end()))) +
                  " (or give a .lua file)");
    }
  }
  lua_State* L = p_->L();
  stack_guard guard(L);
  const stack_restore restore(L);  // also on error
  p_->push_engine_field("load_predictor");
  lua_pushstring(L, path.c_str());
  lua_pushstring(L, chunk.c_str());
  lua_pushstring(L, is_file ? name.c_str() : ("neusight.predictors." + name).c_str());
  ns_call(L, 3, 1, "while loading predictor '" + name + "' (" + chunk + ")");  // stack: P (checked copy)
  raw_getfield(L, -1, "predict");
  lua_Debug ar;
  lua_getinfo(L, ">S", &ar);  // pops predict
  const std::string where = ar.linedefined > 0 ? chunk + ":" + std::to_string(ar.linedefined) : chunk;
  const int ref = luaL_ref(L, LUA_REGISTRYINDEX);  // pops P
  p_->predictor_refs.push_back(ref);
  return std::make_unique<lua_predictor>(*p_, name, where, ref);
}

}  // namespace ns
