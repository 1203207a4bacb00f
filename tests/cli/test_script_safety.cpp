// tests/cli/test_script_safety.cpp — hostile or broken scripts and inputs end in a clear error (issue 15, script
// safety): exit 1, a message naming the file (and line), nothing written with -o, no abort, no hang.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "test_util.h"

using ns_test::run_cli;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

// A workload around a model function returning `nodes` (Lua); `pre` runs first, at the top of the chunk.
std::string workload(const std::string& nodes, const std::string& pre = "") {
  return pre + "return {\n  gpu = \"h100\", mode = \"inference\", batch = 4, seq = 128,\n"
               "  model = function(opts)\n    return " + nodes + "\n  end,\n}\n";
}

const char* const one_node = R"({ { op = "mine", name = "n1", inputs = { { 4, 128, 64 } }, output = { 4, 128, 64 } } })";

// An op rule "mine" whose forward runs `body` (node, gpu in scope) and returns one memory kernel.
std::string rule(const std::string& body) {
  return "return {\n  name = \"mine\", doc = \"d\", backward = false,\n  forward = function(node, gpu)\n" + body +
         "\n    return { { kind = \"memory\", name = \"MEM\", flops = 0, bytes = 1e6 } }\n  end,\n}\n";
}

struct timed_result {
  ns_test::run_result r;
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // user + system time of the command (the child processes), which a busy machine does not
                           // inflate: time bounds are checked on it, with only a generous bound on the wall clock
};

double children_cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// Runs `run SCRIPT --format json -o OUT` (plus `flags`, under `env`) and checks the common contract of a refused
// input: exit 1 (neither an abort nor a signal), the message contains `want`, OUT was not written.
timed_result run_should_fail(const char* file, int line, const temp_dir& t, const fs::path& script,
                             const std::string& want, const std::string& flags = "", const std::string& env = "") {
  INFO(file << ":" << line);
  const fs::path out = t.path / "out.json";
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = children_cpu_seconds();
  timed_result tr;
  tr.r = run_cli("run '" + script.string() + "' --format json -o '" + out.string() + "'" + flags, env);
  tr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tr.cpu_seconds = children_cpu_seconds() - cpu0;
  INFO("stderr: " << tr.r.err);
  CHECK(tr.r.code == 1);
  CHECK(tr.r.err.rfind("neusight: ", 0) == 0);
  CHECK(tr.r.err.find(want) != std::string::npos);
  CHECK(tr.r.err.find("unprotected") == std::string::npos);
  CHECK_FALSE(fs::exists(out));
  return tr;
}
#define FILE_LINE_ARGS __FILE__, __LINE__

}  // namespace

// --- 1. metamethods never run while the host reads script data -------------------------------------------------

TEST_CASE("script safety: a node list, a shape or attrs with metamethods that raise", "[cli][safety]") {
  temp_dir t;
  const std::string boom = "setmetatable({}, { __index = function() error('boom') end, __len = function() error('len') end })";
  t.write("w/ops/mine.lua", rule(""));
  const auto list = t.write("w/list.lua", workload(boom));
  run_should_fail(FILE_LINE_ARGS, t, list, list.string() + ":");
  // The scripts that read the graph (the memory model) read a shape raw (neusight.kernels shape_check): its
  // metamethods never run, and the engine refuses the table naming the node. (An __index that answers every key, which
  // kept the memory model's ipairs going until the time limit, is the corpus case workload/meta_shape_endless.lua:
  // the same `run` of the same node, with a CPU-time bound this test does not check.)
  const auto shape = t.write("w/shape.lua", workload("{ { op = 'mine', name = 'n1', inputs = { " + boom +
                                                     " }, output = { 4, 8 } } }"));
  run_should_fail(FILE_LINE_ARGS, t, shape,
                  shape.string() + ":4: model 'custom': node #1 'n1': field 'inputs'[1] must be a shape");
  const auto attrs_boom = t.write("w/attrs_boom.lua", workload("{ { op = 'mine', name = 'n1', inputs = { { 4, 8 } }, "
                                                               "output = { 4, 8 }, attrs = " + boom + " } }"));
  // the engine's node reader refuses it (workload.lua build, before the memory model reads the graph: its __index
  // raised 'boom' there), at the script's line of the node
  run_should_fail(FILE_LINE_ARGS, t, attrs_boom, attrs_boom.string() + ":4: model 'custom': node #1 'n1': attrs: "
                                                                       "expected a plain table (it has a metatable)");
  // The host reads script data raw and refuses a table with a metatable, however harmless its metamethods, naming the
  // script's line of the node.
  const std::string quiet = "setmetatable({ 4, 8 }, { __index = function() return nil end })";
  const auto shape_mt = t.write("w/shape_mt.lua", workload("{ { op = 'mine', name = 'n1', inputs = { " + quiet +
                                                           " }, output = { 4, 8 } } }"));
  run_should_fail(FILE_LINE_ARGS, t, shape_mt,
                  shape_mt.string() + ":4: model 'custom': node #1 'n1': field 'inputs'[1] must be a shape");
  const auto len = t.write("w/len.lua", workload("{ { op = 'mine', name = 'n1', inputs = { { 4, 8 } }, "
                                                 "output = setmetatable({ 4, 8 }, { __len = function() return 1.5 end }) } }"));
  run_should_fail(FILE_LINE_ARGS, t, len, len.string() + ":4: model 'custom': node #1 'n1': field 'output' must be a shape");
  const auto attrs = t.write("w/attrs.lua", workload("{ { op = 'mine', name = 'n1', inputs = { { 4, 8 } }, output = { 4, 8 },"
                                                     " attrs = setmetatable({}, { __index = function() return nil end }) } }"));
  run_should_fail(FILE_LINE_ARGS, t, attrs, attrs.string() + ":4: model 'custom': node #1 'n1': attrs: expected a plain "
                                                             "table (it has a metatable)");
}

TEST_CASE("script safety: a kernel list or an op rule with metamethods that raise", "[cli][safety]") {
  temp_dir t;
  t.write("w/ops/mine.lua", "return { name = 'mine', doc = 'd', backward = false, forward = function()\n"
                            "  return setmetatable({}, { __len = function() return 1.5 end, __index = function() error('x') end })\n"
                            "end }\n");
  const auto script = t.write("w/run.lua", workload(one_node));
  run_should_fail(FILE_LINE_ARGS, t, script,
                  (t.path / "w/ops").string() + "/mine.lua:1: forward() returned a table that is not an array of kernels: "
                                                "expected a plain table (it has a metatable)");
  temp_dir t2;
  t2.write("w/ops/mine.lua", "return setmetatable({ name = 'mine', doc = 'd', backward = false },\n"
                             "  { __index = function() error('rule boom') end })\n");
  const auto s2 = t2.write("w/run.lua", workload(one_node));
  run_should_fail(FILE_LINE_ARGS, t2, s2, "/mine.lua: an op rule must return a plain table (this one has a metatable)");
}

// --- 2. runaway scripts: instruction budget, memory cap, wall clock, capped messages ---------------------------

TEST_CASE("script safety: an endless loop in a workload stops within 10 s by default", "[cli][safety]") {
  temp_dir t;
  const auto script = t.write("loop.lua", "local n = 0\nwhile true do n = n + 1 end\n");
  const auto tr = run_should_fail(FILE_LINE_ARGS, t, script,
                                  script.string() + ":2: script ran longer than 1000000000 instructions; raise with "
                                                    "--script-budget N or NEUSIGHT_SCRIPT_BUDGET");
  CHECK(tr.cpu_seconds < 10);
  CHECK(tr.seconds < 120);  // a hang, however busy the machine
}

TEST_CASE("script safety: an endless loop in an op rule, also one that catches its stop with pcall", "[cli][safety]") {
  temp_dir t;
  t.write("w/ops/mine.lua", rule("    while true do pcall(function() while true do end end) end"));
  const auto script = t.write("w/run.lua", workload(one_node));
  run_should_fail(FILE_LINE_ARGS, t, script, "/mine.lua:4: script ran longer than 20000000 instructions",
                  " --script-budget 20000000");
  // the same budget from the environment
  run_should_fail(FILE_LINE_ARGS, t, script, "/mine.lua:4: script ran longer than 20000000 instructions", "",
                  "NEUSIGHT_SCRIPT_BUDGET=20000000");
}

TEST_CASE("script safety: a memory bomb stops at the memory cap", "[cli][safety]") {
  temp_dir t;
  const auto script = t.write("bomb.lua", "local t = {} while true do t[#t+1] = (\"x\"):rep(1e6) end\n");
  run_should_fail(FILE_LINE_ARGS, t, script,
                  script.string() + ":1: script used more than 64 MB of memory; raise with --script-memory MB or "
                                    "NEUSIGHT_SCRIPT_MEMORY",
                  " --script-memory 64");
  const auto once = t.write("once.lua", "local s = (\"x\"):rep(1e9)\n");
  run_should_fail(FILE_LINE_ARGS, t, once, once.string() + ":1: script used more than 64 MB of memory", "",
                  "NEUSIGHT_SCRIPT_MEMORY=64");
  // a cap of 2^44 MB or more is no cap at all, not a wrapped one (2^44 MB × 2^20 B was a limit of 0 bytes: every
  // script "used more than 17592186044416 MB")
  for (const char* mb : {"17592186044416", "999999999999999999"}) {
    const auto r = ns_test::run_cli(std::string("run examples/custom_model.lua --format json --script-memory ") + mb);
    INFO(mb << ": " << r.err);
    CHECK(r.code == 0);
  }
}

TEST_CASE("script safety: a long serve simulation is held to the limits per stretch between progress reports",
          "[cli][safety]") {
  // 3,000 requests take ~45 M instructions in one call into scripts/neusight/serve.lua; each stretch between two
  // progress reports (every 256 steps) takes under 5 M. NEUSIGHT_SCRIPT_STATS counts every instruction from the start
  // of each call (no lazy arming), so the 20 M budget is checked throughout and the run fails if the count does not
  // start again at each report.
  temp_dir t;
  const fs::path stats = t.path / "stats.txt";
  const auto r = run_cli("serve --model llama3_8b --gpu h100 --rate 12 --requests 3000 --input-len uniform:128:2048 "
                         "--output-len uniform:32:512 --seed 1 --format json --script-budget 20000000",
                         "NEUSIGHT_SCRIPT_STATS='" + stats.string() + "'");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("\"requests\": 3000") != std::string::npos);
  CHECK(ns_test::slurp(stats).find("(budget 20000000)") != std::string::npos);
}

TEST_CASE("script safety: catastrophic pattern backtracking is stopped by the time limit", "[cli][safety]") {
  temp_dir t;
  const auto script = t.write("pattern.lua", "local s = ('a'):rep(300000)\nreturn s:find('.-.-.-.-b')\n");
  const auto tr = run_should_fail(FILE_LINE_ARGS, t, script,
                                  script.string() + ": script ran longer than 1 s of CPU time and did not stop (stuck in "
                                                    "a library call such as a string pattern match); raise with "
                                                    "--script-timeout",
                                  " --script-timeout 1");
  CHECK(tr.cpu_seconds < 6);
  CHECK(tr.seconds < 120);
}

TEST_CASE("script safety: a huge error message is capped when printed", "[cli][safety]") {
  temp_dir t;
  const auto script = t.write("big.lua", "error(('x'):rep(1e6))\n");
  const auto tr = run_should_fail(FILE_LINE_ARGS, t, script, script.string() + ":1: xxxx");
  CHECK(tr.r.err.size() < 5000);
  CHECK(tr.r.err.find("more bytes]") != std::string::npos);
}

TEST_CASE("script safety: a malformed limit in the environment is an error", "[cli][safety]") {
  const auto r = run_cli("predict --model gpt2_large --gpu h100 --mode inference --batch 1 --seq 8",
                         "NEUSIGHT_SCRIPT_BUDGET=lots");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: NEUSIGHT_SCRIPT_BUDGET: expected a non-negative number (0: no limit), got 'lots'\n");
}

// --- 3. require stays inside the script roots ------------------------------------------------------------------

TEST_CASE("script safety: require refuses names that leave the script roots", "[cli][safety]") {
  temp_dir t;
  t.write("evil.lua", "return { owned = true }\n");
  // ".tmp.<dir>.evil" used to become /tmp/<dir>/evil.lua
  const std::string dotted = ns_test::replace_all((t.path / "evil").string(), "/", ".");
  for (const std::string& name : {dotted, std::string("neusight..kernels"), std::string("neusight."),
                                  std::string("a/b"), std::string("..x")}) {
    const auto script = t.write("req.lua", "local m = require('" + name + "')\n" + workload(one_node));
    run_should_fail(FILE_LINE_ARGS, t, script,
                    script.string() + ":1: module '" + name + "' not found: invalid module name");
  }
}

// --- 4. read-only views --------------------------------------------------------------------------------------

TEST_CASE("script safety: the gpu and node views cannot be changed, pairs sees their fields", "[cli][safety]") {
  temp_dir t;
  // Node n1 tries every way to change the shared gpu view and its node; n2 checks that nothing changed.
  t.write("w/ops/mine.lua", rule(R"lua(    if node.name == "n1" then
      assert(not pcall(rawset, gpu, "num_sm", 1), "rawset on the gpu view")
      assert(not pcall(setmetatable, gpu, nil), "setmetatable on the gpu view")
      assert(getmetatable(gpu) == "read-only", "getmetatable hands out the view's metatable")
      assert(not pcall(function() gpu.num_sm = 1 end), "assignment to the gpu view")
      assert(not pcall(next, gpu), "next on the gpu view")
      local inputs = node.inputs
      inputs[1][1] = 999                      -- a copy: the node is unchanged
      assert(node.inputs[1][1] == 4, "nested tables read as fresh copies")
    end
    local fields = 0
    for k, v in pairs(gpu) do fields = fields + 1 end
    assert(fields > 10 and gpu.num_sm == 132, "pairs over the gpu view: " .. fields .. " fields, num_sm " .. tostring(gpu.num_sm))
    assert(#node.inputs == 1 and node.inputs[1][1] == 4, "node " .. node.name))lua"));
  const auto ok = t.write("w/run.lua", workload(R"({ { op = "mine", name = "n1", inputs = { { 4, 8 } }, output = { 4, 8 } },
      { op = "mine", name = "n2", inputs = { { 4, 8 } }, output = { 4, 8 } } })"));
  const auto r = run_cli("run '" + ok.string() + "' --format json");
  INFO(r.err);
  CHECK(r.code == 0);
  temp_dir t2;
  t2.write("w/ops/mine.lua", rule("    gpu.num_sm = 1"));
  const auto bad = t2.write("w/run.lua", workload(one_node));
  run_should_fail(FILE_LINE_ARGS, t2, bad, "/mine.lua:4: gpu is read-only (assignment to 'num_sm')");
}

// --- 5. one script cannot change what another one runs with --------------------------------------------------

TEST_CASE("script safety: a workload cannot replace library or neusight functions for op rules", "[cli][safety]") {
  temp_dir t;
  t.write("w/ops/mine.lua", rule(R"lua(    local ns = require "neusight"
    local K = require "neusight.kernels"
    assert(string.format("%d", 3) == "3" and ("%d"):format(4) == "4", "string.format replaced")
    assert(math.max(1, 2) == 2, "math.max replaced")
    assert(ns.ceil_div(7, 2) == 4, "neusight.ceil_div replaced")
    assert(type(K.linear) == "function", "neusight.kernels.linear replaced")
    assert(string.dump == nil and getmetatable("") == "string" and getmetatable(_ENV) == "sandbox", "sandbox reachable"))lua"));
  const std::string pre = R"lua(string.format = function() return "EVIL" end
math.max = function() return -1 end
assert(not pcall(function() getmetatable("").__index.format = nil end), "string metatable reachable")
assert(not pcall(function() require("neusight").ceil_div = function() return 0 end end), "neusight writable")
assert(not pcall(function() require("neusight.kernels").linear = nil end), "neusight.kernels writable")
rawset(require("neusight"), "ceil_div", function() return 0 end)  -- lands in this script's own view
assert(not pcall(setmetatable, _ENV, nil), "environment metatable reachable")
assert(not pcall(setmetatable, {}, { __gc = function() end }), "__gc accepted")
)lua";
  const auto script = t.write("w/run.lua", workload(one_node, pre));
  const auto r = run_cli("run '" + script.string() + "' --format json");
  INFO(r.err);
  CHECK(r.code == 0);
  // The attempt itself is an error with the workload's file and line.
  const auto direct = t.write("w/direct.lua", workload(one_node, "require('neusight').ceil_div = nil\n"));
  run_should_fail(FILE_LINE_ARGS, t, direct, direct.string() + ":1: module 'neusight' is read-only (assignment to 'ceil_div')");
}

// --- 6. non-regular input files and -o targets -----------------------------------------------------------------

TEST_CASE("script safety: FIFOs, devices and oversized files as inputs are refused", "[cli][safety]") {
  temp_dir t;
  const fs::path fifo = t.path / "in.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const fs::path out = t.path / "out.json";
  const std::string o = " --format json -o '" + out.string() + "'";
  const std::string base = "predict --model gpt2_large --mode inference --batch 1 --seq 8";
  struct { std::string args, want; } cases[] = {
      {base + " --gpu /dev/zero", "neusight: /dev/zero: not a regular file (a character device)\n"},
      {base + " --gpu '" + fifo.string() + "'", "neusight: " + fifo.string() + ": not a regular file (a FIFO)\n"},
      {"run '" + fifo.string() + "'", "neusight: " + fifo.string() + ": not a regular file\n"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(c.args + o);
    INFO(c.args << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err == c.want);
    CHECK_FALSE(fs::exists(out));
  }
  // a model config.json, a weights manifest and a CSV that are FIFOs
  const fs::path json_fifo = t.path / "cfg.json";
  REQUIRE(::mkfifo(json_fifo.c_str(), 0600) == 0);
  auto r = run_cli("predict --model '" + json_fifo.string() + "' --gpu h100 --mode inference --batch 1 --seq 8" + o);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + json_fifo.string() + ": not a regular file (a FIFO)\n");
  fs::create_directories(t.path / "weights/nvidia/bmm");
  REQUIRE(::mkfifo((t.path / "weights/nvidia/bmm/model.toml").c_str(), 0600) == 0);
  r = run_cli(base + " --gpu h100 --weights '" + (t.path / "weights").string() + "'" + o);
  CHECK(r.code == 1);
  CHECK(r.err.find("model.toml: not a regular file (a FIFO)") != std::string::npos);
  const fs::path csv_fifo = t.path / "bench.csv";
  REQUIRE(::mkfifo(csv_fifo.c_str(), 0600) == 0);
  r = run_cli("eval kernels '" + csv_fifo.string() + "'" + o);
  CHECK(r.code == 1);
  CHECK(r.err.find(csv_fifo.string() + ": not a regular file (a FIFO)") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // a GPU file over the 1 MB limit of TOML files
  const auto big = t.write("big.toml", std::string(2 << 20, '#'));
  r = run_cli(base + " --gpu '" + big.string() + "'" + o);
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + big.string() + ": larger than 1 MB, the limit for this kind of file\n");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("script safety: -o writes through symbolic links and into devices, never replacing them", "[cli][safety]") {
  temp_dir t;
  // a training GPU: no out-of-distribution warning on stderr, which must hold only the error below
  const std::string base = "predict --model gpt2_large --gpu v100 --mode inference --batch 1 --seq 8 --format json";
  // /dev/null stays a character device
  auto r = run_cli(base + " -o /dev/null");
  CHECK(r.code == 0);
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  // a symbolic link stays a link; its target gets the report
  const fs::path target = t.path / "real.json", link = t.path / "link.json";
  fs::create_symlink(target, link);
  r = run_cli(base + " -o '" + link.string() + "'");
  CHECK(r.code == 0);
  CHECK(fs::is_symlink(link));
  CHECK(fs::file_size(target) > 100);
  // a FIFO nobody reads is an error, not a wait
  const fs::path fifo = t.path / "out.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  r = run_cli(base + " -o '" + fifo.string() + "'");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + fifo.string() + ": a FIFO with no reader\n");
  CHECK(fs::is_fifo(fifo));
  // a directory
  r = run_cli(base + " -o '" + t.path.string() + "'");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + t.path.string() + ": is a directory\n");
}

namespace {

// Whether this build runs under AddressSanitizer (which reserves terabytes of address space: no ulimit -v).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool address_sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool address_sanitized = true;
#else
constexpr bool address_sanitized = false;
#endif
#else
constexpr bool address_sanitized = false;
#endif

// Runs `local x = CALL` (require("neusight") as ns) at line 2 of a workload script for each { CALL, WANT } of `cases`,
// under `env`: each fails with the script's path followed by WANT.
void series_calls_fail(const char* file, int line, const std::vector<std::pair<std::string, std::string>>& cases,
                       const std::string& env = "") {
  temp_dir t;
  const std::string tail =
      "\nreturn { model = 'gpt2_large', gpu = 'A100-PCIE-40GB', mode = 'inference', batch = 1, seq = 8 }\n";
  int i = 0;
  for (const auto& [call, want] : cases) {
    const auto script =
        t.write("s" + std::to_string(++i) + ".lua", "local ns = require 'neusight'\nlocal x = " + call + tail);
    INFO(call);
    run_should_fail(file, line, t, script, script.string() + want, "", env);
  }
}

}  // namespace

// The engine's series loops (require("neusight").pack_integers, walk, fold, queue: engine/lua/wrap_series.cpp) are
// public: a script's wrong count is an error at its line, never a C++ exception that Lua's C++ build swallowed into
// "neusight: 0" or "neusight: (error)" after allocating past the memory cap; an op code 0 is a nil value, as in Lua.
TEST_CASE("script safety: the series loops refuse huge counts and a code 0 at the script's line", "[cli][safety]") {
  series_calls_fail(FILE_LINE_ARGS, {
      {"ns.pack_integers({ 1, 2, 3 }, 1 << 61)", ":2: pack_integers: entry 4 is not an integer"},
      {"ns.pack_integers({ 1, 2, 3 }, math.maxinteger)", ":2: pack_integers: entry 4 is not an integer"},
      {"ns.walk({}, 0, {}, {}, 1 << 40, {}, false)",
       ":2: walk: forward seconds: 1099511627776 values asked of a table of 0"},
      {"ns.fold({}, {}, { { (1 << 31) - 1, {} } }, {}, 1)",
       ":2: fold: fw_terms[1]: the sum's index must be an integer of 1 to 65536"},
      {"ns.queue({}, {}, {}, 1 << 40, 0, 0)", ":2: queue: at: 1099511627776 values asked of a table of 0"},
      // 2^40 transfers of one run: each is a loop step (it ran until the watchdog, 21 s)
      {"ns.queue({ 0 }, { 1 << 40 }, { 1.0 }, 1, 0, 0)", ":2: queue: more than 2^32 transfers in all (n[1] = 1099511627776)"},
      {"ns.queue({ 0, 0 }, { 1 << 31, 1 << 31 + 1 }, { 1.0, 1.0 }, 2, 0, 0)",
       ":2: queue: more than 2^32 transfers in all (n[2] = 4294967296)"},
      {"ns.fold({ { 0 } }, { 1 }, {}, { { 1, { 1.0 } } }, 1)", ":2: attempt to perform arithmetic on a nil value"},
      // a sign other than nil or -1 silently added; a watched sum no term names peaked at the integer 0
      {"ns.fold({ { 1 } }, { 1 }, { { 1, { 1.0 }, -1.0 } }, {}, 1)",
       ":2: fold: fw_terms[1]: the sign (third entry) must be nil or the integer -1"},
      {"ns.fold({ { 1 } }, { 1 }, { { 1, { 1.0 } } }, {}, 7)",
       ":2: fold: watch must be 0 (none) or the index of a sum the terms name (1 to 1)"},
      {"ns.fold({ { math.mininteger } }, { 1 }, {}, { { 1, { 1.0 } } }, 1)",
       ":2: attempt to perform arithmetic on a nil value"},
  });
}

// A series a loop reads from a table (wrap_series.cpp lnums_at) grows as it is read: a count up to 2^24 needs no
// table that long, and a wrong first entry is that entry's error, not 2^24 values of 24 B allocated first, outside the
// script memory cap (under this address-space limit, which a run fits in with room to spare: "neusight:
// std::bad_alloc", no line).
TEST_CASE("script safety: a series loop checks a table's values before it holds room for the count asked",
          "[cli][safety]") {
  if (address_sanitized) {
    std::cout << "NEUSIGHT-TEST-SKIPPED: AddressSanitizer reserves more address space than the limit" << std::endl;
    return;
  }
  series_calls_fail(FILE_LINE_ARGS, {
      {"ns.queue({ 'x' }, {}, {}, 1 << 24, 0, 0)", ":2: queue: at: expected numbers, got a string"},
      {"ns.walk({}, 0, { 'x' }, {}, 1 << 24, {}, false)", ":2: walk: forward seconds: expected numbers, got a string"},
  }, "ulimit -v 200000;");
}
