// tests/test_util.h — shared helpers: temporary folders, running the CLI, trimming tracebacks.
#pragma once
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace ns_test {
namespace fs = std::filesystem;

inline const fs::path source_dir{NEUSIGHT_SOURCE_DIR};

// A fresh folder under the system temp dir, removed at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("neusight-test-" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& rel, const std::string& text) const {
    const fs::path p = path / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

struct run_result {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A what-if GPU file in `dir`: gpus/h100_sxm5_80gb.toml with mem_bw_gbps 4800 instead of 3350, its name kept and its
// aliases dropped (they are the H100's); its path, "" when the bundled file no longer reads as expected.
inline std::string h100_fastmem_write(const temp_dir& dir) {
  std::string text = slurp(source_dir / "gpus/h100_sxm5_80gb.toml");
  const std::string from = "\nmem_bw_gbps = 3350.0", to = "\nmem_bw_gbps = 4800.0";
  const auto bw = text.find(from);
  if (bw == std::string::npos) return "";
  text.replace(bw, from.size(), to);
  const auto al = text.find("\naliases = ");
  if (al == std::string::npos) return "";
  text.replace(al + 1, text.find('\n', al + 1) - al - 1, "aliases = []");
  return dir.write("h100_fastmem.toml", text).string();
}

// Replaces every occurrence of `from` by `to` (e.g. a temp path by a stable name).
inline std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

// A copy of the bundled gpus/`stem`.toml at t/`dir`/`stem`.toml (a calibration of it goes beside the copy, not beside
// gpus/).
inline std::filesystem::path gpu_copy(const temp_dir& t, const std::string& stem, const std::string& dir = "") {
  const std::string name = stem + ".toml";
  return t.write(dir.empty() ? name : dir + "/" + name, slurp(source_dir / "gpus" / name));
}

// " --scripts DIR": DIR = t/`name`, whose neusight/`file`.lua ("serve", "parallel/config") is the shipped file with
// `edits` made and `patch` run before its `return M`.
inline std::string override_dir(const temp_dir& t, const std::string& name, const std::string& file,
                                const std::string& patch,
                                const std::vector<std::pair<std::string, std::string>>& edits = {}) {
  std::string text = slurp(source_dir / "scripts" / "neusight" / (file + ".lua"));
  for (const auto& [from, to] : edits) {
    REQUIRE(text.find(from) != std::string::npos);  // an edit that finds nothing would test the shipped file
    text = replace_all(text, from, to);
  }
  const size_t end = text.rfind("return M");
  REQUIRE(end != std::string::npos);
  t.write(name + "/neusight/" + file + ".lua", text.substr(0, end) + patch + "\nreturn M\n");
  return " --scripts '" + (t.path / name).string() + "'";
}

// `s` (a path, a name) as one word for sh: single-quoted, a quote in it kept.
inline std::string quoted(const std::string& s) { return "'" + replace_all(s, "'", "'\\''") + "'"; }

// Runs the shell command `command` (already shell-quoted) from the source dir.
inline run_result run_sh(const std::string& command) {
  temp_dir t;
  const std::string cmd = "cd " + quoted(source_dir) + " && " + command + " >" + quoted(t.path / "out") + " 2>" +
                          quoted(t.path / "err");
  run_result r;
  const int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(t.path / "out");
  r.err = slurp(t.path / "err");
  return r;
}

// Runs the neusight binary with `args` (already shell-quoted) from the source dir.
inline run_result run_cli(const std::string& args, const std::string& env = "") {
  return run_sh(env + " '" NEUSIGHT_EXE "' " + args);
}

// The shared data folder `rel` under ../shared/data (CI has it; a user's clone does not), or nullopt after telling
// CTest the case is skipped: the line "NEUSIGHT-TEST-SKIPPED: …" on standard output matches the cases'
// SKIP_REGULAR_EXPRESSION (tests/CMakeLists.txt), so ctest reports "Skipped", never "Passed". Usage:
//   const auto dir = ns_test::shared_data("neusight/opgraph"); if (!dir) return;
inline std::optional<fs::path> shared_data(const std::string& rel) {
  const fs::path p = (source_dir / ".." / "shared" / "data" / rel).lexically_normal();
  if (fs::exists(p)) return p;
  std::cout << "NEUSIGHT-TEST-SKIPPED: " << p.string() << " not found (the shared data is not part of a clone)"
            << std::endl;
  return std::nullopt;
}

}  // namespace ns_test
