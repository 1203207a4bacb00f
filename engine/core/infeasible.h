// engine/core/infeasible.h — the error of a setting that cannot run as asked, told apart from the input's bugs.
#pragma once
#include "core/text.h"

namespace ns {

// A setting that cannot run as asked (a GPU without units for the kernel's dtype, …): the input is well formed, the
// setting infeasible. Lua code raises the same with require("neusight").infeasible(msg). A caller that tries several
// settings (`serve --sweep`) makes a row of its reason; any other error is the input's bug and stops it
// (engine/lua/lua_state.h ns_infeasible_note).
struct infeasible : error {
  using error::error;
};

}  // namespace ns
