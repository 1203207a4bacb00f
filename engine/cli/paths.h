// engine/cli/paths.h — where the bundled gpus/ ops/ scripts/ weights/ live, found without environment variables.
#pragma once
#include <filesystem>

namespace ns {

// Installed layout (<exe>/../share/neusight) first, then the source tree for a binary in the build tree,
// then the configured install prefix. Throws ns::error listing the places it looked.
std::filesystem::path data_root_find();

// NEUSIGHT_NO_CACHE set to anything but "" or "0": no reuse of expansions, tiles and predictions across the
// forecasts of one process (session_options::memo, predictor::memo_enable); results are the same either way.
bool memo_disabled();

}  // namespace ns
