// tests/cli/test_flag_values_cli.cpp — flag values the command line refuses before anything runs (cli/flags.cpp): an
// empty value or list item, a repeated list item, counts out of range with the range said plainly, train --hidden's
// widths; and where the reports go (-o, --report): checked before anything is printed, with the OS's reason.
#include <catch2/catch.hpp>

#include "test_util.h"

using ns_test::run_cli;
using ns_test::temp_dir;
namespace fs = std::filesystem;

namespace {

const std::string gpu_less = "predict --model gpt2_large --mode inference --seq 128 --predictor roofline";
const std::string predict = gpu_less + " --gpu h100";

// `args` is a usage error (exit 2) whose message holds `want`; nothing on standard output.
void usage_error(const std::string& args, const std::string& want) {
  const auto r = run_cli(args);
  INFO(args << "\nstderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find(want) != std::string::npos);
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("flag values: train --hidden takes 1 to 8 layer widths from 1 to 1024", "[cli][flags]") {
  temp_dir t;
  const std::string train = "train --family bmm --data '" + (t.path / "none").string() + "' --out '" +
                            (t.path / "out").string() + "' --hidden ";
  const std::string width = "a layer width from 1 to 1024 expected, got ";
  usage_error(train + "abc", "--hidden: " + width + "'abc'\n");
  usage_error(train + "''", "--hidden: an empty value");
  usage_error(train + "99999999999", "--hidden: " + width);
  // one width is said alone ("got 0", not "got 0 (in 0)"); an item of a list names the list
  usage_error(train + "2048", "--hidden: " + width + "2048\n");
  usage_error(train + "0", "--hidden: " + width + "0\n");
  usage_error(train + "64,0", "--hidden: " + width + "0 (in 64,0)\n");
  usage_error(train + "4,,4", "--hidden: an empty item in the list '4,,4'");
  usage_error(train + "4,", "--hidden: an empty item in the list '4,'");
  // as every list flag says it (--batch 4,,x too): a bad width first, then an empty item
  usage_error(train + "4,,x", "--hidden: " + width + "'x' (in 4,,x)\n");
  usage_error(predict + " --batch 4,,x", "--batch: a positive integer expected, got 'x' (in 4,,x)\n");
  usage_error(train + "-4", "--hidden: " + width + "'-4'");
  usage_error(train + "'4 4'", "--hidden: " + width + "'4 4'");
  usage_error(train + "8,8,8,8,8,8,8,8,8", "--hidden: at most 8 hidden layers expected, got 9");
  // the learning rate: a finite number above 0 (nan, 0 and -1 trained with it)
  for (const char* lr : {"nan", "0", "-1", "inf"})
    usage_error(train + "64 --lr " + lr, std::string("--lr: Value ") + lr + " is not a positive finite number");
  CHECK_FALSE(fs::exists(t.path / "out"));
  // repeats are the point of --hidden (64,64,64): the run gets as far as the missing data
  const auto ok = run_cli(train + "64,64,64");
  CHECK(ok.code == 1);
  CHECK(ok.err.find("none: no such file or directory") != std::string::npos);
}

TEST_CASE("flag values: counts say the range they expect in a sentence", "[cli][flags]") {
  const std::string train = "train --family bmm --data none --out none";
  usage_error(train + " --epochs 0", "--epochs: a positive integer expected, got 0");
  usage_error(train + " --batch 0", "--batch: a positive integer expected, got 0");
  usage_error(train + " --threads 0", "--threads: a positive integer expected, got 0");
  usage_error(train + " --epochs 3000000000", "--epochs: a positive integer of at most 2147483647 expected, got 3000000000");
  usage_error(train + " --patience -1", "--patience: a non-negative integer expected, got '-1'");
  usage_error(train + " --seed -1", "--seed: an integer from 0 to 18446744073709551615 expected, got '-1'");
  const auto r = run_cli(train + " --epochs 0");
  CHECK(r.err.find("0.000000") == std::string::npos);  // CLI11's range of doubles, 300 digits long
  usage_error("search --model gpt3_27 --gpu a100 --gpus 8 --batch 8 --seq 0", "--seq: a positive integer expected, got 0");
  usage_error(predict + " --batch 4611686018427387904",
              "--batch: a positive integer of at most 999999999999999999 expected, got 4611686018427387904");
}

TEST_CASE("flag values: an empty value is refused on every flag that takes one", "[cli][flags]") {
  for (const std::string flag : {"--dtype", "--kv-dtype", "--weight-dtype", "--precision", "--optimizer", "--gpu",
                                 "--batch", "--attention", "--schedule", "--cluster", "-o", "--report", "--ops",
                                 "--predictor", "--format"})
    usage_error(gpu_less + (flag == "--gpu" ? "" : " --gpu h100") + (flag == "--batch" ? "" : " --batch 1") + " " + flag +
                    " ''",
                (flag == "-o" ? "--output" : flag) + ": an empty value");  // CLI11 names -o by its long name
  usage_error("serve --model llama3_8b --gpu h100 --batch 1 --input-len 16 --output-len 4 --dtype ''",
              "--dtype: an empty value");
  usage_error("search --model gpt3_27 --gpu a100 --gpus 8 --batch 8 --seq 128 --optimizer ''",
              "--optimizer: an empty value");
  usage_error("train --family bmm --data '' --out x", "--data: an empty value");
  usage_error(predict + " --batch 1,,8", "--batch: an empty item in the list '1,,8'");
  usage_error(predict + " --batch 1 --recompute none,", "--recompute: an empty item in the list 'none,'");
}

TEST_CASE("flag values: a list item given twice is refused", "[cli][flags]") {
  usage_error(predict + " --batch 1,8,8", "--batch: 8 is given twice in the list '1,8,8' (each value once)");
  usage_error(predict + " --batch 8,08", "--batch: 08 is given twice in the list '8,08'");
  usage_error(predict + " --batch 1 --mode train,train", "--mode: train is given twice");
  usage_error(predict + " --batch 1 --dtype bf16,fp16,bf16", "--dtype: bf16 is given twice");
  usage_error("serve --model llama3_8b --gpu h100 --sweep --rate 1,1.0 --input-len 16 --output-len 4",
              "--rate: 1.0 is given twice");
  // two names of one GPU are one GPU (told apart once the GPU files are read)
  const auto r = run_cli(gpu_less + " --batch 1 --gpu h100,H100");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.rfind("neusight: --gpu: h100 and H100 name the same GPU (", 0) == 0);
  CHECK(r.out.empty());
}

TEST_CASE("flag values: --ops refuses a missing folder as --scripts does", "[cli][flags]") {
  // a path that names nothing: an input error (exit 1), as a missing `run FILE` is
  for (const std::string flag : {"--ops", "--scripts"}) {
    const auto r = run_cli(predict + " --batch 1 " + flag + " /no/such/dir");
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.err == "neusight: " + flag + ": /no/such/dir: no such directory\n");
    CHECK(r.out.empty());
  }
}

TEST_CASE("flag values: --router-skew in exponent notation is a number with its limit", "[cli][flags]") {
  const auto r = run_cli("predict --model mixtral_8x7b --gpu h100 --mode inference --batch 8 --seq 128 --dp 2 --ep 2 "
                         "--predictor roofline --router-skew 1e30");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("give a factor from 1 to 2") != std::string::npos);
}

// One bound, serve.lua length_spec's, said with the limit a forecast takes (16777216 tokens): the command line's own
// bound of these flags said "a positive integer of at most 999999999999999999" of a length beyond a count's range.
TEST_CASE("flag values: serve's lengths beyond a count's range name their flag, the value given and the real limit",
          "[cli][flags]") {
  const std::string serve = "serve --model llama32_1b --gpu h100 --predictor roofline ";
  auto fails = [&](const std::string& args, const std::string& message) {
    const auto r = run_cli(serve + args);
    INFO(args << "\nstderr: " << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.rfind("neusight: serve: " + message + "\n", 0) == 0);
    CHECK(r.err.find("at most 999999999999999999") == std::string::npos);
    CHECK(r.out.empty());
  };
  fails("--rate 5 --requests 5 --input-len uniform:1:99999999999999999999 --output-len 4",
        "the input length (--input-len) uniform:LO:HI needs HI <= 16777216 tokens (got uniform:1:99999999999999999999)");
  fails("--batch 1 --input-len 100 --output-len 99999999999999999999",
        "the output length (--output-len) must be at most 16777216 tokens (got 99999999999999999999)");
  fails("--batch 1 --input-len 100 --output-len 1000000000000000000",
        "the output length (--output-len) must be at most 16777216 tokens (got 1000000000000000000)");
  fails("--rate 5 --input-len 100 --output-len uniform:99999999999999999999:1",
        "the output length (--output-len) uniform:LO:HI needs 1 <= LO <= HI (got uniform:99999999999999999999:1)");
}

TEST_CASE("reports: -o and --report are checked before anything is printed", "[cli][report]") {
  temp_dir t;
  // a missing folder: nothing on standard output, the OS's reason and the path
  const std::string page = (t.path / "nodir" / "x.html").string();
  auto r = run_cli(predict + " --batch 1 --report '" + page + "'");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "neusight: " + page + ": cannot write: folder " + (t.path / "nodir").string() +
                     ": No such file or directory\n");
  r = run_cli(predict + " --batch 1 -o '" + (t.path / "nodir" / "x.json").string() + "'");
  CHECK(r.code == 1);
  CHECK(r.err.find("x.json: cannot write: folder " + (t.path / "nodir").string() + ": No such file or directory") !=
        std::string::npos);
  // the same file twice (also through another spelling of it)
  const std::string same = (t.path / "same.html").string();
  usage_error(predict + " --batch 1 -o '" + same + "' --report '" + (t.path / "." / "same.html").string() + "'",
              "is the file -o writes too");
  CHECK_FALSE(fs::exists(same));
  // an HTML page in a file named as JSON, CSV or text; -o suggested only when not given
  for (const char* ext : {".json", ".csv", ".txt"})
    usage_error(predict + " --batch 1 --report '" + (t.path / "x").string() + ext + "'",
                "--report writes an HTML page; use -o for JSON, CSV or a table (e.g. -o " + (t.path / "x").string() +
                    ext + "), --report for a .html file");
  const std::string cmp = (t.path / "cmp.csv").string();
  r = run_cli(predict + " --batch 1 -o '" + cmp + "' --report '" + (t.path / "." / "cmp.csv").string() + "'");
  CHECK(r.code == 2);
  CHECK(r.err.find("--report writes an HTML page; use -o for JSON, CSV or a table, --report for a .html file") !=
        std::string::npos);
  CHECK(r.err.find("e.g. -o") == std::string::npos);
  CHECK_FALSE(fs::exists(cmp));
  // both written when both can be
  r = run_cli(predict + " --batch 1 -o '" + (t.path / "r.json").string() + "' --report '" + same + "'");
  CHECK(r.code == 0);
  CHECK(fs::exists(t.path / "r.json"));
  CHECK(fs::exists(same));
}

// -o x.html wrote the table (or JSON) under an HTML name without a word; the page is --report's
TEST_CASE("reports: -o refuses an HTML file name and names --report where the command has a page", "[cli][report]") {
  temp_dir t;
  for (const char* name : {"x.html", "x.HTM"}) {
    const std::string file = (t.path / name).string();
    usage_error(predict + " --batch 1 -o '" + file + "'",
                "-o " + file + ": -o writes the report as a table, JSON or CSV, not HTML; the HTML page is --report " +
                    file);
    usage_error(predict + " --batch 1 --format json -o '" + file + "'", "not HTML; the HTML page is --report");
    CHECK_FALSE(fs::exists(file));
  }
  const std::string file = (t.path / "g.html").string();
  usage_error("gpus -o '" + file + "'", "not HTML (gpus has no HTML page)");
  CHECK_FALSE(fs::exists(file));
}

TEST_CASE("reports: -o and --report may both name a device such as /dev/null", "[cli][report]") {
  // a device is written in place, never replaced: both reports go there, nothing is refused
  // the GPU by its stem: `h100` says which H100 it was taken as (gpu_catalog::resolve), on stderr
  const auto r = run_cli(gpu_less + " --gpu h100_sxm5_80gb --batch 1 -o /dev/null --report /dev/null");
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.empty());
  // a link to the device is the device
  ns_test::temp_dir t;
  fs::create_symlink("/dev/null", t.path / "null.html");
  const auto l = run_cli(predict + " --batch 1 -o /dev/null --report '" + (t.path / "null.html").string() + "'");
  INFO(l.err);
  CHECK(l.code == 0);
  CHECK(fs::is_symlink(t.path / "null.html"));
}
