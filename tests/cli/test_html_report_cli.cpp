// tests/cli/test_html_report_cli.cpp — `--report FILE.html` (scripts/neusight/html.lua) end to end: written only on
// success, self-contained, every data-key's data-value equal to the JSON, op-kind sums, stage bars, escaping, and a
// headless chromium render when chromium is installed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <iostream>
#include <regex>

#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::slurp;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

const std::string base = "predict --model gpt2_large --gpu A100-SXM4-40GB --mode train --seq 512 --batch 4 "
                         "--predictor roofline --format json ";

std::string unescape(std::string s) {
  s = ns_test::replace_all(s, "&lt;", "<");
  s = ns_test::replace_all(s, "&gt;", ">");
  s = ns_test::replace_all(s, "&quot;", "\"");
  s = ns_test::replace_all(s, "&#39;", "'");
  return ns_test::replace_all(s, "&amp;", "&");
}

// Text as html.lua escape writes it.
std::string escape(std::string s) {
  s = ns_test::replace_all(s, "&", "&amp;");
  s = ns_test::replace_all(s, "<", "&lt;");
  s = ns_test::replace_all(s, ">", "&gt;");
  s = ns_test::replace_all(s, "\"", "&quot;");
  return ns_test::replace_all(s, "'", "&#39;");
}

std::vector<std::pair<std::string, std::string>> data_pairs(const std::string& html) {
  static const std::regex re(R"re(data-key="([^"]*)" data-value="([^"]*)")re");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator(); ++it)
    out.emplace_back(unescape((*it)[1]), (*it)[2]);
  return out;
}

// "parallel.devices[1].bubble_ms" → the JSON value; "ops[op=X,phase=Y].ms" / "ops[op=X].ms" → the sum of ops[].ms
// over the matching ops (summed in the ops' order, as the page does).
json value_at(const json& j, const std::string& key) {
  static const std::regex sum_re(R"(ops\[op=([^,\]]*)(?:,phase=([^\]]*))?\]\.ms)");
  std::smatch m;
  if (std::regex_match(key, m, sum_re)) {
    double s = 0;
    bool any = false;
    for (const auto& op : j["ops"])
      if (op["op"] == m[1].str() && (!m[2].matched || op["phase"] == m[2].str())) {
        s += op["ms"].get<double>();
        any = true;
      }
    return any ? json(s) : json();
  }
  std::string ptr;
  static const std::regex part_re(R"(([^.\[]+)(?:\[(\d+)\])?)");
  for (auto it = std::sregex_iterator(key.begin(), key.end(), part_re); it != std::sregex_iterator(); ++it) {
    ptr += "/" + (*it)[1].str();
    if ((*it)[2].matched) ptr += "/" + (*it)[2].str();
  }
  const json::json_pointer p(ptr);
  return j.contains(p) ? j.at(p) : json();
}

void check_page_matches(const std::string& html, const json& j) {
  const auto kv = data_pairs(html);
  REQUIRE(kv.size() > 10);
  for (const auto& [key, value] : kv) {
    INFO("data-key " << key << " data-value " << value);
    const json want = value_at(j, key);
    REQUIRE(want.is_number());
    if (key.rfind("ops[", 0) == 0) CHECK(std::stod(value) == Approx(want.get<double>()).epsilon(1e-12));
    else CHECK(std::stod(value) == want.get<double>());
  }
}

void check_self_contained(const std::string& html) {
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<script src") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
}

}  // namespace

TEST_CASE("html report: predict --report writes a self-contained page whose numbers are the JSON's", "[cli][html]") {
  temp_dir t;
  const auto page = t.path / "r.html";
  const auto r = run_cli(base + "--report '" + page.string() + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);  // the normal output still goes to stdout
  REQUIRE(fs::exists(page));
  const std::string html = slurp(page);
  check_self_contained(html);
  check_page_matches(html, j);
  const auto kv = data_pairs(html);
  std::map<std::string, std::string> m(kv.begin(), kv.end());
  CHECK(m.count("latency_ms") == 1);
  CHECK(m.count("figures.mfu") == 1);
  CHECK(m.count("memory.capacity_gb") == 1);
  // Every op kind and (kind, phase) of the JSON has its sum on the page.
  std::map<std::string, double> kinds, kind_phase;
  for (const auto& op : j["ops"]) {
    kinds[op["op"].get<std::string>()] += op["ms"].get<double>();
    kind_phase[op["op"].get<std::string>() + "," + op["phase"].get<std::string>()] += op["ms"].get<double>();
  }
  for (const auto& [k, v] : kinds) {
    INFO(k);
    REQUIRE(m.count("ops[op=" + k + "].ms") == 1);
    CHECK(std::stod(m["ops[op=" + k + "].ms"]) == Approx(v).epsilon(1e-12));
  }
  for (const auto& [k, v] : kind_phase) {
    const auto c = k.find(',');
    const std::string key = "ops[op=" + k.substr(0, c) + ",phase=" + k.substr(c + 1) + "].ms";
    INFO(key);
    REQUIRE(m.count(key) == 1);
    CHECK(std::stod(m[key]) == Approx(v).epsilon(1e-12));
  }
  CHECK(html.find("stage-bar") == std::string::npos);  // not a parallel run
}

TEST_CASE("html report: a parallel run has one stage bar per pipeline stage", "[cli][html][parallel]") {
  temp_dir t;
  const auto page = t.path / "p.html";
  const auto r = run_cli(base + "--pp 4 --dp 2 --microbatches 2 -o '" + (t.path / "p.json").string() + "' --report '" +
                         page.string() + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(slurp(t.path / "p.json"));
  const std::string html = slurp(page);
  check_self_contained(html);
  check_page_matches(html, j);
  size_t bars = 0;
  for (size_t at = 0; (at = html.find("<g class=\"stage-bar\">", at)) != std::string::npos; ++at) ++bars;
  CHECK(bars == 4);
  CHECK(bars == j["parallel"]["devices"].size());
}

// The pipeline timeline's boxes of the page (`html` its source or the DOM a browser built): per stage, how many ops
// (<g class="tl-op">) it draws, and the largest end (data-key parallel.timeline[i].end_ms) of any box.
std::map<int, int> timeline_boxes(const std::string& html) {
  static const std::regex re(R"re(<g class="tl-op" data-stage="(\d+)")re");
  std::map<int, int> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator(); ++it)
    ++out[std::stoi((*it)[1])];
  return out;
}

double timeline_last_end(const std::string& html) {
  double last = -1;
  for (const auto& [key, value] : data_pairs(html))
    if (key.rfind("parallel.timeline[", 0) == 0 && key.size() > 7 && key.substr(key.size() - 7) == ".end_ms")
      last = std::max(last, std::stod(value));
  return last;
}

// A parallel run's JSON carries every op's start and end (parallel.timeline), its page one box per op per stage
// (issue 16 item 2): 2 x microbatches x chunks in training, the last end the iteration's; the CSV leaves them out.
TEST_CASE("html report: a parallel run's page draws its pipeline timeline from the JSON's", "[cli][html][parallel]") {
  temp_dir t;
  const auto page = t.path / "tl.html";
  const auto r = run_cli(base + "--pp 2 --dp 2 --microbatches 2 --schedule interleaved --virtual-stages 2 -o '" +
                         (t.path / "tl.json").string() + "' --report '" + page.string() + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(slurp(t.path / "tl.json"));
  const json& tl = j["parallel"]["timeline"];
  REQUIRE(tl.is_array());
  std::map<int, int> ops;
  std::map<std::string, int> kinds;
  double last = 0;
  for (const auto& e : tl) {
    if (e["kind"] == "forward" || e["kind"] == "backward") {
      ++ops[e["device"].get<int>()];
      CHECK(e["chunk"].get<int>() < 2);
      CHECK(e["microbatch"].get<int>() < 2);
    }
    ++kinds[e["kind"].get<std::string>()];
    CHECK(e["end_ms"].get<double>() >= e["start_ms"].get<double>());
    last = std::max(last, e["end_ms"].get<double>());
  }
  CHECK(last == Approx(j["latency_ms"].get<double>()).epsilon(1e-12));
  CHECK(ops == std::map<int, int>{{0, 2 * 2 * 2}, {1, 2 * 2 * 2}});
  CHECK(kinds["forward"] == 8);
  CHECK(kinds["optimizer"] == 2);  // each stage's own step, after its ops
  const std::string html = slurp(page);
  check_self_contained(html);
  check_page_matches(html, j);
  CHECK(html.find("<h2>Pipeline timeline</h2>") != std::string::npos);
  CHECK(timeline_boxes(html) == ops);
  CHECK(timeline_last_end(html) == Approx(j["latency_ms"].get<double>()).epsilon(1e-12));
  // the CSV's summary rows leave the op-by-op timeline to the JSON
  const auto csv = run_cli(ns_test::replace_all(base, "--format json", "--format csv") + "--pp 2 --dp 2 "
                           "--microbatches 2 --schedule interleaved --virtual-stages 2 -o '" +
                           (t.path / "tl.csv").string() + "'");
  REQUIRE(csv.code == 0);
  const std::string text = slurp(t.path / "tl.csv");
  CHECK(text.find("parallel.devices.0.bubble_ms") != std::string::npos);
  CHECK(text.find("parallel.timeline") == std::string::npos);
}

TEST_CASE("html report: nothing is written on error, and names are escaped", "[cli][html]") {
  temp_dir t;
  const auto page = t.path / "e.html";
  const auto bad = run_cli(base + "--batch 3 --dp 2 --report '" + page.string() + "'");  // batch not divisible
  CHECK(bad.code != 0);
  CHECK(!fs::exists(page));
  const auto bad_gpu = run_cli("predict --model gpt2_large --gpu NoSuchGPU --mode train --report '" + page.string() + "'");
  CHECK(bad_gpu.code != 0);
  CHECK(!fs::exists(page));

  // The page's script fails: neither the page nor -o is written.
  fs::create_directories(t.path / "s" / "neusight");
  std::ofstream(t.path / "s" / "neusight" / "html.lua") << "return { render = function() error('boom') end }\n";
  const auto boom = run_cli(base + "--scripts '" + (t.path / "s").string() + "' -o '" + (t.path / "o.json").string() +
                            "' --report '" + page.string() + "'");
  CHECK(boom.code == 1);
  CHECK(boom.err.find("boom") != std::string::npos);
  CHECK(!fs::exists(page));
  CHECK(!fs::exists(t.path / "o.json"));

  // A workload script whose node names and model name hold HTML.
  const auto script = t.path / "w.lua";
  std::ofstream(script) << R"(
local function mlp(opts)
  local x = { opts.batch, opts.seq, 64 }
  return {
    { op = "linear", name = [[fc<&">]], inputs = { x }, output = x, params = 64 * 64 },
  }, [[m<&">]]
end
return { model = mlp, gpu = "A100-SXM4-40GB", mode = "inference", batch = 2, seq = 8 }
)";
  const auto r = run_cli("run '" + script.string() + "' --predictor roofline --format json --report '" + page.string() + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const std::string html = slurp(page);
  check_self_contained(html);
  check_page_matches(html, json::parse(r.out));
  CHECK(html.find("<&\">") == std::string::npos);
}

TEST_CASE("html report: a comparison page carries each row's latency", "[cli][html][compare]") {
  temp_dir t;
  const auto page = t.path / "c.html";
  const auto r = run_cli("predict --model gpt2_large,gpt2_med --gpu A100-SXM4-40GB --mode inference --seq 128 "
                         "--batch 1 --predictor roofline --format json --report '" + page.string() + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const std::string html = slurp(page);
  check_self_contained(html);
  check_page_matches(html, j);
  CHECK(html.find("data-key=\"rows[1].latency_ms\"") != std::string::npos);
}

// A comparison page's bar labels: { shown text, whole text (the <title> when cut, else the shown text) }.
std::vector<std::pair<std::string, std::string>> bar_labels(const std::string& html) {
  static const std::regex re(R"re(<text class="label"[^>]*>(?:<title>([^<]*)</title>)?([^<]*)</text>)re");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator(); ++it)
    out.emplace_back(unescape((*it)[2]), unescape((*it)[1].matched ? (*it)[1].str() : (*it)[2].str()));
  return out;
}

// The comparison of a GPU and a what-if copy of it (its label "NAME (its path)", long) at two batches; --optimizer in
// inference gives every row a warning.
std::string what_if_compare(const temp_dir& t, const fs::path& page) {
  const std::string fast = ns_test::h100_fastmem_write(t);
  REQUIRE(!fast.empty());
  return "predict --model gpt2_large --gpu h100,'" + fast + "' --mode inference --seq 128 --batch 1,2 "
         "--optimizer adamw --predictor roofline --format json --report '" + page.string() + "'";
}

// tester6: the comparison page's labels were every input (about 60 characters) right-aligned at x = 184, so only their
// end showed ("ain bf16 4 2048 1 1 1 1 1 none") and the GPU, the input that varied, was cut off; the rows table was
// sorted by name (gpu and latency_ms off-screen) and long notes made rows tall.
TEST_CASE("html report: a comparison page labels each bar by its varying inputs and says the fixed ones once",
          "[cli][html][compare]") {
  temp_dir t;
  const auto page = t.path / "c.html";
  const auto r = run_cli(what_if_compare(t, page));
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["rows"].size() == 4);
  const std::string html = slurp(page);
  check_self_contained(html);
  check_page_matches(html, j);
  const auto labels = bar_labels(html);
  REQUIRE(labels.size() == j["rows"].size());
  bool cut = false;
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& row = j["rows"][i];
    const auto& [shown, whole] = labels[i];
    INFO(shown << " / " << whole);
    CHECK(whole == row["gpu"].get<std::string>() + ", batch " + std::to_string(row["batch"].get<int>()));
    CHECK(shown.find("gpt2_large") == std::string::npos);  // fixed: said above the chart
    // a cut label keeps its start and its end: the GPU's name, the file's and the batch
    CHECK(shown.rfind("H100-SXM5-80GB (", 0) == 0);
    CHECK(shown.size() >= 9);
    CHECK(shown.substr(shown.size() - 9) == ", batch " + std::to_string(row["batch"].get<int>()));
    if (shown != whole) {
      cut = true;
      CHECK(shown.find("\xE2\x80\xA6h100_fastmem.toml), batch") != std::string::npos);  // "…h100_fastmem.toml"
    }
  }
  CHECK(cut);  // the what-if's path is too long for the label column
  CHECK(html.find("<p class=\"fixed\">Every row: model gpt2_large, mode inference, dtype fp32, seq ") !=
        std::string::npos);
  // the rows table starts as the terminal table: the varying inputs, then latency and the figures
  static const std::regex th_re("<th>([^<]*)</th>");
  std::vector<std::string> heads;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), th_re); it != std::sregex_iterator(); ++it)
    heads.push_back((*it)[1]);
  REQUIRE(heads.size() > 3);
  CHECK(heads[0] == "gpu");
  CHECK(heads[1] == "batch");
  CHECK(heads[2] == "latency_ms");
  CHECK(std::find(heads.begin(), heads.end(), "model") == heads.end());
  // every warning of the JSON is listed once below the table, with the rows it is of; a row's cell has its marker
  size_t warnings = 0;
  for (const auto& row : j["rows"])
    for (const auto& w : row["warnings"]) {
      INFO(w);
      CHECK(html.find(":</b> " + escape(w.get<std::string>()) + "</li>") != std::string::npos);
      CHECK(html.find("title=\"" + escape(w.get<std::string>()) + "\">[") != std::string::npos);
      ++warnings;
    }
  CHECK(warnings >= 4);  // the optimizer's, in every row
  CHECK(html.find("<b>every row:</b> ") != std::string::npos);
}

// tester6 r5: a parallel run's page showed "params 21853777920" and "flops 8.18e14" without saying they are one
// tensor-parallel rank's (and one microbatch's), and not the model's FLOPs per iteration.
TEST_CASE("html report: a parallel run's page says what params and flops count and shows the model's FLOPs",
          "[cli][html][parallel]") {
  temp_dir t;
  const auto page = t.path / "p.html";
  const auto r = run_cli(base + "--tp 2 --pp 2 --microbatches 2 -o '" + (t.path / "p.json").string() + "' --report '" +
                         page.string() + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(slurp(t.path / "p.json"));
  CHECK(j["params_scope"] == "one tensor-parallel rank, all pipeline stages");
  CHECK(j["flops_scope"] == "one microbatch of 2 through all pipeline stages, one tensor-parallel rank, and its whole "
                            "optimizer step");
  const std::string html = slurp(page);
  check_page_matches(html, j);
  for (const char* key : {"params", "flops"}) {
    INFO(key);
    const std::regex re(std::string("<tr><th>") + key + "</th><td class=\"n\"><span class=\"num\" data-key=\"" + key +
                        "\"[^<]*</span></td><td class=\"scope\">([^<]*)</td></tr>");
    std::smatch m;
    REQUIRE(std::regex_search(html, m, re));
    CHECK(m[1].str() == j[std::string(key) + "_scope"].get<std::string>());
  }
  CHECK(html.find("<tr><th>model_flops</th><td class=\"n\"><span class=\"num\" data-key=\"figures.model_flops\"") !=
        std::string::npos);
  // one GPU without a plan: params and flops are the whole run's, no scope said
  const json one = json::parse(run_cli(base).out);
  CHECK(!one.contains("flops_scope"));
  CHECK(!one.contains("params_scope"));
}

// tester6 r7 (b): the serve --sweep page's chart marked only the chosen row; the shortest bar could be a row that
// misses the targets.
TEST_CASE("html report: a serve sweep's chart marks the rows that miss the targets", "[cli][html][serve]") {
  temp_dir t;
  const auto page = t.path / "s.html";
  const auto r = run_cli("serve --model llama3_8b --input-len 512 --output-len 16 --format json --gpu h100,a100_sxm4_80gb "
                         "--batch 1,8 --sweep --ttft-ms 40 --report '" + page.string() + "'");
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const std::string html = slurp(page);
  check_page_matches(html, j);
  const auto labels = bar_labels(html);
  REQUIRE(labels.size() == j["rows"].size());
  size_t missed = 0;
  const std::string mark = " \xE2\x9C\x97";  // " ✗"
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& [shown, whole] = labels[i];
    INFO(shown << " / " << whole);
    const bool marked = shown.size() > mark.size() && shown.substr(shown.size() - mark.size()) == mark;
    CHECK(marked == !j["rows"][i]["meets"].get<bool>());
    if (marked) {
      ++missed;
      CHECK(whole.find("misses the targets: " + j["rows"][i]["misses"].get<std::string>()) != std::string::npos);
    }
  }
  CHECK(missed > 0);
  CHECK(missed < labels.size());
  CHECK(html.find(mark.substr(1) + " and a grey bar: misses the targets") != std::string::npos);
}

// Every number of a JSON value with its page path ("phases.decode.latency_ms", "rows[0].tp").
void json_numbers(const json& j, const std::string& path, std::map<std::string, double>& out) {
  if (j.is_number()) out[path] = j.get<double>();
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) json_numbers(j[i], path + "[" + std::to_string(i) + "]", out);
  else if (j.is_object())
    for (const auto& [k, v] : j.items()) json_numbers(v, path.empty() ? k : path + "." + k, out);
}

TEST_CASE("html report: serve --report shows a static batch and a request rate and a sweep with every number of the JSON",
          "[cli][html][serve]") {
  temp_dir t;
  const std::string serve = "serve --model llama3_8b --input-len 512 --output-len 16 --format json ";
  for (const std::string& args :
       {std::string("--gpu h100 --batch 4"), std::string("--gpu h100 --rate 4 --requests 50"),
        std::string("--gpu h100,a100_sxm4_80gb --batch 1,8 --sweep")}) {
    INFO(args);
    const auto page = t.path / "s.html";
    fs::remove(page);
    const auto r = run_cli(serve + args + " --report '" + page.string() + "'");
    INFO("stderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = json::parse(r.out);
    REQUIRE(fs::exists(page));
    const std::string html = slurp(page);
    check_self_contained(html);
    check_page_matches(html, j);
    // complete: every number of the JSON is on the page under its path
    std::map<std::string, double> want;
    json_numbers(j, "", want);
    const auto kv = data_pairs(html);
    const std::map<std::string, std::string> have(kv.begin(), kv.end());
    for (const auto& [path, v] : want) {
      INFO(path);
      CHECK(have.count(path) == 1);
    }
    if (j["kind"] == "sweep") {
      size_t bars = 0;
      for (size_t at = 0; (at = html.find("<g class=\"sweep-bar\">", at)) != std::string::npos; ++at) ++bars;
      CHECK(bars == j["rows"].size());
    } else {
      CHECK(have.count("phases.decode.predicted_ms.weights") == 1);  // the phase chart's segments
      CHECK(html.find("<g class=\"phase-bar\">") != std::string::npos);
    }
    if (j["kind"] == "simulation") {  // --rate
      REQUIRE(j.contains("band"));
      CHECK(have.count("band.p90.ttft_ms.p90") == 1);
    }
  }
  SECTION("nothing is written on error") {
    const auto page = t.path / "bad.html";
    const auto bad = run_cli("serve --model no_such_model --gpu h100 --batch 1 --input-len 8 --output-len 2 --report '" +
                             page.string() + "'");
    CHECK(bad.code != 0);
    CHECK(!fs::exists(page));
    fs::create_directories(t.path / "s" / "neusight");
    std::ofstream(t.path / "s" / "neusight" / "html.lua") << "return { render_serve = function() error('boom') end }\n";
    const auto boom = run_cli(serve + "--gpu h100 --batch 1 --scripts '" + (t.path / "s").string() + "' -o '" +
                              (t.path / "o.json").string() + "' --report '" + page.string() + "'");
    CHECK(boom.code == 1);
    CHECK(boom.err.find("boom") != std::string::npos);
    CHECK(!fs::exists(page));
    CHECK(!fs::exists(t.path / "o.json"));
  }
}

TEST_CASE("html report: chromium renders the page headless", "[cli][html][chromium]") {
  if (std::system("which chromium >/dev/null 2>&1") != 0) {
    std::cout << "NEUSIGHT-TEST-SKIPPED: chromium not installed" << std::endl;
    return;
  }
  temp_dir t;
  const auto page = t.path / "r.html";
  // an interleaved pipeline with data parallelism: its timeline has both chunks and a tail after the ops
  const auto r = run_cli(base + "--pp 2 --dp 2 --microbatches 2 --schedule interleaved --virtual-stages 2 --report '" +
                         page.string() + "'");
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  const auto png = t.path / "r.png";
  const std::string cmd = "timeout 120 chromium --headless --no-sandbox --disable-gpu --screenshot='" + png.string() +
                          "' --window-size=1100,1400 'file://" + page.string() + "' >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
  REQUIRE(fs::exists(png));
  CHECK(fs::file_size(png) > 0);
  // the DOM the browser built carries the same numbers as the page's source (which the other cases check against
  // the JSON): every data-key / data-value pair survives parsing
  const auto dom = t.path / "dom.html";
  const std::string dump = "timeout 120 chromium --headless --no-sandbox --disable-gpu --dump-dom 'file://" +
                           page.string() + "' >'" + dom.string() + "' 2>/dev/null";
  CHECK(std::system(dump.c_str()) == 0);
  const std::string dom_html = ns_test::slurp(dom);
  const auto from_dom = data_pairs(dom_html);
  const auto from_source = data_pairs(ns_test::slurp(page));
  REQUIRE(!from_source.empty());
  CHECK(from_dom == from_source);
  // and they are the JSON's; the pipeline timeline in the DOM: per stage one box per op (2 x microbatches x chunks in
  // training), the last end the iteration's latency
  check_page_matches(dom_html, j);
  const int per_stage = 2 * j["parallel"]["microbatches"].get<int>() * j["parallel"]["virtual_stages"].get<int>();
  CHECK(per_stage == 8);
  CHECK(timeline_boxes(dom_html) == std::map<int, int>{{0, per_stage}, {1, per_stage}});
  CHECK(timeline_last_end(dom_html) == Approx(j["latency_ms"].get<double>()).epsilon(1e-12));
}

// The comparison page in a browser: every bar label lies inside the page (its box starts at x >= 0), the long ones
// cut to fit. The page has no scripts; the test measures a copy of it with one added.
TEST_CASE("html report: chromium shows every comparison label inside the page", "[cli][html][chromium][compare]") {
  if (std::system("which chromium >/dev/null 2>&1") != 0) {
    std::cout << "NEUSIGHT-TEST-SKIPPED: chromium not installed" << std::endl;
    return;
  }
  temp_dir t;
  const auto page = t.path / "c.html";
  const auto r = run_cli(what_if_compare(t, page));
  REQUIRE(r.code == 0);
  std::string html = slurp(page);
  const size_t end = html.rfind("</body>");
  REQUIRE(end != std::string::npos);
  // the labels are the text right-aligned at the label column's edge
  html.insert(end, "<pre id=\"measured\"></pre><pre id=\"page\"></pre><script>const m = [];"
                   "for (const e of document.querySelectorAll('svg text[text-anchor=\"end\"]')) {"
                   "  const b = e.getBBox(); m.push(b.x.toFixed(1) + ' ' + b.width.toFixed(1)); }"
                   "document.getElementById('measured').textContent = m.join(';');"
                   "const rows = document.querySelector('table.rows.keys');"
                   "document.getElementById('page').textContent = document.documentElement.scrollWidth + ' ' +"
                   "  window.innerWidth + ' ' + (rows ? rows.getBoundingClientRect().left : -1);</script>");
  const auto probe = t.write("probe.html", html);
  const auto dom = t.path / "dom.html";
  const std::string dump = "timeout 120 chromium --headless --no-sandbox --disable-gpu --window-size=1400,3000 "
                           "--dump-dom 'file://" + probe.string() + "' >'" + dom.string() + "' 2>/dev/null";
  REQUIRE(std::system(dump.c_str()) == 0);
  const std::string out = slurp(dom);
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("<pre id=\"measured\">([^<]*)</pre>")));
  INFO("label boxes (x width): " << m[1]);
  const std::string boxes = m[1];
  size_t n = 0;
  for (size_t at = 0; at < boxes.size();) {
    const size_t next = std::min(boxes.find(';', at), boxes.size());
    const std::string box = boxes.substr(at, next - at);
    CHECK(std::stod(box) >= 0);  // x: not cut off at the left
    CHECK(std::stod(box.substr(box.find(' ') + 1)) > 0);
    ++n;
    at = next + 1;
  }
  CHECK(n == 4);
  // tester9 #8: the rows table (some 25 columns) ran past the page's right edge; it scrolls in its own box, the
  // inputs' columns beside it, so the page is no wider than the window and the inputs start inside it
  REQUIRE(std::regex_search(out, m, std::regex("<pre id=\"page\">(\\d+) (\\d+) ([-\\d.]+)</pre>")));
  INFO("page width, window width, inputs table left: " << m[0]);
  CHECK(std::stoi(m[1]) <= std::stoi(m[2]));
  CHECK(std::stod(m[3]) >= 0);
}
