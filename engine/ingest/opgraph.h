// engine/ingest/opgraph.h — the reference's parsed operator graphs (opgraph/<tag>.csv) as nodes and kernels.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/graph.h"

namespace ns {

// The file-name tag <model>-<inf|train>-<seq>-<batch>[-<option>], e.g. gpt2_large-train-1024-4-pp4_1.
struct opgraph_tag {
  std::string model;   // "gpt2_large"
  std::string mode;    // "inference" or "train"
  int64_t seq = 0, batch = 0;
  std::string option;  // "", "fusion", "dp4", "tp4", "pp4_1", ...
};
std::optional<opgraph_tag> opgraph_tag_parse(std::string_view stem);

struct opgraph {
  std::string source;               // the file, as shown in messages
  std::string stem;                 // file name without .csv
  std::optional<opgraph_tag> tag;   // nullopt when the name does not follow the pattern
  graph g;                          // one node per CSV row (op = OpName, name = Name), count 1
  std::vector<size_t> lines;        // CSV line of each node
  std::vector<kernel_instance> kernels;  // FwOps, BwOps, AccOps of every row, in row order
  // Node index range [first, last] of the traced transformer layer (spec §1.7); nullopt for whole-model
  // graphs (Switch, fusion) and models without layer markers.
  std::optional<std::pair<size_t, size_t>> layer;
  std::string layers_key;           // model-config key holding the layer count ("" if the family is unknown)
  // Collective kernels of distributed graphs (ALLREDUCE, ALLREDUCE_ASYNC, SENDRECV): name → occurrences. They are
  // kernels of kind collective (bytes = 4 · elements) without a latency: opgraph_parallel decides what they cost.
  std::map<std::string, size_t> collectives;
  size_t collective_rows = 0;
  std::string collective_first;     // file:line of the first such row
  std::vector<std::string> warnings;
};

// Throws ns::error "<source>:<line>: column '<col>': <what>" for a malformed row; `source`'s file stem
// is the tag. Kernel accounting (fp32, spec §1.3): Linear (T,I,O) → gemm b=1 m=T n=I k=O; BMM (B,M,N,K), their
// FLOPs and bytes from `cost` (session::costing(): neusight.kernels, as forecasts compute them); VEC<op> (B,H)
// with FLOPs from `cost` and bytes = MemPerO·B·H, MemPerO from the row's own shapes (the file's, not a formula; at most
// 2^48 elements); MEM → 4·Σ numel bytes. A kernel `cost` refuses (neusight.kernels: an operand or a vector kernel of
// more than 2^48 elements) is an error "<source>:<line>: column '<col>': kernel '<name>': <its message>".
// Import options. corrections: where the reference's decomposition departs from the kernels HuggingFace launches,
// price what runs (one warning per kind says how many rows): OPT's attention-score clamp `max_<n>` (traced "misc",
// no kernels) gets the kernels of `rule` for an op "maximum" node of its shapes (ops/maximum.lua; without a rule
// the row keeps no kernels and a warning says so); capacity-padded MoE experts (Switch: a setitem of the r
// routed rows into a (capacity, d_model) buffer, then the `…_experts_expert_<i>_*` rows on the whole buffer) are
// priced at the r routed rows, an expert routed no token gets no kernels. false: the rows as traced (the
// model-fidelity and roofline-reference tests compare with those).
struct opgraph_options {
  bool corrections = true;
  node_rule rule;  // session::node_rule()
};
opgraph opgraph_parse(std::string_view text, const std::string& source, const kernel_costing& cost,
                      const opgraph_options& options = {});
opgraph opgraph_load(const std::string& path, const kernel_costing& cost, const opgraph_options& options = {});

// The layer count from the HuggingFace config beside the data: <graph dir>/../DLmodel_configs/<model>.json,
// key og.layers_key. nullopt when there is no such file (or no tag / key); throws if the file lacks the key.
// `config` receives the path looked at.
std::optional<int64_t> opgraph_config_layers(const opgraph& og, std::filesystem::path* config = nullptr);

// The layer count to replicate with: `requested` (> 0, e.g. --layers), else the model config beside the data,
// else 1 with a warning. Whole-model graphs (no traced layer) always give 1; a requested count > 1 for them
// is ignored with a warning. Warnings are appended to `warnings`.
int64_t opgraph_layers(const opgraph& og, int64_t requested, std::vector<std::string>& warnings);

// Sets count = layers on the traced layer's nodes (and the layer name "layer"); others keep count 1.
void opgraph_replicate(opgraph& og, int64_t layers);

// All kernels for training; forward only for inference.
std::vector<kernel_instance> opgraph_kernels(const opgraph& og, bool training);

// The degrees a distributed graph's tag option names: "dp4" → dp 4, "tp4" → tp 4, "pp4_2" → pp 4 with 2
// microbatches; nullopt for other options.
struct opgraph_parallel_option {
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
};
std::optional<opgraph_parallel_option> opgraph_parallel_of(const opgraph& og);

// Throws when the graph holds collectives but its file name names no dp/tp/pp layout, naming them and the first row.
void opgraph_check_supported(const opgraph& og);

}  // namespace ns
