// engine/cli/kernels_cmd.h — `neusight train` and `neusight eval kernels`: the kernel-level predictor workflow.
#pragma once
#include <string>
#include <vector>

#include "core/tile_model.h"

namespace ns {

struct train_flags {
  std::string family, out, vendor, tiles = "measured";
  std::vector<std::string> data, exclude_gpus;
  std::vector<std::string> gpu_files;  // --gpu FILE: the user's GPU files for rows of their devices (gpu_data_resolver)
  train_options opts;
  bool quiet = false;
  bool force = false;   // --force: replace an existing model in --out
  bool dry_run = false; // --dry-run: read the rows, print what the manifest gets from the data alone, train nothing
  std::string command;  // the command line, recorded in the manifest
  std::vector<std::string> ops_dirs, scripts_dirs;  // --ops, --scripts (cli/paths.h session_options_for)
  std::vector<std::string> gpus_dirs;  // --gpus-dir (cli/paths.h session_options_for)
  bool verbose = false;                              // -v
};
int train_main(const train_flags& f);

struct flag_targets;  // cli/flags.h
// `neusight train` as the command table runs it (cli/app.cpp): its flags, and the command line as a shell reads it back
// (the model.toml's `command`).
int train_command(flag_targets& t, int argc, char** argv);

struct eval_kernels_flags {
  std::vector<std::string> files, exclude_gpus;
  std::vector<std::string> gpu_files;  // --gpu FILE: the user's GPU files for rows of their devices (gpu_data_resolver)
  std::string predictor = "neusight", weights, tiles = "rule", format = "table", output;
  std::vector<std::string> ops_dirs, scripts_dirs;  // --ops, --scripts (cli/paths.h session_options_for)
  std::vector<std::string> gpus_dirs;  // --gpus-dir (cli/paths.h session_options_for)
  bool verbose = false;                              // -v
};
int eval_kernels_main(const eval_kernels_flags& f);
int eval_kernels_command(flag_targets& t, int argc, char** argv);  // `neusight eval kernels` (cli/app.cpp's table)

}  // namespace ns
