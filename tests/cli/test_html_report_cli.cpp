// tests/cli/test_html_report_cli.cpp — `--report FILE.html` (scripts/neusight/html.lua) end to end: written only on
// success, self-contained, every data-key's data-value equal to the JSON, op-kind sums, stage bars, escaping, and a
// headless chromium render when chromium is installed.
#include <catch2/catch.hpp>

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
  const auto r = run_cli(base + "--pp 2 --report '" + page.string() + "'");
  REQUIRE(r.code == 0);
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
  const auto from_dom = data_pairs(ns_test::slurp(dom));
  const auto from_source = data_pairs(ns_test::slurp(page));
  REQUIRE(!from_source.empty());
  CHECK(from_dom == from_source);
}
