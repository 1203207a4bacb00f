// tests/core/test_band_spread.cpp — weights/band_spread.py, the fit of the uncertainty band's width factor (`spread`,
// scripts/neusight/uncertainty.lua) from end-to-end labels: z per label, the fit rounded up, the leave-one-GPU-out
// count, and --write (a fit outside the loader's range writes nothing).
#include <catch2/catch.hpp>
#include <cmath>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "test_util.h"

namespace fs = std::filesystem;
using ns_test::quoted;
using ns_test::temp_dir;

namespace {

// An eval-models JSON of one GPU whose rows have band p10 = 50, p50 = 100, p90 = 200 (p90 = 100 where `flat`) and a
// measured time at z (> 0: above the median, z · ln 2 in ln; < 0: below it, |z| · ln 0.5), so z of each row is known.
std::string eval_json(const std::string& gpu, const std::vector<double>& zs, bool flat = false) {
  std::string rows;
  for (double z : zs) {
    const double m = z >= 0 ? 100 * std::pow(2.0, z) : 100 * std::pow(0.5, -z);
    rows += fmt::format(R"({}{{"gpu": "{}", "measured_ms": {:.17g}, "predicted_ms": 100, "predicted_ms_p10": 50, )"
                        R"("predicted_ms_p50": 100, "predicted_ms_p90": {}}})",
                        rows.empty() ? "" : ", ", gpu, m, flat ? 100 : 200);
  }
  return R"({"rows": [)" + rows + "]}";
}

}  // namespace

TEST_CASE("band spread: the fit holds the target share, rounded up, and is checked leave one GPU out", "[weights][band]") {
  temp_dir t;
  // z: A 0.1, 0.45, 0.7203; B 0.2, 0.6 (below the median), 1.5; C 0.3, 0.7 and a row above an empty upper half (inf)
  const auto a = t.write("A.json", eval_json("A", {0.1, 0.45, 0.7203}));
  const auto b = t.write("B.json", eval_json("B", {0.2, -0.6, 1.5}));
  const auto c0 = t.write("C.json", eval_json("C", {-0.3, 0.7}));
  const auto c1 = t.write("C2.json", eval_json("C", {0.5}, true));
  const auto table = t.write("u.toml", "format_version = 2\nlevels = [0.1, 0.5, 0.9]\nspread = 0.5\n[families]\n");
  const std::string args =
      " " + quoted(a) + " " + quoted(b) + " " + quoted(c0) + " " + quoted(c1) + " --target 0.75 --table " + quoted(table);
  const auto r = ns_test::run_sh("python3 weights/band_spread.py" + args);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // 9 labels, 7 needed: the 7th smallest z is 0.7203, written as 0.721 (0.720 would leave that label out)
  CHECK(r.out.find("for 75 % of 9 labels: 0.721 (7 inside in sample; raw band 7)") != std::string::npos);
  // A against B and C's labels: 1.5 (all 3 inside); B against A and C's: 0.721 (2); C against A and B's: 0.721 (2)
  CHECK(r.out.find("A                        factor 1.500:   3 of   3") != std::string::npos);
  CHECK(r.out.find("B                        factor 0.721:   2 of   3") != std::string::npos);
  CHECK(r.out.find("C                        factor 0.721:   2 of   3") != std::string::npos);
  CHECK(r.out.find("7 of   9 inside p10-p90 ( 78 %)") != std::string::npos);
  CHECK(r.out.find("spread 0.500, 4 of 9 inside (in sample)") != std::string::npos);
  const auto w = ns_test::run_sh("python3 weights/band_spread.py" + args + " --write");
  REQUIRE(w.code == 0);
  CHECK(ns_test::slurp(table).find("levels = [0.1, 0.5, 0.9]\nspread = 0.721  # ") != std::string::npos);
  CHECK(ns_test::slurp(table).find("spread = 0.5") == std::string::npos);  // replaced, not added
  // most labels outside any band: the fit is inf, outside the loader's (0, 4]: an error, the table untouched
  const auto before = ns_test::slurp(table);
  const auto d = t.write("D.json", eval_json("D", {0.5, 0.5, 0.5}, true));
  const auto e = t.write("E.json", eval_json("E", {0.5, 0.5}, true));
  const auto bad = ns_test::run_sh("python3 weights/band_spread.py " + quoted(d) + " " + quoted(e) + " --table " +
                                   quoted(table) + " --write");
  CHECK(bad.code != 0);
  CHECK(bad.err.find("outside (0, 4]") != std::string::npos);
  CHECK(ns_test::slurp(table) == before);
  // a row with a NaN time, with part of a band, without a forecast or a GPU, or with a reversed band, is an error, not
  // a label outside the band (or none); so is a target share outside (0, 1]
  for (const auto& [row, says] : std::vector<std::pair<const char*, const char*>>{
           {R"({"gpu": "F", "measured_ms": NaN, "predicted_ms": 100, "predicted_ms_p10": 50, )"
            R"("predicted_ms_p50": 100, "predicted_ms_p90": 200})", "is not a finite number > 0"},
           {R"({"gpu": "F", "measured_ms": 90, "predicted_ms": 100, "predicted_ms_p50": 100})", "is not a finite number > 0"},
           {R"({"gpu": "F", "measured_ms": 90, "predicted_ms": 0, "predicted_ms_p10": 50, )"
            R"("predicted_ms_p50": 100, "predicted_ms_p90": 200})", "predicted_ms = 0 is not a finite number > 0"},
           {R"({"gpu": "F", "measured_ms": 90, "predicted_ms": 100, "predicted_ms_p10": 200, )"
            R"("predicted_ms_p50": 100, "predicted_ms_p90": 50})", "the band is not ordered"},
           {R"({"measured_ms": 90, "predicted_ms": 100, "predicted_ms_p10": 50, )"
            R"("predicted_ms_p50": 100, "predicted_ms_p90": 200})", "no gpu"}}) {
    INFO(row);
    const auto f = t.write("F.json", std::string(R"({"rows": [)") + row + "]}");
    const auto r = ns_test::run_sh("python3 weights/band_spread.py " + quoted(a) + " " + quoted(f) + " --table " +
                                   quoted(table) + " --write");
    CHECK(r.code != 0);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(ns_test::slurp(table) == before);
  }
  const auto target = ns_test::run_sh("python3 weights/band_spread.py " + quoted(a) + " " + quoted(b) + " --target 0");
  CHECK(target.code != 0);
  CHECK(target.err.find("--target must be a share in (0, 1]") != std::string::npos);
}
