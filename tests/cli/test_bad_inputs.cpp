// tests/cli/test_bad_inputs.cpp — runs the bad-input corpus (tests/bad_inputs/cases.toml, written by
// tests/bad_inputs/generate.lua; issue 15). Every case must end in a clear error: exit status 1 (not a signal, not an
// abort, no sanitizer report), a message that names the input file (its path from tests/bad_inputs/, the tail of the
// absolute path the command gives: Lua shortens long chunk names from the left) and its line where the manifest gives one, and
// contains the expected text, nothing written to -o, and at most 15 s of CPU time (runaway scripts are stopped by the
// default limits). One test per kind; the cases of a kind run two at a time.
#include <catch2/catch.hpp>
#include <toml++/toml.h>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "test_util.h"

extern char** environ;

using ns_test::replace_all;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

const fs::path corpus = ns_test::source_dir / "tests/bad_inputs";

struct bad_case {
  std::string kind, file, args, names, fifo;
  std::vector<std::string> expect;
  int64_t line = 0;  // 0: the message need not name a line
};

std::vector<bad_case> load_cases() {
  const toml::table tbl = toml::parse_file((corpus / "cases.toml").string());
  std::vector<bad_case> cases;
  const toml::array* arr = tbl["case"].as_array();
  REQUIRE(arr);
  for (const toml::node& n : *arr) {
    const toml::table& t = *n.as_table();
    bad_case c;
    c.kind = t["kind"].value_or(std::string());
    c.file = t["file"].value_or(std::string());
    c.args = t["args"].value_or(std::string());
    c.names = t["names"].value_or(std::string("{rel}"));
    c.fifo = t["fifo"].value_or(std::string());
    c.line = t["line"].value_or(int64_t(0));
    if (const toml::array* e = t["expect"].as_array())
      for (const toml::node& s : *e) c.expect.push_back(s.value_or(std::string()));
    cases.push_back(std::move(c));
  }
  return cases;
}

struct outcome {
  int status = 0;  // from wait4 (of the shell that runs `timeout … neusight`)
  std::string err, cmd, names;
  double cpu_seconds = 0, wall_seconds = 0;
  bool out_written = false;
  std::string setup_error;
};

std::string expand(std::string s, const bad_case& c, const fs::path& tmp) {
  const fs::path file = corpus / c.file;
  s = replace_all(s, "{file}", file.string());
  s = replace_all(s, "{rel}", c.file);
  s = replace_all(s, "{dir}", file.parent_path().string());
  s = replace_all(s, "{root}", corpus.string());
  s = replace_all(s, "{out}", (tmp / "out.json").string());
  s = replace_all(s, "{tmp}", tmp.string());
  return s;
}

// Runs one case with the built binary from the source dir, under a 60 s wall-clock guard (a hang fails the case with
// timeout's status 124 or a kill, not the whole test run).
outcome run_case(const bad_case& c) {
  temp_dir t;
  outcome o;
  if (!c.fifo.empty() && ::mkfifo((t.path / c.fifo).c_str(), 0600) != 0) o.setup_error = "mkfifo failed";
  o.names = expand(c.names, c, t.path);
  // NEUSIGHT_BAD_INPUTS_EXE runs the corpus against another build (e.g. build-asan/neusight) without rebuilding this test
  const char* other = std::getenv("NEUSIGHT_BAD_INPUTS_EXE");
  const std::string exe = other && *other ? other : NEUSIGHT_EXE;
  o.cmd = "cd '" + ns_test::source_dir.string() + "' && exec timeout -s KILL 60 '" + exe + "' " +
          expand(c.args, c, t.path) + " </dev/null >'" + (t.path / "stdout").string() + "' 2>'" +
          (t.path / "stderr").string() + "'";
  const char* argv[] = {"/bin/sh", "-c", o.cmd.c_str(), nullptr};
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
    o.setup_error = "posix_spawn failed";
    return o;
  }
  rusage ru{};
  while (::wait4(pid, &o.status, 0, &ru) < 0 && errno == EINTR) {
  }
  o.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto s = [](const timeval& tv) { return double(tv.tv_sec) + double(tv.tv_usec) * 1e-6; };
  o.cpu_seconds = s(ru.ru_utime) + s(ru.ru_stime);
  o.err = ns_test::slurp(t.path / "stderr");
  o.out_written = fs::exists(fs::symlink_status(t.path / "out.json"));
  return o;
}

// "<names>:<line>" followed by something other than a digit.
bool names_line(const std::string& err, const std::string& names, int64_t line) {
  const std::string want = names + ":" + std::to_string(line);
  for (size_t at = err.find(want); at != std::string::npos; at = err.find(want, at + 1)) {
    const size_t end = at + want.size();
    if (end == err.size() || !std::isdigit(static_cast<unsigned char>(err[end]))) return true;
  }
  return false;
}

void run_kind(const std::string& kind) {
  std::vector<bad_case> cases;
  for (auto& c : load_cases())
    if (c.kind == kind) cases.push_back(std::move(c));
  REQUIRE(!cases.empty());
  std::vector<outcome> results(cases.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w)
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < cases.size();) results[i] = run_case(cases[i]);
    });
  for (auto& w : workers) w.join();
  for (size_t i = 0; i < cases.size(); ++i) {
    const bad_case& c = cases[i];
    const outcome& o = results[i];
    INFO("case tests/bad_inputs/" << c.file << "\n  " << o.cmd << "\n  stderr: " << o.err);
    REQUIRE(o.setup_error.empty());
    CHECK(WIFEXITED(o.status));
    const int code = WIFEXITED(o.status) ? WEXITSTATUS(o.status) : -1;
    CHECK(code == 1);  // 124/137: killed by the 60 s guard; 128+N: died of signal N (134: abort)
    CHECK(o.err.rfind("neusight: ", 0) == 0);
    for (const char* bad : {"AddressSanitizer", "LeakSanitizer", "runtime error:", "unprotected Lua error", "terminate called"})
      CHECK(o.err.find(bad) == std::string::npos);
    CHECK(o.err.find(o.names) != std::string::npos);
    if (c.line > 0) CHECK(names_line(o.err, o.names, c.line));
    for (const auto& e : c.expect) CHECK(o.err.find(e) != std::string::npos);
    CHECK_FALSE(o.out_written);
    CHECK(o.cpu_seconds < 15);
  }
}

}  // namespace

TEST_CASE("bad inputs: the manifest covers every file of the corpus, at least 300 cases", "[cli][bad_inputs]") {
  const auto cases = load_cases();
  CHECK(cases.size() >= 300);
  std::set<std::string> listed, dirs;
  for (const auto& c : cases) {
    dirs.insert(fs::path(c.file).parent_path().generic_string());
    INFO(c.file);
    CHECK(fs::is_regular_file(corpus / c.file));
    CHECK(!c.kind.empty());
    CHECK(c.args.find("{") != std::string::npos);  // the command names a case file or a temp path
    CHECK(!c.expect.empty());
    listed.insert(c.file);
  }
  // every file under a kind folder is a case, or the well-formed base the cases of its kind change, a helper a case
  // names in its command, or a file beside a case's file (a weights.bin beside a case's model.toml)
  std::string all_args;
  for (const auto& c : cases) all_args += c.args + "\n";
  for (const auto& e : fs::recursive_directory_iterator(corpus)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), corpus).generic_string();
    if (rel.find('/') == std::string::npos) continue;  // generate.lua, cases.toml
    INFO(rel);
    CHECK((listed.count(rel) || all_args.find("{root}/" + rel) != std::string::npos ||
           dirs.count(fs::path(rel).parent_path().generic_string()) ||
           fs::path(rel).filename().string().rfind("good", 0) == 0));
  }
}

TEST_CASE("bad inputs: the well-formed bases of the corpus are accepted", "[cli][bad_inputs]") {
  // Each family of cases changes one line of a good file: the good file itself must work, so that each case fails
  // for the line it changes.
  temp_dir t;
  const std::string predict = "predict --model gpt2_large --mode inference --batch 1 --seq 8 --predictor roofline --format json";
  const std::string gpu = ns_test::quoted(corpus / "gpu/good.toml");
  auto r = ns_test::run_cli(predict + " --gpu " + gpu);
  INFO(r.err);
  CHECK(r.code == 0);
  r = ns_test::run_cli("predict --model gpt2_large --gpu h100 --mode train --batch 8 --seq 128 --dp 2 --tp 4 "
                       "--predictor roofline --format json --cluster '" + (corpus / "cluster/good.toml").string() + "'");
  CHECK(r.code == 0);
}

TEST_CASE("bad inputs: gpu TOML", "[cli][bad_inputs]") { run_kind("gpu"); }
TEST_CASE("bad inputs: cluster TOML", "[cli][bad_inputs]") { run_kind("cluster"); }
TEST_CASE("bad inputs: Lua workloads", "[cli][bad_inputs]") { run_kind("workload"); }
TEST_CASE("bad inputs: op rules", "[cli][bad_inputs]") { run_kind("oprule"); }
TEST_CASE("bad inputs: HF config.json", "[cli][bad_inputs]") { run_kind("hf"); }
TEST_CASE("bad inputs: opgraph CSV", "[cli][bad_inputs]") { run_kind("opgraph"); }
TEST_CASE("bad inputs: dataset CSV", "[cli][bad_inputs]") { run_kind("dataset"); }
TEST_CASE("bad inputs: Chrome traces", "[cli][bad_inputs]") { run_kind("trace"); }
TEST_CASE("bad inputs: weights", "[cli][bad_inputs]") { run_kind("weights"); }
TEST_CASE("bad inputs: label JSON", "[cli][bad_inputs]") { run_kind("label"); }
TEST_CASE("bad inputs: label-trace CSV", "[cli][bad_inputs]") { run_kind("labeltrace"); }
TEST_CASE("bad inputs: calibration measurements", "[cli][bad_inputs]") { run_kind("measurement"); }
TEST_CASE("bad inputs: serve requests files", "[cli][bad_inputs]") { run_kind("requests"); }
