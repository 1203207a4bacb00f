// engine/cli/models_cmd.cpp — forecasting every labelled configuration from its reference operator graph and
// reporting the absolute percentage error of the end-to-end latency per GPU (mean / median / max).
#include "cli/models_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cli/flags.h"
#include "cli/graph_run.h"
#include "cli/paths.h"
#include "cli/report.h"
#include "core/forecast.h"
#include "ingest/label.h"
#include "ingest/opgraph.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/time_limits.h"
#include "lua/session.h"

namespace ns {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

std::vector<fs::path> json_files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// label/<GPU>/<tag>.json files: a GPU folder, the label/ folder above them, or files named directly.
std::vector<fs::path> label_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> out;
  text_inputs_once once;  // a label read twice would count twice in every mean
  for (const auto& p : paths) {
    if (fs::is_regular_file(p)) {
      if (fs::path(p).extension() != ".json") throw error(p + ": not a label file (expected <tag>.json)");
      once.add(p, p);
      out.emplace_back(p);
      continue;
    }
    if (!fs::is_directory(p)) throw error(p + ": no such file or directory");
    auto found = json_files_in(p);
    if (found.empty()) {
      std::vector<fs::path> subdirs;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_directory()) subdirs.push_back(e.path());
      std::sort(subdirs.begin(), subdirs.end());
      for (const auto& d : subdirs)
        for (auto& f : json_files_in(d)) found.push_back(std::move(f));
    }
    if (found.empty()) throw error(p + ": no label files (expected label/<GPU>/<tag>.json)");
    for (const auto& f : found) once.add(f, p);
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

// The label folder names the device as the data does ("NVIDIA_A100-PCIE-40GB"): as is, then with spaces.
std::optional<gpu_spec> gpu_from_folder(gpu_data_resolver& gpus, const std::string& folder) {
  std::string spaced = folder;
  std::replace(spaced.begin(), spaced.end(), '_', ' ');
  for (const auto& q : {folder, spaced})
    if (auto g = gpus.device(q)) return g;
  return std::nullopt;
}

struct result_row {
  std::string gpu, device, config, mode;
  int64_t layers = 0;
  double measured_ms = 0, predicted_ms = 0, ape = 0;
  std::optional<double> p10_ms, p50_ms, p90_ms;  // the uncertainty band (scripts/neusight/uncertainty.lua), when there is one
  const gpu_spec* spec = nullptr;
  std::vector<family_time> family_s;  // forecast::seconds_by_family (--calibrate-each)
  bool in_band() const { return p10_ms && p90_ms && measured_ms >= *p10_ms && measured_ms <= *p90_ms; }
};

// Measured values inside their p10-p90 band, of the rows that have one: "7 of 12 (58 %)", or "" when none has.
std::string coverage_text(const std::vector<const result_row*>& rows, size_t* inside = nullptr, size_t* banded = nullptr) {
  size_t in = 0, n = 0;
  for (const auto* r : rows)
    if (r->p10_ms) ++n, in += r->in_band();
  if (inside) *inside = in;
  if (banded) *banded = n;
  return n ? fmt::format("{} of {} ({:.0f} %)", in, n, 100.0 * double(in) / double(n)) : std::string();
}

struct stats {
  size_t n = 0;
  double mean = 0, median = 0, max = 0;
};

stats stats_of(std::vector<double> v) {
  stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  s.median = median_of(v);
  s.max = v.back();
  return s;
}

}  // namespace

int eval_models_main(const eval_models_flags& f) {
  const session_options so = session_options_for(f.ops_dirs, f.scripts_dirs, f.gpus_dirs, f.verbose);
  session s(so);
  const auto root = so.data_root;
  const gpu_catalog catalog = s.gpus();
  gpu_data_resolver known(catalog, f.gpu_files);
  std::vector<std::string> unknown;  // label folders no GPU file names
  const auto pred = s.predictor_make(f.predictor, f.weights.empty() ? root / "weights" : fs::path(f.weights));

  std::map<std::string, size_t> skipped;
  std::map<std::string, std::string> skipped_first;
  auto skip = [&](const std::string& why, const fs::path& file) {
    if (skipped[why]++ == 0) skipped_first[why] = file.string();
  };
  std::map<std::string, std::optional<gpu_spec>> gpus;  // folder name → spec
  std::map<std::string, opgraph> graphs;                // csv path → parsed graph
  std::set<std::string> warned;
  std::vector<std::string> told;  // the graphs' and plans' warnings and overhead notes, in order: stderr and JSON alike
  const auto tell = [&](const std::string& w) {
    if (!warned.insert(w).second) return;
    std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());
    told.push_back(w);
  };
  predictor_warnings said;  // the predictor's of every label's forecast: on stderr and in the JSON, once each
  std::vector<result_row> rows;

  for (const auto& file : label_files(f.labels)) {
    const std::string stem = file.stem().string();
    const std::string device = file.parent_path().filename().string();
    // every folder's GPU, also where its labels are skipped for another reason: a --gpu FILE names a folder read
    auto git = gpus.find(device);
    if (git == gpus.end()) {
      git = gpus.emplace(device, gpu_from_folder(known, device)).first;
      if (!git->second) unknown.push_back(device);
    }
    const auto tag = opgraph_tag_parse(stem);
    if (!tag) {
      skip("file name is not <model>-<inf|train>-<seq>-<batch>[-option]", file);
      continue;
    }
    if (tag->option == "fusion") {
      // The fused model (predict --fusion / --flash-attention, scripts/neusight/fusion.lua) is a pass over the model
      // builder's graph before the op rules; a reference graph's kernels are its rows, so fusing one is the
      // reference's own pass (spec §1.6), not implemented. Nor does the label say which of our two fusions
      // torch.compile's run matches (weights/ACCURACY.md "Fused inference" compares both with predict).
      skip("fusion label (torch.compile): eval models forecasts the reference graph unfused (spec §1.6's fusion of "
           "an imported graph is not implemented), and the label does not say which fused model it matches "
           "(predict --fusion or --flash-attention on the model; weights/ACCURACY.md, Fused inference)",
           file);
      continue;
    }
    const std::string kind = tag->option.substr(0, 2);
    const bool distributed = kind == "dp" || kind == "tp" || kind == "pp";
    if (!tag->option.empty() && !distributed) {
      skip("unknown tag option '" + tag->option + "'", file);
      continue;
    }
    if (!git->second) {
      skip("unknown GPU folder '" + device + "' (not in the GPU catalogue nor a --gpu FILE)", file);
      continue;
    }
    const gpu_spec& gpu = *git->second;
    const fs::path graphs_dir =
        f.graphs.empty() ? (file.parent_path().parent_path().parent_path() / "opgraph") : fs::path(f.graphs);
    const fs::path graph_file = graphs_dir / (stem + ".csv");
    if (!fs::is_regular_file(graph_file)) {
      skip("no opgraph <tag>.csv in " + graphs_dir.string(), file);
      continue;
    }
    const label_times l = label_read(file);
    auto it = graphs.find(graph_file.string());
    if (it == graphs.end()) it = graphs.emplace(graph_file.string(), opgraph_load(graph_file.string(), s.costing(), {true, s.rule_kernels()})).first;
    opgraph& og = it->second;
    const auto par = opgraph_parallel_of(og);
    if (!og.collectives.empty() && !par) {
      skip("graph with collective kernels but no dp/tp/pp layout in its name", file);
      continue;
    }
    if (distributed && (!par || tag->mode != "train")) {
      skip("distributed label whose layout is not <model>-train-<seq>-<batch>-dpN|tpN|ppN_M", file);
      continue;
    }
    // the label's graph forecast as predict --graph forecasts it (cli/graph_run.h: scripts/neusight/pipeline.lua
    // finish, a pipeline.lua of your own under --scripts applies); of the pipeline's warnings, the predictor's (`said`,
    // at the end) and the host overhead's (below) are said, not the memory's; the graph's and its plan's once each; its
    // error names the label
    graph_run run;
    run.mode = tag->mode, run.layers = l.num_layer, run.batch = int64_t(tag->batch), run.seq = int64_t(tag->seq);
    run.overhead = f.overhead;
    run.warnings = og.warnings;
    run.tell = tell;
    run.error_prefix = file.string() + ": ";
    int64_t layers = 0;
    const session::finished finished =
        graph_forecast(s, og, gpu, [&]() -> const predictor& { return *pred; }, std::move(run), &layers);
    const session::finished& done = finished;
    said.take(*pred);
    for (const auto& w : done.overhead_notes) tell(w);  // an --overhead on that changed nothing: once per GPU
    const forecast& fc = *done.fc;
    result_row r;
    r.gpu = gpu.name, r.device = device, r.config = stem, r.mode = tag->mode, r.layers = layers;
    r.measured_ms = l.e2e_ms;
    r.predicted_ms = done.latency_s() * 1e3;
    r.ape = 100 * std::abs(r.predicted_ms - r.measured_ms) / r.measured_ms;
    r.spec = &gpu;
    if (f.calibrate_each) r.family_s = fc.seconds_by_family(gpu);  // only its fits read them (with the floors)
    // the band the forecast carries (its figures: scripts/neusight/uncertainty.lua, as predict's)
    for (const auto& x : done.figs.fields) {
      if (const auto v = figure_number(x.value); v && x.key == "latency_ms_p10") r.p10_ms = *v;
      if (const auto v = figure_number(x.value); v && x.key == "latency_ms_p50") r.p50_ms = *v;
      if (const auto v = figure_number(x.value); v && x.key == "latency_ms_p90") r.p90_ms = *v;
    }
    rows.push_back(std::move(r));
  }

  for (const auto& [why, n] : skipped)
    std::fprintf(stderr, "neusight: skipped %zu label%s: %s (first: %s)\n", n, n == 1 ? "" : "s", why.c_str(),
                 skipped_first[why].c_str());
  known.unused_check("the label folders read", unknown);
  // labels of GPUs it does not know and none it could evaluate: an error that says what to do, not an empty report
  if (rows.empty() && !unknown.empty())
    throw error("no label evaluated: " + gpu_data_resolver::unknown_advice(unknown) +
                " (label/<GPU>/ folders name the GPU as the data does: NVIDIA_A100-PCIE-40GB)");
  if (!unknown.empty()) std::fprintf(stderr, "neusight: %s\n", gpu_data_resolver::unknown_advice(unknown).c_str());
  if (rows.empty()) {  // every label skipped: a summary of none would read as a perfect score ("mean 0.00 %")
    size_t n = 0;
    bool no_graph = false;
    for (const auto& [why, k] : skipped) n += k, no_graph |= why.rfind("no opgraph", 0) == 0;
    throw error(fmt::format("no label evaluated: {} {} skipped (the reasons above){}", n,
                            n == 1 ? "label file was" : "label files were all",
                            no_graph ? "; a label is forecast from its operator graph, opgraph/<tag>.csv beside label/ "
                                       "(or in --graphs DIR)"
                                     : ""));
  }

  // Per GPU in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const result_row*>> by_gpu;
  for (const auto& r : rows) {
    if (!by_gpu.count(r.gpu)) order.push_back(r.gpu);
    by_gpu[r.gpu].push_back(&r);
  }
  size_t skipped_total = 0;
  for (const auto& [why, n] : skipped) skipped_total += n;

  // --calibrate-each: for each GPU with at least two labels, each label i in turn is the measurement the factors are
  // fitted to; every other label j of the GPU is scored with them (its forecast's family times × the factors; kernels
  // no family prices kept) and without. Means over all (i, j) pairs.
  struct calibration_score {
    size_t pairs = 0;
    double before = 0, after = 0;  // mean APE %
    void add(double b, double a) { ++pairs, before += b, after += a; }
    void finish() {
      if (pairs) before /= double(pairs), after /= double(pairs);
    }
  };
  // all pairs of the GPU's labels, and those of the same model (another batch / sequence / mode of it)
  std::map<std::string, calibration_score> cal, cal_same;
  auto model_of = [](const std::string& config) { return config.substr(0, config.find('-')); };
  if (f.calibrate_each) {
    for (const auto& g : order) {
      const auto& rs = by_gpu[g];
      if (rs.size() < 2) continue;
      calibration_score& sc = cal[g];
      for (const auto* m : rs) {
        figure_inputs in = {{"latency_s", m->predicted_ms / 1e3}, {"measured_s", m->measured_ms / 1e3},
                            {"measurement", m->device + "/" + m->config}};
        family_inputs_add(in, m->family_s, *pred, m->spec->vendor);
        const figures fit =
            s.figures_call("neusight.calibration", "fit", in, *m->spec, pred->uncertainty(m->spec->vendor));
        const std::map<std::string, double> factors = figure_factors(fit);
        for (const auto* o : rs) {
          if (o == m) continue;
          double total = 0, scaled = 0;
          for (const auto& ft : o->family_s) {
            total += ft.seconds;
            const auto it = factors.find(ft.family);
            scaled += ft.seconds * (it == factors.end() ? 1.0 : it->second);
          }
          const double calibrated = total > 0 ? o->predicted_ms * scaled / total : o->predicted_ms;
          const double after = 100 * std::abs(calibrated - o->measured_ms) / o->measured_ms;
          sc.add(o->ape, after);
          if (model_of(o->config) == model_of(m->config)) cal_same[g].add(o->ape, after);
        }
      }
      sc.finish();
      cal_same[g].finish();
    }
  }

  if (f.format == "json") {
    json j;
    j["predictor"] = f.predictor;
    j["overhead"] = f.overhead;
    json jr = json::array();
    for (const auto& r : rows)
      jr.push_back({{"gpu", r.gpu}, {"device", r.device}, {"config", r.config}, {"mode", r.mode},
                    {"layers", r.layers}, {"measured_ms", r.measured_ms}, {"predicted_ms", r.predicted_ms},
                    {"ape", r.ape}, {"predicted_ms_p10", r.p10_ms ? json(*r.p10_ms) : json(nullptr)},
                    {"predicted_ms_p50", r.p50_ms ? json(*r.p50_ms) : json(nullptr)},
                    {"predicted_ms_p90", r.p90_ms ? json(*r.p90_ms) : json(nullptr)},
                    {"in_band", r.p10_ms ? json(r.in_band()) : json(nullptr)}});
    json js = json::array();
    for (const auto& g : order) {
      std::vector<double> apes;
      for (const auto* r : by_gpu[g]) apes.push_back(r->ape);
      const stats st = stats_of(apes);
      size_t in = 0, banded = 0;
      coverage_text(by_gpu[g], &in, &banded);
      json row = {{"gpu", g}, {"n", st.n}, {"mean", st.mean}, {"median", st.median}, {"max", st.max},
                  {"band_coverage", banded ? json(double(in) / double(banded)) : json(nullptr)}};
      for (auto [key, scores] : {std::pair{"calibrated", &cal}, {"calibrated_same_model", &cal_same}})
        if (auto c = scores->find(g); c != scores->end() && c->second.pairs)
          row[key] = {{"pairs", c->second.pairs}, {"mean_before", c->second.before}, {"mean_after", c->second.after}};
      js.push_back(std::move(row));
    }
    // the table's "all" line, every label's APE at once (before, only the table had it): as the GPUs' rows, and the
    // calibrated pairs of every GPU together
    std::vector<double> apes;
    std::vector<const result_row*> every;
    for (const auto& r : rows) apes.push_back(r.ape), every.push_back(&r);
    const stats st = stats_of(apes);
    size_t in = 0, banded = 0;
    coverage_text(every, &in, &banded);
    json all = {{"n", st.n}, {"mean", st.mean}, {"median", st.median}, {"max", st.max},
                {"band_coverage", banded ? json(double(in) / double(banded)) : json(nullptr)}};
    for (auto [key, scores] : {std::pair{"calibrated", &cal}, {"calibrated_same_model", &cal_same}}) {
      size_t n = 0;
      double before = 0, after = 0;
      for (const auto& g : order)
        if (auto c = scores->find(g); c != scores->end() && c->second.pairs)
          n += c->second.pairs, before += c->second.before * double(c->second.pairs),
              after += c->second.after * double(c->second.pairs);
      if (n) all[key] = {{"pairs", n}, {"mean_before", before / double(n)}, {"mean_after", after / double(n)}};
    }
    j["rows"] = std::move(jr);
    j["summary"] = std::move(js);
    j["all"] = std::move(all);
    j["skipped"] = skipped;
    // every warning said on stderr (before, the graphs' corrections and the overhead notes were said there only)
    json warnings = told;
    for (auto& w : said.say(s)) warnings.push_back(std::move(w));
    j["warnings"] = std::move(warnings);
    emit(j.dump(2) + "\n", f.output);
    return 0;
  }

  std::string out;
  std::vector<double> all;
  std::string summary = fmt::format("{:<18} {:>4} {:>9} {:>9} {:>9} {:>14}\n", "gpu", "n", "mean %", "median %", "max %",
                                    "in p10-p90");
  for (const auto& g : order) {
    const auto& rs = by_gpu[g];
    out += fmt::format("{} ({})\n", g, rs.front()->device);
    out += fmt::format("  {:<30} {:>13} {:>13} {:>9} {:>23}\n", "config", "measured ms", "predicted ms", "APE %",
                       "p10-p90 ms");
    std::vector<double> apes;
    for (const auto* r : rs) {
      const std::string band =
          r->p10_ms ? fmt::format("{:.1f}-{:.1f}{}", *r->p10_ms, *r->p90_ms, r->in_band() ? "" : " x") : "-";
      out += fmt::format("  {:<30} {:>13.3f} {:>13.3f} {:>9.2f} {:>23}\n", r->config, r->measured_ms, r->predicted_ms,
                         r->ape, band);
      apes.push_back(r->ape);
      all.push_back(r->ape);
    }
    const stats st = stats_of(apes);
    const std::string cov = coverage_text(rs);
    out += fmt::format("  mean {:.2f} %, median {:.2f} %, max {:.2f} % over {} configurations{}\n\n", st.mean,
                       st.median, st.max, st.n, cov.empty() ? "" : "; measured inside p10-p90: " + cov);
    summary += fmt::format("{:<18} {:>4} {:>9.2f} {:>9.2f} {:>9.2f} {:>14}\n", g, st.n, st.mean, st.median, st.max,
                           cov.empty() ? "-" : cov);
  }
  const stats st = stats_of(all);
  std::vector<const result_row*> every;
  for (const auto& r : rows) every.push_back(&r);
  const std::string cov = coverage_text(every);
  summary += fmt::format("{:<18} {:>4} {:>9.2f} {:>9.2f} {:>9.2f} {:>14}\n", "all", st.n, st.mean, st.median, st.max,
                         cov.empty() ? "-" : cov);
  const std::string overhead = f.overhead == "default" ? "" : ", overhead " + f.overhead;
  out += fmt::format("summary: APE of end-to-end latency, predictor {}{}\n", f.predictor, overhead) + summary;
  if (f.calibrate_each) {
    for (auto [title, scores] :
         {std::pair{"calibrated with one label (each in turn), the GPU's other labels scored: mean APE %", &cal},
          {"the same, only pairs of one model (another batch, sequence or mode of it)", &cal_same}}) {
      out += fmt::format("\n{}\n{:<18} {:>6} {:>9} {:>9}\n", title, "gpu", "pairs", "before", "after");
      size_t n = 0;
      double before = 0, after = 0;
      for (const auto& g : order)
        if (auto c = scores->find(g); c != scores->end() && c->second.pairs) {
          const auto& x = c->second;
          out += fmt::format("{:<18} {:>6} {:>9.2f} {:>9.2f}\n", g, x.pairs, x.before, x.after);
          n += x.pairs, before += x.before * double(x.pairs), after += x.after * double(x.pairs);
        }
      if (n) out += fmt::format("{:<18} {:>6} {:>9.2f} {:>9.2f}\n", "all", n, before / double(n), after / double(n));
    }
  }
  out += fmt::format("\n{} labels evaluated, {} skipped\n", rows.size(), skipped_total);
  said.say(s);
  emit(out, f.output);
  return 0;
}

int eval_models_command(flag_targets& t, int, char**) {
  return eval_models_main(report_into(t.get<eval_models_flags>(), t.get<common_flags>()));
}

}  // namespace ns
