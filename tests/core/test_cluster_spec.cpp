// tests/core/test_cluster_spec.cpp — cluster TOML files (gpus/clusters/*.toml): good files, exact error texts, resolution.
#include <catch2/catch.hpp>

#include <cmath>
#include <fmt/format.h>

#include "core/cluster_spec.h"
#include "core/text.h"
#include "test_util.h"

using namespace ns;
using ns_test::source_dir;

namespace {
const std::string good =
    "name = \"two\"\n"
    "gpus_per_node = 4\n"
    "nodes = 2\n"
    "[intra]\n"
    "bw_gbps = 100\n"
    "efficiency = 0.5\n"
    "[inter]\n"
    "bw_gbps = 12.5\n"
    "latency_us = 8\n";

std::string parse_error(const std::string& text) {
  try {
    cluster_spec_parse(text, "c.toml");
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("a cluster file parses — unset link fields stay unset for the Lua defaults", "[cluster]") {
  const cluster_spec c = cluster_spec_parse(good, "c.toml");
  CHECK(c.name == "two");
  CHECK(c.gpus_per_node == 4);
  REQUIRE(c.nodes);
  CHECK(*c.nodes == 2);
  CHECK(c.intra.bw_gbps == 100.0);  // an integer is accepted
  CHECK(c.intra.efficiency == 0.5);
  CHECK(!c.intra.latency_us);
  CHECK(c.inter.bw_gbps == 12.5);
  CHECK(c.inter.latency_us == 8.0);
  CHECK(!c.inter.efficiency);
}

TEST_CASE("cluster file errors name file:line:col", "[cluster]") {
  CHECK(parse_error(ns_test::replace_all(good, "bw_gbps = 100", "bw_gbp = 100")) ==
        "c.toml:5:1: unknown key 'intra.bw_gbp' (did you mean 'bw_gbps'?)");
  CHECK(parse_error(ns_test::replace_all(good, "nodes = 2", "node = 2")) ==
        "c.toml:3:1: unknown key 'node' (did you mean 'nodes'?)");
  CHECK(parse_error(ns_test::replace_all(good, "efficiency = 0.5", "efficiency = 1.5")) ==
        "c.toml:6:1: key 'intra.efficiency' must be in (0, 1] (fraction of bw_gbps reached)");
  CHECK(parse_error(ns_test::replace_all(good, "bw_gbps = 12.5", "bw_gbps = \"fast\"")) ==
        "c.toml:8:1: key 'inter.bw_gbps' must be a number");
  CHECK(parse_error(ns_test::replace_all(good, "gpus_per_node = 4", "gpus_per_node = 0")) ==
        "c.toml:2:1: key 'gpus_per_node' must be a positive integer, at most 1048576");
  CHECK(parse_error(ns_test::replace_all(good, "gpus_per_node = 4\n", "")) ==
        "c.toml:8:1: missing required key 'gpus_per_node'");
  CHECK(parse_error("gpus_per_node = 8\ninter = 3\n") ==
        "c.toml:2:1: key 'inter' must be a table ([inter] with bw_gbps, latency_us, efficiency)");
  CHECK(parse_error("gpus_per_node = = 4\n") == "c.toml:1:17: Error while parsing value: could not determine value type");
}

TEST_CASE("bundled clusters load — names resolve with suggestions", "[cluster]") {
  const auto dir = source_dir / "gpus" / "clusters";
  for (const char* name : {"dgx_h100", "dgx_a100", "pcie_8gpu"}) {
    const cluster_spec c = cluster_resolve(dir, name);
    CHECK(c.name == name);
    CHECK(c.source == std::string("gpus/clusters/") + name + ".toml");
    CHECK(c.gpus_per_node == 8);
    CHECK(c.intra.bw_gbps);
    CHECK(c.inter.bw_gbps);
  }
  CHECK_THROWS_WITH(cluster_resolve(dir, "dgx_h10"),
                    "unknown cluster 'dgx_h10' (did you mean 'dgx_h100'?); known: dgx_a100, dgx_h100, pcie_8gpu (or "
                    "give a path to a .toml file, or none for the GPU's own links)");
  CHECK_THROWS_WITH(cluster_resolve(dir, "/nonexistent/x.toml"), "/nonexistent/x.toml: no such file");
}

// engine/core/cluster_spec.h's maxima are the one source of a cluster's ranges: the file reader here, and
// scripts/neusight/topology.lua through ns.cluster_limits() (tests/scripts/test_collectives.lua
// test_cluster_limits_are_a_cluster_files checks that side at the same numbers).
TEST_CASE("cluster file limits: each maximum itself passes and the next number above fails", "[cluster]") {
  const auto num = [](double x) { return fmt::format("{}", x); };  // exact: reads back as the same double
  const std::string count = std::to_string(cluster_max_count), over = std::to_string(cluster_max_count + 1);
  const std::string at_limits = "gpus_per_node = " + count + "\nnodes = " + count + "\n[intra]\nbw_gbps = " +
                                num(cluster_max_bw_gbps) + "\nlatency_us = " + num(cluster_max_latency_us) + "\n";
  const cluster_spec c = cluster_spec_parse(at_limits, "c.toml");
  CHECK(c.gpus_per_node == cluster_max_count);
  CHECK(c.nodes == cluster_max_count);
  CHECK(c.intra.bw_gbps == cluster_max_bw_gbps);
  CHECK(c.intra.latency_us == cluster_max_latency_us);
  const std::string bw_over = num(std::nextafter(cluster_max_bw_gbps, HUGE_VAL));
  const std::string lat_over = num(std::nextafter(cluster_max_latency_us, HUGE_VAL));
  CHECK(parse_error(ns_test::replace_all(at_limits, "bw_gbps = " + num(cluster_max_bw_gbps), "bw_gbps = " + bw_over)) ==
        "c.toml:4:1: key 'intra.bw_gbps' must be > 0 and at most " + text_limit(cluster_max_bw_gbps) +
            " (GB/s per direction)");
  CHECK(parse_error(ns_test::replace_all(at_limits, "latency_us = " + num(cluster_max_latency_us),
                                         "latency_us = " + lat_over)) ==
        "c.toml:5:1: key 'intra.latency_us' must be >= 0 and at most " + text_limit(cluster_max_latency_us) +
            " (microseconds per message)");
  CHECK(parse_error(ns_test::replace_all(at_limits, "gpus_per_node = " + count, "gpus_per_node = " + over)) ==
        "c.toml:1:1: key 'gpus_per_node' must be a positive integer, at most " + count);
  CHECK(parse_error(ns_test::replace_all(at_limits, "nodes = " + count, "nodes = " + over)) ==
        "c.toml:2:1: key 'nodes' must be a positive integer, at most " + count);
}
