// engine/cli/graph_run.h — a reference operator graph forecast (predict --graph, eval models): the one pipeline both
// commands run on a loaded graph.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ingest/opgraph.h"
#include "lua/session.h"

namespace ns {

// How a graph is forecast, besides the graph, its GPU and the predictor.
struct graph_run {
  std::string mode;             // "train" | "inference" (the file's tag, or --mode)
  int64_t layers = 0;           // the layers asked for (--layers, a label's num_layer); 0: the model config's
  int64_t batch = 0, seq = 0;   // what the report says the graph ran (its tag's; 0: unknown)
  std::string launch = "eager";
  std::string overhead = "default";  // scripts/neusight/overhead.lua's mode
  // The warnings found before (the graph's, the GPU's): the run's first. With `tell` unset the run keeps them and
  // those it finds (the layer count's, a training graph without backward kernels, the layout's plan), and the
  // pipeline says each as it is found (predict --graph); with `tell`, each of those it finds goes to `tell` at once
  // and the run keeps none (eval models says each once over all its labels, and no pipeline warning).
  std::vector<std::string> warnings;
  std::function<void(const std::string&)> tell;
  // a training forecast of a graph without backward kernels (parsed for inference) is said to be the forward pass
  bool forward_only_warning = false;
  // what the pipeline's errors are prefixed with ("" none; eval models: the label file, "<file>: ")
  std::string error_prefix;
};

// The graph `og` forecast on `gpu` with the predictor `pred` gives (asked once the plan is made): its layer count (opgraph_layers) and the graph replicated over it, the
// report's fields (session::report_graph), its kernels, a distributed graph's plan (session::graph_parallel: its
// layout's collectives and timeline) and scripts/neusight/pipeline.lua finish (session::forecast_finish). `layers`
// (when given) gets the layer count the graph was replicated over.
session::finished graph_forecast(session& s, opgraph& og, const gpu_spec& gpu,
                                 const std::function<const predictor&()>& pred, graph_run r, int64_t* layers = nullptr);

}  // namespace ns
