// engine/lua/lua_state.cpp — state lifetime, panic backstop, traceback-carrying protected calls, script limits.
#include "lua/lua_state.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

namespace ns {

// Allocator and hook state of one lua_State: the heap size, the depth of calls from C++ (ns_pcall), what the current
// top-level call used, and the watchdog thread of the time limit.
struct lua_guard {
  script_limits limits;
  size_t heap = 0;         // bytes the allocator holds
  size_t heap_peak = 0;
  // NEUSIGHT_SCRIPT_STATS=1 (stderr) or =FILE (appended): hook every call from its start and report the longest
  // call and the peak heap when the state closes, to check the limits' margins.
  std::string stats;
  int64_t used_max = 0;
  double seconds_max = 0;  // the longest call (or stretch between two progress reports), CPU seconds
  int depth = 0;           // nested ns_pcall calls; limits apply while > 0
  int64_t used = 0;        // instructions of the current top-level call (counted per hook_every)
  std::string tripped;     // the message of the first limit the current call ran over ("" when none)
  // The refused allocation that set `tripped`: Lua collects garbage and retries it once; when that retry succeeds
  // the limit was not hit after all.
  bool trip_pending = false;
  const void* refused_ptr = nullptr;
  size_t refused_osize = 0, refused_nsize = 0;
  lua_State* L = nullptr;

  // time limit (watchdog thread): CPU time of the thread that runs the call, so that a busy machine does not stop a
  // script that a quiet one would run to the end
  std::mutex mu;
  std::condition_variable cv;
  std::thread watchdog;
  bool stop = false;
  bool active = false;                       // a top-level call is running
  bool armed = false;                        // the count hook was set for the current call
  pthread_t thread{};                        // the thread that runs the current call
  clockid_t clock{};                         // that thread's CPU-time clock
  // The call (or stretch) the watchdog timed last, and the clock's reading when it first saw it: ns_pcall only bumps
  // `call`, so that a short call costs no clock read (the start is late by at most one watchdog period).
  uint64_t call = 0, call_seen = 0;
  double start = 0;
  uint64_t calls = 0;                        // top-level calls, for the stats
  std::atomic<bool> timed_out{false};
  char where[256] = "";                      // the script the current call runs (chunk name), for the watchdog's exit

  ~lua_guard();
};

namespace {
std::atomic<lua_guard*> arm_target{nullptr};  // the state whose hook the arm signal sets
}  // namespace

lua_guard::~lua_guard() {
  {
    if (watchdog.joinable()) {
      {
        std::lock_guard<std::mutex> lk(mu);
        stop = true;
      }
      cv.notify_all();
      watchdog.join();
    }
  }
  lua_guard* self = this;
  arm_target.compare_exchange_strong(self, nullptr);
}

namespace {

constexpr int hook_every = 1000;   // instructions between two count-hook calls
// A count hook makes the VM check a trap on every instruction (~30% slower Lua), so it is set only for a call that
// has already run this long (CPU seconds): the watchdog then sends arm_signal to the thread, whose handler sets it (as
// lua.c does for Ctrl-C). Most calls return well before; a simulation that reports progress (ns_limits_renew) starts
// bare again at each report.
constexpr double arm_after_s = 0.1;

double cpu_seconds(clockid_t c) {
  timespec ts{};
  if (clock_gettime(c, &ts) != 0) return 0;
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

lua_guard* guard_of(lua_State* L) {
  void* ud = nullptr;
  lua_getallocf(L, &ud);
  return static_cast<lua_guard*>(ud);
}

std::string mb_text(int64_t mb) { return std::to_string(mb) + " MB"; }

// The innermost Lua function on the stack as "chunk:line" ("" when there is none). Reads the call info only: it
// neither allocates nor raises, so the allocator may call it.
std::string where_now(lua_State* L) {
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); ++level) {
    if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) return std::string(ar.short_src) + ":" + std::to_string(ar.currentline);
  }
  return {};
}

// lua_Alloc with a cap on the heap while a script runs (depth > 0); the host's own pushes are never refused, so an
// allocation failure can only happen inside a protected call.
void* l_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* g = static_cast<lua_guard*>(ud);
  const size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    std::free(ptr);
    g->heap -= old;
    return nullptr;
  }
  // the limit in bytes, saturated: 2^44 MB and more wrapped size_t (2^44 MB gave a limit of 0 bytes)
  const auto limit_bytes = [](int64_t mb) {
    constexpr size_t mib = size_t(1) << 20;
    return uint64_t(mb) > std::numeric_limits<size_t>::max() / mib ? std::numeric_limits<size_t>::max() : size_t(mb) * mib;
  };
  if (nsize > old && g->depth > 0 && g->limits.memory_mb > 0 && g->heap - old + nsize > limit_bytes(g->limits.memory_mb)) {
    if (g->tripped.empty() && g->L) {
      std::string at = where_now(g->L);
      g->tripped = (at.empty() ? std::string("script") : at + ": script") + " used more than " +
                   mb_text(g->limits.memory_mb) + " of memory; raise with --script-memory MB or NEUSIGHT_SCRIPT_MEMORY";
      g->trip_pending = true, g->refused_ptr = ptr, g->refused_osize = osize, g->refused_nsize = nsize;
    }
    return nullptr;
  }
  void* p = std::realloc(ptr, nsize);
  if (p) {
    g->heap = g->heap - old + nsize;
    if (g->heap > g->heap_peak) g->heap_peak = g->heap;
    if (g->trip_pending && ptr == g->refused_ptr && osize == g->refused_osize && nsize == g->refused_nsize)
      g->tripped.clear();  // the retry after an emergency collection fitted
    g->trip_pending = false;
  }
  return p;
}

// Count hook: charges hook_every instructions to the current call and raises once it runs over a limit; keeps
// raising after that, so that a script catching the error with pcall cannot go on.
// The message of the limit the current call ran over, at `at` ("chunk:line"); `budget`: the instruction budget, else
// the time limit.
std::string limit_message(const lua_guard* g, const std::string& at, bool budget) {
  char num[32];
  std::snprintf(num, sizeof num, "%g", g->limits.seconds);
  return budget ? at + ": script ran longer than " + std::to_string(g->limits.instructions) +
                      " instructions; raise with --script-budget N or NEUSIGHT_SCRIPT_BUDGET"
                : at + ": script ran longer than " + num + " s of CPU time; raise with --script-timeout "
                      "SECONDS or NEUSIGHT_SCRIPT_TIMEOUT";
}

void l_hook(lua_State* L, lua_Debug* ar) {
  lua_guard* g = guard_of(L);
  g->used += hook_every;
  if (g->depth == 0) return;  // a finalizer run by the collector between calls
  if (g->tripped.empty()) {
    const bool budget = g->limits.instructions > 0 && g->used > g->limits.instructions;
    const bool late = g->timed_out.load(std::memory_order_relaxed);
    if (!budget && !late) return;
    lua_getinfo(L, "Sl", ar);
    const std::string at = ar->currentline > 0 ? std::string(ar->short_src) + ":" + std::to_string(ar->currentline)
                                               : std::string(ar->short_src);
    g->tripped = limit_message(g, at, budget);
  }
  lua_pushstring(L, g->tripped.c_str());
  lua_error(L);
}

void on_arm_signal(int) {
  if (lua_guard* g = arm_target.load()) lua_sethook(g->L, l_hook, LUA_MASKCOUNT, hook_every);  // async-safe
}

int arm_signal() {
  static const int sig = [] {
    const int s = SIGRTMIN + 4;
    struct sigaction sa {};
    sa.sa_handler = on_arm_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(s, &sa, nullptr);
    return s;
  }();
  return sig;
}

// Arms the count hook of a call that has run longer than arm_after_s, marks it late after limits.seconds (the hook
// then raises), and ends the process one second later when the call still has not returned (stuck in one C call,
// where no hook runs). All in CPU seconds of the thread that runs the call.
void watchdog_loop(lua_guard* g) {
  std::unique_lock<std::mutex> lk(g->mu);
  while (!g->stop) {
    g->cv.wait_for(lk, std::chrono::milliseconds(20));
    if (!g->active) continue;
    if (g->call != g->call_seen) {
      g->call_seen = g->call;
      g->start = cpu_seconds(g->clock);
      continue;
    }
    const double s = cpu_seconds(g->clock) - g->start;
    if (s > g->seconds_max) g->seconds_max = s;
    if (!g->armed && s >= arm_after_s) {
      g->armed = true;
      arm_target.store(g);
      pthread_kill(g->thread, arm_signal());
    }
    if (g->limits.seconds <= 0) continue;
    if (s > g->limits.seconds) g->timed_out.store(true, std::memory_order_relaxed);
    if (s > g->limits.seconds + 1) {
      std::fprintf(stderr,
                   "neusight: %s: script ran longer than %g s of CPU time and did not stop (stuck in a library call "
                   "such as a string pattern match); raise with --script-timeout SECONDS or NEUSIGHT_SCRIPT_TIMEOUT\n",
                   g->where[0] ? g->where : "script", g->limits.seconds);
      std::fflush(stderr);
      _exit(1);
    }
  }
}

int l_panic(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  std::fprintf(stderr, "neusight: unprotected Lua error: %s\n", msg ? msg : "(not a string)");
  std::abort();
}

// What the message handler puts between an error's message and its traceback (ns_call and ns_error_raised cut there).
constexpr std::string_view traceback_mark = "\nstack traceback:";

// Message handler: turns any error object into "message\nstack traceback:..." (an object with a __tostring: its text
// alone). [-1, +1, m]
int l_traceback(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  if (msg == nullptr) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

// Overrides from the command line (-1: not given).
int64_t set_instructions = -1, set_memory_mb = -1;
double set_seconds = -1;

template <class T>
T env_limit(const char* name, T fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(d >= 0) || d > 9e18)
    throw error(std::string(name) + ": expected a non-negative number (0: no limit), got '" + v + "'");
  return T(d);
}

}  // namespace

script_limits script_limits_default() {
  script_limits l;
  l.instructions = env_limit<int64_t>("NEUSIGHT_SCRIPT_BUDGET", script_budget_default);
  l.memory_mb = env_limit<int64_t>("NEUSIGHT_SCRIPT_MEMORY", script_memory_mb_default);
  l.seconds = env_limit<double>("NEUSIGHT_SCRIPT_TIMEOUT", script_timeout_default);
  if (set_instructions >= 0) l.instructions = set_instructions;
  if (set_memory_mb >= 0) l.memory_mb = set_memory_mb;
  if (set_seconds >= 0) l.seconds = set_seconds;
  return l;
}

void script_limits_set(int64_t instructions, int64_t memory_mb, double seconds) {
  set_instructions = instructions, set_memory_mb = memory_mb, set_seconds = seconds;
}

lua_state::lua_state(const script_limits& limits) : guard_(std::make_unique<lua_guard>()), L_(nullptr) {
  guard_->limits = limits;
  L_ = lua_newstate(l_alloc, guard_.get());
  if (L_ == nullptr) throw error("cannot create Lua state (out of memory)");
  guard_->L = L_;
  const char* stats = std::getenv("NEUSIGHT_SCRIPT_STATS");
  if (stats) guard_->stats = stats;
  lua_atpanic(L_, l_panic);
  luaL_openlibs(L_);
  limits_set(limits);
}

lua_state::~lua_state() {
  if (!guard_->stats.empty()) {
    FILE* f = guard_->stats == "1" ? stderr : std::fopen(guard_->stats.c_str(), "a");
    if (f) {
      std::fprintf(f, "neusight: script stats: %llu calls, longest %lld instructions (budget %lld), %.2f s of CPU "
                      "time (timeout %g s), peak Lua heap %.1f MB (cap %lld MB)\n",
                   static_cast<unsigned long long>(guard_->calls),
                   static_cast<long long>(guard_->used_max), static_cast<long long>(guard_->limits.instructions),
                   guard_->seconds_max, guard_->limits.seconds, double(guard_->heap_peak) / (1024 * 1024),
                   static_cast<long long>(guard_->limits.memory_mb));
      if (f != stderr) std::fclose(f);
    }
  }
  lua_close(L_);
  guard_.reset();  // joins the watchdog
}

void lua_state::limits_set(const script_limits& limits) {
  guard_->limits = limits;
  if (limits.instructions > 0 || limits.seconds > 0) arm_signal();  // installs the handler before any thread runs
}

bool ns_limit_tripped(lua_State* L) { return !guard_of(L)->tripped.empty(); }

void ns_limits_renew(lua_State* L) {
  lua_guard* g = guard_of(L);
  if (g->depth == 0 || !g->tripped.empty()) return;
  std::lock_guard<std::mutex> lk(g->mu);
  if (!g->active) return;  // no limits
  if (g->timed_out.load(std::memory_order_relaxed) || (g->limits.instructions > 0 && g->used > g->limits.instructions))
    return;  // already over: the hook raises at its next count
  if (g->used > g->used_max) g->used_max = g->used;
  g->used = 0;
  ++g->call;  // the watchdog times a new stretch
  if (g->armed && g->stats.empty()) lua_sethook(L, nullptr, 0, 0), g->armed = false;  // bare again, as a new call
}

limits_mark ns_limits_enter(lua_State* L) {
  limits_mark m;
  lua_guard* g = guard_of(L);
  if (g->depth == 0) return m;
  bool budget = false;
  if (g->tripped.empty()) {
    // Whether the caller is over and, if not, the entry, in one step under the lock: the watchdog marks a call late
    // under it, so a deadline passes either before this (the call stops here, at the caller's line) or after it (in
    // the call's own stretch, timed afresh). Checked apart, a deadline passing between the check and the entry let
    // the call run under an expired limit: its own scripts tripped it at their line, or nothing did (the flaky
    // "loops over a primitive" case of tests/cli/test_scripts_path_cli.cpp).
    std::lock_guard<std::mutex> lk(g->mu);
    budget = g->limits.instructions > 0 && g->used > g->limits.instructions;
    if (!budget && !g->timed_out.load(std::memory_order_relaxed)) {
      if (!g->active) return m;  // no limits
      m.valid = true;
      m.used = g->used;
      // the watchdog has not timed this stretch yet when it has not seen it (at most one period late): nothing elapsed
      m.elapsed = g->call == g->call_seen ? cpu_seconds(g->clock) - g->start : 0;
      // as ns_limits_renew, but the count hook stays as it is: setting it again would restart its count, and a loop
      // of short calls would never reach the next count
      if (g->used > g->used_max) g->used_max = g->used;
      g->used = 0;
      ++g->call;
      return m;
    }
  }
  // over (the lock released: pushing may raise): the trip at the calling script's line (a C function has none)
  if (g->tripped.empty()) {
    const std::string at = where_now(L);
    g->tripped = limit_message(g, at.empty() ? std::string("script") : at, budget);
  }
  m.over = true;
  lua_pushstring(L, g->tripped.c_str());
  return m;
}

void ns_limits_leave(lua_State* L, const limits_mark& m) {
  if (!m.valid) return;
  lua_guard* g = guard_of(L);
  if (!g->tripped.empty()) return;  // stopped: stays stopped
  std::lock_guard<std::mutex> lk(g->mu);
  if (!g->active) return;
  if (g->used > g->used_max) g->used_max = g->used;
  if (g->timed_out.load(std::memory_order_relaxed) || (g->limits.instructions > 0 && g->used > g->limits.instructions))
    return;  // the call ran over: the hook raises at its next count
  g->used = m.used;
  ++g->call;  // the caller's stretch again, from where it was: the watchdog takes it as seen
  g->call_seen = g->call;
  g->start = cpu_seconds(g->clock) - m.elapsed;
}

int ns_pcall(lua_State* L, int nargs, int nres) {
  const int base = lua_gettop(L) - nargs;  // function index
  lua_guard* g = guard_of(L);
  const bool top = g->depth == 0;
  if (top) {
    ++g->calls;
    g->used = 0;
    g->tripped.clear();
    g->trip_pending = false;
    if (g->limits.seconds > 0 || g->limits.instructions > 0) {
      lua_Debug ar;
      lua_pushvalue(L, base);
      lua_getinfo(L, ">S", &ar);  // pops the copy
      std::lock_guard<std::mutex> lk(g->mu);
      if (g->armed) lua_sethook(L, nullptr, 0, 0), g->armed = false;  // the last call ran long; this one starts bare
      if (!g->stats.empty()) lua_sethook(L, l_hook, LUA_MASKCOUNT, hook_every), g->armed = true;
      std::snprintf(g->where, sizeof g->where, "%s", ar.short_src);
      g->thread = pthread_self();
      if (pthread_getcpuclockid(g->thread, &g->clock) != 0) g->clock = CLOCK_THREAD_CPUTIME_ID;
      ++g->call;
      g->active = true;
      g->timed_out.store(false, std::memory_order_relaxed);
      if (!g->watchdog.joinable()) g->watchdog = std::thread(watchdog_loop, g);
    }
  }
  // A call from a primitive a script called (scripts/neusight/pipeline.lua's run.workload()): the watchdog's message
  // names this script while it runs. Only under a time limit: the name is read by the watchdog's exit of a call stuck
  // in one library call alone, which the time limit makes (an instruction budget is the count hook's, which names
  // the line itself).
  char outer_where[sizeof g->where];
  const bool nested_named = !top && g->limits.seconds > 0;
  if (nested_named) {
    lua_Debug ar;
    lua_pushvalue(L, base);
    lua_getinfo(L, ">S", &ar);  // pops the copy
    std::lock_guard<std::mutex> lk(g->mu);
    std::memcpy(outer_where, g->where, sizeof outer_where);
    std::snprintf(g->where, sizeof g->where, "%s", ar.short_src);
  }
  lua_pushcfunction(L, l_traceback);
  lua_insert(L, base);                     // stack: handler f args...
  ++g->depth;
  const int status = lua_pcall(L, nargs, nres, base);
  --g->depth;
  if (nested_named) {
    std::lock_guard<std::mutex> lk(g->mu);
    std::memcpy(g->where, outer_where, sizeof outer_where);
  }
  lua_remove(L, base);                     // drop the handler
  if (top && g->used > g->used_max) g->used_max = g->used;
  if (top && (g->limits.seconds > 0 || g->limits.instructions > 0)) {
    std::lock_guard<std::mutex> lk(g->mu);
    g->active = false;
  }
  if (status != LUA_OK && !g->tripped.empty()) {  // the limit's message, whatever the script made of the error
    lua_pop(L, 1);
    lua_pushstring(L, g->tripped.c_str());
  }
  return status;
}

bool ns_error_raised(lua_State* L, int status, std::string_view raised) {
  // The handler ran (a runtime error: not out of memory, nor an error in the handler) and made `raised` its message,
  // a traceback after it. Read at the length of `raised`, not cut at a search for the mark: the raised string may
  // hold the mark, and so may the frames (a function's name).
  if (status != LUA_ERRRUN || lua_type(L, -1) != LUA_TSTRING) return false;
  size_t n = 0;
  const char* s = lua_tolstring(L, -1, &n);  // before `n` is read
  const std::string_view text(s, n);
  return text.size() > raised.size() && text.compare(0, raised.size(), raised) == 0 &&
         text.compare(raised.size(), traceback_mark.size(), traceback_mark) == 0;
}

void ns_call(lua_State* L, int nargs, int nres, const std::string& context) {
  const int status = ns_pcall(L, nargs, nres);
  if (status != LUA_OK) ns_error_throw(L, status, context);
}

bool ns_message_positioned(std::string_view msg) {
  const std::string_view head = msg.substr(0, msg.find_first_of(" \n"));
  size_t colon = head.find(':');
  while (colon != std::string_view::npos) {
    size_t i = colon + 1;
    while (i < head.size() && head[i] >= '0' && head[i] <= '9') ++i;
    if (i > colon + 1 && i < head.size() && head[i] == ':') return true;
    colon = head.find(':', colon + 1);
  }
  return false;
}

void ns_call_said(lua_State* L, int nargs, int nres, const std::string& context) {
  const int status = ns_pcall(L, nargs, nres);
  if (status == LUA_OK) return;
  const char* msg = lua_tostring(L, -1);
  const bool said = status == LUA_ERRRUN && msg && !ns_limit_tripped(L) && !ns_message_positioned(msg);
  ns_error_throw(L, status, said ? std::string() : context);
}

namespace {
constexpr const char* infeasible_key = "neusight.infeasible";  // the registry field of ns_infeasible_note
}  // namespace

void ns_infeasible_note(lua_State* L, const std::string& msg) {
  lua_pushlstring(L, msg.data(), msg.size());
  lua_setfield(L, LUA_REGISTRYINDEX, infeasible_key);
}

void ns_infeasible_take(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, infeasible_key);  // stack: msg|nil
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, infeasible_key);
}

void raised_error::keep(lua_State* L, const std::exception& e, std::exception_ptr e_thrown) {
  thrown = std::move(e_thrown);
  raised = e.what();
  const auto* se = dynamic_cast<const script_error*>(&e);
  traceback = se ? se->traceback : std::string();
  limit = ns_limit_tripped(L);
}

void ns_call_passing(lua_State* L, int nargs, int nres, const raised_error& kept, const std::string& context,
                     bool context_kept) {
  const int status = ns_pcall(L, nargs, nres);
  if (status == LUA_OK) return;
  if (kept.thrown && (ns_limit_tripped(L) ? kept.limit : ns_error_raised(L, status, kept.raised))) {
    lua_pop(L, 1);
    if (!context_kept || context.empty()) std::rethrow_exception(kept.thrown);
    throw script_error(kept.raised + "\n    " + context, kept.traceback);
  }
  ns_error_throw(L, status, context);
}

void ns_error_throw(lua_State* L, int status, const std::string& context) {
  std::string full = lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error)";
  lua_pop(L, 1);
  if (status == LUA_ERRMEM && !ns_limit_tripped(L)) full = "out of memory in a script";
  std::string tb;
  const auto cut = full.find(traceback_mark);
  if (cut != std::string::npos) {
    tb = text_cap(full.substr(cut + 1), 16384);
    full.erase(cut);
  }
  full = text_cap(full);
  if (!context.empty()) full += "\n    " + context;
  throw script_error(full, tb);
}

void ns_load_chunk(lua_State* L, const std::string& source, const std::string& chunkname, int env_idx) {
  env_idx = lua_absindex(L, env_idx);
  const std::string name = "@" + chunkname;
  if (luaL_loadbufferx(L, source.data(), source.size(), name.c_str(), "t") != LUA_OK) {
    std::string msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "cannot load chunk (out of memory)";
    lua_pop(L, 1);
    throw script_error(text_cap(msg), "");
  }
  lua_pushvalue(L, env_idx);
  if (lua_setupvalue(L, -2, 1) == nullptr) lua_pop(L, 1);  // a chunk's first upvalue is _ENV
}

std::string file_read(const std::string& path, const std::string& display) {
  return text_file_read(path, display, text_file_max_script);
}

}  // namespace ns
