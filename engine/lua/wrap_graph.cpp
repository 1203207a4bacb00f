// engine/lua/wrap_graph.cpp — nodes and kernels crossing the Lua boundary, with strict field checks.
#include <cmath>

#include "core/time_limits.h"
#include "lua/wrap.h"

namespace ns {

void plain_table_check(lua_State* L, int idx, const std::string& what) {
  if (lua_getmetatable(L, idx)) {  // [-0, +(0|1), -]
    lua_pop(L, 1);
    throw error(what + ": expected a plain table (it has a metatable)");
  }
}

table_reader::table_reader(lua_State* L, int idx, std::string what)
    : L_(L), idx_(lua_absindex(L, idx)), what_(std::move(what)) {
  if (!lua_istable(L, idx_)) throw error(what_ + ": expected a table (got " + luaL_typename(L, idx_) + ")");
  plain_table_check(L, idx_, what_);
}

void table_reader::fail(const char* key, const char* expected) const {
  std::string got = luaL_typename(L_, -1);
  lua_pop(L_, 1);
  throw error(what_ + ": field '" + key + "' must be " + expected + " (got " + got + ")");
}

bool table_reader::has(const char* key) const {
  const bool present = raw_getfield(L_, idx_, key) != LUA_TNIL;
  lua_pop(L_, 1);
  return present;
}

std::string table_reader::str(const char* key) const {
  if (raw_getfield(L_, idx_, key) != LUA_TSTRING) fail(key, "a string");
  std::string s = lua_tostring(L_, -1);
  lua_pop(L_, 1);
  return s;
}
std::string table_reader::str_or(const char* key, const std::string& fallback) const {
  return has(key) ? str(key) : fallback;
}

double table_reader::number(const char* key) const {
  if (raw_getfield(L_, idx_, key) != LUA_TNUMBER) fail(key, "a number");
  const double v = lua_tonumber(L_, -1);
  if (!std::isfinite(v)) fail(key, "a finite number");
  lua_pop(L_, 1);
  return v;
}
double table_reader::number_or(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }

int64_t table_reader::integer(const char* key) const {
  if (raw_getfield(L_, idx_, key) != LUA_TNUMBER) fail(key, "an integer");
  int ok = 0;
  const lua_Integer v = lua_tointegerx(L_, -1, &ok);
  if (!ok) fail(key, "an integer");
  lua_pop(L_, 1);
  return int64_t(v);
}
int64_t table_reader::integer_or(const char* key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

bool table_reader::boolean_or(const char* key, bool fallback) const {
  const int type = raw_getfield(L_, idx_, key);
  if (type == LUA_TNIL) {
    lua_pop(L_, 1);
    return fallback;
  }
  if (type != LUA_TBOOLEAN) fail(key, "a boolean");
  const bool v = lua_toboolean(L_, -1) != 0;
  lua_pop(L_, 1);
  return v;
}

namespace {
// At most 2^48 elements in one tensor (512 TB in bf16, more than any cluster holds): sizes, FLOPs and bytes computed
// from the dimensions then stay far from the 2^63 where Lua integers wrap (a dimension of 2^62 used to forecast 0).
constexpr int64_t max_shape_elements = int64_t(1) << 48;
const char* const shape_expected = "a shape (array of non-negative integers)";
const char* const shape_too_big = "a shape of at most 2^48 elements";

// Whether the plain table at `idx` has no key outside 1..n: { x = {…} } as a list of shapes used to read as an
// empty list, { 4, 8, n = 2 } as the shape { 4, 8 } (found by tests/fuzz/mutate.py). [-0, +0, -]
bool array_only(lua_State* L, int idx, lua_Integer n) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {  // stack: key value
    lua_pop(L, 1);
    // lua_isinteger only: lua_tointeger would convert a string key, and a number key must not be converted in place
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n) {
      lua_pop(L, 1);
      return false;
    }
  }
  return true;
}

// Reads the array of integers on top of the stack (a plain table): nullptr, or what it must be instead. [-0, +0, -]
const char* shape_from_top(lua_State* L, shape& out) {
  if (!lua_istable(L, -1)) return shape_expected;
  if (lua_getmetatable(L, -1)) {
    lua_pop(L, 1);
    return shape_expected;
  }
  const lua_Integer n = lua_Integer(lua_rawlen(L, -1));
  if (!array_only(L, -1, n)) return shape_expected;
  out.clear();
  int64_t elements = 1;
  bool too_big = false;
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, -1, i);
    int ok = 0;
    // a number: lua_tointegerx would take the string "128" too
    const lua_Integer d = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &ok) : 0;
    lua_pop(L, 1);
    if (!ok || d < 0) return shape_expected;
    if (d > max_shape_elements || (d > 0 && elements > max_shape_elements / d)) too_big = true;
    else elements *= d;
    out.push_back(int64_t(d));
  }
  return too_big ? shape_too_big : nullptr;
}
}  // namespace

shape table_reader::shape_at(const char* key) const {
  raw_getfield(L_, idx_, key);
  shape s;
  if (const char* expected = shape_from_top(L_, s)) fail(key, expected);
  lua_pop(L_, 1);
  return s;
}

std::vector<shape> table_reader::shapes_at(const char* key) const {
  if (raw_getfield(L_, idx_, key) != LUA_TTABLE) fail(key, "an array of shapes");
  if (lua_getmetatable(L_, -1)) {
    lua_pop(L_, 2);
    throw error(what_ + ": field '" + key + "' must be a plain array of shapes (it has a metatable)");
  }
  std::vector<shape> out;
  const lua_Integer n = lua_Integer(lua_rawlen(L_, -1));
  if (!array_only(L_, -1, n)) {
    lua_pop(L_, 1);
    throw error(what_ + ": field '" + key + "' must be an array of shapes (it has a key outside 1.." + std::to_string(n) + ")");
  }
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L_, -1, i);  // stack: shapes shape_i
    shape s;
    if (const char* expected = shape_from_top(L_, s)) {
      lua_pop(L_, 2);
      throw error(what_ + ": field '" + key + "'[" + std::to_string(i) + "] must be " + expected);
    }
    lua_pop(L_, 1);
    out.push_back(std::move(s));
  }
  lua_pop(L_, 1);
  return out;
}

void table_reader::check_keys(const std::vector<std::string>& allowed) const {
  lua_pushnil(L_);
  while (lua_next(L_, idx_) != 0) {  // stack: key value
    std::string bad;
    if (lua_type(L_, -2) != LUA_TSTRING) {
      bad = "non-string key";  // never lua_tostring a number key during traversal (it converts in place)
    } else {
      const std::string k = lua_tostring(L_, -2);
      bool ok = false;
      for (const auto& a : allowed) ok = ok || a == k;
      if (!ok) bad = "unknown field '" + k + "'" + text_did_you_mean(k, allowed);
    }
    lua_pop(L_, 1);
    if (!bad.empty()) {
      lua_pop(L_, 1);
      throw error(what_ + ": " + bad);
    }
  }
}

namespace {
void shape_push(lua_State* L, const shape& s) {
  lua_createtable(L, int(s.size()), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    lua_pushinteger(L, lua_Integer(s[i]));
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
}
}  // namespace

void node_push(lua_State* L, const node& n, bool training) {
  lua_createtable(L, 0, 12);  // stack: node
  lua_pushstring(L, n.op.c_str());
  lua_setfield(L, -2, "op");
  lua_pushstring(L, n.name.c_str());
  lua_setfield(L, -2, "name");
  lua_pushstring(L, n.layer.c_str());
  lua_setfield(L, -2, "layer");
  lua_createtable(L, int(n.inputs.size()), 0);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    shape_push(L, n.inputs[i]);
    lua_rawseti(L, -2, lua_Integer(i + 1));
  }
  lua_setfield(L, -2, "inputs");
  shape_push(L, n.output);
  lua_setfield(L, -2, "output");
  lua_pushstring(L, n.dtype.c_str());
  lua_setfield(L, -2, "dtype");
  lua_pushinteger(L, dtype_bytes(n.dtype));
  lua_setfield(L, -2, "dtype_bytes");
  lua_pushinteger(L, lua_Integer(n.count));
  lua_setfield(L, -2, "count");
  lua_pushnumber(L, n.params);
  lua_setfield(L, -2, "params");
  lua_pushboolean(L, training);
  lua_setfield(L, -2, "training");
  lua_pushstring(L, n.optimizer ? "optimizer" : "forward");
  lua_setfield(L, -2, "phase");
  lua_createtable(L, 0, int(n.attrs.size()));  // stack: node attrs
  for (const auto& [k, v] : n.attrs) {
    if (const auto* d = std::get_if<double>(&v)) lua_pushnumber(L, *d);
    else if (const auto* b = std::get_if<bool>(&v)) lua_pushboolean(L, *b);
    else lua_pushstring(L, std::get<std::string>(v).c_str());
    lua_setfield(L, -2, k.c_str());
  }
  lua_setfield(L, -2, "attrs");
}

namespace {
const std::vector<std::string> node_keys = {"op",    "name",   "layer",  "inputs", "output",
                                            "dtype", "count",  "params", "phase",  "attrs"};
const std::vector<std::string> kernel_keys = {"kind", "name", "op", "dtype", "flops",  "bytes", "b",
                                              "m",    "n",    "k",  "rows",  "hidden", "seconds", "shapes", "kv_dtype", "weight_bytes", "act_quant",
                                              "kv_flops", "kv_bytes", "wgrad"};
const std::vector<std::string> kernel_keys_tiled = [] {
  auto keys = kernel_keys;
  keys.emplace_back("tile");
  return keys;
}();

// Field `field` of the table `r` reads, a dtype name: dtype_bytes' error ("unknown dtype 'x'") named the node or kernel
// no more than its file, as the reader's other errors do ("<what>: field 'dtype': unknown dtype 'x' …").
void dtype_field_check(const table_reader& r, const char* field, const std::string& dtype) {
  try {
    dtype_bytes(dtype);
  } catch (const error& e) {
    throw error(r.what() + ": field '" + field + "': " + e.what());
  }
}

// The `tile` table of kernel_push at `idx` into k's tile fields. [-0, +0, -]
void tile_read(lua_State* L, int idx, kernel& k, const std::string& what) {
  table_reader t(L, idx, what);
  t.check_keys({"m", "k", "split", "alt_m", "alt_k", "alt_split", "elems", "piece", "piece_elems", "blocks", "flops",
                "bytes", "kernel", "alt_kernel"});
  k.tile_m = t.integer_or("m", 0), k.tile_k = t.integer_or("k", 0), k.tile_split = t.integer_or("split", 1);
  k.tile_alt_m = t.integer_or("alt_m", 0), k.tile_alt_k = t.integer_or("alt_k", 0);
  k.tile_alt_split = t.integer_or("alt_split", 1), k.tile_alt_kernel = t.str_or("alt_kernel", "");
  k.tile_elems = t.integer_or("elems", 0);
  k.tile_piece = t.integer_or("piece", 0), k.tile_piece_elems = t.integer_or("piece_elems", 0);
  // blocks come with their flops and bytes (as kernel_push writes them): a missing one is an error, not 0
  const bool blocks = t.has("blocks");
  k.tile_blocks = t.number_or("blocks", 0);
  k.tile_flops = blocks ? t.number("flops") : t.number_or("flops", 0);
  k.tile_bytes = blocks ? t.number("bytes") : t.number_or("bytes", 0);
  k.tile_kernel = t.str_or("kernel", "");
  if ((k.tile_alt_m > 0) != (k.tile_alt_k > 0) || k.tile_alt_m < 0 || k.tile_alt_k < 0 || k.tile_alt_split < 1)
    throw error(what + ": alt_m and alt_k must both be >= 1 or both absent (alt_split >= 1)");
  if (k.tile_m < 0 || k.tile_k < 0 || k.tile_split < 1 || k.tile_elems < 0 || k.tile_blocks < 0 || k.tile_flops < 0 ||
      k.tile_bytes < 0 || k.tile_piece < 0 || k.tile_piece_elems < 0 || (k.tile_piece > 0) != (k.tile_piece_elems > 0))
    throw error(what + ": tile sizes must be >= 0 (split >= 1; piece and piece_elems both or neither)");
}

std::map<std::string, attr_value> attrs_read(lua_State* L, int idx, const std::string& what) {
  std::map<std::string, attr_value> out;
  idx = lua_absindex(L, idx);
  plain_table_check(L, idx, what + ": attrs");
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {  // stack: key value
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_pop(L, 2);
      throw error(what + ": attrs keys must be strings");
    }
    const std::string k = lua_tostring(L, -2);
    switch (lua_type(L, -1)) {
      case LUA_TNUMBER: out[k] = double(lua_tonumber(L, -1)); break;
      case LUA_TBOOLEAN: out[k] = bool(lua_toboolean(L, -1)); break;
      case LUA_TSTRING: out[k] = std::string(lua_tostring(L, -1)); break;
      default: {
        const std::string t = luaL_typename(L, -1);
        lua_pop(L, 2);
        throw error(what + ": attrs." + k + " must be a number, boolean or string (got " + t + ")");
      }
    }
    lua_pop(L, 1);
  }
  return out;
}
}  // namespace

const std::vector<std::string>& node_fields() { return node_keys; }

std::string model_where(const std::string& origin, const std::string& model) {
  return origin + ": model '" + model + "'";
}

std::vector<node> nodes_read(lua_State* L, int idx, const std::string& where, lua_Integer* failed) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx)) throw error(where + ": expected an array of nodes (got " + luaL_typename(L, idx) + ")");
  plain_table_check(L, idx, where + ": the array of nodes");
  std::vector<node> out;
  const lua_Integer count = lua_Integer(lua_rawlen(L, idx));
  for (lua_Integer i = 1; i <= count; ++i) {
    lua_rawgeti(L, idx, i);  // stack: node_i
    const std::string what = where + ": node #" + std::to_string(i);
    try {
      table_reader r(L, -1, what);
      r.check_keys(node_keys);
      node n;
      n.op = r.str("op");
      n.name = r.str("name");
      table_reader named(L, -1, what + " '" + n.name + "'");
      n.layer = named.str_or("layer", "");
      n.inputs = named.shapes_at("inputs");
      n.output = named.shape_at("output");
      n.dtype = named.str_or("dtype", "fp32");
      dtype_field_check(named, "dtype", n.dtype);
      n.count = named.integer_or("count", 1);
      if (n.count < 1) throw error(named.what() + ": field 'count' must be >= 1");
      n.params = named.number_or("params", 0);
      if (n.params < 0) throw error(named.what() + ": field 'params' must be >= 0");
      const std::string ph = named.str_or("phase", "forward");
      if (ph != "forward" && ph != "optimizer")
        throw error(named.what() + ": field 'phase' must be \"forward\" or \"optimizer\" (got \"" + ph + "\")");
      n.optimizer = ph == "optimizer";
      if (raw_getfield(L, -1, "attrs") == LUA_TTABLE) {
        try {
          n.attrs = attrs_read(L, -1, named.what());
        } catch (...) {
          lua_pop(L, 1);
          throw;
        }
      } else if (!lua_isnil(L, -1)) {
        lua_pop(L, 1);
        throw error(named.what() + ": field 'attrs' must be a table");
      }
      lua_pop(L, 1);
      out.push_back(std::move(n));
    } catch (...) {
      lua_pop(L, 1);
      if (failed) *failed = i;
      throw;
    }
    lua_pop(L, 1);
  }
  return out;
}

std::vector<kernel> kernels_read(lua_State* L, int idx, const std::string& where, bool tiles) {
  idx = lua_absindex(L, idx);
  if (!lua_istable(L, idx))
    throw error(where + " returned " + luaL_typename(L, idx) + ", expected an array of kernels");
  plain_table_check(L, idx, where + " returned a table that is not an array of kernels");
  const lua_Integer count = lua_Integer(lua_rawlen(L, idx));
  // A lone kernel ({ kind = …, … }) has length 0: read as an array it would vanish with 0 ms. Any key outside
  // 1..#t is an error.
  const bool lone = raw_getfield(L, idx, "kind") != LUA_TNIL;  // stack: … kind
  lua_pop(L, 1);
  if (lone) throw error(where + " returned a single kernel (a table with field 'kind'), expected an array of kernels: "
                                "return { kernel }");
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {  // stack: … key value
    lua_pop(L, 1);                  // stack: … key
    if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= count) continue;
    // lua_type first: lua_tostring would convert a number key in place and break the traversal
    const std::string key = lua_type(L, -1) == LUA_TSTRING ? "'" + std::string(lua_tostring(L, -1)) + "'"
                                                            : std::string("of type ") + luaL_typename(L, -1);
    lua_pop(L, 1);
    throw error(where + " returned a table with key " + key + ", expected an array of kernels");
  }
  std::vector<kernel> out;
  for (lua_Integer i = 1; i <= count; ++i) {
    lua_rawgeti(L, idx, i);  // stack: kernel_i
    try {
      table_reader r(L, -1, where + " kernel #" + std::to_string(i));
      r.check_keys(tiles ? kernel_keys_tiled : kernel_keys);
      kernel k;
      const std::string kind = r.str("kind");
      const auto parsed = kernel_kind_parse(kind);
      if (!parsed)
        throw error(r.what() + ": unknown kind '" + kind + "'" + text_did_you_mean(kind, kernel_kind_names()));
      k.kind = *parsed;
      k.name = r.str("name");
      k.op = r.str_or("op", "");
      k.dtype = r.str_or("dtype", "fp32");
      dtype_field_check(r, "dtype", k.dtype);
      k.flops = r.number("flops");
      k.bytes = r.number("bytes");
      if (k.flops < 0 || k.bytes < 0) throw error(r.what() + ": flops and bytes must be >= 0");
      // 1e21 FLOPs or bytes is an hour of the fastest GPU on one kernel (the largest real GEMMs are ~1e18): more is a
      // unit slip or an overflow, not a forecast
      if (k.flops > 1e21 || k.bytes > 1e21) throw error(r.what() + ": flops and bytes must be at most 1e21");
      // and 0 or at least 1: bytes = 1e-300 forecast 3e-310 ms, tokens per second inf (JSON null; found by
      // tests/fuzz/mutate.py)
      if ((k.flops > 0 && k.flops < 1) || (k.bytes > 0 && k.bytes < 1))
        throw error(r.what() + ": flops and bytes must be 0 or at least 1");
      // a vector or attention kernel computes on what it moves (a pure copy is kind "memory"); the neusight predictor
      // prices it per element, and a 0 there failed as "kernel V needs flops > 0 …" without naming the rule
      const bool priced_per_element = k.kind == kernel_kind::elementwise || k.kind == kernel_kind::softmax ||
                                      k.kind == kernel_kind::layernorm || k.kind == kernel_kind::attention;
      if (priced_per_element && !(k.flops > 0 && k.bytes > 0))
        throw error(r.what() + ": kind '" + kind + "' needs flops > 0 and bytes > 0 (a copy is kind \"memory\")");
      // Dimensions are 1 … 2^48, and so is a vector kernel's rows × hidden (a GEMM's b·m·n·k at most 1e21, the FLOPs
      // limit): an m = 0 used to fail in scripts/tiling/gemm.lua without naming the rule, rows = 2^62 wrap to 0 elements.
      const auto dims_check = [&](std::initializer_list<std::pair<const char*, int64_t>> dims, double product_max,
                                  const char* product) {
        double p = 1;
        for (const auto& [name, v] : dims) {
          if (v < 1 || v > max_shape_elements)
            throw error(r.what() + ": field '" + name + "' must be between 1 and 2^48 (got " + std::to_string(v) + ")");
          p *= double(v);
        }
        if (p > product_max)
          throw error(r.what() + ": " + product + " must be at most " + (product_max == 1e21 ? "1e21" : "2^48"));
      };
      if (k.kind == kernel_kind::gemm || k.kind == kernel_kind::bmm) {
        k.b = r.integer("b"), k.m = r.integer("m"), k.n = r.integer("n"), k.k = r.integer("k");
        dims_check({{"b", k.b}, {"m", k.m}, {"n", k.n}, {"k", k.k}}, 1e21, "b·m·n·k");
        // the FLOPs are the dims' 2·b·m·n·k: less where rows are padded (a grouped GEMM's ⌈R/b⌉ rows per expert: more
        // than half of it), more where the kernel fuses work of its own (ops/flash_attention.lua's softmax and second
        // product over narrower values: at most twice). A hand-built kernel with flops = 0 was priced from its dims,
        // one with 1000× them accepted.
        const double dims_flops = 2 * double(k.b) * double(k.m) * double(k.n) * double(k.k);
        if (!(k.flops > dims_flops / 2 && k.flops <= 2 * dims_flops))
          throw error(r.what() + ": kind '" + kind + "' computes 2·b·m·n·k = " + text_limit(dims_flops) +
                      " FLOPs, got flops = " + text_limit(k.flops) + " (more than half of it and at most twice are "
                      "accepted: padded rows, fused work): build it with neusight.kernels linear/bmm, or set b, m, n, k "
                      "to the product it computes");
        k.weight_bytes = r.number_or("weight_bytes", 0);
        if (!(k.weight_bytes >= 0) || !std::isfinite(k.weight_bytes))
          throw error(r.what() + ": weight_bytes must be a finite number >= 0");
        k.act_quant = r.str_or("act_quant", "");
        k.wgrad = r.boolean_or("wgrad", false);
        if (!k.act_quant.empty() && (k.act_quant != "dynamic_tensor" || k.dtype != "fp8"))
          throw error(r.what() + ": act_quant must be \"dynamic_tensor\" on an fp8 GEMM (got '" + k.act_quant +
                      "', dtype " + k.dtype + ")");
      } else if (k.kind == kernel_kind::attention) {
        k.b = r.integer("b"), k.m = r.integer("m"), k.n = r.integer("n"), k.k = r.integer("k");
        k.rows = r.integer("rows"), k.hidden = r.integer("hidden");
        k.kv_dtype = r.str_or("kv_dtype", "");
        if (!k.kv_dtype.empty()) dtype_field_check(r, "kv_dtype", k.kv_dtype);
        if (k.kv_dtype == k.dtype) k.kv_dtype.clear();
        if (k.b < 1 || k.m < 1 || k.n < 1 || k.k < 1 || k.rows < 1 || k.hidden < 1)
          throw error(r.what() + ": attention dims b, m, n, k, rows (heads), hidden (kv heads) must be >= 1");
        dims_check({{"rows", k.rows}, {"hidden", k.hidden}}, double(max_shape_elements), "rows × hidden");
        dims_check({{"b", k.b}, {"m", k.m}, {"n", k.n}, {"k", k.k}}, 1e21, "b·m·n·k");
        if (k.op != "causal" && k.op != "full" && k.op != "causal_bwd" && k.op != "full_bwd" && k.op != "decode")
          throw error(r.what() + ": attention op must be causal, full, causal_bwd, full_bwd or decode (got '" + k.op + "')");
        kv_costs_read(r, k);
      } else if (k.kind != kernel_kind::memory && k.kind != kernel_kind::collective) {
        k.rows = r.integer("rows"), k.hidden = r.integer("hidden");
        dims_check({{"rows", k.rows}, {"hidden", k.hidden}}, double(max_shape_elements), "rows × hidden");
      }
      if (k.kind != kernel_kind::attention && (r.has("kv_flops") || r.has("kv_bytes")))
        throw error(r.what() + ": kv_flops and kv_bytes belong to attention kernels (kind '" + kind + "')");
      if (r.has("seconds")) {
        // a given time has a measured time's range (core/time_limits.h), here in seconds
        k.seconds = time_check(r.number("seconds"), time_unit::s, true, r.what() + ": field 'seconds'");
      } else if (k.kind == kernel_kind::collective) {
        throw error(r.what() + ": a collective kernel needs field 'seconds' (price it with neusight.collectives)");
      }
      // the engine never prices a collective: 1 MB sent in 0 s forecast 0 ms (found by tests/fuzz/mutate.py)
      if (k.kind == kernel_kind::collective && k.bytes > 0 && !(*k.seconds > 0))
        throw error(r.what() + ": a collective kernel that sends bytes needs seconds > 0");
      if (tiles && r.has("tile")) {
        raw_getfield(L, -1, "tile");  // stack: kernel_i tile
        try {
          tile_read(L, -1, k, r.what() + ": tile");
        } catch (...) {
          lua_pop(L, 1);
          throw;
        }
        lua_pop(L, 1);
      }
      out.push_back(std::move(k));
    } catch (...) {
      lua_pop(L, 1);
      throw;
    }
    lua_pop(L, 1);
  }
  return out;
}

void kv_costs_read(const table_reader& r, kernel& k) {
  k.kv_flops = r.number_or("kv_flops", 0), k.kv_bytes = r.number_or("kv_bytes", 0);
  if (!(k.kv_flops >= 0 && k.kv_flops <= k.flops) || !(k.kv_bytes >= 0 && k.kv_bytes <= k.bytes))
    throw error(r.what() + ": kv_flops and kv_bytes (what one more key adds) must be between 0 and the kernel's "
                           "flops and bytes");
}

void kernel_push(lua_State* L, const kernel& k) {
  lua_createtable(L, 0, 12);  // stack: kernel
  set_string(L, "kind", std::string(kernel_kind_name(k.kind)));
  set_string(L, "name", k.name);
  if (!k.op.empty()) set_string(L, "op", k.op);
  set_string(L, "dtype", k.dtype);
  set_number(L, "flops", k.flops);
  set_number(L, "bytes", k.bytes);
  const bool matrix = k.kind == kernel_kind::gemm || k.kind == kernel_kind::bmm || k.kind == kernel_kind::attention;
  const bool vector = k.kind == kernel_kind::elementwise || k.kind == kernel_kind::softmax ||
                      k.kind == kernel_kind::layernorm || k.kind == kernel_kind::attention;
  if (matrix) set_integer(L, "b", k.b), set_integer(L, "m", k.m), set_integer(L, "n", k.n), set_integer(L, "k", k.k);
  if (vector) set_integer(L, "rows", k.rows), set_integer(L, "hidden", k.hidden);
  if (!k.kv_dtype.empty()) set_string(L, "kv_dtype", k.kv_dtype);
  if (k.kv_flops > 0) set_number(L, "kv_flops", k.kv_flops);
  if (k.kv_bytes > 0) set_number(L, "kv_bytes", k.kv_bytes);
  if (k.weight_bytes > 0) set_number(L, "weight_bytes", k.weight_bytes);
  if (!k.act_quant.empty()) set_string(L, "act_quant", k.act_quant);
  if (k.wgrad) lua_pushboolean(L, 1), lua_setfield(L, -2, "wgrad");
  if (k.seconds) set_number(L, "seconds", *k.seconds);
  if (k.tile_m || k.tile_k || k.tile_elems || k.tile_blocks > 0) {
    lua_createtable(L, 0, 8);  // stack: kernel tile
    if (k.tile_m) set_integer(L, "m", k.tile_m);
    if (k.tile_k) set_integer(L, "k", k.tile_k);
    if (k.tile_m || k.tile_k) set_integer(L, "split", k.tile_split);
    if (k.tile_alt_m) set_integer(L, "alt_m", k.tile_alt_m), set_integer(L, "alt_k", k.tile_alt_k),
        set_integer(L, "alt_split", k.tile_alt_split);
    if (k.tile_elems) set_integer(L, "elems", k.tile_elems);
    if (k.tile_piece) set_integer(L, "piece", k.tile_piece), set_integer(L, "piece_elems", k.tile_piece_elems);
    if (k.tile_blocks > 0) set_number(L, "blocks", k.tile_blocks), set_number(L, "flops", k.tile_flops), set_number(L, "bytes", k.tile_bytes);
    if (!k.tile_kernel.empty()) set_string(L, "kernel", k.tile_kernel);
    if (k.tile_alt_m && !k.tile_alt_kernel.empty()) set_string(L, "alt_kernel", k.tile_alt_kernel);
    lua_setfield(L, -2, "tile");
  }
}

}  // namespace ns
