// engine/cli/scale_cmd.h — `neusight scale`: move a measured trace from the GPU it ran on to another GPU.
#pragma once
#include <cstdint>
#include <string>

namespace ns {

struct scale_flags {
  std::string trace, from, to, graph, weights, format = "table", output;
  std::string wave_variant = "code";  // chrome/wavescale traces: "code" or "paper" (spec §1.9)
  int64_t layers = 0;
};
int scale_main(const scale_flags& f);

}  // namespace ns
