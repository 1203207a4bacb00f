// tests/cli/test_serve_calibrate_cli.cpp — `neusight serve --batch … --calibrate FILE` (engine/cli/serve_cmd.cpp,
// scripts/neusight/serve.lua calibration_inputs, scripts/neusight/calibration.lua fit_serve): the factors reproduce
// what they were fitted to when the run is forecast again, later serve and predict runs on the GPU file use them, one
// measurement is predict's fit, each phase is calibrated from its own measurement only ([factors] and
// [decode_factors]), and bad measurements are refused with the place, writing nothing. Every test works on
// a copy of a GPU file in a temp folder: nothing is written beside gpus/.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_json.h"
#include "test_util.h"

using json = nlohmann::json;
using ns_test::override_dir;
using ns_test::run_cli;
using ns_test::num;
using ns_test::run_json;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {


// A copy of the H100 file in `t` (its calibration goes beside the copy).
std::string gpu_copy(const temp_dir& t) {
  fs::copy_file(ns_test::source_dir / "gpus" / "h100_sxm5_80gb.toml", t.path / "h100.toml");
  return (t.path / "h100.toml").string();
}

}  // namespace

TEST_CASE("serve calibrate: tpot_ms alone - the re-forecast reproduces the fit and later serve and predict runs use it",
          "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string run = "serve --model llama3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 64";
  const json raw = run_json(run);
  const double ttft = raw["ttft_ms"], tpot = raw["tpot_ms"];
  const fs::path m = t.write("m.toml", "tpot_ms = " + num(1.25 * tpot) + "\nnote = \"vLLM benchmark_latency\"\n");
  const json fit = run_json(run + " --calibrate '" + m.string() + "'");
  const fs::path file = t.path / "h100.calibration.toml";
  REQUIRE(fs::exists(file));
  CHECK(fit["calibration_file"] == file.lexically_normal().generic_string());
  CHECK(fit["forecast_tpot_ms"].get<double>() == Approx(tpot).epsilon(1e-12));
  CHECK(fit["forecast_ttft_ms"].get<double>() == Approx(ttft).epsilon(1e-12));
  CHECK(fit["measured_ttft_ms"].is_null());
  CHECK(fit["model"] == "llama3_8b");
  const double cal_tpot = fit["calibrated_tpot_ms"], cal_ttft = fit["calibrated_ttft_ms"];
  CHECK(cal_tpot > 1.05 * tpot);                     // towards the measurement …
  CHECK(cal_tpot <= 1.25 * tpot * (1 + 1e-9));       // … not past it
  CHECK(fit["factors"].contains("gemm_tc16"));
  CHECK(fit["factors"].contains("attention_decode"));
  CHECK(fit["decode_factors"] == fit["factors"]);  // the TPOT's fit, for decode steps and (no TTFT) the rest
  // the file keeps what was measured
  const std::string text = ns_test::slurp(file);
  CHECK(text.find("measured_tpot_ms = ") != std::string::npos);
  CHECK(text.find("note = \"vLLM benchmark_latency\"") != std::string::npos);
  CHECK(text.find("workload = \"serve llama3_8b bf16 static batch 8, input 512, output 64 tokens, launch graph, "
                  "kernels megatron\"") !=
        std::string::npos);
  // the same run forecast again applies the factors: both phases are what the fit said
  const json after = run_json(run);
  CHECK(after["tpot_ms"].get<double>() == Approx(cal_tpot).epsilon(1e-7));
  CHECK(after["ttft_ms"].get<double>() == Approx(cal_ttft).epsilon(1e-7));
  CHECK(after["calibration"] == file.string());
  CHECK(after["decode_calibrated"] == true);
  CHECK_FALSE(run_json(run + " --no-calibration").contains("decode_calibrated"));
  CHECK(run_json(run + " --no-calibration")["tpot_ms"].get<double>() == tpot);
  // another batch and a predict of a decode step on the GPU file move too
  const std::string other = "serve --model llama3_8b --gpu '" + gpu + "' --batch 32 --input-len 1024 --output-len 16";
  CHECK(run_json(other)["tpot_ms"].get<double>() > 1.05 * run_json(other + " --no-calibration")["tpot_ms"].get<double>());
  const std::string decode = "predict --model llama3_8b --gpu '" + gpu + "' --mode decode --batch 16 --context 256 "
                             "--dtype bf16 --launch graph";
  const json p = run_json(decode);
  CHECK(p["latency_ms"].get<double>() > 1.05 * run_json(decode + " --no-calibration")["latency_ms"].get<double>());
  CHECK(p["figures"]["calibration"] == file.lexically_normal().generic_string());
  // the file names the measured model: the same model says nothing more, another one warns (serve and predict)
  CHECK(text.find("model = \"llama3_8b\"") != std::string::npos);
  CHECK(text.find("model_params = " + num(raw["params"].get<double>()) + "\n") != std::string::npos);  // tp 1: its size
  const std::string from_another = "from a measurement of llama3_8b, not of qwen3_8b";
  REQUIRE(p.contains("warnings"));
  CHECK(p["warnings"].dump().find("from a measurement of") == std::string::npos);
  const json same = run_json(other);
  REQUIRE(same.contains("warnings"));
  CHECK(same["warnings"].dump().find("from a measurement of") == std::string::npos);
  const json qwen = run_json("serve --model qwen3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 16");
  CHECK(qwen["warnings"].dump().find(from_another) != std::string::npos);
  const json qwen_p = run_json("predict --model qwen3_8b --gpu '" + gpu + "' --mode decode --batch 16 --context 256 "
                               "--dtype bf16 --launch graph");
  CHECK(qwen_p["warnings"].dump().find(from_another) != std::string::npos);
  const std::string search = " --gpu '" + gpu + "' --seq 512 --dtype bf16 --gpus 2 --batch 2";
  const json qwen_s = run_json("search --model qwen3_8b" + search);
  CHECK(qwen_s["calibration"] == file.string());
  CHECK(qwen_s["warnings"].dump().find(from_another) != std::string::npos);
  const json llama_s = run_json("search --model llama3_8b" + search);
  REQUIRE(llama_s.contains("warnings"));
  CHECK(llama_s["warnings"].dump().find("from a measurement of") == std::string::npos);
  // search tells models by their sizes as predict and serve do: the same model under another name says nothing
  t.write("h100.calibration.toml", ns_test::replace_all(text, "model = \"llama3_8b\"", "model = \"Meta-Llama-3-8B\""));
  CHECK(run_json("search --model llama3_8b" + search)["warnings"].dump().find("from a measurement of") == std::string::npos);
  CHECK(run_json("search --model qwen3_8b" + search)["warnings"].dump().find("from a measurement of Meta-Llama-3-8B") !=
        std::string::npos);
  t.write("h100.calibration.toml", text);
  // a sweep says it once, in JSON and in its table
  const std::string sweep = "serve --sweep --model qwen3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 16";
  CHECK(run_json(sweep)["warnings"].dump().find(from_another) != std::string::npos);
  CHECK(run_cli(sweep).out.find("warning: " + file.string() + " calibrates") != std::string::npos);
  // refitting starts from the raw forecast, not the calibrated one
  CHECK(run_json(run + " --calibrate '" + m.string() + "'")["forecast_tpot_ms"].get<double>() ==
        Approx(tpot).epsilon(1e-12));
  // the table names the file and the calibrated forecast
  const auto table = run_cli(run + " --calibrate '" + m.string() + "'");
  CHECK(table.code == 0);
  CHECK(table.out.find("written to " + file.lexically_normal().generic_string()) != std::string::npos);
  CHECK(table.out.find("calibrated forecast of this run: TTFT ") != std::string::npos);
}

TEST_CASE("serve calibrate: one measurement is predict's fit of that phase (the same factors)", "[cli][serve][calibrate]") {
  // with two output tokens the TPOT is one decode step at the prompt's length: predict's decode workload exactly (in
  // serve's kernels, Megatron-LM's fused set: predict --kernels megatron)
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string serve = "serve --model llama3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 2";
  const std::string predict = "predict --model llama3_8b --gpu '" + gpu + "' --mode decode --batch 8 --context 512 "
                              "--dtype bf16 --launch graph --kernels megatron";
  const double tpot = run_json(serve)["tpot_ms"];
  REQUIRE(run_json(predict)["latency_ms"].get<double>() == Approx(tpot).epsilon(1e-12));
  const json a = run_json(serve + " --calibrate '" + t.write("a.toml", "tpot_ms = " + num(0.8 * tpot) + "\n").string() + "'");
  const json b =
      run_json(predict + " --calibrate '" + t.write("b.toml", "latency_ms = " + num(0.8 * tpot) + "\n").string() + "'");
  REQUIRE(a["factors"].size() == b["factors"].size());
  for (const auto& [fam, x] : b["factors"].items()) CHECK(a["factors"][fam].get<double>() == Approx(x.get<double>()).epsilon(1e-12));
  // (to rounding: a one-device plan's calibrated latency is its timeline's sum, serve's the phase's kernels')
  CHECK(a["calibrated_tpot_ms"].get<double>() == Approx(b["calibrated_ms"].get<double>()).epsilon(1e-9));
}

TEST_CASE("serve calibrate: ttft_ms and tpot_ms without an error table - each phase's factors reproduce its own",
          "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string run = "serve --model llama3_8b --gpu '" + gpu + "' --batch 4 --input-len 256 --output-len 32 "
                          "--predictor roofline";
  const json raw = run_json(run);
  const double ttft = raw["ttft_ms"], tpot = raw["tpot_ms"];
  const fs::path m = t.write("m.toml", "ttft_ms = " + num(1.4 * ttft) + "\ntpot_ms = " + num(1.2 * tpot) + "\n");
  const json fit = run_json(run + " --calibrate '" + m.string() + "'");
  CHECK(fit["calibrated_ttft_ms"].get<double>() == Approx(1.4 * ttft).epsilon(1e-9));
  CHECK(fit["calibrated_tpot_ms"].get<double>() == Approx(1.2 * tpot).epsilon(1e-9));
  // each phase its own factors: the TTFT's fit in [factors], the TPOT's in [decode_factors]
  REQUIRE(fit["decode_factors"].contains("gemm_tc16"));
  CHECK(fit["factors"]["gemm_tc16"].get<double>() > 1.05 * fit["decode_factors"]["gemm_tc16"].get<double>());
  const json after = run_json(run);
  CHECK(after["ttft_ms"].get<double>() == Approx(1.4 * ttft).epsilon(1e-7));
  CHECK(after["tpot_ms"].get<double>() == Approx(1.2 * tpot).epsilon(1e-7));
}

TEST_CASE("serve calibrate: with the error table each measurement moves its own phase towards it",
          "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string run = "serve --model llama3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 64";
  const json raw = run_json(run);
  const double ttft = raw["ttft_ms"], tpot = raw["tpot_ms"];
  const fs::path m = t.write("m.toml", "ttft_ms = " + num(1.1 * ttft) + "\ntpot_ms = " + num(1.2 * tpot) + "\n");
  const json fit = run_json(run + " --calibrate '" + m.string() + "'");
  const double c1 = fit["calibrated_ttft_ms"], c2 = fit["calibrated_tpot_ms"];
  CHECK(c1 > ttft);
  CHECK(c2 > tpot);
  CHECK(c2 < 1.2 * tpot * (1 + 1e-9));
  const json after = run_json(run);
  CHECK(after["ttft_ms"].get<double>() == Approx(c1).epsilon(1e-7));
  CHECK(after["tpot_ms"].get<double>() == Approx(c2).epsilon(1e-7));
  // the phases are fitted apart: a TTFT below the forecast and a TPOT above it each move their own phase their way
  // (one factor set for both could not: the shared families pulled apart, one phase moved away from its measurement)
  // (0.85: 0.7 of the forecast TTFT is below its roofline floor, which the fit warns of)
  t.write("m.toml", "ttft_ms = " + num(0.85 * ttft) + "\ntpot_ms = " + num(1.2 * tpot) + "\n");
  const json apart = run_json(run + " --calibrate '" + m.string() + "'");  // against the raw forecast
  CHECK(apart["calibrated_ttft_ms"].get<double>() < ttft);
  CHECK(apart["calibrated_tpot_ms"].get<double>() > tpot);
  CHECK(apart["warnings"].empty());
}

// A TTFT measurement calibrates the prefill, not decode steps: leave one GPU out, the prefill's bias (compute-bound
// GEMMs) applied to decode steps (weight and KV-cache streaming) made TPOT worse, 5.6 -> 10.7 % (weights/ACCURACY.md).
// The file's [decode_factors] is empty then, and every decode step (serve's, predict --mode decode) keeps its forecast
// while the prefill and other forecasts take [factors]. predict --calibrate writes [decode_factors] the same way: its
// factors for a decode step's measurement, none for any other; a file without the table applies [factors] to all.
TEST_CASE("serve calibrate: ttft_ms alone leaves decode steps uncalibrated - and so does predict's of another mode",
          "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string run = "serve --model llama3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 64";
  const std::string decode = "predict --model llama3_8b --gpu '" + gpu + "' --mode decode --batch 16 --context 256 "
                             "--dtype bf16 --launch graph";
  const std::string prefill = "predict --model llama3_8b --gpu '" + gpu + "' --mode prefill --batch 2 --seq 256 "
                              "--dtype bf16 --launch graph";
  const json raw = run_json(run);
  const double ttft = raw["ttft_ms"], tpot = raw["tpot_ms"];
  const double raw_decode = run_json(decode)["latency_ms"], raw_prefill = run_json(prefill)["latency_ms"];
  const fs::path m = t.write("m.toml", "ttft_ms = " + num(1.3 * ttft) + "\n");
  const json fit = run_json(run + " --calibrate '" + m.string() + "'");
  CHECK(fit["decode_factors"].empty());
  CHECK_FALSE(fit["factors"].empty());
  CHECK(fit["calibrated_tpot_ms"].get<double>() == Approx(tpot).epsilon(1e-12));
  CHECK(fit["calibrated_ttft_ms"].get<double>() > 1.05 * ttft);
  const fs::path file = t.path / "h100.calibration.toml";
  CHECK(ns_test::slurp(file).find("[decode_factors]") != std::string::npos);
  const json after = run_json(run);
  CHECK(after["tpot_ms"].get<double>() == tpot);
  CHECK(after["decode_calibrated"] == false);  // and the table says whose kernel times it corrects
  CHECK(run_cli(run).out.find("(the prefill's only: no decode step was measured;") != std::string::npos);
  CHECK(after["ttft_ms"].get<double>() == Approx(fit["calibrated_ttft_ms"].get<double>()).epsilon(1e-7));
  const json d = run_json(decode);
  CHECK(d["latency_ms"].get<double>() == raw_decode);
  CHECK(d["figures"]["calibration"].is_null());  // nothing applied: not said to be calibrated
  CHECK(run_cli(decode).out.find("calibrated       by") == std::string::npos);
  // nor warned of as another model's calibration (it corrects nothing here)
  const json q = run_json("predict --model qwen3_8b --gpu '" + gpu + "' --mode decode --batch 16 --context 256 "
                          "--dtype bf16 --launch graph");
  CHECK(q["warnings"].dump().find("from a measurement of") == std::string::npos);
  CHECK(run_json(prefill)["latency_ms"].get<double>() > 1.05 * raw_prefill);
  // --rate: its decode steps keep their forecast too, its prefills move
  const std::string rate = "serve --model llama3_8b --gpu '" + gpu + "' --rate 2 --requests 40 --input-len 512 "
                           "--output-len 64 --seed 1";
  const json r_cal = run_json(rate), r_raw = run_json(rate + " --no-calibration");
  CHECK(r_cal["tpot_ms"]["p50"].get<double>() == Approx(r_raw["tpot_ms"]["p50"].get<double>()).epsilon(0.02));
  CHECK(r_cal["ttft_ms"]["p50"].get<double>() > 1.05 * r_raw["ttft_ms"]["p50"].get<double>());
  // predict --calibrate the same way: a decode step's measurement calibrates decode steps (and the rest), a prefill's
  // only the rest
  fs::remove(file);
  const fs::path pm = t.write("p.toml", "latency_ms = " + num(1.3 * raw_decode) + "\n");
  const json pd = run_json(decode + " --calibrate '" + pm.string() + "'");
  CHECK(pd["decode_factors"] == pd["factors"]);
  CHECK(run_json(decode)["latency_ms"].get<double>() > 1.05 * raw_decode);
  CHECK(run_json(prefill)["latency_ms"].get<double>() > 1.05 * raw_prefill);
  fs::remove(file);
  const fs::path pp = t.write("pp.toml", "latency_ms = " + num(1.3 * raw_prefill) + "\n");
  const json pf = run_json(prefill + " --calibrate '" + pp.string() + "'");
  CHECK(pf["decode_factors"].empty());
  CHECK_FALSE(pf["factors"].empty());
  CHECK(run_json(decode)["latency_ms"].get<double>() == raw_decode);
  CHECK(run_json(prefill)["latency_ms"].get<double>() > 1.05 * raw_prefill);
  CHECK(run_cli(prefill + " --calibrate '" + pp.string() + "'").out.find("decode steps: not calibrated") !=
        std::string::npos);
  // a file without [decode_factors] (written before they existed, or by hand): its factors apply to decode steps too
  const std::string text = ns_test::slurp(file);
  t.write("h100.calibration.toml", text.substr(0, text.find("\n[decode_factors]")) + "\n");
  CHECK(ns_test::slurp(file).find("\n[decode_factors]") == std::string::npos);
  CHECK(run_json(decode)["latency_ms"].get<double>() > 1.05 * raw_decode);
}

TEST_CASE("serve calibrate: bad measurements and runs are refused with the place and nothing is written",
          "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string run = "serve --model llama3_8b --gpu '" + gpu + "' --input-len 128 --predictor roofline";
  const fs::path file = t.path / "h100.calibration.toml";
  const fs::path out = t.path / "out.json";
  auto fails = [&](const std::string& text, const std::string& flags, int code, const std::string& says) {
    const fs::path m = t.write("m.toml", text);
    const auto r = run_cli(run + " " + flags + " --calibrate '" + m.string() + "' -o '" + out.string() + "'");
    INFO(text << "\n" << flags << "\n" << r.err);
    CHECK(r.code == code);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK_FALSE(fs::exists(file));
    CHECK_FALSE(fs::exists(out));
  };
  fails("note = \"x\"\n", "--batch 2 --output-len 8", 1, "m.toml: needs ttft_ms (the measured prefill of the batch) or tpot_ms");
  fails("latency_ms = 3\n", "--batch 2 --output-len 8", 1, "m.toml:1:1: unknown key 'latency_ms' (a serve measurement has ttft_ms, "
                                            "tpot_ms and note; latency_ms is predict --calibrate's)");
  fails("ttft_ms = 3\ntpot = 1\n", "--batch 2 --output-len 8", 1, "m.toml:2:1: unknown key 'tpot' (did you mean 'tpot_ms'?)");
  fails("ttft_ms = -3\n", "--batch 2 --output-len 8", 1, "m.toml:1:11: ttft_ms must be a time of 1e-6 to 1e9 ms (got -3)");
  fails("tpot_ms = \"fast\"\n", "--batch 2 --output-len 8", 1, "m.toml:1:11: tpot_ms must be a time of 1e-6 to 1e9 ms (got a string)");
  fails("ttft_ms = inf\n", "--batch 2 --output-len 8", 1, "m.toml:1:11: ttft_ms must be a time of 1e-6 to 1e9 ms (got inf)");
  fails("ttft_ms = 3\nnote = 4\n", "--batch 2 --output-len 8", 1, "m.toml:2:8: note must be a string");
  fails("ttft_ms = 3\n", "--rate 2 --output-len 8", 1, "--calibrate needs a static batch (--batch N)");
  fails("ttft_ms = 3\n", "--batch 2,4 --sweep --output-len 8", 2, "--sweep excludes --calibrate");
  fails("ttft_ms = 3\n", "--batch 2 --no-calibration --output-len 8", 2, "excludes");
  // physics first (tester8 #5): a prefill in a nanosecond is below its roofline floor, whatever else it is
  fails("ttft_ms = 1e-6\n", "--batch 2 --output-len 8", 1, "below the floor by more than the band allows");
  fails("tpot_ms = 3\n", "--batch 2 --output-len 1", 1,
        "m.toml: tpot_ms given, but the run has no decode step (--output-len 1");
  // the rule's own message for the user is whole: no internal context line under it (it named the rule's file, once
  // wrongly as scripts/neusight.calibration.lua; tester8 #7: session.cpp figures_call, lua_state.cpp ns_call_said)
  {
    const fs::path m = t.write("m.toml", "tpot_ms = 3\n");
    const auto r = run_cli(run + " --batch 2 --output-len 1 --calibrate '" + m.string() + "'");
    CHECK(r.code == 1);
    CHECK(r.err.find("\n    in ") == std::string::npos);
    CHECK(r.err.find("calibration.lua") == std::string::npos);
  }
  // a report that cannot be written (-o into a missing folder): no calibration file either (it was written first)
  for (const std::string& cmd : {run + " --batch 2 --output-len 8", "predict --model gpt2_med --gpu '" + gpu +
                                                                       "' --batch 2 --seq 64 --mode inference"}) {
    const fs::path m = t.write("m.toml", cmd.rfind("serve", 0) == 0 ? "tpot_ms = 6\n" : "latency_ms = 3\n");
    const fs::path missing = t.path / "no-such-folder" / "out.json";
    const auto r = run_cli(cmd + " --calibrate '" + m.string() + "' -o '" + missing.string() + "'");
    INFO(cmd << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("out.json: cannot write") != std::string::npos);
    CHECK_FALSE(fs::exists(file));
    const auto ok = run_cli(cmd + " --calibrate '" + m.string() + "' -o '" + out.string() + "'");  // the same, writable
    CHECK(ok.code == 0);
    CHECK(fs::exists(file));
    fs::remove(file), fs::remove(out);
  }
}

// A --scripts serve.lua whose calibration_inputs gives a field serve --calibrate reads in another type is told which
// field, the type it must be and the function (a std::bad_variant_access used to end the run), writing nothing.
TEST_CASE("serve calibrate: a scripts serve.lua calibration_inputs field of the wrong type is named",
          "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const fs::path m = t.write("m.toml", "ttft_ms = 3\n");
  const fs::path out = t.path / "out.json";
  const std::string run = "serve --model llama3_8b --gpu '" + gpu + "' --batch 2 --input-len 128 --output-len 8 "
                          "--predictor roofline --calibrate '" + m.string() + "' -o '" + out.string() + "'";
  int n = 0;
  for (const auto& [set, says] : std::vector<std::pair<std::string, std::string>>{
           {"model = 5", "'model' must be a string (got a number)"},
           {"workload = true", "'workload' must be a string (got a boolean)"},
           {"ttft_s = 'x'", "'ttft_s' must be a number (got a string)"},
           {"model_params = false", "'model_params' must be a number (got a boolean)"}}) {
    const auto r = run_cli(run + override_dir(t, "s" + std::to_string(n++), "serve",
                                              "local calibration_inputs = M.calibration_inputs\n"
                                              "M.calibration_inputs = function(...)\n"
                                              "  local r = calibration_inputs(...)\n"
                                              "  r." + set + "\n"
                                              "  return r\n"
                                              "end\n"));
    INFO(set << "\n" << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("neusight: scripts/neusight/serve.lua: calibration_inputs: " + says) != std::string::npos);
    CHECK_FALSE(fs::exists(t.path / "h100.calibration.toml"));
    CHECK_FALSE(fs::exists(out));
  }
}

// fit_serve says whether it fitted a decode step's factors (decode_fitted), and that is what the engine writes: a
// calibration.lua that fitted none for a measured TPOT leaves decode steps uncalibrated (an empty [decode_factors]),
// not its [factors] applied to them as an older one's without the field; one that says it fitted them but gave none,
// or the other way round, is refused, nothing written.
TEST_CASE("serve calibrate: fit_serve's decode_fitted decides the decode steps' factors", "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string serve = "serve --model llama3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 64";
  const json raw = run_json(serve);
  const fs::path m = t.write("m.toml", "tpot_ms = " + num(1.25 * raw["tpot_ms"].get<double>()) + "\n");
  const fs::path file = t.path / "h100.calibration.toml";
  // fit_serve's fields without its decode_factor.<family> ones, decode_fitted set to `said`
  const auto fitted = [&](const std::string& dir, const std::string& said, const std::string& drop) {
    return override_dir(t, dir, "calibration",
        "local fit_serve = M.fit_serve\n"
        "M.fit_serve = function(r)\n"
        "  local out, kept = fit_serve(r), {}\n"
        "  for _, f in ipairs(out.fields) do\n"
        "    if f.key == 'decode_fitted' then f.value = " + said + " end\n"
        "    if not f.key:find('" + drop + "') then kept[#kept + 1] = f end\n"
        "  end\n"
        "  out.fields = kept\n"
        "  return out\n"
        "end\n");
  };
  const json fit = run_json(serve + fitted("none", "false", "^decode_factor%.") + " --calibrate '" + m.string() + "'");
  CHECK(fit["decode_factors"].is_object());
  CHECK(fit["decode_factors"].empty());
  CHECK_FALSE(fit["factors"].empty());
  CHECK(ns_test::slurp(file).find("\n[decode_factors]") != std::string::npos);
  CHECK(run_json(serve)["tpot_ms"].get<double>() == raw["tpot_ms"].get<double>());  // decode steps: their forecast
  fs::remove(file);
  const std::string says = "neusight: scripts/neusight/calibration.lua fit_serve(): decode_fitted is ";
  const auto no_fields = run_cli(serve + fitted("true", "true", "^decode_factor%.") + " --calibrate '" + m.string() + "'");
  CHECK(no_fields.code == 1);
  CHECK(no_fields.err == says + "true, but it gave no decode_factor.<family> fields\n");
  const auto fields = run_cli(serve + fitted("false", "false", "^$") + " --calibrate '" + m.string() + "'");
  CHECK(fields.code == 1);
  CHECK(fields.err == says + "false, but it gave decode_factor.<family> fields\n");
  const auto text = run_cli(serve + fitted("text", "'yes'", "^$") + " --calibrate '" + m.string() + "'");
  CHECK(text.code == 1);
  CHECK(text.err == "neusight: scripts/neusight/calibration.lua fit_serve(): decode_fitted must be a boolean\n");
  CHECK_FALSE(fs::exists(file));
}

// Older --scripts overrides (written before a function or field the engine now asks for) keep working as they did:
// a figures.lua without calibration_warning (serve says nothing of the model), a serve.lua without model_warning
// (serve --sweep asks figures.lua), a search.lua whose choices has no shared_build (nothing shares a build), a
// calibration.lua whose fit_serve fits one set for both phases and says nothing of decode_fitted (no
// [decode_factors]: its factors apply to decode steps, as they did). Each override is the shipped file with that
// function or field taken out.
TEST_CASE("serve calibrate: older scripts overrides without the new functions keep working", "[cli][serve][calibrate]") {
  temp_dir t;
  const std::string gpu = gpu_copy(t);
  const std::string serve = "serve --model llama3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 64";
  const json raw = run_json(serve);
  // calibration.lua of one factor set: the TPOT's factors, no [decode_factors], applied to decode steps
  const std::string one_set = override_dir(t, "cal", "calibration",
      "local fit_serve = M.fit_serve\n"
      "M.fit_serve = function(r)\n"
      "  local out, kept = fit_serve(r), {}\n"
      "  for _, f in ipairs(out.fields) do if not f.key:find('^decode_') then kept[#kept + 1] = f end end\n"
      "  out.fields = kept\n"
      "  return out\n"
      "end\n");
  const fs::path m = t.write("m.toml", "tpot_ms = " + num(1.25 * raw["tpot_ms"].get<double>()) + "\n");
  const json fit = run_json(serve + one_set + " --calibrate '" + m.string() + "'");
  CHECK(fit["decode_factors"].is_null());
  const fs::path file = t.path / "h100.calibration.toml";
  CHECK(ns_test::slurp(file).find("\n[decode_factors]") == std::string::npos);
  CHECK(run_json(serve)["tpot_ms"].get<double>() > 1.05 * raw["tpot_ms"].get<double>());
  // a calibration of another model: serve and its sweep with the older figures.lua / serve.lua
  const std::string qwen = "serve --model qwen3_8b --gpu '" + gpu + "' --batch 8 --input-len 512 --output-len 16";
  // (an older figures.lua: no calibration_warning among its functions; its compute says what it said)
  const auto no_warning = run_cli(qwen + override_dir(t, "fig", "figures", "",
                                  {{"function M.calibration_warning(", "local function calibration_warning_("},
                                   {"M.calibration_warning(", "calibration_warning_("}})
                                  + " --format json");
  INFO(no_warning.err);
  CHECK(no_warning.code == 0);
  const auto sweep = run_cli("serve --sweep --model qwen3_8b --gpu '" + gpu + "' --batch 8,16 --input-len 512 "
                             "--output-len 16 --format json" + override_dir(t, "srv", "serve", "M.model_warning = nil"));
  INFO(sweep.err);
  CHECK(sweep.code == 0);
  CHECK(sweep.out.find("from a measurement of llama3_8b, not of qwen3_8b") != std::string::npos);
  // search.lua without shared_build
  const auto search = run_cli("search --model llama3_8b --gpu '" + gpu + "' --seq 512 --dtype bf16 --gpus 2 --batch 2 "
                              "--format json" + override_dir(t, "sea", "search",
                                  "local choices = M.choices\n"
                                  "M.choices = function(...) local c = choices(...) c.shared_build = nil return c end\n"));
  INFO(search.err);
  REQUIRE(search.code == 0);
  // as it ranks without the override (nothing shares a build under --scripts anyway)
  CHECK(json::parse(search.out)["layouts"] ==
        run_json("search --model llama3_8b --gpu '" + gpu + "' --seq 512 --dtype bf16 --gpus 2 --batch 2")["layouts"]);
}
