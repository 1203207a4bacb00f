// engine/cli/report.cpp — table / JSON / CSV renderings; every number comes from the forecast, none recomputed.
#include "cli/report.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <map>

#include "core/calibration.h"
#include "core/forecast.h"
#include "core/roofline.h"
#include "core/text.h"
#include <nlohmann/json.hpp>
#include <type_traits>

namespace ns {

namespace {
using json = nlohmann::ordered_json;
constexpr double ms = 1e3;

json dims_json(const kernel& k) {
  switch (k.kind) {
    case kernel_kind::gemm:
    case kernel_kind::bmm: {
      json d = {{"b", k.b}, {"m", k.m}, {"n", k.n}, {"k", k.k}};
      if (k.weight_bytes > 0) d["weight_bytes"] = k.weight_bytes;  // weight-only quantisation
      return d;
    }
    case kernel_kind::attention: {
      json d = {{"batch", k.b}, {"q_len", k.m}, {"kv_len", k.k}, {"head_dim", k.n}, {"heads", k.rows}, {"kv_heads", k.hidden}};
      if (!k.kv_dtype.empty()) d["kv_dtype"] = k.kv_dtype;  // a quantised KV cache
      return d;
    }
    case kernel_kind::memory:
    case kernel_kind::collective: return json::object();
    default: return {{"rows", k.rows}, {"hidden", k.hidden}};
  }
}

json tile_json(const kernel& k) {
  if (k.tile_m > 0) return {{"m", k.tile_m}, {"k", k.tile_k}, {"split", k.tile_split}, {"library_kernel", k.tile_kernel}};
  if (k.tile_elems > 0) return {{"elems", k.tile_elems}};
  if (k.tile_blocks > 0)
    return {{"blocks", k.tile_blocks}, {"flops", k.tile_flops}, {"bytes", k.tile_bytes}, {"library_kernel", k.tile_kernel}};
  return nullptr;
}

// Members of a fused node (attrs.fused, comma-separated, set by scripts/neusight/fusion.lua); empty otherwise.
std::vector<std::string> fused_members(const node& n) {
  std::vector<std::string> out;
  const auto it = n.attrs.find("fused");
  if (it == n.attrs.end()) return out;
  const auto* s = std::get_if<std::string>(&it->second);
  if (!s) return out;
  size_t start = 0;
  while (start <= s->size()) {
    const size_t end = std::min(s->find(',', start), s->size());
    if (end > start) out.push_back(s->substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The memory report's number `key` (m.memory, scripts/neusight/memory.lua), or `fallback` when no report was made
// (predict --graph). A report without the number is an error, never a silent 0 GB that "fits".
double memory_number(const report_meta& m, const char* key, double fallback) {
  if (!m.memory.is_object()) return fallback;
  if (!m.memory.contains(key) || !m.memory[key].is_number())
    throw error(std::string("scripts/neusight/memory.lua report: '") + key + "' must be a number");
  return m.memory[key].get<double>();
}

// The memory report's `fits`, or whether memory_gb fits in the GPU when the report leaves it out; not a boolean: error.
bool memory_fits(const report_meta& m) {
  if (!m.memory.contains("fits")) return memory_number(m, "memory_gb", 0) <= m.gpu->mem_gb;
  if (!m.memory["fits"].is_boolean()) throw error("scripts/neusight/memory.lua report: 'fits' must be a boolean");
  return m.memory["fits"].get<bool>();
}

// GB of model state on one GPU: the whole graph's, or in a parallel run the fullest stage's (its tp-sharded parameters,
// the optimizer's part divided by dp under the distributed optimizer).
double state_gb_per_gpu(const report_meta& m) {
  return m.parallel ? m.parallel->state_gb : m.state.state_gb;
}

}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

figure_inputs report_figure_inputs(const forecast& f, const report_meta& m) {
  figure_inputs in = {
      {"mode", m.mode},
      {"batch", m.batch},
      {"seq", m.seq},
      {"dtype", m.dtype},
      {"latency_s", m.parallel ? m.parallel->iteration_s : f.total()},
      {"flops_forward", f.phase_flops(phase::forward)},
      {"flops_backward", f.phase_flops(phase::backward) + f.phase_flops(phase::accumulate)},
      {"flops_optimizer", f.phase_flops(phase::optimizer)},
      {"state_gb", state_gb_per_gpu(m)},
      {"parallel", bool(m.parallel)},
  };
  if (m.mode == "decode") in.emplace_back("context", m.context);
  if (m.kv_cache_bytes) in.emplace_back("kv_cache_gb", *m.kv_cache_bytes / 1e9);
  if (m.gpu->price_per_hour_usd > 0) in.emplace_back("price_per_hour_usd", m.gpu->price_per_hour_usd);
  if (m.parallel) in.insert(in.end(), m.parallel->figures.begin(), m.parallel->figures.end());  // the layout
  if (m.memory.is_object() && m.memory.contains("memory_gb")) {  // scripts/neusight/memory.lua: the fullest GPU
    in.emplace_back("memory_gb", memory_number(m, "memory_gb", 0));
    in.emplace_back("fits", memory_fits(m));
  }
  kernel gemm;  // the dense peak a GEMM of the compute dtype runs at (roofline.cpp: one table of peaks)
  gemm.kind = kernel_kind::gemm, gemm.dtype = m.dtype, gemm.name = "peak";
  try {
    in.emplace_back("peak_tflops", roofline_peak_flops(*m.gpu, gemm) / 1e12);
  } catch (const error&) {
    // no units of that dtype: no MFU
  }
  return in;
}

json figure_json(const figure_value& v) {
  return std::visit(
      [](const auto& x) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) return nullptr;
        else return x;
      },
      v);
}

std::string figure_csv(const figure_value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{:.17g}", *d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v)) return csv_field(*s);
  return "";
}

std::vector<std::string> report_memory_warnings(const forecast&, const report_meta& m) {
  if (m.memory.is_object()) {
    if (m.memory.contains("warning") && m.memory["warning"].is_string()) return {m.memory["warning"].get<std::string>()};
    return {};
  }
  // no memory report (predict --graph on one GPU): the state alone (scripts/neusight/precision.lua state_report)
  if (!m.state.warning.empty()) return {m.state.warning};
  return {};
}

std::string report_json(const forecast& f, const report_meta& m) {
  json j;
  j["neusight_version"] = NEUSIGHT_VERSION;
  j["source"] = m.source;
  j["model"] = m.model;
  j["gpu"] = m.gpu->name;
  j["gpu_file"] = m.gpu->source;
  j["predictor"] = m.predictor;
  // the launch mode: always in serving phases, elsewhere only when it is not the default
  if (m.launch != "eager" || m.mode == "prefill" || m.mode == "decode") j["launch"] = m.launch;
  j["mode"] = m.mode;
  j["batch"] = m.batch;
  j["seq"] = m.seq;
  if (m.mode == "decode") j["context"] = m.context;
  j["dtype"] = m.dtype;
  if (!m.kv_dtype.empty() && m.kv_dtype != m.dtype) j["kv_dtype"] = m.kv_dtype;
  if (!m.weight_dtype.empty()) j["weight_dtype"] = m.weight_dtype;
  j["precision"] = m.precision;
  j["precision_convention"] = m.state.convention;
  j["optimizer"] = m.optimizer;
  j["optimizer_impl"] = m.optimizer_impl;
  if (m.layers) j["layers"] = *m.layers;
  // A parallel run's latency is its iteration on the slowest device; the phase sums below are then those of one
  // microbatch through the whole (tp-sharded) model, serially — the timeline's inputs.
  j["latency_ms"] = (m.parallel ? m.parallel->iteration_s : f.total()) * ms;
  if (m.figs)  // the figures a rule puts beside latency_ms (the uncertainty band's latency_ms_p10 / p50 / p90)
    for (const auto& x : m.figs->fields)
      if (x.top) j[x.key] = figure_json(x.value);
  j["forward_ms"] = f.phase_total(phase::forward) * ms;
  // backward_ms includes gradient accumulation (the reference's "bwall"); grad_accumulate_ms is that part.
  j["backward_ms"] = (f.phase_total(phase::backward) + f.phase_total(phase::accumulate)) * ms;
  j["grad_accumulate_ms"] = f.phase_total(phase::accumulate) * ms;
  j["optimizer_ms"] = f.phase_total(phase::optimizer) * ms;
  j["flops"] = f.flops_total();
  j["params"] = f.params_total();
  if (m.active_params) j["active_params"] = *m.active_params;  // mixtures of experts: a token's share of params
  if (!m.experts.empty()) j["experts"] = m.experts;              // and how their experts ran
  // per GPU: in a parallel run the largest pipeline stage's tp shard
  j["state_gb"] = state_gb_per_gpu(m);
  // memory per GPU (scripts/neusight/memory.lua): the peak of the fullest GPU and its parts, every mode
  if (m.memory.is_object()) {
    const double memory_gb = memory_number(m, "memory_gb", 0);
    j["memory_gb"] = memory_gb;
    j["memory"] = m.memory.contains("memory") ? m.memory["memory"] : json::object();
    j["fits"] = memory_fits(m);
  }
  // serving phases: the KV cache one GPU holds, 2 x layers x batch x cached tokens x kv heads (this rank's) x head_dim x
  // dtype bytes (prefill: seq tokens; decode: context + 1)
  if (m.kv_cache_bytes) j["kv_cache_gb"] = *m.kv_cache_bytes / 1e9;
  // the recipe's bytes per parameter (scripts/neusight/precision.lua); state_gb = params x their sum (per stage in a
  // parallel run, with master + optimizer_state divided by dp under the distributed optimizer)
  j["state_bytes_per_param"] = m.state.bytes_per_param;
  if (m.parallel) j["parallel"] = m.parallel->json;  // scripts/neusight/parallel/report.lua, as it is
  j["warnings"] = m.warnings;
  if (m.figs) {
    json fig = json::object();
    for (const auto& x : m.figs->fields)
      if (!x.top) fig[x.key] = figure_json(x.value);
    j["figures"] = std::move(fig);
  }
  json ops = json::array();
  for (size_t i = 0; i < f.kernels.size(); ++i) {
    const auto& ki = f.kernels[i];
    const node& n = f.g.nodes[ki.node];
    ops.push_back({{"name", n.name},
                   {"op", n.op},
                   {"layer", n.layer},
                   {"count", n.count},
                   {"phase", phase_name(ki.ph)},
                   {"kernel", ki.k.name},
                   {"kind", kernel_kind_name(ki.k.kind)},
                   {"dims", dims_json(ki.k)},
                   {"tile", tile_json(ki.k)},
                   {"flops", ki.k.flops},
                   {"bytes", ki.k.bytes},
                   {"ms_each", f.seconds_each[i] * ms},
                   {"ms", f.seconds(i) * ms}});
    if (auto members = fused_members(n); !members.empty()) ops.back()["fused"] = std::move(members);
  }
  j["ops"] = std::move(ops);
  return j.dump(2) + "\n";
}

std::string report_csv(const forecast& f, const report_meta&) {
  std::string out = "name,op,layer,count,phase,kernel,kind,b,m,n,k,rows,hidden,flops,bytes,ms_each,ms\n";
  for (size_t i = 0; i < f.kernels.size(); ++i) {
    const auto& ki = f.kernels[i];
    const node& n = f.g.nodes[ki.node];
    const kernel& k = ki.k;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{:.17g},{:.17g},{:.17g},{:.17g}\n", csv_field(n.name),
                       csv_field(n.op), csv_field(n.layer), n.count, phase_name(ki.ph), csv_field(k.name),
                       kernel_kind_name(k.kind), k.b, k.m, k.n, k.k, k.rows, k.hidden, k.flops, k.bytes,
                       f.seconds_each[i] * ms, f.seconds(i) * ms);
  }
  return out;
}

std::string report_table(const forecast& f, const report_meta& m) {
  std::string out;
  out += fmt::format("model     {}  ({}, batch {}, {}, {}{}{}{})\n", m.model, m.mode, m.batch,
                     m.mode == "decode" ? fmt::format("context {} + 1 new token", m.context) : fmt::format("seq {}", m.seq),
                     m.dtype,
                     m.precision == "pure" ? std::string() : " " + m.precision,
                     m.mode == "train" ? ", optimizer " + m.optimizer +
                                             (m.optimizer_impl.empty() ? "" : " (" + m.optimizer_impl + ")")
                                       : "",
                     m.layers ? fmt::format(", {} layers", *m.layers) : "");
  out += fmt::format("gpu       {}  ({})\n", m.gpu->name, m.gpu->source);
  out += fmt::format("predictor {}{}\n\n", m.predictor,
                     m.launch == "graph" ? "  (launch graph: CUDA-graph replay, scripts/neusight/launch.lua)" : "");

  // Per node, in graph order: forward, backward (incl. gradient accumulation) and optimizer-step time.
  struct row { double fw = 0, bw = 0, step = 0; };
  std::vector<row> rows(f.g.nodes.size());
  for (size_t i = 0; i < f.kernels.size(); ++i) {
    auto& r = rows[f.kernels[i].node];
    const phase p = f.kernels[i].ph;
    (p == phase::forward ? r.fw : p == phase::optimizer ? r.step : r.bw) += f.seconds(i) * ms;
  }
  const double total = f.total() * ms;
  out += fmt::format("{:<28} {:<14} {:>5} {:>12} {:>12} {:>12} {:>7}\n", "node", "op", "count", "forward ms",
                     "backward ms", "step ms", "share");
  for (size_t i = 0; i < rows.size(); ++i) {
    const node& n = f.g.nodes[i];
    const row& r = rows[i];
    if (r.fw == 0 && r.bw == 0 && r.step == 0) continue;
    out += fmt::format("{:<28} {:<14} {:>5} {:>12.4f} {:>12.4f} {:>12.4f} {:>6.1f}%\n", n.name.substr(0, 28), n.op,
                       n.count, r.fw, r.bw, r.step, total > 0 ? 100 * (r.fw + r.bw + r.step) / total : 0.0);
  }
  bool fused_header = false;
  for (const node& n : f.g.nodes) {
    const auto members = fused_members(n);
    if (members.empty()) continue;
    if (!fused_header) out += "\nfused kernels (scripts/neusight/fusion.lua)\n";
    fused_header = true;
    std::string list;
    for (const auto& mname : members) list += (list.empty() ? "" : ", ") + mname;
    out += fmt::format("  {} ({}): {}\n", n.name, n.op, list);
  }
  out += "\n";
  out += fmt::format("forward          {:>12.3f} ms\n", f.phase_total(phase::forward) * ms);
  out += fmt::format("backward         {:>12.3f} ms  (of which gradient accumulation {:.3f} ms)\n",
                     (f.phase_total(phase::backward) + f.phase_total(phase::accumulate)) * ms,
                     f.phase_total(phase::accumulate) * ms);
  out += fmt::format("optimizer        {:>12.3f} ms\n", f.phase_total(phase::optimizer) * ms);
  if (m.parallel) {
    out += fmt::format("sum of the above {:>12.3f} ms   (one microbatch of {} through all stages, one tp shard; {:.3g} TFLOP)\n",
                       total, m.parallel->json.at("micro_batch").get<int64_t>(), f.flops_total() / 1e12);
    out += m.parallel->table;  // layout, stages, memory, state, iteration (scripts/neusight/parallel/report.lua)
  } else {
    out += fmt::format("end to end       {:>12.3f} ms   ({:.3g} TFLOP)\n", total, f.flops_total() / 1e12);
  }
  if (m.active_params) {
    // The graph is one rank's: its tp shard and, under expert parallelism, its E / ep local experts.
    const bool ep = m.parallel && m.parallel->json.value("ep", 1) > 1;
    out += fmt::format("parameters       {:>12.3f} B    of which {:.3f} B active per token (the routed experts it is sent "
                       "to; attention, shared experts, embeddings in full){}{}\n",
                       f.params_total() / 1e9, *m.active_params / 1e9,
                       !m.parallel ? "" : ep ? ", one tensor- and expert-parallel rank (E / ep of the routed experts)"
                                             : ", one tensor-parallel rank",
                       m.experts.empty() ? "" : "; experts: " + m.experts);
  }
  if (m.kv_cache_bytes)
    out += fmt::format("kv cache         {:>12.2f} GB   per GPU ({} tokens per sequence{})\n", *m.kv_cache_bytes / 1e9,
                       m.mode == "decode" ? fmt::format("context {} + 1", m.context) : fmt::format("{}", m.seq),
                       !m.kv_dtype.empty() && m.kv_dtype != m.dtype ? ", " + m.kv_dtype : std::string());
  auto with_figures = [&](std::string text) {
    if (m.figs)
      for (const auto& line : m.figs->lines) text += line + "\n";
    return text;
  };
  if (m.parallel) return with_figures(out);  // the memory lines above say it per stage
  out += m.state.line;  // scripts/neusight/precision.lua state_report
  const bool lines = m.memory.is_object() && m.memory.contains("lines");
  if (lines)
    for (const auto& line : m.memory["lines"]) out += line.get<std::string>() + "\n";  // scripts/neusight/memory.lua
  return with_figures(out);
}

std::string report_compare(const std::vector<compare_row>& rows, const std::string& format, const std::string& source) {
  auto failed = [](const compare_row& r) { return !r.empty() && r.back().key == "error"; };
  if (format == "json") {
    json arr = json::array();
    for (const auto& r : rows) {
      json o = json::object();
      for (const auto& c : r) o[c.key] = figure_json(c.value);
      arr.push_back(std::move(o));
    }
    json j;
    j["rows"] = std::move(arr);
    return j.dump(2) + "\n";
  }
  if (format == "csv") {
    std::vector<std::string> keys;  // the successful rows' keys first, then what error rows add ("error")
    for (bool errors : {false, true})
      for (const auto& r : rows)
        if (failed(r) == errors)
          for (const auto& c : r)
            if (std::find(keys.begin(), keys.end(), c.key) == keys.end()) keys.push_back(c.key);
    std::string out;
    for (size_t i = 0; i < keys.size(); ++i) out += (i ? "," : "") + keys[i];
    out += "\n";
    for (const auto& r : rows) {
      for (size_t i = 0; i < keys.size(); ++i) {
        if (i) out += ",";
        for (const auto& c : r)
          if (c.key == keys[i]) out += figure_csv(c.value);
      }
      out += "\n";
    }
    return out;
  }
  // table: inputs that differ between rows are columns, the others are said once; then latency and the figures
  const size_t n_in = compare_input_cells;
  std::vector<bool> varies(n_in, false);
  std::string fixed;
  for (size_t i = 0; i < n_in; ++i) {
    std::vector<std::string> seen;
    for (const auto& r : rows)
      if (i < r.size() && r[i].cell != "-" && std::find(seen.begin(), seen.end(), r[i].cell) == seen.end())
        seen.push_back(r[i].cell);
    varies[i] = seen.size() > 1;
    if (seen.size() == 1 && !rows.empty()) fixed += fmt::format("{}{} {}", fixed.empty() ? "" : ", ", rows[0][i].key, seen[0]);
  }
  std::vector<size_t> shown;  // cell indices of a successful row
  const compare_row* model_row = nullptr;
  for (const auto& r : rows)
    if (!failed(r)) {
      model_row = &r;
      break;
    }
  for (size_t i = 0; i < n_in; ++i)
    if (varies[i]) shown.push_back(i);
  if (model_row)
    for (size_t i = n_in; i < model_row->size(); ++i)
      if (!(*model_row)[i].column.empty()) shown.push_back(i);
  std::vector<size_t> width(shown.size());
  const auto& head = model_row ? *model_row : rows.front();
  for (size_t k = 0; k < shown.size(); ++k) {
    width[k] = head[shown[k]].column.size();
    for (const auto& r : rows)
      if (shown[k] < r.size() && (shown[k] < n_in || !failed(r))) width[k] = std::max(width[k], r[shown[k]].cell.size());
  }
  auto left = [](const figure_value& v) { return std::holds_alternative<std::string>(v) || std::holds_alternative<bool>(v); };
  auto pad = [](const std::string& t, size_t w, bool l) {
    const std::string fill(w > t.size() ? w - t.size() : 0, ' ');
    return l ? t + fill : fill + t;
  };
  size_t errors = 0;
  for (const auto& r : rows) errors += failed(r);
  std::string out = fmt::format("compare   {} combination(s) from {}{}\n", rows.size(), source,
                                errors ? fmt::format(", {} could not be forecast", errors) : std::string());
  if (!fixed.empty()) out += "fixed     " + fixed + "\n";
  out += "\n";
  std::string line;
  for (size_t k = 0; k < shown.size(); ++k)
    line += (k ? "  " : "") + pad(head[shown[k]].column, width[k], left(head[shown[k]].value));
  out += line + "\n";
  for (const auto& r : rows) {
    line.clear();
    size_t k = 0;
    for (; k < shown.size(); ++k) {
      if (shown[k] >= n_in && failed(r)) break;
      line += (k ? "  " : "") + pad(r[shown[k]].cell, width[k], left(head[shown[k]].value));
    }
    if (failed(r)) line += (k ? "  " : "") + std::string("error: ") + r.back().cell;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += "\nlatency: one iteration (train), forward pass (inference, prefill) or step (decode), the slowest device of a "
         "parallel run; MFU = model FLOPs (the graph's forward + backward) / GPUs / latency / the dtype's dense peak; "
         "memory per GPU; $ from price_per_hour_usd in the GPU file (- without one). --format json|csv has every "
         "figure and the warnings.\n";
  return out;
}

void emit(const std::string& text, const std::string& output) {
  if (output.empty() || output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  // A symbolic link is written through: its final target is the file replaced (the link stays a link). A target
  // that exists and is not a regular file (/dev/null, /dev/stdout, a pipe) is written in place, never replaced.
  namespace fs = std::filesystem;
  fs::path target(output);
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    if (hops == 40) throw error(output + ": too many levels of symbolic links");
    const fs::path link = fs::read_symlink(target, ec);
    if (ec) throw error(output + ": cannot write (unreadable symbolic link)");
    target = link.is_absolute() ? link : target.parent_path() / link;
  }
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) throw error(output + ": is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    // O_NONBLOCK: a FIFO without a reader is an error (ENXIO) rather than a wait
    const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      throw error(output + (errno == ENXIO ? ": a FIFO with no reader" : ": cannot write"));
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        throw error(output + ": cannot write");
      }
      done += size_t(n);
    }
    ::close(fd);
    return;
  }
  const std::string tmp = target.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out || !out.write(text.data(), std::streamsize(text.size())) || !out.flush()) {
      std::remove(tmp.c_str());
      throw error(output + ": cannot write");
    }
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw error(output + ": cannot write");
  }
}

std::string gpus_table(const std::vector<gpu_spec>& gpus) {
  std::string out = fmt::format("{:<18} {:<24} {:<7} {:<10} {:>5} {:>6} {:>8} {:>6} {:>8} {:>8}\n", "name", "file",
                                "vendor", "arch", "SMs", "mem GB", "BW GB/s", "L2 MB", "fp32 TF", "fp16 TF");
  for (const auto& g : gpus)
    out += fmt::format("{:<18} {:<24} {:<7} {:<10} {:>5} {:>6.0f} {:>8.0f} {:>6.1f} {:>8.1f} {:>8.1f}\n", g.name,
                       g.source, g.vendor, g.architecture, g.num_sm, g.mem_gb, g.mem_bw_gbps, g.l2_mb,
                       g.peak_fp32_tflops, g.peak_fp16_tflops);
  return out;
}

std::string gpus_json(const std::vector<gpu_spec>& gpus) {
  json arr = json::array();
  for (const auto& g : gpus) {
    json j;
    for (const auto& f : gpu_fields()) {
      if (!gpu_field_present(g, f)) continue;  // optional keys the file leaves out
      std::visit([&](auto member) { j[f.key] = g.*member; }, f.member);
    }
    j["file"] = g.source;
    arr.push_back(std::move(j));
  }
  return arr.dump(2) + "\n";
}

// Writes `gpu`'s calibration file at `path` (written by `by`); returns the path as messages show it.
std::string calibration_write(const gpu_spec& gpu, const std::filesystem::path& path, const std::map<std::string, double>& factors,
                              const std::string& by,
                              const std::vector<std::pair<std::string, std::variant<std::string, double>>>& facts) {
  const std::string text = calibration_text(
      gpu, factors,
      {path.filename().string() + " — written by " + by + "; refit to change.",
       "Every forecast on " + gpu.name + " multiplies each kernel family's predicted time by its factor",
       "(--no-calibration or NEUSIGHT_NO_CALIBRATION=1 ignores this file)."},
      facts);
  emit(text, path.string());
  return path.lexically_normal().generic_string();
}

}  // namespace ns
