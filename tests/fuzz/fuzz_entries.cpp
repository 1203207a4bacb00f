// tests/fuzz/fuzz_entries.cpp — the loaders as the fuzz targets and the corpus replay test call them (see the header).
#include "fuzz_entries.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "core/calibration.h"
#include "core/cluster_spec.h"
#include "ingest/dataset.h"
#include "core/gpu_spec.h"
#include "ingest/opgraph.h"
#include "core/text.h"
#include "core/tile_model.h"
#include "ingest/measurement.h"
#include "ingest/trace.h"
#include "core/wave_scaling.h"
#include "core/weights.h"
#include "lua/session.h"

namespace ns_fuzz {
namespace {

// gpus/*.toml, read once: the devices a dataset CSV may name and the GPUs traces are scaled between.
const std::vector<ns::gpu_spec>& gpus() {
  static const std::vector<ns::gpu_spec> all = ns::gpu_catalog(std::filesystem::path(NEUSIGHT_SOURCE_DIR) / "gpus").load_all();
  return all;
}

const ns::gpu_spec& gpu_named(const std::string& stem) {
  for (const auto& g : gpus())
    if (std::filesystem::path(g.source).stem() == stem) return g;
  throw std::logic_error("fuzz: no gpus/" + stem + ".toml");
}

// Up to n parts split at NUL bytes (the last part keeps any further NULs); missing parts are empty.
std::vector<std::string_view> split(std::string_view data, size_t n) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < n) {
    const size_t nul = data.find('\0');
    if (nul == std::string_view::npos) break;
    parts.push_back(data.substr(0, nul));
    data.remove_prefix(nul + 1);
  }
  parts.push_back(data);
  parts.resize(n);
  return parts;
}

}  // namespace

void gpu_toml(std::string_view data, const std::string& source) { ns::gpu_spec_parse(data, source); }

void cluster_toml(std::string_view data, const std::string& source) { ns::cluster_spec_parse(data, source); }

void dataset(std::string_view data, const std::string& source) {
  // Names and aliases, case-insensitive (gpu_catalog::resolve without reading the folder again per device).
  const ns::bench_device_resolver resolve = [](const std::string& device) -> std::optional<ns::gpu_spec> {
    const std::string q = ns::text_lower(device);
    for (const auto& g : gpus()) {
      if (ns::text_lower(g.name) == q) return g;
      for (const auto& a : g.aliases)
        if (ns::text_lower(a) == q) return g;
    }
    return std::nullopt;
  };
  ns::bench_parse(data, source, resolve, ns::bench_use::train);
}

void opgraph(std::string_view data, const std::string& source) {
  ns::opgraph_parse(data, source, [](std::vector<ns::kernel*>&, const ns::kernel_where&) {});
}

void trace(std::string_view data, const std::string& source) {
  const auto parts = split(data, 3);
  ns::trace tr;
  switch (ns::trace_detect_text(parts[0], source)) {
    case ns::trace_format::chrome_json: tr = ns::trace_parse_chrome(parts[0], source); break;
    case ns::trace_format::label_csv: tr = ns::trace_parse_label_csv(parts[0], source, "V100"); break;
    case ns::trace_format::wavescale: {
      size_t next = 1;  // the manifest's ops file, then its kernels file
      tr = ns::trace_parse_wavescale(parts[0], source, [&](const std::string& name) {
        return std::make_pair(std::string(parts[std::min<size_t>(next++, 2)]), source + "/" + name);
      });
      break;
    }
  }
  // What `neusight scale` does with a measured kernel.
  static const ns::wave_gpu from = ns::wave_gpu_from_spec(gpu_named("v100_pcie_32gb"));
  static const ns::wave_gpu to = ns::wave_gpu_from_spec(gpu_named("h100_sxm5_80gb"));
  ns::wave_options opt;
  opt.zero_occupancy = ns::zero_occupancy_policy::small_kernel;
  for (const auto& op : tr.ops)
    for (const auto& k : op.kernels) {
      const ns::wave_kernel w = ns::wave_kernel_of(k);
      for (const auto variant : {ns::wave_variant::code, ns::wave_variant::paper_waves}) {
        opt.variant = variant;
        ns::wave_scale(w, from, to, opt);
      }
    }
}

void weights(std::string_view data, const std::string& source) {
  const auto parts = split(data, 2);
  ns::weights_provenance p;
  ns::weights_parse(parts[0], source, [&](const std::string&) { return std::string(parts[1]); }, &p);
}

namespace {

// One session for every HF config input (a state per input would dominate the run): no memo (its tables would grow
// with every input), no calibration files, and a smaller instruction budget than the CLI's so that a config that
// builds a huge model stops with the budget's error within the fuzzer's timeout.
ns::session& hf_session() {
  static ns::session s([] {
    ns::session_options o;
    o.data_root = NEUSIGHT_SOURCE_DIR;
    o.memo = false;
    o.calibration = false;
    o.limits = ns::script_limits{};
    o.limits.instructions = 50'000'000;
    o.limits.memory_mb = 512;
    return o;
  }());
  return s;
}

// A message that names the input but comes from a Lua runtime error in the engine's own scripts (the config reached
// code that assumed a validated value: "scripts/neusight/models/gpt.lua:40: attempt to compare number with nil") is a
// loader bug too: it must be a message about the config. Matched with the script position in front, so that config
// text quoted in a message (a JSON syntax error's "last read") is not taken for one.
void check_not_internal(const ns::error& e) {
  static const std::regex internal(
      R"(\.lua:[0-9]+: (attempt to |bad argument #|stack overflow|number has no integer representation))");
  if (std::regex_search(e.what(), internal))
    throw std::logic_error(std::string("a Lua runtime error, not a message about the config: ") + e.what());
}

}  // namespace

void hf_config(std::string_view data, const std::string& source) {
  ns::session& s = hf_session();
  const std::string path = source + "/config.json";
  s.file_text_set(path, std::string(data));
  ns::workload_overrides o = {{"model", path},
                              {"gpu", std::string("h100_sxm5_80gb")},
                              {"mode", std::string("inference")},
                              {"batch", ns::workload_value(int64_t(2))},
                              {"seq", ns::workload_value(int64_t(8))}};
  try {
    // inference, then (a config that loads) training: its backward and optimizer kernels
    for (const char* mode : {"inference", "train"}) {
      o["mode"] = std::string(mode);
      const ns::workload w = s.workload_load("", o);
      if (w.g.nodes.empty()) throw std::logic_error("a config that builds no nodes loaded: " + source);
      const ns::expansion e = s.expand(w.g, w.gpu_resolved, w.training());
      for (const auto& ki : e.kernels)
        if (!std::isfinite(ki.k.flops) || !std::isfinite(ki.k.bytes) || ki.k.flops < 0 || ki.k.bytes < 0)
          throw std::logic_error("a kernel with flops " + std::to_string(ki.k.flops) + " and bytes " +
                                 std::to_string(ki.k.bytes) + " from " + source);
    }
  } catch (const ns::error& e) {
    check_not_internal(e);
    throw;
  }
}

void uncertainty_toml(std::string_view data, const std::string& source) {
  // What predict and --calibrate hand the table's two readers (scripts/neusight/uncertainty.lua figures, the band;
  // scripts/neusight/calibration.lua fit, its priors): a forecast's seconds by kernel family on an H100.
  ns::session& s = hf_session();
  const std::string path = source + "/uncertainty.toml";
  s.file_text_set(path, std::string(data));
  static const ns::figure_inputs in = [] {
    ns::figure_inputs v = {{"latency_s", 0.0125}, {"measured_s", 0.015}, {"measurement", std::string("m.toml")}};
    double t = 0.001;
    for (const auto& fam : ns::family_name_list()) {
      v.emplace_back("family_s." + fam, t);
      v.emplace_back("family_n." + fam, 3.0);
      t *= 1.3;
    }
    v.emplace_back("family_s.other", 0.0005);
    v.emplace_back("roofline.gemm_fp8", true);  // a family the roofline priced: no error data used
    return v;
  }();
  const ns::gpu_spec& gpu = gpu_named("h100_sxm5_80gb");
  try {
    s.figures_call("neusight.uncertainty", "figures", in, gpu, ns::uncertainty_source(path));
    s.figures_call("neusight.calibration", "fit", in, gpu, ns::uncertainty_source(path));
  } catch (const ns::error& e) {
    check_not_internal(e);
    throw;
  }
}

void calibration_toml(std::string_view data, const std::string& source) {
  // a calibration of the GPU it sits beside (the check that it names that GPU is part of the loader)
  static const ns::gpu_spec& gpu = gpu_named("h100_sxm5_80gb");
  ns::calibration_parse(data, source, gpu);
}

void measurement_toml(std::string_view data, const std::string& source) { ns::measurement_parse(data, source, ns::measurement_use::predict); }

const std::vector<target>& targets() {
  static const std::vector<target> all = {{"gpu_toml", gpu_toml}, {"cluster_toml", cluster_toml},
                                          {"dataset", dataset},   {"opgraph", opgraph},
                                          {"trace", trace},       {"weights", weights},
                                          {"hf_config", hf_config},
                                          {"calibration_toml", calibration_toml},
                                          {"measurement_toml", measurement_toml},
                                          {"uncertainty_toml", uncertainty_toml}};
  return all;
}

}  // namespace ns_fuzz
