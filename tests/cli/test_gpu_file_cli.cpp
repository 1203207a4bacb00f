// tests/cli/test_gpu_file_cli.cpp — what a run takes from GPU files and cluster files: a cluster built for another GPU
// warns (and --cluster none gives the GPU's own links), a calibration warns once its GPU file was edited, a
// script's relative GPU path is the script's, and a file's architecture is the tile rules' to know. Every calibration works on a copy of a GPU file in a temp folder.
#include <algorithm>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::run_json;
using ns_test::temp_dir;
using ns_test::warned;
namespace fs = std::filesystem;

namespace {

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("cluster file of another GPU: the run warns naming its links and --cluster none takes the GPU's own",
          "[cli][parallel][cluster]") {
  const std::string run = "run examples/gpt3_train.lua --predictor roofline";
  const json l4 = run_json(run + " --gpu l4");
  INFO(l4["warnings"].dump());
  CHECK(l4["parallel"]["cluster"]["file"] == "gpus/clusters/dgx_h100.toml");
  CHECK(warned(l4["warnings"], "parallel.cluster: gpus/clusters/dgx_h100.toml describes nodes of H100-SXM5-80GB, not of "
                            "the L4 this run forecasts; its links price the communication (intra-node 450 GB/s"));
  CHECK(warned(l4["warnings"], "For the L4's own links (intra-node 32 GB/s per direction) give --cluster none"));
  // --cluster none: the L4's own links, the forecast of the same layout without a cluster, and nothing to warn of
  const json own = run_json(run + " --gpu l4 --cluster none");
  CHECK_FALSE(warned(own["warnings"], "parallel.cluster"));
  CHECK(own["parallel"]["cluster"]["file"] == "");
  const json flags = run_json("predict --model gpt3_175b --mode train --batch 64 --seq 2048 --dtype bf16 --optimizer adamw "
                              "--precision amp --attention sdpa --tp 8 --pp 8 --microbatches 64 --schedule 1f1b "
                              "--sequence-parallel --gpu l4 --predictor roofline");
  CHECK(own["latency_ms"].get<double>() == flags["latency_ms"].get<double>());
  CHECK(own["latency_ms"].get<double>() > l4["latency_ms"].get<double>());  // PCIe, not NVLink
  // the script's own GPU, and a DGX A100 of either A100 SXM4 part: the cluster's GPU, nothing said
  CHECK_FALSE(warned(run_json(run)["warnings"], "parallel.cluster"));
  for (const char* gpu : {"A100-SXM4-40GB", "a100_sxm4_80gb"}) {
    const json a = run_json("predict --model gpt2_large --gpu " + std::string(gpu) + " --mode train --batch 8 --seq 1024 "
                            "--tp 4 --dp 4 --cluster dgx_a100 --predictor roofline");
    CHECK_FALSE(warned(a["warnings"], "parallel.cluster"));
  }
  // a GPU-agnostic cluster file (no `gpu` key: pcie_8gpu, and every cluster file written before the key) says nothing
  CHECK_FALSE(warned(run_json(run + " --gpu l4 --cluster pcie_8gpu")["warnings"], "parallel.cluster"));
}

// search forecasts every layout with the cluster's links as predict does: it says so once, in its JSON `warnings`
// and on stderr (it said nothing: its layouts' forecasts are lean, and the layout warnings came after; review finding)
TEST_CASE("cluster file of another GPU: search warns once", "[cli][parallel][cluster][search]") {
  const std::string base = "search --model gpt2_large --gpus 8 --batch 64 --seq 1024 --dtype bf16 --predictor roofline "
                           "--cluster dgx_h100 --format json";
  const std::string said = "parallel.cluster: gpus/clusters/dgx_h100.toml describes nodes of H100-SXM5-80GB, not of "
                           "the L4 this run forecasts";
  const auto r = run_cli(base + " --gpu l4");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["layouts"].size() > 1);
  size_t in_json = 0;
  for (const auto& w : j["warnings"]) in_json += w.get<std::string>().find(said) == 0 ? 1 : 0;
  CHECK(in_json == 1);
  const size_t first = r.err.find(said);
  CHECK(first != std::string::npos);
  CHECK(r.err.find(said, first + 1) == std::string::npos);  // once
  // the cluster's own GPU: nothing said
  const auto h = run_cli(base + " --gpu h100");
  REQUIRE(h.code == 0);
  CHECK_FALSE(warned(json::parse(h.out)["warnings"], "parallel.cluster"));
  CHECK(h.err.find("parallel.cluster") == std::string::npos);
}

TEST_CASE("calibration of an edited GPU file: every forecast applying it warns naming the changed keys",
          "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = ns_test::gpu_copy(t, "a100_sxm4_40gb").string();
  const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 1 --seq 512";
  const double ms = run_json(args)["latency_ms"].get<double>();
  const fs::path m = t.write("m.toml", "latency_ms = " + std::to_string(ms * 1.5) + "\n");
  const auto fit = run_cli(args + " --calibrate '" + m.string() + "'");
  INFO(fit.err);
  REQUIRE(fit.code == 0);
  const fs::path cal = t.path / "a100_sxm4_40gb.calibration.toml";
  const std::string written = ns_test::slurp(cal);
  CHECK(written.find("\n[gpu_file]") != std::string::npos);
  CHECK(written.find("\nmem_bw_gbps = 1555.0\n") != std::string::npos);
  const json fresh = run_json(args);
  CHECK_FALSE(warned(fresh["warnings"], "another version"));
  // the GPU file edited: bandwidth and memory
  const std::string text = ns_test::slurp(gpu);
  t.write("a100_sxm4_40gb.toml", replaced(replaced(text, "mem_bw_gbps = 1555.0", "mem_bw_gbps = 3110.0"),
                                          "mem_gb = 40", "mem_gb = 48"));
  const std::string stale = "a100_sxm4_40gb.calibration.toml was fitted to another version of " + gpu +
                            " (changed since: mem_gb, mem_bw_gbps): its factors correct the forecasts of the old "
                            "numbers; refit it";
  // (decode steps: a calibration from an inference measurement leaves them uncalibrated, so nothing is applied there)
  for (const char* mode : {"--mode inference --batch 1 --seq 512", "--mode train --batch 1 --seq 512",
                           "--mode prefill --batch 2 --seq 256"}) {
    const json after = run_json("predict --model gpt2_large --gpu '" + gpu + "' " + mode);
    INFO(mode << ": " << after["warnings"].dump());
    CHECK(warned(after["warnings"], stale));
    CHECK(warned(after["warnings"], "or give --no-calibration"));
  }
  const auto table = run_cli(args);
  CHECK(table.err.find(stale) != std::string::npos);  // stderr too
  CHECK_FALSE(warned(run_json(args + " --no-calibration")["warnings"], "another version"));
  // serve and search say it too
  const auto serve = run_cli("serve --model gpt2_large --gpu '" + gpu + "' --batch 2 --input-len 128 --output-len 16");
  CHECK(serve.out.find(stale) != std::string::npos);  // serve's report lists its warnings
  const auto search = run_cli("search --model gpt2_large --gpu '" + gpu + "' --gpus 2 --batch 8 --seq 512 --mode train");
  CHECK(search.err.find(stale) != std::string::npos);
  // an older calibration without [gpu_file] is applied as it is, silently
  const std::string old = written.substr(0, written.find("\n[gpu_file]")) + "\n";
  t.write("a100_sxm4_40gb.calibration.toml", old);
  const json older = run_json(args);
  CHECK_FALSE(warned(older["warnings"], "another version"));
  CHECK(older["figures"]["calibration"].is_string());
  // a strict reader: an unknown key in [gpu_file] is an error at its line
  t.write("a100_sxm4_40gb.calibration.toml", old + "\n[gpu_file]\nmem_bw_gbsp = 1555.0\n");
  const auto bad = run_cli(args);
  CHECK(bad.code != 0);
  CHECK(bad.err.find("unknown GPU file key 'gpu_file.mem_bw_gbsp' (did you mean 'mem_bw_gbps'?)") != std::string::npos);
}

TEST_CASE("workload script: a relative GPU file path is the script's - from any folder", "[cli][workload]") {
  temp_dir t;
  ns_test::gpu_copy(t, "l4", "wl");
  t.write("wl/own.toml", replaced(ns_test::slurp(ns_test::source_dir / "gpus" / "l4.toml"), "name = \"L4\"",
                                  "name = \"L4-own\""));
  t.write("wl/w.lua", "return { model = \"gpt2_large\", gpu = \"own.toml\", mode = \"inference\", batch = 1, seq = 64 }\n");
  // from the source folder (run_cli's), where no own.toml is
  const json j = run_json("run '" + (t.path / "wl" / "w.lua").string() + "' --predictor roofline");
  CHECK(j["gpu"] == "L4-own");
  CHECK(j["gpu_file"] == (t.path / "wl" / "own.toml").lexically_normal().generic_string());
  // a bundled GPU by name, and a path only the current folder has (as before), still resolve
  t.write("wl/n.lua", "return { model = \"gpt2_large\", gpu = \"h100\", mode = \"inference\", batch = 1, seq = 64 }\n");
  CHECK(run_json("run '" + (t.path / "wl" / "n.lua").string() + "' --predictor roofline")["gpu"] == "H100-SXM5-80GB");
  t.write("wl/c.lua", "return { model = \"gpt2_large\", gpu = \"gpus/l40s.toml\", mode = \"inference\", batch = 1, "
                      "seq = 64 }\n");
  CHECK(run_json("run '" + (t.path / "wl" / "c.lua").string() + "' --predictor roofline")["gpu"] == "L40S");
}

// A user's own GPU for measured data (scripts/collect rows of a GPU no bundled file names): eval kernels, train and eval
// models take its file with --gpu FILE (core/gpu_spec.h gpu_data_resolver), and say so when rows name a GPU they do not
// know. tests/fixtures/gpus/imaginary_9000.toml is the GPU of bmm_small.csv's "Imaginary GPU 9000" row.
TEST_CASE("eval kernels --gpu FILE: the rows of a GPU neusight does not bundle are evaluated on the user's file",
          "[cli][eval][gpu]") {
  const std::string csv = "tests/fixtures/bench/bmm_small.csv", mine = "tests/fixtures/gpus/imaginary_9000.toml";
  // without it: the row is skipped and counted, and the message says what to do
  const std::string advice = "no GPU file names device 'Imaginary GPU 9000': describe each GPU in a TOML file (a copy "
                             "of one in `neusight paths gpus`, with the device string as its name or an alias) and "
                             "pass it with --gpu FILE";
  const auto without = run_cli("eval kernels " + csv + " --predictor roofline --format json");
  REQUIRE(without.code == 0);
  CHECK(without.err.find("skipped 1 rows: unknown device 'Imaginary GPU 9000'") != std::string::npos);
  CHECK(without.err.find("neusight: " + advice + "\n") != std::string::npos);
  CHECK(run_cli("eval kernels " + csv + " --predictor roofline").out.find("  " + advice + "\n") != std::string::npos);
  // with it: every row evaluated, the user's GPU a group of its own; the flag before the files leaves them positional
  for (const std::string& args : {csv + " --gpu " + mine, "--gpu " + mine + " " + csv}) {
    const auto r = run_cli("eval kernels " + args + " --predictor roofline --format json");
    INFO(args << "\n" << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.find("unknown device") == std::string::npos);
    const json j = json::parse(r.out);
    CHECK(j["rows"].size() == 7);
    CHECK(j["skipped"].empty());
    REQUIRE(j["summary"].size() == 3);
    CHECK(j["summary"][1]["gpu"] == "Imaginary-9000");
    CHECK(j["summary"][1]["rows"] == 1);
    CHECK(j["rows"][6]["gpu"] == "Imaginary-9000");
    CHECK(j["rows"][6]["device"] == "Imaginary GPU 9000");
  }
  // the file's numbers price its rows: twice the fp32 peak, half the roofline time of that compute-bound GEMM
  temp_dir t;
  const std::string text = ns_test::slurp(ns_test::source_dir / mine);
  const fs::path fast = t.write("fast.toml", replaced(replaced(text, "peak_fp32_tflops = 2.0", "peak_fp32_tflops = 4.0"),
                                                     "peak_fp32_matrix_tflops = 2.0", "peak_fp32_matrix_tflops = 4.0") +
                                                "what_if = \"twice the fp32 peak of its SMs and clock\"\n");
  const auto imaginary_ms = [&](const std::string& file) {
    const json j = run_json("eval kernels " + csv + " --predictor roofline --gpu '" + file + "'");
    return j["rows"][6]["predicted_ms"].get<double>();
  };
  CHECK(imaginary_ms(fast.string()) == Approx(imaginary_ms(mine) / 2).epsilon(1e-3));
  // a copy of a bundled GPU with its name and other numbers replaces it for that GPU's rows
  const fs::path a100 = t.write(
      "a100.toml", replaced(replaced(ns_test::slurp(ns_test::source_dir / "gpus/a100_pcie_40gb.toml"),
                                     "peak_fp32_tflops = 19.5", "peak_fp32_tflops = 39.0"),
                            "peak_fp32_matrix_tflops = 19.5", "peak_fp32_matrix_tflops = 39.0") +
                   "what_if = \"the A100 with twice its fp32 peak\"\n");
  const json bundled = run_json("eval kernels " + csv + " --predictor roofline");
  const json copied = run_json("eval kernels " + csv + " --predictor roofline --gpu '" + a100.string() + "'");
  CHECK(copied["summary"][0]["gpu"] == "A100-PCIE-40GB");
  CHECK(copied["rows"][0]["predicted_ms"].get<double>() ==
        Approx(bundled["rows"][0]["predicted_ms"].get<double>() / 2).epsilon(1e-3));
  CHECK(copied["rows"][4]["predicted_ms"] == bundled["rows"][4]["predicted_ms"]);  // the P100's rows keep theirs
  // --exclude-gpu names the user's GPU too
  const json excluded = run_json("eval kernels " + csv + " --gpu " + mine + " --exclude-gpu Imaginary-9000");
  CHECK(excluded["rows"].size() == 6);
  CHECK(excluded["skipped"]["excluded GPU Imaginary-9000"] == 1);
  // --exclude-gpu takes one value per use: the data file after it stays the positional argument (it took every
  // following value: "files is required")
  const auto after = run_cli("eval kernels --gpu " + mine + " --exclude-gpu Imaginary-9000 " + csv + " --format json");
  INFO(after.err);
  REQUIRE(after.code == 0);
  CHECK(json::parse(after.out)["rows"].size() == 6);
}

TEST_CASE("eval kernels --gpu FILE: unknown devices a file that names no row and misuse are errors that say what to do",
          "[cli][eval][gpu]") {
  temp_dir t;
  const std::string csv = "tests/fixtures/bench/bmm_small.csv", mine = "tests/fixtures/gpus/imaginary_9000.toml";
  const std::string rows = ns_test::slurp(ns_test::source_dir / csv);
  // rows of unknown devices only: no report, the error names them and the flag
  const fs::path only = t.write("only.csv", rows.substr(0, rows.find('\n') + 1) + rows.substr(rows.rfind("bmm,")));
  const auto none = run_cli("eval kernels '" + only.string() + "'");
  CHECK(none.code == 1);
  CHECK(none.err.find(only.string() + ": no rows to evaluate (no GPU file names device 'Imaginary GPU 9000': describe "
                      "each GPU in a TOML file (a copy of one in `neusight paths gpus`, with the device string as its "
                      "name or an alias) and pass it with --gpu FILE)") != std::string::npos);
  CHECK(run_cli("eval kernels '" + only.string() + "' --gpu " + mine).code == 0);
  // a file no row names: an error (its rows would be skipped), naming the devices no file names
  const auto unmatched = run_cli("eval kernels " + csv + " --gpu tests/fixtures/gpus/tiny.toml");
  CHECK(unmatched.code == 1);
  CHECK(unmatched.err == "neusight: skipped 1 rows: unknown device 'Imaginary GPU 9000' (first at " + csv + ":8)\n"
                         "neusight: --gpu tests/fixtures/gpus/tiny.toml: no device of the rows read is GPU 'Tiny-1' "
                         "(aliases 'Tiny GPU One', 'tiny1'); devices no GPU file names: 'Imaginary GPU 9000': the "
                         "file's name or one of its aliases must be the device as the data writes it (case, spaces, "
                         "'-' and '_' aside)\n");
  // a name is not a file (the bundled GPUs need none)
  const auto name = run_cli("eval kernels " + csv + " --gpu h100");
  CHECK(name.code == 1);
  CHECK(name.err.find("--gpu h100: a GPU file is expected here (path/to/my_gpu.toml, or ./h100 for a file in this "
                      "folder)") != std::string::npos);
  // two files of one GPU name, two files naming one device
  const std::string text = ns_test::slurp(ns_test::source_dir / mine);
  const fs::path twin = t.write("twin.toml", text);
  const auto twins = run_cli("eval kernels " + csv + " --gpu " + mine + " --gpu '" + twin.string() + "'");
  CHECK(twins.code == 1);
  CHECK(twins.err.find("--gpu " + mine + " and --gpu " + twin.string() + " are both GPU 'Imaginary-9000': give one") !=
        std::string::npos);
  const fs::path other = t.write("other.toml", replaced(text, "name = \"Imaginary-9000\"", "name = \"Imaginary-9001\""));
  const auto both = run_cli("eval kernels " + csv + " --gpu " + mine + " --gpu '" + other.string() + "'");
  CHECK(both.code == 1);
  CHECK(both.err.find("--gpu " + mine + " and --gpu " + other.string() + " both name device 'Imaginary GPU 9000'") !=
        std::string::npos);
  // a broken file: its file:line, as predict's --gpu
  const fs::path typo = t.write("typo.toml", replaced(text, "num_sm = 10", "num_sms = 10"));
  const auto broken = run_cli("eval kernels " + csv + " --gpu '" + typo.string() + "'");
  CHECK(broken.code == 1);
  CHECK(broken.err.find(typo.string() + ":8:1: unknown key 'num_sms' (did you mean 'num_sm'?)") != std::string::npos);
}

TEST_CASE("train --gpu FILE: a family trains on the rows of the user's GPU", "[cli][train][gpu]") {
  temp_dir t;
  const std::string mine = "tests/fixtures/gpus/imaginary_9000.toml";
  // ln_small.csv's T4 rows as if measured on the user's GPU
  const fs::path csv = t.write("ln.csv", ns_test::replace_all(ns_test::slurp(ns_test::source_dir / "tests/fixtures/bench/ln_small.csv"),
                                                             "Tesla T4", "Imaginary GPU 9000"));
  const std::string train = "train -q --family layernorm --data '" + csv.string() + "' --hidden 8 --epochs 2 --batch 32 --out '";
  const auto r = run_cli(train + (t.path / "mine/nvidia/layernorm").string() + "' --gpu " + mine);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("unknown device") == std::string::npos);
  CHECK(ns_test::slurp(t.path / "mine/nvidia/layernorm/model.toml").find("gpus = [ 'Imaginary-9000', 'V100-PCIE-32GB' ]") !=
        std::string::npos);
  // without the file its rows are skipped, and the run says how to use them
  const auto without = run_cli(train + (t.path / "without/nvidia/layernorm").string() + "'");
  REQUIRE(without.code == 0);
  CHECK(without.err.find("no GPU file names device 'Imaginary GPU 9000'") != std::string::npos);
  CHECK(ns_test::slurp(t.path / "without/nvidia/layernorm/model.toml").find("gpus = [ 'V100-PCIE-32GB' ]") !=
        std::string::npos);
  // a file that names no row of the family asked for
  const auto unmatched = run_cli("train -q --family bmm --data '" + csv.string() + "' --gpu " + mine + " --out '" +
                                 (t.path / "bmm").string() + "'");
  CHECK(unmatched.code == 1);
  CHECK(unmatched.err.find("--gpu " + mine + ": no device of the bmm rows read is GPU 'Imaginary-9000'") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(t.path / "bmm"));
}

TEST_CASE("eval models --gpu FILE: a label folder of the user's GPU is evaluated on its file", "[cli][eval][gpu]") {
  temp_dir t;
  t.write("label/Imaginary_GPU_9000/gpt2_large-inf-1024-4.json", R"({"num_layer": 36, "e2e_latency": 1000.0})");
  const std::string args = "eval models '" + (t.path / "label").string() +
                           "' --graphs tests/fixtures/neusight/opgraph --predictor roofline";
  const json j = run_json(args + " --gpu tests/fixtures/gpus/imaginary_9000.toml");
  REQUIRE(j["rows"].size() == 1);
  CHECK(j["rows"][0]["gpu"] == "Imaginary-9000");
  CHECK(j["rows"][0]["device"] == "Imaginary_GPU_9000");
  // without it: no label evaluated, an error that says what to do (it was an empty report, exit 0)
  const auto none = run_cli(args);
  CHECK(none.code == 1);
  CHECK(none.err.find("neusight: no label evaluated: no GPU file names device 'Imaginary_GPU_9000': describe each GPU "
                      "in a TOML file") != std::string::npos);
  CHECK(none.err.find("pass it with --gpu FILE") != std::string::npos);
  // a file no folder names
  const auto unmatched = run_cli(args + " --gpu tests/fixtures/gpus/tiny.toml");
  CHECK(unmatched.code == 1);
  CHECK(unmatched.err.find("--gpu tests/fixtures/gpus/tiny.toml: no device of the label folders read is GPU 'Tiny-1'") !=
        std::string::npos);
}

// A GPU file's architecture is the tile rules' to know (scripts/tiling/gemm.lua M.vendors, the one list, with each
// architecture's vendor): one they do not know is an error at the file's architecture line when it loads (it was the
// tile rule's error, without the line, once a GEMM was tiled), one a --scripts gemm.lua adds loads and forecasts, and
// the vendor it gives is the one the file is held to (the engine kept its own list, which the scripts could not change).
TEST_CASE("GPU file: its architecture is checked against the tile rules' list - a --scripts gemm.lua may add one",
          "[cli][gpu][scripts]") {
  temp_dir t;
  const std::string shipped = ns_test::slurp(ns_test::source_dir / "gpus" / "h100_sxm5_80gb.toml");
  const std::string text = replaced(shipped, "architecture = \"hopper\"", "architecture = \"rubin\"");
  const fs::path gpu = t.write("rubin.toml", text);
  const auto line_of = [&](const std::string& prefix) {
    const size_t at = text.find("\n" + prefix);
    REQUIRE(at != std::string::npos);
    return std::to_string(std::count(text.begin(), text.begin() + long(at) + 1, '\n') + 1);
  };
  const std::string args = "predict --model gpt2_med --mode inference --batch 1 --seq 128 --dtype bf16 --predictor "
                           "roofline --format json --gpu '" + gpu.string() + "'";
  const auto unknown = run_cli(args);
  INFO(unknown.err);
  CHECK(unknown.code == 1);
  CHECK(unknown.out.empty());
  CHECK(unknown.err.find(gpu.string() + ":" + line_of("architecture =") + ":1: architecture 'rubin' is not one the tile "
                         "rules know (scripts/tiling/gemm.lua M.vendors knows ") != std::string::npos);
  // a gemm.lua of your own that knows it, with the rules it follows
  std::string gemm = ns_test::slurp(ns_test::source_dir / "scripts" / "tiling" / "gemm.lua");
  gemm = replaced(gemm, "M.families = {\n", "M.families = {\n  rubin = \"ampere\",\n");
  gemm = replaced(gemm, "M.tc_families = {\n", "M.tc_families = {\n  rubin = { set = \"wgmma\", prefix = \"sm100_xmma_gemm\" },\n");
  t.write("s/tiling/gemm.lua", replaced(gemm, "M.vendors = {\n", "M.vendors = {\n  rubin = \"nvidia\",\n"));
  const auto added = run_cli(args + " --scripts '" + (t.path / "s").string() + "'");
  INFO(added.err);
  REQUIRE(added.code == 0);
  CHECK(json::parse(added.out)["latency_ms"].get<double>() > 0);
  // its vendor is the list's: a file of the other vendor is refused at its architecture line, naming the vendor's
  t.write("a/tiling/gemm.lua", replaced(gemm, "M.vendors = {\n", "M.vendors = {\n  rubin = \"amd\",\n"));
  const auto other = run_cli(args + " --scripts '" + (t.path / "a").string() + "'");
  INFO(other.err);
  CHECK(other.code == 1);
  CHECK(other.err.find(gpu.string() + ":" + line_of("architecture =") + ":1: architecture 'rubin' is an AMD "
                       "architecture, but vendor = \"nvidia\" (line " + line_of("vendor =") + ")") != std::string::npos);
}

// A local gpus/<file>.toml (an edited copy) beside the bundled file of that name is labelled ./gpus/<file>.toml:
// `--gpu h100` and the local file never share the label gpus/h100_sxm5_80gb.toml (they forecast differently).
TEST_CASE("a local gpus file shadowing a bundled one is labelled ./gpus", "[cli][gpu]") {
  ns_test::temp_dir t;
  std::string text = ns_test::slurp(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml");
  const std::string bw = "mem_bw_gbps = 3350.0";
  const auto at = text.find(bw);
  REQUIRE(at != std::string::npos);
  text.replace(at, bw.size(), "mem_bw_gbps = 3000.0");
  t.write("gpus/h100_sxm5_80gb.toml", text);
  const std::string in_t = "cd " + ns_test::quoted(t.path.string()) + " &&";
  const std::string args = "predict --model gpt2_med --mode inference --batch 1 --seq 128 --predictor roofline";
  const json local = run_json(args + " --gpu gpus/h100_sxm5_80gb.toml", in_t);
  const json bundled = run_json(args + " --gpu h100", in_t);
  CHECK(local["gpu_file"] == "./gpus/h100_sxm5_80gb.toml");
  CHECK(bundled["gpu_file"] == "gpus/h100_sxm5_80gb.toml");
  CHECK(local["latency_ms"].get<double>() > bundled["latency_ms"].get<double>());
}

// tester9 #12: a GPU file's peaks are held to what a chip of its SMs and clock reaches (scripts/neusight/gpu_check.lua):
// a datasheet's with-sparsity bf16 figure and an SM count that does not match the fp32 peak are errors at the key's
// line; a what-if part says so (what_if = "…") and is taken as written; every bundled file passes.
TEST_CASE("GPU file: a peak no chip of its SMs and clock reaches is an error at its line unless what_if says so",
          "[cli][gpu]") {
  temp_dir t;
  const std::string h100 = ns_test::slurp(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml");
  const std::string args = "predict --model gpt2_large --mode inference --batch 1 --seq 128 --dtype bf16 --gpu '";
  const fs::path sparse = t.write("sparse.toml", replaced(h100, "peak_bf16_tflops = 989.4 ", "peak_bf16_tflops = 1978.9"));
  const auto s = run_cli(args + sparse.string() + "'");
  CHECK(s.code == 1);
  CHECK(s.out.empty());
  CHECK_THAT(s.err, Catch::Contains("sparse.toml:21:1: key 'peak_bf16_tflops' = 1978.9 is 1.8× what a compute "
                                    "capability 9.0 chip of 132 SMs at 1980 MHz can reach"));
  CHECK_THAT(s.err, Catch::Contains("with-sparsity figure"));
  const fs::path fewer = t.write("fewer.toml", replaced(h100, "num_sm = 132 ", "num_sm = 100 "));
  const auto f = run_cli(args + fewer.string() + "'");
  CHECK(f.code == 1);
  CHECK_THAT(f.err, Catch::Contains("fewer.toml:17:1: key 'peak_fp32_tflops' = 66.9, but 100 SMs × 128 cores × 2 "
                                    "FLOPs × 1980 MHz = 50.69 TFLOP/s"));
  CHECK_THAT(f.err, Catch::Contains("where the maker publishes no SM count or clock, derive the guessed one"));
  // tester10 #8: AMD's headline FP32 (packed: twice the rate the file means) says so
  const std::string mi300x = ns_test::slurp(ns_test::source_dir / "gpus/mi300x.toml");
  const fs::path packed = t.write("packed.toml", replaced(mi300x, "peak_fp32_tflops = 81.7 ", "peak_fp32_tflops = 163.4"));
  const auto p = run_cli(args + packed.string() + "'");
  CHECK(p.code == 1);
  CHECK_THAT(p.err, Catch::Contains("packed.toml:20:1: key 'peak_fp32_tflops' = 163.4"));
  CHECK_THAT(p.err, Catch::Contains("AMD data sheets quote packed FP32"));
  const fs::path what_if = t.write("what_if.toml", replaced(h100, "peak_bf16_tflops = 989.4 ", "peak_bf16_tflops = 1978.9") +
                                                        "what_if = \"the H100 with twice its bf16 peak\"\n");
  const auto w = run_cli(args + what_if.string() + "' --format json");
  INFO(w.err);
  CHECK(w.code == 0);
  CHECK(run_cli("gpus --format json").code == 0);  // every bundled file passes
  // tester10: a dropped digit, a malformed capability (which would switch the table off), the fp32 matrix peak, a
  // blank what_if
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> bad = {
      {{"peak_bf16_tflops = 989.4 ", "peak_bf16_tflops = 98.9"}, "key 'peak_bf16_tflops' = 98.9 is 0.09× what"},
      {{"compute_capability = \"9.0\"", "compute_capability = \"sm_90\""},
       "key 'compute_capability' must be NVIDIA's major.minor"},
      {{"peak_fp32_matrix_tflops = 66.9 ", "peak_fp32_matrix_tflops = 669.0"},
       "key 'peak_fp32_matrix_tflops' = 669 is 10.00× peak_fp32_tflops"},
  };
  for (const auto& [edit, message] : bad) {
    const fs::path file = t.write("bad.toml", replaced(h100, edit.first, edit.second));
    const auto r = run_cli(args + file.string() + "'");
    INFO(edit.second << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains(message));
  }
  const fs::path blank = t.write("blank.toml", h100 + "what_if = \"  \"\n");
  CHECK_THAT(run_cli(args + blank.string() + "'").err, Catch::Contains("key 'what_if' must say in words"));
}

// audit19: the capability's form is the vendor's. An MI325X written from its datasheet with an NVIDIA-style "9.4" was
// held to NVIDIA's 4096 dense FLOPs per clock per SM, so its with-sparsity bf16 figure (2614.9, 2x the dense 1307.4)
// passed and forecast Llama-3-8B inference 20 % fast; a gfx target on an NVIDIA file is refused alike.
TEST_CASE("GPU file: a compute capability of the other vendor's form is an error at its line", "[cli][gpu]") {
  temp_dir t;
  const std::string args = "predict --model gpt2_large --mode inference --batch 1 --seq 128 --dtype bf16 --gpu '";
  const std::string mi300x = ns_test::slurp(ns_test::source_dir / "gpus/mi300x.toml");
  const fs::path amd = t.write("mi325x.toml", replaced(replaced(mi300x, "compute_capability = \"gfx942\"",
                                                                "compute_capability = \"9.4\"   "),
                                                       "peak_bf16_tflops = 1307.4", "peak_bf16_tflops = 2614.9"));
  const auto a = run_cli(args + amd.string() + "'");
  INFO(a.err);
  CHECK(a.code == 1);
  CHECK(a.out.empty());
  CHECK_THAT(a.err, Catch::Contains("mi325x.toml:12:1: key 'compute_capability' = \"9.4\" is an NVIDIA major.minor, "
                                    "but vendor = \"amd\": an AMD file names its gfx target (\"gfx942\")"));
  const std::string h100 = ns_test::slurp(ns_test::source_dir / "gpus/h100_sxm5_80gb.toml");
  const fs::path nv = t.write("h100.toml", replaced(h100, "compute_capability = \"9.0\"", "compute_capability = \"gfx942\""));
  const auto n = run_cli(args + nv.string() + "'");
  INFO(n.err);
  CHECK(n.code == 1);
  CHECK_THAT(n.err, Catch::Contains("h100.toml:8:1: key 'compute_capability' = \"gfx942\" is an AMD gfx target, but "
                                    "vendor = \"nvidia\""));
}

TEST_CASE("gpu names: a100 is the SXM4 80GB and the forecast says so - a10 is the A10", "[cli][gpu]") {
  const std::string run = "predict --model gpt3_27 --batch 1 --seq 128 --mode inference --predictor roofline";
  std::string err;
  const json a100 = run_json(run + " --gpu a100", "", &err);
  CHECK(a100["gpu"] == "A100-SXM4-80GB");
  CHECK(warned(a100["warnings"], "GPU 'a100' taken as A100-SXM4-80GB (gpus/a100_sxm4_80gb.toml); name a100_pcie_40gb, "
                                 "a100_pcie_80gb or a100_sxm4_40gb for another"));
  CHECK(err.find("GPU 'a100' taken as A100-SXM4-80GB") != std::string::npos);
  const json full = run_json(run + " --gpu a100_sxm4_80gb");
  CHECK_FALSE(warned(full["warnings"], "taken as"));
  // search says it once, in its own warnings
  const json search = run_json("search --model gpt3_27 --gpu a100 --gpus 8 --batch 8 --seq 2048 --predictor roofline");
  CHECK(warned(search["warnings"], "GPU 'a100' taken as A100-SXM4-80GB"));
  const json a10 = run_json(run + " --gpu a10");
  CHECK(a10["gpu"] == "A10");
  CHECK(a10["gpu_file"] == "gpus/a10.toml");
  CHECK_FALSE(warned(a10["warnings"], "taken as"));
}

TEST_CASE("gpu folders: --gpus-dir and NEUSIGHT_GPUS_PATH find user GPU files by stem and alias before the bundled ones", "[cli][gpu]") {
  temp_dir d;
  std::string tiny = ns_test::slurp(ns_test::source_dir / "tests/fixtures/gpus/tiny.toml");
  d.write("lab/lab_gpu.toml", replaced(tiny, "\"tiny1\"", "\"labby\""));
  // (its own aliases: two GPUs of one folder answering to "Tiny GPU One" are an error naming both files)
  d.write("lab/l4.toml", replaced(replaced(replaced(tiny, "\"tiny1\"", "\"not_l4\""), "\"Tiny-1\"", "\"Tiny-L4\""),
                                  "\"Tiny GPU One\"", "\"Tiny L4 One\""));
  const std::string dir = (d.path / "lab").string();
  const std::string run = "predict --model gpt3_27 --batch 1 --seq 128 --mode inference --predictor roofline";
  for (const char* cmd : {"predict", "search", "serve"}) {  // the flag where --gpu is taken
    INFO(cmd);
    CHECK(run_cli(std::string(cmd) + " --help").out.find("--gpus-dir") != std::string::npos);
  }
  // without it the alias is unknown; with it, by alias and by stem
  CHECK(run_cli(run + " --gpu labby").code != 0);
  CHECK(run_json(run + " --gpu labby --gpus-dir " + dir)["gpu"] == "Tiny-1");
  CHECK(run_json(run + " --gpu lab_gpu", "NEUSIGHT_GPUS_PATH='" + dir + "'")["gpu"] == "Tiny-1");
  // a user l4.toml hides the bundled one, and -v says so
  const auto v = run_cli(run + " --gpu l4 -v --gpus-dir " + dir);
  INFO(v.err);
  CHECK(v.code == 0);
  CHECK(v.err.find("lab/l4.toml shadows gpus/l4.toml") != std::string::npos);
  CHECK(run_json(run + " --gpu l4 --gpus-dir " + dir)["gpu"] == "Tiny-L4");
  // `neusight gpus` lists the user's files too
  CHECK(run_cli("gpus --gpus-dir " + dir).out.find("lab_gpu.toml") != std::string::npos);
  // a folder that is not there is an error, not a silent no-op
  CHECK(run_cli(run + " --gpu l4 --gpus-dir " + (d.path / "nope").string()).code == 1);
  CHECK(run_cli(run + " --gpu l4", "NEUSIGHT_GPUS_PATH='" + (d.path / "nope").string() + "'").code != 0);
}

// `neusight gpus` listed MI250 beside the whole-package parts with no mark that gpus/mi250.toml is one GCD (README said
// so since audit19). The file's optional `note` is listed below the table, in the JSON, and said when --gpu names it.
TEST_CASE("GPU file: a note says what the file is of - the MI250 is one GCD - in the listing and the run",
          "[cli][gpu]") {
  const auto list = run_cli("gpus");
  REQUIRE(list.code == 0);
  CHECK(list.out.find("note: MI250 is one GCD of the two-GCD MI250 package (GPU counts and per-GPU figures are per "
                      "GCD)") != std::string::npos);
  const json all = json::parse(run_cli("gpus --format json").out);
  size_t noted = 0;
  for (const auto& g : all)
    if (g.contains("note") && !g["note"].get<std::string>().empty()) {
      ++noted;
      CHECK(g["name"] == "MI250");
    }
  CHECK(noted == 1);
  const auto run = run_cli("predict --model gpt2_large --gpu mi250 --mode inference --batch 1 --seq 128 "
                           "--predictor roofline");
  INFO(run.err);
  REQUIRE(run.code == 0);
  CHECK(run.err.find("GPU 'mi250' is MI250 (gpus/mi250.toml): one GCD of the two-GCD MI250 package") !=
        std::string::npos);
  const auto other = run_cli("predict --model gpt2_large --gpu mi210 --mode inference --batch 1 --seq 128 "
                             "--predictor roofline");
  CHECK(other.err.find("GCD") == std::string::npos);
}
