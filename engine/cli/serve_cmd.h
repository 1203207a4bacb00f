// engine/cli/serve_cmd.h — `neusight serve`: serving latency and throughput of an LLM (scripts/neusight/serve.lua).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ns {

// The flags exactly as given; 0 / "" / empty = not given (serve.lua fills the defaults and checks the values; the
// command line refuses a 0 for those fields, so a 0 here is never a value given), nullopt where every value is one a
// user may give (--seed: any integer, negative ones included). The
// list-valued ones hold one value without --sweep; with it, every combination is run (scripts/neusight/sweep.lua).
struct serve_flags {
  std::string model, dtype, kv_dtype, weight_dtype, launch, predictor = "neusight", attention, experts, kernels, input_len,
      output_len;
  std::vector<std::string> gpu;
  std::vector<int64_t> tp, batch;
  std::vector<double> rate;
  int64_t requests = 0, chunked_prefill = 0, max_batch = 0, max_batched_tokens = 0, block_size = 0;
  std::optional<int64_t> seed;
  double burstiness = 0;      // --burstiness: 0 = not given (serve.lua's default, 1: Poisson)
  std::string requests_file;  // --requests-file FILE: a trace's arrivals and lengths (serve.lua reads its text)
  double time_scale = 0;      // --time-scale X: the trace's arrival times times X; 0 = not given (1)
  double gpu_memory_utilization = 0;
  bool sweep = false;
  double ttft_ms = 0, tpot_ms = 0;  // --sweep targets, 0 = none
  std::vector<std::string> ops_dirs;
  std::vector<std::string> scripts_dirs;  // --scripts
  std::vector<std::string> gpus_dirs;  // --gpus-dir (cli/paths.h session_options_for)
  bool verbose = false;                   // -v
  std::string format = "table", output;
  std::string report_html;  // --report FILE.html: neusight.html render_serve of the JSON report
  bool no_calibration = false;  // --no-calibration: ignore the GPU's calibration file
  std::string calibrate;        // --calibrate FILE: fit the GPU's calibration from a measurement of this static batch
};

int serve_main(const serve_flags& f);

struct flag_targets;  // cli/flags.h
// `neusight serve` (cli/app.cpp's table): its list flags (--gpu, --tp, --batch, --rate) split, as --sweep takes them.
int serve_command(flag_targets& t, int argc, char** argv);

}  // namespace ns
