// engine/cli/serve_cmd.h — `neusight serve`: serving latency and throughput of an LLM (scripts/neusight/serve.lua).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ns {

// The flags exactly as given; 0 / "" = not given (serve.lua fills the defaults and checks the values).
struct serve_flags {
  std::string model, gpu, dtype, launch, predictor = "neusight", attention, input_len, output_len;
  int64_t tp = 0, batch = 0, requests = 0, seed = -1, chunked_prefill = 0, max_batch = 0, max_batched_tokens = 0,
          block_size = 0;
  double rate = 0, gpu_memory_utilization = 0;
  bool rate_given = false;
  std::vector<std::string> ops_dirs;
  std::string format = "table", output;
};

int serve_main(const serve_flags& f);

}  // namespace ns
