// engine/core/forecast.h — per-kernel latencies summed into phase totals and an end-to-end latency.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "core/figures.h"
#include "core/graph.h"
#include "core/roofline.h"

namespace ns {

struct family_time {
  std::string family;
  double seconds = 0;
  // Effective number of distinct kernels, (Σ s)² / Σ s² over the graph's kernel entries (a node's kernel replicated
  // over layers is one entry: the same shape errs the same way): how far the kernels' own errors average out.
  double kernels = 0;
  // Σ roofline_floor_seconds × replication over the family's kernels: the least time its kernels can take (0 from
  // forecast::seconds_by_family(), which computes no floors).
  double floor_seconds = 0;
  // The largest value of the family's range input (engine/core/tile_model.h family_range_input, "" for none) among its
  // kernels: what scripts/neusight/uncertainty.lua compares with the weights' [training.range].
  std::string range_input;
  double range_most = 0;
};

struct forecast {
  graph g;
  std::vector<kernel_instance> kernels;
  std::vector<double> seconds_each;             // per kernel, one instance
  std::array<double, 4> phase_seconds{};        // indexed by phase, replication included

  double seconds(size_t i) const { return seconds_each[i] * double(g.nodes[kernels[i].node].count); }
  double phase_total(phase p) const { return phase_seconds[size_t(p)]; }
  // forward + backward (incl. gradient accumulation) + optimizer
  double total() const;
  double flops_total() const;
  // FLOPs of one phase's kernels, replication included.
  double phase_flops(phase p) const;
  // The model's FLOPs of one phase (scripts/neusight/figures.lua model FLOPs): phase_flops with each node's forward and
  // backward kernels scaled by attrs.model_flops_share in (0, 1] (the busiest expert-parallel rank's experts, moe.lua
  // mean_rank_share: mean / busiest rows), each kernel divided by attrs.model_flops_copies (tp for a node every tensor-
  // parallel rank runs whole on the same data: scripts/neusight/parallel/shard.lua mark_replicated) and gradient
  // accumulation times attrs.model_flops_shards (ep for a local expert's weights: workload.lua; figures counts the
  // accumulation once per model parameter) and divided by attrs.model_flops_weight_copies (tp for a node whose rows
  // sequence parallelism splits while every rank holds its weights whole: a router under Megatron's token dispatcher,
  // mark_replicated). All numbers >= 1, shards and weight copies whole ones (copies may be fractional: a fused
  // node split in some parts and replicated in others, scripts/neusight/nodes.lua qkv); 1 without an attribute;
  // another value is an error naming the node. Equal to phase_flops where no node sets them.
  double phase_model_flops(phase p) const;
  // Trainable parameters of the graph (node params × replication), optimizer nodes excluded.
  double params_total() const;
  // Time of the predictor's kernel families (tile_model.h family_name), replication included, in family order;
  // "other" for the kernels no family's model prices (memory copies, collectives, fixed latencies). Families with no
  // kernel are left out. What the uncertainty band and calibration (scripts/neusight/uncertainty.lua,
  // calibration.lua) weigh each family's error by; floor_seconds 0: the floors are only for the callers that pass the
  // GPU (a roofline bound per kernel).
  std::vector<family_time> seconds_by_family() const;
  // The same with each family's roofline floor on `gpu` (floor_seconds): what family_inputs_add and
  // family_floor_inputs_add hand the scripts.
  std::vector<family_time> seconds_by_family(const gpu_spec& gpu) const;
};

// Checks node n's model-FLOPs attributes (model_flops_share, model_flops_copies, model_flops_shards,
// model_flops_weight_copies) by the rule forecast::phase_model_flops reads them with, before anything is priced; the
// error starts with `who` (the workload's words for the node: its script's line where the script writes it,
// engine/lua/session.cpp).
void node_model_flops_check(const node& n, const std::string& who);

// The forecast's time by kernel family as the inputs scripts/neusight/uncertainty.lua and calibration.lua read:
// family_s.<family> (seconds) and family_n.<family> (effective kernel count); roofline.<family> = true for the families
// `pred` does not price with its own model on `vendor` (the roofline stood in): the error table says nothing of them;
// floor_s.<family> (seconds, when > 0): the family's roofline floor, what scripts/neusight/figures.lua floor_warning and
// calibration.lua hold a forecast and a measurement to.
void family_inputs_add(figure_inputs& in, const std::vector<family_time>& families, const predictor& pred,
                       const std::string& vendor);
// The floor_s.<family> inputs alone (search's floor check, which reads nothing else of them).
void family_floor_inputs_add(figure_inputs& in, const std::vector<family_time>& families);

forecast forecast_make(graph g, std::vector<kernel_instance> kernels, std::vector<double> seconds_each);

}  // namespace ns
