// engine/ingest/opgraph.cpp — importing opgraph/<tag>.csv: rows → nodes, FwOps/BwOps/AccOps → kernels, the
// traced layer located by the reference's name markers. The decomposition is the file's; nothing is re-derived,
// except where it departs from the kernels HuggingFace launches (opgraph_options::corrections, below).
#include "ingest/opgraph.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ingest/csv.h"
#include "ingest/pyliteral.h"
#include "core/text.h"

namespace ns {
namespace fs = std::filesystem;

namespace {

// Layer markers of the reference's traces (neusight/Prediction/aggregator.py::replicate_layer, spec §1.7):
// rows from the first start marker to the end marker after it form the one traced transformer layer.
// They are properties of the traced FX graphs (HuggingFace module paths and FX's numbering), not of the
// method, so they live here beside the importer. The family is the model name's prefix in the file tag.
struct layer_markers {
  const char* prefix;               // model-name prefix: gpt2_large, gpt3_xl, bert_large, opt_13, switchxl4
  std::vector<const char*> starts;  // first present wins; empty: the whole model was traced (no replication)
  const char* end;
  const char* layers_key;           // HuggingFace config key of the layer count
};

const std::vector<layer_markers>& marker_table() {
  static const std::vector<layer_markers> table = {
      // GPT-2 and GPT-3 (GPT-2 code path). `_grad` rows precede the layer norm when DP rows were inserted.
      {"gpt", {"transformer_h_0_ln_1_grad", "transformer_h_0_ln_1"}, "add_15", "n_layer"},
      {"bert", {"bert_encoder_layer_0_attention_self_query"}, "bert_encoder_layer_0_output_layer_norm",
       "num_hidden_layers"},
      {"opt", {"model_decoder_layers_0_self_attn_layer_norm"}, "view_11", "num_hidden_layers"},
      {"switch", {}, nullptr, "num_layers"},  // Switch Transformer: traced whole (encoder and decoder)
  };
  return table;
}

const std::set<std::string> elementwise_ops = {"add", "addu", "sub", "subu", "mul", "mulu", "div",
                                                "divu", "pow", "powu", "tanh", "relu", "gelu"};
const std::set<std::string> collective_kernels = {"ALLREDUCE", "ALLREDUCE_ASYNC", "SENDRECV"};

// The row being read: every error names file:line and the column.
struct row_context {
  std::string where;
  [[noreturn]] void fail(const char* column, const std::string& what) const {
    throw error(where + ": column '" + column + "': " + what);
  }
};

std::string py_str(const py_value& v) {
  switch (v.t) {
    case py_value::type::integer: return std::to_string(v.i);
    case py_value::type::string: return "'" + v.s + "'";
    default: break;
  }
  const char* open = v.t == py_value::type::list ? "[" : v.t == py_value::type::tuple ? "(" : "{";
  const char* close = v.t == py_value::type::list ? "]" : v.t == py_value::type::tuple ? ")" : "}";
  std::string out = open;
  for (size_t i = 0; i < v.items.size(); ++i) out += (i ? ", " : "") + py_str(v.items[i]);
  if (v.t == py_value::type::tuple && v.items.size() == 1) out += ",";
  return out + close;
}

bool is_list_or_tuple(const py_value& v) { return v.t == py_value::type::list || v.t == py_value::type::tuple; }

// A dimension above 2^32 is no tensor anyone ran (and products of a few would wrap an int64): an error, not a number.
constexpr int64_t max_dim = int64_t(1) << 32;
// The most elements of a row's shapes (InputShapes, OutputShape, MEM): 2^48, the value of neusight.kernels'
// MAX_ELEMENTS, whose rule costing applies to the kernels (a GEMM's operands, a vector kernel's B × H).
constexpr int64_t max_elements = int64_t(1) << 48;

// A tuple (or list) of non-negative integers, each at most max_dim, at most 2^48 elements in all.
std::optional<shape> shape_of(const py_value& v) {
  if (!is_list_or_tuple(v)) return std::nullopt;
  shape s;
  int64_t elements = 1;
  for (const auto& d : v.items) {
    if (d.t != py_value::type::integer || d.i < 0 || d.i > max_dim) return std::nullopt;
    if (d.i > 0 && elements > max_elements / d.i) return std::nullopt;
    elements *= std::max<int64_t>(d.i, 1);
    s.push_back(d.i);
  }
  return s;
}

// Exactly `names.size()` positive integers of at most 2^32, e.g. Linear (T, I, O).
std::vector<int64_t> dims_of(const py_value& args, const std::string& kernel_name, const char* names,
                             size_t count, const row_context& row, const char* column) {
  std::vector<int64_t> dims;
  if (is_list_or_tuple(args) && args.items.size() == count)
    for (const auto& d : args.items)
      if (d.t == py_value::type::integer && d.i > 0) dims.push_back(d.i);
  for (const int64_t d : dims)
    if (d > max_dim)
      row.fail(column, "kernel '" + kernel_name + "' has a dimension " + std::to_string(d) + " over 2^32, got " + py_str(args));
  if (dims.size() != count)
    row.fail(column, "kernel '" + kernel_name + "' needs " + std::to_string(count) + " positive integers " + names +
                         ", got " + py_str(args));
  return dims;
}

// Element count of a shape. A tensor beyond 2^53 elements (exact in a double) is an error, not an int64 overflow.
double numel_checked(const shape& s, const row_context& row, const char* column) {
  double n = 1;
  for (int64_t d : s) n *= double(d);
  if (n > 9007199254740992.0) row.fail(column, "shape " + shape_str(s) + " has more than 2^53 elements");
  return n;
}

struct row_shapes {
  double inputs_numel = 0;
  double output_numel = 0;  // 0: the row has no output shape
};

// One [name, args] entry of FwOps/BwOps/AccOps. Its dimensions are checked here (positive, at most 2^32); what the
// kernel's tensors may hold (a GEMM operand or a vector kernel of at most 2^48 elements) is neusight.kernels' rule,
// applied when opgraph_parse costs the kernels, at the kernel's row and column.
std::optional<kernel> kernel_make(const std::string& name, const py_value& args, const row_shapes& rs,
                                  const row_context& row, const char* column) {
  kernel k;
  k.name = name;
  k.dtype = "fp32";  // the reference's graphs and measurements are fp32 throughout
  if (name == "Linear") {
    const auto d = dims_of(args, name, "(T, I, O)", 3, row, column);
    k.kind = kernel_kind::gemm;
    k.b = 1, k.m = d[0], k.n = d[1], k.k = d[2];
  } else if (name == "BMM") {
    const auto d = dims_of(args, name, "(B, M, N, K)", 4, row, column);
    k.kind = kernel_kind::bmm;
    k.b = d[0], k.m = d[1], k.n = d[2], k.k = d[3];
  } else if (name.rfind("VEC", 0) == 0) {
    const std::string op = name.substr(3);
    if (op == "softmax") k.kind = kernel_kind::softmax;
    else if (op == "ln") k.kind = kernel_kind::layernorm;
    else if (elementwise_ops.count(op)) k.kind = kernel_kind::elementwise, k.op = op;
    else row.fail(column, "unknown vector kernel '" + name + "'");
    const auto d = dims_of(args, name, "(B, H)", 2, row, column);
    k.rows = d[0], k.hidden = d[1];
    const double numel = double(k.rows) * double(k.hidden);  // at most 2^64: neusight.kernels refuses past 2^48
    if (!(rs.output_numel > 0))
      row.fail("OutputShape", "vector kernel '" + name + "' needs the row's output shape (bytes per element)");
    // MemPerO (spec §1.3): bytes per output element from the row's own shapes, for bw/acc kernels too. The file's
    // rule (its kernels list no operand shapes), so the reader's: opgraph_parse sets these bytes after `cost` gave the
    // FLOPs (neusight.kernels).
    const double mem_per_o = 4.0 * (rs.inputs_numel + rs.output_numel) / rs.output_numel;
    k.bytes = mem_per_o * numel;
    return k;
  } else if (name == "MEM") {
    if (!is_list_or_tuple(args) || args.items.empty())
      row.fail(column, "kernel 'MEM' needs a tuple of shapes, got " + py_str(args));
    k.kind = kernel_kind::memory;
    double elems = 0;
    for (const auto& s : args.items) {
      const auto sh = shape_of(s);
      if (!sh) row.fail(column, "kernel 'MEM': expected a shape (a tuple of integers of at most 2^32, at most 2^48 elements), got " + py_str(s));
      elems += numel_checked(*sh, row, column);
    }
    k.bytes = 4.0 * elems;  // every listed shape, scalars (1,) included
    return k;
  } else if (collective_kernels.count(name)) {
    const auto d = dims_of(args, name, "(elements,)", 1, row, column);
    k.kind = kernel_kind::collective;
    k.op = name == "SENDRECV" ? "send_recv" : "all_reduce";
    k.bytes = 4.0 * double(d[0]);
    return k;
  } else {
    row.fail(column, "unknown kernel '" + name + "'" +
                         text_did_you_mean(name, {"Linear", "BMM", "MEM", "VECadd", "VECmul", "VECsoftmax", "VECln"}));
  }
  return k;  // FLOPs and bytes of Linear and BMM, FLOPs of VEC: opgraph_parse's `cost` (neusight.kernels)
}

const layer_markers* family_find(const opgraph& og, const std::map<std::string, size_t>& row_of) {
  if (og.tag)
    for (const auto& m : marker_table())
      if (og.tag->model.rfind(m.prefix, 0) == 0) return &m;
  for (const auto& m : marker_table())  // a renamed file: recognise the family by its markers
    for (const char* s : m.starts)
      if (row_of.count(s)) return &m;
  return nullptr;
}

void layer_locate(opgraph& og) {
  std::map<std::string, size_t> row_of;  // first row of each name
  for (size_t i = 0; i < og.g.nodes.size(); ++i) row_of.emplace(og.g.nodes[i].name, i);
  const layer_markers* fam = family_find(og, row_of);
  if (!fam) {
    og.warnings.push_back(og.source + ": no layer markers known for model '" + (og.tag ? og.tag->model : og.stem) +
                          "': every row counts once (whole model)");
    return;
  }
  og.layers_key = fam->layers_key;
  if (og.tag && og.tag->option == "fusion") {
    og.warnings.push_back(og.source +
                          ": fusion graph: whole model, fused rows are predicted kernel by kernel (the reference's "
                          "fused-kernel model, spec §1.6, is not implemented)");
    return;
  }
  if (fam->starts.empty()) return;  // traced whole
  std::optional<size_t> first;
  for (const char* s : fam->starts)
    if (auto it = row_of.find(s); it != row_of.end() && (!first || it->second < *first)) first = it->second;
  if (!first)
    throw error(og.source + ": layer start marker '" + fam->starts.back() + "' not found (model family '" +
                fam->prefix + "', spec §1.7)");
  for (size_t i = *first; i < og.g.nodes.size(); ++i)
    if (og.g.nodes[i].name == fam->end) {
      og.layer = std::make_pair(*first, i);
      return;
    }
  throw error(og.source + ":" + std::to_string(og.lines[*first]) + ": layer end marker '" + fam->end +
              "' not found after the start marker '" + og.g.nodes[*first].name + "'");
}

// A row the reference left without kernels although it launches one: HuggingFace OPT's attention clamps its scores,
// `torch.max(attn_weights, torch.tensor(finfo.min))` (transformers' OPTAttention), an element-wise maximum over
// (batch, heads, tgt, src) with a one-element tensor, traced as a `max` / `max_<n>` call with "misc" and no FwOps.
bool is_score_clamp(const node& n, const row_shapes& rs) {
  const bool named_max = n.name == "max" || (n.name.rfind("max_", 0) == 0 && n.name.size() > 4 &&
                                             n.name.find_first_not_of("0123456789", 4) == std::string::npos);
  return named_max && n.op == "misc" && n.inputs.size() == 2 && shape_numel(n.inputs[1]) == 1 &&
         n.output == n.inputs[0] && n.output.size() >= 2 && rs.output_numel > 1;
}

// Its kernels, forward and backward, are those of the op rule that owns torch.maximum (ops/maximum.lua) for a node
// of the row's shapes: one source for them, as for every forecast.
void score_clamp_kernels(const node& n, size_t node_index, const node_rule& rule, std::vector<kernel_instance>& out) {
  node m = n;
  m.op = "maximum";
  for (auto& ki : rule(m)) {
    ki.node = node_index;
    out.push_back(std::move(ki));
  }
}

// Capacity-padded MoE experts (the reference's Switch graphs). The traced Switch code dispatches each expert's
// tokens into a (capacity, d_model) buffer, `setitem(buffer, (1,), routed (r, d_model))`, and runs the expert
// (the HuggingFace module path `…_experts_expert_<i>_{wi,act,wo}`) on the whole buffer: Linear (capacity, …).
// HuggingFace's SwitchTransformersSparseMLP runs `expert(hidden_states[token_indices])`: the expert's GEMMs see
// the r routed rows, and an expert that was routed no token launches no kernel. The traces record r (the gathered
// rows; with their untrained routers 0 or the capacity per expert), so the expert kernels are priced at r rows.
// Measured evidence (weights/ACCURACY.md): on the A100 the capacity-padded graph's GEMMs alone, at their isolated
// measured latencies, exceed both measured switchxl4 inference runs. Returns the number of expert calls re-priced
// and of those that were routed no token.
std::pair<size_t, size_t> experts_at_routed_rows(opgraph& og) {
  struct routed_rows {
    int64_t capacity = 0, rows = 0;
  };
  std::optional<routed_rows> cur;
  std::vector<std::optional<routed_rows>> of_node(og.g.nodes.size());
  std::set<std::string> calls, empty_calls;  // "<layer path>_experts_expert_<i>" prefixes
  for (size_t i = 0; i < og.g.nodes.size(); ++i) {
    const node& n = og.g.nodes[i];
    if (n.op == "setitem") {
      cur.reset();
      if (n.inputs.size() >= 3 && n.inputs[0].size() == 2 && n.inputs[2].size() == 2 &&
          n.inputs[0][1] == n.inputs[2][1] && n.inputs[2][0] <= n.inputs[0][0] && n.inputs[0][0] != n.inputs[0][1])
        cur = routed_rows{n.inputs[0][0], n.inputs[2][0]};
      continue;
    }
    const size_t at = n.name.find("_experts_expert_");
    if (!cur || at == std::string::npos || n.inputs.empty() || n.inputs[0].empty() || n.inputs[0][0] != cur->capacity)
      continue;
    of_node[i] = cur;
    const size_t end = n.name.find('_', at + 16);  // after the expert index
    const std::string call = n.name.substr(0, end);
    calls.insert(call);
    if (cur->rows == 0) empty_calls.insert(call);
  }
  if (calls.empty()) return {0, 0};
  std::vector<kernel_instance> kept;
  kept.reserve(og.kernels.size());
  for (auto& ki : og.kernels) {
    const auto& rr = of_node[ki.node];
    if (!rr) {
      kept.push_back(std::move(ki));
      continue;
    }
    if (rr->rows == 0) continue;  // never called: no forward, backward or weight-gradient kernel
    kernel& k = ki.k;
    if (k.kind == kernel_kind::gemm || k.kind == kernel_kind::bmm) {
      if (k.m == rr->capacity) k.m = rr->rows;       // forward and data gradient: one row per token
      else if (k.n == rr->capacity) k.n = rr->rows;  // weight gradient: the reduction runs over the tokens
    } else if ((k.kind == kernel_kind::elementwise || k.kind == kernel_kind::softmax ||
                k.kind == kernel_kind::layernorm) && k.rows == rr->capacity) {
      const double f = double(rr->rows) / double(rr->capacity);
      k.rows = rr->rows, k.flops *= f, k.bytes *= f;
    }
    kept.push_back(std::move(ki));
  }
  og.kernels = std::move(kept);
  return {calls.size(), empty_calls.size()};
}

}  // namespace

std::optional<opgraph_tag> opgraph_tag_parse(std::string_view stem) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t dash = stem.find('-', start);
    parts.emplace_back(stem.substr(start, dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  if (parts.size() < 4 || parts[0].empty()) return std::nullopt;
  opgraph_tag t;
  t.model = parts[0];
  if (parts[1] == "inf") t.mode = "inference";
  else if (parts[1] == "train") t.mode = "train";
  else return std::nullopt;
  auto positive = [](const std::string& s, int64_t& out) {
    if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    out = std::stoll(s);
    return out > 0;
  };
  if (!positive(parts[2], t.seq) || !positive(parts[3], t.batch)) return std::nullopt;
  for (size_t i = 4; i < parts.size(); ++i) t.option += (i > 4 ? "-" : "") + parts[i];
  return t;
}

opgraph opgraph_parse(std::string_view text, const std::string& source, const kernel_costing& cost,
                      const opgraph_options& options) {
  const csv_table t = csv_parse(text, source);
  opgraph og;
  og.source = source;
  og.stem = fs::path(source).stem().string();
  og.tag = opgraph_tag_parse(og.stem);
  og.g.model = og.tag ? og.tag->model : og.stem;
  // Looked up in the file's column order, so a missing column is reported as a reader would find it.
  const std::pair<const char*, phase> phase_columns[] = {
      {"FwOps", phase::forward}, {"BwOps", phase::backward}, {"AccOps", phase::accumulate}};
  const size_t c_name = t.column("Name"), c_op = t.column("OpName");
  size_t phase_col[3];
  for (size_t p = 0; p < 3; ++p) phase_col[p] = t.column(phase_columns[p].first);
  size_t clamp_rows = 0;  // OPT's attention-score clamps (is_score_clamp)
  const size_t c_prev = t.column("Prev"), c_next = t.column("Next"), c_in = t.column("InputShapes"),
               c_out = t.column("OutputShape");

  og.g.nodes.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    const row_context ctx{t.where(r)};
    auto literal = [&](size_t col) {
      try {
        return py_parse(row[col]);
      } catch (const error& e) {
        ctx.fail(t.header[col].c_str(), e.what());
      }
    };
    node n;
    n.name = row[c_name];
    n.op = row[c_op];
    if (n.name.empty()) ctx.fail("Name", "empty node name");
    if (n.op.empty()) ctx.fail("OpName", "empty operator name");
    for (size_t col : {c_prev, c_next}) {
      const py_value v = literal(col);
      bool ok = v.t == py_value::type::set;
      for (const auto& item : v.items) ok = ok && item.t == py_value::type::string;
      if (!ok) ctx.fail(t.header[col].c_str(), "expected a set of node names, got " + py_str(v));
    }
    row_shapes rs;
    const py_value ins = literal(c_in);
    if (ins.t != py_value::type::list) ctx.fail("InputShapes", "expected a list of shapes, got " + py_str(ins));
    for (const auto& s : ins.items) {
      const auto sh = shape_of(s);
      if (!sh) ctx.fail("InputShapes", "expected a shape (a tuple of integers of at most 2^32, at most 2^48 elements), got " + py_str(s));
      n.inputs.push_back(*sh);
      rs.inputs_numel += numel_checked(*sh, ctx, "InputShapes");
    }
    const py_value out = literal(c_out);
    if (out.t == py_value::type::list && out.items.empty()) {
      // rows without a tensor output (the reference's inserted gradient all-reduce rows)
    } else if (const auto sh = out.t == py_value::type::tuple ? shape_of(out) : std::nullopt) {
      n.output = *sh;
      rs.output_numel = numel_checked(*sh, ctx, "OutputShape");
    } else {
      ctx.fail("OutputShape", "expected a shape (a tuple of integers of at most 2^32, at most 2^48 elements), got " + py_str(out));
    }
    const size_t node_index = og.g.nodes.size(), kernels_before = og.kernels.size();
    bool collective_row = false;
    for (size_t p = 0; p < 3; ++p) {
      const char* column = phase_columns[p].first;
      const py_value ops = literal(phase_col[p]);
      if (ops.t != py_value::type::list) ctx.fail(column, "expected a list of [name, args] kernels, got " + py_str(ops));
      for (const auto& entry : ops.items) {
        if (!is_list_or_tuple(entry) || entry.items.size() != 2 || entry.items[0].t != py_value::type::string)
          ctx.fail(column, "expected a [name, args] kernel, got " + py_str(entry));
        const std::string& name = entry.items[0].s;
        if (auto k = kernel_make(name, entry.items[1], rs, ctx, column)) {
          // AccOps are the AccumulateGrad kernels, one VECadd [1, numel] per parameter tensor (spec §1.2):
          // the only place the graph states its parameter count (inference graphs have none).
          if (phase_columns[p].second == phase::accumulate) n.params += double(k->rows) * double(k->hidden);
          if (k->kind == kernel_kind::collective) ++og.collectives[name], collective_row = true;
          og.kernels.push_back({node_index, phase_columns[p].second, std::move(*k)});
        }
      }
    }
    if (collective_row && og.collective_rows++ == 0) og.collective_first = ctx.where;
    if (options.corrections && og.kernels.size() == kernels_before && is_score_clamp(n, rs)) {
      ++clamp_rows;
      if (options.rule) score_clamp_kernels(n, node_index, options.rule, og.kernels);
    }
    og.g.nodes.push_back(std::move(n));
    og.lines.push_back(t.lines[r]);
  }
  layer_locate(og);
  if (clamp_rows > 0)
    og.warnings.push_back(og.source + ": " + std::to_string(clamp_rows) +
                          " 'max (attention score clamp)' rows without kernels in the graph " +
                          (options.rule ? "priced as the element-wise kernels they launch"
                                        : "left without kernels (no op rule to price them)"));
  if (options.corrections) {
    const auto [calls, empty] = experts_at_routed_rows(og);
    if (calls > 0)
      og.warnings.push_back(og.source + ": " + std::to_string(calls) +
                            " capacity-padded MoE expert calls priced at the tokens the trace routed to them (" +
                            std::to_string(empty) + " routed none: no kernels), as HuggingFace runs them");
  }
  // neusight.kernels costs the Linear, BMM and VEC kernels (the one cost formula); a VEC kernel keeps the file's
  // MemPerO bytes (kernel_make).
  std::vector<kernel*> costed;
  std::vector<const kernel_instance*> costed_of;  // each costed kernel's instance: its row and column in messages
  std::vector<double> mem_per_o_bytes;
  for (auto& ki : og.kernels) {
    const kernel_kind kind = ki.k.kind;
    if (kind == kernel_kind::gemm || kind == kernel_kind::bmm) costed.push_back(&ki.k), costed_of.push_back(&ki);
    // the file's VEC kernels: kernel_make leaves their FLOPs 0 (the clamp rule's kernels come costed by their rule)
    if ((kind == kernel_kind::elementwise || kind == kernel_kind::softmax || kind == kernel_kind::layernorm) &&
        ki.k.flops == 0)
      costed.push_back(&ki.k), costed_of.push_back(&ki), mem_per_o_bytes.push_back(ki.k.bytes);
  }
  cost(costed, [&](size_t i) {
    const kernel_instance& ki = *costed_of[i];
    const char* column = ki.ph == phase::forward ? "FwOps" : ki.ph == phase::backward ? "BwOps" : "AccOps";
    return og.source + ":" + std::to_string(og.lines[ki.node]) + ": column '" + column + "': kernel '" + ki.k.name + "'";
  });
  size_t v = 0;
  for (kernel* k : costed)
    if (k->kind != kernel_kind::gemm && k->kind != kernel_kind::bmm) k->bytes = mem_per_o_bytes[v++];
  return og;
}

opgraph opgraph_load(const std::string& path, const kernel_costing& cost, const opgraph_options& options) {
  return opgraph_parse(text_file_read(path, path, text_file_max_data), path, cost, options);
}

std::optional<int64_t> opgraph_config_layers(const opgraph& og, fs::path* config) {
  if (!og.tag || og.layers_key.empty()) return std::nullopt;
  const fs::path file =
      (fs::path(og.source).parent_path() / ".." / "DLmodel_configs" / (og.tag->model + ".json")).lexically_normal();
  if (config) *config = file;
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  const std::string text = text_file_read(file.string(), file.string(), text_file_max_script);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw error(file.string() + ": invalid JSON: " + e.what());
  }
  const auto it = j.find(og.layers_key);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0)
    throw error(file.string() + ": key '" + og.layers_key + "' must be a positive integer (the layer count)");
  return it->get<int64_t>();
}

int64_t opgraph_layers(const opgraph& og, int64_t requested, std::vector<std::string>& warnings) {
  if (!og.layer) {
    if (requested > 1)
      warnings.push_back(og.source + ": the graph has no replicated layer (whole model): " +
                         std::to_string(requested) + " layers ignored");
    return 1;
  }
  if (requested > 0) return requested;
  fs::path config;
  if (const auto n = opgraph_config_layers(og, &config)) return *n;
  warnings.push_back(og.source + ": no layer count given and no model config" +
                     (config.empty() ? std::string() : " at " + config.string()) +
                     ": the traced layer counts once (pass --layers N)");
  return 1;
}

void opgraph_replicate(opgraph& og, int64_t layers) {
  if (layers < 1) throw error(og.source + ": layer count must be at least 1 (got " + std::to_string(layers) + ")");
  for (size_t i = 0; i < og.g.nodes.size(); ++i) {
    const bool in_layer = og.layer && i >= og.layer->first && i <= og.layer->second;
    og.g.nodes[i].count = in_layer ? layers : 1;
    og.g.nodes[i].layer = in_layer ? "layer" : "";
  }
}

std::vector<kernel_instance> opgraph_kernels(const opgraph& og, bool training) {
  std::vector<kernel_instance> out;
  out.reserve(og.kernels.size());
  for (const auto& ki : og.kernels)
    if (training || ki.ph == phase::forward) out.push_back(ki);
  return out;
}

std::optional<opgraph_parallel_option> opgraph_parallel_of(const opgraph& og) {
  if (!og.tag) return std::nullopt;
  const std::string& o = og.tag->option;
  const auto number = [](const std::string& s) -> std::optional<int64_t> {
    if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    const int64_t v = std::stoll(s);
    return v >= 1 ? std::optional<int64_t>(v) : std::nullopt;
  };
  if (o.size() < 3) return std::nullopt;
  const std::string kind = o.substr(0, 2), rest = o.substr(2);
  opgraph_parallel_option p;
  if (kind == "dp" || kind == "tp") {
    const auto n = number(rest);
    if (!n) return std::nullopt;
    (kind == "dp" ? p.dp : p.tp) = *n;
    return p;
  }
  if (kind == "pp") {
    const size_t us = rest.find('_');
    const auto n = number(rest.substr(0, us));
    const auto m = us == std::string::npos ? std::optional<int64_t>(1) : number(rest.substr(us + 1));
    if (!n || !m) return std::nullopt;
    p.pp = *n, p.microbatches = *m;
    return p;
  }
  return std::nullopt;
}

void opgraph_check_supported(const opgraph& og) {
  if (og.collectives.empty() || opgraph_parallel_of(og)) return;
  std::string kinds;
  for (const auto& [name, n] : og.collectives) kinds += (kinds.empty() ? "" : ", ") + name + " ×" + std::to_string(n);
  throw error(og.source + ": " + std::to_string(og.collective_rows) + " rows hold collective kernels (" + kinds +
              "), first at " + og.collective_first +
              ": a distributed graph needs its layout in the file name (<model>-train-<seq>-<batch>-dp4, -tp4 or -pp4_1)");
}

}  // namespace ns
