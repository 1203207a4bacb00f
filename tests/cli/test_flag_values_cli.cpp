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
