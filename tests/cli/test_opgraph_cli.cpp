// tests/cli/test_opgraph_cli.cpp — `predict --graph` and `eval models` end to end: the roofline-reference
// golden against the reference's shipped forecasts, label evaluation, and error reporting.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/gpu_spec.h"
#include "ingest/opgraph.h"
#include "core/roofline.h"
#include "lua/session.h"
#include "session_util.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::source_dir;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

json parse_json(const ns_test::run_result& r) {
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

// Tolerance of the roofline-reference golden: 0.01 % relative (the acceptance bound). The reference's JSON is
// a float sum of its per-row milliseconds in another order; the observed worst case is below 1e-7.
const double reference_rel_tol = 1e-4;

struct golden_stats {
  size_t matched = 0;
  size_t corrected = 0;  // fields that differ from the traced graph by the importer's corrections
  double worst = 0;
  std::string worst_where;
};

// What the importer's corrections of the reference's graphs (opgraph_options::corrections: OPT's score clamp
// max_<n>: engine/ingest/opgraph.cpp) change in the reference's own roofline forecast: {forward, backward + accumulate}
// ms of the corrected graph minus the graph as traced, with `layers` replications. Zero for graphs without them.
std::pair<double, double> correction_ms(const fs::path& graph, const ns::gpu_spec& gpu, int64_t layers, bool training) {
  static ns::session s(ns_test::session_opts(source_dir));
  auto total = [&](const ns::opgraph_options& o) {
    ns::opgraph og = ns::opgraph_load(graph.string(), s.costing(), o);
    if (og.layer) ns::opgraph_replicate(og, layers);
    std::pair<double, double> ms{0, 0};
    for (const auto& ki : ns::opgraph_kernels(og, training)) {
      const double t = 1e3 * ns::roofline_reference_seconds(ki.k, gpu) * double(og.g.nodes[ki.node].count);
      (ki.ph == ns::phase::forward ? ms.first : ms.second) += t;
    }
    return ms;
  };
  const auto corrected = total({true, s.rule_kernels()}), traced = total(ns::opgraph_options{false, {}});
  return {corrected.first - traced.first, corrected.second - traced.second};
}

// Every <root>/prediction/<GPU>/roofline/<tag>.json whose <root>/opgraph/<tag>.csv exists (single-GPU,
// non-fusion tags) is forecast with the reference's device numbers (tests/fixtures/gpus/reference/<GPU>.toml)
// and must match e2e, fw and bwall (= bw + acc) latencies; the layer count comes from the config beside it.
golden_stats golden_reference(const fs::path& root) {
  golden_stats st;
  std::vector<fs::path> files;
  for (const auto& gpu_dir : fs::directory_iterator(root / "prediction"))
    if (fs::is_directory(gpu_dir.path() / "roofline"))
      for (const auto& e : fs::directory_iterator(gpu_dir.path() / "roofline"))
        if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const std::string gpu = file.parent_path().parent_path().filename().string();
    const std::string tag = file.stem().string();
    const auto t = ns::opgraph_tag_parse(tag);
    const fs::path graph = root / "opgraph" / (tag + ".csv");
    if (!t || !t->option.empty() || !fs::exists(graph)) continue;
    const fs::path toml = source_dir / "tests/fixtures/gpus/reference" / (gpu + ".toml");
    INFO("reference forecast " << file.string());
    REQUIRE(fs::exists(toml));
    const json ref = json::parse(ns_test::slurp(file));
    const json j = parse_json(run_cli("predict --graph '" + graph.string() + "' --gpu '" + toml.string() +
                                      "' --predictor roofline-reference --format json"));
    // the graph as the reference traced it: our forecast less the importer's corrections
    const auto [fw_fix, bw_fix] =
        correction_ms(graph, ns::gpu_spec_load(toml, gpu), j["layers"].get<int64_t>(), t->mode == "train");
    const std::tuple<const char*, const char*, double> fields[] = {{"latency_ms", "e2e_latency", fw_fix + bw_fix},
                                                                   {"forward_ms", "fw_latency", fw_fix},
                                                                   {"backward_ms", "bwall_latency", bw_fix}};
    for (const auto& [ours, theirs, fix] : fields) {
      const double a = j[ours].get<double>() - fix, e = ref[theirs];
      if (fix != 0) ++st.corrected;
      const double rel = e == 0 ? std::abs(a) : std::abs(a - e) / std::abs(e);
      INFO(ours << " = " << a << ", reference " << theirs << " = " << e);
      CHECK(rel <= reference_rel_tol);
      if (rel >= st.worst) st.worst = rel, st.worst_where = gpu + "/" + tag + " " + ours;
    }
    if (tag.rfind("switch", 0) != 0) CHECK(j["layers"] == ref["num_layer"]);  // Switch is traced whole
    ++st.matched;
  }
  return st;
}

}  // namespace

TEST_CASE("golden: roofline-reference reproduces the reference's forecasts (fixture copy)", "[cli][golden][opgraph]") {
  const golden_stats st = golden_reference(source_dir / "tests/fixtures/neusight");
  CHECK(st.matched == 2);  // T4 inference, V100 training
  INFO("worst " << st.worst << " at " << st.worst_where);
  CHECK(st.worst < 1e-6);
}

TEST_CASE("golden: roofline-reference reproduces every reference roofline forecast in ../shared", "[cli][golden][opgraph]") {
  const auto pred = ns_test::shared_data("neusight/prediction");
  if (!pred || !ns_test::shared_data("neusight/opgraph")) return;
  const fs::path shared = pred->parent_path();
  const golden_stats st = golden_reference(shared);
  WARN("roofline-reference golden: " << st.matched << " reference forecasts matched, worst relative error "
                                     << st.worst << " (" << st.worst_where << "); " << st.corrected
                                     << " fields less the importer's corrections (OPT's score clamp, Switch's experts)");
  CHECK(st.matched >= 72);
  CHECK(st.corrected > 0);  // the OPT and Switch forecasts carry corrections
}

TEST_CASE("predict --graph: mode from the file name, --mode and --layers override", "[cli][opgraph]") {
  const std::string graph = "tests/fixtures/neusight/opgraph/gpt2_large-train-1024-1.csv";
  const std::string gpu = "--gpu tests/fixtures/gpus/reference/Tesla_V100-PCIE-32GB.toml --predictor roofline-reference";
  const json train = parse_json(run_cli("predict --graph " + graph + " " + gpu + " --format json"));
  CHECK(train["mode"] == "train");
  CHECK(train["model"] == "gpt2_large");
  CHECK(train["batch"] == 1);
  CHECK(train["seq"] == 1024);
  CHECK(train["layers"] == 36);
  CHECK(train["optimizer"] == "none");
  CHECK(double(train["backward_ms"]) > double(train["forward_ms"]));
  CHECK(double(train["grad_accumulate_ms"]) > 0);
  CHECK_THAT(double(train["latency_ms"]),
             Catch::Matchers::WithinRel(double(train["forward_ms"]) + double(train["backward_ms"]), 1e-12));

  const json inf = parse_json(run_cli("predict --graph " + graph + " " + gpu + " --mode inference --format json"));
  CHECK(inf["mode"] == "inference");
  CHECK(inf["backward_ms"] == 0.0);
  CHECK(inf["forward_ms"] == train["forward_ms"]);

  const json one = parse_json(run_cli("predict --graph " + graph + " " + gpu + " --layers 1 --format json"));
  CHECK(one["layers"] == 1);
  CHECK(double(one["forward_ms"]) < double(train["forward_ms"]) / 5);
  for (const auto& op : one["ops"]) CHECK(op["count"] == 1);

  // the table names the layer count; the other predictors run on imported graphs too
  const auto table = run_cli("predict --graph " + graph + " --gpu v100 --predictor roofline");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("model     gpt2_large  (train, batch 1, seq 1024, fp32, optimizer none, 36 layers)") !=
        std::string::npos);
  const json ns = parse_json(run_cli("predict --graph " + graph + " --gpu v100 --format json"));
  CHECK(ns["predictor"] == "neusight");
  CHECK(double(ns["latency_ms"]) > 0);
}

TEST_CASE("predict --graph: bad input is reported with file:line and the column", "[cli][opgraph][errors]") {
  temp_dir t;
  const std::string header = "Name,OpName,FwOps,BwOps,AccOps,Prev,Next,InputShapes,OutputShape\n";
  const auto bad = t.write("g/custom-inf-8-1.csv", header +
                                                       "a,misc,[],[],[],set(),set(),[],\"(1,)\"\n"
                                                       "addmm,Linear,\"[['Linear', (8, 16)]]\",[],[],set(),set(),[],\"(8, 16)\"\n")
                       .string();
  auto r = run_cli("predict --graph '" + bad + "' --gpu tests/fixtures/gpus/tiny.toml");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + bad + ":3: column 'FwOps': kernel 'Linear' needs 3 positive integers (T, I, O), got (8, 16)\n");
  CHECK(r.out.empty());

  const auto syntax = t.write("g/other-inf-8-1.csv", header + "a,misc,\"[['MEM', ((1,), (2,)]]\",[],[],set(),set(),[],\"(1,)\"\n").string();
  r = run_cli("predict --graph '" + syntax + "' --gpu tests/fixtures/gpus/tiny.toml");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + syntax + ":2: column 'FwOps': expected ',' or ')', found ']' at character 21\n");

  // neither --model nor --graph; --graph with model-builder flags; --graph without --gpu; --layers without --graph
  r = run_cli("predict --gpu l4");
  CHECK(r.code != 0);
  CHECK(r.err.find("missing --model (or --graph)") != std::string::npos);
  const std::string graph = "tests/fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv";
  r = run_cli("predict --graph " + graph + " --gpu l4 --batch 2");
  CHECK(r.code != 0);
  CHECK(r.err.find("--batch excludes --graph") != std::string::npos);
  r = run_cli("predict --graph " + graph);  // a missing flag: a usage error, exit 2 (it was 1)
  CHECK(r.code == 2);
  CHECK(r.err == "neusight: command line: missing --gpu; `neusight predict --help` lists the flags\n");
  r = run_cli("predict --model gpt2_large --gpu l4 --layers 3");
  CHECK(r.code != 0);
  CHECK(r.err.find("--layers requires --graph") != std::string::npos);

  // a file name without a mode tag needs --mode
  const auto untagged = t.write("g/mine.csv", header + "a,misc,\"[['MEM', ((4,),)]]\",[],[],set(),set(),[],\"(1,)\"\n").string();
  r = run_cli("predict --graph '" + untagged + "' --gpu tests/fixtures/gpus/tiny.toml");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + untagged + ": the file name carries no -inf-/-train- tag: pass --mode train or --mode inference\n");
  r = run_cli("predict --graph '" + untagged + "' --gpu tests/fixtures/gpus/tiny.toml --mode inference --predictor roofline --format json");
  REQUIRE(r.code == 0);
  // and, an inference graph counting no parameters, that its memory leaves out the weights
  CHECK(r.err == "neusight: warning: " + untagged + ": no layer markers known for model 'mine': every row counts once (whole model)\n"
                 "neusight: warning: the graph names no parameters (an inference graph has no gradient accumulation to "
                 "count them from): its memory is not known (figures.memory_gb and fits are null)\n");
  CHECK(json::parse(r.out)["figures"]["memory_gb"].is_null());
  CHECK(json::parse(r.out)["figures"]["fits"].is_null());
  CHECK_THAT(double(json::parse(r.out)["latency_ms"]), Catch::Matchers::WithinRel(16 / 100e9 * 1e3, 1e-12));

  // collectives in a graph whose name carries no dp/tp/pp layout are refused, naming them
  const std::string grad_row = "x_grad,allreduce,[],\"[['ALLREDUCE_ASYNC', (16,)]]\",[],set(),set(),[],[]\n";
  const auto plain = t.write("g/custom-train-8-1.csv", header + "a,misc,[],[],[],set(),set(),[],\"(1,)\"\n" + grad_row)
                         .string();
  r = run_cli("predict --graph '" + plain + "' --gpu tests/fixtures/gpus/tiny.toml");
  CHECK(r.code == 1);
  CHECK(r.err == "neusight: " + plain + ": 1 rows hold collective kernels (ALLREDUCE_ASYNC ×1), first at " + plain +
                     ":3: a distributed graph needs its layout in the file name (<model>-train-<seq>-<batch>-dp4, "
                     "-tp4 or -pp4_1)\n");
  // with its layout named, the graph gets a parallel timeline; the reference's gradient rows give way to our buckets
  const auto dp = t.write("g/custom-train-8-4-dp4.csv",
                          header + "a,linear,\"[['Linear', (8, 16, 16)]]\",\"[['Linear', (8, 16, 16)], ['Linear', "
                                   "(16, 8, 16)]]\",\"[['VECadd', (1, 256)]]\",set(),set(),\"[(8, 16)]\",\"(8, 16)\"\n" +
                              grad_row)
                      .string();
  r = run_cli("predict --graph '" + dp + "' --gpu tests/fixtures/gpus/tiny.toml --predictor roofline --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  CHECK(j["parallel"]["dp"] == 4);
  CHECK(j["parallel"]["micro_batch"] == 1);
  CHECK(j["parallel"]["grad_bytes_per_rank"] == 4 * 256);
  CHECK(j["latency_ms"] == j["parallel"]["iteration_ms"]);
  CHECK(r.err.find("1 ALLREDUCE_ASYNC kernel(s) of the reference graph replaced by neusight's own bucketed gradient "
                   "all-reduce") != std::string::npos);
  // its memory: no saved activations counted (the reference's nodes do not say what autograd keeps; every output
  // put GPT-2 Large dp 4, measured on 40 GB A100s, at 131 GB), said in the JSON, against the GPU's capacity
  CHECK(j["memory"]["activations_counted"] == false);
  CHECK(j["memory"]["activations_gb"] == 0.0);
  CHECK(j["memory"]["capacity_gb"] == 8.0);
  CHECK(j["fits"] == true);
  const auto text = run_cli("predict --graph '" + dp + "' --gpu tests/fixtures/gpus/tiny.toml --predictor roofline");
  CHECK(text.out.find("activations not counted (an imported graph") != std::string::npos);
  // a GPU it does not fit (the 32 MiB cuBLAS workspace alone is over 0.01 GB): it says so, and fits is false (the
  // plan knew no capacity before: 131 GB "fitted" a 40 GB GPU)
  const std::string small = ns_test::replace_all(ns_test::slurp(ns_test::source_dir / "tests/fixtures/gpus/tiny.toml"),
                                                 "mem_gb = 8", "mem_gb = 0.01\nwhat_if = \"tiny with 10 MB\"");
  const auto small_gpu = t.write("small.toml", small).string();
  r = run_cli("predict --graph '" + dp + "' --gpu '" + small_gpu + "' --predictor roofline --format json");
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["fits"] == false);
  CHECK(r.err.find("more than the GPU's 0 GB") != std::string::npos);
  r = run_cli("predict --graph '" + dp + "' --gpu tests/fixtures/gpus/tiny.toml --mode inference");
  CHECK(r.code == 1);
  CHECK(r.err.find("is a training graph") != std::string::npos);
}

TEST_CASE("eval models: the predictor's warnings are said on stderr and in the JSON, once each", "[cli][eval][opgraph]") {
  // a Lua predictor faster than the GPU's peaks: the predictor warns of it in every forecast (figures.lua
  // predictor_warnings); eval models printed its APEs without a word
  temp_dir t;
  const std::string fast = t.write("fast.lua", "return { predict = function(kernels, gpu) local o = {} for i, k in "
                                               "ipairs(kernels) do o[i] = k.bytes / (gpu.mem_bw_gbps * 1e12) end "
                                               "return o end }\n").string();
  const auto r = run_cli("eval models tests/fixtures/neusight/label --predictor " + ns_test::quoted(fast) + " --format json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = parse_json(r);
  REQUIRE(j["warnings"].is_array());
  REQUIRE(!j["warnings"].empty());
  for (const auto& w : j["warnings"]) {
    const std::string line = "neusight: warning: " + std::string(w) + "\n";
    CHECK(std::string(w).rfind("predictor " + fast + ":1 priced ", 0) == 0);
    const auto at = r.err.find(line);  // on stderr, once
    CHECK(at != std::string::npos);
    CHECK(r.err.find(line, at + 1) == std::string::npos);
  }
  // the table says them too; the roofline predictor nothing
  const auto table = run_cli("eval models tests/fixtures/neusight/label --predictor " + ns_test::quoted(fast));
  CHECK(table.err.find("neusight: warning: " + std::string(j["warnings"][0]) + "\n") != std::string::npos);
  CHECK(parse_json(run_cli("eval models tests/fixtures/neusight/label --predictor roofline --format json"))["warnings"].empty());
  // a --weights no predictor reads: said once, in the JSON too
  const auto unused = run_cli("eval models tests/fixtures/neusight/label --predictor roofline --weights tests --format json");
  const auto note = unused.err.find("--weights tests has no effect");
  REQUIRE(note != std::string::npos);
  CHECK(unused.err.find("--weights tests has no effect", note + 1) == std::string::npos);
  CHECK(parse_json(unused)["warnings"].size() == 1);
}

TEST_CASE("eval models: every warning said on stderr is in the JSON too", "[cli][eval][opgraph]") {
  // the graphs' corrections (a distributed graph's collectives replaced by our own) and --overhead on's "no effect"
  // were said on stderr only: a script reading --format json saw "warnings": []
  const auto every_said = [](const std::string& args, const std::string& expect) {
    const auto r = run_cli("eval models " + args + " --predictor roofline --format json");
    INFO(args << "\nstderr: " << r.err);
    REQUIRE(r.code == 0);
    const json j = parse_json(r);
    std::vector<std::string> in_json;
    for (const auto& w : j["warnings"]) in_json.push_back(w);
    size_t said = 0;
    for (size_t at = r.err.find("neusight: warning: "); at != std::string::npos;
         at = r.err.find("neusight: warning: ", at + 1), ++said) {
      const size_t from = at + std::string("neusight: warning: ").size();
      const std::string w = r.err.substr(from, r.err.find('\n', from) - from);
      CHECK(std::count(in_json.begin(), in_json.end(), w) == 1);
    }
    CHECK(said == in_json.size());
    CHECK(std::any_of(in_json.begin(), in_json.end(),
                      [&](const std::string& w) { return w.find(expect) != std::string::npos; }));
  };
  every_said("tests/fixtures/distributed/label", "ALLREDUCE_ASYNC kernel(s) of the reference graph replaced");
  every_said("tests/fixtures/neusight/label --overhead on", "--overhead on has no effect");
}

TEST_CASE("eval models: per-label rows, per-GPU summary, skipped labels counted by reason", "[cli][eval][opgraph]") {
  const auto r = run_cli("eval models tests/fixtures/neusight/label --predictor roofline --format json");
  const json j = parse_json(r);
  CHECK(j["predictor"] == "roofline");
  REQUIRE(j["rows"].size() == 3);
  const json& a100 = j["rows"][0];
  CHECK(a100["gpu"] == "A100-PCIE-40GB");
  CHECK(a100["device"] == "NVIDIA_A100-PCIE-40GB");
  CHECK(a100["config"] == "gpt2_large-inf-1024-4");
  CHECK(a100["layers"] == 36);
  CHECK(a100["measured_ms"] == 535.8211059570312);
  for (const auto& row : j["rows"]) {
    for (const char* key : {"gpu", "config", "measured_ms", "predicted_ms", "ape"}) CHECK(row.contains(key));
    const double m = row["measured_ms"], p = row["predicted_ms"];
    CHECK(p > 0);
    CHECK_THAT(double(row["ape"]), Catch::Matchers::WithinRel(100 * std::abs(p - m) / m, 1e-12));
  }
  CHECK(j["rows"][2]["mode"] == "train");
  REQUIRE(j["summary"].size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const json& s = j["summary"][i];
    CHECK(s["gpu"] == j["rows"][i]["gpu"]);
    CHECK(s["n"] == 1);
    CHECK(s["mean"] == j["rows"][i]["ape"]);
    CHECK(s["median"] == s["mean"]);
    CHECK(s["max"] == s["mean"]);
  }
  // the table's "all" line, every label at once, is in the JSON too (it was the table's alone): the three APEs' mean,
  // median and max, and the same digits as the table prints
  REQUIRE(j.contains("all"));
  const json& all = j["all"];
  std::vector<double> apes;
  for (const auto& row : j["rows"]) apes.push_back(row["ape"]);
  std::sort(apes.begin(), apes.end());
  CHECK(all["n"] == 3);
  CHECK_THAT(double(all["mean"]), Catch::Matchers::WithinRel((apes[0] + apes[1] + apes[2]) / 3, 1e-12));
  CHECK(all["median"] == apes[1]);
  CHECK(all["max"] == apes[2]);
  const auto all_table = run_cli("eval models tests/fixtures/neusight/label --predictor roofline");
  CHECK(all_table.out.find(fmt::format("\n{:<18} {:>4} {:>9.2f} {:>9.2f} {:>9.2f} ", "all", 3, double(all["mean"]),
                                   double(all["median"]), double(all["max"]))) != std::string::npos);
  // the true reason: the fused model (predict --fusion) fuses the model builder's graph, not a reference graph
  const std::string fusion = "fusion label (torch.compile): eval models forecasts the reference graph unfused (spec "
                             "§1.6's fusion of an imported graph is not implemented), and the label does not say "
                             "which fused model it matches (predict --fusion or --flash-attention on the model; "
                             "weights/ACCURACY.md, Fused inference)";
  REQUIRE(j["skipped"].size() == 1);
  CHECK(j["skipped"][fusion] == 1);
  CHECK(r.err == "neusight: skipped 1 label: " + fusion +
                     " (first: tests/fixtures/neusight/label/NVIDIA_A100-PCIE-40GB/gpt2_large-inf-1024-4-fusion.json)\n");

  // The same prediction as predict --graph on the catalogue GPU.
  const json p = parse_json(run_cli("predict --graph tests/fixtures/neusight/opgraph/gpt2_large-inf-1024-4.csv "
                                    "--gpu a100_pcie_40gb --predictor roofline --format json"));
  CHECK_THAT(double(a100["predicted_ms"]), Catch::Matchers::WithinRel(double(p["latency_ms"]), 1e-12));

  // Table: one block per GPU and a summary; a graphs folder without the tag skips the label with its reason.
  temp_dir t;
  fs::create_directories(t.path / "empty");
  const auto table = run_cli("eval models tests/fixtures/neusight/label/Tesla_T4 tests/fixtures/neusight/label/Tesla_V100-PCIE-32GB");
  REQUIRE(table.code == 0);
  CHECK(table.out.find("T4 (Tesla_T4)\n") != std::string::npos);
  CHECK(table.out.find("summary: APE of end-to-end latency, predictor neusight\n") != std::string::npos);
  CHECK(table.out.find("2 labels evaluated, 0 skipped") != std::string::npos);
  // every label skipped: no label evaluated is an error (exit 1) that gives the reason, nothing on stdout
  const auto none = run_cli("eval models tests/fixtures/neusight/label/Tesla_T4 --graphs '" +
                            (t.path / "empty").string() + "' --format json");
  CHECK(none.code == 1);
  CHECK(none.out.empty());
  CHECK(none.err.find("no opgraph <tag>.csv in " + (t.path / "empty").string()) != std::string::npos);
  CHECK(none.err.find("no label evaluated") != std::string::npos);
  // a label folder that is not a GPU
  fs::create_directories(t.path / "label/Imaginary_GPU_9000");
  std::ofstream(t.path / "label/Imaginary_GPU_9000/gpt2_large-inf-1024-4.json") << R"({"num_layer": 36, "e2e_latency": 1.0})";
  // (its labels alone: no label evaluated is the error, which says to give its GPU file: test_gpu_file_cli.cpp)
  const auto unknown = run_cli("eval models '" + (t.path / "label").string() + "' --format json");
  CHECK(unknown.code == 1);
  CHECK(unknown.err.find("neusight: skipped 1 label: unknown GPU folder 'Imaginary_GPU_9000' (not in the GPU catalogue "
                         "nor a --gpu FILE)") != std::string::npos);
  // beside the labels of a GPU it knows: skipped and counted
  fs::create_directories(t.path / "label/Tesla_T4");
  fs::copy_file(ns_test::source_dir / "tests/fixtures/neusight/label/Tesla_T4/gpt2_large-inf-1024-4.json",
                t.path / "label/Tesla_T4/gpt2_large-inf-1024-4.json");
  const json mixed = parse_json(run_cli("eval models '" + (t.path / "label").string() +
                                        "' --graphs tests/fixtures/neusight/opgraph --format json"));
  CHECK(mixed["rows"].size() == 1);
  CHECK(mixed["skipped"]["unknown GPU folder 'Imaginary_GPU_9000' (not in the GPU catalogue nor a --gpu FILE)"] == 1);
}
