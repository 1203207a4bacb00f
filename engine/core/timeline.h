// engine/core/timeline.h — the per-device timeline of a data/tensor/pipeline-parallel iteration (computed in Lua).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ns {

// One pipeline stage's device in a parallel run (scripts/neusight/parallel.lua timeline): every dp × tp rank of the
// stage behaves alike. Seconds per iteration.
struct timeline_device {
  int64_t stage = 0, layers = 0, buckets = 0;
  double params = 0;
  double activation_bytes = 0;  // peak activations kept for backward over the schedule (0 in inference)
  double compute_s = 0;       // kernels other than collectives, all microbatches
  double tp_comm_s = 0;       // tensor-parallel collectives (blocking: on the critical path)
  double ep_comm_s = 0;       // expert-parallel all-to-all (MoE token exchange)
  double p2p_s = 0;           // pipeline send/recv
  double dp_comm_s = 0;       // data-parallel gradient all-reduce, all buckets
  double dp_exposed_s = 0;    // the part of dp_comm_s not hidden behind backward compute
  double exposed_comm_s = 0;  // tp_comm + ep_comm + p2p + dp_exposed
  double optimizer_s = 0;
  double bubble_s = 0;        // idle: iteration − compute − optimizer − exposed communication
  double finish_s = 0;
  double microbatch_fw_s = 0, microbatch_bw_s = 0;  // one microbatch through this device's chunks
};

struct parallel_timeline {
  int64_t dp = 1, tp = 1, pp = 1, ep = 1, microbatches = 1, virtual_stages = 1, micro_batch = 0, world = 1;
  int64_t gpus_per_node = 1, nodes = 1;
  std::string schedule;
  std::string kernels;  // "megatron" (Megatron-LM's fused kernels) or "eager"
  std::string recompute;  // activation recomputation: "none" or "full"
  bool sequence_parallel = false;
  bool distributed_optimizer = false;  // ZeRO-1: optimizer state sharded over dp
  std::string cluster_file;  // gpus/clusters/*.toml the links came from; empty: the workload's table / defaults
  bool overlap_grad_reduce = true;
  double bucket_mb = 0;
  double intra_bw_gbps = 0, intra_latency_us = 0, intra_efficiency = 0;
  double inter_bw_gbps = 0, inter_latency_us = 0, inter_efficiency = 0;
  double iteration_s = 0, pipeline_s = 0, p2p_bytes = 0, grad_bytes_per_rank = 0;
  double embedding_sync_s = 0;  // tied embeddings over pipeline stages: first/last-stage gradient all-reduce
  std::vector<timeline_device> devices;
};

// The critical device: the one whose iteration ends last (ties: the first); nullptr without devices.
const timeline_device* critical_device(const parallel_timeline& t);

struct state_layout;

// Bytes of model state on one GPU of a stage: state_bytes() of its parameter share, with the optimizer's part (master
// copies and moments, state_layout::sharded) divided by dp under the distributed optimizer.
double device_state_bytes(const timeline_device& d, const parallel_timeline& t, const state_layout& s);
// State plus peak activations.
double device_memory_bytes(const timeline_device& d, const parallel_timeline& t, const state_layout& s);

}  // namespace ns
