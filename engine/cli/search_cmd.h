// engine/cli/search_cmd.h — `neusight search`: forecast every dp × tp × pp layout of N GPUs and rank those that fit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ns {

struct search_flags {
  std::string model, gpu, mode = "train", optimizer, optimizer_impl, dtype, precision, predictor = "neusight", cluster,
      schedule;  // a comma-separated list of schedules (gpipe, 1f1b, interleaved), each searched; empty: 1f1b
  // Model chunks per device of the interleaved schedule, comma-separated ("2,4"); empty: its default (2).
  std::string virtual_stages;
  // Expert-parallel degree: 0 searches every ep that divides dp and the model's expert count (1 for dense models).
  int64_t ep = 0;
  // "auto": per layout the cheapest recomputation that fits (none → selective → full); "all": every mode, each
  // ranked as a layout of its own; "none" | "selective" | "full": that mode only.
  std::string recompute = "auto";
  // --zero: ZeRO stages each layout is forecast under ("0,3" or "all"; scripts/neusight/search.lua zero_stages); empty:
  // the workload's (DDP, or --distributed-optimizer's stage 1)
  std::string zero;
  int64_t gpus = 0, batch = 0, seq = 0, top = 10, max_tp = 8;
  bool sequence_parallel = false, distributed_optimizer = false, all = false;
  // --router-skew: the routed experts' load imbalance under expert parallelism (every layout; empty: uniform)
  std::string router_skew;
  // --experts loop|grouped: how an MoE model's routed experts run in every layout (workload field `experts`; empty:
  // the workload's default, loop)
  std::string experts;
  std::string weights;  // --weights DIR: weights root of the neusight predictor instead of the bundled weights/
  std::vector<std::string> ops_dirs;
  std::vector<std::string> scripts_dirs;  // --scripts
  std::vector<std::string> gpus_dirs;  // --gpus-dir (cli/paths.h session_options_for)
  bool verbose = false;                   // -v
  std::string format = "table", output;
  bool no_calibration = false;            // --no-calibration: ignore the GPU's calibration file
};

int search_main(const search_flags& f);

struct flag_targets;  // cli/flags.h
int search_command(flag_targets& t, int argc, char** argv);  // `neusight search` (cli/app.cpp's table)

}  // namespace ns
