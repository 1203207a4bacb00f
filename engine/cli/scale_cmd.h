// engine/cli/scale_cmd.h — `neusight scale`: move a measured trace from the GPU it ran on to another GPU.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/trace.h"

namespace ns {

class session;

struct scale_flags {
  std::string trace, from, to, graph, weights, format = "table", output;
  std::string predictor = "neusight";  // whose forecasts give the ratio: a built-in or a Lua predictor
  std::string wave_variant = "code";  // chrome/wavescale traces: "code" or "paper" (spec §1.9)
  int64_t layers = 0;
  std::vector<std::string> ops_dirs, scripts_dirs;  // --ops, --scripts (cli/paths.h session_options_for)
  bool verbose = false;                              // -v
};
int scale_main(const scale_flags& f);

// Our kernels for the ops of a measured trace that scripts/neusight/scale.lua routes to the ratio, built by its
// kernels() from each op's shapes (kernel_instance::node = the op's index in tr.ops). Ops routed there that it
// cannot build are counted by kind in `not_built`.
std::vector<kernel_instance> trace_kernels(session& s, const trace& tr, std::map<std::string, size_t>& not_built);

}  // namespace ns
