// tests/cli/test_collect_cli.cpp — the GPU collector (scripts/collect) without a GPU: its converter turns the
// checked-in sample (tests/fixtures/collect: a SYNTHETIC torch.profiler-format trace and manifest) into our
// micro-benchmark CSVs, and those CSVs train a model with `neusight train` and are read by `neusight eval kernels`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "ingest/csv.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::source_dir;
using ns_test::temp_dir;

namespace {
namespace fs = std::filesystem;

// python3 on PATH, or nullopt after telling CTest the case is skipped (never a vacuous pass).
bool have_python() {
  if (std::system("command -v python3 >/dev/null 2>&1") == 0) return true;
  std::cout << "NEUSIGHT-TEST-SKIPPED: python3 not found (the collector's converter is Python)" << std::endl;
  return false;
}

// Runs `cmd` in the source dir (shell-quoted by the caller), capturing its exit code, stdout and stderr.
ns_test::run_result run_sh(const std::string& cmd) {
  temp_dir t;
  const std::string full = "cd '" + source_dir.string() + "' && " + cmd + " >'" + (t.path / "out").string() + "' 2>'" +
                           (t.path / "err").string() + "'";
  const int status = std::system(full.c_str());
  ns_test::run_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ns_test::slurp(t.path / "out");
  r.err = ns_test::slurp(t.path / "err");
  return r;
}

ns_test::run_result convert(const fs::path& manifest, const fs::path& out) {
  return run_sh("python3 scripts/collect/collect.py convert '" + manifest.string() + "' --out '" + out.string() + "'");
}

std::vector<fs::path> csvs_under(const fs::path& dir) {
  std::vector<fs::path> found;
  if (!fs::exists(dir)) return found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".csv") found.push_back(e.path());
  std::sort(found.begin(), found.end());
  return found;
}

const std::vector<std::string> neusight_columns = {
    "OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name", "Warps per SM", "Blocks per SM",
    "Grid x", "Grid y", "Grid z", "Block x", "Block y", "Block z", "CUDA Version", "Kernels"};

// Mean of the 5 fastest CUDA-event times of a manifest case (the data collector's latency).
double fastest5_mean(const json& times) {
  std::vector<double> t;
  for (const auto& x : times) t.push_back(double(x));
  std::sort(t.begin(), t.end());
  const size_t n = std::min<size_t>(5, t.size());
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += t[i];
  return s / double(n);
}
}  // namespace

TEST_CASE("collect: the converter writes the sample's CSVs in our data format", "[cli][collect]") {
  if (!have_python()) return;
  temp_dir t;
  const fs::path fixture = source_dir / "tests/fixtures/collect";
  const auto r = convert(fixture / "manifest.json", t.path / "csv");
  INFO(r.err);
  REQUIRE(r.code == 0);

  const json manifest = json::parse(ns_test::slurp(fixture / "manifest.json"));
  const json trace = json::parse(ns_test::slurp(fixture / "trace-000.json"));
  const std::string device = manifest["device"]["name"];
  const double sms = manifest["device"]["num_sms"];
  // Every kernel launch of the trace, as (name, grid, block): a row's kernel must be one of them.
  std::set<std::tuple<std::string, std::string, std::string>> launched;
  for (const auto& e : trace["traceEvents"])
    if (e.value("cat", "") == "kernel") launched.insert({e["name"].get<std::string>(), e["args"]["grid"].dump(), e["args"]["block"].dump()});
  REQUIRE(launched.size() > 10);

  // The manifest's measured cases per output file (the skipped case writes nothing).
  std::map<std::string, std::vector<const json*>> expected;
  size_t skipped = 0;
  for (const auto& c : manifest["cases"]) {
    if (c.contains("skipped")) {
      ++skipped;
      continue;
    }
    const std::string op = c["op"], dtype = c["dtype"];
    const std::string rel = op == "context_attention" ? "context_attention/p2.1.0/" + device + ".csv"
                            : dtype == "fp32"         ? op + "/p2.1.0/" + device + ".csv"
                                                      : op + "/p2.1.0/" + dtype + "/" + device + ".csv";
    expected[rel].push_back(&c);
  }
  CHECK(skipped == 1);
  const auto files = csvs_under(t.path / "csv");
  REQUIRE(files.size() == expected.size());

  size_t splitk_rows = 0;
  for (const auto& [rel, cases] : expected) {
    const fs::path path = t.path / "csv" / rel;
    INFO(rel);
    REQUIRE(fs::exists(path));
    const ns::csv_table tab = ns::csv_load(path.string());
    REQUIRE(tab.rows.size() == cases.size());
    const bool attention = rel.rfind("context_attention/", 0) == 0;
    const std::string dtype = (*cases[0])["dtype"];
    if (attention) {
      for (const char* col : {"device", "op_name", "kernel_source", "batch_size", "isl", "num_heads",
                              "num_key_value_heads", "head_dim", "attn_dtype", "kv_cache_dtype", "step", "latency",
                              "Grid x", "Block x"})
        CHECK(tab.has_column(col));
    } else {
      // Exactly the data's columns, then the shape columns, then Dtype for rows not in fp32.
      std::vector<std::string> cols = neusight_columns;
      const bool gemm = (*cases[0])["family"] == "bmm" || (*cases[0])["family"] == "linear";
      for (const char* dim : gemm ? std::vector<const char*>{"B", "M", "N", "K"} : std::vector<const char*>{"B", "H"})
        cols.push_back(dim);
      if (dtype != "fp32") cols.push_back("Dtype");
      cols.push_back("Synthetic");  // the fixture's manifest is synthetic: every row says so
      CHECK(tab.header == cols);
    }
    CHECK(tab.header.back() == "Synthetic");
    for (const auto& row : tab.rows) CHECK(row.back().find("not measured on any GPU") != std::string::npos);
    for (size_t i = 0; i < tab.rows.size(); ++i) {
      const auto& row = tab.rows[i];
      const json& c = *cases[i];
      auto col = [&](const char* name) { return row[tab.column(name)]; };
      const std::string kname = col(attention ? "kernel_source" : "Kernel Name");
      const std::string grid = "[" + col("Grid x") + "," + col("Grid y") + "," + col("Grid z") + "]";
      const std::string block = "[" + col("Block x") + "," + col("Block y") + "," + col("Block z") + "]";
      CHECK(launched.count({kname, grid, block}) == 1);
      CHECK(col("Kernels").find(";" + kname) != std::string::npos);
      // The split-K GEMMs launch a reduction after the GEMM: the row names the GEMM, Kernels lists both.
      CHECK(kname.find("splitkreduce") == std::string::npos);
      if (col("Kernels").find("splitkreduce") != std::string::npos) ++splitk_rows;
      CHECK(std::stod(col(attention ? "latency" : "Latency")) == Approx(fastest5_mean(c["event_ms"])).epsilon(1e-12));
      for (const auto& [dim, v] : c["dims"].items()) CHECK(col(dim.c_str()) == std::to_string(int(v)));
      if (attention) {
        CHECK(col("device") == device);
        CHECK(col("attn_dtype") == "bfloat16");
        continue;
      }
      CHECK(col("OPName") == c["op"]);
      CHECK(col("Device") == device);
      CHECK(col("Torch Version") == "p2.1.0");
      CHECK(col("CUDA Version") == "cu121");
      CHECK(col("CUDNN Version") == "8902");
      const double blocks = std::stod(col("Grid x")) * std::stod(col("Grid y")) * std::stod(col("Grid z"));
      CHECK(std::stod(col("Blocks per SM")) == Approx(blocks / sms).epsilon(1e-7));
      if (dtype != "fp32") CHECK(col("Dtype") == dtype);
    }
  }
  CHECK(splitk_rows > 0);
}

// Its own case, so that the one above passes (not skips) in a clone without ../shared.
TEST_CASE("collect: the converter's fp32 columns are those of the shared training data", "[cli][collect]") {
  if (!have_python()) return;
  const auto shared = ns_test::shared_data("neusight/dataset/train/collect/linear/p2.1.0");
  if (!shared) return;
  temp_dir t;
  const auto r = convert(source_dir / "tests/fixtures/collect/manifest.json", t.path / "csv");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto data = ns::csv_load((*shared / "NVIDIA A100-PCIE-40GB.csv").string());
  bool compared = false;
  for (const auto& e : fs::directory_iterator(t.path / "csv/linear/p2.1.0"))
    if (e.path().extension() == ".csv") {
      auto header = ns::csv_load(e.path().string()).header;
      REQUIRE(header.back() == "Synthetic");  // the fixture's mark (a measured run has no such column)
      header.pop_back();
      CHECK(header == data.header);
      compared = true;
    }
  CHECK(compared);
}

TEST_CASE("collect: the converted sample trains models with neusight train and is read by eval kernels",
          "[cli][collect][train]") {
  if (!have_python()) return;
  temp_dir t;
  const fs::path csv = t.path / "csv";
  const auto r = convert(source_dir / "tests/fixtures/collect/manifest.json", csv);
  INFO(r.err);
  REQUIRE(r.code == 0);

  // fp32 linear rows (the data's own format) and bf16 linear rows (Dtype column -> the tensor-core family).
  const auto lin = run_cli("train -q --family linear --data '" + csv.string() + "' --out '" +
                           (t.path / "w/nvidia/linear").string() + "' --hidden 8,8 --epochs 20 --batch 4 --seed 1");
  INFO(lin.err);
  REQUIRE(lin.code == 0);
  CHECK(lin.out.find("linear weights, 16 rows") != std::string::npos);
  // the sample is synthetic and small: train says both
  CHECK(lin.err.find("warning: 16 of the rows are synthetic, not measured on a GPU (column Synthetic, first at ") !=
        std::string::npos);
  CHECK(lin.err.find("warning: only 16 linear rows to train on (fewer than 200)") != std::string::npos);
  const std::string model = ns_test::slurp(t.path / "w/nvidia/linear/model.toml");
  CHECK(model.find("A100-PCIE-40GB") != std::string::npos);
  const auto tc = run_cli("train -q --family gemm_tc16 --data '" + csv.string() + "' --out '" +
                          (t.path / "w/nvidia/gemm_tc16").string() + "' --hidden 8 --epochs 20 --batch 4 --seed 1");
  INFO(tc.err);
  REQUIRE(tc.code == 0);
  CHECK(tc.out.find("gemm_tc16 weights, 12 rows") != std::string::npos);
  CHECK(fs::exists(t.path / "w/nvidia/gemm_tc16/model.toml"));

  // eval kernels reads every row the converter wrote: one forecast per row, nothing skipped.
  size_t rows = 0;
  for (const auto& f : csvs_under(csv)) rows += ns::csv_load(f.string()).rows.size();
  const auto e = run_cli("eval kernels '" + csv.string() + "' --format json");
  INFO(e.err);
  REQUIRE(e.code == 0);
  const json j = json::parse(e.out);
  CHECK(j["rows"].size() == rows);
  CHECK((!j.contains("skipped") || j["skipped"].empty()));
  std::set<std::string> families;
  for (const auto& s : j["summary"]) families.insert(s["family"].get<std::string>());
  for (const char* f : {"bmm", "linear", "elementwise", "softmax", "layernorm", "gemm_tc16", "attention_prefill"})
    CHECK(families.count(f) == 1);
  // The freshly trained linear weights forecast the rows they were trained on.
  const auto own = run_cli("eval kernels '" + (csv / "linear/p2.1.0").string() + "' --weights '" +
                           (t.path / "w").string() + "' --format json");
  INFO(own.err);
  REQUIRE(own.code == 0);
  CHECK(json::parse(own.out)["rows"].size() == 28);  // 16 fp32 + 12 bf16

  // Dtype fp8 puts GEMM rows in the fp8 family (on a GPU with fp8 units: the sample's A100 has none).
  std::string fp8 = ns_test::slurp(csv / "linear/p2.1.0/bf16/NVIDIA A100-PCIE-40GB.csv");
  fp8 = ns_test::replace_all(ns_test::replace_all(fp8, ",bf16,", ",fp8,"), "NVIDIA A100-PCIE-40GB", "NVIDIA L40S");
  const auto f = run_cli("eval kernels '" + t.write("fp8/linear.csv", fp8).string() + "' --format json");
  INFO(f.err);
  REQUIRE(f.code == 0);
  const json fj = json::parse(f.out);
  CHECK(fj["rows"].size() == 12);
  REQUIRE(fj["summary"].size() == 1);
  CHECK(fj["summary"][0]["family"] == "gemm_fp8");
  CHECK(fj["summary"][0]["gpu"] == "L40S");
}

TEST_CASE("collect: convert.py run directly is collect.py convert - its help included", "[cli][collect]") {
  if (!have_python()) return;
  auto r = run_sh("python3 scripts/collect/convert.py --help");
  CHECK(r.code == 0);
  CHECK(r.out.find("usage: collect.py convert") != std::string::npos);
  r = run_sh("python3 scripts/collect/convert.py");  // no arguments: the usage error, not a silent exit 0
  CHECK(r.code == 2);
  CHECK(r.err.find("the following arguments are required: manifest, --out") != std::string::npos);
  temp_dir t;
  r = run_sh("python3 scripts/collect/convert.py tests/fixtures/collect/manifest.json --out '" +
             (t.path / "csv").string() + "'");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(csvs_under(t.path / "csv").size() == 9);
}

TEST_CASE("collect: bad input is a clear error and writes nothing", "[cli][collect]") {
  if (!have_python()) return;
  temp_dir t;
  const fs::path fixture = source_dir / "tests/fixtures/collect";
  fs::copy_file(fixture / "trace-000.json", t.path / "trace-000.json");
  json manifest = json::parse(ns_test::slurp(fixture / "manifest.json"));

  // A case the traces hold no kernels for.
  json lost = manifest;
  lost["cases"].push_back({{"id", "c09999"}, {"family", "bmm"}, {"op", "bmm"}, {"dtype", "fp32"},
                           {"dims", {{"B", 2}, {"M", 3}, {"N", 4}, {"K", 5}}}});
  t.write("lost.json", lost.dump());
  auto r = convert(t.path / "lost.json", t.path / "out");
  CHECK(r.code == 1);
  CHECK(r.err.find("lost.json: cases[" + std::to_string(lost["cases"].size() - 1) +
                   "]: case c09999 (bmm fp32") != std::string::npos);
  CHECK(r.err.find("has no kernels in the traces") != std::string::npos);
  CHECK(csvs_under(t.path / "out").empty());

  // A case dropped from the manifest whose kernels are in the trace.
  json dropped = manifest;
  dropped["cases"].erase(dropped["cases"].begin());
  t.write("dropped.json", dropped.dump());
  r = convert(t.path / "dropped.json", t.path / "out");
  CHECK(r.code == 1);
  CHECK(r.err.find("the traces hold cases the manifest does not list: c00000") != std::string::npos);
  CHECK(csvs_under(t.path / "out").empty());

  // Not JSON: file:line:column.
  t.write("broken.json", "{\n  \"format\": \"neusight-collect-manifest\",\n  oops\n}\n");
  r = convert(t.path / "broken.json", t.path / "out");
  CHECK(r.code == 1);
  CHECK(r.err.find("broken.json:3:3: not JSON") != std::string::npos);
  CHECK(csvs_under(t.path / "out").empty());

  // The reader refuses a Dtype it does not know, with file:line.
  const auto ok = convert(fixture / "manifest.json", t.path / "good");
  REQUIRE(ok.code == 0);
  const fs::path bf16 = t.path / "good/softmax/p2.1.0/bf16/NVIDIA A100-PCIE-40GB.csv";
  std::string text = ns_test::slurp(bf16);
  const size_t at = text.rfind(",bf16,");  // the Dtype column, before the fixture's Synthetic note
  REQUIRE(at != std::string::npos);
  text.replace(at, 6, ",fp64,");
  const auto bad = t.write("bad/softmax.csv", text);
  const auto e = run_cli("eval kernels '" + bad.string() + "'");
  CHECK(e.code == 1);
  CHECK(e.err.find("softmax.csv:4: column 'Dtype' of a softmax row must be fp32, fp16 or bf16 (got 'fp64')") !=
        std::string::npos);

  // A kernel's dur or correlation of the wrong type: the error names the value it got, at the event's index.
  json trace = json::parse(ns_test::slurp(fixture / "trace-000.json"));
  json& events = trace.is_object() ? trace["traceEvents"] : trace;
  size_t k = 0;
  while (k < events.size() && events[k].value("cat", "") != "kernel") ++k;
  REQUIRE(k < events.size());
  for (const auto& [key, value, said] :
       {std::tuple{"dur", json("12.5"), std::string("has no duration (dur must be a number >= 0, got '12.5')")},
        {"correlation", json(7.5), std::string("has no integer args.correlation (got 7.5)")}}) {
    json edited = trace;
    json& ev = (edited.is_object() ? edited["traceEvents"] : edited)[k];
    (std::string(key) == "dur" ? ev : ev["args"])[key] = value;
    temp_dir u;
    u.write("trace-000.json", edited.dump());
    u.write("manifest.json", manifest.dump());
    r = convert(u.path / "manifest.json", u.path / "out");
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("trace-000.json: traceEvents[" + std::to_string(k) + "]: kernel '") != std::string::npos);
    CHECK(r.err.find(said) != std::string::npos);
    CHECK(csvs_under(u.path / "out").empty());
  }
}

TEST_CASE("collect: the shape grid of stage 1 (no torch needed)", "[cli][collect]") {
  if (!have_python()) return;
  const std::string cmd = "python3 scripts/collect/collect.py grid --quick --dtypes fp32,bf16,fp8";
  const auto r = run_sh(cmd);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(run_sh(cmd).out == r.out);  // seeded: a rerun measures the same shapes
  // Pairs the collector does not measure are said, not silently dropped.
  CHECK(r.err.find("note: attention is not collected in fp32") != std::string::npos);
  CHECK(r.err.find("note: bmm is not collected in fp8") != std::string::npos);

  std::map<std::string, size_t> per;  // family/dtype -> cases
  std::map<std::string, size_t> per_op;
  size_t n = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line); ++n) {
    std::istringstream f(line);
    std::string id, fam, op, dtype;
    f >> id >> fam >> op >> dtype;
    INFO(line);
    char want[16];
    std::snprintf(want, sizeof want, "c%05zu", n);
    CHECK(id == want);
    std::map<std::string, long> d;
    for (std::string kv; f >> kv;) d[kv.substr(0, kv.find('='))] = std::stol(kv.substr(kv.find('=') + 1));
    ++per[fam + "/" + dtype];
    if (fam == "elementwise") ++per_op[op + "/" + dtype];
    if (fam == "bmm" || fam == "linear") {
      for (const char* k : {"B", "M", "N", "K"}) CHECK(d[k] >= 1);
      if (fam == "linear") CHECK(d["B"] == 1);
      if (fam == "bmm") for (const char* k : {"B", "M", "N", "K"}) CHECK(d[k] <= 1024);
      if (dtype == "fp8") for (const char* k : {"M", "N", "K"}) CHECK(d[k] % 16 == 0);
    } else if (fam == "layernorm") {
      CHECK(d["B"] % 4 == 0);
      CHECK(d["H"] % 4 == 0);
      CHECK(d["H"] > 256);
    } else if (fam == "attention") {
      CHECK(dtype == "bf16");
      CHECK(d["isl"] >= 1);
    } else {
      CHECK(d["B"] >= 1);
      CHECK(d["H"] >= 1);
      CHECK(d["H"] <= 4096);
    }
  }
  for (const char* k : {"bmm/fp32", "bmm/bf16", "linear/fp32", "linear/bf16", "linear/fp8", "softmax/fp32",
                        "layernorm/bf16", "elementwise/fp32", "attention/bf16"})
    CHECK(per[k] > 0);
  CHECK(per.count("bmm/fp8") == 0);
  CHECK(per.count("softmax/fp8") == 0);
  CHECK(per["linear/fp8"] == per["linear/fp32"]);
  CHECK(per_op.size() == 2 * 11);  // the data's 11 element-wise ops, in fp32 and bf16, the same shapes each
  for (const auto& [op, count] : per_op) CHECK(count == per_op.begin()->second);
  // The default grid is the larger one; an unknown dtype is refused.
  const auto full = run_sh("python3 scripts/collect/collect.py grid --families bmm");
  REQUIRE(full.code == 0);
  CHECK(size_t(std::count(full.out.begin(), full.out.end(), '\n')) > per["bmm/fp32"]);
  const auto bad = run_sh("python3 scripts/collect/collect.py grid --dtypes fp64");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("unknown dtype 'fp64'") != std::string::npos);
}

// A real sample (tests/fixtures/collect_h200: two runs on an H200, cut to 31 cases). Held-out hardware: read and
// converted here, never trained on.
TEST_CASE("collect: a real H200 sample converts and is read by eval kernels", "[cli][collect]") {
  if (!have_python()) return;
  temp_dir t;
  const fs::path fixture = source_dir / "tests/fixtures/collect_h200";
  const fs::path csv = t.path / "csv";
  // Both runs into one folder, as they were measured: the second (fp16 attention) must not replace the bf16 rows.
  for (const char* run : {"run1", "run2"}) {
    const auto r = convert(fixture / run / "manifest.json", csv);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("kernels outside the timed iterations") != std::string::npos);  // allocation, warm-up
  }
  const std::string dev = "NVIDIA H200";
  std::map<std::string, size_t> want = {  // file -> rows (the cases of shrink.py)
      {"bmm/p2.11.0/" + dev + ".csv", 2},           {"bmm/p2.11.0/bf16/" + dev + ".csv", 3},
      {"bmm/p2.11.0/tf32/" + dev + ".csv", 2},      {"bmm/p2.11.0/fp16/" + dev + ".csv", 1},
      {"linear/p2.11.0/" + dev + ".csv", 3},        {"linear/p2.11.0/bf16/" + dev + ".csv", 3},
      {"linear/p2.11.0/tf32/" + dev + ".csv", 2},   {"linear/p2.11.0/fp16/" + dev + ".csv", 2},
      {"linear/p2.11.0/fp8/" + dev + ".csv", 2},    {"add/p2.11.0/" + dev + ".csv", 1},
      {"add/p2.11.0/bf16/" + dev + ".csv", 1},      {"gelu/p2.11.0/" + dev + ".csv", 1},
      {"softmax/p2.11.0/" + dev + ".csv", 1},       {"softmax/p2.11.0/bf16/" + dev + ".csv", 1},
      {"ln/p2.11.0/" + dev + ".csv", 1},            {"ln/p2.11.0/bf16/" + dev + ".csv", 1},
      {"context_attention/p2.11.0/" + dev + ".csv", 2}, {"context_attention/p2.11.0/fp16/" + dev + ".csv", 2}};
  const auto files = csvs_under(csv);
  CHECK(files.size() == want.size());
  size_t rows = 0;
  std::map<std::string, std::string> kernel_of;  // "op dtype B,M,N,K" -> Kernel Name
  for (const auto& [rel, n] : want) {
    INFO(rel);
    REQUIRE(fs::exists(csv / rel));
    const ns::csv_table tab = ns::csv_load((csv / rel).string());
    CHECK(tab.rows.size() == n);
    rows += tab.rows.size();
    if (rel.rfind("context_attention/", 0) == 0) {
      const std::string dt = rel.find("/fp16/") != std::string::npos ? "float16" : "bfloat16";
      for (const auto& row : tab.rows) {
        CHECK(row[tab.column("attn_dtype")] == dt);
        CHECK(row[tab.column("kernel_source")].rfind("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 0) == 0);
      }
      continue;
    }
    const bool gemm = rel.rfind("bmm/", 0) == 0 || rel.rfind("linear/", 0) == 0;
    std::vector<std::string> cols = neusight_columns;
    for (const char* d : gemm ? std::vector<const char*>{"B", "M", "N", "K"} : std::vector<const char*>{"B", "H"})
      cols.push_back(d);
    const bool fp32 = std::count(rel.begin(), rel.end(), '/') == 2;
    if (!fp32) cols.push_back("Dtype");
    CHECK(tab.header == cols);
    for (const auto& row : tab.rows) {
      CHECK(row[tab.column("Device")] == dev);
      CHECK(row[tab.column("Torch Version")] == "p2.11.0");
      CHECK(row[tab.column("CUDA Version")] == "cu130");
      CHECK(row[tab.column("CUDNN Version")] == "91900");
      const std::string k = row[tab.column("Kernel Name")];
      CHECK(row[tab.column("Kernels")].find(";" + k) != std::string::npos);
      if (gemm)
        kernel_of[row[tab.column("OPName")] + " " + (fp32 ? "fp32" : row[tab.column("Dtype")]) + " " +
                  row[tab.column("B")] + "," + row[tab.column("M")] + "," + row[tab.column("N")] + "," +
                  row[tab.column("K")]] = k;
    }
  }
  CHECK(rows == 31);
  // Kernel names as cuBLAS 13 launched them. The fp8 case's row names the GEMM although its activation
  // quantisation (PyTorch's own element-wise kernels, listed in Kernels) ran longer.
  CHECK(kernel_of["linear fp8 1,128,144,32"] == "nvjet_sm90_qqtst_8x64_128x16_4x2_h_bz_algo2_TNN");
  CHECK(kernel_of["linear fp8 1,48,960,7792"] == "nvjet_sm90_qqtst_64x48_128x15_2x1_v_bz_algo2_TNT");
  CHECK(kernel_of["bmm bf16 58,374,376,248"] == "nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_NNN");
  CHECK(kernel_of["bmm fp32 59,42,470,510"].rfind("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8", 0) == 0);
  CHECK(kernel_of["linear tf32 1,101,924,2544"].rfind("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32", 0) == 0);
  CHECK(kernel_of["linear fp32 1,169,14,213"].rfind("void sgemm_largek_lds64<", 0) == 0);
  for (const auto& [key, k] : kernel_of) {
    INFO(key);
    CHECK(k.find("at::native") == std::string::npos);
  }
  const ns::csv_table fp8 = ns::csv_load((csv / ("linear/p2.11.0/fp8/" + dev + ".csv")).string());
  CHECK(fp8.rows[0][fp8.column("Kernels")].find("at::native::elementwise_kernel") != std::string::npos);

  // eval kernels reads every row, fp16 attention included (as fp16 kernels), and skips nothing.
  const auto e = run_cli("eval kernels '" + csv.string() + "' --format json");
  INFO(e.err);
  REQUIRE(e.code == 0);
  const json j = json::parse(e.out);
  CHECK(j["rows"].size() == 31);
  CHECK((!j.contains("skipped") || j["skipped"].empty()));
  std::map<std::string, size_t> fam;
  for (const auto& s : j["summary"]) {
    CHECK(s["gpu"] == "H200-SXM-141GB");
    fam[s["family"].get<std::string>()] = s["rows"].get<size_t>();
  }
  CHECK(fam == std::map<std::string, size_t>{{"attention_prefill", 4}, {"bmm", 2}, {"elementwise", 3},
                                             {"gemm_fp8", 2}, {"gemm_tc16", 13}, {"layernorm", 2},
                                             {"linear", 3}, {"softmax", 2}});
  const auto m = run_cli("eval kernels '" + csv.string() + "' --tiles measured --format json");
  INFO(m.err);
  REQUIRE(m.code == 0);
  CHECK(json::parse(m.out)["rows"].size() == 31);

  // Attention in a dtype we do not model is skipped with its own reason (not the fp8 one).
  std::string att = ns_test::slurp(csv / ("context_attention/p2.11.0/fp16/" + dev + ".csv"));
  att = ns_test::replace_all(att, ",float16,float16,", ",float32,float32,");
  const auto s = run_cli("eval kernels '" + t.write("f32/att.csv", att).string() + "' '" +
                         (csv / ("softmax/p2.11.0/" + dev + ".csv")).string() + "'");
  INFO(s.err);
  REQUIRE(s.code == 0);
  CHECK(s.err.find("skipped 2 rows: attention in attn_dtype 'float32' with kv_cache_dtype 'float32' is not modelled") !=
        std::string::npos);
}

// run3 of the real H200 sample: fp8 Linears after the activation quantisation of bench.py's Triton kernels (vLLM's
// dynamic per-tensor form: the scale zeroed, ns_fp8_absmax_rows, ns_fp8_quant, then the GEMM). Held-out hardware:
// converted and read here, never trained on.
TEST_CASE("collect: real fp8 rows with the Triton quantisation name their GEMM and are read as gemm_fp8",
          "[cli][collect]") {
  if (!have_python()) return;
  temp_dir t;
  const fs::path csv = t.path / "csv";
  const auto r = convert(source_dir / "tests/fixtures/collect_h200/run3/manifest.json", csv);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const fs::path file = csv / "linear/p2.11.0/fp8/NVIDIA H200.csv";
  REQUIRE(csvs_under(csv) == std::vector<fs::path>{file});
  const ns::csv_table tab = ns::csv_load(file.string());
  REQUIRE(tab.rows.size() == 4);
  std::map<std::string, std::string> kernel_of;  // "M,N,K" -> Kernel Name
  for (const auto& row : tab.rows) {
    INFO(row[tab.column("M")]);
    CHECK(row[tab.column("Dtype")] == "fp8");
    const std::string kernels = row[tab.column("Kernels")];
    CHECK(kernels.find(";ns_fp8_absmax_rows;ns_fp8_quant;" + row[tab.column("Kernel Name")]) != std::string::npos);
    kernel_of[row[tab.column("M")] + "," + row[tab.column("N")] + "," + row[tab.column("K")]] =
        row[tab.column("Kernel Name")];
  }
  // 1200 x 112 x 48: the absmax (about 3 us) outlasts the GEMM (about 2.5 us), yet the row names the GEMM.
  CHECK(kernel_of == std::map<std::string, std::string>{
                         {"128,144,32", "nvjet_sm90_qqtst_8x64_128x16_4x2_h_bz_algo2_TNN"},
                         {"1200,112,48", "nvjet_sm90_qqtst_8x64_128x16_2x4_h_bz_algo2_TNN"},
                         {"5456,16,22832", "nvjet_sm90_qqtst_128x144_128x6_1x2_h_bz_coopA_algo2_TNT"},
                         {"4144,6944,20288", "nvjet_sm90_qqtst_128x160_128x5_2x1_v_bz_coopA_algo2_TNT"}});
  const auto e = run_cli("eval kernels '" + csv.string() + "' --format json");
  INFO(e.err);
  REQUIRE(e.code == 0);
  const json j = json::parse(e.out);
  CHECK(j["rows"].size() == 4);
  REQUIRE(j["summary"].size() == 1);
  CHECK(j["summary"][0]["family"] == "gemm_fp8");
  CHECK(j["summary"][0]["gpu"] == "H200-SXM-141GB");
}

TEST_CASE("collect: a second run into the same folder keeps the first run's raw files", "[cli][collect]") {
  if (!have_python()) return;
  temp_dir t;
  const std::string py = "python3 -B -c \"import sys; sys.path.insert(0, 'scripts/collect'); import collect; "
                         "print(collect.raw_dir(sys.argv[1]))\" '" + t.path.string() + "'";
  auto r = run_sh(py);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == (t.path / "raw").string() + "\n");
  t.write("raw/manifest.json", "{}");
  r = run_sh(py);
  CHECK(r.out == (t.path / "raw-2").string() + "\n");
  t.write("raw-2/manifest.json", "{}");
  CHECK(run_sh(py).out == (t.path / "raw-3").string() + "\n");
}
