// engine/lua/wrap.h — conversions between core types and Lua values (one wrap_<type>.cpp per type).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/forecast.h"
#include "core/gpu_spec.h"
#include "core/graph.h"
#include "lua/lua_state.h"

namespace ns {

// Pushes t[k] of the table at `idx` without metamethods (lua_rawget): the host never runs script code while it
// reads script data. [-0, +1, m]
inline int raw_getfield(lua_State* L, int idx, const char* k) {
  idx = lua_absindex(L, idx);
  lua_pushstring(L, k);
  return lua_rawget(L, idx);
}

// Set field `key` of the table on top of the stack to a string, a number or an integer. [-0, +0, m]
inline void set_string(lua_State* L, const char* key, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, key);
}
inline void set_number(lua_State* L, const char* key, double v) { lua_pushnumber(L, v), lua_setfield(L, -2, key); }
inline void set_integer(lua_State* L, const char* key, int64_t v) {
  lua_pushinteger(L, lua_Integer(v));
  lua_setfield(L, -2, key);
}

// Throws "<what>: expected a plain table (it has a metatable)" when the table at `idx` has a metatable: data the host
// reads must not depend on metamethods it does not run. [-0, +0, -]
void plain_table_check(lua_State* L, int idx, const std::string& what);

// Pushes the GPU as a plain table of its TOML fields (plus `source`). [-0, +1, m]
void gpu_push(lua_State* L, const gpu_spec& gpu);

// Pushes a node as a plain table (op, name, layer, inputs, output, dtype, dtype_bytes, count, params,
// training, phase, attrs). [-0, +1, m]
void node_push(lua_State* L, const node& n, bool training);

// "<origin>: model '<model>'": the one wording of a workload's model in messages, the `where` of its nodes' errors
// (nodes_read's, check_nodes' ", node i 'name'" after it); scripts get it as neusight.model_where.
std::string model_where(const std::string& origin, const std::string& model);
// Reads the array of node tables at `idx`; `where` prefixes errors ("examples/x.lua: model"). `failed`, when given, is
// set to the index of the node whose reading threw (its errors start "<where>: node #i"). [-0, +0, -]
std::vector<node> nodes_read(lua_State* L, int idx, const std::string& where, lua_Integer* failed = nullptr);
// The fields a node table may have (nodes_read's one list; neusight.workload checks a model's nodes against it first,
// where it knows the script's line of each).
const std::vector<std::string>& node_fields();

// Reads the array of kernel tables at `idx` returned by a hook; errors are prefixed with `where`. With `tiles`, a kernel
// may also carry the `tile` table kernel_push writes (read back into the tile fields). [-0, +0, -]
std::vector<kernel> kernels_read(lua_State* L, int idx, const std::string& where, bool tiles = false);

// Pushes a kernel as the plain table a Lua predictor receives: the fields kernels_read accepts (kind, name, op, dtype,
// flops, bytes, b/m/n/k, rows/hidden, kv_dtype, weight_bytes, seconds; absent where they do not apply) and, once the
// tiling rules picked one, `tile` = { m, k, split, elems, blocks, flops, bytes, kernel } (its non-zero parts).
// [-0, +1, m]
void kernel_push(lua_State* L, const kernel& k);

// Reads a GPU table (the fields gpu_push writes, plus `source`) back into a spec: the table a rule or predictor got,
// or a copy with some numbers changed. Required fields must be present; numbers finite and >= 0 (> 0 where the GPU
// file demands it). `what` prefixes errors. [-0, +0, -]
gpu_spec gpu_read(lua_State* L, int idx, const std::string& what);

// Line and column (both 1-based) of the byte nlohmann::json's parse_error reports (its `byte`: bytes read).
struct json_position {
  size_t line = 1, col = 1;
};
json_position json_position_of(const std::string& text, size_t byte);

// Reads a JSON object file (a HuggingFace config.json) and pushes it as a plain table (null members left out),
// then a set { key = true } of its top-level members that were null (HF writes None as null: "sliding_window":
// null is not the same as an omitted key, which takes the config class's default).
// Then a table { key = line } of the top-level members' lines where the text certainly gives one
// (text_json_key_line), for the line of a member an error names.
// Throws ns::error "<display>: cannot read file" or "<display>:<line>:<col>: invalid JSON: <what>". [-0, +3, m]
void json_file_push(lua_State* L, const std::string& path, const std::string& display);
// The same from the file's text (what json_file_push calls once it has read the file). [-0, +3, m]
void json_config_push(lua_State* L, const std::string& text, const std::string& display);

// Parses JSON text (a report the engine wrote) and pushes it as a plain table, like json_file_push but without the
// null set; `what` names it in the parse error. [-0, +1, m]
void json_text_push(lua_State* L, const std::string& text, const std::string& what);

// Pushes a JSON value as a plain Lua value: objects → tables (null members left out), arrays → sequences (a null
// element leaves a hole), integers → Lua integers, other numbers → floats, null → nil (session::call's arguments).
// [-0, +1, m]
void json_value_push(lua_State* L, const nlohmann::json& j);

// The inverse of json_from_lua: `j` as Lua values that json_from_lua turns back into the same JSON (a document the
// engine hands a script whole: search's ranking, search.lua format_table/format_json/format_csv). Objects → tables
// whose metatable's __order lists their keys in order, arrays → sequences, null → a table whose metatable has
// __json = "null" (so it keeps its place; `type(v) == "table"` and no fields), integers → integers, other numbers →
// floats. Throws ns::error when nested too deeply. [-0, +1, m]
void json_push_ordered(lua_State* L, const nlohmann::ordered_json& j);

// Reads a TOML file (a data table the engine hands to a script as is, e.g. weights/<vendor>/uncertainty.toml) and
// pushes it as a plain table. Throws ns::error "<display>:<line>:<col>: <what>" on a syntax error. [-0, +1, m]
void toml_file_push(lua_State* L, const std::string& path, const std::string& display);
// The same from the file's text. [-0, +1, m]
void toml_text_push(lua_State* L, std::string_view text, const std::string& display);

// A plain Lua value as JSON (a report section Lua computed: neusight.memory's, a serve report): tables with keys
// exactly 1..n → arrays (an empty table too), other tables → objects with their keys sorted (number keys as text)
// after the keys their metatable's __order array lists, in that order (a report's fixed field order; a table with
// __order is an object even when empty); a table whose metatable has __json = "null" → null (neusight.report's
// null: a key written as null, where nil would leave it out); integers stay integers, NaN/inf → null; functions,
// userdata or other keys are errors naming `what`. [-0, +0, -]
nlohmann::ordered_json json_from_lua(lua_State* L, int idx, const std::string& what);
// json_from_lua(L, idx, "report") as indented JSON text. [-0, +0, -]
std::string json_text_of(lua_State* L, int idx);

// The forecast as a plain table for neusight.report (scripts/neusight/report.lua): nodes (name, op, layer, count,
// fused = attrs.fused when a string), kernels (node = its index in nodes, phase, name, kind, every dim and tile field
// whatever the kind, flops, bytes, seconds_each = one instance, seconds = replication included), and the totals in
// seconds (total, forward, backward, accumulate, optimizer), flops (and flops_<phase>) and params; without `rows`
// the totals alone. [-0, +1, m]
void forecast_push(lua_State* L, const forecast& f, bool rows = true);

// Adds the integer-series primitives (pack_integers, walk, fold, queue: engine/lua/wrap_series.cpp) to the table on top of
// the stack. [-0, +0, m]
void series_functions_add(lua_State* L);

// Typed field access on the table at `idx` with messages "<what>: field 'k' must be ...". All [-0, +0, -].
class table_reader {
 public:
  table_reader(lua_State* L, int idx, std::string what);
  std::string str(const char* key) const;
  std::string str_or(const char* key, const std::string& fallback) const;
  double number(const char* key) const;
  double number_or(const char* key, double fallback) const;
  int64_t integer(const char* key) const;
  int64_t integer_or(const char* key, int64_t fallback) const;
  bool boolean_or(const char* key, bool fallback) const;
  bool has(const char* key) const;
  shape shape_at(const char* key) const;
  std::vector<shape> shapes_at(const char* key) const;
  // Every string key must be in `allowed`; otherwise "<what>: unknown field 'x' (did you mean 'y'?)".
  void check_keys(const std::vector<std::string>& allowed) const;
  const std::string& what() const { return what_; }

 private:
  [[noreturn]] void fail(const char* key, const char* expected) const;
  lua_State* L_;
  int idx_;
  std::string what_;
};

// An attention kernel's kv_flops and kv_bytes (what one more key adds; scripts/neusight/kernels.lua attention()) from
// the kernel table `r` reads, after its flops and bytes: optional (0: no KV-length copies), each between 0 and the
// kernel's own. An op rule's kernels and neusight.kernels' costing alike.
void kv_costs_read(const table_reader& r, kernel& k);

}  // namespace ns
