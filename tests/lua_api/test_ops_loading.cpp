// tests/lua_api/test_ops_loading.cpp — op rules: schema checks with exact messages, search path, expansion.
#include <catch2/catch.hpp>

#include <regex>

#include "core/gpu_spec.h"
#include "core/text.h"
#include "lua/session.h"
#include "test_util.h"

using namespace ns;
using ns::error;
using ns_test::source_dir;
using ns_test::temp_dir;

namespace {

session_options options_with(const temp_dir& t) {
  session_options o;
  o.data_root = source_dir;
  o.ops_dirs = {t.path / "ops"};
  return o;
}

// The temp folder is shown as given; tests compare against a stable "ops/" prefix.
std::string stable(const temp_dir& t, const std::string& msg) {
  return ns_test::replace_all(msg, (t.path / "ops").lexically_normal().generic_string(), "ops");
}

void op_should_load(const char* file, int line, const std::string& src, const std::string& doc) {
  INFO(file << ":" << line);
  temp_dir t;
  t.write("ops/inline.lua", src);
  session s(options_with(t));
  const op_entry e = s.op_load("inline");
  CHECK(stable(t, e.file) == "ops/inline.lua");
  CHECK(e.doc == doc);
}

void op_should_fail(const char* file, int line, const std::string& src, const std::string& expected) {
  INFO(file << ":" << line);
  temp_dir t;
  t.write("ops/inline.lua", src);
  session s(options_with(t));
  try {
    s.op_load("inline");
    FAIL("no error");
  } catch (const error& e) {
    CHECK(stable(t, e.what()) == expected);
  }
}
#define FILE_LINE_ARGS __FILE__, __LINE__

const gpu_spec tiny = gpu_spec_parse(ns_test::slurp(source_dir / "tests/fixtures/gpus/tiny.toml"), "tiny.toml");

graph one_node(const std::string& op) {
  graph g;
  node n;
  n.op = op;
  n.name = "n1";
  n.inputs = {{4, 8}};
  n.output = {4, 8};
  g.nodes.push_back(n);
  return g;
}

}  // namespace

TEST_CASE("a well-formed op rule loads", "[ops]") {
  op_should_load(FILE_LINE_ARGS, R"lua(-- ops/inline.lua — test op
local K = require "neusight.kernels"
return {
  name = "inline",
  doc = "test op",
  forward = function(node, gpu) return {} end,
})lua",
                 "test op");
}

TEST_CASE("op rule schema errors are exact", "[ops]") {
  op_should_fail(FILE_LINE_ARGS, R"lua(return { name = "inline", doc = "d", forwad = function() end })lua",
                 "ops/inline.lua:1: unknown field 'forwad' (did you mean 'forward'?)");
  op_should_fail(FILE_LINE_ARGS, R"lua(return { name = "inline", doc = "d", forward = "x" })lua",
                 "ops/inline.lua: field 'forward' must be a function (got string)");
  op_should_fail(FILE_LINE_ARGS, R"lua(return { name = "inline", forward = function() end })lua",
                 "ops/inline.lua: missing required field 'doc'");
  op_should_fail(FILE_LINE_ARGS, R"lua(return { name = "other", doc = "d", forward = function() end })lua",
                 "ops/inline.lua: field 'name' is 'other' but must equal the file stem 'inline'");
  op_should_fail(FILE_LINE_ARGS, R"lua(return 42)lua", "ops/inline.lua: an op rule must return a table (got number)");
}

TEST_CASE("op files are sandboxed and strict about globals", "[ops]") {
  op_should_fail(FILE_LINE_ARGS, "local x = 1\nreturn {\n  name = \"inline\" doc = \"d\",\n}\n",
                 "ops/inline.lua:3: '}' expected (to close '{' at line 2) near 'doc'");
  op_should_fail(FILE_LINE_ARGS, "local f = io.open\nreturn {}\n", "ops/inline.lua:1: undefined global 'io'");
  op_should_fail(FILE_LINE_ARGS, "helper = 1\nreturn {}\n",
                 "ops/inline.lua:1: assignment to undeclared global 'helper' (use local)");
  op_should_fail(FILE_LINE_ARGS, "local m = require 'nosuch.module'\n",
                 "ops/inline.lua:1: module 'nosuch.module' not found:\n\tno file 'scripts/nosuch/module.lua'\n\tno file "
                 "'scripts/nosuch/module/init.lua'");
}

namespace {
// Expands one node with the inline op and checks the exact error (file:line + context line).
void expand_should_fail(const char* file, int line, const std::string& src, const std::string& expected) {
  INFO(file << ":" << line);
  temp_dir t;
  t.write("ops/inline.lua", src);
  session s(options_with(t));
  try {
    s.expand(one_node("inline"), tiny, false);
    FAIL("no error");
  } catch (const error& e) {
    CHECK(stable(t, e.what()) == expected);
  }
}
}  // namespace

TEST_CASE("hook errors carry file:line plus the op, hook and node", "[ops]") {
  expand_should_fail(FILE_LINE_ARGS, R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu)
    return { { kind = "gemm", name = "Linear", flops = #node.ouput, bytes = 0 } }
  end,
})lua",
                     "ops/inline.lua:4: node 'n1' has no field 'ouput' (did you mean 'output'?)\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
}

TEST_CASE("returned kernels are validated", "[ops]") {
  expand_should_fail(FILE_LINE_ARGS, R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "gemmm", name = "X", flops = 1, bytes = 1 } } end,
})lua",
                     "ops/inline.lua:3: forward() kernel #1: unknown kind 'gemmm' (did you mean 'gemm'?)\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
  expand_should_fail(FILE_LINE_ARGS, R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "memory", name = "MEM", flops = 0, bytes = 8, second = 1 } } end,
})lua",
                     "ops/inline.lua:3: forward() kernel #1: unknown field 'second' (did you mean 'seconds'?)\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
  // a dtype no engine name answers: named with the kernel and its field (it named neither)
  expand_should_fail(FILE_LINE_ARGS, R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "memory", name = "MEM", dtype = "fp33", flops = 0, bytes = 8 } } end,
})lua",
                     "ops/inline.lua:3: forward() kernel #1: field 'dtype': unknown dtype 'fp33' (did you mean 'fp32'?)\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
}

TEST_CASE("an op without a rule is an error — a rule file routes an op to the memory-bound fallback", "[ops]") {
  session_options o;
  o.data_root = source_dir;
  {
    session s(o);
    try {
      s.expand(one_node("no_such_op"), tiny, true);
      FAIL("no error");
    } catch (const error& e) {
      CHECK(std::string(e.what()) ==
            "unknown op 'no_such_op' (`neusight ops` lists the rules): no no_such_op.lua on the op search path\n"
            "    while loading op 'no_such_op' for node 1 'n1'");
    }
    try {
      s.expand(one_node("linaer"), tiny, false);
      FAIL("no error");
    } catch (const error& e) {
      CHECK(std::string(e.what()).rfind("unknown op 'linaer' (did you mean 'linear'?): no linaer.lua", 0) == 0);
    }
  }
  temp_dir t;
  t.write("ops/fancy.lua", "return require('neusight.fallback').rule { name = 'fancy', doc = 'memory-bound' }");
  session s(options_with(t));
  const expansion e = s.expand(one_node("fancy"), tiny, true);
  REQUIRE(e.kernels.size() == 2);  // forward + backward
  const kernel& k = e.kernels[0].k;
  CHECK(k.kind == kernel_kind::memory);
  CHECK(k.bytes == 4.0 * (32 + 32));
  REQUIRE(k.seconds);
  CHECK(*k.seconds > k.bytes / 100e9);  // effective bandwidth below nominal, plus launch overhead
}

// ns.gpu_optional (engine/lua/prelude.lua): a GPU file's optional key through the read-only view, nil where the file
// leaves it out (reading gpu.key raises there), and an error for a key no GPU has. The op encodes what it read in a
// kernel's bytes: num_sm + 1000 per optional key read as nil, its value otherwise.
TEST_CASE("ns.gpu_optional reads a GPU's optional field or nil and refuses an unknown key", "[ops][gpu]") {
  const char* const reads = R"lua(local ns = require "neusight"
return {
  name = "inline", doc = "d", backward = false,
  forward = function(node, gpu)
    local d, price = ns.gpu_optional(gpu, "nvlink_domain_gpus"), ns.gpu_optional(gpu, "price_per_hour_usd")
    local bytes = ns.gpu_optional(gpu, "num_sm") + (d or 1000) + (price == nil and 1000 or 0)
    return { { kind = "memory", name = ns.gpu_optional(gpu, "source"), flops = 0, bytes = bytes } }
  end,
})lua";
  temp_dir t;
  t.write("ops/inline.lua", reads);
  session s(options_with(t));
  const expansion absent = s.expand(one_node("inline"), tiny, false);  // tiny.toml: neither optional key
  REQUIRE(absent.kernels.size() == 1);
  CHECK(absent.kernels[0].k.bytes == 10 + 1000 + 1000);
  CHECK(absent.kernels[0].k.name == "tiny.toml");
  const gpu_spec bridged = gpu_spec_load(source_dir / "gpus" / "a100_pcie_80gb.toml", "a100_pcie_80gb.toml");
  REQUIRE(bridged.nvlink_domain_gpus == 2);
  REQUIRE(bridged.price_per_hour_usd == 0);
  const expansion present = s.expand(one_node("inline"), bridged, false);
  REQUIRE(present.kernels.size() == 1);
  CHECK(present.kernels[0].k.bytes == double(bridged.num_sm) + 2 + 1000);
  // a misspelt key, optional or required, is an error with the view's words, not a nil
  for (const auto& [key, near] : {std::pair{"nvlink_domian_gpus", "nvlink_domain_gpus"}, {"num_sn", "num_sm"}}) {
    INFO(key);
    expand_should_fail(FILE_LINE_ARGS, std::string(R"lua(local ns = require "neusight"
return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "memory", name = "M", flops = 0, bytes = ns.gpu_optional(gpu, ")lua") +
                                             key + R"lua(") } } end,
})lua",
                       std::string("ops/inline.lua:4: gpu has no field '") + key + "' (did you mean '" + near +
                           "'?)\n    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
  }
  // the view itself is unchanged: an optional key the file leaves out still raises when read directly
  expand_should_fail(FILE_LINE_ARGS, R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "memory", name = "M", flops = 0, bytes = gpu.nvlink_domain_gpus } } end,
})lua",
                     "ops/inline.lua:3: gpu has no field 'nvlink_domain_gpus'\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
  // a GPU it is not: an argument error naming the function
  expand_should_fail(FILE_LINE_ARGS, R"lua(local ns = require "neusight"
return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "memory", name = "M", flops = 0, bytes = ns.gpu_optional(node, "num_sm") } } end,
})lua",
                     "ops/inline.lua:4: bad argument #1 to 'gpu_optional' (GPU expected, got read-only view)\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
}

TEST_CASE("a hook that returns one kernel instead of a list is an error naming the rule file", "[ops]") {
  // Read as an array, { kind = …, … } has no elements: the node would vanish with 0 ms.
  expand_should_fail(FILE_LINE_ARGS, R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { kind = "memory", name = "MEM", flops = 0, bytes = 64 } end,
})lua",
                     "ops/inline.lua:3: forward() returned a single kernel (a table with field 'kind'), expected an "
                     "array of kernels: return { kernel }\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
  expand_should_fail(FILE_LINE_ARGS, R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "memory", name = "MEM", flops = 0, bytes = 64 }, extra = 1 } end,
})lua",
                     "ops/inline.lua:3: forward() returned a table with key 'extra', expected an array of kernels\n"
                     "    while evaluating op 'inline' forward() (ops/inline.lua) for node 1 'n1'");
}

TEST_CASE("training needs a backward hook or backward = false", "[ops]") {
  const char* const no_backward = R"lua(return {
  name = "inline", doc = "d",
  forward = function(node, gpu) return { { kind = "memory", name = "MEM", flops = 0, bytes = 64 } } end,
})lua";
  temp_dir t;
  t.write("ops/inline.lua", no_backward);
  {
    session s(options_with(t));
    CHECK(s.expand(one_node("inline"), tiny, false).kernels.size() == 1);  // inference: fine
    try {
      s.expand(one_node("inline"), tiny, true);
      FAIL("no error");
    } catch (const error& e) {
      CHECK(stable(t, e.what()) == "ops/inline.lua: op 'inline' has no 'backward' and this is a training run; write "
                                   "backward = false if the op has no backward work\n    for node 1 'n1'");
    }
  }
  t.write("ops/inline.lua", R"lua(return {
  name = "inline", doc = "d", backward = false,
  forward = function(node, gpu) return { { kind = "memory", name = "MEM", flops = 0, bytes = 64 } } end,
})lua");
  session s(options_with(t));
  const expansion e = s.expand(one_node("inline"), tiny, true);
  REQUIRE(e.kernels.size() == 1);
  CHECK(e.kernels[0].ph == phase::forward);
  op_should_fail(FILE_LINE_ARGS, R"lua(return { name = "inline", doc = "d", forward = function() end, backward = true })lua",
                 "ops/inline.lua: field 'backward' must be a function, or false for an op without backward work (got "
                 "true)");
  op_should_fail(FILE_LINE_ARGS, R"lua(return { name = "inline", doc = "d", forward = function() end, chek = 1 })lua",
                 "ops/inline.lua:1: unknown field 'chek' (did you mean 'check'?)");
}

TEST_CASE("op search path: ops flag, then NEUSIGHT_OPS_PATH (double semicolon splices defaults), then bundled", "[ops]") {
  temp_dir t;
  t.write("ops/matmul.lua", "return { name = 'matmul', doc = 'mine', forward = function() return {} end }");
  t.write("env/matmul.lua", "return { name = 'matmul', doc = 'env', forward = function() return {} end }");
  t.write("env/only_env.lua", "return { name = 'only_env', doc = 'env', forward = function() return {} end }");
  {
    session s(options_with(t));
    CHECK(s.op_load("matmul").doc == "mine");
    CHECK(s.op_load("softmax").file == "ops/softmax.lua");
  }
  {
    session_options o;
    o.data_root = source_dir;
    o.ops_path_env = (t.path / "env").string() + ";;";
    session s(o);
    CHECK(s.op_load("matmul").doc == "env");
    CHECK(s.op_load("only_env").doc == "env");
    CHECK(s.op_load("softmax").file == "ops/softmax.lua");
    bool shadowed = false;
    for (const auto& e : s.ops_list())
      if (e.name == "matmul") shadowed = e.shadows == std::vector<std::string>{"ops/matmul.lua"};
    CHECK(shadowed);
  }
  {
    session_options o;
    o.data_root = source_dir;
    o.ops_path_env = (t.path / "env").string();  // no ";;": the defaults are not searched (LUA_PATH rules)
    session s(o);
    CHECK_THROWS_WITH(s.op_load("softmax"), "no rule for op 'softmax' on the op search path");
  }
}

TEST_CASE("every bundled op loads and has a canonical-node test in tests/scripts", "[ops]") {
  session_options o;
  o.data_root = source_dir;
  session s(o);
  std::string tests;
  for (const auto& f : std::filesystem::directory_iterator(source_dir / "tests/scripts"))
    if (f.path().extension() == ".lua") tests += ns_test::slurp(f.path());
  const auto ops = s.ops_list();
  REQUIRE(ops.size() >= 20);
  for (const auto& e : ops) {
    INFO(e.file);
    CHECK_NOTHROW(s.op_load(e.name));
    // either load_op("name") or a table-driven case { "name", ... } in tests/scripts/test_ops.lua
    const std::regex used("load_op\\s*\\(?\\s*[\"']" + e.name + "[\"']|\\{\\s*\"" + e.name + "\"\\s*,");
    CHECK(std::regex_search(tests, used));
  }
}
