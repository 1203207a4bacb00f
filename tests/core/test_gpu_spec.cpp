// tests/core/test_gpu_spec.cpp — GPU TOML loading: good files, exact error texts, name resolution.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "core/gpu_spec.h"
#include "core/text.h"
#include "test_util.h"

using namespace ns;
using ns_test::source_dir;

namespace {
const std::string tiny = ns_test::slurp(source_dir / "tests/fixtures/gpus/tiny.toml");

std::string parse_error(const std::string& text) {
  try {
    gpu_spec_parse(text, "gpus/bad.toml");
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("a complete GPU file parses into every field", "[gpu]") {
  const gpu_spec g = gpu_spec_parse(tiny, "tiny.toml");
  CHECK(g.name == "Tiny-1");
  CHECK(g.aliases == std::vector<std::string>{"Tiny GPU One", "tiny1"});
  CHECK(g.num_sm == 10);
  CHECK(g.mem_bw_gbps == 100.0);
  CHECK(g.mem_gb == 8.0);  // an integer is accepted for a float key
  CHECK(g.peak_fp16_tflops == 16.0);
  CHECK(g.interconnect == "none");
  CHECK(g.source == "tiny.toml");
}

TEST_CASE("GPU file errors name file:line:col", "[gpu]") {
  SECTION("broken line") {
    const std::string text = ns_test::replace_all(tiny, "num_sm = 10", "num_sm = = 10");
    CHECK(parse_error(text) == "gpus/bad.toml:7:10: Error while parsing value: could not determine value type");
  }
  SECTION("misspelled key") {
    const std::string text = ns_test::replace_all(tiny, "mem_bw_gbps", "mem_bw_gpbs");
    CHECK(parse_error(text) == "gpus/bad.toml:12:1: unknown key 'mem_bw_gpbs' (did you mean 'mem_bw_gbps'?)");
  }
  SECTION("missing key") {
    const std::string text = ns_test::replace_all(tiny, "l2_mb = 4.0\n", "");
    CHECK(parse_error(text) == "gpus/bad.toml:32:1: missing required key 'l2_mb'");
  }
  SECTION("wrong type") {
    const std::string text = ns_test::replace_all(tiny, "num_sm = 10", "num_sm = \"10\"");
    CHECK(parse_error(text) == "gpus/bad.toml:7:1: key 'num_sm' must be an integer (got string)");
  }
  SECTION("non-positive value") {
    const std::string text = ns_test::replace_all(tiny, "mem_bw_gbps = 100.0", "mem_bw_gbps = 0.0");
    CHECK(parse_error(text) == "gpus/bad.toml:12:1: key 'mem_bw_gbps' must be > 0 (got 0.000000)");
  }
  SECTION("unknown vendor") {
    const std::string text = ns_test::replace_all(tiny, "vendor = \"nvidia\"", "vendor = \"intel\"");
    CHECK(parse_error(text) == "gpus/bad.toml:4:10: key 'vendor' must be \"nvidia\" or \"amd\" (got \"intel\")");
  }
}

TEST_CASE("every bundled GPU loads and aliases are unique", "[gpu]") {
  const auto gpus = gpu_catalog(source_dir / "gpus").load_all();
  REQUIRE(gpus.size() >= 20);
  std::set<std::string> seen;
  for (const auto& g : gpus) {
    INFO(g.source);
    std::set<std::string> own = {text_lower(g.name)};  // an alias may repeat its own GPU's name
    for (const auto& a : g.aliases) own.insert(text_lower(a));
    for (const auto& n : own) CHECK(seen.insert(n).second);
    // The fp32 peak is the product of its parts (within clock rounding).
    CHECK(g.peak_fp32_tflops == Approx(g.num_sm * g.cores_per_sm * 2.0 * g.boost_clock_mhz / 1e6).epsilon(0.05));
  }
}

TEST_CASE("GPU names resolve by stem, alias (any case) and path", "[gpu]") {
  const gpu_catalog cat(source_dir / "gpus");
  CHECK(cat.resolve("h100_sxm5_80gb").name == "H100-SXM5-80GB");
  CHECK(cat.resolve("NVIDIA H100 80GB HBM3").name == "H100-SXM5-80GB");
  CHECK(cat.resolve("tesla v100-pcie-32gb").name == "V100-PCIE-32GB");
  CHECK(cat.resolve("AMD Instinct MI250").name == "MI250");
  CHECK(cat.resolve((source_dir / "tests/fixtures/gpus/tiny.toml").string()).name == "Tiny-1");
  // As people type them: case, spaces, '-' and '_' do not matter when one GPU has the name.
  CHECK(cat.resolve("H100 SXM").name == "H100-SXM5-80GB");
  CHECK(cat.resolve("h100sxm").name == "H100-SXM5-80GB");
  CHECK(cat.resolve("a100 sxm4 80gb").name == "A100-SXM4-80GB");
  CHECK(cat.resolve("A100 80GB PCIe").name == "A100-PCIE-80GB");
  CHECK(cat.resolve("mi 300x").name == "MI300X");
  try {
    cat.resolve("H1000");
    FAIL("no error");
  } catch (const error& e) {
    const std::string msg = e.what();
    CHECK(msg.rfind("unknown GPU 'H1000' (close matches: ", 0) == 0);
    CHECK(msg.find("'H100'") != std::string::npos);
  }
  // a name's beginning, as people type it: the GPUs whose names start with it come first, not one-edit neighbours
  try {
    cat.resolve("a10 sxm");
    FAIL("no error");
  } catch (const error& e) {
    const std::string msg = e.what();
    CHECK(msg.rfind("unknown GPU 'a10 sxm' (close matches: ", 0) == 0);
  }
  CHECK(text_close_matches("a100", {"A10G", "V100", "A100-SXM4-80GB"}, 1) == std::vector<std::string>{"A100-SXM4-80GB"});
  // never the word itself (a list that holds it is not where it was looked up: "no op rule 'adam' (did you mean
  // 'adam'?)" with the bundled ops/ off the search path)
  CHECK(text_close_matches("adam", {"none", "sgd", "adam", "adamw"}) == std::vector<std::string>{"adamw"});
  CHECK(text_did_you_mean("adam", {"adam"}).empty());
}

TEST_CASE("price_per_hour_usd is optional — when given, a positive finite number", "[gpu]") {
  const gpu_spec none = gpu_spec_parse(tiny, "tiny.toml");
  CHECK(none.price_per_hour_usd == 0);
  const gpu_spec priced = gpu_spec_parse(tiny + "price_per_hour_usd = 2.75  # a dated source\n", "tiny.toml");
  CHECK(priced.price_per_hour_usd == 2.75);
  CHECK(gpu_spec_parse(tiny + "price_per_hour_usd = 3\n", "t.toml").price_per_hour_usd == 3.0);  // an integer is fine
  const std::string at = "gpus/bad.toml:" + std::to_string(std::count(tiny.begin(), tiny.end(), '\n') + 1) + ":1: ";
  CHECK(parse_error(tiny + "price_per_hour_usd = 0\n") ==
        at + "key 'price_per_hour_usd' must be a positive finite number (got 0.000000); leave the key out when unknown");
  CHECK(parse_error(tiny + "price_per_hour_usd = -inf\n") ==
        at + "key 'price_per_hour_usd' must be a positive finite number (got -inf); leave the key out when unknown");
  CHECK(parse_error(tiny + "price_per_hour_usd = true\n") == at + "key 'price_per_hour_usd' must be a number (got boolean)");
  CHECK(parse_error(tiny + "price_per_hour_usd = 1.0\nprice_per_hour_usd = 2.0\n").find("price_per_hour_usd") !=
        std::string::npos);  // a repeated key is a TOML error
  // other numbers must be finite too
  CHECK(parse_error(ns_test::replace_all(tiny, "mem_bw_gbps = 100.0", "mem_bw_gbps = inf")) ==
        "gpus/bad.toml:12:1: key 'mem_bw_gbps' must be a finite number (got inf)");
}

// The device-reported total (tester7 P1): optional, GiB, between 0.8 x mem_gb and mem_gb, so that GB written for GiB
// (84.9 for an H100 80GB's 79.1 GiB) is an error, not a 7 % larger serving budget.
TEST_CASE("mem_reported_gib is optional and lies between 0.8 x mem_gb and mem_gb", "[gpu]") {
  CHECK(gpu_spec_parse(tiny, "t.toml").mem_reported_gib == 0);  // left out: serve says its budget is of mem_gb
  CHECK(gpu_spec_parse(tiny + "mem_reported_gib = 7.5\n", "t.toml").mem_reported_gib == 7.5);  // mem_gb = 8
  const std::string at = "gpus/bad.toml:" + std::to_string(std::count(tiny.begin(), tiny.end(), '\n') + 1) + ":1: ";
  const std::string range = "key 'mem_reported_gib' must lie between 0.8 x mem_gb and mem_gb (6.4 to 8 GiB; got ";
  const std::string what = "): it is the total the device reports in GiB (2^30 bytes: torch.cuda.mem_get_info()[1] / "
                           "2**30), a little under the datasheet's binary GB";
  CHECK(parse_error(tiny + "mem_reported_gib = 8.6\n") == at + range + "8.6" + what);  // 8 GiB written in GB
  CHECK(parse_error(tiny + "mem_reported_gib = 6\n") == at + range + "6" + what);
  CHECK(parse_error(tiny + "mem_reported_gib = 0\n") ==
        at + "key 'mem_reported_gib' must be a positive finite number (got 0.000000); leave the key out when unknown");
  // every bundled file that gives it passes (the parse), and the H100's is the figure PyTorch reports
  const gpu_spec h100 = gpu_spec_load(source_dir / "gpus" / "h100_sxm5_80gb.toml", "h100_sxm5_80gb.toml");
  CHECK(h100.mem_reported_gib == 79.1);
}

TEST_CASE("nvlink_domain_gpus is optional — the GPUs one bridge joins, 2 or more, on a GPU-to-GPU link", "[gpu]") {
  const std::string linked =
      ns_test::replace_all(ns_test::replace_all(tiny, "interconnect = \"none\"", "interconnect = \"nvlink3\""),
                           "interconnect_bw_gbps = 0.0", "interconnect_bw_gbps = 600.0");
  CHECK(gpu_spec_parse(linked, "t.toml").nvlink_domain_gpus == 0);  // left out: the link reaches the whole node
  CHECK(gpu_spec_parse(linked + "nvlink_domain_gpus = 2\n", "t.toml").nvlink_domain_gpus == 2);
  const std::string at = "gpus/bad.toml:" + std::to_string(std::count(tiny.begin(), tiny.end(), '\n') + 1) + ":1: ";
  CHECK(parse_error(linked + "nvlink_domain_gpus = 1\n") ==
        at + "key 'nvlink_domain_gpus' must be between 2 and 1.04858e+06 (got 1), the physical range of this field");
  CHECK(parse_error(linked + "nvlink_domain_gpus = 2.5\n") == at + "key 'nvlink_domain_gpus' must be an integer (got float)");
  CHECK(parse_error(tiny + "nvlink_domain_gpus = 2\n") ==
        at + "key 'nvlink_domain_gpus' is the size of a GPU-to-GPU link's domain, but interconnect = \"none\": leave it "
             "out, or name the bridge's link");
  // a misspelt key stays an error
  CHECK(parse_error(linked + "nvlink_domain_gpu = 2\n").find("unknown key 'nvlink_domain_gpu' (did you mean 'nvlink_domain_gpus'?)") !=
        std::string::npos);
  // the shipped PCIe cards with a 2-GPU bridge say so
  for (const char* f : {"a100_pcie_40gb", "a100_pcie_80gb", "h100_pcie_80gb"})
    CHECK(gpu_spec_load(source_dir / "gpus" / (std::string(f) + ".toml"), f).nvlink_domain_gpus == 2);
}

TEST_CASE("a short name several GPUs answer to resolves to the file that lists it, and says so", "[gpu]") {
  const gpu_catalog cat(source_dir / "gpus");
  std::string note;
  // a100: the SXM4 80GB (its file lists the alias), the other A100 files named in the note
  CHECK(cat.resolve("a100", note).name == "A100-SXM4-80GB");
  CHECK(note == "GPU 'a100' taken as A100-SXM4-80GB (gpus/a100_sxm4_80gb.toml); name a100_pcie_40gb, a100_pcie_80gb or "
                "a100_sxm4_40gb for another");
  CHECK(cat.resolve("h100", note).name == "H100-SXM5-80GB");
  CHECK(note.find("name h100_pcie_80gb for another") != std::string::npos);
  CHECK(cat.resolve("A100 80GB", note).name == "A100-PCIE-80GB");  // the alias of the PCIe file, said
  CHECK(note.find("name a100_sxm4_80gb for another") != std::string::npos);
  // names that are one GPU's: no note
  for (const char* q : {"H100 SXM", "h100sxm", "a100_sxm4_80gb", "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "A10G", "l4"}) {
    INFO(q);
    cat.resolve(q, note);
    CHECK(note.empty());
  }
  // a10: the A10 (72 SMs), not the A10G (80)
  const gpu_spec a10 = cat.resolve("a10", note);
  CHECK(a10.name == "A10");
  CHECK(a10.num_sm == 72);
  CHECK(note.empty());
  CHECK(cat.resolve("NVIDIA A10").name == "A10");
  CHECK(cat.resolve("a10g").num_sm == 80);
}

TEST_CASE("every GPU file is read to resolve a name: a broken one or two of one name are errors naming the files",
          "[gpu]") {
  // "B300" (a weights manifest's training GPU by its name) was answered by the first file named so, the files after it
  // unread: a broken one said nothing, and a later file answering to the same name was never seen
  ns_test::temp_dir d;
  auto with_names = [&](const std::string& name, const std::string& aliases) {
    std::string t = tiny;
    t.replace(t.find("\"Tiny-1\""), 8, "\"" + name + "\"");
    t.replace(t.find("[\"Tiny GPU One\", \"tiny1\"]"), 25, aliases);
    return t;
  };
  d.write("a_first.toml", with_names("First-GPU", "[\"first alias\"]"));
  d.write("b_second.toml", with_names("Second-GPU", "[\"second alias\"]"));
  const gpu_catalog cat(d.path);
  CHECK(cat.resolve("First-GPU").source == "gpus/a_first.toml");
  CHECK(cat.resolve("second alias").source == "gpus/b_second.toml");
  CHECK(cat.load_all().size() == 2);
  // a later file of the folder answering to an earlier GPU's alias (it was taken as the earlier GPU, silently) or its
  // name (it was hidden from `neusight gpus`, silently): errors naming both files, whatever name is asked for
  d.write("c_third.toml", with_names("Second Alias", "[]"));
  const gpu_catalog clash(d.path);
  const std::string both = "gpus/c_third.toml: GPU 'Second Alias' answers to 'Second Alias', and so does a GPU of "
                           "gpus/b_second.toml: a name or alias names one GPU of a folder (rename or remove one of the "
                           "two files)";
  CHECK_THROWS_WITH(clash.load_all(), both);
  CHECK_THROWS_WITH(clash.resolve("First-GPU"), both);
  d.write("c_third.toml", with_names("first-gpu", "[]"));
  CHECK_THROWS_WITH(gpu_catalog(d.path).load_all(), Catch::Contains("gpus/c_third.toml: GPU 'first-gpu' answers to "
                                                                    "'first-gpu', and so does a GPU of gpus/a_first.toml"));
  std::filesystem::remove(d.path / "c_third.toml");
  // a broken file after the one asked for is read and refused
  d.write("z_broken.toml", "name = \"Broken\"\nnot toml [\n");
  const gpu_catalog with_broken(d.path);
  CHECK_THROWS_WITH(with_broken.resolve("First-GPU"), Catch::Contains("z_broken.toml"));
  CHECK_THROWS_WITH(with_broken.load_all(), Catch::Contains("z_broken.toml"));
  CHECK(with_broken.resolve("a_first").name == "First-GPU");  // a file's stem is that one file
}

// A name a user's file and a bundled one both answer to (an alias of each) is an error naming both files, not the first.
TEST_CASE("a name a user's GPU file and a bundled one both answer to is ambiguous", "[gpu]") {
  ns_test::temp_dir d;
  d.write("lab_gpu.toml", std::string(tiny).replace(tiny.find("\"tiny1\""), 7, "\"h100\""));
  const gpu_catalog cat(source_dir / "gpus", {}, {{d.path, "mine"}});
  CHECK_THROWS_WITH(cat.resolve("H100"), "GPU 'H100' is ambiguous: it names an alias of Tiny-1 (mine/lab_gpu.toml) and "
                                         "an alias of H100-SXM5-80GB (gpus/h100_sxm5_80gb.toml); give the file stem or "
                                         "path (see `neusight gpus`)");
  CHECK(cat.resolve("Tiny GPU One").source == "mine/lab_gpu.toml");
  CHECK(cat.resolve("h100_sxm5_80gb").name == "H100-SXM5-80GB");
}

TEST_CASE("user GPU folders come before the bundled files, by stem, name and alias", "[gpu]") {
  ns_test::temp_dir d;
  const std::string h100 = ns_test::slurp(source_dir / "gpus/h100_sxm5_80gb.toml");
  // a copy of a bundled GPU under its name with another bandwidth; a GPU of its own with an alias
  std::string copy = h100;
  copy.replace(copy.find("mem_bw_gbps = "), 14, "mem_bw_gbps = 4000.0 #");
  d.write("my_h100.toml", copy);
  d.write("lab_gpu.toml", std::string(tiny).replace(tiny.find("\"tiny1\""), 7, "\"labby\""));
  const gpu_catalog cat(source_dir / "gpus", {}, {{d.path, "mine"}});
  CHECK(cat.resolve("labby").source == "mine/lab_gpu.toml");
  CHECK(cat.resolve("lab_gpu").name == "Tiny-1");
  // the copy hides the bundled file of its GPU name: every name of it is the copy's
  for (const char* q : {"h100_sxm5_80gb", "H100-SXM5-80GB", "H100 SXM", "my_h100"}) {
    INFO(q);
    CHECK(cat.resolve(q).mem_bw_gbps == 4000.0);
  }
  CHECK(cat.shadows() == std::vector<std::string>{"mine/my_h100.toml shadows gpus/h100_sxm5_80gb.toml (GPU 'H100-SXM5-80GB')"});
  const auto all = cat.load_all();
  CHECK(std::count_if(all.begin(), all.end(), [](const gpu_spec& g) { return g.name == "H100-SXM5-80GB"; }) == 1);
  // by stem: a user file of a bundled file's stem hides it without being read for its name
  ns_test::temp_dir e;
  e.write("l4.toml", tiny);
  const gpu_catalog by_stem(source_dir / "gpus", {}, {{e.path, "e"}});
  CHECK(by_stem.resolve("l4").name == "Tiny-1");
  CHECK(by_stem.shadows() == std::vector<std::string>{"e/l4.toml shadows gpus/l4.toml"});
}
