// tests/cli/test_serve_sweep_cli.cpp — `neusight serve --sweep` end to end (scripts/neusight/sweep.lua): every row is
// the single `serve` run of its combination, number for number; targets filter and the cheapest that meets is chosen;
// none meeting is a result; combinations that cannot run are error rows; bad names and flags stop at once; JSON, CSV
// and table say the same. Small model and the roofline predictor keep it fast.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "cli_csv.h"
#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;

namespace {

const std::string base = "serve --model llama32_1b --predictor roofline --input-len 256 --output-len 32 ";

// The GPU file stem of a row's gpu_file ("gpus/l4.toml" → "l4").
std::string stem(const json& row) {
  std::string f = row["gpu_file"];
  f = f.substr(f.find_last_of('/') + 1);
  return f.substr(0, f.size() - 5);
}

}  // namespace

TEST_CASE("serve --sweep: each rate row is the single serve run of its combination, exactly", "[cli][serve][sweep]") {
  const std::string common = "--requests 100 --seed 3 ";
  const json s = run_json(base + common + "--sweep --gpu h100,l4 --tp 1,2 --rate 2,8");
  CHECK(s["kind"] == "sweep");
  CHECK(s["mode"] == "rate");
  REQUIRE(s["rows"].size() == 8);
  size_t i = 0;
  for (const std::string gpu : {"h100", "l4"})
    for (const int tp : {1, 2})
      for (const int rate : {2, 8}) {
        const json& row = s["rows"][i++];
        INFO(gpu << " tp " << tp << " rate " << rate);
        CHECK(row["tp"] == tp);
        CHECK(row["gpus"] == tp);
        CHECK(row["rate"].get<double>() == rate);
        CHECK_FALSE(row.contains("error"));
        const json one = run_json(base + common + "--gpu " + gpu + " --tp " + std::to_string(tp) + " --rate " +
                                  std::to_string(rate));
        CHECK(row["gpu"] == one["gpu"]);
        for (const std::string k : {"ttft_ms", "tpot_ms", "e2e_ms"})
          for (const std::string p : {"p50", "p90"}) CHECK(row[k + "_" + p] == one[k][p]);  // exactly: same doubles
        CHECK(row["output_tokens_per_s"] == one["throughput"]["output_tokens_per_s"]);
        CHECK(row["output_tokens_per_s_per_gpu"] == one["throughput"]["output_tokens_per_s_per_gpu"]);
      }
  // prices from the GPU files: H100 SXM5 $12.29/h, L4 $0.8048/h per GPU
  const json& h = s["rows"][2];
  CHECK(h["price_per_hour_usd"] == 12.29);
  CHECK(h["cost_per_hour_usd"].get<double>() == Approx(2 * 12.29));
  CHECK(h["cost_per_million_output_tokens_usd"].get<double>() ==
        Approx(2 * 12.29 / 3600 / h["output_tokens_per_s"].get<double>() * 1e6).epsilon(1e-12));
  CHECK(s["rows"][4]["price_per_hour_usd"] == 0.8048);
  // no targets: everything that ran meets; the cheapest per output token is chosen
  CHECK(s["rank_by"] == "cost_per_million_output_tokens_usd");
  size_t best = 0;
  for (size_t j = 0; j < s["rows"].size(); ++j) {
    CHECK(s["rows"][j]["meets"] == true);
    if (s["rows"][j]["cost_per_million_output_tokens_usd"] < s["rows"][best]["cost_per_million_output_tokens_usd"]) best = j;
  }
  CHECK(s["chosen_index"] == best + 1);
  CHECK(s["chosen"] == s["rows"][best]);
  CHECK(s["none_meets"] == false);
  CHECK(s["verdict"].get<std::string>().rfind("no targets given (--ttft-ms, --tpot-ms): cheapest setting: ", 0) == 0);
}

TEST_CASE("serve --sweep: static batch rows are single serve runs — targets apply to their values", "[cli][serve][sweep]") {
  const json s = run_json(base + "--sweep --gpu a100_sxm4_80gb,l4 --batch 1,16 --ttft-ms 40 --tpot-ms 6");
  CHECK(s["mode"] == "batch");
  CHECK(s["targets"]["statistic"] == "static");
  REQUIRE(s["rows"].size() == 4);
  int meeting = 0;
  for (const json& row : s["rows"]) {
    const json one = run_json(base + "--gpu " + stem(row) + " --batch " + std::to_string(row["batch"].get<int>()));
    INFO(row.dump());
    for (const std::string k : {"ttft_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s_per_gpu"}) CHECK(row[k] == one[k]);
    CHECK(row["fits"] == one["fits"]);
    const bool meets = one["ttft_ms"].get<double>() <= 40 && one["tpot_ms"].get<double>() <= 6;
    CHECK(row["meets"] == meets);
    meeting += meets;
    if (!meets) CHECK_FALSE(row["misses"].get<std::string>().empty());
  }
  CHECK(s["meeting"] == meeting);
  // the choice is the cheapest per output token among those that meet
  REQUIRE(meeting > 0);
  REQUIRE(meeting < 4);  // the targets filter something out
  const json* best = nullptr;
  for (const json& row : s["rows"])
    if (row["meets"] == true && (!best || row["cost_per_million_output_tokens_usd"] < (*best)["cost_per_million_output_tokens_usd"]))
      best = &row;
  CHECK(s["chosen"] == *best);
}

TEST_CASE("serve --sweep: when no setting meets the targets it says so and exits 0", "[cli][serve][sweep]") {
  const std::string args = base + "--requests 50 --sweep --gpu l4,h100 --rate 1,4 --ttft-ms 0.01";
  const auto table = run_cli(args);
  INFO(table.err);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("\nno setting meets TTFT p90 <= 0.01 ms (4 combinations, 0 could not run)\n") != std::string::npos);
  const json j = run_json(args);
  CHECK(j["none_meets"] == true);
  CHECK_FALSE(j.contains("chosen"));
  CHECK_FALSE(j.contains("chosen_index"));
  CHECK(j["meeting"] == 0);
  CHECK(j["verdict"] == "no setting meets TTFT p90 <= 0.01 ms (4 combinations, 0 could not run)");
  for (const json& row : j["rows"]) {
    CHECK(row["meets"] == false);
    CHECK(row["chosen"] == false);
    CHECK(row["misses"].get<std::string>().rfind("TTFT p90 ", 0) == 0);
  }
}

TEST_CASE("serve --sweep: combinations that cannot run are error rows, not an abort", "[cli][serve][sweep]") {
  // tp 3 does not divide Llama-3.2-1B's 32 heads; a batch of 4096 sequences of 287 tokens does not fit an L4's KV cache
  const auto r = run_cli(base + "--sweep --gpu l4 --tp 1,3 --batch 1,4096 --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["rows"].size() == 4);
  for (const int k : {2, 3}) {
    const json& row = j["rows"][k];
    CHECK(row["tp"] == 3);
    CHECK(row["error"].get<std::string>().find("model 'llama32_1b' cannot be served: ") == 0);
    CHECK_FALSE(row.contains("ttft_ms"));
    CHECK(row["meets"] == false);
    CHECK(row["cost_per_hour_usd"].get<double>() == Approx(3 * 0.8048));  // the price is known, the rest is not
  }
  const json& big = j["rows"][1];
  CHECK(big["batch"] == 4096);
  CHECK(big["fits"] == false);
  CHECK(big["error"].get<std::string>().rfind("batch 4096 does not fit", 0) == 0);
  CHECK(big["meets"] == false);
  CHECK(j["errors"] == 3);
  CHECK(j["chosen_index"] == 1);
  const auto table = run_cli(base + "--sweep --gpu l4 --tp 1,3 --batch 1,4096");
  CHECK(table.code == 0);
  CHECK(table.out.find("cannot be served") != std::string::npos);
  CHECK(table.out.find("4 combinations, 1 meet the targets, 3 could not run") != std::string::npos);
}

TEST_CASE("serve --sweep: a GPU without a price ranks by output tokens/s per GPU and says so", "[cli][serve][sweep]") {
  const json j = run_json(base + "--requests 50 --sweep --gpu l4,l40s --rate 4");
  CHECK(j["rank_by"] == "output_tokens_per_s_per_gpu");
  CHECK(j["unpriced_gpus"] == json::array({j["rows"][1]["gpu"]}));
  CHECK_FALSE(j["rows"][1].contains("cost_per_million_output_tokens_usd"));
  const std::string v = j["verdict"];
  CHECK(v.find("best setting by output tokens/s per GPU (not by cost: no price_per_hour_usd for L40S): ") !=
        std::string::npos);
}

TEST_CASE("serve --sweep: JSON, CSV and table carry the same rows — -o infers the format", "[cli][serve][sweep]") {
  const std::string args = base + "--requests 60 --sweep --gpu h100,l4 --tp 1,2 --rate 3 --tpot-ms 4";
  const json j = run_json(args);
  const auto csv = run_cli(args + " --format csv");
  REQUIRE(csv.code == 0);
  const auto [head, lines] = ns_test::csv_table(csv.out);
  REQUIRE(!head.empty());
  CHECK(head.front() == "index");
  size_t n = 0;
  for (const auto& cells : lines) {
    REQUIRE(n < j["rows"].size());
    REQUIRE(cells.size() == head.size());
    const json& row = j["rows"][n++];
    for (size_t c = 0; c < head.size(); ++c) {
      INFO(head[c] << " = " << cells[c]);
      // a row's field, else the sweep's setting at that JSON path (targets.ttft_ms: the header lines' numbers)
      const json* v = row.contains(head[c]) ? &row[head[c]] : nullptr;
      if (!v) {
        const std::string& path = head[c];
        const size_t dot = path.find('.');
        const json& top = j;
        if (dot == std::string::npos) v = top.contains(path) ? &top[path] : nullptr;
        else if (top.contains(path.substr(0, dot)) && top[path.substr(0, dot)].contains(path.substr(dot + 1)))
          v = &top[path.substr(0, dot)][path.substr(dot + 1)];
      }
      if (!v || v->is_null()) CHECK(cells[c].empty());
      else if (v->is_number()) CHECK(std::stod(cells[c]) == v->get<double>());  // exactly
      else if (v->is_boolean()) CHECK(cells[c] == (v->get<bool>() ? "true" : "false"));
      else CHECK(cells[c] == v->get<std::string>());
    }
  }
  CHECK(n == j["rows"].size());
  // the header lines' numbers are in every CSV row (issue 16: JSON/CSV carry every number the table shows)
  for (const char* col : {"input_len", "output_len", "requests", "targets.tpot_ms", "input_len_mean"})
    CHECK(std::find(head.begin(), head.end(), col) != head.end());
  CHECK(j["input_len_mean"].is_number());
  const auto table = run_cli(args);
  REQUIRE(table.code == 0);
  CHECK(table.out.find(j["verdict"].get<std::string>()) != std::string::npos);
  CHECK(table.out.find("TPOT p90") != std::string::npos);
  for (const json& row : j["rows"]) {
    char cell[64];
    std::snprintf(cell, sizeof cell, "%.1f", row["output_tokens_per_s_per_gpu"].get<double>());
    CHECK(table.out.find(cell) != std::string::npos);
  }
  ns_test::temp_dir t;
  const auto file = run_cli(args + " -o " + (t.path / "s.json").string());
  REQUIRE(file.code == 0);
  CHECK(json::parse(ns_test::slurp(t.path / "s.json")) == j);
  const auto fcsv = run_cli(args + " -o " + (t.path / "s.csv").string());
  REQUIRE(fcsv.code == 0);
  CHECK(ns_test::slurp(t.path / "s.csv") == csv.out);
}

TEST_CASE("serve --sweep: bad names and flags are immediate clear errors", "[cli][serve][sweep]") {
  auto fails = [](const std::string& args, int code, const std::string& message) {
    const auto r = run_cli(base + args);
    INFO(args << "\n" << r.err);
    CHECK(r.code == code);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(r.out.empty());
  };
  fails("--sweep --gpu h100,h10 --rate 1", 1, "neusight: serve: --gpu h10: unknown GPU 'h10' (close matches: ");
  fails("--sweep --gpu h100 --rate 1,0", 1, "--rate must be a positive number of requests per second (got 0)");
  fails("--sweep --gpu h100 --rate 1,x", 2, "Value x is not a number (in 1,x)");
  fails("--sweep --gpu h100 --tp 1,0 --rate 1", 2, "--tp: a positive integer expected, got 0 (in 1,0)");
  fails("--sweep --gpu h100, --rate 1", 2, "an empty item");
  // one GPU file by two names, as predict's comparisons refuse it (two identical rows)
  fails("--sweep --gpu h100,H100 --rate 1", 1, "neusight: --gpu: h100 and H100 name the same GPU (H100-SXM5-80GB): give each GPU once");
  fails("--sweep --gpu l4,h100,h100_sxm5_80gb --batch 1", 1, "neusight: --gpu: h100 and h100_sxm5_80gb name the same GPU (");
  // lists without --sweep: an error, never the first value
  fails("--gpu h100,l4 --rate 1", 2, "--gpu: 'h100,l4' is a list: pass --sweep to compare settings");
  fails("--gpu h100 --tp 1,2 --rate 1", 2, "--tp: '1,2' is a list: pass --sweep");
  fails("--gpu h100 --batch 1,8", 2, "--batch: '1,8' is a list: pass --sweep");
  fails("--gpu h100 --rate 1,2", 2, "--rate: '1,2' is a list: pass --sweep");
  fails("--gpu h100 --rate 1 --ttft-ms 100", 2, "--ttft-ms requires --sweep");
  fails("--sweep --gpu h100 --rate 1 --tpot-ms 0", 2, "--tpot-ms");
}

// A request beyond a rotary model's max_position_embeddings (serve's warning, serve.lua common_report): every
// combination runs the same model at the same lengths, so the sweep says it once, as serve says it, in its JSON and
// its table (it said nothing: only the quantisation and calibration warnings were carried).
TEST_CASE("serve --sweep: a request beyond max_position_embeddings warns once as serve does", "[cli][serve][sweep]") {
  const auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string beyond = "serve --model llama2_7b --predictor roofline --gpu h100 --input-len 4000 --output-len 200 ";
  const std::string warning = "input 4000 + output 200 tokens exceeds the model's max_position_embeddings 4096 (the "
                              "forecast assumes the model runs at that length, e.g. with RoPE scaling)";
  const json single = run_json(beyond + "--batch 8");
  CHECK(count(single["warnings"].dump(), warning) == 1);
  for (const std::string axis : {"--batch 1,8", "--rate 2,4 --requests 20"}) {
    INFO(axis);
    const json j = run_json(beyond + "--sweep " + axis);
    CHECK(count(j["warnings"].dump(), warning) == 1);
    const auto table = run_cli(beyond + "--sweep " + axis);
    REQUIRE(table.code == 0);
    CHECK(count(table.out, "warning: " + warning) == 1);
  }
  // within it (4000 + 96 = 4096): nothing said
  const json within =
      run_json("serve --model llama2_7b --predictor roofline --gpu h100 --input-len 4000 --output-len 96 --sweep --batch 1,8");
  // (a sweep without warnings has no "warnings" key: value(), not operator[] on a const json, which asserts)
  CHECK(within.value("warnings", json::array()).dump().find("max_position_embeddings") == std::string::npos);
}

TEST_CASE("serve --sweep: two GPU files that share a name are two rows labelled as given", "[cli][serve][sweep]") {
  // a what-if: the H100's file with another memory bandwidth, its name kept (its aliases dropped: they are the H100's)
  ns_test::temp_dir t;
  const std::string fast = ns_test::h100_fastmem_write(t);
  REQUIRE(!fast.empty());
  const std::string args = base + "--sweep --batch 1 --gpu h100," + ns_test::quoted(fast);
  const json j = run_json(args);
  REQUIRE(j["rows"].size() == 2);
  const std::string a = "H100-SXM5-80GB (h100)", b = "H100-SXM5-80GB (" + fast + ")";
  CHECK(j["rows"][0]["gpu"] == a);
  CHECK(j["rows"][1]["gpu"] == b);
  CHECK(j["rows"][1]["tpot_ms"].get<double>() < j["rows"][0]["tpot_ms"].get<double>());  // the faster memory
  const auto table = run_cli(args);
  REQUIRE(table.code == 0);
  CHECK(table.out.find(" " + a + " ") != std::string::npos);
  CHECK(table.out.find(" " + b + " ") != std::string::npos);
  // GPUs of different names keep their names alone
  CHECK(run_json(base + "--sweep --batch 1 --gpu h100,l4")["rows"][1]["gpu"] == "L4");
}

// A script's error is the input's bug, not a setting that cannot run: it stops the sweep (exit 1) naming its file:line,
// as it stops a single serve, never a "why not" per row with "no setting could run" and exit 0. An op rule with a
// Lua error (--ops) and a --scripts module without a function the phase forecast needs (neusight.needs) alike.
TEST_CASE("serve --sweep: a script error stops the sweep with its file and line", "[cli][serve][sweep]") {
  ns_test::temp_dir t;
  // (add: the residual adds of either kernel set, serve's Megatron-LM one and HF's eager one)
  const auto op = t.write("ops/add.lua", "-- a broken rule\nlocal rule = nil\nreturn rule.add\n");
  const std::string ops = " --ops '" + (t.path / "ops").string() + "'";
  for (const std::string how : {"--gpu l4 --batch 1", "--sweep --gpu l4,h100 --tp 1,3 --batch 1,2"}) {
    const auto r = run_cli(base + how + ops);
    INFO(how << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find(op.string() + ":3: attempt to index a nil value (local 'rule')") != std::string::npos);
    CHECK(r.err.find("cannot be served") == std::string::npos);
  }
  std::string report = ns_test::slurp(ns_test::source_dir / "scripts/neusight/report.lua");
  const std::string fn = "function M.timing_inputs(";
  REQUIRE(report.find(fn) != std::string::npos);
  report.replace(report.find(fn), fn.size(), "function M.timing_inputs_renamed(");
  t.write("s/neusight/report.lua", report);
  const auto r = run_cli(base + "--sweep --gpu l4,h100 --batch 1,2 --scripts '" + (t.path / "s").string() + "'");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("has no function timing_inputs (module neusight.report)") != std::string::npos);
}

// Settings that cannot run stay rows of reasons; when every combination is such a row the report is still written
// and the command fails, saying so (no setting answers the question)
TEST_CASE("serve --sweep: when no setting could run the rows say why and it exits 1", "[cli][serve][sweep]") {
  // tp 3 divides neither Llama-3.2-1B's 32 heads nor its intermediate size; an A100 has no fp8 units
  for (const std::string how :
       {"--sweep --gpu l4,h100 --tp 3 --batch 1,2", "--sweep --gpu a100_sxm4_80gb --batch 1 --dtype fp8"}) {
    const auto r = run_cli(base + how + " --format json");
    INFO(how << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("neusight: serve: no setting could run: each of the ") != std::string::npos);
    const json j = json::parse(r.out);
    CHECK(j["errors"] == j["combinations"]);
    for (const json& row : j["rows"])
      CHECK(row["error"].get<std::string>().find("cannot be served: ") != std::string::npos);
  }
  // one setting that runs among them: a result (exit 0), the others rows of reasons
  const auto mixed = run_cli(base + "--sweep --gpu a100_sxm4_80gb,h100 --batch 1 --dtype fp8 --format json");
  INFO(mixed.err);
  CHECK(mixed.code == 0);
  CHECK(json::parse(mixed.out)["errors"] == 1);
}

// A setting's fp8 warning (serve.lua fp8_warning: fp8 GEMMs forecast slower than in bf16 on its GPU) names its GPU
// and tp among the sweep's warnings: the text names neither (audit28: a fp8 sweep of H100, L40S and MI300X said three
// warnings without saying whose). The neusight predictor: the roofline's fp8 is never slower than its bf16.
TEST_CASE("serve --sweep: each fp8 warning names its GPU and tp", "[cli][serve][sweep]") {
  const json j = run_json("serve --model llama32_1b --input-len 128 --output-len 4 --sweep --gpu h100,l40s --batch 1 "
                          "--dtype fp8");
  std::vector<std::string> fp8;
  for (const auto& w : j["warnings"])
    if (w.get<std::string>().find("fp8 GEMM shapes of this forecast are forecast slower") != std::string::npos)
      fp8.push_back(w);
  REQUIRE(fp8.size() == 2);
  CHECK(fp8[0].rfind("H100-SXM5-80GB, tp 1: dtype fp8 (W8A8): ", 0) == 0);
  CHECK(fp8[1].rfind("L40S, tp 1: dtype fp8 (W8A8): ", 0) == 0);
}

// A single `serve --rate` at or beyond the forecast capacity warns (serve.lua overload_warning: the queue grows without
// bound, or so near it that the percentiles still depend on --requests); the sweep's rows of the same settings said
// nothing. Each row now carries that warning (`warning`, with `capacity_requests_per_s` and `overload` near|beyond) in
// JSON and CSV; the table says it in short in the row and in full below, named by the setting (stderr likewise under
// --format json|csv).
TEST_CASE("serve --sweep: a row at or beyond the capacity carries the single serve's overload warning",
          "[cli][serve][sweep]") {
  const std::string common = base + "--requests 60 --max-batch 4 --gpu l4 ";
  const std::string rates[] = {"5", "13", "50"};  // capacity 14.0 req/s: 13 is 93 % of it
  const json s = run_json(common + "--sweep --rate 5,13,50");
  REQUIRE(s["rows"].size() == 3);
  const auto overload = [](const json& report) {  // the single serve's capacity warning, "" without one
    for (const auto& w : report.value("warnings", json::array()))
      if (w.get<std::string>().find("forecast capacity") != std::string::npos) return w.get<std::string>();
    return std::string();
  };
  for (size_t i = 0; i < 3; ++i) {
    INFO("rate " << rates[i]);
    const json& row = s["rows"][i];
    const json one = run_json(common + "--rate " + rates[i]);
    CHECK(row["capacity_requests_per_s"] == one["throughput"]["capacity_requests_per_s"]);
    const std::string said = overload(one);
    if (said.empty()) {
      CHECK_FALSE(row.contains("warning"));
    } else {
      CHECK(row["warning"] == said);
    }
  }
  CHECK_FALSE(s["rows"][0].contains("overload"));  // 5 req/s: well below the capacity
  CHECK(s["rows"][1]["overload"] == "near");
  CHECK(s["rows"][2]["overload"] == "beyond");
  CHECK(s["rows"][2]["warning"].get<std::string>().rfind("--rate 50 req/s exceeds the forecast capacity of ", 0) == 0);
  const auto table = run_cli(common + "--sweep --rate 5,13,50");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("rate near capacity (see its warning)") != std::string::npos);
  CHECK(table.out.find("rate beyond capacity (see its warning)") != std::string::npos);
  CHECK(table.out.find("warning: L4, tp 1, rate 50 req/s: " + s["rows"][2]["warning"].get<std::string>()) !=
        std::string::npos);
  const auto csv = run_cli(common + "--sweep --rate 5,13,50 --format csv");
  REQUIRE(csv.code == 0);
  const auto [head, lines] = ns_test::csv_table(csv.out);
  const auto at = std::find(head.begin(), head.end(), "warning");
  REQUIRE(at != head.end());
  REQUIRE(lines.size() == 3);
  CHECK(lines[2][size_t(at - head.begin())] == s["rows"][2]["warning"].get<std::string>());
  CHECK(csv.err.find("neusight: warning: L4, tp 1, rate 50 req/s: --rate 50 req/s exceeds") != std::string::npos);
}

// The plan's warnings predict says of a layout (a tp group priced over PCIe beyond the GPU's 2-GPU NVLink bridge)
// were dropped by serve: the sweep says them once, the tp degrees they concern in one line
// (scripts/neusight/parallel/layout.lua bridge_warnings_merge, as search does).
TEST_CASE("serve --sweep: the tp degrees' bridge warnings are said once in one line", "[cli][serve][sweep]") {
  const json s = run_json(base + "--sweep --gpu a100_pcie_80gb --tp 1,2,4,8 --batch 1");
  size_t bridge = 0;
  for (const auto& w : s["warnings"]) {
    const std::string text = w.get<std::string>();
    if (text.find("bridge joins") == std::string::npos) continue;
    ++bridge;
    CHECK(text == "the tp 4/8 groups of some layouts on a100_pcie_80gb: its NVLink bridge joins 2 GPUs; collectives "
                  "beyond a pair are priced over PCIe (32 GB/s per direction); give --cluster for your system");
  }
  CHECK(bridge == 1);
}
