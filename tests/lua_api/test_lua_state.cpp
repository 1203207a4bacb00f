// tests/lua_api/test_lua_state.cpp — the C++/Lua error boundary: unwinding guard, ns_catch, tracebacks.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "lua/lua_state.h"
#include "lua/wrap.h"

using namespace ns;

namespace {
int destroyed = 0;
struct counts_destruction {
  ~counts_destruction() { ++destroyed; }
};

// Holds an RAII object while raising: with the C build of Lua (longjmp) its destructor is skipped.
int l_raise_with_raii(lua_State* L) {
  counts_destruction guard;
  return luaL_error(L, "boom %d", 42);
}

// A Lua error raised inside ns_catch's body (a primitive whose lua_* call fails) passes through its catch, unwinding
// the body's frames.
int l_lua_error_in_ns_catch(lua_State* L) {
  return ns_catch(L, [L]() -> int {
    counts_destruction guard;
    return luaL_error(L, "inner %d", 7);
  });
}

int l_throws_cpp(lua_State* L) {
  return ns_catch(L, []() -> int { throw std::runtime_error("c++ failure"); });
}
}  // namespace

namespace {
// Calls `f` under ns_pcall on a fresh state: it must fail with a message starting with `message` after unwinding
// exactly one counts_destruction guard, and leave the stack empty.
void raises_and_unwinds(lua_CFunction f, const std::string& message) {
  lua_state s;
  lua_State* L = s.get();
  destroyed = 0;
  lua_pushcfunction(L, f);
  REQUIRE(ns_pcall(L, 0, 0) == LUA_ERRRUN);
  REQUIRE(destroyed == 1);
  CHECK(std::string(lua_tostring(L, -1)).rfind(message, 0) == 0);
  lua_pop(L, 1);
  CHECK(lua_gettop(L) == 0);
}
}  // namespace

TEST_CASE("guard: a Lua error unwinds C++ destructors (lua5.4-c++ is linked)", "[lua][guard]") {
  raises_and_unwinds(l_raise_with_raii, "boom 42");
}

TEST_CASE("guard: a Lua error inside ns_catch's body passes through it and unwinds the body", "[lua][guard]") {
  raises_and_unwinds(l_lua_error_in_ns_catch, "inner 7");  // Lua's own message, not ns_catch's rethrow
}

TEST_CASE("ns_catch turns a C++ exception into a Lua error with its message", "[lua]") {
  lua_state s;
  lua_State* L = s.get();
  lua_pushcfunction(L, l_throws_cpp);
  REQUIRE(ns_pcall(L, 0, 0) == LUA_ERRRUN);
  const std::string msg = lua_tostring(L, -1);
  CHECK(msg.rfind("c++ failure\nstack traceback:", 0) == 0);
  lua_pop(L, 1);
}

// A C function that runs a failing chunk through a nested ns_pcall, then raises an error of its own.
static int l_nested_then_raise(lua_State* L) {
  luaL_loadstring(L, "error('inner', 0)");
  if (ns_pcall(L, 0, 0) != LUA_OK) lua_pop(L, 1);
  lua_pushliteral(L, "outer");
  return lua_error(L);
}

TEST_CASE("ns_error_raised tells the string raised from the handler's text, not from a capped one", "[lua]") {
  lua_state s;
  lua_State* L = s.get();
  // a message far over ns_call's cap: the very string, byte for byte (the handler's has a traceback after it)
  const std::string big = std::string(10000, 'x') + "!";
  luaL_loadstring(L, "error(('x'):rep(10000) .. '!', 0)");
  int status = ns_pcall(L, 0, 0);
  REQUIRE(status == LUA_ERRRUN);
  CHECK(std::string(lua_tostring(L, -1)).find("\nstack traceback:") == 10001);
  CHECK(ns_error_raised(L, status, big));
  CHECK_FALSE(ns_error_raised(L, status, std::string(10000, 'x') + "?"));  // the same but for its last byte
  CHECK_FALSE(ns_error_raised(L, status, big.substr(0, 4096)));            // its first 4,096 bytes
  CHECK_FALSE(ns_error_raised(L, status, big.substr(0, 10000)));           // a prefix ending where the message does not
  CHECK_FALSE(ns_error_raised(L, LUA_ERRMEM, big));                        // no handler saw it
  lua_pop(L, 1);
  // raised with a position (error(msg)): not the string itself
  luaL_loadstring(L, "error('boom')");
  status = ns_pcall(L, 0, 0);
  REQUIRE(status == LUA_ERRRUN);
  CHECK_FALSE(ns_error_raised(L, status, "boom"));
  CHECK(ns_error_raised(L, status, "[string \"error('boom')\"]:1: boom"));
  lua_pop(L, 1);
  // a table with a __tostring giving that text: the handler gives its text alone, no traceback
  luaL_loadstring(L, "error(setmetatable({}, { __tostring = function() return 'boom' end }), 0)");
  status = ns_pcall(L, 0, 0);
  REQUIRE(status == LUA_ERRRUN);
  CHECK(lua_tostring(L, -1) == std::string("boom"));
  CHECK_FALSE(ns_error_raised(L, status, "boom"));
  lua_pop(L, 1);
  // a failed nested call, then the outer one's own error: the outer one's
  lua_pushcfunction(L, l_nested_then_raise);
  status = ns_pcall(L, 0, 0);
  REQUIRE(status == LUA_ERRRUN);
  CHECK(ns_error_raised(L, status, "outer"));
  CHECK_FALSE(ns_error_raised(L, status, "inner"));
  lua_pop(L, 1);
  // out of memory: no handler saw it, nothing to tell
  script_limits tight;
  tight.memory_mb = 8;
  lua_state small(tight);
  lua_State* S = small.get();
  luaL_loadstring(S, "return ('x'):rep(64 * 1024 * 1024)");
  status = ns_pcall(S, 0, 1);
  REQUIRE(status == LUA_ERRMEM);
  CHECK_FALSE(ns_error_raised(S, status, lua_tostring(S, -1)));
  lua_pop(S, 1);
  CHECK(lua_gettop(L) == 0);
  CHECK(lua_gettop(S) == 0);
}

namespace {
bool late_body_ran = false;

// Leaves `source`, loaded as "@<name>" with the globals as its environment, on the stack.
void chunk_push(lua_State* L, const std::string& source, const std::string& name) {
  lua_pushglobaltable(L);
  ns_load_chunk(L, source, name, -1);
  lua_remove(L, -2);
}

// A C function that scripts call and that calls scripts in turn, as a pipeline primitive (session_pipeline.cpp
// primitive()): its caller's CPU time runs out just before it enters the limits (the watchdog marks the call late
// between the caller's last check and the entry, as on a loaded machine). It burns CPU until the watchdog has armed the
// count hook: under a 0.05 s limit the watchdog marks the call late in that same step (arm_after_s is 0.1 s), and
// ns_limits_enter takes the watchdog's lock, so the entry sees it late. The entry then stops the call at the caller's
// line; the body (a script that loops) must not run, nor trip the limit at its own line.
int l_late_primitive(lua_State* L) {
  volatile double sink = 0;
  while (lua_gethook(L) == nullptr) sink = sink + 1;
  const limits_mark mark = ns_limits_enter(L);
  if (ns_limit_tripped(L)) return lua_error(L);  // the limit's message, pushed by the entry
  return ns_catch(L, [&]() -> int {
    late_body_ran = true;
    chunk_push(L, "for i = 1, 1e9 do end\n", "body.lua");
    ns_call(L, 0, 0);
    ns_limits_leave(L, mark);
    return 0;
  });
}
}  // namespace

TEST_CASE("script limits: a call entered after its caller's time ran out stops at the caller's line and leaves its body unrun",
          "[lua][limits]") {
  script_limits late;
  late.seconds = 0.05;  // under arm_after_s: the watchdog arms the hook and marks the call late in one step
  lua_state s(late);
  lua_State* L = s.get();
  chunk_push(L, "local f = ...\nf()\n", "caller.lua");
  lua_pushcfunction(L, l_late_primitive);
  late_body_ran = false;
  REQUIRE(ns_pcall(L, 1, 0) == LUA_ERRRUN);
  const std::string msg = lua_tostring(L, -1);
  INFO(msg);
  CHECK(msg.rfind("caller.lua:2: script ran longer than 0.05 s of CPU time", 0) == 0);
  CHECK_FALSE(late_body_ran);
  lua_pop(L, 1);
  CHECK(lua_gettop(L) == 0);
}

TEST_CASE("ns_call keeps file:line, separates the traceback and adds context", "[lua]") {
  lua_state s;
  lua_State* L = s.get();
  lua_pushglobaltable(L);
  ns_load_chunk(L, "local x = nil\nreturn x.y\n", "ops/t.lua", -1);
  lua_remove(L, -2);
  try {
    ns_call(L, 0, 1, "while testing");
    FAIL("no error");
  } catch (const script_error& e) {
    CHECK(std::string(e.what()) == "ops/t.lua:2: attempt to index a nil value (local 'x')\n    while testing");
    CHECK(e.traceback.rfind("stack traceback:", 0) == 0);
  }
  CHECK(lua_gettop(L) == 0);
}

TEST_CASE("chunks load as text only, with @-names", "[lua]") {
  lua_state s;
  lua_State* L = s.get();
  lua_pushglobaltable(L);
  try {
    ns_load_chunk(L, "return {\n  x = ,\n}\n", "ops/syntax.lua", -1);
    FAIL("no error");
  } catch (const script_error& e) {
    CHECK(std::string(e.what()) == "ops/syntax.lua:2: unexpected symbol near ','");
  }
  CHECK_THROWS_WITH(ns_load_chunk(L, std::string("\x1bLua", 4), "ops/bin.lua", -1),
                    Catch::Contains("attempt to load a binary chunk"));
  lua_pop(L, 1);
}

TEST_CASE("json_from_lua: a metatable's __order puts its keys first, in its order, the rest sorted after them", "[lua][json]") {
  lua_state s;
  lua_State* L = s.get();
  lua_newtable(L);  // stack: t = { b = 1, a = 2, d = true, c = "x" }
  lua_pushinteger(L, 1), lua_setfield(L, -2, "b");
  lua_pushinteger(L, 2), lua_setfield(L, -2, "a");
  lua_pushboolean(L, 1), lua_setfield(L, -2, "d");
  lua_pushstring(L, "x"), lua_setfield(L, -2, "c");
  CHECK(json_from_lua(L, -1, "t").dump() == R"({"a":2,"b":1,"c":"x","d":true})");
  lua_newtable(L);  // stack: t mt
  lua_newtable(L);  // stack: t mt order = { "d", "b", "missing" }
  for (const char* k : {"d", "b", "missing"}) lua_pushstring(L, k), lua_rawseti(L, -2, lua_Integer(lua_rawlen(L, -2) + 1));
  lua_setfield(L, -2, "__order");
  lua_setmetatable(L, -2);  // stack: t
  CHECK(json_from_lua(L, -1, "t").dump() == R"({"d":true,"b":1,"a":2,"c":"x"})");
  lua_newtable(L);  // a non-array __order is an error naming the value
  lua_pushinteger(L, 3), lua_setfield(L, -2, "__order");
  lua_setmetatable(L, -2);
  CHECK_THROWS_WITH(json_from_lua(L, -1, "t"), Catch::Contains("t: its metatable's __order must be an array"));
  lua_settop(L, 0);  // callers restore the stack after an error (stack_restore)
}

// The document a command hands its Lua formatter whole (search's ranking: session::render) comes back as it went:
// objects in their key order (not sorted), nulls kept in place, integers and floats apart, empty objects and arrays.
TEST_CASE("json_push_ordered: json_from_lua gives the same document back", "[lua][json]") {
  lua_state s;
  lua_State* L = s.get();
  const auto doc = nlohmann::ordered_json::parse(
      R"({"z":1,"a":{"y":2.0,"b":null,"x":[1,null,"t",false]},"e":{},"f":[],"n":null,"big":1e300,"neg":-3})");
  json_push_ordered(L, doc);
  CHECK(json_from_lua(L, -1, "doc").dump() == doc.dump());
  // the Lua side sees plain values: a null is a table (its place kept), an integer an integer, 2.0 a float
  lua_getfield(L, -1, "a");
  lua_getfield(L, -1, "y");
  CHECK(lua_isinteger(L, -1) == 0);
  lua_pop(L, 1);
  CHECK(lua_getfield(L, -1, "b") == LUA_TTABLE);
  lua_settop(L, 0);
}

TEST_CASE("json_from_lua: a table with __order is an object even when empty and __json null is null", "[lua][json]") {
  lua_state s;
  lua_State* L = s.get();
  lua_newtable(L);  // stack: t = {} — an array without a metatable
  CHECK(json_from_lua(L, -1, "t").dump() == "[]");
  lua_newtable(L);  // stack: t mt = { __order = {} }
  lua_newtable(L);
  lua_setfield(L, -2, "__order");
  lua_setmetatable(L, -2);
  CHECK(json_from_lua(L, -1, "t").dump() == "{}");
  lua_newtable(L);  // stack: t n — neusight.report's null: { x = n } writes "x": null where nil leaves x out
  lua_newtable(L);
  lua_pushstring(L, "null"), lua_setfield(L, -2, "__json");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "x");
  CHECK(json_from_lua(L, -1, "t").dump() == R"({"x":null})");
  lua_newtable(L);  // any other __json is an error naming the value
  lua_newtable(L);
  lua_pushstring(L, "nil"), lua_setfield(L, -2, "__json");
  lua_setmetatable(L, -2);
  CHECK_THROWS_WITH(json_from_lua(L, -1, "y"), Catch::Contains("y: its metatable's __json must be \"null\""));
  lua_settop(L, 0);
}
