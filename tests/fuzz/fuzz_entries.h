// tests/fuzz/fuzz_entries.h — one entry per fuzzed loader: the libFuzzer targets (tests/fuzz/fuzz_main.cpp) and the
// corpus replay test (tests/core/test_fuzz_corpus.cpp) call the same functions.
//
// An entry feeds `data` to a loader as if it were the file `source` and returns normally when the input loads.
// A bad input must throw ns::error whose message names `source` (a file the input names is shown under it, e.g.
// "<source>/ops.csv"); anything else (a crash, a sanitizer report, another exception type, an error naming no
// file) is a bug. Inputs made of several files are split at NUL bytes:
//   trace    the trace file (Chrome JSON, wavescale manifest or label CSV) [\0 ops CSV \0 kernels CSV]
//   weights  model.toml \0 weights.bin (everything after the first NUL, NULs included)
// The HF config entry names the input "<source>/config.json" (the loader takes a config by its extension), the
// uncertainty entry "<source>/uncertainty.toml".
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ns_fuzz {

using entry_fn = void (*)(std::string_view data, const std::string& source);

struct target {
  const char* name;  // tests/fuzz/corpus/<name>, tests/fuzz/regressions/<name>
  entry_fn run;
};

void gpu_toml(std::string_view data, const std::string& source);      // gpu_spec_parse
void cluster_toml(std::string_view data, const std::string& source);  // cluster_spec_parse
void dataset(std::string_view data, const std::string& source);       // bench_parse (devices from gpus/*.toml)
void opgraph(std::string_view data, const std::string& source);       // opgraph_parse
void trace(std::string_view data, const std::string& source);         // trace_detect_text + the format's parser,
                                                                      // then wave scaling of every kernel
void weights(std::string_view data, const std::string& source);       // weights_parse
void hf_config(std::string_view data, const std::string& source);     // --model config.json: JSON, models/hf.lua
                                                                      // from_config, the model's builder, then
                                                                      // every node's op rule (session::expand)
void calibration_toml(std::string_view data, const std::string& source);  // calibration_parse (<gpu>.calibration.toml)
void measurement_toml(std::string_view data, const std::string& source);  // measurement_parse (--calibrate FILE)
void uncertainty_toml(std::string_view data, const std::string& source);  // weights/<vendor>/uncertainty.toml: the
                                                                          // band and a calibration fit read it

const std::vector<target>& targets();

}  // namespace ns_fuzz
