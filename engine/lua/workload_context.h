// engine/lua/workload_context.h — the words session::workload_load gives the context of an error raised while building
// a model, read by the commands that say it otherwise (cli/search_cmd.cpp: as the layout it built).
#pragma once

namespace ns {

// The context line added to an error raised while building the model: "while building the model of <origin>".
inline constexpr const char* workload_building_context = "while building the model of ";
// The source named for a workload given by the command line alone; its origin is "command line (--model x.json)"
// where --model names a file.
inline constexpr const char* workload_command_line = "command line";

}  // namespace ns
