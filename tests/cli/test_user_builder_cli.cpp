// tests/cli/test_user_builder_cli.cpp — a model builder of your own under --scripts DIR (README "Writing a model
// builder"): its config fields are checked against its FIELDS, and its HF entry adds a config.json model_type.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::quoted;
using ns_test::run_cli;
using ns_test::temp_dir;

namespace {

// A small decoder: per layer a qkv linear, multi-query sdpa (decode_attention in decode), an MLP; FIELDS, and an HF
// entry for model_type "tinyfalcon" (the file stem). `fields` is the FIELDS line (empty: none).
std::string builder(const std::string& fields) {
  return R"lua(-- tinyfalcon.lua: a user builder
local M = {}
)lua" + fields + R"lua(
M.serving = { decode = true }
M.attention = { eager = true, sdpa = true }
M.HF = {
  fields = { hidden_size = { "hidden_size" }, num_hidden_layers = { "num_hidden_layers" },
             num_attention_heads = { "num_attention_heads" }, multi_query = { "multi_query" } },
  defaults = { num_hidden_layers = 2, multi_query = true },
  ignore = { require("neusight.models.hf").PRETRAINED_KEYS, { "layer_norm_epsilon" } },
  fixed = { alibi = { false } },
}
function M.build(cfg, opts)
  local b, h, nh = opts.batch, cfg.hidden_size, cfg.num_attention_heads
  local kvh, d = cfg.multi_query and 1 or nh, h // nh
  local T = opts.phase == "decode" and 1 or opts.seq
  local x = { b, T, h }
  local nodes = {}
  local function add(n) n.layer, n.count = "h", cfg.num_hidden_layers; nodes[#nodes + 1] = n end
  add { op = "linear", name = "h.qkv", inputs = { x }, output = { b, T, (nh + 2 * kvh) * d }, params = h * (nh + 2 * kvh) * d,
        attrs = { bias = false } }
  local q = { b, nh, T, d }
  if opts.phase == "decode" then
    local kv = { b, kvh, opts.context + 1, d }
    add { op = "decode_attention", name = "h.attn", inputs = { q, kv, kv }, output = q }
  else
    add { op = "sdpa", name = "h.attn", inputs = { q, { b, kvh, T, d }, { b, kvh, T, d } }, output = q }
  end
  add { op = "linear", name = "h.dense", inputs = { x }, output = x, params = h * h, attrs = { bias = false } }
  return nodes
end
return M
)lua";
}

const char* const fields_line =
    R"(M.FIELDS = { "hidden_size", "num_hidden_layers", "num_attention_heads", "multi_query" })";

const char* const flags = " --gpu h100 --mode inference --batch 2 --seq 64 --dtype bf16 --predictor roofline --format json";

// A temporary directory `t` whose s/ holds the builder with FIELDS, given as `scripts` (" --scripts DIR").
struct with_builder {
  temp_dir t;
  std::string scripts;
  with_builder() {
    t.write("s/neusight/models/tinyfalcon.lua", builder(fields_line));
    scripts = " --scripts " + quoted((t.path / "s").string());
  }
};

}  // namespace

TEST_CASE_METHOD(with_builder, "a user model builder: a misspelt config field is an error at its line",
                 "[cli][builder]") {
  const auto good = t.write("w/good.lua", "return {\n  model = { arch = 'tinyfalcon', name = 'tf', hidden_size = 256,\n"
                                          "    num_hidden_layers = 2, num_attention_heads = 4, multi_query = true },\n"
                                          "  gpu = 'h100', mode = 'inference', batch = 2, seq = 64,\n}\n");
  auto r = run_cli("run " + quoted(good.string()) + " --predictor roofline --format json" + scripts);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["model"] == "tf");
  // multi_qeury used to reach build() as nothing at all: multi_query nil, a multi-head model forecast without a word
  const auto typo = t.write("w/typo.lua", "return {\n  model = { arch = 'tinyfalcon', name = 'tf', hidden_size = 256,\n"
                                          "    num_hidden_layers = 2, num_attention_heads = 4, multi_qeury = true },\n"
                                          "  gpu = 'h100', mode = 'inference', batch = 2, seq = 64,\n}\n");
  r = run_cli("run " + quoted(typo.string()) + " --predictor roofline --format json -o " +
              quoted((t.path / "out.json").string()) + scripts);
  CHECK(r.code == 1);
  CHECK(r.err.find(typo.string() + ":3: tinyfalcon model 'tf': unknown field 'multi_qeury' (did you mean "
                   "'multi_query'?)") != std::string::npos);
  CHECK(!std::filesystem::exists(t.path / "out.json"));
  // a builder that lists no FIELDS cannot tell a misspelt field: refused, saying what to add
  t.write("n/neusight/models/tinyfalcon.lua", builder(""));
  r = run_cli("run " + quoted(good.string()) + " --predictor roofline --scripts " + quoted((t.path / "n").string()));
  CHECK(r.code == 1);
  CHECK(r.err.find("the tinyfalcon model builder (neusight/models/tinyfalcon.lua on the script search path) lists no "
                   "FIELDS") != std::string::npos);
  // a module of yours without build is named where it is (workload.lua builder_file), not as a bundled
  // scripts/neusight/models/<arch>.lua that does not exist
  t.write("b/neusight/models/tinyfalcon.lua", "return { FIELDS = {} }\n");
  r = run_cli("run " + quoted(good.string()) + " --predictor roofline --scripts " + quoted((t.path / "b").string()));
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("table field 'arch' = \"tinyfalcon\": neusight/models/tinyfalcon.lua on the script search path is "
                   "not a model builder (no build function)") != std::string::npos);
  CHECK(r.err.find("scripts/neusight/models/tinyfalcon.lua") == std::string::npos);
}

TEST_CASE_METHOD(with_builder, "a user model builder's HF entry adds a config.json model_type",
                 "[cli][builder][hf]") {
  const auto cfg = t.write("tf/config.json", "{\n  \"model_type\": \"tinyfalcon\",\n  \"hidden_size\": 256,\n"
                                             "  \"num_attention_heads\": 4,\n  \"layer_norm_epsilon\": 1e-5,\n"
                                             "  \"architectures\": [\"FalconForCausalLM\"]\n}\n");
  // without the builder: unsupported, and the error says how to add one
  auto r = run_cli("predict --model " + quoted(cfg.string()) + flags);
  CHECK(r.code == 1);
  CHECK(r.err.find("has model_type \"tinyfalcon\", which is not supported; supported: ") != std::string::npos);
  CHECK(r.err.find("(to add it: a builder neusight/models/tinyfalcon.lua declaring HF, under --scripts DIR; README "
                   "\"Writing a model builder\")") != std::string::npos);
  // with it: the file's fields and HF's defaults (2 layers), the same graph as the config table
  r = run_cli("predict" + scripts + " --model " + quoted(cfg.string()) + flags);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["model"] == "tf");
  const auto table = t.write("w.lua", "return { model = { arch = 'tinyfalcon', name = 'tf', hidden_size = 256, "
                                      "num_hidden_layers = 2, num_attention_heads = 4, multi_query = true } }\n");
  r = run_cli("run " + quoted(table.string()) + flags + scripts);
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["latency_ms"] == j["latency_ms"]);
  // decode works through the builder's serving flag
  r = run_cli("predict" + scripts + " --model " + quoted(cfg.string()) +
              " --gpu h100 --mode decode --batch 2 --context 128 --dtype bf16 --predictor roofline --format json");
  INFO(r.err);
  CHECK(r.code == 0);
  // the entry is strict: an unknown key at its line with a did-you-mean, a fixed key at another value refused
  const auto typo = t.write("typo/config.json", "{\n  \"model_type\": \"tinyfalcon\",\n  \"hidden_size\": 256,\n"
                                                "  \"num_attention_heads\": 4,\n  \"multi_qeury\": false\n}\n");
  r = run_cli("predict" + scripts + " --model " + quoted(typo.string()) + flags);
  CHECK(r.code == 1);
  CHECK(r.err.find(typo.string() + ":5: unknown key 'multi_qeury' for model_type \"tinyfalcon\" (did you mean "
                   "'multi_query'?)") != std::string::npos);
  const auto alibi = t.write("alibi/config.json", "{\n  \"model_type\": \"tinyfalcon\",\n  \"hidden_size\": 256,\n"
                                                  "  \"num_attention_heads\": 4,\n  \"alibi\": true\n}\n");
  r = run_cli("predict" + scripts + " --model " + quoted(alibi.string()) + flags);
  CHECK(r.code == 1);
  CHECK(r.err.find(alibi.string() + ":5: alibi = true is not modelled by the tinyfalcon builder (neusight/models/"
                   "tinyfalcon.lua on the script search path builds false only)") != std::string::npos);
  // an HF entry without `ignore` would pass every unknown key over: refused
  t.write("x/neusight/models/tinyfalcon.lua",
          ns_test::replace_all(builder(fields_line), "  ignore = { require(\"neusight.models.hf\").PRETRAINED_KEYS, "
                                                     "{ \"layer_norm_epsilon\" } },\n", ""));
  r = run_cli("predict --scripts " + quoted((t.path / "x").string()) + " --model " + quoted(cfg.string()) + flags);
  CHECK(r.code == 1);
  CHECK(r.err.find("neusight/models/tinyfalcon.lua: HF.ignore must be a list of key lists") != std::string::npos);
  // nor a flat list of keys, which from_config would have failed on with ipairs's own error
  t.write("y/neusight/models/tinyfalcon.lua",
          ns_test::replace_all(builder(fields_line), "ignore = { require(\"neusight.models.hf\").PRETRAINED_KEYS, "
                                                     "{ \"layer_norm_epsilon\" } }", "ignore = { \"layer_norm_epsilon\" }"));
  r = run_cli("predict --scripts " + quoted((t.path / "y").string()) + " --model " + quoted(cfg.string()) + flags);
  CHECK(r.code == 1);
  CHECK(r.err.find("neusight/models/tinyfalcon.lua: HF.ignore[1] must be a list of config.json keys (got string "
                   "layer_norm_epsilon)") != std::string::npos);
}

TEST_CASE_METHOD(with_builder, "search skips the layouts a user builder cannot shard and ranks the others",
                 "[cli][builder][search]") {
  // a builder without tensor_parallel: its tp > 1 layouts are settings it cannot run (neusight.infeasible), as a model
  // function's are; the search used to stop at the first of them with that error
  const auto cfg = t.write("tf/config.json", R"({"model_type": "tinyfalcon", "hidden_size": 256, "num_attention_heads": 4})");
  const auto r = run_cli("search" + scripts + " --model " + quoted(cfg.string()) +
                         " --gpu h100 --gpus 4 --batch 8 --seq 64 --dtype bf16 --predictor roofline --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(!j["layouts"].empty());
  for (const auto& l : j["layouts"]) CHECK(l["tp"] == 1);
  CHECK(r.out.find("parallel.tp: the tinyfalcon model builder (neusight/models/tinyfalcon.lua on the script search "
                   "path) has no tensor-parallel sharding") != std::string::npos);
}
