// tests/cli/test_search_figures_cli.cpp — search's figures per layout (issue 16, tester6 7a): tokens/s, MFU and cost
// in its table, JSON and CSV, each the figure predict gives for that layout (scripts/neusight/figures.lua
// search_figures, from the formulas of its compute).
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "cli_csv.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;

namespace {

json search_json(const std::string& args) {
  const auto r = run_cli("search " + args + " --format json");
  INFO(args << "\n" << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// predict's JSON of one of search's layouts `l`, with search's own flags `args` (its workload's)
json predict_layout(const std::string& args, const json& l) {
  const std::string cmd = "predict " + args + " --format json --dp " + std::to_string(l["dp"].get<int>()) + " --tp " +
                          std::to_string(l["tp"].get<int>()) + " --pp " + std::to_string(l["pp"].get<int>()) +
                          " --microbatches " + std::to_string(l["microbatches"].get<int>()) + " --recompute " +
                          l["recompute"].get<std::string>();
  const auto r = run_cli(cmd);
  INFO(cmd << "\n" << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

}  // namespace

// Each layout has tokens_per_s, mfu and (the H100's file gives a price) cost_per_iteration_usd and
// cost_per_million_tokens_usd; tokens/s x iteration is the global batch's tokens; each figure is predict's for that
// layout with the same flags (a plan's timeline, and on one GPU the plain forecast and its microbatch layouts).
TEST_CASE("search figures: every layout's tokens/s MFU and cost are predict's for that layout", "[cli][search]") {
  const struct {
    std::string workload, search;  // the workload's flags (predict's too) and search's own
    double tokens;                 // per iteration
  } cases[] = {
      {"--model gpt2_large --gpu h100 --mode train --batch 64 --seq 1024 --dtype bf16 --predictor roofline",
       "--gpus 8 --top 100", 64 * 1024},
      {"--model gpt2_large --gpu h100 --mode inference --batch 16 --seq 512 --dtype bf16 --predictor roofline",
       "--gpus 4 --top 100", 16 * 512},
      {"--model gpt2_large --gpu h100 --mode train --batch 8 --seq 1024 --dtype bf16 --predictor roofline",
       "--gpus 1 --recompute all --top 100", 8 * 1024},
  };
  for (const auto& c : cases) {
    INFO(c.workload << " " << c.search);
    const json j = search_json(c.workload + " " + c.search);
    REQUIRE(j["layouts"].size() > 2);
    std::set<std::string> compared;  // the kinds of layout compared with predict
    for (const json& l : j["layouts"]) {
      INFO(l.dump());
      for (const char* key : {"tokens_per_s", "mfu", "cost_per_iteration_usd", "cost_per_million_tokens_usd"})
        REQUIRE(l.contains(key));
      const double iteration_s = l["iteration_ms"].get<double>() / 1e3;
      CHECK(l["tokens_per_s"].get<double>() * iteration_s == Approx(c.tokens).epsilon(1e-12));
      CHECK(l["mfu"].get<double>() > 0.01);
      CHECK(l["mfu"].get<double>() < 1);
      // predict's figures for the same layout: one of each kind (no plan on one GPU; a plan with or without tp > 1
      // and pp > 1) is enough
      const bool no_plan = l["dp"] == 1 && l["tp"] == 1 && l["pp"] == 1 && l["microbatches"] == 1 &&
                           l["recompute"] == "none";
      const std::string kind = no_plan ? "no plan"
                                       : std::string("plan") + (l["tp"].get<int>() > 1 ? " tp" : "") +
                                             (l["pp"].get<int>() > 1 ? " pp" : "");
      if (!compared.insert(kind).second) continue;
      const json p = predict_layout(c.workload, l);
      CHECK(p["latency_ms"].get<double>() == Approx(l["iteration_ms"].get<double>()).epsilon(1e-12));
      for (const char* key : {"tokens_per_s", "mfu", "cost_per_iteration_usd", "cost_per_million_tokens_usd"}) {
        INFO(key);
        CHECK(l[key].get<double>() == Approx(p["figures"][key].get<double>()).epsilon(1e-12));
      }
    }
    INFO(compared.size() << " kinds compared");
    CHECK(compared.count("plan"));
    if (c.search.find("--gpus 1 ") != std::string::npos) CHECK(compared.count("no plan"));
    if (c.search.find("--gpus 8 ") != std::string::npos) CHECK((compared.count("plan tp") && compared.count("plan pp")));
  }
}

// The cost needs a price: the H100's file gives price_per_hour_usd, the L40S's none. With one the table has tokens/s,
// MFU % and $/Mtoken columns, the JSON and CSV rows the two cost fields; without, neither cost (not 0), and the
// table says once why.
TEST_CASE("search figures: the cost is there exactly when the GPU file gives a price", "[cli][search]") {
  const std::string base = "search --model gpt2_large --gpus 4 --batch 16 --seq 1024 --dtype bf16 --predictor roofline";
  for (const bool priced : {true, false}) {
    const std::string args = base + (priced ? " --gpu h100" : " --gpu l40s");
    INFO(args);
    const auto table = run_cli(args);
    INFO(table.err);
    REQUIRE(table.code == 0);
    CHECK_THAT(table.out, Catch::Contains(" tokens/s MFU % "));
    CHECK_THAT(table.out, Catch::Contains("tokens/s = global batch x seq per iteration; MFU = model FLOPs / GPUs / "
                                          "iteration / the bf16 dense peak"));
    if (priced) {
      CHECK_THAT(table.out, Catch::Contains(" $/Mtoken "));
      CHECK_THAT(table.out, Catch::Contains("$/Mtoken at 12.29 USD per GPU-hour ("));
    } else {
      CHECK_THAT(table.out, !Catch::Contains("$/Mtoken"));
      CHECK_THAT(table.out, Catch::Contains("no cost: ") && Catch::Contains(" gives no price_per_hour_usd"));
    }
    const json j = search_json(args.substr(std::string("search ").size()));
    REQUIRE(!j["layouts"].empty());
    for (const json& l : j["layouts"]) {
      INFO(l.dump());
      CHECK(l["tokens_per_s"].is_number());
      CHECK(l["mfu"].is_number());
      CHECK(l.contains("cost_per_iteration_usd") == priced);
      CHECK(l.contains("cost_per_million_tokens_usd") == priced);
      if (priced) CHECK(l["cost_per_million_tokens_usd"].get<double>() > 0);
    }
    const auto csv = run_cli(args + " --format csv");
    REQUIRE(csv.code == 0);
    const auto [header, rows] = ns_test::csv_table(csv.out);
    REQUIRE(rows.size() == j["layouts"].size());
    const std::vector<std::string> tail(header.end() - (priced ? 4 : 2), header.end());
    CHECK(tail == (priced ? std::vector<std::string>{"tokens_per_s", "mfu", "cost_per_iteration_usd",
                                                     "cost_per_million_tokens_usd"}
                          : std::vector<std::string>{"tokens_per_s", "mfu"}));
  }
}

// An inference layout recomputes nothing: its table has no recomputation column (JSON and CSV keep the field);
// training keeps the column.
TEST_CASE("search table: the recompute column only in training", "[cli][search]") {
  const std::string base = "search --model gpt2_large --gpu h100 --gpus 4 --batch 16 --seq 1024 --dtype bf16 "
                           "--predictor roofline";
  const auto inference = run_cli(base + " --mode inference");
  INFO(inference.err);
  REQUIRE(inference.code == 0);
  CHECK_THAT(inference.out, !Catch::Contains("mb recompute"));
  CHECK_THAT(inference.out, Catch::Contains("   mb  iteration ms"));
  const json j = search_json("--model gpt2_large --gpu h100 --gpus 4 --batch 16 --seq 1024 --dtype bf16 "
                             "--predictor roofline --mode inference");
  REQUIRE(!j["layouts"].empty());
  CHECK(j["layouts"][0]["recompute"] == "none");
  const auto training = run_cli(base);
  REQUIRE(training.code == 0);
  CHECK_THAT(training.out, Catch::Contains("   mb recompute   iteration ms"));
}

// search's table, JSON and CSV are scripts/neusight/search.lua's (format_table, format_json, format_csv over the
// ranking's document engine/cli/search_cmd.cpp hands over once): a --scripts copy of search.lua whose formatter adds a
// column (the layout's GPU count, dp × tp × pp) shows it in all three, with no C++ change (issue 14: one renderer, a
// field added in Lua appears without recompiling)
TEST_CASE("search: a column added in search.lua's formatter shows in its table and JSON and CSV", "[cli][search][scripts]") {
  ns_test::temp_dir t;
  const std::string args = "--model gpt2_large --gpu h100 --gpus 8 --batch 64 --seq 1024 --dtype bf16 "
                           "--predictor roofline";
  const std::string scripts = ns_test::override_dir(
      t, "s", "search",
      // the JSON's and CSV's rows: one field more, after the layout's
      "local layout_fields = M.layout_fields\n"
      "M.layout_fields = function(doc, c, show)\n"
      "  local keys, t = layout_fields(doc, c, show)\n"
      "  if c.dp then keys[#keys + 1], t.gpus_used = 'gpus_used', c.dp * c.tp * c.pp end\n"
      "  return keys, t\n"
      "end\n"
      // the table: one column more, at the end of every row and of the header
      "local format_table = M.format_table\n"
      "M.format_table = function(doc, fields)\n"
      "  local text, i = format_table(doc, fields), 0\n"
      "  return (text:gsub('([^\\n]*memory GB)\\n', '%1  gpus used\\n'):gsub('\\n(%s+%d+ [^\\n]*)', function(row)\n"
      "    i = i + 1\n"
      "    local l = doc.layouts[i]\n"
      "    return l and string.format('\\n%s %10d', row, l.dp * l.tp * l.pp) or '\\n' .. row\n"
      "  end))\n"
      "end\n");
  const json plain = search_json(args);
  const json more = search_json(args + scripts);
  REQUIRE(!more["layouts"].empty());
  REQUIRE(plain["layouts"].size() == more["layouts"].size());
  for (size_t i = 0; i < more["layouts"].size(); ++i) {
    const json& l = more["layouts"][i];
    CHECK(l["gpus_used"] == l["dp"].get<int>() * l["tp"].get<int>() * l["pp"].get<int>());
    json same = l;
    same.erase("gpus_used");
    CHECK(same == plain["layouts"][i]);  // everything else as the bundled formatter writes it
  }
  const auto table = run_cli("search " + args + scripts);
  INFO(table.err);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("memory GB  gpus used\n") != std::string::npos);
  const auto plain_table = run_cli("search " + args);
  CHECK(plain_table.out.find("gpus used") == std::string::npos);
  const auto csv = run_cli("search " + args + scripts + " --format csv");
  INFO(csv.err);
  REQUIRE(csv.code == 0);
  const auto [header, rows] = ns_test::csv_table(csv.out);
  CHECK(header.back() == "gpus_used");
  REQUIRE(rows.size() == more["layouts"].size());
  CHECK(rows[0].back() == std::to_string(more["layouts"][0]["gpus_used"].get<int>()));
}
