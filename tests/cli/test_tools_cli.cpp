// tests/cli/test_tools_cli.cpp — the tools around the forecast as a user meets them (tester 4's report): eval's CSV,
// medians and empty runs, scale's origin (a label's measured time, a trace's steps), inputs given twice, train's
// --out, the installed collectors and train.sh, and the command line's small things.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_csv.h"
#include "test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ns_test::quoted;
using ns_test::run_cli;
using ns_test::run_sh;
using ns_test::temp_dir;

namespace {

const std::string bmm = "tests/fixtures/bench/bmm_small.csv";
const std::string t4_trace = "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.csv";
const std::string t4_label = "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.json";

json json_of(const ns_test::run_result& r) {
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A B200 decode row of tests/fixtures/aiconfigurator/generation_attention.csv's shape over 256·i cached tokens, with the
// given kv_cache_dtype (latency made up, growing with the cache: train's input, not a measurement).
std::string fmt_row(int i, const std::string& kv) {
  return "VLLM,0.24.0,NVIDIA B200,generation_attention,vllm_flashinfer_trtllmdecode,8,1,32,8,128,1,bfloat16," + kv + "," +
         std::to_string(256 * i - 1) + ",0," + std::to_string(0.004 + 0.0018 * i * (kv == "fp8" ? 0.5 : 1.0)) + "\n";
}

// A prefill row of B200 for the train fixture: 4 sequences of 128 · i tokens, 32 / 8 heads of 128, KV cache `kv`.
std::string prefill_row(int i, const std::string& kv) {
  return "VLLM,0.24.0,NVIDIA B200,context_attention,vllm_flashinfer_trtllmprefill,4," + std::to_string(128 * i) +
         ",32,8,128,1,bfloat16," + kv + ",0,0," + std::to_string(0.01 + 0.0004 * i * i) + "\n";
}

}  // namespace

TEST_CASE("eval kernels: --format csv and -o x.csv write the summary as CSV", "[cli][eval][tools]") {
  const json j = json_of(run_cli("eval kernels " + bmm + " --format json"));
  const auto r = run_cli("eval kernels " + bmm + " --format csv");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto t = ns_test::csv_table(r.out);
  CHECK(t.header == std::vector<std::string>{"gpu", "family", "rows", "mape", "median_ape", "p90_ape", "tile_match"});
  REQUIRE(t.rows.size() == j["summary"].size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& s = j["summary"][i];
    REQUIRE(t.rows[i].size() == 7);
    CHECK(t.rows[i][0] == s["gpu"].get<std::string>());
    CHECK(t.rows[i][1] == s["family"].get<std::string>());
    CHECK(std::stoll(t.rows[i][2]) == s["rows"].get<int64_t>());
    CHECK(std::stod(t.rows[i][3]) == Approx(s["mape"].get<double>()).epsilon(1e-12));
    CHECK(std::stod(t.rows[i][4]) == Approx(s["median_ape"].get<double>()).epsilon(1e-12));
  }
  temp_dir d;
  const auto file = (d.path / "r.csv").string();
  const auto o = run_cli("eval kernels " + bmm + " -o " + quoted(file));
  INFO(o.err);
  REQUIRE(o.code == 0);
  CHECK(ns_test::slurp(file) == r.out);
}

TEST_CASE("eval kernels: the median of an even count is the mean of its two middle values", "[cli][eval][tools]") {
  const json j = json_of(run_cli("eval kernels " + bmm + " --format json"));
  std::map<std::string, std::vector<double>> ape;
  for (const auto& row : j["rows"]) {
    const double p = row["predicted_ms"], m = row["measured_ms"];
    ape[row["gpu"].get<std::string>()].push_back(100 * std::abs(p - m) / m);
  }
  REQUIRE(j["summary"].size() == 2);
  for (const auto& s : j["summary"]) {
    const auto& v = ape[s["gpu"].get<std::string>()];
    REQUIRE(v.size() % 2 == 0);  // 4 A100 rows and 2 P100 rows: the upper middle value is not the median
    CHECK(s["median_ape"].get<double>() == Approx(median(v)).epsilon(1e-12));
  }
}

TEST_CASE("eval kernels scores AIConfigurator decode over an fp8 KV cache in a cell of its own and train skips it",
          "[cli][eval][train][tools]") {
  const std::string fixture = "tests/fixtures/aiconfigurator/generation_attention.csv";  // B200: bf16 and fp8 caches
  const auto e = run_cli("eval kernels " + fixture + " --format json");
  const json j = json_of(e);
  REQUIRE(j["rows"].size() == 2);
  CHECK(j["rows"][0]["family"] == "attention_decode");
  CHECK(j["rows"][1]["family"] == "attention_decode/kv_fp8");
  REQUIRE(j["summary"].size() == 2);
  std::map<std::string, int64_t> cells;
  for (const auto& c : j["summary"]) cells[c["family"].get<std::string>()] = c["rows"].get<int64_t>();
  CHECK(cells == std::map<std::string, int64_t>{{"attention_decode", 1}, {"attention_decode/kv_fp8", 1}});
  CHECK(j["skipped"]["attention with fp8 compute (attn_dtype fp8) is not modelled"] == 1);
  CHECK(e.err.find("skipped 1 rows: attention with fp8 compute (attn_dtype fp8) is not modelled (first at " + fixture +
                   ":5)") != std::string::npos);
  const auto table = run_cli("eval kernels " + fixture + " --predictor roofline");
  INFO(table.err);
  REQUIRE(table.code == 0);
  CHECK(table.out.find("B200               attention_decode/kv_fp8      1") != std::string::npos);
  // the roofline reads half the cache bytes: the fp8 cache's forecast is about half the bf16 one's
  const json roof = json_of(run_cli("eval kernels " + fixture + " --predictor roofline --format json"));
  const double bf16 = roof["rows"][0]["predicted_ms"], fp8 = roof["rows"][1]["predicted_ms"];
  CHECK(fp8 < 0.55 * bf16);
  CHECK(fp8 > 0.45 * bf16);

  // train reads the same files: the fp8-cache rows are skipped and counted, the 16-bit ones trained on
  temp_dir t;
  std::string text = ns_test::slurp(ns_test::source_dir / fixture);
  text = text.substr(0, text.find('\n') + 1);
  for (int i = 1; i <= 12; ++i)
    for (const char* kv : {"bfloat16", "fp8"})
      text += fmt_row(i, kv);
  const auto data = t.write("decode.csv", text);
  const auto out = (t.path / "w/nvidia/attention_decode").string();
  const auto r = run_cli("train -q --family attention_decode --data " + quoted(data.string()) + " --out " + quoted(out) +
                         " --hidden 8 --epochs 5 --batch 4 --seed 1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("attention_decode weights, 12 rows") != std::string::npos);
  CHECK(r.err.find("skipped 12 rows: decode attention over an fp8 KV cache is never trained on") != std::string::npos);
}

TEST_CASE("eval kernels scores AIConfigurator prefill over an fp8 KV cache in a cell of its own and train skips it",
          "[cli][eval][train][tools]") {
  // B200 prefills over fp8 and bf16 caches (lines 2, 4, 5: fp8; 3, 6: bf16; 7: fp8 with a window). A forecast with
  // --kv-dtype fp8 prices prefill attention at the compute dtype, so each fp8 row is forecast as its bf16 twin is.
  const std::string fixture = "tests/fixtures/aiconfigurator/context_attention.csv";
  for (const std::string predictor : {"neusight", "roofline"}) {
    INFO(predictor);
    const auto e = run_cli("eval kernels " + fixture + " --predictor " + predictor + " --format json");
    const json j = json_of(e);
    REQUIRE(j["rows"].size() == 5);
    std::map<std::string, double> predicted;  // where → predicted ms
    for (const auto& r : j["rows"]) {
      const std::string where = r["where"], line = where.substr(where.rfind(':') + 1);
      CHECK(r["family"] == (line == "3" || line == "6" ? "attention_prefill" : "attention_prefill/kv_fp8"));
      predicted[line] = r["predicted_ms"];
    }
    CHECK(predicted.at("2") == Approx(predicted.at("3")).epsilon(1e-12));  // 1024 tokens
    CHECK(predicted.at("5") == Approx(predicted.at("6")).epsilon(1e-12));  // 8192 tokens
    std::map<std::string, int64_t> cells;
    for (const auto& c : j["summary"]) cells[c["family"].get<std::string>()] = c["rows"].get<int64_t>();
    CHECK(cells == std::map<std::string, int64_t>{{"attention_prefill", 2}, {"attention_prefill/kv_fp8", 3}});
    CHECK(j["skipped"]["sliding-window attention is not modelled"] == 1);
    const auto table = run_cli("eval kernels " + fixture + " --predictor " + predictor);
    INFO(table.err);
    REQUIRE(table.code == 0);
    CHECK(table.out.find("B200               attention_prefill/kv_fp8      3") != std::string::npos);
  }

  // the bf16 rows are priced as without the fp8 ones beside them (a forecast of their own per GPU and cache)
  temp_dir t;
  std::string text = ns_test::slurp(ns_test::source_dir / fixture);
  std::string bf16_only = text.substr(0, text.find('\n') + 1);
  for (size_t at = bf16_only.size(); at < text.size();) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at + 1);
    if (line.find(",bfloat16,bfloat16,") != std::string::npos) bf16_only += line;
    at = end + 1;
  }
  const json mixed = json_of(run_cli("eval kernels " + fixture + " --format json"));
  const json alone = json_of(run_cli("eval kernels " + quoted(t.write("bf16.csv", bf16_only).string()) + " --format json"));
  REQUIRE(alone["rows"].size() == 2);
  std::vector<double> mixed_bf16;
  for (const auto& r : mixed["rows"])
    if (r["family"] == "attention_prefill") mixed_bf16.push_back(r["predicted_ms"]);
  CHECK(mixed_bf16 == std::vector<double>{alone["rows"][0]["predicted_ms"], alone["rows"][1]["predicted_ms"]});

  // train reads the same files: the fp8-cache rows are skipped and counted, the 16-bit ones trained on
  text = text.substr(0, text.find('\n') + 1);
  for (int i = 1; i <= 12; ++i)
    for (const char* kv : {"bfloat16", "fp8"}) text += prefill_row(i, kv);
  const auto data = t.write("prefill.csv", text);
  const auto out = (t.path / "w/nvidia/attention_prefill").string();
  const auto r = run_cli("train -q --family attention_prefill --data " + quoted(data.string()) + " --out " +
                         quoted(out) + " --hidden 8 --epochs 5 --batch 4 --seed 1");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("attention_prefill weights, 12 rows") != std::string::npos);
  CHECK(r.err.find("skipped 12 rows: prefill attention over an fp8 KV cache is never trained on") != std::string::npos);
}

TEST_CASE("eval models: no label evaluated is an error that says why", "[cli][eval][tools]") {
  temp_dir t;  // a label folder copied out of its data tree: no opgraph/ beside it
  t.write("Tesla_T4/gpt2_large-inf-1024-4.json", ns_test::slurp(ns_test::source_dir / t4_label));
  for (const std::string format : {"table", "json"}) {
    const auto r = run_cli("eval models " + quoted((t.path / "Tesla_T4").string()) + " --format " + format);
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Contains("no label evaluated: 1 label file was skipped (the reasons above); a label is "
                                      "forecast from its operator graph"));
  }
}

TEST_CASE("scale: a label CSV's origin is its label's measured end-to-end time", "[cli][scale][tools]") {
  const json label = json::parse(ns_test::slurp(ns_test::source_dir / t4_label));
  const double e2e = label["e2e_latency"];
  const json self = json_of(run_cli("scale --trace " + t4_trace + " --to t4 --format json"));
  CHECK(self["origin_ms"].get<double>() == Approx(e2e).epsilon(1e-9));
  CHECK(self["latency_ms"].get<double>() == Approx(e2e).epsilon(1e-9));  // to its own GPU: the measurement back
  const json& m = self["origin_measured"];
  CHECK(m["e2e_ms"].get<double>() == e2e);
  double ops = 0, shares = 0;
  for (const auto& op : self["ops"]) ops += op["measured_ms"].get<double>(), shares += op["origin_ms"].get<double>();
  CHECK(m["ops_origin_ms"].get<double>() == Approx(ops).epsilon(1e-9));
  CHECK(shares == Approx(e2e).epsilon(1e-9));
  CHECK(std::abs(ops / e2e - 1) > 0.05);  // the per-op times do not add up to the run (the reason for all this)

  // to another GPU: the measured time moves by the per-op times' overall ratio; each op by its own
  const json a100 = json_of(run_cli("scale --trace " + t4_trace + " --to a100_pcie_40gb --format json"));
  const json& am = a100["origin_measured"];
  CHECK(a100["latency_ms"].get<double>() ==
        Approx(e2e * am["ops_latency_ms"].get<double>() / am["ops_origin_ms"].get<double>()).epsilon(1e-9));
  double phases = a100["forward_ms"].get<double>() + a100["backward_ms"].get<double>() + a100["optimizer_ms"].get<double>();
  CHECK(phases == Approx(a100["latency_ms"].get<double>()).epsilon(1e-9));
  const auto table = run_cli("scale --trace " + t4_trace + " --to t4");
  CHECK_THAT(table.out, Catch::Contains("measured end to end: " + ns_test::replace_all(t4_trace, ".csv", ".json") +
                                        "\n               its per-op times sum to "));

  // another layer count than the label's: its time does not apply, said so
  const auto layers = run_cli("scale --trace " + t4_trace + " --to t4 --layers 12 --format json");
  const json l = json_of(layers);
  CHECK_FALSE(l.contains("origin_measured"));
  CHECK_THAT(layers.err, Catch::Contains("measured with 36 layers, the trace is scaled with 12"));

  // no label file beside the CSV: the per-op sum, with a warning
  temp_dir t;
  t.write("label/Tesla_T4/gpt2_large-inf-1024-4.csv", ns_test::slurp(ns_test::source_dir / t4_trace));
  t.write("opgraph/gpt2_large-inf-1024-4.csv",
          ns_test::slurp(ns_test::source_dir / "tests/fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv"));
  const auto bare = run_cli("scale --trace " + quoted((t.path / "label/Tesla_T4/gpt2_large-inf-1024-4.csv").string()) +
                            " --to t4 --layers 36 --format json");
  const json b = json_of(bare);
  CHECK_FALSE(b.contains("origin_measured"));
  CHECK(b["origin_ms"].get<double>() == Approx(ops * 1).epsilon(1e-9));
  CHECK_THAT(bare.err, Catch::Contains("gpt2_large-inf-1024-4.json beside it (its measured end-to-end time): the origin "
                                       "is the sum of the per-op times"));
}

TEST_CASE("scale: a training label's forward and backward shares are of its fw and bwall times", "[cli][scale][tools]") {
  const auto label = ns_test::shared_data("neusight/label/Tesla_V100-PCIE-32GB");
  if (!label) return;
  const std::string trace = (*label / "gpt2_large-train-1024-1.csv").string();
  const json l = json::parse(ns_test::slurp(*label / "gpt2_large-train-1024-1.json"));
  const json j = json_of(run_cli("scale --trace " + quoted(trace) + " --to v100 --format json"));
  CHECK(j["origin_measured"]["shares"] == "fw_latency, bwall_latency");
  CHECK(j["forward_ms"].get<double>() == Approx(l["fw_latency"].get<double>()).epsilon(1e-9));
  CHECK(j["backward_ms"].get<double>() == Approx(l["bwall_latency"].get<double>()).epsilon(1e-9));
  CHECK(j["latency_ms"].get<double>() == Approx(l["e2e_latency"].get<double>()).epsilon(1e-9));
}

namespace {

// The H200 GPT-2 training fixture with its events repeated after the first step's span: what hf_trace.py --steps 2
// records. `meta`: the "neusight" metadata to add (null: none).
std::string two_steps(const json& meta) {
  json d = json::parse(ns_test::slurp(ns_test::source_dir / "tests/fixtures/traces/hf/gpt2-fp32-train.json"));
  json& ev = d["traceEvents"];
  double lo = 1e300, hi = -1e300;
  for (const auto& e : ev)
    if (e.contains("ts") && e["ts"].is_number()) {
      lo = std::min(lo, e["ts"].get<double>());
      hi = std::max(hi, e["ts"].get<double>() + (e.contains("dur") && e["dur"].is_number() ? e["dur"].get<double>() : 0));
    }
  json second = ev;
  for (auto& e : second) {
    if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + (hi - lo) + 1000;
    if (!e.contains("args") || !e["args"].is_object()) continue;
    for (const char* k : {"correlation", "External id", "Sequence number", "Ev Idx"})
      if (e["args"].contains(k) && e["args"][k].is_number_integer()) e["args"][k] = e["args"][k].get<int64_t>() + 10000000;
  }
  for (auto& e : second) ev.push_back(e);
  if (!meta.is_null()) d["neusight"] = meta.dump();  // as torch.profiler's add_metadata_json stores it: JSON text
  return d.dump();
}

}  // namespace

TEST_CASE("scale: a trace of two profiled steps is reported per step", "[cli][scale][tools]") {
  const json one = json_of(run_cli("scale --trace tests/fixtures/traces/hf/gpt2-fp32-train.json --to h100_sxm5_80gb --format json"));
  CHECK(one["steps"] == 1);  // its sidecar gpt2-fp32-train.meta.json says so
  temp_dir t;
  const json meta = {{"format", "neusight-trace-meta"}, {"version", 1}, {"mode", "train"}, {"steps", 2}};
  const auto with_meta = t.write("meta/t.json", two_steps(meta));
  const auto bare = t.write("bare/t.json", two_steps(nullptr));  // its two Optimizer.step calls say it
  for (const auto& file : {with_meta, bare}) {
    const auto r = run_cli("scale --trace " + quoted(file.string()) + " --to h100_sxm5_80gb --format json");
    const json j = json_of(r);
    CHECK(j["steps"] == 2);
    for (const char* k : {"origin_ms", "latency_ms", "forward_ms", "backward_ms", "optimizer_ms"})
      CHECK(j[k].get<double>() == Approx(one[k].get<double>()).epsilon(1e-9));
    CHECK(j["ops"].size() == 2 * one["ops"].size());
    CHECK(r.err.find("taken as") == std::string::npos);
  }
  CHECK_THAT(json_of(run_cli("scale --trace " + quoted(with_meta.string()) + " --to h100_sxm5_80gb --format json"))["steps_source"]
                 .get<std::string>(),
             Catch::Contains("key 'neusight' says steps = 2"));
  // hf_trace.py's sidecar <out>.meta.json counts when the trace has no metadata; a disagreement is said
  t.write("bare/t.json.meta.json", json{{"format", "neusight-trace-meta"}, {"steps", 3}}.dump());
  const auto side = run_cli("scale --trace " + quoted(bare.string()) + " --to h100_sxm5_80gb --format json");
  const json s = json_of(side);
  CHECK(s["steps"] == 3);
  CHECK_THAT(side.err, Catch::Contains("t.json.meta.json says steps = 3, but it holds 2 Optimizer.step calls: taken as 3"));
  const auto table = run_cli("scale --trace " + quoted(with_meta.string()) + " --to h100");
  CHECK_THAT(table.out, Catch::Contains("steps     2 ("));
}

TEST_CASE("inputs given twice are refused: eval kernels eval models and train", "[cli][tools]") {
  temp_dir t;
  const auto csv = t.write("sub/f.csv", ns_test::slurp(ns_test::source_dir / bmm));
  const std::string dir = quoted((t.path / "sub").string()), file = quoted(csv.string());
  const std::string dotted = quoted((t.path / "sub" / "." / "f.csv").string());
  for (const std::string& args : {"eval kernels " + file + " " + dotted, "eval kernels " + dir + " " + file,
                                  "train --family bmm --out " + quoted((t.path / "w").string()) + " --data " + dir + " " + file}) {
    const auto r = run_cli(args);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains(": given twice"));
    CHECK_THAT(r.err, Catch::Contains("give each input once (its rows would count twice)"));
  }
  CHECK_FALSE(fs::exists(t.path / "w"));
  const std::string labels = "tests/fixtures/neusight/label/Tesla_T4";
  const auto m = run_cli("eval models " + labels + " " + labels + "/");
  CHECK(m.code == 1);
  CHECK_THAT(m.err, Catch::Contains("gpt2_large-inf-1024-4.json: given twice (as '" + labels + "' and as '" + labels + "/')"));
}

TEST_CASE("train: an --out that cannot be created is refused before training and named", "[cli][train][tools]") {
  temp_dir t;
  const std::string file = t.write("a-file", "").string();
  for (const std::string& out : {std::string("/dev/null/x"), file + "/x/y"}) {
    const auto r = run_cli("train --family bmm --data " + bmm + " --out " + out + " --epochs 5");
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("neusight: --out " + out + ": cannot be created: "));
    CHECK(r.err.find("training") == std::string::npos);  // nothing trained
  }
}

TEST_CASE("train: model.toml records the training's seconds and a command a shell reads back", "[cli][train][tools]") {
  temp_dir t;
  const auto out = (t.path / "it's/nvidia/layernorm").string();
  const auto r = run_cli("train -q --family layernorm --data tests/fixtures/bench/ln_small.csv --out " + quoted(out) +
                         " --hidden 8 --epochs 3 --exclude-gpu 'Tesla T4'");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string toml = ns_test::slurp(fs::path(out) / "model.toml");
  CHECK(toml.find("seconds = 0.0\n") == std::string::npos);
  CHECK_THAT(toml, Catch::Contains("--exclude-gpu 'Tesla T4'"));
  CHECK_THAT(toml, Catch::Contains("--out '" + ns_test::replace_all(out, "'", "'\\\\''") + "'"));
}

TEST_CASE("a misspelled subcommand is named with close matches", "[cli][tools]") {
  const auto r = run_cli("predcit --model gpt2_large");
  CHECK(r.code == 2);
  CHECK(r.err == "neusight: unknown subcommand 'predcit' (did you mean 'predict'?); `neusight --help` lists them\n");
  const auto e = run_cli("eval kernel " + bmm);
  CHECK(e.code == 2);
  CHECK_THAT(e.err, Catch::Contains("unknown subcommand 'kernel' (did you mean 'kernels'?); `neusight eval --help`"));
}

TEST_CASE("a misspelled long option is named with the command's closest option", "[cli][tools]") {
  const auto r = run_cli("predict --model llama3_8b --gpu h100 --mode prefill --batch 1 --seq 128 --dtpye bf16");
  CHECK(r.code == 2);
  CHECK(r.err == "neusight: unknown option '--dtpye' (did you mean '--dtype'?); `neusight predict --help` lists them\n");
  const auto s = run_cli("serve --model llama3_8b --gpu h100 --batch 1 --input_len 10 --output-len 5");
  CHECK(s.code == 2);
  CHECK(s.err == "neusight: unknown option '--input_len' (did you mean '--input-len'?); `neusight serve --help` lists "
                 "them\n");
  const auto e = run_cli("eval models --gpuz h100");
  CHECK(e.code == 2);
  CHECK_THAT(e.err, Catch::Contains("unknown option '--gpuz'"));
  CHECK_THAT(e.err, Catch::Contains("`neusight eval models --help`"));
}

// An option other commands have (`serve --pp 2`): said as such, naming them, not a near name of another meaning
// (--pp → --tp), tester8 #9.
TEST_CASE("an option of other commands is said to be theirs, not misspelled", "[cli][tools]") {
  const auto p = run_cli("serve --model llama3_8b --gpu h100 --batch 1 --pp 2");
  CHECK(p.code == 2);
  CHECK_THAT(p.err, Catch::StartsWith("neusight: serve has no --pp option ("));
  CHECK_THAT(p.err, Catch::Contains("predict"));
  CHECK_THAT(p.err, Catch::Contains("`neusight serve --help` lists this command's"));
  CHECK(p.err.find("did you mean") == std::string::npos);
  const auto e = run_cli("serve --model mixtral_8x7b --gpu h100 --batch 1 --ep=2");
  CHECK(e.code == 2);
  CHECK_THAT(e.err, Catch::StartsWith("neusight: serve has no --ep option ("));
  CHECK_THAT(e.err, Catch::Contains("search"));
  // a name no command has keeps the near-name hint
  const auto n = run_cli("serve --model llama3_8b --gpu h100 --batch 1 --tpp 2");
  CHECK(n.code == 2);
  CHECK_THAT(n.err, Catch::Contains("unknown option '--tpp' (did you mean"));
}

// An option's value that starts with "--" is its value, as CLI11 reads it (the option takes the next word whatever it
// looks like), not an unknown option: the check skips the values of the options that take one (app.cpp).
TEST_CASE("an option value that starts with -- is not an unknown option", "[cli][tools]") {
  const std::string base = "predict --model llama3_8b --gpu h100 --mode prefill --batch 1 --seq 128 --predictor roofline";
  // the value reaches the option: --dtype's own error names it (not exit 2 'unknown option')
  const auto d = run_cli(base + " --dtype --bf16");
  INFO(d.err);
  CHECK(d.code == 1);
  CHECK(d.err.find("unknown option") == std::string::npos);
  CHECK_THAT(d.err, Catch::Contains("--bf16"));
  // -o and --output write the file named so (run from a folder of its own: the name is relative)
  temp_dir t;
  for (const std::string flag : {"-o", "--output"}) {
    const auto o = run_sh("cd " + quoted(t.path.string()) + " && '" NEUSIGHT_EXE "' " + base + " --dtype bf16 " + flag +
                          " --weird.json");
    INFO(flag << ": " << o.err);
    CHECK(o.code == 0);
    CHECK(fs::exists(t.path / "--weird.json"));
    fs::remove(t.path / "--weird.json");
  }
  // a flag takes no value: what follows it is still checked
  const auto f = run_cli(base + " --dtype bf16 --verbose --dtpye bf16");
  CHECK(f.code == 2);
  CHECK_THAT(f.err, Catch::Contains("unknown option '--dtpye' (did you mean '--dtype'?)"));
  // after a value, the next option is checked again
  const auto v = run_cli(base + " --dtype --bf16 --dtpye bf16");
  CHECK(v.code == 2);
  CHECK_THAT(v.err, Catch::Contains("unknown option '--dtpye'"));
}

TEST_CASE("collect.py grid piped into a reader that stops early ends quietly", "[cli][collect][tools]") {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
    std::cout << "NEUSIGHT-TEST-SKIPPED: python3 not found" << std::endl;
    return;
  }
  // braces: run_sh's redirections then take the collector's stderr too, not only head's
  const auto r = run_sh("{ python3 scripts/collect/collect.py grid | head -1; }");
  CHECK(r.code == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  CHECK(r.err.find("Traceback") == std::string::npos);
  CHECK(r.err.find("BrokenPipe") == std::string::npos);
}

TEST_CASE("an installed tree: hf_trace.py finds its llama config and train.sh writes where it is run from",
          "[cli][tools][install]") {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
    std::cout << "NEUSIGHT-TEST-SKIPPED: python3 not found" << std::endl;
    return;
  }
  temp_dir t;
  const fs::path build = fs::path(NEUSIGHT_EXE).parent_path();
  const auto inst = run_sh("cmake --install " + quoted(build.string()) + " --prefix " + quoted((t.path / "p").string()));
  INFO(inst.err);
  REQUIRE(inst.code == 0);
  const fs::path share = t.path / "p/share/neusight";
  // the manual is installed beside the files it describes, and the installed binary says where (tester9)
  const auto readme = run_sh(quoted((t.path / "p/bin/neusight").string()) + " paths readme");
  CHECK(readme.out == (share / "README.md").string() + "\n");
  CHECK(fs::is_regular_file(share / "README.md"));
  // hf_trace.py's built-in llama: its config, with transformers stood in for (the config it is given is what counts)
  const std::string py = "cd " + quoted(t.path.string()) + " && python3 -B -c \"import sys; sys.path.insert(0, '" +
                         (share / "scripts/collect").string() + "'); import hf_trace\n"
                         "class T:\n class AutoConfig:\n  for_model = staticmethod(lambda mt, **d: (mt, d))\n"
                         "mt, d = hf_trace.load_config(T, 'llama', None); print(mt, d['num_hidden_layers'])\"";
  const auto cfg = run_sh(py);
  INFO(cfg.err);
  CHECK(cfg.code == 0);
  CHECK(cfg.out == "llama 16\n");

  // train.sh of the installation: a relative --out is the caller's; no --out replaces nothing (stub neusight)
  t.write("data/dataset/.keep", "");
  t.write("aic/.keep", "");
  const std::string log = (t.path / "args.log").string();
  const fs::path exe = t.write("neusight", "#!/bin/sh\nprintf '%s\\n' \"$@\" >> " + quoted(log) + "\n");
  fs::permissions(exe, fs::perms::owner_all);
  const std::string train = "cd " + quoted(t.path.string()) + " && NEUSIGHT=./neusight bash " +
                            quoted((share / "weights/train.sh").string()) +
                            " --vendor amd --only softmax --data data --aic aic";
  const auto ok = run_sh(train + " --out my-weights");
  INFO(ok.err);
  CHECK(ok.code == 0);
  CHECK_THAT(ns_test::slurp(log), Catch::Contains("\n" + (t.path / "my-weights/amd/softmax").string() + "\n"));
  const auto bare = run_sh(train);
  CHECK(bare.code == 2);
  CHECK_THAT(bare.err, Catch::Contains("train.sh: pass --out DIR"));
}

TEST_CASE("eval kernels: progress on a terminal only", "[cli][eval][tools]") {
  const auto plain = run_cli("eval kernels " + bmm);
  CHECK(plain.code == 0);
  CHECK(plain.err.find("neusight: reading") == std::string::npos);  // logs and pipes get none
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    std::cout << "NEUSIGHT-TEST-SKIPPED: script(1) not found (no terminal to run under)" << std::endl;
    return;
  }
  // script(1) gives the command a terminal; its stdout then holds what the command wrote to either stream
  const auto tty = run_sh("script -qec " + quoted(std::string("'") + NEUSIGHT_EXE + "' eval kernels " + bmm + " -o /dev/null") +
                          " /dev/null");
  INFO(tty.out << tty.err);
  CHECK(tty.code == 0);
  CHECK_THAT(tty.out, Catch::Contains("neusight: reading 1 input ("));
  CHECK_THAT(tty.out, Catch::Contains("rows read from 1 files; predicting them on 2 GPUs"));
  CHECK_THAT(tty.out, Catch::Contains("neusight: forecast 1 of 2: "));  // one per GPU and KV-cache dtype
}

TEST_CASE("ops --format json lists the rules as JSON and csv is refused", "[cli][tools]") {
  const json j = json_of(run_cli("ops --format json"));
  REQUIRE(j.is_array());
  const auto it = std::find_if(j.begin(), j.end(), [](const json& o) { return o["op"] == "matmul"; });
  REQUIRE(it != j.end());
  CHECK((*it)["file"] == "ops/matmul.lua");
  CHECK_FALSE((*it)["doc"].get<std::string>().empty());
  const auto table = run_cli("ops");
  CHECK(std::count(table.out.begin(), table.out.end(), '\n') == std::ptrdiff_t(j.size()));
  CHECK(run_cli("ops --format csv").code == 2);
}

// tester5 #2 follow-up: op rules declare the node attrs they read (field `attrs`); `ops -v` lists them per op, in its
// table and its JSON, so a model writer sees what `attrs = { … }` a node may set without reading the rule.
TEST_CASE("ops -v lists each rule's declared attrs in the table and the JSON", "[cli][tools]") {
  const auto table = run_cli("ops -v");
  REQUIRE(table.code == 0);
  CHECK_THAT(table.out, Catch::Contains("\n                   attrs.causal  boolean: true when absent (decoder "
                                        "self-attention, is_causal=True); false for full attention"));
  CHECK_THAT(table.out, Catch::Contains("\n                   attrs.bias  boolean: "));
  CHECK_THAT(run_cli("ops").out, !Catch::Contains("\n                   attrs."));  // without -v: one line per op
  const json j = json_of(run_cli("ops -v --format json"));
  const auto sdpa = std::find_if(j.begin(), j.end(), [](const json& o) { return o["op"] == "sdpa"; });
  REQUIRE(sdpa != j.end());
  REQUIRE((*sdpa)["attrs"].is_object());
  CHECK((*sdpa)["attrs"]["causal"].get<std::string>().rfind("boolean: true when absent", 0) == 0);
  CHECK((*sdpa)["attrs"].contains("dropout"));
  CHECK((*sdpa)["attrs"].contains("saved_inputs"));  // a shared one (rules.attrs { "saved_inputs", … })
  const json plain = json_of(run_cli("ops --format json"));
  CHECK_FALSE(plain[0].contains("attrs"));
}
