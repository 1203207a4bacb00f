// tests/session_util.h — the session_options of a test that makes its own session, set by field: the aggregate's
// positional form (session_options{root, {}, {}, {}, {}}) left the later members out, which -Wextra's
// -Wmissing-field-initializers warned of at every use.
#pragma once

#include <filesystem>
#include <utility>
#include <vector>

#include "lua/session.h"

namespace ns_test {

inline ns::session_options session_opts(const std::filesystem::path& data_root,
                                        std::vector<std::filesystem::path> script_dirs = {},
                                        std::vector<std::filesystem::path> ops_dirs = {}) {
  ns::session_options o;
  o.data_root = data_root;
  o.script_dirs = std::move(script_dirs);
  o.ops_dirs = std::move(ops_dirs);
  return o;
}

}  // namespace ns_test
