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
#include <regex>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "test_util.h"

namespace {
namespace fs = std::filesystem;

// Lower case, '_' and '-' as spaces: one spelling for the data's, the GPU files' and the folders' forms.
std::string folded(std::string s) {
  for (auto& c : s) c = c == '_' || c == '-' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether text names a held-out evaluation GPU. A100-SXM4 (any), A100 80GB (PCIe or SXM), H100, H200, L4 (a token
// of its own: not L40S), MI250 (and MI250X).
bool names_held_out(const std::string& text) {
  static const std::regex pattern(
      R"((^|[^a-z0-9])(a100 ?sxm|a100 ([a-z0-9]+ )?80 ?gb|h100|h200|l4|mi250)([^a-z0-9]|x|$))");
  return std::regex_search(folded(text), pattern);
}

std::vector<std::string> held_out_file() {
  std::ifstream in(ns_test::source_dir / "weights" / "HELD_OUT");
  REQUIRE(in);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.erase(0, 1);
    if (!line.empty()) names.push_back(line);
  }
  return names;
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
                        "MI250", "AMD Instinct MI250", "MI250X"})
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
