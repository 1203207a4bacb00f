// engine/cli/paths.cpp — locating the data root from the executable's own path (/proc/self/exe).
#include "cli/paths.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/text.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;

namespace {
bool is_data_root(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p / "gpus", ec) && fs::is_directory(p / "ops", ec) && fs::is_directory(p / "scripts", ec);
}
}  // namespace

fs::path data_root_find() {
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "share" / "neusight");
    if (exe.parent_path() == fs::weakly_canonical(NEUSIGHT_BINARY_DIR, ec)) candidates.push_back(NEUSIGHT_SOURCE_DIR);
  }
  candidates.push_back(NEUSIGHT_INSTALL_DATADIR);
  candidates.push_back(NEUSIGHT_SOURCE_DIR);
  std::string looked;
  for (const auto& c : candidates) {
    if (is_data_root(c)) return c;
    looked += " " + c.string();
  }
  throw error("cannot find the bundled gpus/ ops/ scripts/ folders (looked in:" + looked + ")");
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  std::string s(v);
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw error(std::string(name) + "=" + v + ": expected 1, true, yes or on (set) or 0, false, no, off or empty (unset)");
}

bool memo_disabled() { return env_flag("NEUSIGHT_NO_CACHE"); }

session_options session_options_for(const std::vector<std::string>& ops_dirs, const std::vector<std::string>& scripts_dirs,
                                    const std::vector<std::string>& gpus_dirs, bool verbose, bool calibration) {
  session_options o;
  o.data_root = data_root_find();
  o.memo = !memo_disabled();
  for (const auto& d : ops_dirs) o.ops_dirs.emplace_back(d);
  for (const auto& d : scripts_dirs) o.script_dirs.emplace_back(d);
  if (const char* env = std::getenv("NEUSIGHT_OPS_PATH")) o.ops_path_env = env;
  if (const char* env = std::getenv("NEUSIGHT_SCRIPTS_PATH")) o.scripts_path_env = env;
  for (const auto& d : gpus_dirs) o.gpu_dirs.emplace_back(d);
  if (const char* env = std::getenv("NEUSIGHT_GPUS_PATH")) o.gpus_path_env = env;
  // every command's forecasts; run/predict also --no-calibration. Read even under --no-calibration: a bad value is
  // an error wherever it is set
  const bool no_calibration = env_flag("NEUSIGHT_NO_CALIBRATION");
  o.calibration = calibration && !no_calibration;
  o.verbose = verbose;
  return o;
}

void predictor_warnings::take(const predictor& p) {
  for (auto& w : p.warnings())
    if (std::find(said_.begin(), said_.end(), w) == said_.end()) said_.push_back(std::move(w));
}

std::vector<std::string> predictor_warnings::said(const session& s) const {
  std::vector<std::string> out = said_;
  // the predictor's warnings end with it already (weights_noted_predictor) once it predicted anything
  if (std::string note = s.weights_unused_note(); !note.empty() && std::find(out.begin(), out.end(), note) == out.end())
    out.push_back(std::move(note));
  return out;
}

std::vector<std::string> predictor_warnings::say(const session& s) const {
  std::vector<std::string> out = said(s);
  for (const auto& w : out) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
  return out;
}

}  // namespace ns
