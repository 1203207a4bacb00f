// engine/core/graph.h — operator graph (nodes) and the kernels nodes expand into.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ns {

enum class phase { forward, backward, accumulate, optimizer };
// collective: inter-GPU communication (all-reduce, send/recv, ...) priced by scripts/neusight/collectives.lua;
// its latency is always fixed (`seconds`), never predicted.
// attention: one fused scaled-dot-product-attention kernel (FlashAttention-style prefill, its backward, or decode
// over a KV cache). Its dims: b = batch, m = query length, k = key/value length, n = head dim, rows = query heads,
// hidden = key/value heads; `op` names the variant ("causal", "full", "causal_bwd", "full_bwd", "decode").
enum class kernel_kind { gemm, bmm, elementwise, softmax, layernorm, memory, collective, attention };

std::string_view phase_name(phase p);
std::string_view kernel_kind_name(kernel_kind k);
std::optional<kernel_kind> kernel_kind_parse(std::string_view s);
std::vector<std::string> kernel_kind_names();

// Bytes per element; throws ns::error for an unknown dtype.
int dtype_bytes(std::string_view dtype);
// Every dtype the engine knows and its bytes per element: the one table (Lua reads it as require("neusight").dtype_sizes;
// scripts/neusight/kernels.lua, the sandbox's test globals).
const std::vector<std::pair<std::string, int>>& dtype_sizes();
// Their names, in that table's order (for messages).
const std::vector<std::string>& dtype_names();

using shape = std::vector<int64_t>;
int64_t shape_numel(const shape& s);
std::string shape_str(const shape& s);

using attr_value = std::variant<double, bool, std::string>;

struct node {
  std::string op;     // op rule name: ops/<op>.lua
  std::string name;   // unique within the graph, e.g. "h.attn.qkv"
  std::string layer;  // "" outside replicated layers
  std::vector<shape> inputs;
  shape output;
  std::string dtype = "fp32";
  int64_t count = 1;   // replication (e.g. n_layer identical layers)
  double params = 0;   // trainable parameters owned by this node
  bool optimizer = false;  // an optimizer-step node: its forward kernels are charged to phase::optimizer
  std::map<std::string, attr_value> attrs;
};

struct kernel {
  kernel_kind kind = kernel_kind::memory;
  std::string name;  // reference primitive name: "Linear", "BMM", "VECadd", "MEM", ...
  std::string op;    // elementwise op ("add", "mulu", ...), empty otherwise
  std::string dtype = "fp32";
  int64_t b = 0, m = 0, n = 0, k = 0;  // gemm/bmm; n is the reduction dimension (data convention)
  int64_t rows = 0, hidden = 0;        // vector kernels
  // Attention: the KV cache's element type when it differs from dtype (an fp8 KV cache under bf16 compute; empty =
  // dtype). Only the K/V bytes change; FLOPs run at dtype (scripts/neusight/kernels.lua attention()).
  std::string kv_dtype;
  // Attention: the FLOPs and bytes one more key adds (queries kept, the cache one token longer), from
  // scripts/neusight/kernels.lua attention(); 0 = not given (the predictor's KV-length envelope then makes no copies).
  double kv_flops = 0, kv_bytes = 0;
  // GEMM (linear): bytes per element of the weight operand (n × k) under weight-only quantisation (int4 = 0.5);
  // 0 = dtype's. Activations and compute stay at dtype (the kernel dequantises; scripts/neusight/kernels.lua).
  double weight_bytes = 0;
  // GEMM, BMM: the activation quantisation before the kernel, set by the op rules (attrs.act_quant): "" none,
  // "dynamic_tensor" vLLM's dynamic per-tensor fp8 scaling (absmax over the activations, one atomic per token row on
  // the scale, then the quantising pass), which gemm_fp8 prices as a stage of its own (tile_model.h quant_stage).
  std::string act_quant;
  // GEMM: the weight-gradient GEMM of its node's backward (scripts/neusight/rules.lua linear), set by the op rule; the
  // parallel timeline hides a column-parallel linear's input-gradient collective under it (neusight.parallel.timeline).
  // Not an input of the predictors.
  bool wgrad = false;
  double flops = 0;
  double bytes = 0;
  std::optional<double> seconds;  // fixed latency (fallback rules, measured values): bypasses the predictor
  // Library tile, filled by the tiling rules (scripts/tiling/): tile_m × tile_k output tile for GEMMs
  // (tile_m along m, tile_k along k), elements per thread block for vector kernels.
  int64_t tile_m = 0, tile_k = 0, tile_elems = 0;
  // Split-K factor of a GEMM tile (tensor-core rule; fp32 rules past the data's reductions): the reduction n is cut
  // into tile_split slices, each a thread block of its own (tile_split × the output tiles in all), as cuBLAS' split-K
  // / stream-K kernels do when the output tiles alone cannot fill the SMs (scripts/tiling/gemm.lua).
  int64_t tile_split = 1;
  // An NVIDIA fp32 GEMM's alternative tile (scripts/tiling/gemm.lua: the rule's tile for twice its rows in whole row
  // bands, where it differs; weights/TILE_SWITCH_RULE.md): the neusight predictor prices the kernel with it too and
  // takes the lesser. 0: none.
  int64_t tile_alt_m = 0, tile_alt_k = 0, tile_alt_split = 1;
  // A tile described by its work (attention kernels, scripts/tiling/attention.lua): thread blocks launched, and
  // FLOPs and bytes streamed per block. 0 when the tile is a GEMM or vector tile.
  double tile_blocks = 0, tile_flops = 0, tile_bytes = 0;
  // An element-wise tensor too large for 32-bit indexing, which PyTorch's TensorIterator runs as several launches
  // (scripts/tiling/vec.lua): the most elements one launch takes (tile_piece) and its elements per thread block
  // (tile_piece_elems), the tile_elems of a kernel that size. 0 when the kernel runs as one launch.
  int64_t tile_piece = 0, tile_piece_elems = 0;
  std::string tile_kernel;  // the library kernel the rule predicts, e.g. "ampere_sgemm_128x64_tn"
};

// Where the i-th kernel of a costing call comes from, as a message names it ("g.csv:12: column 'FwOps': kernel
// 'Linear'"): a file reader's row. Empty: kernels of no file.
using kernel_where = std::function<std::string(size_t)>;

// Fills FLOPs, bytes and name of kernels whose kind, op, dims and dtype are set. The one cost formula per kernel
// kind lives in Lua (scripts/neusight/kernels.lua), and so do its checks (an operand of more than 2^48 elements): the
// readers of engine/ingest, which know no Lua, take it as this callback (session::costing()) and give it where each
// kernel comes from, so that a kernel the formula refuses is an error at its row (where(i) + ": " + the message).
using kernel_costing = std::function<void(std::vector<kernel*>&, const kernel_where&)>;

// One kernel of one node in one phase; `count` is the node's replication.
struct kernel_instance {
  size_t node = 0;
  phase ph = phase::forward;
  kernel k;
};

// The kernels a node's op rule (ops/<op>.lua) gives for training, forward and backward, GPU-independent
// (session::node_rule()): how readers of engine/ingest price a row by the rule that owns it, without knowing Lua.
using node_rule = std::function<std::vector<kernel_instance>(const node&)>;

struct graph {
  std::string model;
  std::string origin;  // the file it came from (a workload script, --model config.json), named in rule errors; or empty
  std::vector<node> nodes;
  // Trainable parameters: Σ params × count over the nodes (the optimizer node owns none).
  double params_total() const;
};

}  // namespace ns
