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

TEST_CASE("flag values: --ops refuses a missing folder as --scripts does", "[cli][flags]") {
  usage_error(predict + " --batch 1 --ops /no/such/dir", "--ops: no such directory: /no/such/dir");
  usage_error(predict + " --batch 1 --scripts /no/such/dir", "--scripts: no such directory: /no/such/dir");
}

TEST_CASE("flag values: --router-skew in exponent notation is a number with its limit", "[cli][flags]") {
  const auto r = run_cli("predict --model mixtral_8x7b --gpu h100 --mode inference --batch 8 --seq 128 --dp 2 --ep 2 "
                         "--predictor roofline --router-skew 1e30");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("give a factor from 1 to 2") != std::string::npos);
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
  // an HTML page in a file named as JSON, CSV or text
  for (const char* ext : {".json", ".csv", ".txt"})
    usage_error(predict + " --batch 1 --report '" + (t.path / "x").string() + ext + "'",
                "--report writes an HTML page; use -o for JSON, CSV or a table");
  // both written when both can be
  r = run_cli(predict + " --batch 1 -o '" + (t.path / "r.json").string() + "' --report '" + same + "'");
  CHECK(r.code == 0);
  CHECK(fs::exists(t.path / "r.json"));
  CHECK(fs::exists(same));
}
