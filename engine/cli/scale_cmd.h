// engine/cli/scale_cmd.h — `neusight scale`: move a measured trace from the GPU it ran on to another GPU.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/gpu_spec.h"
#include "core/graph.h"
#include "ingest/trace.h"

namespace ns {

class session;

struct scale_flags {
  std::string trace, from, to, graph, weights, format = "table", output;
  std::string predictor = "neusight";  // whose forecasts give the ratio: a built-in or a Lua predictor
  std::string wave_variant = "code";  // chrome/wavescale traces: "code" or "paper" (spec §1.9)
  int64_t layers = 0;
  std::vector<std::string> ops_dirs, scripts_dirs;  // --ops, --scripts (cli/paths.h session_options_for)
  std::vector<std::string> gpus_dirs;  // --gpus-dir (cli/paths.h session_options_for)
  bool verbose = false;                              // -v
};
int scale_main(const scale_flags& f);

struct flag_targets;  // cli/flags.h
int scale_command(flag_targets& t, int argc, char** argv);  // `neusight scale` (cli/app.cpp's table)

// A flag of `f` that the trace's format takes no notice of, and why, for a usage error: --graph and --layers belong to a
// per-op label CSV (its operator graph and the layers it is replicated over); a Chrome or wavescale trace's ops carry
// their own shapes and it holds every layer it measured. nullopt when none is given for such a trace, or when the trace
// cannot be read (scale_main says why).
std::optional<std::pair<std::string, std::string>> scale_flag_unused(const scale_flags& f);

// Our kernels for the ops of a measured trace that scripts/neusight/scale.lua routes to the ratio, built by its
// kernels() from each op's shapes (kernel_instance::node = the op's index in tr.ops). Ops routed there that it
// cannot build are counted by kind in `not_built`.
std::vector<kernel_instance> trace_kernels(session& s, const trace& tr, std::map<std::string, size_t>& not_built);

// The GPU a Chrome or wavescale trace says it was recorded on (deviceProperties, a manifest's origin_gpu), resolved
// by `resolve` (a GPU name or alias → its file); nullopt when the trace names none (label CSVs never do: their folder
// name is only a hint). A name no GPU file knows throws "<file>: the trace was recorded on '<name>', which no GPU file
// names", advising the aliases of `aliases_of` when given.
using gpu_resolver = std::function<gpu_spec(const std::string&)>;
std::optional<gpu_spec> trace_recorded_on(const trace& tr, const std::string& file, const gpu_resolver& resolve,
                                          const gpu_spec* aliases_of);
// The same, checked against the GPU a flag names (`flag`: "--gpu", "--from"): an error when the trace names another
// GPU. A name that is the given GPU's own (its name, an alias, its file's stem) is it, whether or not a bundled file
// knows it; a name no GPU file knows is taken as the given GPU with a warning in `warnings` (scale: nothing is kept),
// or, without `warnings`, refused as trace_recorded_on refuses it (--calibrate writes a file every later forecast of
// the GPU applies: a MIG slice's or another part's trace must not become it). Returns whether the trace names its GPU.
bool trace_device_check(const trace& tr, const std::string& file, const gpu_resolver& resolve, const gpu_spec& given,
                        const std::string& flag, std::vector<std::string>* warnings);

}  // namespace ns
