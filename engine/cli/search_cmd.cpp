// engine/cli/search_cmd.cpp — `neusight search`: every dp × tp × pp layout of N GPUs (with microbatches and the
// cheapest activation recomputation that fits; for MoE models every expert-parallel degree; each schedule and virtual-
// stage count asked for), forecast with the same pipeline as `predict`, ranked.
#include "cli/search_cmd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <utility>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <filesystem>
#include <set>
#include <tuple>
#include <type_traits>
#include <variant>
#include <nlohmann/json.hpp>

#include "cli/flags.h"
#include "cli/paths.h"
#include "cli/report.h"
#include "core/cluster_spec.h"
#include "core/figures.h"
#include "core/forecast.h"
#include "core/roofline.h"
#include "core/text.h"
#include "lua/session.h"
#include "lua/workload_context.h"

namespace ns {
namespace {

struct candidate {
  int64_t dp = 1, tp = 1, pp = 1, microbatches = 1;
  std::string recompute;
  int64_t ep = 1;
  std::string schedule;
  int64_t virtual_stages = 1;
  double iteration_ms = 0, compute_ms = 0, exposed_comm_ms = 0, bubble_ms = 0, memory_gb = 0;
  double optimizer_ms = 0;  // the optimizer step of the iteration (the busiest device's in a plan), 0 without one
  double imbalance_ms = 0;  // the busiest device's busy time less the least busy one's (the plan's; 0 on one GPU)
  bool fits = false;
  // it would fit under the distributed optimizer, off here (parallel_report::distributed_optimizer_fits)
  bool distributed_optimizer_fits = false;
  int64_t zero = 0;       // its ZeRO stage (the plan's: parallel.zero)
  int64_t zero_fits = 0;  // the least higher ZeRO stage it would fit under, where it does not fit (0: none)
  // what scripts/neusight/figures.lua search_floor gets of it: the layout, its forecast's totals and its parallel
  // report's iteration and figures (par.*), or without a plan its kernel families' floors (floor_s.*)
  figure_inputs floor_in = {};
  // scripts/neusight/figures.lua search_figures of a layout shown (tokens/s, MFU, cost): JSON / CSV fields, and the
  // table's columns those with one
  std::vector<figure> figures = {};
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

// "1f1b, interleaved" → {"1f1b", "interleaved"}
std::vector<std::string> items_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
    start = end + 1;
  }
  return out;
}

// One pipeline variant of a dp × tp × pp layout: expert-parallel degree, schedule, virtual stages (0: the default);
// `shared_build`: the schedule is one of scripts/neusight/search.lua SHARED_BUILD.
struct variant {
  int64_t ep = 1;
  std::string schedule;
  int64_t virtual_stages = 0;
  bool shared_build = false;
  int64_t zero = -1;  // the ZeRO stage (--zero), -1: not given (the workload's)
};

// What the layouts' forecasts warn of, told once for the whole search. The workload's warnings (what a flag given
// changes nothing in: scripts/neusight/workload.lua ignored_fields; what the forecast does not know) count only when
// every layout forecast has them: a flag that matters in some layout is not ignored. The predictor's and the
// out-of-distribution ones (the GPU, the model's kernel families) are told once each, whichever layout had them.
struct search_warnings {
  std::optional<std::vector<std::string>> every;  // the workload's, in all layouts so far (nullopt: none forecast)
  std::vector<std::string> any;                   // the predictor's and the uncertainty band's, first seen first

  void layout(const std::vector<std::string>& workload_warnings, const std::vector<std::string>& model_warnings) {
    if (!every) {
      every = workload_warnings;
    } else {
      std::vector<std::string> kept;
      for (const auto& w : *every)
        if (std::find(workload_warnings.begin(), workload_warnings.end(), w) != workload_warnings.end()) kept.push_back(w);
      *every = std::move(kept);
    }
    for (const auto& w : model_warnings)
      if (std::find(any.begin(), any.end(), w) == any.end()) any.push_back(w);
  }
  // What building a layout's model found (workload.lua build's warnings: a model function's checks, …), each with its
  // id (build's warning_ids; the text when it has none): each warning once, from the first layout that had it, as its
  // numbers (the layout's batch) differ from layout to layout.
  void model(const std::vector<std::pair<std::string, std::string>>& id_warnings) {
    for (const auto& [id, w] : id_warnings)
      if (model_kinds.insert(id).second && std::find(any.begin(), any.end(), w) == any.end()) any.push_back(w);
  }
  std::set<std::string> model_kinds;
  // the workload's, then `own` (search's flags no layout used), then the predictor's and the band's
  std::vector<std::string> all(const std::vector<std::string>& own) const {
    std::vector<std::string> out = every.value_or(std::vector<std::string>{});
    out.insert(out.end(), own.begin(), own.end());
    for (const auto& w : any)
      if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
    return out;
  }
};

}  // namespace

int search_main(const search_flags& f) {
  // search ranks the layouts of one model on one GPU: a comma is a list (predict compares lists), not a name, so say
  // that rather than "unknown GPU 'h100,h200'" (a file of that name is still a file)
  for (const auto& [name, text, what] : {std::tuple{"--gpu", &f.gpu, "GPU"}, {"--model", &f.model, "model"}})
    if (text->find(',') != std::string::npos && !std::filesystem::exists(*text))
      throw error(fmt::format("{} {}: search ranks the layouts of one {} (a list is predict's, to compare at one "
                              "layout); run search once per {}", name, *text, what, what));
  // Layouts share most kernel shapes: the session and the predictor reuse expansions, tiles and predictions.
  const session_options o = session_options_for(f.ops_dirs, f.scripts_dirs, f.gpus_dirs, f.verbose, !f.no_calibration);
  session s(o);
  // --schedule's names and --recompute's modes are neusight.parallel's (scripts/neusight/search.lua choices: the
  // schedule registry, parallel.config's CHOICES.recompute), checked first, with normalize's did-you-mean. --schedule
  // given: each layout names its schedule, so one where it changes nothing says so (the workload's warning); left
  // out, the default schedule goes only to the layouts with a pipeline or microbatches to order.
  const bool schedule_given = !f.schedule.empty();
  // the floor warning's rule (scripts/neusight/figures.lua search_floor); an older --scripts figures.lua without it:
  // no floor warning, as before it was there, not the search failing
  const bool floor_rule = s.has_function("neusight.figures", "search_floor");
  // search.lua choices' table as it is (session::call): the ranking's formatter reads it too (search.lua format_table)
  const std::string choices_fn = s.module_display("neusight.search") + " choices";
  const nlohmann::ordered_json names =
      s.call("neusight.search", "choices",
             {nlohmann::json(items_of(f.schedule)), nlohmann::json(f.recompute), nlohmann::json(f.zero)}, 1, "")[0];
  const auto field = [&](const char* key) -> const nlohmann::ordered_json* {
    const auto at = names.is_object() ? names.find(key) : names.end();
    return at == names.end() || at->is_null() ? nullptr : &*at;
  };
  if (!names.is_object() && !(names.is_array() && names.empty()))  // an empty table reads as an empty array
    throw error(choices_fn + " returned " + names.type_name() + ", expected a table");
  const auto strings_of = [&](const char* key) {  // a non-empty array of strings
    const nlohmann::ordered_json* v = field(key);
    const std::string bad = choices_fn + ": field '" + key + "' must be a non-empty array of strings";
    if (!v || !v->is_array() || v->empty()) throw error(bad);
    std::vector<std::string> out;
    for (const auto& x : *v) {
      if (!x.is_string()) throw error(bad);
      out.push_back(x.get<std::string>());
    }
    return out;
  };
  const std::vector<std::string> schedules = strings_of("schedules");
  const std::vector<std::string> modes = strings_of("recompute");  // least recomputation first: "auto" stops at the first that fits
  // per-schedule flags; absent (an older --scripts search.lua): none (a --scripts search rebuilds each layout anyway;
  // --virtual-stages is then refused, and a schedule's rows carry no /v)
  const auto flags_of = [&](const char* key) {
    const nlohmann::ordered_json* v = field(key);
    if (!v) return std::vector<bool>(schedules.size(), false);
    const std::string bad = choices_fn + ": field '" + key + "' must be an array of booleans, one for each schedule";
    if (!v->is_array() || v->size() != schedules.size()) throw error(bad);
    std::vector<bool> out;
    for (const auto& x : *v) {
      if (!x.is_boolean()) throw error(bad);
      out.push_back(x.get<bool>());
    }
    return out;
  };
  const std::vector<bool> shared_build = flags_of("shared_build"), chunks = flags_of("virtual_stages");
  // the ZeRO stages each layout runs under (search.lua choices zero: --zero's, checked there); none given: the workload's
  std::vector<int64_t> zero_stages;
  if (const auto* z = field("zero"); z && z->is_array())
    for (const auto& x : *z) {
      if (!x.is_number_integer()) throw error(choices_fn + ": field 'zero' must be an array of integers");
      zero_stages.push_back(x.get<int64_t>());
    }
  if (zero_stages.empty()) zero_stages.push_back(-1);
  if (const auto* v = field("virtual_schedules"); v && !(v->is_array() && std::all_of(v->begin(), v->end(), [](const auto& x) {
                                                    return x.is_string();
                                                  })))
    throw error(choices_fn + ": field 'virtual_schedules' must be an array of strings");
  const nlohmann::ordered_json* refusal = field("virtual_stages_refusal");
  if (refusal && !refusal->is_string()) throw error(choices_fn + ": field 'virtual_stages_refusal' must be a string");
  const auto pred = s.predictor_make(f.predictor, f.weights.empty() ? o.data_root / "weights" : std::filesystem::path(f.weights));
  pred->memo_enable(o.memo);
  const bool training = f.mode == "train";
  // The workload fields no layout changes (the layouts add their parallel ones); `optimizer`: with the optimizer's.
  const auto workload_base = [&f](bool optimizer) {
    workload_overrides ov{{"model", f.model}, {"gpu", f.gpu}, {"mode", f.mode}, {"batch", f.batch}, {"seq", f.seq}};
    if (optimizer && !f.optimizer.empty()) ov["optimizer"] = f.optimizer;
    if (optimizer && !f.optimizer_impl.empty()) ov["optimizer_impl"] = f.optimizer_impl;
    if (!f.dtype.empty()) ov["dtype"] = f.dtype;
    if (!f.precision.empty()) ov["precision"] = f.precision;
    if (!f.experts.empty()) ov["experts"] = f.experts;  // every layout's (a dense model's warning told once)
    return ov;
  };
  // What no layout changes is resolved once, before any layout: a misspelled GPU, model, dtype or cluster stops the
  // search here with the one message predict gives for it (did-you-mean included), not as every layout's reason.
  {
    // the fields (scripts/neusight/workload.lua check_fields, predict's check), a --model config.json read; with
    // --router-skew, which the layouts with ep > 1 take: a value no layout could take is refused here, not per layout
    workload_overrides fields = workload_base(true);
    if (!f.router_skew.empty()) fields["router_skew"] = f.router_skew;
    s.workload_check(fields);
    s.gpu(f.gpu);
    if (!f.cluster.empty()) cluster_resolve(o.data_root / "gpus" / "clusters", f.cluster);
  }

  std::vector<candidate> results;
  std::map<std::string, size_t> skipped;  // reason → layouts
  std::map<std::string, std::string> skipped_context;  // reason → its context lines (which file, which model), first seen
  size_t evaluated = 0;
  // as the workloads resolved them (defaults included): the same in every layout, so set by each that was built
  std::string gpu_name, dtype, precision;
  // the cluster the layouts ran on, as predict's JSON gives it (parallel.cluster; every layout has the same world, so
  // the same cluster): null when no layout had a parallel plan (--gpus 1, one microbatch, no recomputation)
  nlohmann::ordered_json cluster;
  std::string calibration_file;  // the GPU's calibration the forecasts applied ("" without one)
  double gpu_mem_gb = 0, gpu_mem_reported_gib = 0;  // the GPU file's (0: no mem_reported_gib)
  search_warnings warned;
  std::optional<std::vector<std::string>> calibration_notes;  // the calibration's model warning, once (first build)
  bool sequence_parallel_used = false;  // --sequence-parallel reached a layout (one with tp > 1)
  run_state last_state;  // the last layout built: its report fields are what search.lua format_json says of the workload
  std::vector<int64_t> vstages;
  for (const auto& v : items_of(f.virtual_stages)) vstages.push_back(std::stoll(v));
  // a schedule with model chunks per device among those tried (scripts/neusight/parallel/config.lua CHUNKED)
  const bool chunked = std::find(chunks.begin(), chunks.end(), true) != chunks.end();
  // refused in scripts/neusight/search.lua choices' words; an older --scripts search.lua without them: said plainly
  if (!vstages.empty() && !chunked)
    throw error(refusal && !refusal->get<std::string>().empty()
                    ? refusal->get<std::string>()
                    : "search: --virtual-stages: none of the schedules tried runs model chunks "
                      "(scripts/neusight/search.lua choices virtual_stages)");
  // The model's experts (the ep worth trying divide it) and layers (a chunked schedule wants them divisible by pp × v):
  // scripts/neusight/search.lua. Only asked when needed, so a plain dense search builds nothing more than before.
  struct {
    int64_t experts = 1, layers = 0;
  } facts;
  if (f.ep == 0 || chunked) {
    try {
      const nlohmann::ordered_json got = s.model_facts_of(workload_base(false));
      const auto integer = [&](const char* key) {  // an integer (4 or 4.0), as table_reader reads one
        const auto at = got.is_object() ? got.find(key) : got.end();
        if (at == got.end() || !at->is_number() || at->get<double>() != std::floor(at->get<double>()))
          throw error(std::string("search.lua model_facts: field '") + key + "' must be an integer");
        return at->get<int64_t>();
      };
      facts.experts = integer("experts"), facts.layers = integer("layers");
    } catch (const std::exception&) {
      // a model that cannot be probed this way (a custom builder refusing batch 1, …) searches as before: ep 1, and
      // chunked layouts without the layer check (the forecasts themselves still refuse what cannot run)
      facts = {};
    }
  }
  // Rows say their ep when the model has experts (or --ep fixed it); search.lua's formatter shows their schedule when
  // more than 1F1B/GPipe alone was asked for; otherwise the output is the plain dp × tp × pp one.
  const bool show_ep = f.ep > 0 || facts.experts > 1;
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
        // microbatch_choices: pp, 2pp, 4pp and 8pp (1, 2, 4, 8 without a pipeline), each dividing batch / dp
        ++skipped["no microbatch count tried (pp, 2pp, 4pp or 8pp) divides the replica's batch (batch / dp)"];
        continue;
      }
      std::vector<variant> variants;
      for (int64_t ep : divisors(dp)) {
        if (f.ep > 0 ? ep != f.ep : facts.experts % ep != 0) continue;
        for (size_t si = 0; si < schedules.size(); ++si)
          for (int64_t v : chunks[si] && !vstages.empty() ? vstages : std::vector<int64_t>{0})
            // (without data-parallel training a stage shards nothing: the first stage given stands for them all)
            for (int64_t z : dp > 1 && training ? zero_stages : std::vector<int64_t>{zero_stages.front()})
              variants.push_back({ep, schedules[si], v, shared_build[si], z});
      }
      if (f.ep > 0 && dp % f.ep != 0) {  // the fixed ep cannot spread over this dp: a reason, as predict gives it
        ++skipped[fmt::format("--ep {} does not divide dp", f.ep)];
        continue;
      }
      // The variants' forecasts run microbatch count by microbatch count (each count, every variant), so that the
      // variants differing only in the schedule, among search.lua's SHARED_BUILD (GPipe, 1F1B), share one build: the
      // graph, its kernels and their times do not depend on the schedule (only the timeline does), so the next variant
      // re-times them with the plan's schedule changed (the per-process memos, as for the recomputation modes below).
      // What each variant and count did is kept and told afterwards in the order variant by variant (ranking ties,
      // warnings, reasons).
      const size_t nv = variants.size(), nm = choices.size();
      std::vector<std::string> pipeline_skipped(nv);
      for (size_t vi = 0; vi < nv; ++vi) {
        pipeline_skipped[vi] = s.search_pipeline_skip(facts.layers, pp, variants[vi].schedule, variants[vi].virtual_stages);
        // a ZeRO stage the layout does not run with (search.lua zero_skip: parallel/config.lua zero_refusal's reason)
        if (pipeline_skipped[vi].empty() && variants[vi].zero >= 0) {
          const auto why = s.call("neusight.search", "zero_skip",
                                  {nlohmann::json(variants[vi].zero), nlohmann::json(pp), nlohmann::json(variants[vi].ep)},
                                  1, "")[0];
          if (why.is_string()) pipeline_skipped[vi] = why.get<std::string>();
        }
      }
      struct evaluation {  // one forecast made or the layout's error, of variant `vi`
        size_t vi = 0;
        candidate c;
        bool listed = false;  // goes into the results
        std::vector<std::string> workload_warnings, notes;
        std::vector<std::pair<std::string, std::string>> model_warnings;  // (id, text): search_warnings::model
        bool failed = false;  // the layout's error: why (its first line) and context (the lines after it, "": none)
        std::string why, context;
      };
      std::vector<evaluation> ran;  // in the order made: microbatch count by count, each count's variants in turn
      std::vector<bool> bad_layout(nv, false);  // a builder refused the layout itself: no other microbatch count will do
      const bool reuse = o.memo && o.script_dirs.empty() && o.scripts_path_env.empty();
      // a and b share a build: both schedules of search.lua's SHARED_BUILD (one model chunk per device), each with
      // its default virtual stages (with --scripts, where another schedule may be registered, `reuse` is off)
      const auto schedule_only = [](const variant& a, const variant& b) {
        return a.ep == b.ep && a.zero == b.zero && a.virtual_stages == 0 && b.virtual_stages == 0 && a.shared_build &&
               b.shared_build;
      };
      for (size_t mi = 0; mi < nm; ++mi) {
        const int64_t m = choices[mi];
        // The layout's workload and forecast, built for its first recomputation mode (and variant): the graph, its
        // kernels and their times do not depend on the mode (only the timeline does), so the next modes re-time them
        // with the plan's recompute changed (the per-process memos; without them, or with --scripts that might
        // replace a model builder, each mode builds its own).
        std::optional<workload> built;
        std::optional<forecast> built_fc;
        std::vector<std::string> built_notes;  // its predictor's and uncertainty band's warnings
        bool built_plan = false;  // the built workload has a parallel plan (one GPU, one microbatch, none: no plan)
        const variant* built_for = nullptr;  // the variant it was built for
        for (size_t vi = 0; vi < nv; ++vi) {
          if (!pipeline_skipped[vi].empty() || bad_layout[vi]) continue;
          const variant& var = variants[vi];
          if (built_for != &var && !(built && built_for && reuse && built_plan && schedule_only(*built_for, var)))
            built.reset(), built_fc.reset(), built_notes.clear(), built_plan = false, built_for = nullptr;
          bool done = false;
          for (const std::string& recompute : modes) {
            if (done || (!training && &recompute != &modes.front())) break;
            // inference runs without recomputation whatever --recompute says (a mode given is the workload's to warn of)
            if (training && f.recompute != "auto" && f.recompute != "all" && f.recompute != recompute) continue;
            const bool given_recompute = f.recompute != "auto" && f.recompute != "all";
            workload_overrides ov = workload_base(true);
            ov["parallel.dp"] = dp, ov["parallel.tp"] = tp, ov["parallel.pp"] = pp, ov["parallel.microbatches"] = m;
            ov["parallel.recompute"] = !training && given_recompute ? f.recompute : recompute;
            if (schedule_given || pp > 1 || m > 1) ov["parallel.schedule"] = var.schedule;
            if (!f.cluster.empty()) ov["parallel.cluster"] = f.cluster;
            if (f.sequence_parallel && tp > 1) ov["parallel.sequence_parallel"] = true;
            if (f.distributed_optimizer) ov["parallel.distributed_optimizer"] = true;
            if (var.zero >= 0) ov["parallel.zero"] = var.zero;
            if (var.ep > 1 || f.ep > 0) ov["parallel.ep"] = var.ep;
            if (var.virtual_stages > 0) ov["parallel.virtual_stages"] = var.virtual_stages;
            if (!f.router_skew.empty()) ov["router_skew"] = f.router_skew;  // no effect in every layout: warned once
            evaluation ev;
            ev.vi = vi;
            std::optional<parallel_report> fresh_tl;  // the pipeline's timeline of a fresh build
            try {
              if (built && reuse && built_plan) {
                if (built_for != &var) s.plan_set(built->state, "schedule", var.schedule), built_for = &var;
                s.plan_set(built->state, "recompute", recompute);
              } else {
                built = s.workload_load("", ov);
                built_for = &var;
                last_state = built->state;  // the report fields search.lua format_json renders: the last layout's
                const gpu_spec& gpu = built->gpu_resolved;
                // priced as predict prices it: scripts/neusight/pipeline.lua finish (a pipeline.lua of your own under
                // --scripts applies), lean (search reads the forecast; its ranking's timeline is made below, per mode)
                session::pipeline_graph run;
                run.g = &built->g, run.kernels = s.expand(built->g, gpu, training, &built->state).kernels, run.gpu = &gpu;
                run.pred = pred.get(), run.source = built->source, run.launch = built->launch, run.state = built->state;
                session::finished done = s.forecast_finish(std::move(run), {"default", "", false, true});
                built_fc = std::move(*done.fc);
                fresh_tl = std::move(done.parallel);  // the first mode's timeline, as the one below makes it
                // what predict warns of besides the workload: the pipeline's (kernels the predictor could not price
                // as asked; the layout's, scripts/neusight/report.lua layout_warnings: a cluster file built for another
                // GPU), and the GPU out of the distribution of the predictor's data (the band's warnings, without
                // drawing a band)
                built_notes = std::move(done.warnings);
                figure_inputs band_in = {{"latency_s", built_fc->total()}};
                family_inputs_add(band_in, built_fc->seconds_by_family(gpu), *pred, gpu.vendor);
                for (auto& w : s.figures_call("neusight.uncertainty", "warnings", band_in, gpu,
                                              pred->uncertainty(gpu.vendor)).warnings)
                  built_notes.push_back(std::move(w));
                // a calibration fitted to another model (scripts/neusight/calibration.lua model_warning): the GPU,
                // its calibration and the model are every layout's, so asked once
                if (!calibration_notes) {
                  calibration_notes.emplace();
                  if (auto w = s.calibration_skipped(gpu, pred->name()); !w.empty())
                    calibration_notes->push_back(std::move(w));  // fitted to another predictor: not applied
                  if (const calibration* cal = s.calibration_of(gpu, pred->name()); cal && !cal->model.empty()) {
                    figure_inputs cal_in = {{"calibration_source", cal->source},
                                            {"calibration_model", cal->model},
                                            {"model", built->g.model}};
                    // the sizes predict and serve compare too (the first layout's, when it holds the whole model)
                    if (cal->model_params) cal_in.emplace_back("calibration_model_params", *cal->model_params);
                    if (const auto n = s.forecast_model_params(built->state, built_fc->params_total()))
                      cal_in.emplace_back("model_params", *n);
                    *calibration_notes = s.figures_call("neusight.calibration", "model_warnings", cal_in, gpu).warnings;
                  }
                  // fitted to another version of the GPU's file (engine/core/calibration.h calibration_stale_warning)
                  if (const calibration* cal = s.calibration_of(gpu, pred->name())) {
                    if (auto w = calibration_stale_warning(*cal, gpu); !w.empty()) calibration_notes->push_back(std::move(w));
                  }
                }
                built_notes.insert(built_notes.end(), calibration_notes->begin(), calibration_notes->end());
              }
              const workload& w = *built;
              const forecast& fc = *built_fc;
              const gpu_spec& gpu = w.gpu_resolved;
              gpu_name = gpu.name, gpu_mem_gb = gpu.mem_gb, gpu_mem_reported_gib = gpu.mem_reported_gib, dtype = w.field<std::string>("dtype"), precision = w.field<std::string>("precision");
              const calibration* cal = s.calibration_of(gpu, pred->name());
              if (cal) calibration_file = cal->source;
              // the ranking's numbers only (the pipeline's own when it made it for this build)
              const auto tl = fresh_tl ? std::exchange(fresh_tl, std::nullopt) : s.timeline(w.state, fc, gpu, true);
              if (tl && !tl->layers_refusal.empty()) {
                // a chunked layout whose model chunks do not divide the layers, found only now (the model probe above
                // failed: no layer count before the forecasts): skipped by the rule and reason it is skipped by before
                // a forecast (search.lua pipeline_skip), as predict's warning of it says
                pipeline_skipped[vi] = tl->layers_refusal;
                built.reset(), built_fc.reset(), built_notes.clear(), built_plan = false, built_for = nullptr;
                break;
              }
              // what building the model found (a model function's checks: it ignores opts.batch, …) is the model's:
              // told once (search_warnings::model), as its words name the layout's batch and no two layouts agree
              const auto at = w.warnings.begin() + std::ptrdiff_t(std::min(w.build_warnings_at, w.warnings.size()));
              ev.workload_warnings.assign(w.warnings.begin(), at);
              for (auto m = at; m != w.warnings.end(); ++m) {
                const size_t i = size_t(m - at);
                const bool id = i < w.build_warning_ids.size() && !w.build_warning_ids[i].empty();
                ev.model_warnings.emplace_back(id ? w.build_warning_ids[i] : *m, *m);
              }
              ev.notes = built_notes;
              built_plan = tl.has_value();
              candidate c{dp, tp, pp, m, recompute, var.ep, var.schedule, 1};
              // what its roofline floor is read from (scripts/neusight/figures.lua search_floor: the parallel
              // timeline's busiest device, or the graph's kernels on one GPU), held to it once for the ranking below
              if (floor_rule) {
                c.floor_in = {{"dp", dp}, {"tp", tp}, {"pp", pp}, {"microbatches", m}, {"ep", var.ep},
                              {"recompute", recompute}, {"fc.total", fc.total()},
                              {"fc.model_flops_forward", fc.phase_model_flops(phase::forward)},
                              {"fc.model_flops_backward", fc.phase_model_flops(phase::backward)},
                              {"fc.model_flops_accumulate", fc.phase_model_flops(phase::accumulate)}};
                if (schedule_given || pp > 1 || m > 1) c.floor_in.emplace_back("schedule", var.schedule);
                if (tl) {
                  c.floor_in.emplace_back("par.iteration", tl->iteration_s);
                  for (const auto& [key, value] : tl->figures) c.floor_in.emplace_back("par.figures." + key, value);
                } else {
                  family_floor_inputs_add(c.floor_in, fc.seconds_by_family(gpu));
                }
              }
              if (tl) {
                // the virtual stages the plan ran (the schedule's default when the variant left them open)
                const nlohmann::ordered_json& par = tl->json;
                c.virtual_stages = par.at("virtual_stages").get<int64_t>();
                if (cluster.is_null()) cluster = par.at("cluster");
                // the critical device's parts (the busiest one: the least idle) and memory per GPU of the fullest
                // stage, as predict reports them
                // (scripts/neusight/parallel/report.lua, from scripts/neusight/memory.lua)
                c.iteration_ms = tl->iteration_s * 1e3;
                c.compute_ms = par.at("compute_ms").get<double>();
                c.exposed_comm_ms = par.at("exposed_comm_ms").get<double>();
                c.bubble_ms = par.at("bubble_ms").get<double>();
                c.optimizer_ms = par.at("optimizer_ms").get<double>();
                c.imbalance_ms = par.at("imbalance_ms").get<double>();
                c.memory_gb = par.at("memory_gb").get<double>();
                c.fits = par.at("fits").get<bool>();
                c.distributed_optimizer_fits = tl->distributed_optimizer_fits;
                c.zero = par.at("zero").get<int64_t>();
                c.zero_fits = tl->zero_fits;
              } else {
                // --gpus 1, one microbatch, no recomputation: no plan, the one-GPU forecast `predict` gives for it
                // (memory_gb and fits as scripts/neusight/report.lua hands them to the figures)
                c.iteration_ms = fc.total() * 1e3;
                // compute as a plan's timeline counts it: without the optimizer step (its own optimizer_ms there)
                c.compute_ms = (fc.total() - fc.phase_total(phase::optimizer)) * 1e3;
                c.optimizer_ms = fc.phase_total(phase::optimizer) * 1e3;
                bool have_memory = false, have_fits = false;
                for (const auto& [key, value] : s.forecast_facts_of(w.state, fc, gpu).inputs) {
                  if (const auto v = figure_number(value); key == "memory_gb" && v) c.memory_gb = *v, have_memory = true;
                  if (key == "fits" && std::holds_alternative<bool>(value)) c.fits = std::get<bool>(value), have_fits = true;
                }
                if (!have_memory || !have_fits) throw error("scripts/neusight/report.lua: no memory_gb or fits for a one-GPU run");
              }
              const bool cheapest = f.recompute == "auto";  // stop at the first mode that fits; list only that one
              done = cheapest && c.fits;
              ev.listed = !cheapest || c.fits || &recompute == &modes.back() || !training;
              ev.c = c;
              ran.push_back(std::move(ev));
            } catch (const std::exception& ex) {
              // One layout that cannot run (heads not divisible by tp, fewer layers than stages: raised with
              // require("neusight").infeasible, or the engine's for a GPU without units for the dtype) is a reason, not
              // a failure. Any other error (a script's bug, a bad model file) is the input's: it stops the search with
              // its file:line, as it stops predict and `serve --sweep` (scripts/neusight/sweep.lua).
              if (!s.infeasible_is(ex)) throw;
              ev.failed = true;
              ev.why = ex.what();
              if (const size_t nl = ev.why.find('\n'); nl != std::string::npos) {
                ev.context = ev.why.substr(nl);  // "    while building the model of …"
                ev.why.resize(nl);
                // said as what search was building, the layout, not "the model of command line" (session::
                // workload_load's context line, its words from lua/workload_context.h): "while building layout dp 1 x tp 2 x pp 1
                // (the model of --model …)"
                const std::string was = workload_building_context, cli = std::string(workload_command_line) + " (";
                if (const size_t at = ev.context.find(was); at != std::string::npos) {
                  const size_t end = std::min(ev.context.find('\n', at), ev.context.size());
                  std::string of = ev.context.substr(at + was.size(), end - at - was.size());
                  if (of.rfind(cli, 0) == 0 && of.back() == ')') of = of.substr(cli.size(), of.size() - cli.size() - 1);
                  ev.context.replace(at, end - at,
                                     fmt::format("while building layout dp {} x tp {} x pp {} (the model of {})", dp, tp,
                                                 pp, of));
                }
              }
              ran.push_back(std::move(ev));
              bad_layout[vi] = true;
              built.reset(), built_fc.reset(), built_notes.clear(), built_plan = false, built_for = nullptr;
              break;
            }
          }
        }
      }
      for (const std::string& why : pipeline_skipped)
        if (!why.empty()) ++skipped[why];
      // told variant by variant, each microbatch count in turn, as they always were (the stable sort keeps each
      // variant's counts and modes in the order made)
      std::stable_sort(ran.begin(), ran.end(), [](const evaluation& a, const evaluation& b) { return a.vi < b.vi; });
      for (evaluation& ev : ran) {
        if (ev.failed) {
          if (!ev.context.empty()) skipped_context.emplace(ev.why, ev.context);
          ++skipped[ev.why];
          continue;
        }
        ++evaluated;
        warned.layout(ev.workload_warnings, ev.notes);
        warned.model(ev.model_warnings);
        sequence_parallel_used = sequence_parallel_used || (f.sequence_parallel && tp > 1);
        if (ev.listed) results.push_back(std::move(ev.c));
      }
    }
  }
  if (results.empty()) {
    std::string reasons;
    for (const auto& [why, n] : skipped) {
      reasons += fmt::format("\n  {} layout(s): {}", n, why);
      if (auto c = skipped_context.find(why); c != skipped_context.end())
        for (size_t at = 0; at < c->second.size();) {  // each context line, indented under its reason
          const size_t nl = c->second.find('\n', at + 1);
          reasons += "\n  " + c->second.substr(at + 1, nl == std::string::npos ? std::string::npos : nl - at - 1);
          at = nl == std::string::npos ? c->second.size() : nl;
        }
    }
    throw error(fmt::format("search: no layout of {} GPUs could be forecast{}", f.gpus, reasons));
  }
  std::stable_sort(results.begin(), results.end(), [](const candidate& a, const candidate& b) {
    if (a.fits != b.fits) return a.fits;
    return a.iteration_ms < b.iteration_ms;
  });
  // search's own flags that no layout used (the workload's fields are the workloads' to warn of)
  std::vector<std::string> own;
  if (f.sequence_parallel && !sequence_parallel_used)
    own.push_back(fmt::format(
        "parallel.sequence_parallel (--sequence-parallel) has no effect: it splits each sequence's tokens over the "
        "tensor-parallel ranks, and no layout forecast has tp > 1 (--gpus {}, --max-tp {}); drop it",
        f.gpus, f.max_tp));
  if (!training && f.recompute == "all")
    own.push_back(fmt::format(
        "parallel.recompute (--recompute all) has no effect: activation recomputation re-runs forwards during the "
        "backward pass, and mode \"{}\" has none; drop it", f.mode));
  std::vector<std::string> warnings = warned.all(own);
  // --gpu a100: the GPU the short name was taken as (gpu_catalog::resolve), said once
  if (const std::string note = s.gpu_note(f.gpu); !note.empty() && std::find(warnings.begin(), warnings.end(), note) == warnings.end())
    warnings.insert(warnings.begin(), note);
  // the layouts' bridge warnings (groups priced over PCIe beyond the GPU's NVLink bridge) as one, naming every group
  // they named (scripts/neusight/parallel/layout.lua bridge_warnings_merge; an older --scripts layout.lua without it:
  // one per distinct text, as before)
  if (s.has_function("neusight.parallel.layout", "bridge_warnings_merge"))
    warnings = s.strings_call("neusight.parallel.layout", "bridge_warnings_merge", warnings);
  std::vector<candidate> shown;
  std::vector<std::string> figure_lines;  // the table's words on the figures' columns (search_figures' lines)
  for (const auto& c : results)
    if ((c.fits || f.all) && int64_t(shown.size()) < f.top) shown.push_back(c);
  // layouts forecast faster than the GPU can run them (a calibration too fast, a GPU file's peaks too low): said once,
  // of the best-ranked of them, and each layout shown with its tokens/s, MFU and cost as predict's figures give them,
  // in one call over the ranking that makes each layout's inputs once (scripts/neusight/figures.lua search_floor; an
  // older --scripts figures.lua whose search_floor gives no items: no figures, as before them). `shown` is the
  // ranking's first layouts (fitting ones rank first).
  if (floor_rule) {
    const gpu_spec& gpu = s.gpu(f.gpu);
    figure_inputs shared = {{"dtype", dtype}};
    if (const auto peak = s.dense_peak_tflops(gpu, dtype)) shared.emplace_back("peak_tflops", *peak);
    if (!calibration_file.empty()) shared.emplace_back("calibration_source", calibration_file);
    shared.insert(shared.end(), {{"mode", f.mode}, {"batch", f.batch}, {"seq", f.seq},
                                 {"shown", int64_t(shown.size())}});
    std::vector<figure_inputs> ranked;
    ranked.reserve(results.size());
    for (candidate& c : results) ranked.push_back(std::move(c.floor_in));
    std::vector<std::vector<figure>> each;
    figures got = s.figures_call_batch("neusight.figures", "search_floor", ranked, shared, gpu, &each);
    for (size_t i = 0; i < shown.size() && i < each.size(); ++i) shown[i].figures = std::move(each[i]);
    if (!each.empty()) figure_lines = std::move(got.lines);  // what the columns are: every layout's
    for (auto& w : got.warnings) warnings.push_back(std::move(w));
  }
  for (const auto& w : warnings) std::fprintf(stderr, "neusight: warning: %s\n", w.c_str());

  // No layout fits (and --all was not asked for): no answer, so the command fails, as `serve --sweep` does when no
  // setting can run. The error says why, with the memory figures the layouts were ranked by (the least memory per GPU
  // any of them needs, against the GPU's, the `fits` rule of scripts/neusight/memory.lua), and which of search's flags
  // not given yet could help. The JSON keeps its document (with this as `error`, for scripts), as serve --sweep's
  // report is written; the table and the CSV would hold no layout: nothing is written.
  std::string no_fit;
  if (!f.all && std::none_of(results.begin(), results.end(), [](const candidate& c) { return c.fits; })) {
    const candidate& least = *std::min_element(results.begin(), results.end(), [](const candidate& a, const candidate& b) {
      return a.memory_gb < b.memory_gb;
    });
    std::vector<std::string> helps;
    // the least ZeRO stage that makes some layout tried fit (scripts/neusight/parallel/memory.lua report zero_fits; 1:
    // the distributed optimizer, where it is not already on, some layout has dp > 1 and its sharded master copies and
    // moments are enough), in search.lua zero_help's words, as predict's no-fit warning's
    int64_t least_zero = 0;
    for (const auto& c : results)
      if (c.zero_fits > 0 && (least_zero == 0 || c.zero_fits < least_zero)) least_zero = c.zero_fits;
    if (least_zero > 0)
      helps.push_back(s.call("neusight.search", "zero_help", {nlohmann::json(least_zero)}, 1, "")[0].get<std::string>());
    if (training && f.recompute != "auto" && f.recompute != "all" && f.recompute != modes.back())
      helps.push_back(fmt::format("--recompute auto (tries up to {} recomputation; --recompute {} was given)",
                                  modes.back(), f.recompute));
    if (f.max_tp < f.gpus) helps.push_back(fmt::format("a larger --max-tp (now {})", f.max_tp));
    helps.push_back(fmt::format("more GPUs (--gpus, now {})", f.gpus));
    helps.push_back("a GPU with more memory (--gpu)");
    // the capacity the layouts were held to (scripts/neusight/memory.lua capacity: mem_gb, at most 95 % of what the
    // device reports), not the datasheet's GB where that is more (an L4's 24 GB of which it reports 22.0 GiB), written
    // as every memory message writes it (memory.lua capacity_gb_text)
    const auto cap = s.call("neusight.memory", "capacity_gb_text",
                            {nlohmann::json(gpu_mem_gb), gpu_mem_reported_gib > 0 ? nlohmann::json(gpu_mem_reported_gib)
                                                                                 : nlohmann::json()},
                            1, "");
    if (!cap[0].is_string()) throw error(s.module_display("neusight.memory") + ": capacity_gb_text must return a string");
    no_fit = fmt::format(
        "search: no layout of {} GPUs fits in memory: of the {} forecast{}, the least memory per GPU is {:.1f} GB (dp {} "
        "tp {} pp {}{}{}), more than the {} GB of {}; what could help: {} (--all lists the layouts "
        "tried with their memory)",
        f.gpus, evaluated, evaluated == 1 ? "" : "s", least.memory_gb, least.dp, least.tp, least.pp,
        show_ep ? fmt::format(" ep {}", least.ep) : "",
        training ? ", recompute " + least.recompute : "",
        cap[0].get<std::string>(), gpu_name,
        fmt::join(helps, ", "));
  }

  // The ranking as scripts/neusight/search.lua renders it (format_table, format_json or format_csv, by --format): one
  // document of what the search found, handed over once (session::render), with the layouts shown, their numbers and
  // figures (figures.lua search_figures: key, value, and the table's column and cell). Which fields and columns show,
  // and how, is the formatter's: a field added there shows with no C++ change.
  using ojson = nlohmann::ordered_json;
  ojson doc{{"model", f.model}, {"gpu", gpu_name}, {"gpu_mem_gb", gpu_mem_gb},
            {"gpu_mem_reported_gib", gpu_mem_reported_gib > 0 ? ojson(gpu_mem_reported_gib) : ojson()},
            {"gpus", f.gpus}, {"batch", f.batch},
            {"seq", f.seq}, {"mode", f.mode}, {"dtype", dtype}, {"precision", precision},
            {"sequence_parallel", f.sequence_parallel}, {"distributed_optimizer", f.distributed_optimizer},
            {"cluster", cluster}, {"predictor", f.predictor}};
  if (!calibration_file.empty()) doc["calibration"] = calibration_file;
  doc["evaluated"] = evaluated;
  doc["fitting"] = std::count_if(results.begin(), results.end(), [](const candidate& c) { return c.fits; });
  doc["choices"] = names;  // search.lua choices': the schedules tried, which run model chunks (rows as schedule/v)
  doc["expert_parallel"] = show_ep;  // the model has experts (or --ep fixed the degree): rows say their ep
  // a forecast has an optimizer step (training with an optimizer): the iteration's other part
  doc["optimizer_step"] = std::any_of(results.begin(), results.end(), [](const candidate& c) { return c.optimizer_ms > 0; });
  auto& layouts = doc["layouts"] = ojson::array();
  for (const auto& c : shown) {
    ojson figs = ojson::array();
    for (const figure& x : c.figures) {
      ojson value;  // null: not available
      std::visit(
          [&](const auto& v) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) value = v;
          },
          x.value);
      figs.push_back({{"key", x.key}, {"value", std::move(value)}, {"column", x.column}, {"cell", x.cell}});
    }
    layouts.push_back({{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}, {"ep", c.ep}, {"microbatches", c.microbatches},
                       {"schedule", c.schedule}, {"virtual_stages", c.virtual_stages}, {"zero", c.zero},
                       {"recompute", c.recompute},
                       {"iteration_ms", c.iteration_ms}, {"compute_ms", c.compute_ms},
                       {"exposed_comm_ms", c.exposed_comm_ms}, {"bubble_ms", c.bubble_ms},
                       {"optimizer_ms", c.optimizer_ms}, {"imbalance_ms", c.imbalance_ms}, {"memory_gb", c.memory_gb},
                       {"fits", c.fits}, {"distributed_optimizer_fits", c.distributed_optimizer_fits},
                       {"zero_fits", c.zero_fits}, {"figures", std::move(figs)}});
  }
  auto& sk = doc["skipped"] = ojson::array();  // [reason, layouts], by reason
  for (const auto& [why, n] : skipped) sk.push_back(ojson::array({why, n}));
  doc["warnings"] = warnings;
  doc["figure_lines"] = figure_lines;  // the table's words on the figures' columns (search_figures' lines)
  if (!no_fit.empty()) doc["error"] = no_fit;
  const std::string format = f.format == "json" || f.format == "csv" ? f.format : "table";
  // no layout fits: the JSON keeps its document (with the error), the table and the CSV are not written
  if (!no_fit.empty() && format != "json") throw error(no_fit);
  const std::string out = s.render("neusight.search", "format_" + format, doc, &last_state);
  if (!no_fit.empty()) {
    emit(out, f.output);
    throw error(no_fit);
  }
  emit(out, f.output);
  return 0;
}

int search_command(flag_targets& t, int, char**) {
  return search_main(report_into(t.get<search_flags>(), t.get<common_flags>()));
}

}  // namespace ns
