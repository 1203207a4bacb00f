// tests/cli/test_compare_cli.cpp — the figures of every forecast (scripts/neusight/figures.lua) against their definitions
// from the report's own numbers, and comparisons: list-valued predict flags give one row per combination, each equal to
// the single prediction, with error rows for combinations that cannot be forecast and hard errors for typos.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "cli_csv.h"
#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::csv_table;
using ns_test::run_cli;
using ns_test::run_json;

namespace {

// Σ flops × count of the report's kernels in these phases.
double ops_flops(const json& j, std::initializer_list<const char*> phases) {
  double f = 0;
  for (const auto& op : j["ops"])
    for (const char* p : phases)
      if (op["phase"] == p) f += op["flops"].get<double>() * op["count"].get<double>();
  return f;
}

double gpu_number(const std::string& name, const char* key) {
  for (const auto& g : json::parse(run_cli("gpus --format json").out))
    if (g["name"] == name) return g.contains(key) ? g[key].get<double>() : 0.0;
  FAIL("no GPU " << name);
  return 0;
}

const std::string small = "predict --model gpt2_large --mode train --optimizer adamw --dtype bf16 --seq 128 --predictor roofline ";

}  // namespace

TEST_CASE("figures: single-GPU training equals the definitions on the report's numbers", "[cli][figures]") {
  const json j = run_json(small + "--gpu l4 --batch 4");
  const json& f = j["figures"];
  const double latency_s = j["latency_ms"].get<double>() / 1e3;
  const double tokens = 4 * 128;
  CHECK(f["gpus"] == 1);
  CHECK(f["tokens"] == 4 * 128);
  CHECK(f["tokens_per_s"].get<double>() == Approx(tokens / latency_s).epsilon(1e-12));
  const double model = ops_flops(j, {"forward", "backward", "accumulate"});
  CHECK(f["model_flops"].get<double>() == Approx(model).epsilon(1e-12));
  CHECK(f["flops_per_token"].get<double>() == Approx(model / tokens).epsilon(1e-12));
  CHECK(f["achieved_tflops"].get<double>() == Approx(j["flops"].get<double>() / latency_s / 1e12).epsilon(1e-12));
  const double peak = gpu_number("L4", "peak_bf16_tflops");
  CHECK(f["peak_tflops"].get<double>() == peak);
  const double mfu = f["mfu"].get<double>();
  CHECK(mfu > 0);
  CHECK(mfu <= 1);
  CHECK(mfu == Approx(model / latency_s / (peak * 1e12)).epsilon(1e-12));
  CHECK(f["mfu_convention"] == "graph_forward_backward_flops");
  const double price = gpu_number("L4", "price_per_hour_usd");
  REQUIRE(price > 0);
  CHECK(f["price_per_hour_usd"].get<double>() == price);
  CHECK(f["cost_per_iteration_usd"].get<double>() == Approx(price * 1 * latency_s / 3600).epsilon(1e-12));
  CHECK(f["cost_per_million_tokens_usd"].get<double>() == Approx(price * latency_s / 3600 / tokens * 1e6).epsilon(1e-12));
  CHECK(f["memory_gb"].get<double>() == j["memory_gb"].get<double>());  // the memory model's (memory.lua)
  CHECK(f["memory_gb"].get<double>() > j["state_gb"].get<double>());    // training saves activations
  CHECK(f["fits"] == j["fits"]);
  CHECK(f["fits"] == (j["memory_gb"].get<double>() <= j["memory"]["capacity_gb"].get<double>()));
  // an L4 reports 22.0 GiB of its "24 GB": the capacity is 95 % of that (memory.lua REPORTED_SHARE)
  CHECK(j["memory"]["capacity_gb"].get<double>() == Approx(0.95 * gpu_number("L4", "mem_reported_gib") * 1073741824 / 1e9));
  // the table says the same
  const auto t = run_cli(small + "--gpu l4 --batch 4");
  REQUIRE(t.code == 0);
  CHECK(t.out.find("throughput ") != std::string::npos);
  CHECK(t.out.find(" tokens/s ") != std::string::npos);
  CHECK(t.out.find("MFU ") != std::string::npos);
  CHECK(t.out.find("USD per iteration") != std::string::npos);
}

TEST_CASE("figures: the model-FLOPs convention matches 6 N + attention for a dense GPT", "[cli][figures]") {
  // PaLM / Megatron: 6 N per token plus 12 L d s for attention, halved for causal attention (sdpa visits half the
  // pairs). The graph's kernels count the same within the small element-wise and norm FLOPs.
  const json j = run_json("predict --model gpt2_large --gpu h100 --mode train --optimizer adamw --dtype bf16 --batch 4 --seq 1024");
  const double n = j["params"].get<double>(), L = 36, d = 1280, s = 1024;
  const double palm = 6 * n + 6 * L * d * s;
  CHECK(j["figures"]["flops_per_token"].get<double>() == Approx(palm).epsilon(0.02));
}

TEST_CASE("figures: parallel runs are per GPU over dp x tp x pp — no price, no cost — decode tokens are the batch", "[cli][figures]") {
  const json j = run_json(small + "--gpu h100 --batch 8 --dp 2 --tp 2 --pp 2 --microbatches 2");
  const json& f = j["figures"];
  const json& p = j["parallel"];
  const double latency_s = j["latency_ms"].get<double>() / 1e3;
  CHECK(latency_s == p["iteration_ms"].get<double>() / 1e3);
  CHECK(f["gpus"] == 8);
  CHECK(f["tokens_per_s"].get<double>() == Approx(8 * 128 / latency_s).epsilon(1e-12));
  CHECK(f["tokens_per_s_per_gpu"].get<double>() == Approx(8 * 128 / latency_s / 8).epsilon(1e-12));
  // the model's FLOPs whatever the layout (tests/cli/test_model_flops_layout_cli.cpp): dp 8's, of the same batch and
  // kernels (one GPU runs HF's, whose GELU is 8 element-wise kernels to Megatron's fused one); within 1e-5: tp 2 pads
  // GPT-2's 50257 vocabulary rows to 50258 (lm_head's extra row, 1.7e-6 here) and its row-parallel c_proj biases,
  // replicated, accumulate their gradients on each tp rank
  const double model = run_json(small + "--gpu h100 --batch 8 --dp 8")["figures"]["model_flops"].get<double>();
  CHECK(f["model_flops"].get<double>() == Approx(model).epsilon(1e-5));
  // dp × tp × microbatches copies of the rank's graph count more: its norms, residual adds and biases on every tp rank,
  // its parameters' gradient accumulation on every replica and microbatch
  CHECK(2 * 2 * 2 * ops_flops(j, {"forward", "backward", "accumulate"}) > model);
  CHECK(f["mfu"].get<double>() ==
        Approx(f["model_flops"].get<double>() / 8 / latency_s / (f["peak_tflops"].get<double>() * 1e12)).epsilon(1e-12));
  CHECK(f["memory_gb"].get<double>() == p["memory_gb"].get<double>());
  CHECK(f["fits"] == p["fits"]);
  const double price = gpu_number("H100-SXM5-80GB", "price_per_hour_usd");
  CHECK(f["cost_per_iteration_usd"].get<double>() == Approx(price * 8 * latency_s / 3600).epsilon(1e-12));

  const json m = run_json("predict --model gpt2_large --gpu mi300x --mode inference --dtype bf16 --batch 2 --seq 128 --predictor roofline");
  CHECK(m["figures"]["price_per_hour_usd"].is_null());
  CHECK(m["figures"]["cost_per_iteration_usd"].is_null());
  CHECK(m["figures"]["cost_per_million_tokens_usd"].is_null());
  CHECK(m["figures"]["mfu"].get<double>() > 0);

  const json d = run_json("predict --model llama32_1b --gpu h100 --mode decode --batch 8 --context 512 --dtype bf16 --predictor roofline");
  CHECK(d["figures"]["tokens"] == 8);
  CHECK(d["figures"]["tokens_per_s"].get<double>() == Approx(8 / (d["latency_ms"].get<double>() / 1e3)).epsilon(1e-12));
  CHECK(d["figures"]["memory_gb"].get<double>() == d["memory_gb"].get<double>());
  CHECK(d["figures"]["memory_gb"].get<double>() >= d["state_gb"].get<double>() + d["kv_cache_gb"].get<double>());
}

TEST_CASE("compare: list-valued flags give one row per combination, each equal to its single prediction", "[cli][compare]") {
  const std::string base = "predict --model gpt2_large --mode train --optimizer adamw --dtype bf16 --seq 128 ";
  const json c = run_json(base + "--gpu l4,h100 --batch 4,8 --tp 1,2");
  const json& rows = c["rows"];
  REQUIRE(rows.size() == 8);
  // the last flag varies fastest: gpu, then batch, then tp
  const std::vector<std::tuple<std::string, int, int>> order = {
      {"L4", 4, 1}, {"L4", 4, 2}, {"L4", 8, 1}, {"L4", 8, 2},
      {"H100-SXM5-80GB", 4, 1}, {"H100-SXM5-80GB", 4, 2}, {"H100-SXM5-80GB", 8, 1}, {"H100-SXM5-80GB", 8, 2}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    const auto& [gpu, batch, tp] = order[i];
    INFO("row " << i << ": " << row.dump());
    CHECK(!row.contains("error"));
    CHECK(row["gpu"] == gpu);
    CHECK(row["batch"] == batch);
    CHECK(row["tp"] == tp);
    CHECK(row["seq"] == 128);
    CHECK(row["dtype"] == "bf16");
    const json one = run_json(base + "--gpu " + std::string(i < 4 ? "l4" : "h100") + " --batch " + std::to_string(batch) +
                              " --tp " + std::to_string(tp));
    CHECK(row["latency_ms"] == one["latency_ms"]);  // bit for bit: the same code path in one session
    for (const auto& [key, value] : one["figures"].items()) {
      INFO(key);
      CHECK(row[key] == value);
    }
  }
}

TEST_CASE("compare: invalid combinations are error rows, typos stop the run", "[cli][compare]") {
  const std::string base = "predict --model gpt2_large --gpu h100 --mode train --dtype bf16 --seq 128 --predictor roofline ";
  const json c = run_json(base + "--batch 4,6 --dp 1,4");
  const json& rows = c["rows"];
  REQUIRE(rows.size() == 4);
  CHECK(!rows[0].contains("error"));
  CHECK(!rows[1].contains("error"));
  CHECK(!rows[2].contains("error"));
  REQUIRE(rows[3].contains("error"));  // batch 6, dp 4
  CHECK(rows[3]["error"].get<std::string>().find("the global batch 6 is not divisible by dp × microbatches = 4 × 1") !=
        std::string::npos);
  CHECK(rows[3]["batch"] == 6);
  CHECK(rows[3]["dp"] == 4);
  CHECK(rows[3]["gpu"] == "H100-SXM5-80GB");
  CHECK(!rows[3].contains("latency_ms"));
  // a layout the builder refuses (20 heads over tp 3) is a row too, and the single prediction of it still fails
  const json t = run_json(base + "--batch 4 --tp 2,3");
  REQUIRE(t["rows"].size() == 2);
  CHECK(!t["rows"][0].contains("error"));
  CHECK(t["rows"][1]["error"].get<std::string>().find("n_head = 20 is not divisible by tp = 3") != std::string::npos);
  CHECK(run_cli(base + "--batch 4 --tp 3").code == 1);

  // typos: nothing is forecast, nothing is printed
  auto r = run_cli("predict --model gpt2_large --gpu h100,h1000 --mode inference --batch 1,2 --seq 128");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("neusight: unknown GPU 'h1000'", 0) == 0);
  r = run_cli("predict --model gpt2_large,gpt2_larg --gpu h100 --mode inference --batch 1 --seq 128");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("--model names an unknown model preset \"gpt2_larg\" (did you mean 'gpt2_large'?)") != std::string::npos);
  r = run_cli("predict --model gpt2_large --gpu h100 --mode inference --batch 1 --seq 128 --dtype bf16,bf61");
  CHECK(r.code == 1);
  CHECK(r.err.find("--dtype must be a dtype name") != std::string::npos);
  // a parallel choice field's names are the Lua config's (scripts/neusight/parallel/config.lua), checked up front too
  r = run_cli(base + "--batch 4 --pp 2 --microbatches 2 --recompute full,selektive");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("command line: --recompute: \"none\", \"selective\" or \"full\" "
                   "expected, got \"selektive\" (did you mean 'selective'?)") != std::string::npos);
  r = run_cli(base + "--batch 4 --pp 2 --microbatches 2 --kernels megatorn");
  CHECK(r.code == 1);
  CHECK(r.err.find("--kernels: \"megatron\" or \"eager\" expected, got \"megatorn\" (did you mean 'megatron'?)") !=
        std::string::npos);
  // and so are the values no row changes that each row resolved: a schedule, a predictor, a cluster (a list given to
  // one of them, or a misspelling, was every row's error, exit 0)
  for (const auto& [flag, says] : std::vector<std::pair<std::string, std::string>>{
           {"--schedule gpipe,1f1b", "--schedule: one name expected (one of \"1f1b\", \"gpipe\", \"interleaved\"), "
                                     "got the list \"gpipe,1f1b\": a forecast runs one; `neusight search --schedule "
                                     "gpipe,1f1b` ranks layouts under each"},
           {"--schedule gpipee", "got \"gpipee\" (did you mean 'gpipe'?)"},
           {"--predictor neusight,roofline", "unknown predictor 'neusight,roofline' (did you mean 'neusight'?)"},
           {"--cluster dgx_h100,x", "unknown cluster 'dgx_h100,x' (did you mean 'dgx_h100'?)"}}) {
    INFO(flag);
    const bool predictor = flag.rfind("--predictor", 0) == 0;
    r = run_cli((predictor ? ns_test::replace_all(base, "--predictor roofline ", "") : base) + "--batch 4 --pp 1,2 --microbatches 2 " + flag);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find(says) != std::string::npos);
  }
  CHECK(run_cli("predict --model gpt2_large --gpu h100 --mode inference,infer --batch 1 --seq 128").code == 2);
  CHECK(run_cli("predict --model gpt2_large --gpu h100 --mode inference --batch 1,0 --seq 128").code == 2);
  CHECK(run_cli("predict --model gpt2_large --gpu h100, --mode inference --batch 1 --seq 128").code == 2);
}

TEST_CASE("compare: CSV and the table carry the figures of the JSON rows", "[cli][compare]") {
  const std::string args = "predict --model gpt2_large --gpu l4,mi300x --mode inference --dtype bf16 --seq 128 "
                           "--batch 2,3 --dp 1,2 --predictor roofline";
  const json j = run_json(args);
  const auto r = run_cli(args + " --format csv");
  REQUIRE(r.code == 0);
  const auto [header, lines] = csv_table(r.out);
  for (const char* key : {"gpu", "batch", "dp", "latency_ms", "tokens_per_s", "achieved_tflops", "mfu", "memory_gb",
                          "fits", "cost_per_iteration_usd", "cost_per_million_tokens_usd", "error"}) {
    INFO(key);
    CHECK(std::find(header.begin(), header.end(), key) != header.end());
  }
  size_t i = 0;
  for (; i < lines.size(); ++i) {
    REQUIRE(i < j["rows"].size());
    const json& row = j["rows"][i];
    const auto& cells = lines[i];
    REQUIRE(cells.size() == header.size());
    for (size_t k = 0; k < header.size(); ++k) {
      INFO("row " << i << " " << header[k] << " = " << cells[k]);
      if (!row.contains(header[k]) || row[header[k]].is_null()) CHECK(cells[k].empty());
      else if (row[header[k]].is_number()) CHECK(std::stod(cells[k]) == row[header[k]].get<double>());
      else if (row[header[k]].is_boolean()) CHECK(cells[k] == (row[header[k]].get<bool>() ? "true" : "false"));
    }
  }
  CHECK(i == j["rows"].size());
  CHECK(j["rows"][3]["error"].get<std::string>().find("not divisible") != std::string::npos);  // l4, batch 3, dp 2
  CHECK(j["rows"][7]["error"].get<std::string>().find("not divisible") != std::string::npos);  // mi300x, batch 3, dp 2

  const auto t = run_cli(args);
  REQUIRE(t.code == 0);
  for (const char* col : {"latency ms", "tokens/s", "TFLOP/s/GPU", "MFU %", "memory GB", "fits", "$/pass", "$/Mtoken"}) {
    INFO(col);
    CHECK(t.out.find(col) != std::string::npos);
  }
  CHECK(t.out.find("2 could not be forecast") != std::string::npos);
  CHECK(t.out.find("fixed     model gpt2_large, mode inference, dtype bf16, seq 128") != std::string::npos);
}

// Issue 16: a comparison row's JSON warnings are a list, as a single forecast's (they were one "; "-joined string);
// CSV keeps them in one cell, joined by "; ".
TEST_CASE("compare: a row's warnings are a JSON list as a single forecast's and one CSV cell", "[cli][compare]") {
  const std::string args = "predict --model gpt2_large --gpu h100,l4 --mode inference --dtype bf16 --seq 128 --batch 2 "
                           "--optimizer adamw";
  const json j = run_json(args);
  REQUIRE(j["rows"].size() == 2);
  size_t most = 0;
  for (const auto& row : j["rows"]) {
    INFO(row.dump());
    REQUIRE(row["warnings"].is_array());
    const std::string gpu = row["gpu"] == "L4" ? "l4" : "h100";
    CHECK(row["warnings"] == run_json(args.substr(0, args.find("h100,l4")) + gpu +
                                      args.substr(args.find("h100,l4") + 7))["warnings"]);
    most = std::max(most, row["warnings"].size());
  }
  CHECK(most >= 2);  // the optimizer's (inference) and the band's out-of-distribution warnings
  const auto r = run_cli(args + " --format csv");
  REQUIRE(r.code == 0);
  const auto [header, lines] = csv_table(r.out);
  const auto at = size_t(std::find(header.begin(), header.end(), "warnings") - header.begin());
  REQUIRE(at < header.size());
  REQUIRE(lines.size() == 2);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string joined;
    for (const auto& w : j["rows"][i]["warnings"]) joined += (joined.empty() ? "" : "; ") + w.get<std::string>();
    CHECK(lines[i].at(at) == joined);
  }
}

TEST_CASE("GPU file: a bad price_per_hour_usd stops the forecast with file:line", "[cli][figures]") {
  ns_test::temp_dir t;
  const std::string tiny = ns_test::slurp(ns_test::source_dir / "tests/fixtures/gpus/tiny.toml");
  for (const auto& [value, what] : std::map<std::string, std::string>{
           {"0", "must be a positive finite number (got 0.000000)"},
           {"-2.5", "must be a positive finite number (got -2.500000)"},
           {"inf", "must be a positive finite number (got inf)"},
           {"nan", "must be a positive finite number (got nan)"},
           {"\"3 USD\"", "must be a number (got string)"}}) {
    const auto gpu = t.write("g.toml", tiny + "price_per_hour_usd = " + value + "\n").string();
    const auto r = run_cli("run tests/golden/tiny_gpt/run.lua --gpu '" + gpu + "' --predictor roofline");
    INFO(value << ": " << r.err);
    CHECK(r.code == 1);
    const size_t line = size_t(std::count(tiny.begin(), tiny.end(), '\n')) + 1;
    CHECK(r.err.rfind("neusight: " + gpu + ":" + std::to_string(line) + ":1: key 'price_per_hour_usd' " + what, 0) == 0);
  }
  const auto gpu = t.write("g.toml", tiny + "price_per_hour_usd = 2\n").string();
  const json j = run_json("run tests/golden/tiny_gpt/run.lua --gpu '" + gpu + "' --predictor roofline");
  CHECK(j["figures"]["price_per_hour_usd"] == 2.0);
  CHECK(j["figures"]["cost_per_iteration_usd"].get<double>() ==
        Approx(2.0 * j["latency_ms"].get<double>() / 1e3 / 3600).epsilon(1e-12));
}

// Issue 14: a report field added in Lua alone reaches JSON, CSV and the tables with no C++ change. A scripts folder
// shadows neusight/figures.lua with the bundled file plus one field (tokens per joule at a 700 W board power) and one
// line.
TEST_CASE("figures: a field added in Lua appears in JSON, the comparison's columns and the table", "[cli][figures]") {
  ns_test::temp_dir t;
  std::string lua = ns_test::slurp(ns_test::source_dir / "scripts/neusight/figures.lua");
  const std::string anchor = "  -- the uncertainty band (scripts/neusight/uncertainty.lua)";
  const size_t at = lua.find(anchor);
  REQUIRE(at != std::string::npos);
  lua.insert(at, "  fields[#fields + 1] = { key = \"tokens_per_joule\", value = tokens_per_s and tokens_per_s / 700,\n"
                 "    column = \"tok/J\", cell = fmt(\"%.2f\", tokens_per_s and tokens_per_s / 700 or 0) }\n"
                 "  lines[#lines + 1] = fmt(\"energy           %12.2f tokens per joule at 700 W\", tokens_per_s / 700)\n");
  t.write("scripts/neusight/figures.lua", lua);
  const std::string scripts = " --scripts '" + (t.path / "scripts").string() + "'";
  const std::string args = "predict --model gpt2_large --gpu h100 --mode inference --seq 128" + scripts;
  const auto j = run_cli(args + " --batch 4 --format json");
  INFO(j.err);
  REQUIRE(j.code == 0);
  const json r = json::parse(j.out);
  CHECK(r["figures"]["tokens_per_joule"].get<double>() ==
        Approx(r["figures"]["tokens_per_s"].get<double>() / 700).epsilon(1e-12));
  const auto table = run_cli(args + " --batch 4");
  CHECK(table.out.find("tokens per joule at 700 W") != std::string::npos);
  const auto csv = run_cli(args + " --batch 1,4 --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.substr(0, csv.out.find('\n')).find("tokens_per_joule") != std::string::npos);
  const auto cmp = run_cli(args + " --batch 1,4");
  CHECK(cmp.out.find("tok/J") != std::string::npos);
}

// Issue 14: a report field from a workload hook. The workload script's own `figures` function adds fields to JSON
// `figures`, the comparison's columns and the table's lines; what it returns is checked.
TEST_CASE("figures: a workload's own figures function adds fields to JSON and the comparison and the table",
          "[cli][figures]") {
  ns_test::temp_dir t;
  auto script = [&](const std::string& name, const std::string& fn) {
    return t.write(name, "return { model = 'gpt2_large', gpu = 'h100', mode = 'inference', batch = 4, seq = 128,\n"
                         "  figures = " + fn + " }\n").string();
  };
  const std::string ok = script("w.lua", "function(f) return { tokens_per_joule = f.figures.tokens_per_s / 700,\n"
                                         "  ms_check = f.latency_ms, board = f.gpu.name } end");
  const auto j = run_cli("run '" + ok + "' --format json");
  INFO(j.err);
  REQUIRE(j.code == 0);
  const json r = json::parse(j.out);
  CHECK(r["figures"]["tokens_per_joule"].get<double>() ==
        Approx(r["figures"]["tokens_per_s"].get<double>() / 700).epsilon(1e-12));
  CHECK(r["figures"]["ms_check"].get<double>() == Approx(r["latency_ms"].get<double>()).epsilon(1e-12));
  CHECK(r["figures"]["board"] == "H100-SXM5-80GB");
  const auto table = run_cli("run '" + ok + "'");
  CHECK(table.out.find("tokens_per_joule") != std::string::npos);
  const auto csv = run_cli("run '" + ok + "' --batch 1,4 --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.substr(0, csv.out.find('\n')).find("tokens_per_joule") != std::string::npos);

  const std::pair<std::string, std::string> bad[] = {
      {"function() return 3 end", "field 'figures' must return a table of name = value (got number)"},
      {"function() return { mfu = 1 } end", "field 'figures' returned 'mfu', a figure or column the report has already"},
      {"function() return { x = 0/0 } end", "field 'figures' returned x = "},
      {"function() return { [1] = 2 } end", "field 'figures' returned the name 1"},
      {"'tokens'", "field 'figures' must be a function(f) returning { name = value, … } (got \"tokens\")"},
      {"function(f) return f.nope.x end", "attempt to index"},
  };
  for (size_t i = 0; i < std::size(bad); ++i) {
    const std::string s = script("bad" + std::to_string(i) + ".lua", bad[i].first);
    const auto e = run_cli("run '" + s + "' --format json");
    INFO(bad[i].first << "\nstderr: " << e.err);
    CHECK(e.code == 1);
    CHECK(e.out.empty());
    CHECK(e.err.find(bad[i].second) != std::string::npos);
    CHECK(e.err.find("bad" + std::to_string(i) + ".lua") != std::string::npos);
  }
}

// A workload figure named like a comparison row's other cells (an input such as batch or tp, latency_ms, warnings) would
// overwrite that cell, so a comparison refuses it in each row; a single forecast keeps its figures in an object of their
// own (JSON `figures`, table lines naming the script), where the name takes nothing's place, and runs.
TEST_CASE("figures: a workload figure named like a row key is refused in a comparison only", "[cli][figures][compare]") {
  ns_test::temp_dir t;
  const std::string s = t.write("w.lua", "return { model = 'gpt2_large', gpu = 'h100', mode = 'inference', batch = 4,\n"
                                         "  seq = 128, figures = function(f) return { tp = 2, batch = 999, latency_ms = 1,\n"
                                         "  warnings = 'none' } end }\n").string();
  const std::string tp_only = t.write("tp.lua", "return { model = 'gpt2_large', gpu = 'h100', mode = 'inference', batch = 4,\n"
                                                "  seq = 128, figures = function(f) return { tp = 2 } end }\n").string();
  // a row's setting (compare.lua SETTINGS) too
  const std::string kernels_only = t.write("k.lua", "return { model = 'gpt2_large', gpu = 'h100', mode = 'inference', batch = 4,\n"
                                                    "  seq = 128, figures = function(f) return { kernels = 'x' } end }\n").string();
  SECTION("a single run keeps the figures beside the report's own fields") {
    const auto r = run_cli("run '" + s + "' --predictor roofline --format json");
    INFO(r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    CHECK(j["figures"]["tp"] == 2);
    CHECK(j["figures"]["batch"] == 999);
    CHECK(j["figures"]["latency_ms"] == 1);
    CHECK(j["figures"]["warnings"] == "none");
    CHECK(j["batch"] == 4);  // the report's own
    CHECK(j["latency_ms"].get<double>() > 1);
    CHECK(j["warnings"].is_array());
    const auto table = run_cli("run '" + s + "' --predictor roofline");
    REQUIRE(table.code == 0);
    CHECK(table.out.find("\ntp ") != std::string::npos);
  }
  SECTION("a comparison refuses it in every row, naming the script") {
    for (const auto& [script, name] :
         {std::pair{s, std::string("batch")}, {tp_only, "tp"}, {kernels_only, "kernels"}}) {
      const auto r = run_cli("run '" + script + "' --predictor roofline --batch 2,4 --format json");
      INFO(r.err);
      REQUIRE(r.code == 1);  // a combination that cannot be forecast is an error row; none could: exit 1
      const json rows = json::parse(r.out)["rows"];
      REQUIRE(rows.size() == 2);
      for (const auto& row : rows) {
        REQUIRE(row.contains("error"));
        const std::string e = row["error"];
        CHECK(e.find("field 'figures' returned '" + name + "', a figure or column the report has already") !=
              std::string::npos);
        CHECK(e.find(script) != std::string::npos);
      }
    }
  }
}

// Issue 14: a comparison's rows are built in Lua (scripts/neusight/compare.lua add). A scripts folder shadows it with
// the bundled file plus one cell (the GPU's memory) in every forecast's row: it reaches the JSON rows, the CSV header, the
// table's columns and the HTML page with no C++ change; error rows keep the inputs and the error.
TEST_CASE("compare: a row field added in Lua alone appears in JSON CSV the table and the page", "[cli][compare]") {
  ns_test::temp_dir t;
  std::string lua = ns_test::slurp(ns_test::source_dir / "scripts/neusight/compare.lua");
  const std::string anchor = "  row[#row + 1] = { key = \"warnings\"";
  const size_t at = lua.find(anchor);
  REQUIRE(at != std::string::npos);
  lua.insert(at, "  row[#row + 1] = { key = \"gpu_mem\", column = \"GPU memory\", value = gpu.mem_gb,\n"
                 "    cell = tostring(gpu.mem_gb) }\n");
  t.write("scripts/neusight/compare.lua", lua);
  const std::string args = "predict --model gpt2_large --gpu h100,l4 --mode inference --seq 128 --batch 2,3 --dp 1,2"
                           " --predictor roofline --scripts '" + (t.path / "scripts").string() + "'";
  const auto j = run_cli(args + " --format json");
  INFO(j.err);
  REQUIRE(j.code == 0);
  const auto rows = nlohmann::ordered_json::parse(j.out)["rows"];  // in the cells' order
  REQUIRE(rows.size() == 8);
  size_t forecast = 0, failed = 0;
  for (const auto& row : rows) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : row.items()) keys.push_back(k);
    // the inputs first, in the list flags' order
    const std::vector<std::string> inputs = {"model", "gpu", "mode", "dtype", "batch", "seq", "context",
                                             "dp",    "tp",  "pp",   "ep",    "microbatches", "recompute"};
    REQUIRE(keys.size() > inputs.size());
    CHECK(std::vector<std::string>(keys.begin(), keys.begin() + long(inputs.size())) == inputs);
    if (row.contains("error")) {
      ++failed;  // batch 3 on dp 2
      CHECK(!row.contains("gpu_mem"));
      CHECK(row["batch"] == 3);
      CHECK(row["dp"] == 2);
      continue;
    }
    ++forecast;
    CHECK(row["gpu_mem"].get<double>() == gpu_number(row["gpu"], "mem_gb"));
    CHECK(keys[keys.size() - 2] == "gpu_mem");  // before the warnings, after the figures
    CHECK(keys.back() == "warnings");
  }
  CHECK(forecast == 6);
  CHECK(failed == 2);
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.substr(0, csv.out.find('\n')).find(",gpu_mem,warnings") != std::string::npos);
  const std::string page = (t.path / "page.html").string();
  const auto table = run_cli(args + " --report '" + page + "'");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("GPU memory") != std::string::npos);
  CHECK(table.out.find("2 could not be forecast") != std::string::npos);
  CHECK(ns_test::slurp(page).find("<th>gpu_mem</th>") != std::string::npos);
}

// Issue 14: the rows built in Lua keep what text that is not UTF-8 did before: the table and CSV show U+FFFD for the
// bytes, JSON and the HTML page refuse it (nothing written).
TEST_CASE("compare: an error row whose text is not UTF-8", "[cli][compare]") {
  ns_test::temp_dir t;
  const std::string w = t.write("w.lua", "return { model = 'gpt2_large', gpu = 'h100', mode = 'inference', batch = 2,\n"
                                         "  seq = 128, figures = function(f) if f.batch == 4 then error('bad \\255 byte', 0)"
                                         " end return {} end }\n").string();
  const std::string args = "run '" + w + "' --batch 2,4 --predictor roofline";
  const auto table = run_cli(args);
  INFO(table.err);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("error: bad \xEF\xBF\xBD byte") != std::string::npos);
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.find("bad \xEF\xBF\xBD byte") != std::string::npos);
  CHECK(run_cli(args + " --format json").code == 1);
  const std::string page = (t.path / "p.html").string();
  const auto html = run_cli(args + " --report '" + page + "'");
  CHECK(html.code == 1);
  CHECK(html.out.empty());
  CHECK(!std::filesystem::exists(page));
}

// A comparison's rows carry the GPU's file as serve --sweep's rows and a single forecast do: after the inputs, in JSON
// and CSV (error rows too: the file of the GPU --gpu gave), not a table column.
TEST_CASE("compare: rows carry gpu_file as a single forecast does", "[cli][compare][gpu]") {
  const std::string args = "predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline "
                           "--gpu h100,l4 --dp 1,3";
  const auto j = run_cli(args + " --format json");
  INFO(j.err);
  REQUIRE(j.code == 0);
  const auto rows = nlohmann::ordered_json::parse(j.out)["rows"];
  REQUIRE(rows.size() == 4);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const std::string gpu = i < 2 ? "h100" : "l4";
    const std::string single = run_json("predict --model gpt2_med --mode inference --batch 8 --seq 512 "
                                        "--predictor roofline --gpu " + gpu)["gpu_file"];
    INFO(i << " " << row.dump());
    REQUIRE(row.contains("gpu_file"));
    CHECK(row["gpu_file"] == single);
    CHECK(row.contains("error") == (i % 2 == 1));  // dp 3: 8 is not divisible by 3
    std::vector<std::string> keys;
    for (const auto& [k, v] : row.items()) keys.push_back(k);
    REQUIRE(keys.size() > 22);
    CHECK(keys[12] == "recompute");
    CHECK(keys[13] == "zero");     // the last input (--zero)
    CHECK(keys[14] == "kernels");  // then the settings (compare.lua SETTINGS)
    CHECK(keys[22] == "gpu_file");  // after the inputs and the settings
  }
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.substr(0, csv.out.find('\n')).find(",optimizer_impl,gpu_file,latency_ms,") != std::string::npos);
  const std::string l4 = rows[2]["gpu_file"];
  CHECK(csv.out.find("," + l4 + ",") != std::string::npos);
  const auto table = run_cli(args);
  REQUIRE(table.code == 0);
  CHECK(table.out.find(l4) == std::string::npos);  // JSON and CSV only
}

// A list names each value once by its one name, not only by its text: spellings of one dtype are refused as a GPU file
// named twice is (two equal rows otherwise), naming both spellings, before anything is forecast.
TEST_CASE("compare: two spellings of one dtype are refused as a repeat", "[cli][compare]") {
  const std::string args = "predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline --gpu h100";
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"bf16", "BF16"}, {"bfloat16", "bf16"}, {"torch.bfloat16", "bf16"}, {"fp16", "half"}}) {
    const auto r = run_cli(args + " --dtype fp32," + a + "," + b + " --format csv");
    INFO(a << "," << b << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    const std::string name = a == "fp16" ? "fp16" : "bf16";
    CHECK(r.err.find("neusight: --dtype: " + a + " and " + b + " name the same dtype (" + name +
                     "): give each dtype once") == 0);
  }
  // distinct dtypes stay a comparison; a misspelling is still the workload's error
  const auto ok = run_cli(args + " --dtype bf16,fp16 --format json");
  INFO(ok.err);
  CHECK(ok.code == 0);
  CHECK(json::parse(ok.out)["rows"].size() == 2);
  const auto typo = run_cli(args + " --dtype bf16,bf17");
  CHECK(typo.code == 1);
  CHECK(typo.err.find("bf17") != std::string::npos);
  CHECK(typo.err.find("name the same dtype") == std::string::npos);
}

// The label rule is written once, in Lua (scripts/neusight/compare.lua gpu_labels): a scripts folder that changes it
// changes predict's comparison rows (ok and error rows, JSON and CSV) and serve --sweep's rows alike.
TEST_CASE("compare: the GPU label rule is compare.lua gpu_labels for predict and serve --sweep", "[cli][compare][gpu]") {
  ns_test::temp_dir t;
  const std::string fast = ns_test::h100_fastmem_write(t);
  REQUIRE(!fast.empty());
  std::string lua = ns_test::slurp(ns_test::source_dir / "scripts/neusight/compare.lua");
  const std::string from = "fmt(\"%s (%s)\", name, tostring(q))";
  const size_t at = lua.find(from);
  REQUIRE(at != std::string::npos);
  lua.replace(at, from.size(), "fmt(\"%s [as %s]\", name, tostring(q))");
  t.write("scripts/neusight/compare.lua", lua);
  const std::string scripts = " --scripts '" + (t.path / "scripts").string() + "'";
  const std::string a = "H100-SXM5-80GB [as h100]", b = "H100-SXM5-80GB [as " + fast + "]";
  const std::string args = "predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline "
                           "--gpu h100," + ns_test::quoted(fast) + " --dp 1,3" + scripts;
  const json rows = run_json(args)["rows"];
  REQUIRE(rows.size() == 4);
  CHECK(rows[0]["gpu"] == a);
  CHECK(rows[1]["gpu"] == a);  // an error row (8 is not divisible by 3)
  CHECK(rows[1].contains("error"));
  CHECK(rows[2]["gpu"] == b);
  CHECK(rows[3]["gpu"] == b);
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.find("\ngpt2_med," + a + ",") != std::string::npos);
  const json sweep = run_json("serve --model llama32_1b --predictor roofline --input-len 256 --output-len 32 --sweep "
                              "--batch 1 --gpu h100," + ns_test::quoted(fast) + scripts);
  REQUIRE(sweep["rows"].size() == 2);
  CHECK(sweep["rows"][0]["gpu"] == a);
  CHECK(sweep["rows"][1]["gpu"] == b);
}

// Two copies of one file (a folder's own gpus/ beside the bundled one) are one GPU: the same rows twice
TEST_CASE("compare: two alike copies of a GPU file are one GPU", "[cli][compare][gpu]") {
  ns_test::temp_dir t;
  const auto copy = ns_test::gpu_copy(t, "h100_sxm5_80gb", "gpus");
  const auto r = run_cli("predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline --gpu h100," +
                         ns_test::quoted(copy.string()));
  CHECK(r.code == 1);
  CHECK(r.err.find("name the same GPU (H100-SXM5-80GB, files alike): give each GPU once") != std::string::npos);
}

// A copy is alike by what it says, not by its bytes (the specs as resolved, not the files read again): a comment or
// another key order changes no row
TEST_CASE("compare: a GPU file copy that differs only in comments and key order is one GPU", "[cli][compare][gpu]") {
  ns_test::temp_dir t;
  std::string text = ns_test::slurp(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml");
  const std::string bw = "\nmem_bw_gbps = 3350.0";
  const auto at = text.find(bw);
  REQUIRE(at != std::string::npos);
  text.erase(at, bw.size());
  text = "# a copy of the bundled H100, keys moved\n" + text + "\nmem_bw_gbps = 3350.0 # moved here\n";
  const auto copy = t.write("gpus/h100_sxm5_80gb.toml", text);
  for (const std::string& cmd : {std::string("predict --model gpt2_med --mode inference --batch 8 --seq 512 "
                                             "--predictor roofline --gpu h100,"),
                                 std::string("serve --model llama32_1b --predictor roofline --input-len 256 "
                                             "--output-len 32 --sweep --batch 1 --gpu h100,")}) {
    const auto r = run_cli(cmd + ns_test::quoted(copy.string()));
    INFO(cmd << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("name the same GPU (H100-SXM5-80GB, files alike): give each GPU once") != std::string::npos);
  }
}

namespace {
// The workload of the calibrated-copy cases below.
const std::string copy_workload = "predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline";

// `copy` (a GPU file in `t`) calibrated on its own: a measurement 1.3 × its forecast of `copy_workload`, its
// calibration file written beside it.
void calibrate_copy(const ns_test::temp_dir& t, const std::filesystem::path& copy) {
  const double forecast = run_json(copy_workload + " --gpu " + ns_test::quoted(copy.string()))["latency_ms"].get<double>();
  const auto m = t.write("measured.toml", "latency_ms = " + std::to_string(forecast * 1.3) + "\n");
  const auto cal = run_cli(copy_workload + " --gpu " + ns_test::quoted(copy.string()) + " --calibrate " + ns_test::quoted(m.string()));
  INFO(cal.err);
  REQUIRE(cal.code == 0);
}
}  // namespace

// A copy with its own calibration beside it forecasts otherwise: a GPU of its own, not "files alike"
TEST_CASE("compare: a GPU file copy calibrated on its own is a GPU of its own", "[cli][compare][gpu]") {
  ns_test::temp_dir t;
  const auto copy = ns_test::gpu_copy(t, "h100_sxm5_80gb", "gpus");
  calibrate_copy(t, copy);
  const json rows = run_json(copy_workload + " --gpu h100," + ns_test::quoted(copy.string()))["rows"];
  REQUIRE(rows.size() == 2);
  CHECK(rows[1]["latency_ms"].get<double>() > rows[0]["latency_ms"].get<double>() * 1.1);  // the calibration applied
  CHECK(rows[1]["gpu"] == "H100-SXM5-80GB (" + copy.string() + ")");
  // the table says which rows are calibrated, by which file, as the JSON's `calibration` does (issue 16 audit)
  const auto table = run_cli(copy_workload + " --gpu h100," + ns_test::quoted(copy.string()));
  REQUIRE(table.code == 0);
  CHECK(table.out.find("\ncalibrated gpu H100-SXM5-80GB (" + copy.string() + ") by " +
                       rows[1]["calibration"].get<std::string>() + " (--no-calibration ignores it)\n") != std::string::npos);
  CHECK(rows[0]["calibration"].is_null());
}

// Under --no-calibration no calibration applies, so a copy calibrated on its own forecasts as the file it copies: one
// GPU (gpu_list_once read the calibration's bytes whatever the flag said: two equal rows)
TEST_CASE("compare: a calibrated GPU file copy under --no-calibration is one GPU", "[cli][compare][gpu]") {
  ns_test::temp_dir t;
  const auto copy = ns_test::gpu_copy(t, "h100_sxm5_80gb", "gpus");
  calibrate_copy(t, copy);
  REQUIRE(std::filesystem::exists(t.path / "gpus/h100_sxm5_80gb.calibration.toml"));
  for (const std::string& cmd : {copy_workload + " --no-calibration --gpu h100,",
                                 std::string("serve --model llama32_1b --predictor roofline --input-len 256 "
                                             "--output-len 32 --sweep --batch 1 --no-calibration --gpu h100,")}) {
    const auto r = run_cli(cmd + ns_test::quoted(copy.string()));
    INFO(cmd << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("name the same GPU (H100-SXM5-80GB, files alike): give each GPU once") != std::string::npos);
  }
  const auto r = run_cli(copy_workload + " --gpu h100," + ns_test::quoted(copy.string()), "NEUSIGHT_NO_CALIBRATION=1");
  CHECK(r.code == 1);
  CHECK(r.err.find("name the same GPU (H100-SXM5-80GB, files alike): give each GPU once") != std::string::npos);
}

// Calibrations are alike by what the forecasts read of them (calibration_load), not by their bytes: a comment changes
// no row
TEST_CASE("compare: GPU file copies whose calibrations differ only in comments are one GPU", "[cli][compare][gpu]") {
  ns_test::temp_dir t;
  const auto copy = ns_test::gpu_copy(t, "h100_sxm5_80gb", "gpus");
  const auto other = ns_test::gpu_copy(t, "h100_sxm5_80gb", "more");
  calibrate_copy(t, copy);
  t.write("more/h100_sxm5_80gb.calibration.toml",
          "# the same factors, copied\n" + ns_test::slurp(t.path / "gpus/h100_sxm5_80gb.calibration.toml"));
  const auto r = run_cli(copy_workload + " --gpu " + ns_test::quoted(copy.string()) + "," + ns_test::quoted(other.string()));
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("name the same GPU (H100-SXM5-80GB, files alike): give each GPU once") != std::string::npos);
}

TEST_CASE("compare: two GPU files that share a name are two rows labelled as given", "[cli][compare][gpu]") {
  // a what-if: the H100's file with another memory bandwidth, its name kept (its aliases dropped: they are the H100's)
  ns_test::temp_dir t;
  const std::string fast = ns_test::h100_fastmem_write(t);
  REQUIRE(!fast.empty());
  const std::string args = "predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline "
                           "--gpu h100," + ns_test::quoted(fast);
  const json j = run_json(args + " --dp 1,3");  // dp 3: an error row (8 is not divisible by 3)
  const json& rows = j["rows"];
  REQUIRE(rows.size() == 4);
  const std::string a = "H100-SXM5-80GB (h100)", b = "H100-SXM5-80GB (" + fast + ")";
  CHECK(rows[0]["gpu"] == a);
  CHECK(rows[1]["gpu"] == a);
  CHECK(rows[2]["gpu"] == b);
  CHECK(rows[3]["gpu"] == b);
  CHECK(rows[1].contains("error"));  // an error row is labelled alike
  CHECK(rows[3].contains("error"));
  REQUIRE(rows[0].contains("latency_ms"));
  REQUIRE(rows[2].contains("latency_ms"));
  CHECK(rows[2]["latency_ms"].get<double>() < rows[0]["latency_ms"].get<double>());  // the faster memory
  // the single forecast of each file is its row
  CHECK(run_json("predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline --gpu " +
                 ns_test::quoted(fast))["latency_ms"] == rows[2]["latency_ms"]);
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  CHECK(csv.out.find("\ngpt2_med," + a + ",") != std::string::npos);
  CHECK(csv.out.find("\ngpt2_med," + b + ",") != std::string::npos);
  const auto table = run_cli(args);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("\n" + a + "  ") != std::string::npos);
  CHECK(table.out.find("\n" + b + "  ") != std::string::npos);
  // GPUs of different names keep their names alone
  CHECK(run_json("predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline "
                 "--gpu h100,l4")["rows"][1]["gpu"] == "L4");
  // one file by two names stays refused, however it is named
  for (const std::string& other : std::vector<std::string>{
           "H100", "h100_sxm5_80gb", ns_test::quoted((ns_test::source_dir / "gpus/./h100_sxm5_80gb.toml").string())}) {
    const auto r = run_cli("predict --model gpt2_med --mode inference --batch 8 --seq 512 --predictor roofline "
                           "--gpu h100," + other);
    INFO(other << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("neusight: --gpu: h100 and ") == 0);
    CHECK(r.err.find(" name the same GPU (H100-SXM5-80GB): give each GPU once") != std::string::npos);
    CHECK(r.out.empty());
  }
}

// The table says each row's warnings once each, with the rows they are of, as a single forecast says its own (a row
// that does not fit, a calibration faster than the GPU can be: only the JSON and CSV rows had them; tester 3)
TEST_CASE("compare: the table says the rows' warnings with the rows they are of", "[cli][compare]") {
  const auto r = run_cli("predict --model gpt2_large --gpu h100 --mode train --batch 8,64 --seq 1024 --dtype bf16 "
                         "--predictor roofline");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const size_t at = r.out.find("\nwarning   batch 64: memory ");
  REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  CHECK(line.find("exceeds the GPU's 80 GB") != std::string::npos);
  CHECK(r.out.find("warning   batch 8: memory") == std::string::npos);  // batch 8 fits
  // a warning of every row is said once, of every row
  const auto both = run_cli("predict --model gpt2_large --gpu h100 --mode train --batch 8,16 --seq 1024 --dtype bf16 "
                            "--predictor roofline --optimizer none --overhead on");
  REQUIRE(both.code == 0);
  const size_t first = both.out.find("warning   every row: --overhead on has no effect");
  CHECK(first != std::string::npos);
  CHECK(both.out.find("--overhead on has no effect", both.out.find('\n', first)) == std::string::npos);
  // the rows of one value of a varying input are named by it
  const auto gpus = run_cli("predict --model gpt2_med --mode inference --batch 8,16 --seq 512 --gpu h100,a100_pcie_40gb "
                            "--optimizer none");
  REQUIRE(gpus.code == 0);
  CHECK(gpus.out.find("\nwarning   gpu H100-SXM5-80GB: H100-SXM5-80GB is out of distribution") != std::string::npos);
}

// tester3 problem 12: a comparison in which every row fails forecast nothing, yet exited 0. The rows are still printed
// (they say why), and the run exits 1 with a line on stderr; one row that runs is a success as before.
TEST_CASE("compare: every row failing exits 1 with the rows printed", "[cli][compare]") {
  const std::string base = "predict --model gpt2_large --gpu h100 --mode inference --seq 128 --dp 2 --batch ";
  const auto none = run_cli(base + "3,5");
  INFO(none.err);
  CHECK(none.code == 1);
  CHECK(none.out.find("2 could not be forecast") != std::string::npos);
  CHECK(none.err.find("neusight: no combination could be forecast (2 of 2 failed: see the rows' errors)") !=
        std::string::npos);
  const auto one = run_cli(base + "3,4");
  CHECK(one.code == 0);
  CHECK(one.out.find("1 could not be forecast") != std::string::npos);
}

// tester3 problem 12: --mode prefill,decode could never run both rows (--seq is refused in decode, --context outside
// it). Each row takes what its mode reads: the decode row --context, or without one the prompt (--seq) as its cache;
// the prefill row no --context. Each row is the single forecast of its flags; --seq's help says so.
TEST_CASE("compare: a --mode list of prefill and decode runs both rows", "[cli][compare]") {
  const std::string base = "predict --model llama3_8b --gpu h100 --batch 8 --dtype bf16 ";
  const json both = run_json(base + "--mode prefill,decode --seq 2048");
  REQUIRE(both["rows"].size() == 2);
  const json& pre = both["rows"][0];
  const json& dec = both["rows"][1];
  INFO(both.dump());
  CHECK(!pre.contains("error"));
  CHECK(!dec.contains("error"));
  CHECK(dec["context"] == 2048);  // the prompt the prefill wrote
  CHECK(pre["latency_ms"] == run_json(base + "--mode prefill --seq 2048")["latency_ms"]);
  CHECK(dec["latency_ms"] == run_json(base + "--mode decode --context 2048")["latency_ms"]);
  // a --context given is the decode row's; a --seq list beside it makes one decode row, not two alike
  const json ctx = run_json(base + "--mode prefill,decode --seq 1024,2048 --context 4096");
  REQUIRE(ctx["rows"].size() == 3);
  CHECK(ctx["rows"][2]["context"] == 4096);
  for (const auto& row : ctx["rows"]) CHECK(!row.contains("error"));
  const auto help = run_cli("predict --help");
  CHECK(help.out.find("decode takes none: one new token over --context tokens") != std::string::npos);
  CHECK(help.out.find("not used in decode") == std::string::npos);
}

// tester6: with --mode prefill,decode the table's fixed line said "context 2048" of both rows; the prefill row has no
// context (JSON null). An input some forecast rows lack varies: a column, "-" in those rows.
TEST_CASE("compare: an input a forecast row does not have is a column and not fixed", "[cli][compare]") {
  const std::string args = "predict --model gpt2_large --gpu h100 --mode prefill,decode --seq 128 --batch 1 "
                           "--predictor roofline";
  const json j = run_json(args);
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][0]["context"].is_null());
  CHECK(j["rows"][1]["context"] == 128);
  const auto t = run_cli(args);
  REQUIRE(t.code == 0);
  INFO(t.out);
  const size_t at = t.out.find("fixed     ");
  REQUIRE(at != std::string::npos);
  const std::string fixed = t.out.substr(at, t.out.find('\n', at) - at);
  CHECK(fixed.find("context") == std::string::npos);
  CHECK(t.out.find("mode     seq  context  latency ms") != std::string::npos);
  CHECK(t.out.find("\nprefill  128        -  ") != std::string::npos);
  CHECK(t.out.find("\ndecode     1      128  ") != std::string::npos);
}

// tester9 #3: a --tp 1,2 comparison ran HF's eager graph on one GPU beside Megatron-LM's kernels on two (a superlinear
// speed-up), with no sign of it. Each row now says its kernels (JSON, CSV, a table column where they differ), the
// comparison warns once naming the rows of each, and --kernels megatron runs the one-GPU row with Megatron's kernels
// too (a one-device plan): the same kernels, the same model FLOPs, no warning.
TEST_CASE("compare: rows say their kernels and a mix of kernels warns once", "[cli][compare]") {
  const std::string args = small + "--gpu h100 --batch 4 --tp 1,2";
  const json mixed = run_json(args);
  REQUIRE(mixed["rows"].size() == 2);
  for (const auto& row : mixed["rows"]) REQUIRE(row.contains("kernels"));
  CHECK(mixed["rows"][0]["kernels"] == "eager");
  CHECK(mixed["rows"][1]["kernels"] == "megatron");
  REQUIRE(mixed.contains("warnings"));
  REQUIRE(mixed["warnings"].size() == 1);
  const std::string note = mixed["warnings"][0];
  CHECK(note.find("the rows ran different kernels, eager in tp 1, megatron in tp 2") == 0);
  CHECK(note.find("--kernels megatron (or --kernels eager)") != std::string::npos);
  const auto table = run_cli(args);
  REQUIRE(table.code == 0);
  INFO(table.out);
  CHECK(table.out.find("tp  kernels   latency ms") != std::string::npos);
  CHECK(table.out.find("\nwarning   comparison: " + note + "\n") != std::string::npos);
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  const auto [header, lines] = csv_table(csv.out);
  REQUIRE(lines.size() == 2);
  const auto at = std::find(header.begin(), header.end(), "kernels");
  REQUIRE(at != header.end());
  CHECK(lines[0][at - header.begin()] == "eager");
  CHECK(lines[1][at - header.begin()] == "megatron");
  const auto w = std::find(header.begin(), header.end(), "warnings");
  REQUIRE(w != header.end());
  for (const auto& cells : lines) CHECK(cells[w - header.begin()].find(note) != std::string::npos);

  const json same = run_json(args + " --kernels megatron");
  REQUIRE(same["rows"].size() == 2);
  CHECK(!same.contains("warnings"));
  for (const auto& row : same["rows"]) CHECK(row["kernels"] == "megatron");
  const double a = same["rows"][0]["model_flops"], b = same["rows"][1]["model_flops"];
  // the same model's FLOPs under the same kernels, whatever the layout (but GPT-2's vocabulary, padded at tp 2 as
  // Megatron-LM pads it: +1.7e-6, README)
  CHECK(a == Approx(b).epsilon(3e-6));
  CHECK(a != Approx(mixed["rows"][0]["model_flops"].get<double>()).epsilon(3e-6));  // the eager graph's differ more
  // the one-GPU row is the single forecast with --kernels megatron: a plan of one device
  const json one = run_json(small + "--gpu h100 --batch 4 --kernels megatron");
  CHECK(one["parallel"]["kernels"] == "megatron");
  CHECK(same["rows"][0]["latency_ms"].get<double>() == Approx(one["latency_ms"].get<double>()).epsilon(1e-12));
}

// tester9 #7: the settings that change every row (schedule, virtual stages, sequence parallelism, the distributed
// optimizer, cluster, optimizer and its implementation, kernels) are in the JSON/CSV rows and, shared, on the table's
// settings line: two comparisons that differ only by --sequence-parallel no longer print the same header.
TEST_CASE("compare: each row carries its settings in JSON CSV and the settings line", "[cli][compare]") {
  const std::string args = "predict --model gpt2_large --gpu h100 --cluster dgx_h100 --mode train --dtype bf16 "
                           "--seq 128 --batch 16 --tp 2 --pp 2 --dp 2 --microbatches 4,8 --schedule interleaved "
                           "--virtual-stages 3 --distributed-optimizer --optimizer adam --predictor roofline";
  std::string lines[2];
  for (int sp = 0; sp < 2; ++sp) {
    const std::string run = args + (sp ? " --sequence-parallel" : "");
    const json j = run_json(run);
    REQUIRE(j["rows"].size() == 2);
    const json& row = j["rows"][0];
    for (const char* key : {"kernels", "schedule", "virtual_stages", "sequence_parallel", "distributed_optimizer",
                            "cluster", "optimizer", "optimizer_impl"})
      REQUIRE(row.contains(key));
    CHECK(row["kernels"] == "megatron");
    CHECK(row["schedule"] == "interleaved");
    CHECK(row["virtual_stages"] == 3);
    CHECK(row["sequence_parallel"] == (sp == 1));
    CHECK(row["distributed_optimizer"] == true);
    CHECK(row["cluster"].get<std::string>().find("dgx_h100") != std::string::npos);
    CHECK(row["optimizer"] == "adam");
    CHECK(row["optimizer_impl"] == "fused");
    const auto t = run_cli(run);
    REQUIRE(t.code == 0);
    const size_t at = t.out.find("\nsettings  ");
    REQUIRE(at != std::string::npos);
    lines[sp] = t.out.substr(at + 1, t.out.find('\n', at + 1) - at - 1);
    INFO(lines[sp]);
    CHECK(lines[sp].find("kernels megatron, schedule interleaved, virtual_stages 3, ") != std::string::npos);
    CHECK(lines[sp].find("distributed_optimizer true, cluster ") != std::string::npos);
    CHECK(lines[sp].find("optimizer adam, optimizer_impl fused") != std::string::npos);
    CHECK((lines[sp].find("sequence_parallel true") != std::string::npos) == (sp == 1));
    const auto csv = run_cli(run + " --format csv");
    REQUIRE(csv.code == 0);
    CHECK(csv.out.find(",recompute,zero,kernels,schedule,virtual_stages,sequence_parallel,distributed_optimizer,cluster,"
                       "optimizer,optimizer_impl,gpu_file,") != std::string::npos);
  }
  CHECK(lines[0] != lines[1]);
}

// tester10 #10: a tp sweep with sequence parallelism (the usual way to ask it) keeps its one-GPU row: there the flag has
// no effect and says so, as --distributed-optimizer does at dp 1 (it was an error row).
TEST_CASE("compare: --tp 1 2 with --sequence-parallel forecasts the tp 1 row and warns there", "[cli][compare]") {
  const json j = run_json("predict --model gpt2_large --gpu h100 --mode train --dtype bf16 --seq 128 --batch 4 "
                          "--tp 1,2 --sequence-parallel --predictor roofline");
  REQUIRE(j["rows"].size() == 2);
  for (const json& row : j["rows"]) {
    INFO(row.dump());
    CHECK_FALSE(row.contains("error"));
    CHECK(row["latency_ms"].get<double>() > 0);
    CHECK((row["sequence_parallel"] == true) == (row["tp"] == 2));  // tp 1: null (one GPU, no plan)
  }
  CHECK(j["rows"][0]["warnings"].dump().find("parallel.sequence_parallel (--sequence-parallel) has no effect") !=
        std::string::npos);
}

// tester9 #7: a list of schedules in predict was refused with "(did you mean '1f1b'?)"; lists of schedules are
// search's.
TEST_CASE("compare: a list of schedules in predict points to search", "[cli][compare]") {
  const auto r = run_cli(small + "--gpu h100 --batch 4 --pp 2 --microbatches 2 --schedule 1f1b,interleaved");
  CHECK(r.code != 0);
  INFO(r.err);
  CHECK(r.err.find("--schedule: one name expected") != std::string::npos);
  CHECK(r.err.find("got the list \"1f1b,interleaved\"") != std::string::npos);
  CHECK(r.err.find("neusight search --schedule 1f1b,interleaved") != std::string::npos);
  CHECK(r.err.find("did you mean") == std::string::npos);
}
