// engine/cli/paths.h — where the bundled gpus/ ops/ scripts/ weights/ live, found without environment variables.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ns {

// Installed layout (<exe>/../share/neusight) first, then the source tree for a binary in the build tree,
// then the configured install prefix. Throws ns::error listing the places it looked.
std::filesystem::path data_root_find();

// NEUSIGHT_NO_CACHE set to anything but "" or "0": no reuse of expansions, tiles and predictions across the
// forecasts of one process (session_options::memo, predictor::memo_enable); results are the same either way.
bool memo_disabled();

struct session_options;
// The user parts of both search paths: --ops and --scripts directories, NEUSIGHT_OPS_PATH and NEUSIGHT_SCRIPTS_PATH
// (session.h: search_path_make puts them before the bundled ops/ and scripts/). Every command that makes a session
// from the command line sets them here.
void session_paths_set(session_options& o, const std::vector<std::string>& ops_dirs,
                       const std::vector<std::string>& scripts_dirs, bool verbose);

}  // namespace ns
