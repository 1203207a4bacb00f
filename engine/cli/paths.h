// engine/cli/paths.h — where the bundled gpus/ ops/ scripts/ weights/ live, found without environment variables.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ns {

// Installed layout (<exe>/../share/neusight) first, then the source tree for a binary in the build tree,
// then the configured install prefix. Throws ns::error listing the places it looked.
std::filesystem::path data_root_find();

// A yes/no environment variable: 1, true, yes, on (any case) → true; unset, "", 0, false, no, off → false; anything
// else throws ns::error naming the variable and its value (a typo such as "treu" or "flase" is never read as either).
bool env_flag(const char* name);

// NEUSIGHT_NO_CACHE true (env_flag): no reuse of expansions, tiles and predictions across the
// forecasts of one process (session_options::memo, predictor::memo_enable); results are the same either way.
bool memo_disabled();

struct session_options;
// The options every command's session starts from, in one place: the bundled data root (data_root_find), the user
// parts of the search paths (--ops, --scripts and --gpus-dir directories, NEUSIGHT_OPS_PATH, NEUSIGHT_SCRIPTS_PATH and
// NEUSIGHT_GPUS_PATH; session.h:
// search_path_make puts them before the bundled ops/ and scripts/), -v, the per-process memos (off with
// NEUSIGHT_NO_CACHE, memo_disabled) and the GPUs' calibration files (off with NEUSIGHT_NO_CALIBRATION=1, read by env_flag, or
// `calibration` false: --no-calibration).
session_options session_options_for(const std::vector<std::string>& ops_dirs, const std::vector<std::string>& scripts_dirs,
                                    const std::vector<std::string>& gpus_dirs, bool verbose, bool calibration = true);

class session;
class predictor;
// What a command that prints no forecast of its own (eval kernels, eval models, scale) says of its predictor's
// forecasts, as a forecast carries them in its warnings: the predictor's warnings() after each prediction (take: a
// family priced by the roofline fallback because the weights root holds none of it for the GPU's vendor, --weights
// weights/nvidia instead of --weights weights; …), once each in the order first said, ending with the session's
// weights_unused_note (a --weights no predictor read; said also where no prediction was made). said(): the list, for
// the command's JSON (warnings) or its own warnings; say(): the same, each on stderr, never silently.
class predictor_warnings {
 public:
  void take(const predictor& p);
  std::vector<std::string> said(const session& s) const;
  std::vector<std::string> say(const session& s) const;

 private:
  std::vector<std::string> said_;
};

}  // namespace ns
