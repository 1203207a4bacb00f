// tests/weights_util.h — weights roots for tests: the bundled families with their manifests' training GPUs changed.
#pragma once

#include <filesystem>
#include <functional>
#include <sstream>
#include <string>

#include "test_util.h"

namespace ns_test {

// A weights root `t.path/weights` whose nvidia family folders are the bundled ones: those `edited(family)` accepts are
// copies whose model.toml has its training GPUs line (`gpus = …`, the manifest's training.gpus) replaced by `gpus`
// (a TOML list), the others symlinks to the bundled folders. Returns the root.
inline std::filesystem::path weights_with_training_gpus(const temp_dir& t, const std::string& gpus,
                                                        const std::function<bool(const std::string&)>& edited) {
  namespace fs = std::filesystem;
  const fs::path root = t.path / "weights";
  fs::create_directories(root / "nvidia");
  for (const auto& e : fs::directory_iterator(source_dir / "weights" / "nvidia")) {
    if (!e.is_directory()) continue;
    const fs::path to = root / "nvidia" / e.path().filename();
    if (!edited(e.path().filename().string())) {
      fs::create_directory_symlink(e.path(), to);
      continue;
    }
    fs::copy(e.path(), to);
    std::istringstream in(slurp(to / "model.toml"));
    std::string manifest, l;
    while (std::getline(in, l)) manifest += (l.rfind("gpus = ", 0) == 0 ? "gpus = " + gpus : l) + "\n";
    t.write(fs::relative(to / "model.toml", t.path).string(), manifest);
  }
  return root;
}

}  // namespace ns_test
