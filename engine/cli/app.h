// engine/cli/app.h — the `neusight` command line: parses flags, runs one subcommand, returns the exit code.
#pragma once

namespace ns {

// 0 success, 1 error (message on stderr), 2 usage error. Never calls exit().
int app_main(int argc, char** argv);

}  // namespace ns
