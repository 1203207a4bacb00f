// tests/core/test_time_limits.cpp — the one range of a measured time (engine/core/time_limits.h) and every reader that
// applies it: a label's times (eval models), a label-trace CSV's, a calibration measurement's and a kernel's given
// seconds. Each reader takes the limits themselves and refuses the next number beyond them with the one message, so a
// reader that keeps a copy of its own (all four did) fails here when the copy drifts.
#include <catch2/catch.hpp>

#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <limits>

#include "core/calibration.h"
#include "core/text.h"
#include "core/time_limits.h"
#include "ingest/measurement.h"
#include "ingest/trace.h"
#include "test_util.h"

using namespace ns;
using ns_test::temp_dir;

namespace {

// The message of `f`, or "" when it throws nothing.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A number as the input files write it, exactly (the shortest text that reads back as the same double).
std::string exact(double x) { return fmt::format("{}", x); }

// The CLI's error line for `args`, or "" when it succeeded.
std::string cli_error(const std::string& args) {
  const auto r = ns_test::run_cli(args);
  return r.code == 0 ? "" : r.err;
}

}  // namespace

// The one form of a limit in a message (core/text.h text_limit): the time limits here and the cluster limits
// (core/cluster_spec.cpp, scripts/neusight/topology.lua) print "1e6", never %g's "1e+06".
TEST_CASE("text_limit writes a limit as the code writes it", "[time_limits]") {
  CHECK(text_limit(1e6) == "1e6");
  CHECK(text_limit(time_min(time_unit::s)) == "1e-9");
  CHECK(text_limit(2.5e-7) == "2.5e-7");
  CHECK(text_limit(1e100) == "1e100");
  CHECK(text_limit(25) == "25");
  CHECK(text_limit(0) == "0");
}

TEST_CASE("time limits: the range and the message", "[time_limits]") {
  CHECK(time_min_ms == 1e-6);
  CHECK(time_max_ms == 1e9);
  CHECK(time_min(time_unit::s) == 1e-9);  // as the literals are: 1e-6 * 1e-3, not 1e-6 / 1e3 (9.999…e-10)
  CHECK(time_max(time_unit::s) == 1e6);
  for (const auto unit : {time_unit::ms, time_unit::s}) {
    const double lo = time_min(unit), hi = time_max(unit);
    CHECK(time_ok(lo, unit, false));
    CHECK(time_ok(hi, unit, false));
    CHECK_FALSE(time_ok(std::nextafter(lo, 0.0), unit, false));
    CHECK_FALSE(time_ok(std::nextafter(hi, HUGE_VAL), unit, false));
    CHECK_FALSE(time_ok(0, unit, false));
    CHECK(time_ok(0, unit, true));
    CHECK_FALSE(time_ok(-1, unit, true));
    CHECK_FALSE(time_ok(std::numeric_limits<double>::quiet_NaN(), unit, true));
    CHECK_FALSE(time_ok(HUGE_VAL, unit, true));
  }
  CHECK(time_check(2.5, time_unit::ms, false, "x") == 2.5);
  CHECK(error_of([] { time_check(1e-300, time_unit::ms, false, "f:3: key 'a'"); }) ==
        "f:3: key 'a' must be a time of 1e-6 to 1e9 ms (got 1e-300): a time that short is a unit slip, not a measurement");
  CHECK(error_of([] { time_check(1e10, time_unit::ms, true, "c"); }) ==
        "c must be 0 or a time of 1e-6 to 1e9 ms (got 1e+10): a time that long is a unit slip, not a measurement");
  CHECK(error_of([] { time_check(-2, time_unit::s, true, "s"); }) == "s must be 0 or a time of 1e-9 to 1e6 s (got -2)");
  CHECK(error_of([] { time_check(std::nullopt, time_unit::ms, false, "k", "\"x\""); }) ==
        "k must be a time of 1e-6 to 1e9 ms (got \"x\")");
  CHECK(error_of([] { time_check(1e12, time_unit::ms, false, "k", "1e12"); }) ==
        "k must be a time of 1e-6 to 1e9 ms (got 1e12): a time that long is a unit slip, not a measurement");
}

TEST_CASE("time limits: every reader of a measured time takes the limits and refuses the next number beyond", "[time_limits]") {
  const double lo = time_min_ms, hi = time_max_ms;
  const double below = std::nextafter(lo, 0.0), above = std::nextafter(hi, HUGE_VAL);
  const std::string ms_rule = "a time of 1e-6 to 1e9 ms (got ";

  SECTION("a calibration measurement (predict --calibrate, serve --calibrate)") {
    const auto predict = [](double x) {
      return error_of([&] { measurement_parse("latency_ms = " + exact(x) + "\n", "m.toml", measurement_use::predict); });
    };
    const auto serve = [](double x) {
      return error_of([&] { measurement_parse("tpot_ms = " + exact(x) + "\n", "m.toml", measurement_use::serve); });
    };
    for (const auto& read : {std::function<std::string(double)>(predict), std::function<std::string(double)>(serve)}) {
      CHECK(read(lo) == "");
      CHECK(read(hi) == "");
      CHECK_THAT(read(below), Catch::Contains("ms must be " + ms_rule) && Catch::Contains("that short is a unit slip"));
      CHECK_THAT(read(above), Catch::Contains("ms must be " + ms_rule) && Catch::Contains("that long is a unit slip"));
    }
  }

  SECTION("a label-trace CSV (scale --trace)") {
    const auto read = [](double x) {
      return error_of([&] {
        trace_parse_label_csv("Name,input_shapes,output_shape,fw_latency,bw_latency,acc_latency\nx,\"[[1]]\",\"[1]\"," +
                                  exact(x) + ",1,0\n",  // bw_latency 1: a row with fw_latency 0 is still measured
                              "t.csv", "");
      });
    };
    CHECK(read(lo) == "");
    CHECK(read(hi) == "");
    CHECK(read(0) == "");  // not measured
    CHECK_THAT(read(below), Catch::StartsWith("t.csv:2: column 'fw_latency' must be 0 or " + ms_rule));
    CHECK_THAT(read(above), Catch::StartsWith("t.csv:2: column 'fw_latency' must be 0 or " + ms_rule));
  }

  SECTION("a NeuSight label file (eval models)") {
    temp_dir t;
    const auto read = [&](double e2e, double fw) {
      const auto file = t.write("label/Tesla_T4/gpt2_large-inf-1024-4.json",
                                "{\"num_layer\": 36, \"e2e_latency\": " + exact(e2e) + ", \"fw_latency\": " + exact(fw) +
                                    ", \"bwall_latency\": 0}\n");
      return cli_error("eval models '" + file.string() +
                       "' --graphs tests/fixtures/neusight/opgraph --predictor roofline --format json -o '" +
                       (t.path / "out.json").string() + "'");
    };
    CHECK(read(lo, hi) == "");
    CHECK(read(hi, lo) == "");
    CHECK_THAT(read(below, 1), Catch::Contains("key 'e2e_latency' must be " + ms_rule));
    CHECK_THAT(read(above, 1), Catch::Contains("key 'e2e_latency' must be " + ms_rule));
    CHECK_THAT(read(1, below), Catch::Contains("key 'fw_latency' must be 0 or " + ms_rule));
    CHECK_THAT(read(1, above), Catch::Contains("key 'fw_latency' must be 0 or " + ms_rule));
  }

  SECTION("a kernel's given seconds (an op rule or a Lua predictor)") {
    temp_dir t;
    const auto read = [&](double seconds) {
      t.write("ops/mine.lua", "return {\n  name = \"mine\", doc = \"d\", backward = false,\n  forward = function(node, gpu)\n"
                              "    return { { kind = \"memory\", name = \"MEM\", flops = 0, bytes = 1, seconds = " +
                                  exact(seconds) + " } }\n  end,\n}\n");
      return cli_error("run tests/bad_inputs/oprule/run.lua --ops '" + (t.path / "ops").string() +
                       "' --format json -o '" + (t.path / "out.json").string() + "'");
    };
    const double slo = time_min(time_unit::s), shi = time_max(time_unit::s);
    CHECK(read(slo) == "");
    CHECK(read(shi) == "");
    CHECK(read(0) == "");
    const std::string s_rule = "field 'seconds' must be 0 or a time of 1e-9 to 1e6 s (got ";
    CHECK_THAT(read(std::nextafter(slo, 0.0)), Catch::Contains(s_rule) && Catch::Contains("that short is a unit slip"));
    CHECK_THAT(read(std::nextafter(shi, HUGE_VAL)), Catch::Contains(s_rule) && Catch::Contains("that long is a unit slip"));
  }
}
