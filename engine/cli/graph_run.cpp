// engine/cli/graph_run.cpp — a reference operator graph forecast (predict --graph, eval models).
#include "cli/graph_run.h"

#include <optional>
#include <utility>

#include "core/text.h"

namespace ns {

session::finished graph_forecast(session& s, opgraph& og, const gpu_spec& gpu,
                                 const std::function<const predictor&()>& pred, graph_run r, int64_t* layers_out) {
  std::vector<std::string> warnings;
  const auto found = [&](std::vector<std::string>& notes) {  // what a step found: told at once, or kept
    if (r.tell)
      for (const auto& w : notes) r.tell(w);
    else
      warnings.insert(warnings.end(), notes.begin(), notes.end());
    notes.clear();
  };
  std::vector<std::string> notes = std::move(r.warnings);  // found before, then the layer count's
  const int64_t layers = opgraph_layers(og, r.layers, notes);
  found(notes);
  if (layers_out) *layers_out = layers;
  opgraph_replicate(og, layers);
  // what the report shows of the graph (scripts/neusight/report.lua graph)
  const run_state st = s.report_graph({{"source", og.source}, {"model", og.g.model}, {"mode", r.mode}, {"batch", r.batch},
                                       {"seq", r.seq}, {"layers", layers}, {"launch", r.launch}},
                                      og.g.params_total(), gpu.mem_gb, gpu.mem_reported_gib);
  const bool training = r.mode == "train";
  if (r.forward_only_warning && training) {
    bool has_backward = false;
    for (const auto& ki : og.kernels) has_backward = has_backward || ki.ph != phase::forward;
    if (!has_backward) {
      notes.push_back(og.source + ": the graph holds no backward kernels (parsed for inference): the training "
                                  "forecast is the forward pass only");
      found(notes);
    }
  }
  std::vector<kernel_instance> kernels = opgraph_kernels(og, training);
  if (const auto par = opgraph_parallel_of(og)) {  // its layout's plan: the timeline predict --graph gives the file
    if (!training) throw error(og.source + ": a distributed graph (" + og.tag->option + ") is a training graph: drop --mode inference");
    s.graph_parallel(st, og.g, kernels, gpu, *par, og.tag->batch, r.mode, notes);
    found(notes);
  }
  // scripts/neusight/pipeline.lua finish (a pipeline.lua of your own under --scripts applies, e.g. one that
  // post-processes the kernels' latencies)
  session::pipeline_graph run;
  run.g = &og.g, run.kernels = std::move(kernels), run.gpu = &gpu, run.pred = &pred(), run.source = og.source;
  run.launch = r.launch, run.state = st;
  run.warnings = std::move(warnings);
  const session::pipeline_options opt{r.overhead, "", !r.tell};
  if (r.error_prefix.empty()) return s.forecast_finish(std::move(run), opt);
  try {
    return s.forecast_finish(std::move(run), opt);
  } catch (const script_error& e) {  // its traceback kept (--traceback)
    throw script_error(r.error_prefix + e.what(), e.traceback);
  } catch (const error& e) {
    throw error(r.error_prefix + e.what());
  }
}

}  // namespace ns
