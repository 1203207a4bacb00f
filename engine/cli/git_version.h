// engine/cli/git_version.h — `git describe --always --dirty` of the source tree this binary was built from, taken at
// build time by engine/cli/git_version.cmake ("unknown" outside a git checkout).
#pragma once

namespace ns {
const char* git_version();
}  // namespace ns
