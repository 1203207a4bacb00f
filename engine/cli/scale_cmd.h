// engine/cli/scale_cmd.h — `neusight scale`: move a measured trace from the GPU it ran on to another GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ns {

struct scale_flags {
  std::string trace, from, to, graph, weights, format = "table", output;
  std::string wave_variant = "code";  // chrome/wavescale traces: "code" or "paper" (spec §1.9)
  int64_t layers = 0;
  std::vector<std::string> ops_dirs, scripts_dirs;  // --ops, --scripts (cli/paths.h session_paths_set)
  bool verbose = false;                              // -v
};
int scale_main(const scale_flags& f);

}  // namespace ns
