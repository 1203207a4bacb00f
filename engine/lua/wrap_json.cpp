// engine/lua/wrap_json.cpp — a JSON document (a HuggingFace config.json) as a plain Lua table.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/json_key.h"
#include "core/toml_read.h"
#include "lua/wrap.h"

namespace ns {
namespace {

using json = nlohmann::json;

// [-0, +1, m] pushes a JSON scalar (string, boolean, number; anything else: nil), for json_push and ordered_push:
// integers → Lua integers (unsigned ones above INT64_MAX as floats), other numbers → floats.
template <class J>
void scalar_push(lua_State* L, const J& j) {
  switch (j.type()) {
    case J::value_t::string: {
      const auto& s = j.template get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      break;
    }
    case J::value_t::boolean: lua_pushboolean(L, j.template get<bool>()); break;
    case J::value_t::number_integer: lua_pushinteger(L, lua_Integer(j.template get<int64_t>())); break;
    case J::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u <= uint64_t(INT64_MAX)) lua_pushinteger(L, lua_Integer(u));
      else lua_pushnumber(L, lua_Number(u));
      break;
    }
    case J::value_t::number_float: lua_pushnumber(L, j.template get<double>()); break;
    default: lua_pushnil(L); break;
  }
}

// [-0, +1, m] pushes `j`: objects → tables (null members are left out), arrays → sequences
// (a null element leaves a hole), integers → Lua integers, other numbers → floats.
void json_push(lua_State* L, const json& j, int depth) {
  // Called outside any protected call: fail with a C++ exception, never luaL_error.
  if (depth > 200 || !lua_checkstack(L, 3)) throw error("JSON nested too deeply");
  switch (j.type()) {
    case json::value_t::object:
      lua_createtable(L, 0, int(j.size()));  // stack: t
      for (const auto& [k, v] : j.items()) {
        if (v.is_null()) continue;
        json_push(L, v, depth + 1);  // stack: t v
        lua_setfield(L, -2, k.c_str());
      }
      break;
    case json::value_t::array: {
      lua_createtable(L, int(j.size()), 0);
      lua_Integer i = 0;
      for (const auto& v : j) {
        ++i;
        if (v.is_null()) continue;
        json_push(L, v, depth + 1);
        lua_rawseti(L, -2, i);
      }
      break;
    }
    default: scalar_push(L, j); break;
  }
}

// [-0, +1, m] json_push_ordered's body.
void ordered_push(lua_State* L, const nlohmann::ordered_json& j, int depth) {
  using ojson = nlohmann::ordered_json;
  if (depth > 200 || !lua_checkstack(L, 4)) throw error("JSON nested too deeply");
  switch (j.type()) {
    case ojson::value_t::object: {
      lua_createtable(L, 0, int(j.size()));       // stack: t
      lua_createtable(L, 0, 1);                   // stack: t mt
      lua_createtable(L, int(j.size()), 0);       // stack: t mt order
      lua_Integer i = 0;
      for (const auto& [k, v] : j.items()) {
        lua_pushlstring(L, k.data(), k.size());
        lua_rawseti(L, -2, ++i);
        ordered_push(L, v, depth + 1);            // stack: t mt order v
        lua_setfield(L, -4, k.c_str());
      }
      lua_setfield(L, -2, "__order");             // stack: t mt
      lua_setmetatable(L, -2);                    // stack: t
      break;
    }
    case ojson::value_t::array: {
      lua_createtable(L, int(j.size()), 0);
      lua_Integer i = 0;
      for (const auto& v : j) {
        ordered_push(L, v, depth + 1);
        lua_rawseti(L, -2, ++i);
      }
      break;
    }
    case ojson::value_t::null:
      lua_createtable(L, 0, 0);
      lua_createtable(L, 0, 1);
      lua_pushliteral(L, "null");
      lua_setfield(L, -2, "__json");
      lua_setmetatable(L, -2);
      break;
    default: scalar_push(L, j); break;  // binary, discarded: not made by the engine, is nil
  }
}

// Where a value sits in the document, for messages only: the root's name, then ".key" and "[i]" steps, made into text
// only when an error names it (a report has thousands of values; building each path eagerly dominated the cost).
struct json_path {
  const json_path* parent = nullptr;
  const std::string* key = nullptr;  // ".key"; nullptr with parent: "[index]"; nullptr without: the root
  lua_Integer index = 0;
  const std::string* root = nullptr;
  std::string text() const {
    if (!parent) return root ? *root : std::string();
    return parent->text() + (key ? "." + *key : "[" + std::to_string(index) + "]");
  }
};

// [-0, +0, e] the value at `idx` as JSON (json_from_lua): a table whose keys are exactly 1..n is an array (an empty
// table too), any other table an object with its keys sorted (number keys written as text); integers stay integers,
// NaN and infinities become null; functions, userdata and other keys are errors naming `what`.
nlohmann::ordered_json lua_to_json(lua_State* L, int idx, const json_path& at, int depth) {
  using ojson = nlohmann::ordered_json;
  const auto what_of = [&] { return at.text(); };
  if (depth > 100 || !lua_checkstack(L, 4)) throw error(what_of() + ": nested too deeply");
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
    case LUA_TNIL: return nullptr;
    case LUA_TBOOLEAN: return bool(lua_toboolean(L, idx));
    case LUA_TNUMBER: {
      if (lua_isinteger(L, idx)) return int64_t(lua_tointeger(L, idx));
      const double d = lua_tonumber(L, idx);
      if (!std::isfinite(d)) return nullptr;
      return d;
    }
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, idx, &n);
      return std::string(s, n);
    }
    case LUA_TTABLE: {
      // a metatable's __json = "null" is JSON null (a field that must be written, where nil would leave it out)
      if (luaL_getmetafield(L, idx, "__json") != LUA_TNIL) {  // stack: … marker
        const bool is_null = lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "null";
        lua_pop(L, 1);
        if (!is_null) throw error(what_of() + ": its metatable's __json must be \"null\"");
        return nullptr;
      }
      // a metatable's __order makes an object, even of an empty table
      bool ordered = false;
      if (luaL_getmetafield(L, idx, "__order") != LUA_TNIL) ordered = true, lua_pop(L, 1);
      const lua_Integer n = lua_Integer(lua_rawlen(L, idx));
      lua_Integer count = 0;
      bool array = true;
      std::vector<std::pair<std::string, bool>> keys;  // text, is a string key
      lua_pushnil(L);
      while (lua_next(L, idx) != 0) {  // stack: … key value
        ++count;
        if (lua_type(L, -2) == LUA_TSTRING) {
          keys.emplace_back(lua_tostring(L, -2), true);  // a string key: no conversion
          array = false;
        } else if (lua_type(L, -2) == LUA_TNUMBER) {
          if (!(lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= n)) array = false;
          lua_pushvalue(L, -2);  // never convert the traversal key in place
          keys.emplace_back(lua_tostring(L, -1), false);
          lua_pop(L, 1);
        } else {
          throw error(what_of() + " has a " + std::string(luaL_typename(L, -2)) + " key");
        }
        lua_pop(L, 1);
      }
      if (array && count == n && !ordered) {
        ojson arr = ojson::array();
        for (lua_Integer i = 1; i <= n; ++i) {
          lua_rawgeti(L, idx, i);
          arr.push_back(lua_to_json(L, -1, json_path{&at, nullptr, i}, depth + 1));
          lua_pop(L, 1);
        }
        return arr;
      }
      std::sort(keys.begin(), keys.end());
      // a metatable's __order (an array of key names) puts those keys first, in its order
      if (luaL_getmetafield(L, idx, "__order") != LUA_TNIL) {  // stack: … order
        if (!lua_istable(L, -1)) throw error(what_of() + ": its metatable's __order must be an array of key names");
        std::vector<std::pair<std::string, bool>> first;
        for (lua_Integer i = 1, n_order = lua_Integer(lua_rawlen(L, -1)); i <= n_order; ++i) {
          lua_rawgeti(L, -1, i);
          if (lua_type(L, -1) != LUA_TSTRING) throw error(what_of() + ": its metatable's __order must be an array of key names");
          const std::pair<std::string, bool> key(lua_tostring(L, -1), true);
          lua_pop(L, 1);
          if (const auto it = std::find(keys.begin(), keys.end(), key); it != keys.end()) {
            keys.erase(it);
            first.push_back(key);
          }
        }
        lua_pop(L, 1);
        keys.insert(keys.begin(), first.begin(), first.end());
      }
      ojson obj = ojson::object();
      for (const auto& [k, is_string] : keys) {
        if (is_string) raw_getfield(L, idx, k.c_str());
        else if (lua_stringtonumber(L, k.c_str()) != 0) lua_rawget(L, idx);  // stack: … number → value
        else lua_pushnil(L);
        obj[k] = lua_to_json(L, -1, json_path{&at, &k, 0}, depth + 1);
        lua_pop(L, 1);
      }
      return obj;
    }
    default: throw error(what_of() + " is a " + std::string(luaL_typename(L, idx)) + ", not a JSON value");
  }
}

}  // namespace

nlohmann::ordered_json json_from_lua(lua_State* L, int idx, const std::string& what) {
  return lua_to_json(L, idx, json_path{nullptr, nullptr, 0, &what}, 0);
}

void json_push_ordered(lua_State* L, const nlohmann::ordered_json& j) { ordered_push(L, j, 0); }

std::string json_text_of(lua_State* L, int idx) { return json_from_lua(L, idx, "report").dump(2) + "\n"; }

json_position json_position_of(const std::string& text, size_t byte) {
  // nlohmann counts bytes read; the offending byte is the last one read.
  json_position p;
  const size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.col = 1;
    } else {
      ++p.col;
    }
  }
  return p;
}

void json_value_push(lua_State* L, const nlohmann::json& j) { json_push(L, j, 0); }

void json_text_push(lua_State* L, const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond double ("1E999")
    throw error(what + ": invalid JSON: " + e.what());
  }
  json_push(L, j, 0);
}

void json_file_push(lua_State* L, const std::string& path, const std::string& display) {
  if (std::filesystem::is_directory(path)) throw error(display + ": is a directory (expected a config.json file)");
  json_config_push(L, file_read(path, display), display);
}

void json_config_push(lua_State* L, const std::string& text, const std::string& display) {
  json j;
  // a key an object holds twice: JSON parsers keep one of them silently (nlohmann and Python's json, so HF, the last), so
  // the file is refused with the key named, not forecast from whichever value a reader kept
  std::vector<std::set<std::string>> keys;  // per open object, the keys read so far
  std::string duplicate;
  size_t key_events = 0, duplicate_at = 0;  // the keys read, in text order; the duplicate's index among them (its line)
  const json::parser_callback_t on_event = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
        duplicate_at = key_events;
      }
      ++key_events;
    }
    return true;
  };
  try {
    j = json::parse(text, on_event);
  } catch (const json::parse_error& e) {
    // what(): "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." → keep the tail.
    std::string what = e.what();
    const size_t at = what.find("parse error");
    const size_t colon = at == std::string::npos ? std::string::npos : what.find(": ", at);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    const json_position p = json_position_of(text, e.byte);
    throw error(display + ":" + std::to_string(p.line) + ":" + std::to_string(p.col) + ": invalid JSON: " + what);
  } catch (const json::exception& e) {  // out_of_range 406: a number beyond double ("1E999"); no position given
    std::string what = e.what();
    if (const size_t close = what.find("] "); what.rfind("[json.exception.", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    throw error(display + ": invalid JSON: " + what);
  }
  if (!j.is_object()) throw error(display + ": a model config must be a JSON object (got " + j.type_name() + ")");
  if (!duplicate.empty()) {
    const size_t line = text_json_nth_key_line(text, duplicate_at);  // its second time
    throw error(display + (line ? ":" + std::to_string(line) : "") + ": key '" + duplicate + "' appears twice in one "
                "object (a JSON reader keeps one of them silently: Python's json, so HF, the last); give it once");
  }
  json_push(L, j, 0);
  lua_createtable(L, 0, 0);  // the null members, by name
  for (const auto& [k, v] : j.items()) {
    if (!v.is_null()) continue;
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, k.c_str());
  }
  lua_createtable(L, 0, 0);  // the top-level members' lines, where the text certainly gives one (text_json_key_line)
  for (const auto& [k, v] : j.items()) {
    if (const size_t line = text_json_key_line(text, k)) {
      lua_pushinteger(L, lua_Integer(line));
      lua_setfield(L, -2, k.c_str());
    }
  }
}

void toml_file_push(lua_State* L, const std::string& path, const std::string& display) {
  toml_text_push(L, text_file_read(path, display, text_file_max_script), display);
}

void toml_text_push(lua_State* L, std::string_view text, const std::string& display) {
  const toml::table t = toml_parse_text(text, display);
  std::ostringstream out;
  out << toml::json_formatter{t};
  json_text_push(L, out.str(), display);
}

}  // namespace ns
