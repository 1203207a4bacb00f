// tests/core/test_held_out.cpp — the evaluation GPUs are never trained on.
//
// The brief holds Hopper (H100, H200), L4, A100-80GB, A100-SXM4 and MI250 out on purpose: we are judged on GPUs the
// predictor has never seen. weights/HELD_OUT lists them (weights/train.sh always excludes them); this test reads
// every shipped weights/*/*/model.toml and fails if its [training] gpus, data files or command name one of them
// (any spelling: "NVIDIA A100-SXM4-80GB", "A100_SXM", "a100_sxm/gemm.csv", "H100-SXM5-80GB", "NVIDIA L4", ...),
// except as the argument of an --exclude-gpu. The NeuSight training A100 (A100-PCIE-40GB) and the L40S are allowed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "test_util.h"

using ns_test::quoted;

namespace {
namespace fs = std::filesystem;

// Lower case, '_' and '-' as spaces: one spelling for the data's, the GPU files' and the folders' forms.
std::string folded(std::string s) {
  for (auto& c : s) c = c == '_' || c == '-' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether text names a held-out evaluation GPU. A100-SXM4 (any), A100 80GB (PCIe or SXM), H100, H200, L4 (a token
// of its own: not L40S), MI250 (and MI250X), and a bare "A100" (the whole text: gpus/a100_sxm4_80gb.toml's alias).
bool names_held_out(const std::string& text) {
  static const std::regex pattern(
      R"((^|[^a-z0-9])(a100 ?sxm|a100 ([a-z0-9]+ )?80 ?gb|h100|h200|l4|mi250)([^a-z0-9]|x|$)|^ *a100 *$)");
  return std::regex_search(folded(text), pattern);
}

// Lines of `text`, empty ones dropped.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
    if (nl > at) out.push_back(text.substr(at, nl - at));
  if (at < text.size()) out.push_back(text.substr(at));
  return out;
}

// The names of weights/HELD_OUT, as weights/held_out.py (the one reader of the file) gives them.
std::vector<std::string> held_out_file() {
  const auto r = ns_test::run_sh("python3 weights/held_out.py --list");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return lines_of(r.out);
}

// The command with every "--exclude-gpu NAME" of a held-out NAME (bare or quoted) removed.
std::string without_exclusions(std::string command, const std::vector<std::string>& held) {
  for (const auto& n : held)
    for (const std::string& form : {"--exclude-gpu '" + n + "'", "--exclude-gpu \"" + n + "\"", "--exclude-gpu " + n})
      for (auto at = command.find(form); at != std::string::npos; at = command.find(form))
        command.erase(at, form.size());
  return command;
}

template <typename View>
std::vector<std::string> strings(const View& v) {
  std::vector<std::string> out;
  if (const auto* a = v.as_array())
    for (const auto& x : *a)
      if (auto s = x.template value<std::string>()) out.push_back(*s);
  return out;
}
}  // namespace

TEST_CASE("held-out GPUs: the matcher knows every spelling of weights/HELD_OUT and no training GPU", "[held_out]") {
  const auto held = held_out_file();
  CHECK(held.size() >= 7);
  for (const auto& n : held) CHECK(names_held_out(n));
  for (const char* s : {"NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", "NVIDIA_A100-SXM4-80GB", "a100_sxm",
                        "../shared/data/aiconfigurator/a100_sxm/gemm.csv", "A100-80GB", "A100 80GB PCIe",
                        "A100-PCIE-80GB", "NVIDIA A100 80GB PCIe", "H100", "H100-SXM5-80GB", "NVIDIA H100 PCIe",
                        "h100_sxm", "NVIDIA H200", "H200-SXM-141GB", "L4", "NVIDIA L4", "NVIDIA_L4", "aic/l4/gemm.csv",
                        "MI250", "AMD Instinct MI250", "MI250X", "A100", "a100"})
    CHECK(names_held_out(s));
  for (const char* s : {"A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB", "L40S", "NVIDIA L40S", "l40s", "RTX-PRO-6000-Server",
                        "B200", "B300", "GB200", "GB300", "T4", "P4", "V100-PCIE-32GB", "P100-PCIE-16GB", "MI210",
                        "MI100", "../shared/data/neusight/dataset/test/linear.csv",
                        "../shared/data/aiconfigurator/l40s/gemm.csv", "build/neusight train -q --family gemm_tc16"})
    CHECK_FALSE(names_held_out(s));
}

TEST_CASE("held-out GPUs: no shipped weights/*/*/model.toml was trained on one", "[held_out]") {
  const auto held = held_out_file();
  int models = 0;
  for (const auto& vendor : fs::directory_iterator(ns_test::source_dir / "weights")) {
    if (!vendor.is_directory()) continue;
    for (const auto& fam : fs::directory_iterator(vendor.path())) {
      const fs::path model = fam.path() / "model.toml";
      if (!fs::exists(model)) continue;
      ++models;
      const std::string where = fs::relative(model, ns_test::source_dir).string();
      INFO(where);
      const toml::table t = toml::parse_file(model.string());
      const auto training = t["training"];
      REQUIRE(training.is_table());
      const auto gpus = strings(training["gpus"]);
      CHECK_FALSE(gpus.empty());
      for (const auto& g : gpus) {
        INFO("trained on " << g);
        CHECK_FALSE(names_held_out(g));
      }
      for (const auto& d : strings(training["data"])) {
        INFO("data file " << d);
        CHECK_FALSE(names_held_out(d));
      }
      const std::string command = training["command"].value_or(std::string());
      INFO("command: " << command);
      CHECK_FALSE(command.empty());
      CHECK_FALSE(names_held_out(without_exclusions(command, held)));
    }
  }
  CHECK(models >= 14);
}

namespace {
// Every string value anywhere in `node` (keys are names of families and fields, not of GPUs) that names a held-out GPU,
// with its dotted path.
void held_out_values(const toml::node& node, const std::string& path, std::vector<std::string>& out) {
  if (const auto* t = node.as_table())
    for (const auto& [k, v] : *t) held_out_values(v, path.empty() ? std::string(k.str()) : path + "." + std::string(k.str()), out);
  else if (const auto* a = node.as_array())
    for (size_t i = 0; i < a->size(); ++i) held_out_values(*a->get(i), path + "[" + std::to_string(i) + "]", out);
  else if (const auto s = node.value<std::string>(); s && names_held_out(*s))
    out.push_back(path + " = " + *s);
}
std::vector<std::string> held_out_values(const fs::path& file) {
  std::vector<std::string> out;
  held_out_values(toml::parse_file(file.string()), "", out);
  return out;
}
}  // namespace

// The tables beside the models, weights/<vendor>/*.toml (weights/nvidia/uncertainty.toml today, an AMD one later): the
// leave-one-GPU-out error table's folds and each family's range.gpus are what the band and the calibration prior
// (scripts/neusight/calibration.lua prior_of) are made of, so a fold of a held-out GPU would choose both on it. Every
// string value of every such table is checked; a copy with a held-out GPU added as a fold is caught, so the check
// is not vacuous.
TEST_CASE("held-out GPUs: no table beside the models (uncertainty folds and ranges) names one", "[held_out]") {
  int tables = 0, folds = 0;
  for (const auto& vendor : fs::directory_iterator(ns_test::source_dir / "weights")) {
    if (!vendor.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(vendor.path())) {
      if (f.path().extension() != ".toml") continue;
      ++tables;
      INFO(fs::relative(f.path(), ns_test::source_dir).string());
      CHECK(held_out_values(f.path()) == std::vector<std::string>{});
      const toml::table t = toml::parse_file(f.path().string());
      if (const auto* fams = t["families"].as_table())
        for (const auto& [name, fam] : *fams) {
          INFO(name.str());
          const auto fs_ = strings(fam.as_table()->at_path("folds"));
          const auto gs = strings(fam.as_table()->at_path("range.gpus"));
          CHECK_FALSE(fs_.empty());
          CHECK_FALSE(gs.empty());
          folds += static_cast<int>(fs_.size());
        }
    }
  }
  CHECK(tables >= 1);
  CHECK(folds >= 40);  // 5 fp32 families x 5 GPUs + 4 tensor-core families x 6
  // a copy of the shipped table with a held-out fold and range GPU is caught, under the names the data uses
  ns_test::temp_dir d;
  std::string text = ns_test::slurp(ns_test::source_dir / "weights/nvidia/uncertainty.toml");
  text = ns_test::replace_all(text, "folds = [\"B200\",", "folds = [\"NVIDIA H100 80GB HBM3\", \"B200\",");
  text = ns_test::replace_all(text, "gpus = [\"A100-PCIE-40GB\",", "gpus = [\"A100-SXM4-80GB\", \"A100-PCIE-40GB\",");
  const auto bad = held_out_values(d.write("uncertainty.toml", text));
  CHECK(bad.size() == 4 + 5);  // four tensor-core families' folds, five fp32 families' range.gpus
  CHECK(std::count(bad.begin(), bad.end(), "families.gemm_tc16.folds[0] = NVIDIA H100 80GB HBM3") == 1);
  CHECK(std::count(bad.begin(), bad.end(), "families.bmm.range.gpus[0] = A100-SXM4-80GB") == 1);
}

// weights/held_out.py is the one rule for "is this GPU held out" (a name, alias or file stem of a held-out GPU's
// gpus/*.toml, in any case, '_' or ' ', with or without an NVIDIA/AMD/Tesla prefix): weights/held_out.sh runs it and
// the Python weight scripts import it. held_out.sh and roofline_efficiency.py had rules of their own (aliases known to
// one, not the other); this fails if the shell's answers and Python's part again or the rule loses a spelling.
TEST_CASE("held-out GPUs: weights/held_out.py is the one matcher of the shell and Python weight scripts", "[held_out]") {
  // every name, alias and file stem of every gpus/*.toml, by file stem
  std::map<std::string, std::vector<std::string>> names;
  for (const auto& f : fs::directory_iterator(ns_test::source_dir / "gpus")) {
    const std::string file = f.path().filename().string();
    if (f.path().extension() != ".toml" || file.find(".calibration.") != std::string::npos) continue;
    const toml::table t = toml::parse_file(f.path().string());
    auto& n = names[f.path().stem().string()];
    n.push_back(t["name"].value_or(std::string()));
    for (const auto& a : strings(t["aliases"])) n.push_back(a);
    n.push_back(f.path().stem().string());
  }
  REQUIRE(names.size() >= 20);
  // every spelling, and the name and stem (which have no vendor prefix) with an NVIDIA_ one; for the shell, one a file
  std::string all, some;
  for (const auto& [stem, spellings] : names) {
    for (const auto& n : spellings) all += " " + quoted(n);
    all += " " + quoted("NVIDIA_" + spellings.front()) + " " + quoted("NVIDIA_" + spellings.back());
    some += " " + quoted(spellings.back());
  }
  for (const char* odd : {"nvidia  h100_80gb   hbm3", "AMD_Instinct_MI250"}) all += " " + quoted(odd), some += " " + quoted(odd);
  const auto py = ns_test::run_sh("python3 weights/held_out.py" + all);
  INFO(py.err);
  REQUIRE(py.code == 0);  // some are held out
  const std::vector<std::string> py_held = lines_of(py.out);
  const std::set<std::string> held(py_held.begin(), py_held.end());

  // the rule: every spelling of the seven held-out files, none of another file's
  const std::set<std::string> held_files = {"a100_pcie_80gb", "a100_sxm4_80gb", "h100_pcie_80gb", "h100_sxm5_80gb",
                                            "h200_sxm_141gb", "l4", "mi250"};
  for (const auto& [stem, spellings] : names)
    for (const auto& n : spellings) {
      INFO(stem << ": " << n);
      CHECK(held.count(n) == held_files.count(stem));
      if (n == spellings.front() || n == spellings.back()) CHECK(held.count("NVIDIA_" + n) == held_files.count(stem));
      if (held.count(n)) CHECK(names_held_out(n));  // the model.toml scanner above misses no spelling the rule knows
    }
  CHECK(held.count("nvidia  h100_80gb   hbm3"));
  CHECK(held.count("AMD_Instinct_MI250"));

  // weights/held_out.sh answers as held_out.py does, for the same names in the same order
  const auto sh = ns_test::run_sh(
      "bash -c 'source weights/held_out.sh && printf \"%s\\n\" \"${held_out[@]}\" && echo -- && "
      "for n in \"$@\"; do if is_held_out \"$n\"; then echo \"$n\"; fi; done' sh" + some);
  INFO(sh.err);
  REQUIRE(sh.code == 0);
  std::vector<std::string> sh_lines = lines_of(sh.out);
  const auto sep = std::find(sh_lines.begin(), sh_lines.end(), "--");
  REQUIRE(sep != sh_lines.end());
  CHECK(std::vector<std::string>(sh_lines.begin(), sep) == held_out_file());
  const auto py_some = ns_test::run_sh("python3 weights/held_out.py" + some);
  CHECK(std::vector<std::string>(sep + 1, sh_lines.end()) == lines_of(py_some.out));
  CHECK(lines_of(py_some.out).size() == held_files.size() + 2);

  // refuse_held_out: exit 2 naming the fold, nothing for a list without one
  const auto refuse = ns_test::run_sh("bash -c 'source weights/held_out.sh && refuse_held_out \"T4;h100_sxm5_80gb;L4\" x.sh'");
  CHECK(refuse.code == 2);
  CHECK(refuse.err == "x.sh: h100_sxm5_80gb is a held-out evaluation GPU (weights/HELD_OUT): never a fold\n");
  CHECK(ns_test::run_sh("bash -c 'source weights/held_out.sh && refuse_held_out \"T4;L40S;A100-PCIE-40GB\" x.sh'").code == 0);

  // a check that cannot run is never "not held out": exit 2 (held_out.sh stops), not 1
  ns_test::temp_dir t;
  t.write("gpus/broken.toml", "name = \n");
  const auto broken = ns_test::run_sh("python3 weights/held_out.py --gpus-dir " + quoted(t.path.string() + "/gpus") + " T4");
  CHECK(broken.code == 2);
  CHECK_THAT(broken.err, Catch::Contains("broken.toml"));
  CHECK(ns_test::run_sh("python3 weights/held_out.py --held-out " + quoted(t.path.string() + "/none") + " T4").code == 2);

  // uncertainty.py refuses a held-out GPU's rows as a fold, under its canonical name and under an alias, and writes
  // nothing (behaviour, beside the import check below)
  for (const char* gpu : {"H100-SXM5-80GB", "H200-SXM-141GB"}) {
    INFO(gpu);
    ns_test::temp_dir w;
    w.write("rows/x.json", std::string(R"({"rows": [{"gpu": ")") + gpu +
                               R"(", "device": "x", "family": "bmm", "measured_ms": 1.0, "predicted_ms": 1.0, "where": "r"}]})");
    const auto u = ns_test::run_sh("python3 weights/uncertainty.py --work " + quoted(w.path.string()) +
                                   " --gpus-dir gpus --out " + quoted((w.path / "out.toml").string()));
    CHECK(u.code == 1);
    CHECK_THAT(u.err, Catch::Contains("a held-out evaluation GPU"));
    CHECK_FALSE(fs::exists(w.path / "out.toml"));
  }
  // the Python weight scripts hold no rule of their own: they import this one
  for (const char* script : {"roofline_efficiency.py", "uncertainty.py"}) {
    INFO(script);
    const std::string text = ns_test::slurp(ns_test::source_dir / "weights" / script);
    CHECK(text.find("from held_out import ") != std::string::npos);
    CHECK(text.find("held_out_matcher(") != std::string::npos);
    CHECK(text.find("removeprefix(") == std::string::npos);
    CHECK(text.find(".lower()") == std::string::npos);
  }
  CHECK(ns_test::slurp(ns_test::source_dir / "weights" / "held_out.sh").find("tr '[:upper:]") == std::string::npos);
}

// The training GPUs the leave-one-GPU-out scripts fold over are one list (weights/training_gpus.sh), none of them
// held out; and a data file's GPU is read by one rule (held_out.py's device_of, which held_out.sh runs): the shell had
// an awk copy of it. A file whose device cannot be read answers empty, which train.sh refuses.
TEST_CASE("held-out GPUs: the folds' training GPUs are one list and a data file's device one rule", "[held_out]") {
  const auto refuse = ns_test::run_sh(
      "bash -c 'source weights/training_gpus.sh && source weights/held_out.sh && "
      "refuse_held_out \"$training_fp32_gpus;$training_tc_gpus\" x.sh && echo \"$training_fp32_gpus;$training_tc_gpus\"'");
  INFO(refuse.err);
  REQUIRE(refuse.code == 0);
  CHECK(std::count(refuse.out.begin(), refuse.out.end(), ';') == 10);  // 5 fp32 + 6 tensor-core GPUs
  for (const char* script : {"evaluate.sh", "uncertainty.sh", "ensemble_study.sh", "logo.sh", "ensemble_e2e.sh"}) {
    INFO(script);
    const std::string text = ns_test::slurp(ns_test::source_dir / "weights" / script);
    CHECK(text.find("source weights/training_gpus.sh") != std::string::npos);
    CHECK(text.find("Tesla P100-PCIE-16GB") == std::string::npos);  // no list of its own
    CHECK(text.find("NVIDIA GB300") == std::string::npos);
  }
  ns_test::temp_dir t;
  t.write("a.csv", "kind,device,ms\nbmm,Tesla T4,1\nbmm,Other,2\n");
  t.write("none.csv", "kind,ms\nbmm,1\n");
  t.write("empty.csv", "kind,device,ms\n");
  for (const auto& [file, want] : std::vector<std::pair<std::string, std::string>>{
           {"a.csv", "Tesla T4\n"}, {"none.csv", "\n"}, {"empty.csv", "\n"}}) {
    INFO(file);
    const std::string path = quoted((t.path / file).string());
    const auto sh = ns_test::run_sh("bash -c 'source weights/held_out.sh && device_of \"$1\"' sh " + path);
    CHECK(sh.code == 0);
    CHECK(sh.out == want);
    const auto py = ns_test::run_sh("python3 -c 'import sys; sys.path.insert(0, \"weights\"); import held_out; "
                                    "print(held_out.device_of(sys.argv[1]))' " + path);
    CHECK(py.out == (want == "\n" ? std::string("None\n") : want));
  }
  CHECK(ns_test::slurp(ns_test::source_dir / "weights" / "held_out.sh").find("awk") == std::string::npos);
  CHECK(ns_test::slurp(ns_test::source_dir / "weights" / "roofline_efficiency.py").find("def device_of") ==
        std::string::npos);
}

// Which per-GPU data files a script may train on is one held_out.py process for the whole list (held_out.py
// --trainable, held_out.sh's trainable_files): train.sh ran two per file. A held-out GPU's file is skipped and named, a
// training GPU's kept (paths with spaces too), a path that is no file kept for its reader to refuse; a file whose
// device cannot be read stops the script with exit 2 naming it, train.sh included, before anything is trained.
TEST_CASE("held-out GPUs: a data file list is filtered by one held_out.py run and an unreadable device stops train.sh",
          "[held_out]") {
  ns_test::temp_dir t;
  const std::string held = t.write("aic/h100 sxm/gemm.csv", "op,device,ms\ngemm,NVIDIA H100 80GB HBM3,1\n").string();
  const std::string kept = t.write("aic/l40s/gemm.csv", "op,device,ms\ngemm,NVIDIA L40S,1\n").string();
  const std::string missing = (t.path / "aic" / "none" / "gemm.csv").string();
  const std::string bad = t.write("bad dir/gemm.csv", "op,ms\ngemm,1\n").string();
  const std::string empty = t.write("empty.csv", "op,device,ms\n").string();
  const std::string skipped = "x.sh: skipping " + held + " (held-out GPU NVIDIA H100 80GB HBM3, weights/HELD_OUT)\n";

  const auto py = ns_test::run_sh("python3 weights/held_out.py --as x.sh --trainable -- " + quoted(held) + " " +
                                  quoted(kept) + " " + quoted(missing));
  INFO(py.err);
  CHECK(py.code == 0);
  CHECK(py.out == kept + "\n" + missing + "\n");
  CHECK(py.err == skipped);
  for (const auto& file : {bad, empty}) {
    INFO(file);
    const auto no_device = ns_test::run_sh("python3 weights/held_out.py --as x.sh --trainable " + quoted(kept) + " " +
                                           quoted(file));
    CHECK(no_device.code == 2);
    CHECK(no_device.out.empty());
    CHECK(no_device.err == "x.sh: " + file + ": no device column or no rows (held-out check impossible)\n");
  }
  CHECK(ns_test::run_sh("python3 weights/held_out.py --trainable " + quoted(t.path.string() + "/a\nb.csv")).code == 2);

  // held_out.sh: the array gets the kept paths, spaces and all; an unreadable device ends the sourcing script (no
  // set -e needed), never read as "not held out"
  const std::string sh = "bash -c 'source weights/held_out.sh && trainable_files got x.sh \"$@\"; "
                         "printf \"<%s>\\n\" \"${#got[@]}\" \"${got[@]}\"' sh ";
  const auto arr = ns_test::run_sh(sh + quoted(held) + " " + quoted(kept) + " " + quoted(missing));
  INFO(arr.err);
  CHECK(arr.code == 0);
  CHECK(arr.out == "<2>\n<" + kept + ">\n<" + missing + ">\n");
  CHECK(arr.err == skipped);
  CHECK(ns_test::run_sh(sh + quoted(held)).out == "<0>\n");
  const auto stop = ns_test::run_sh(sh + quoted(kept) + " " + quoted(bad));
  CHECK(stop.code == 2);
  CHECK(stop.out.empty());
  CHECK_THAT(stop.err, Catch::Contains("x.sh: " + bad + ": no device column or no rows"));

  // train.sh as a whole, with a neusight that records its arguments: the held-out file never reaches it, the kept
  // one does, and a file without a device stops train.sh before any training
  t.write("data/dataset/.keep", "");
  const std::string log = (t.path / "args.log").string();
  const fs::path exe = t.write("neusight", "#!/bin/sh\nprintf '%s\\n' \"$@\" >> " + quoted(log) + "\n");
  fs::permissions(exe, fs::perms::owner_all);
  const std::string train = "NEUSIGHT=" + quoted(exe.string()) + " bash weights/train.sh --vendor nvidia --only gemm_tc16 "
                            "--data " + quoted(t.path.string() + "/data") + " --aic ";
  const auto ok = ns_test::run_sh(train + quoted(t.path.string() + "/aic"));
  INFO(ok.err);
  CHECK(ok.code == 0);
  const auto args = lines_of(ns_test::slurp(log));
  CHECK(std::count(args.begin(), args.end(), "gemm_tc16") == 1);
  CHECK(std::count(args.begin(), args.end(), kept) == 1);
  CHECK(std::count(args.begin(), args.end(), held) == 0);
  CHECK_THAT(ok.err, Catch::Contains("train.sh: skipping " + held + " (held-out GPU NVIDIA H100 80GB HBM3"));
  fs::remove(log);
  fs::rename(t.path / "bad dir", t.path / "aic" / "bad dir");
  // every family this time: the check comes before the first (fp32) family is trained, so no weights are rewritten
  const auto refused = ns_test::run_sh(ns_test::replace_all(train, "--only gemm_tc16 ", "") +
                                       quoted(t.path.string() + "/aic"));
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err, Catch::Contains("train.sh: " + t.path.string() + "/aic/bad dir/gemm.csv: no device column"));
  CHECK(refused.err.find("held_out.py failed") == std::string::npos);  // a refusal, said once, not a failure
  CHECK_FALSE(fs::exists(log));
  CHECK(ns_test::slurp(ns_test::source_dir / "weights" / "train.sh").find("device_of") == std::string::npos);
}
