// tests/cli/test_calibration_scope_cli.cpp — which forecasts a GPU's calibration file corrects: only those of the
// predictor it was fitted with (engine/core/calibration.h calibration_predictor_warning; a file that names none: the
// default predictor's, calibration_unnamed_warning) and of the weights it was fitted with (calibration_weights_warning), only when
// NEUSIGHT_NO_CALIBRATION does not say otherwise (read strictly: engine/cli/paths.cpp env_flag), and, on a GPU the
// shipped weights were trained on, a measurement equal to the forecast leaves it where it is (scripts/neusight/
// calibration.lua trained_on: no leave-one-GPU-out bias prior in distribution). Every test works on a copy of a GPU
// file in a temp folder: nothing is written beside gpus/.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::run_cli;
using ns_test::num;
using ns_test::run_json;
using ns_test::temp_dir;
using ns_test::warned;
namespace fs = std::filesystem;

namespace {


// A copy of the bundled GPU file `file` in `t`, as "<stem>.toml" (its calibration goes beside the copy).
std::string gpu_file_copy(const temp_dir& t, const std::string& file, const std::string& stem) {
  fs::copy_file(ns_test::source_dir / "gpus" / file, t.path / (stem + ".toml"));
  return (t.path / (stem + ".toml")).string();
}

}  // namespace

// A roofline fit of a T4 (x2.4 on linear) doubled every later neusight forecast on that GPU, silently.
TEST_CASE("calibration scope: a file fitted to another predictor's forecasts is not applied and a warning says so",
          "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_file_copy(t, "t4.toml", "t4");
  const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 4 --seq 1024";
  const double neusight = run_json(args)["latency_ms"], roofline = run_json(args + " --predictor roofline")["latency_ms"];
  const fs::path m = t.write("m.toml", "latency_ms = " + num(0.97 * neusight) + "\n");
  const json fit = run_json(args + " --predictor roofline --calibrate '" + m.string() + "'");
  const fs::path file = t.path / "t4.calibration.toml";
  REQUIRE(fs::exists(file));
  CHECK(ns_test::slurp(file).find("predictor = \"roofline\"") != std::string::npos);
  // the roofline's own forecasts apply it
  const json roof = run_json(args + " --predictor roofline");
  CHECK(roof["latency_ms"].get<double>() == Approx(fit["calibrated_ms"].get<double>()).epsilon(1e-6));
  CHECK(roof["latency_ms"].get<double>() != roofline);
  // the neusight predictor's do not, and say why
  const std::string says = file.lexically_normal().generic_string() + " was fitted to the roofline predictor's "
                           "forecasts, not applied to this neusight forecast";
  const json other = run_json(args);
  CHECK(other["latency_ms"].get<double>() == neusight);
  CHECK(other["figures"]["calibration"].is_null());
  CHECK(warned(other["warnings"], says));
  const auto text = run_cli(args);
  CHECK(text.code == 0);
  CHECK(text.out.find("calibrated       by") == std::string::npos);
  CHECK(text.err.find(says) != std::string::npos);
  // serve and search the same way
  const std::string serve = "serve --model gpt2_large --gpu '" + gpu + "' --dtype fp32 --batch 4 --input-len 256 "
                            "--output-len 8";  // a T4 has no bf16 units
  const json s = run_json(serve);
  CHECK(s["ttft_ms"].get<double>() == run_json(serve + " --no-calibration")["ttft_ms"].get<double>());
  CHECK_FALSE(s.contains("calibration"));
  CHECK(warned(s["warnings"], says));
  CHECK(warned(run_json(serve + " --sweep")["warnings"], says));
  const json srch = run_json("search --model gpt2_large --gpu '" + gpu + "' --seq 512 --gpus 2 --batch 2");
  CHECK(warned(srch["warnings"], says));
  CHECK_FALSE(srch.contains("calibration"));
}

namespace {

// `text` without its line `line` (which it must hold).
std::string without_line(std::string text, const std::string& line) {
  const auto at = text.find(line + "\n");
  REQUIRE(at != std::string::npos);
  return text.erase(at, line.size() + 1);
}

// A weights root of the bundled NVIDIA families (links) and error table, less the families named in `drop`.
fs::path weights_copy(const temp_dir& t, const std::string& name, const std::vector<std::string>& drop = {}) {
  const fs::path root = t.path / name;
  fs::create_directories(root / "nvidia");
  for (const auto& e : fs::directory_iterator(ns_test::source_dir / "weights" / "nvidia"))
    if (std::find(drop.begin(), drop.end(), e.path().filename().string()) == drop.end())
      fs::create_symlink(e.path(), root / "nvidia" / e.path().filename());
  return root;
}

}  // namespace

// Every file --calibrate writes names its predictor; one without the key (written by hand, or edited) applied under
// every predictor, silently: a neusight fit corrected roofline forecasts.
TEST_CASE("calibration scope: a file that names no predictor applies under the default predictor only and says so",
          "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_file_copy(t, "t4.toml", "t4");
  const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 4 --seq 1024";
  const double neusight = run_json(args)["latency_ms"], roofline = run_json(args + " --predictor roofline")["latency_ms"];
  const fs::path m = t.write("m.toml", "latency_ms = " + num(1.2 * neusight) + "\n");
  const json fit = run_json(args + " --calibrate '" + m.string() + "'");
  const fs::path file = t.path / "t4.calibration.toml";
  t.write("t4.calibration.toml", without_line(ns_test::slurp(file), "predictor = \"neusight\""));
  const std::string src = file.lexically_normal().generic_string();
  // the default predictor applies it, and warns that it names none
  const json applied = run_json(args);
  CHECK(applied["latency_ms"].get<double>() == Approx(fit["calibrated_ms"].get<double>()).epsilon(1e-9));
  CHECK(warned(applied["warnings"], src + " names no predictor: applied as fitted to the default neusight predictor's"));
  CHECK(ns_test::warnings_with(applied["warnings"], "names no predictor") == 1);  // once
  const auto text = run_cli(args);
  CHECK(text.err.find("names no predictor") != std::string::npos);
  // another predictor skips it as a file of the neusight predictor's
  const json other = run_json(args + " --predictor roofline");
  CHECK(other["latency_ms"].get<double>() == roofline);
  CHECK(other["figures"]["calibration"].is_null());
  CHECK(warned(other["warnings"], src + " was fitted to the neusight predictor's forecasts (it names no predictor"));
  // serve alike
  const std::string serve = "serve --model gpt2_large --gpu '" + gpu + "' --dtype fp32 --batch 4 --input-len 256 "
                            "--output-len 8";
  CHECK(warned(run_json(serve)["warnings"], "names no predictor: applied"));
  CHECK(warned(run_json(serve + " --predictor roofline")["warnings"], "was fitted to the neusight predictor's forecasts"));
  // a roofline fit without the key: read as the neusight predictor's too (what it names decides, not what it holds)
  REQUIRE(run_cli(args + " --predictor roofline --calibrate '" + m.string() + "'").code == 0);
  t.write("t4.calibration.toml", without_line(ns_test::slurp(file), "predictor = \"roofline\""));
  CHECK(run_json(args + " --predictor roofline")["latency_ms"].get<double>() == roofline);
}

// A calibration fitted with --weights DIR corrected the bundled weights' forecasts (and the other way round): its
// factors are a ratio to those weights' kernel times.
TEST_CASE("calibration scope: a file fitted with other weights is not applied and a warning says so",
          "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_file_copy(t, "t4.toml", "t4");
  const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 4 --seq 1024";
  // the same weights in another folder, and weights without the fp8 family (another identity; an fp32 forecast of
  // gpt2_large prices no fp8 kernel, so both forecast alike)
  const fs::path same = weights_copy(t, "same"), other = weights_copy(t, "other", {"gemm_fp8"});
  const std::string with_same = args + " --weights '" + same.string() + "'",
                    with_other = args + " --weights '" + other.string() + "'";
  const double before = run_json(args)["latency_ms"];
  REQUIRE(run_json(with_other)["latency_ms"].get<double>() == before);
  const fs::path m = t.write("m.toml", "latency_ms = " + num(1.2 * before) + "\n");
  const double calibrated = run_json(args + " --calibrate '" + m.string() + "'")["calibrated_ms"];
  const fs::path file = t.path / "t4.calibration.toml";
  const std::string src = file.lexically_normal().generic_string();
  CHECK(ns_test::slurp(file).find("\nweights = \"") != std::string::npos);
  // the bundled weights, and a copy of them, apply it
  CHECK(run_json(args)["latency_ms"].get<double>() == Approx(calibrated).epsilon(1e-9));
  const json copy = run_json(with_same);
  CHECK(copy["latency_ms"].get<double>() == Approx(calibrated).epsilon(1e-9));
  CHECK_FALSE(warned(copy["warnings"], "fitted to the forecasts of"));
  // other weights do not, and say why
  const std::string says = src + " was fitted to the forecasts of the bundled weights, not applied to this forecast "
                           "with the weights of " + other.lexically_normal().generic_string();
  const json skipped = run_json(with_other);
  CHECK(skipped["latency_ms"].get<double>() == before);
  CHECK(skipped["figures"]["calibration"].is_null());
  CHECK(warned(skipped["warnings"], says));
  CHECK(run_cli(with_other).err.find(says) != std::string::npos);
  // a file without the key is the bundled weights'
  const std::string keyless = ns_test::slurp(file);
  const auto at = keyless.find("\nweights = \"");
  t.write("t4.calibration.toml", keyless.substr(0, at + 1) + keyless.substr(keyless.find('\n', at + 1) + 1));
  CHECK(run_json(with_same)["latency_ms"].get<double>() == Approx(calibrated).epsilon(1e-9));
  const json keyless_other = run_json(with_other);
  CHECK(keyless_other["latency_ms"].get<double>() == before);
  CHECK(warned(keyless_other["warnings"], "fitted to the forecasts of the bundled weights (it names no `weights`)"));
  // fitted with the other weights: the bundled ones skip it, those weights apply it
  REQUIRE(run_cli(with_other + " --calibrate '" + m.string() + "'").code == 0);
  CHECK(run_json(with_other)["latency_ms"].get<double>() == Approx(calibrated).epsilon(1e-9));
  const json bundled = run_json(args);
  CHECK(bundled["latency_ms"].get<double>() == before);
  CHECK(warned(bundled["warnings"], src + " was fitted to the forecasts of other weights (identity "));
  // a roofline fit reads no weights: every weights root applies it
  REQUIRE(run_cli(args + " --predictor roofline --calibrate '" + m.string() + "'").code == 0);
  CHECK(ns_test::slurp(file).find("\nweights = ") == std::string::npos);
  const json roof = run_json(with_other + " --predictor roofline");
  CHECK_FALSE(roof["figures"]["calibration"].is_null());
  CHECK_FALSE(warned(roof["warnings"], "fitted to the forecasts of"));
}

TEST_CASE("calibration scope: a trace calibration of another predictor is not applied either", "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_file_copy(t, "h200_sxm_141gb.toml", "h200");
  const std::string trace = (ns_test::source_dir / "tests/fixtures/traces/hf/gpt2-fp32-train.json").string();
  const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 4 --seq 1024";
  const double before = run_json(args)["latency_ms"];
  REQUIRE(run_cli("predict --gpu '" + gpu + "' --predictor roofline --calibrate '" + trace + "'").code == 0);
  const json after = run_json(args);
  CHECK(after["latency_ms"].get<double>() == before);
  CHECK(warned(after["warnings"], "was fitted to the roofline predictor's forecasts"));
  CHECK(run_json(args + " --predictor roofline")["latency_ms"].get<double>() !=
        run_json(args + " --predictor roofline --no-calibration")["latency_ms"].get<double>());
}

// tester5: a trace of several profiled steps printed the measured time of all of them as if it were one step's; the
// factors (ratios) were right. The times shown (table and JSON) are per step, and the step count is said.
TEST_CASE("calibration from a trace: the measured and forecast times are per profiled step", "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_file_copy(t, "h200_sxm_141gb.toml", "h200");
  const auto fixture = ns_test::source_dir / "tests/fixtures/traces/hf/gpt2-fp32-train";
  const std::string trace = ns_test::slurp(fixture.string() + ".json");
  const std::string meta = ns_test::slurp(fixture.string() + ".meta.json");
  REQUIRE(meta.find("\"steps\": 1,") != std::string::npos);
  // the same ops, said to be two steps' (scripts/collect/hf_trace.py's sidecar metadata)
  const std::string one = t.write("one.json", trace).string(), two = t.write("two.json", trace).string();
  t.write("one.meta.json", meta);
  t.write("two.meta.json", ns_test::replace_all(meta, "\"steps\": 1,", "\"steps\": 2,"));
  const std::string args = "predict --gpu '" + gpu + "' --predictor roofline --calibrate ";
  const json j1 = run_json(args + "'" + one + "'"), j2 = run_json(args + "'" + two + "'");
  CHECK(j1["steps"] == 1);
  CHECK(j2["steps"] == 2);
  CHECK_THAT(j2["measured_ms"].get<double>(), Catch::Matchers::WithinRel(j1["measured_ms"].get<double>() / 2, 1e-12));
  CHECK_THAT(j2["forecast_ms"].get<double>(), Catch::Matchers::WithinRel(j1["forecast_ms"].get<double>() / 2, 1e-12));
  CHECK(j2["factors"] == j1["factors"]);
  for (const auto& [fam, v] : j2["families"].items()) {
    INFO(fam);
    CHECK_THAT(v["measured_ms"].get<double>(),
               Catch::Matchers::WithinRel(j1["families"][fam]["measured_ms"].get<double>() / 2, 1e-12));
  }
  const auto table = run_cli(args + "'" + two + "'");
  REQUIRE(table.code == 0);
  CHECK_THAT(table.out, Catch::Contains(" ops over 2 profiled steps)\n"));
  char per_step[64];
  std::snprintf(per_step, sizeof per_step, "measured %.4g ms of kernel time per step, ", j2["measured_ms"].get<double>());
  CHECK_THAT(table.out, Catch::Contains(per_step));
  CHECK_THAT(table.out, Catch::Contains("(the trace's 2 steps: "));
  CHECK_THAT(run_cli(args + "'" + one + "'").out, !Catch::Contains("steps"));
}

// NEUSIGHT_NO_CALIBRATION=false (or no, off, a typo) switched the calibration off: anything but "" and "0" did.
TEST_CASE("calibration scope: NEUSIGHT_NO_CALIBRATION is read strictly", "[cli][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_file_copy(t, "t4.toml", "t4");
  const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 4 --seq 1024";
  const double before = run_json(args)["latency_ms"];
  REQUIRE(run_cli(args + " --calibrate '" + t.write("m.toml", "latency_ms = 2000\n").string() + "'").code == 0);
  const double calibrated = run_json(args)["latency_ms"];
  REQUIRE(calibrated != before);
  for (const char* on : {"1", "true", "yes", "on", "TRUE", "Yes"}) {
    INFO(on);
    CHECK(run_json(args, std::string("NEUSIGHT_NO_CALIBRATION=") + on)["latency_ms"].get<double>() == before);
  }
  for (const char* off : {"", "0", "false", "no", "off", "False", "OFF"}) {
    INFO(off);
    CHECK(run_json(args, std::string("NEUSIGHT_NO_CALIBRATION=") + off)["latency_ms"].get<double>() == calibrated);
  }
  for (const char* bad : {"treu", "2", "y", "disable"}) {
    INFO(bad);
    const auto r = run_cli(args, std::string("NEUSIGHT_NO_CALIBRATION=") + bad);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find(std::string("NEUSIGHT_NO_CALIBRATION=") + bad + ": expected 1, true, yes or on") !=
          std::string::npos);
  }
  // the same rule for NEUSIGHT_NO_CACHE (results are the same either way; a typo is still an error)
  CHECK(run_cli(args, "NEUSIGHT_NO_CACHE=treu").err.find("NEUSIGHT_NO_CACHE=treu: expected") != std::string::npos);
  CHECK(run_json(args, "NEUSIGHT_NO_CACHE=yes")["latency_ms"].get<double>() == calibrated);
}

// The prior's mean is the leave-one-GPU-out folds' bias: what a GPU the weights never saw tends to be off by. On a
// GPU the weights were trained on it moved a measurement equal to the forecast +1.1-1.4 %.
TEST_CASE("calibration scope: on a training GPU a measurement equal to the forecast leaves it there",
          "[cli][calibrate]") {
  temp_dir t;
  for (const auto& [file, stem] : std::vector<std::pair<std::string, std::string>>{
           {"t4.toml", "t4"}, {"v100_pcie_32gb.toml", "v100"}, {"a100_pcie_40gb.toml", "a100"},
           // the AMD weights' own training GPUs (their manifests' training.gpus), not the borrowed nvidia table's:
           // before, their prior was the nvidia folds' bias (MI210: a measurement equal to the forecast moved it)
           {"mi100.toml", "mi100"}, {"mi210.toml", "mi210"}}) {
    INFO(stem);
    const std::string gpu = gpu_file_copy(t, file, stem);
    const std::string args = "predict --model gpt2_large --gpu '" + gpu + "' --mode inference --batch 4 --seq 1024";
    const double before = run_json(args)["latency_ms"];
    const json fit = run_json(args + " --calibrate '" + t.write("eq.toml", "latency_ms = " + num(before) + "\n").string() + "'");
    CHECK(fit["calibrated_ms"].get<double>() == Approx(before).epsilon(1e-9));
    for (const auto& [fam, c] : fit["factors"].items()) {
      INFO(fam);
      CHECK(c.get<double>() == Approx(1).epsilon(1e-9));
    }
    // a measurement 3 % below: the forecast moves the share of the deviation the fit says it takes as bias
    const json lower =
        run_json(args + " --calibrate '" + t.write("lo.toml", "latency_ms = " + num(0.97 * before) + "\n").string() + "'");
    CHECK(lower["calibrated_ms"].get<double>() < before);
    CHECK(lower["calibrated_ms"].get<double>() > 0.97 * before);
    for (const auto& [fam, c] : lower["factors"].items()) {
      INFO(fam);
      CHECK(c.get<double>() <= 1);  // faster than forecast: no family slower
    }
  }
}
