// engine/cli/search_cmd.cpp — `neusight search`: every dp × tp × pp layout of N GPUs (with microbatches and the
// cheapest activation recomputation that fits), forecast with the same pipeline as `predict`, ranked.
#include "cli/search_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/paths.h"
#include "cli/report.h"
#include "core/forecast.h"
#include "core/roofline.h"
#include "core/text.h"
#include "lua/session.h"

namespace ns {
namespace {

struct candidate {
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
  std::string recompute;
  double iteration_ms = 0, compute_ms = 0, exposed_comm_ms = 0, bubble_ms = 0, memory_gb = 0;
  bool fits = false;
};

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// Microbatch counts to try: without a pipeline 1, 2, 4, 8 (gradient accumulation only trades memory); with one,
// pp, 2pp, 4pp, 8pp (more microbatches shrink the bubble). Only counts that divide the dp replica's batch.
std::vector<int64_t> microbatch_choices(int64_t per_replica, int64_t pp) {
  std::vector<int64_t> out;
  for (int64_t k : {1, 2, 4, 8}) {
    const int64_t m = pp > 1 ? pp * k : k;
    if (m <= per_replica && per_replica % m == 0) out.push_back(m);
  }
  return out;
}

}  // namespace

int search_main(const search_flags& f) {
  session_options o;
  o.data_root = data_root_find();
  session_paths_set(o, f.ops_dirs, f.scripts_dirs, f.verbose);
  // Layouts share most kernel shapes: the session and the predictor reuse expansions, tiles and predictions.
  o.memo = !memo_disabled();
  session s(o);
  const auto pred = predictor_make(f.predictor, o.data_root / "weights");
  pred->memo_enable(o.memo);
  const bool training = f.mode == "train";

  std::vector<candidate> results;
  std::map<std::string, size_t> skipped;  // reason → layouts
  size_t evaluated = 0;
  std::string gpu_name, dtype, precision;  // as the workloads resolved them (defaults included)
  double gpu_mem_gb = 0;
  for (int64_t tp : divisors(f.gpus)) {
    if (tp > f.max_tp) continue;
    for (int64_t pp : divisors(f.gpus / tp)) {
      const int64_t dp = f.gpus / (tp * pp);
      if (f.batch % dp != 0) {
        ++skipped[fmt::format("the global batch {} is not divisible by dp", f.batch)];
        continue;
      }
      const auto choices = microbatch_choices(f.batch / dp, pp);
      if (choices.empty()) {
        ++skipped["no microbatch count divides the replica's batch (pp needs batch / dp >= pp)"];
        continue;
      }
      bool bad_layout = false;  // a builder refused (dp, tp, pp) itself: no other microbatch count will do
      for (int64_t m : choices) {
        if (bad_layout) break;
        bool done = false;
        for (const char* recompute : {"none", "selective", "full"}) {
          if (done || (!training && std::string(recompute) != "none")) break;
          if (f.recompute != "auto" && f.recompute != "all" && f.recompute != recompute) continue;
          workload_overrides ov{{"model", f.model}, {"gpu", f.gpu}, {"mode", f.mode}, {"batch", f.batch},
                                {"seq", f.seq}, {"parallel.dp", dp}, {"parallel.tp", tp}, {"parallel.pp", pp},
                                {"parallel.microbatches", m}, {"parallel.schedule", f.schedule},
                                {"parallel.recompute", std::string(recompute)}};
          if (!f.optimizer.empty()) ov["optimizer"] = f.optimizer;
          if (!f.optimizer_impl.empty()) ov["optimizer_impl"] = f.optimizer_impl;
          if (!f.dtype.empty()) ov["dtype"] = f.dtype;
          if (!f.precision.empty()) ov["precision"] = f.precision;
          if (!f.cluster.empty()) ov["parallel.cluster"] = f.cluster;
          if (f.sequence_parallel && tp > 1) ov["parallel.sequence_parallel"] = true;
          if (f.distributed_optimizer) ov["parallel.distributed_optimizer"] = true;
          try {
            const workload w = s.workload_load("", ov);
            const gpu_spec& gpu = *w.gpu_resolved;
            gpu_name = gpu.name, gpu_mem_gb = gpu.mem_gb, dtype = w.dtype, precision = w.precision;
            const forecast fc = s.forecast_run(w.g, s.expand(w.g, gpu, training).kernels, gpu, *pred, "default");
            const auto tl = s.timeline(fc);
            ++evaluated;
            if (!tl) throw error("no parallel plan");  // cannot happen: dp·tp·pp = gpus > 1 or microbatches > 1
            candidate c{dp, tp, pp, m, recompute};
            const timeline_device* crit = critical_device(*tl);
            // memory per GPU of the fullest stage (scripts/neusight/memory.lua, as predict reports it)
            const auto& mem = s.memory();
            double most = 0;
            if (mem.is_object() && mem.contains("memory_gb")) most = mem["memory_gb"].get<double>();
            else
              for (const auto& d : tl->devices) most = std::max(most, device_memory_bytes(d, *tl, w.state) / 1e9);
            c.iteration_ms = tl->iteration_s * 1e3;
            c.compute_ms = crit->compute_s * 1e3;
            c.exposed_comm_ms = crit->exposed_comm_s * 1e3;
            c.bubble_ms = crit->bubble_s * 1e3;
            c.memory_gb = most;
            c.fits = mem.is_object() && mem.contains("fits") ? mem["fits"].get<bool>() : most <= gpu.mem_gb;
            const bool cheapest = f.recompute == "auto";  // stop at the first mode that fits; list only that one
            done = cheapest && c.fits;
            if (!cheapest || c.fits || std::string(recompute) == "full" || !training) results.push_back(c);
          } catch (const std::exception& ex) {
            // One bad layout (heads not divisible by tp, fewer layers than stages) is a reason, not a failure.
            std::string why = ex.what();
            if (const size_t nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
            ++skipped[why];
            bad_layout = true;
            break;
          }
        }
      }
    }
  }
  if (results.empty()) {
    std::string reasons;
    for (const auto& [why, n] : skipped) reasons += fmt::format("\n  {} layout(s): {}", n, why);
    throw error(fmt::format("search: no layout of {} GPUs could be forecast{}", f.gpus, reasons));
  }
  std::stable_sort(results.begin(), results.end(), [](const candidate& a, const candidate& b) {
    if (a.fits != b.fits) return a.fits;
    return a.iteration_ms < b.iteration_ms;
  });
  std::vector<candidate> shown;
  for (const auto& c : results)
    if ((c.fits || f.all) && int64_t(shown.size()) < f.top) shown.push_back(c);

  std::string out;
  if (f.format == "json") {
    nlohmann::ordered_json j;
    j["model"] = f.model, j["gpu"] = gpu_name, j["gpus"] = f.gpus, j["batch"] = f.batch, j["seq"] = f.seq;
    j["mode"] = f.mode, j["dtype"] = dtype, j["precision"] = precision, j["predictor"] = f.predictor;
    j["evaluated"] = evaluated;
    j["fitting"] = std::count_if(results.begin(), results.end(), [](const candidate& c) { return c.fits; });
    auto& arr = j["layouts"] = nlohmann::ordered_json::array();
    for (const auto& c : shown)
      arr.push_back({{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}, {"microbatches", c.microbatches},
                     {"recompute", c.recompute}, {"iteration_ms", c.iteration_ms}, {"compute_ms", c.compute_ms},
                     {"exposed_comm_ms", c.exposed_comm_ms}, {"bubble_ms", c.bubble_ms}, {"memory_gb", c.memory_gb},
                     {"fits", c.fits}});
    auto& sk = j["skipped"] = nlohmann::ordered_json::object();
    for (const auto& [why, n] : skipped) sk[why] = n;
    out = j.dump(2) + "\n";
  } else if (f.format == "csv") {
    out = "dp,tp,pp,microbatches,recompute,iteration_ms,compute_ms,exposed_comm_ms,bubble_ms,memory_gb,fits\n";
    for (const auto& c : shown)
      out += fmt::format("{},{},{},{},{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{}\n", c.dp, c.tp, c.pp, c.microbatches,
                         c.recompute, c.iteration_ms, c.compute_ms, c.exposed_comm_ms, c.bubble_ms, c.memory_gb,
                         c.fits ? "true" : "false");
  } else {
    out += fmt::format("search    {} on {} x {} ({:.0f} GB), {}, {} {}, global batch {}, seq {}: {} forecasts\n\n",
                       f.model, f.gpus, gpu_name, gpu_mem_gb, f.mode, dtype, precision, f.batch, f.seq, evaluated);
    out += fmt::format("{:>4} {:>4} {:>4} {:>4} {:>4} {:<10} {:>13} {:>11} {:>12} {:>10} {:>10}\n", "rank", "dp", "tp",
                       "pp", "mb", "recompute", "iteration ms", "compute ms", "exposed comm", "bubble ms", "memory GB");
    for (size_t i = 0; i < shown.size(); ++i) {
      const auto& c = shown[i];
      out += fmt::format("{:>4} {:>4} {:>4} {:>4} {:>4} {:<10} {:>13.1f} {:>11.1f} {:>12.1f} {:>10.1f} {:>10.1f}{}\n",
                         i + 1, c.dp, c.tp, c.pp, c.microbatches, c.recompute, c.iteration_ms, c.compute_ms,
                         c.exposed_comm_ms, c.bubble_ms, c.memory_gb, c.fits ? "" : "  (does not fit)");
    }
    if (shown.empty()) out += "  no layout fits in memory (--all lists them anyway)\n";
    if (!skipped.empty()) {
      out += "\nskipped\n";
      for (const auto& [why, n] : skipped) out += fmt::format("  {} layout(s): {}\n", n, why);
    }
    out += "\nmb = microbatches per iteration; compute, exposed comm and bubble are the slowest device's "
           "(neusight predict --dp/--tp/--pp/--microbatches/--recompute shows one layout in full)\n";
  }
  emit(out, f.output);
  return 0;
}

}  // namespace ns
