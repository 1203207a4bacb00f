// engine/lua/lua_state.h — the ONLY header that includes lua.hpp: RAII state, protected calls, stack helpers.
#pragma once
#include <lua.hpp>

#include <cassert>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "core/infeasible.h"
#include "core/text.h"
#include "lua/script_limits.h"

namespace ns {

struct lua_guard;  // allocator and hook state (lua_state.cpp)

// Owns a lua_State with the standard libraries opened (the sandbox exposes only a curated subset), a capped
// allocator and an instruction-count hook (script_limits).
class lua_state {
 public:
  explicit lua_state(const script_limits& limits = script_limits_default());
  ~lua_state();
  lua_state(const lua_state&) = delete;
  lua_state& operator=(const lua_state&) = delete;
  lua_State* get() const { return L_; }
  void limits_set(const script_limits& limits);

 private:
  std::unique_ptr<lua_guard> guard_;
  lua_State* L_;
};

// True once the current call from C++ ran over a script limit; scripts' pcall re-raises then (prelude.lua).
bool ns_limit_tripped(lua_State* L);

// A script that runs long by design (serve.lua's simulation) reports progress through the engine, which calls this:
// the current call's instruction count and CPU time start again, so that each stretch between two reports is held to
// the limits as one call would be. A call already over a limit stays stopped. [-0, +0, -]
void ns_limits_renew(lua_State* L);

// A C++ call that scripts call and that calls scripts in turn (scripts/neusight/pipeline.lua's primitives): enter,
// first thing, saves the calling script's instructions used and CPU time elapsed and renews the limits (as
// ns_limits_renew: the scripts the call runs are held to them as when the engine called each itself); leave restores
// them, so that the calling script goes on with what it had used (a loop over a primitive still runs over the limits).
// When the calling script has already run over a limit (the hook had not counted since, or the watchdog marked it late
// just now), enter records the trip at the calling script's line, pushes its message and returns a mark with `over`
// set: the caller raises it (lua_error) rather than run the call. One step under the watchdog's lock, so that a limit
// running out at the entry cannot let the call's own scripts trip it at their line. [-0, +(0|1), m]
struct limits_mark {
  bool valid = false;  // limits applied and nothing was over them on entry: leave restores the caller's count and time
  bool over = false;   // the calling script had run over a limit: the message is pushed, the caller raises it
  int64_t used = 0;
  double elapsed = 0;
};
limits_mark ns_limits_enter(lua_State* L);
void ns_limits_leave(lua_State* L, const limits_mark& mark);
// ns_limits_leave at the end of the scope, normal or not.
struct limits_scope {
  lua_State* L;
  limits_mark mark;
  ~limits_scope() { ns_limits_leave(L, mark); }
};

// Calls the function below `nargs` arguments with a traceback handler slid under it (lua.c docall).
// [-(nargs+1), +(nres|1), -] returns the lua_pcall status; on error the message is on top.
int ns_pcall(lua_State* L, int nargs, int nres);

// Whether the error ns_pcall left on top (`status` its result) is the string `raised`, raised as it is (error(msg, 0),
// lua_error): the handler's "message\nstack traceback:…" text with `raised` whole as its message, however long (ns_call
// caps messages). Lets a caller tell whose error reached it by the value raised, not by the capped text. False for a
// limit's message, out of memory, an error in the handler. Only a value made to look like it passes too: a string
// that starts with `raised` and the mark, a number whose text is `raised`, an object whose __tostring gives such a
// text. [-0, +0, -]
bool ns_error_raised(lua_State* L, int status, std::string_view raised);

// An error that a C++ function scripts call (a forecast pipeline's primitive, serve.lua's phase()) raised into them,
// kept by that function so that the call from C++ into those scripts, when that very error ends it, throws it again as
// it was thrown (its message and traceback, the engine's) rather than as the scripts' own error (ns_call_passing).
struct raised_error {
  std::exception_ptr thrown;  // null while none was raised
  std::string raised;         // the string raised in Lua for it: its message
  std::string traceback;      // a script_error's traceback ("" for another error)
  bool limit = false;         // a script limit had tripped when it was raised (the limit stopped the function)
  // Keeps `e`, the error being raised, and `thrown`, it as an exception (std::current_exception(), or a copy of `e`).
  // [-0, +0, -]
  void keep(lua_State* L, const std::exception& e, std::exception_ptr thrown);
};

// ns_call for a call into scripts whose C++ functions keep what they raise in `kept`. When the error that ends the call
// is kept's, it is thrown again as it was: a limit that tripped while kept's function ran (the message is then the
// limit's whatever the scripts made of it, ns_pcall), else the very string kept's function raised, passed through or
// raised again unchanged (told by that string, whole before the handler's traceback: ns_error_raised, never by the
// capped message); with `context_kept`, a script_error gets `context` as ns_call adds it, its traceback kept. Any other
// error is thrown as ns_call throws it, `context` added. [-(nargs+1), +nres, e]
void ns_call_passing(lua_State* L, int nargs, int nres, const raised_error& kept, const std::string& context,
                     bool context_kept);

// ns_pcall that converts an error into ns::script_error (message + separated traceback), adding `context`
// as an indented second line when non-empty. [-(nargs+1), +nres, e]
void ns_call(lua_State* L, int nargs, int nres, const std::string& context = {});
// Whether an error message starts at a script's line ("file.lua:12: …"): a script's runtime error, or one a user's
// script (--scripts, a model file) raised — not a message a bundled script wrote for the user with error(msg, 0).
bool ns_message_positioned(std::string_view msg);
// ns_call for an entry point whose own messages are written for the user ("m.toml: needs ttft_ms or tpot_ms"): such a
// message (not positioned, not a script limit's) is thrown whole, without `context`'s internal line; any other error
// as ns_call throws it. [-(nargs+1), +nres, e]
void ns_call_said(lua_State* L, int nargs, int nres, const std::string& context);
// ns_call's conversion alone: pops the error ns_pcall left (`status` its result) and throws it. [-1, +0, e]
[[noreturn]] void ns_error_throw(lua_State* L, int status, const std::string& context = {});

// The one record of the last setting that could not run (an ns::infeasible raised into Lua by ns_catch, or
// require("neusight").infeasible(msg) in Lua): `msg` is kept in the registry until ns_infeasible_take. An error is a
// setting's, not the input's bug, when its text carries the message taken (neusight.is_infeasible: serve --sweep makes
// a row of it, and stops at any other error). [-0, +0, m]
void ns_infeasible_note(lua_State* L, const std::string& msg);
// Pushes the message noted last (nil when none) and forgets it. [-0, +1, m]
void ns_infeasible_take(lua_State* L);

// Runs `body` inside a lua_CFunction; a C++ exception becomes a Lua error raised after the catch block,
// so no C++ exception ever crosses into Lua (LÖVE luax_catchexcept).
// The other way round, a Lua error raised inside `body` (a lua_* call that fails: out of memory, a script limit) is
// safe too: the engine links Debian's C++ build of Lua (pkg-config lua5.4-c++, CMakeLists.txt), whose errors are C++
// exceptions (LUAI_THROW), not longjmp: they unwind `body`'s frames and run their destructors on the way to the
// pcall. They are not std::exception, so the catch below lets them through; engine code must never swallow them
// (a `catch (...)` rethrows: engine/lua/wrap_graph.cpp).
// An ns::infeasible (a setting that cannot run) is noted as such (ns_infeasible_note) before it is raised.
template <class F>
int ns_catch(lua_State* L, F&& body) {
  std::string msg;
  bool setting = false;
  try {
    return body();
  } catch (const std::exception& e) {
    msg = e.what();
    setting = dynamic_cast<const infeasible*>(&e) != nullptr;
  }
  if (setting) ns_infeasible_note(L, msg);
  lua_pushlstring(L, msg.data(), msg.size());
  return lua_error(L);
}

// Debug-only check that a scope leaves the stack as it found it (plus `delta`).
class stack_guard {
 public:
  explicit stack_guard(lua_State* L, int delta = 0) : L_(L), top_(lua_gettop(L) + delta) {}
  ~stack_guard() { assert(std::uncaught_exceptions() > 0 || lua_gettop(L_) == top_); }
  stack_guard(const stack_guard&) = delete;
  stack_guard& operator=(const stack_guard&) = delete;

 private:
  lua_State* L_;
  int top_;
};

// Puts the stack back to its height at construction when the scope ends, normally or by an exception.
class stack_restore {
 public:
  explicit stack_restore(lua_State* L) : L_(L), top_(lua_gettop(L)) {}
  ~stack_restore() { lua_settop(L_, top_); }
  stack_restore(const stack_restore&) = delete;
  stack_restore& operator=(const stack_restore&) = delete;

 private:
  lua_State* L_;
  int top_;
};

// Loads a Lua text chunk (never bytecode) named "@<chunkname>" and sets its _ENV upvalue to the table at
// `env_idx`, leaving the function on the stack. [-0, +1, e] throws script_error on syntax errors.
void ns_load_chunk(lua_State* L, const std::string& source, const std::string& chunkname, int env_idx);

// Reads a whole script or config file (a regular file of at most 1 MB, text_file_read); throws ns::error
// "<display>: cannot read file" and the like.
std::string file_read(const std::string& path, const std::string& display);

}  // namespace ns
