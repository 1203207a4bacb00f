// engine/lua/script_limits.h — how much a script may run and allocate per call from C++ (no Lua headers here).
#pragma once
#include <cstdint>

namespace ns {

// What one call from C++ into a script may use before it is stopped with "<file>:<line>: script ran longer than
// …" (a count hook) or "… used more than N MB of memory" (the state's allocator). 0 means no limit.
struct script_limits {
  int64_t instructions = 0;  // Lua VM instructions per call from C++ (--script-budget, NEUSIGHT_SCRIPT_BUDGET)
  int64_t memory_mb = 0;     // Lua heap while a script runs (--script-memory, NEUSIGHT_SCRIPT_MEMORY)
  double seconds = 0;        // wall clock per call, the backstop for a script stuck inside one library call such as a
                             // string pattern match (--script-timeout, NEUSIGHT_SCRIPT_TIMEOUT); the process exits
                             // 1 second after it when the call does not return
};

// The built-in limits, then NEUSIGHT_SCRIPT_BUDGET / _MEMORY / _TIMEOUT, then what script_limits_set gave (CLI flags).
// Throws ns::error on a malformed environment variable.
script_limits script_limits_default();
inline constexpr int64_t script_budget_default = 1'000'000'000;
inline constexpr int64_t script_memory_mb_default = 512;
inline constexpr double script_timeout_default = 8;
// Process-wide overrides from the command line; a field left at -1 keeps the environment's or the default.
void script_limits_set(int64_t instructions, int64_t memory_mb, double seconds);

}  // namespace ns
