// engine/cli/models_cmd.h — `neusight eval models`: end-to-end forecasts of the reference's operator graphs
// against the measured labels, per GPU (the paper's Table 5).
#pragma once
#include <string>
#include <vector>

namespace ns {

struct eval_models_flags {
  std::vector<std::string> labels;  // label/<GPU> folders, label/ itself, or label JSON files
  std::string graphs;               // opgraph folder; "" = <label root>/../opgraph
  std::vector<std::string> gpu_files;  // --gpu FILE: the user's GPU files for label folders of theirs (gpu_data_resolver)
  std::string predictor = "neusight", weights, format = "table", output;
  std::string overhead = "default";  // on, off or default (scripts/neusight/overhead.lua decides)
  std::vector<std::string> ops_dirs, scripts_dirs;  // --ops, --scripts (cli/paths.h session_options_for)
  std::vector<std::string> gpus_dirs;  // --gpus-dir (cli/paths.h session_options_for)
  bool verbose = false;                              // -v
  bool calibrate_each = false;  // --calibrate-each: each label in turn calibrates its GPU; the others are scored
};
int eval_models_main(const eval_models_flags& f);

struct flag_targets;  // cli/flags.h
int eval_models_command(flag_targets& t, int argc, char** argv);  // `neusight eval models` (cli/app.cpp's table)

}  // namespace ns
