// engine/cli/kernels_cmd.cpp — training the tile predictor from micro-benchmark CSVs and evaluating it per row.
#include "cli/kernels_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <toml++/toml.h>
#include <unistd.h>

#include "cli/flags.h"
#include "cli/git_version.h"
#include "cli/paths.h"
#include "cli/report.h"
#include "ingest/dataset.h"
#include "core/roofline.h"
#include "core/text.h"
#include "core/weights.h"
#include "lua/session.h"

namespace ns {

namespace {

std::string duration(double s) {
  const int t = int(std::lround(s));
  return t >= 60 ? fmt::format("{}m{:02d}s", t / 60, t % 60) : fmt::format("{}s", t);
}

// "skipped N rows: <reason> (first at file:line)" for each reason rows were skipped (bench_load's reading): what
// train and eval kernels say on stderr, and what eval's table repeats under its count.
std::vector<std::string> skipped_lines(const bench_data& d) {
  std::vector<std::string> out;
  for (const auto& [why, n] : d.skipped) {
    const auto first = d.skipped_first.find(why);
    out.push_back(fmt::format("skipped {} rows: {}{}", n, why,
                              first == d.skipped_first.end() ? "" : " (first at " + first->second + ")"));
  }
  return out;
}

void report_skipped(const bench_data& d) {
  for (const auto& line : skipped_lines(d)) std::fprintf(stderr, "neusight: %s\n", line.c_str());
  if (d.synthetic_rows)  // convert.py's Synthetic column: the rows look like measurements but are not
    std::fprintf(stderr,
                 "neusight: warning: %zu of the rows are synthetic, not measured on a GPU (column Synthetic, first at "
                 "%s: %s): what is trained or scored on them describes the generator, not the hardware\n",
                 d.synthetic_rows, d.synthetic_first.c_str(), d.synthetic_note.c_str());
}

// After the rows are read (bench_load with `known`) and their skips reported: a --gpu FILE that names no device of
// `what` is an error; with no row left, so is the data (`empty`, the advice about unknown devices after it); else the
// advice about rows skipped for an unknown device, once, in plain words.
void rows_check(const bench_data& d, const gpu_data_resolver& known, const std::string& what, const std::string& empty) {
  known.unused_check(what, d.unknown_devices);
  const std::string advice = gpu_data_resolver::unknown_advice(d.unknown_devices);
  if (d.rows.empty()) throw error(empty + (advice.empty() ? advice : " (" + advice + ")"));
  if (!advice.empty()) std::fprintf(stderr, "neusight: %s\n", advice.c_str());
}

// Fewer rows than this and `train` warns: the rows are split into training and validation sets (tile_model_train), and
// below 200 the validation set holds a few dozen rows at most, too few for its MAPE (which picks the best epoch and is
// the number reported) to mean anything, and too few rows to cover a family's shapes (the shipped families were
// fitted on 2 080 to 214 428 rows, weights/*/*/model.toml).
constexpr size_t train_rows_min = 200;

// Tiles for bench rows: the rule's choice, or the measured kernel's (falling back to the rule when the
// kernel name carries no tile). Returns how many measured tiles fell back. A measured tile has no alternative (the
// library's choice is known); a row that falls back gets the rule whole, its alternative tile too (the fp32 tile
// switch, weights/TILE_SWITCH_RULE.md), so it is priced as a forecast prices that GEMM.
size_t tiles_assign(session& s, std::vector<bench_row>& rows, const std::string& mode) {
  std::map<const gpu_spec*, std::vector<kernel*>> by_gpu;
  for (auto& r : rows) by_gpu[r.gpu].push_back(&r.k);
  for (auto& [gpu, ks] : by_gpu) s.tiles_select(ks, *gpu);
  if (mode == "rule") return 0;
  size_t fallback = 0;
  for (auto& r : rows) {
    if (r.fam == family::bmm || r.fam == family::linear) {
      int64_t tm = 0, tk = 0;
      if (s.tile_parse(r.kernel_name, tm, tk)) {  // the measured tile, and no alternative to it
        r.k.tile_m = tm, r.k.tile_k = tk;
        r.k.tile_alt_m = r.k.tile_alt_k = 0, r.k.tile_alt_split = 1, r.k.tile_alt_kernel.clear();
      } else {
        ++fallback;
      }
    } else if (r.fam == family::elementwise) {
      r.k.tile_elems = s.tile_from_grid(r.k.rows, r.k.hidden, r.grid_x, r.grid_y, r.grid_z);
    }
  }
  return fallback;
}

// --out can be made: every part of it that exists is a folder, and the deepest one that exists is writable. Checked
// before any row is read, so that no training is lost to a folder found unusable only when the weights are written.
void out_dir_check(const std::string& out) {
  namespace fs = std::filesystem;
  const fs::path target = fs::absolute(out).lexically_normal();
  std::error_code ec;
  if (fs::exists(target, ec) && !fs::is_directory(target, ec))
    throw error("--out " + out + ": exists and is not a folder");
  fs::path dir = target;
  while (!dir.empty() && !fs::exists(dir, ec)) {
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  if (!fs::is_directory(dir, ec)) throw error("--out " + out + ": cannot be created: " + dir.string() + " is not a folder");
  if (::access(dir.c_str(), W_OK) != 0)
    throw error("--out " + out + ": cannot be created: the folder " + dir.string() + " is not writable");
}

}  // namespace

int train_main(const train_flags& f) {
  const auto fam = family_parse(f.family);
  if (!fam) throw error("unknown family '" + f.family + "'" + text_did_you_mean(f.family, family_name_list()));
  if (!(f.opts.lr > 0) || !std::isfinite(f.opts.lr) || f.opts.lr > 1)
    throw error("--lr must be a learning rate in (0, 1] (got " + std::to_string(f.opts.lr) + ")");
  if (!f.dry_run && !f.force && std::filesystem::exists(std::filesystem::path(f.out) / "model.toml"))
    throw error(f.out + " already holds a model (model.toml): pass --force to replace it, or choose another --out");
  if (!f.dry_run) out_dir_check(f.out);
  session s(session_options_for(f.ops_dirs, f.scripts_dirs, f.gpus_dirs, f.verbose));
  const gpu_catalog catalog = s.gpus();
  gpu_data_resolver known(catalog, f.gpu_files);
  bench_data d = bench_load(f.data, known, s.costing(), bench_use::train, fam, f.exclude_gpus);
  report_skipped(d);
  std::string files;
  for (const auto& file : f.data) files += (files.empty() ? "" : ", ") + file;
  rows_check(d, known, "the " + f.family + " rows read", files + ": no " + f.family + " rows to train on in the given data");
  std::set<std::string> vendors, gpus;
  for (const auto& r : d.rows) vendors.insert(r.gpu->vendor), gpus.insert(r.gpu->name);
  if (vendors.size() != 1) throw error("training rows mix vendors (nvidia and amd): train them separately");
  const std::string vendor = *vendors.begin();
  if (!f.vendor.empty() && f.vendor != vendor) throw error("--vendor " + f.vendor + " but the rows are " + vendor);
  const size_t fell_back = tiles_assign(s, d.rows, f.tiles);
  if (fell_back) std::fprintf(stderr, "neusight: %zu rows have no tile in their kernel name; using the tiling rule\n", fell_back);

  // Too few to train at all: said with the files, before the warning below (which speaks of using the weights)
  if (!f.dry_run && d.rows.size() < tile_train_rows_needed)  // a dry run trains nothing: any rows do
    throw error(files + ": only " + std::to_string(d.rows.size()) + " " + f.family + " rows to train on; training "
                "needs at least " + std::to_string(tile_train_rows_needed) + " (a validation split and a training set "
                "beside it), and " + std::to_string(train_rows_min) + " or more for a validation MAPE that means "
                "something: collect more rows (scripts/collect, grids.py)");
  if (!f.dry_run && d.rows.size() < train_rows_min)
    std::fprintf(stderr,
                 "neusight: warning: only %zu %s rows to train on (fewer than %zu): the validation split is a handful of "
                 "rows, so its MAPE and the epoch it picks are noise, and the model has seen few shapes; collect "
                 "more rows (scripts/collect, grids.py) before using these weights\n",
                 d.rows.size(), f.family.c_str(), train_rows_min);
  std::vector<train_sample> samples;
  samples.reserve(d.rows.size());
  const train_convention& conv = s.training_convention();  // neusight.kernels: what forecasts show the MLP
  const wave_share share = wave_share_trained(*fam);  // how the new weights price a partial wave (tile_model.h)
  for (const auto& r : d.rows) samples.push_back({tile_features_compute(r.k, *r.gpu, conv, share), r.latency_ms / 1e3});
  std::vector<const kernel*> trained_kernels;  // the rows' kernels: the range the weights were trained on
  for (const auto& r : d.rows) trained_kernels.push_back(&r.k);
  const std::map<std::string, double> range = weights_range_of(*fam, trained_kernels);
  if (f.dry_run) {
    // What weights_save would write for the keys the rows alone decide (the manifest's own formatting: toml++), so a
    // shipped model.toml's line can be checked against the data (weights/min_seconds.py).
    std::string names;
    for (const auto& g : gpus) names += (names.empty() ? "" : ", ") + g;
    std::printf("%s (%s): %zu rows from %zu GPUs (%s); dry run: nothing trained, nothing written\n", f.family.c_str(),
                vendor.c_str(), samples.size(), gpus.size(), names.c_str());
    if (const double least = tile_min_seconds(*fam, samples); least > 0) {
      toml::table t;
      t.insert("min_seconds", least);
      std::ostringstream line;
      line << t;
      std::printf("%s\n", line.str().c_str());
    } else {
      std::printf("# no min_seconds: the %s family's rows are eager per-op timings (tile_min_seconds)\n",
                  f.family.c_str());
    }
    if (!range.empty()) std::printf("%s\n", weights_range_text(range).c_str());  // as weights_save writes it
    return 0;
  }
  if (!f.quiet)
    std::fprintf(stderr, "neusight: training %s (%s) on %zu rows from %zu GPUs, %zu threads\n", f.family.c_str(),
                 vendor.c_str(), samples.size(), gpus.size(), size_t(f.opts.threads));
  // A live bar on a terminal; in logs (CI) one line per 10 % of the epochs.
  const bool tty = isatty(fileno(stderr));
  const auto started = std::chrono::steady_clock::now();
  train_options opts = f.opts;
  opts.vendor = vendor;
  train_result r = tile_model_train(*fam, samples, opts, [&](const train_progress& p) {
    if (f.quiet) return;
    if (!tty) {
      if (p.epoch % std::max(1, p.max_epochs / 10) == 0)
        std::fprintf(stderr, "epoch %d/%d  train SMAPE %.2f%%  val MAPE %.2f%% (best %.2f%% @%d)  %s\n", p.epoch,
                     p.max_epochs, p.train_smape, p.val_mape, p.best_val_mape, p.best_epoch, duration(p.seconds).c_str());
      return;
    }
    const double per = p.seconds / p.epoch;
    const int width = 24, done = int(width * p.epoch / p.max_epochs);
    std::fprintf(stderr, "\r[%s%s] epoch %d/%d  train SMAPE %.2f%%  val MAPE %.2f%% (best %.2f%% @%d)  lr %.1e  %s, ETA <%s   ",
                 std::string(size_t(done), '#').c_str(), std::string(size_t(width - done), '.').c_str(), p.epoch,
                 p.max_epochs, p.train_smape, p.val_mape, p.best_val_mape, p.best_epoch, double(p.lr),
                 duration(p.seconds).c_str(), duration(per * (p.max_epochs - p.epoch)).c_str());
  });
  if (tty && !f.quiet) std::fprintf(stderr, "\n");
  r.model.partial_wave = share;  // the features it was trained on: forecasts compute theirs the same way

  weights_provenance p;
  p.vendor = vendor;
  p.data = f.data;
  p.gpus.assign(gpus.begin(), gpus.end());
  p.excluded = f.exclude_gpus;
  p.command = f.command;
  p.git_commit = git_version();
  p.seed = f.opts.seed;
  p.rows = int64_t(samples.size());
  p.train_rows = int64_t(r.train_rows);
  p.val_rows = int64_t(r.val_rows);
  p.epochs_run = r.epochs_run;
  p.best_epoch = r.best_epoch;
  p.val_mape = r.val_mape;
  p.train_mape = r.train_mape;
  p.tiles = f.tiles;
  p.range = range;
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();  // the training's wall time
  weights_save(f.out, r.model, p);
  // The validation rows as forecasts price them: neusight_predictor over this model (the envelope's larger copies,
  // per GPU its minimum over the validation rows of more rows, and a tensor-core BMM's sub-additivity pieces, costed
  // and tiled by the session as the session's own predictor's are), the number `eval kernels` would give them.
  const auto as_forecast = neusight_predictor_make(vendor, r.model, p.gpus);
  as_forecast->train_convention_set(conv);
  as_forecast->gemm_pieces_set(s.gemm_pieces());
  std::map<const gpu_spec*, std::vector<size_t>> val_by_gpu;
  for (size_t i : r.val_index) val_by_gpu[d.rows[i].gpu].push_back(i);
  double ape = 0;
  for (const auto& [gpu, idx] : val_by_gpu) {
    std::vector<kernel_instance> ks;
    for (size_t i : idx) ks.push_back({0, phase::forward, d.rows[i].k});
    const auto sec = as_forecast->predict(ks, *gpu);
    for (size_t j = 0; j < idx.size(); ++j) ape += std::abs(sec[j] * 1e3 - d.rows[idx[j]].latency_ms) / d.rows[idx[j]].latency_ms;
  }
  std::printf("%s: %s weights, %zu rows, validation MAPE %.2f%% (train %.2f%%), best epoch %d of %d; validation MAPE "
              "as forecast %.2f%%\n",
              f.out.c_str(), f.family.c_str(), samples.size(), r.val_mape, r.train_mape, r.best_epoch, r.epochs_run,
              100 * ape / double(r.val_index.size()));
  return 0;
}

int eval_kernels_main(const eval_kernels_flags& f) {
  // On a terminal, what it is doing and since when (a large data set takes half a minute); never in logs or pipes.
  const bool tty = isatty(fileno(stderr));
  const auto started = std::chrono::steady_clock::now();
  auto progress = [&](const std::string& what) {
    if (tty)
      std::fprintf(stderr, "neusight: %s (%s)\n", what.c_str(),
                   duration(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()).c_str());
  };
  session s(session_options_for(f.ops_dirs, f.scripts_dirs, f.gpus_dirs, f.verbose));
  const auto root = data_root_find();
  const gpu_catalog catalog = s.gpus();
  gpu_data_resolver known(catalog, f.gpu_files);
  progress(fmt::format("reading {} {}", f.files.size(), f.files.size() == 1 ? "input" : "inputs"));
  bench_data d = bench_load(f.files, known, s.costing(), bench_use::evaluate, std::nullopt, f.exclude_gpus);
  report_skipped(d);
  std::string files;
  for (const auto& file : f.files) files += (files.empty() ? "" : ", ") + file;
  rows_check(d, known, "the rows read", files + ": no rows to evaluate");  // no rows: a report would read as a perfect score
  // Measured tiles for the tile-match statistic, then the tiles the predictor will use.
  std::vector<std::pair<int64_t, int64_t>> measured(d.rows.size());
  std::vector<bool> has_measured(d.rows.size(), false);
  for (size_t i = 0; i < d.rows.size(); ++i) {
    const auto& r = d.rows[i];
    if (r.fam == family::bmm || r.fam == family::linear) {
      has_measured[i] = s.tile_parse(r.kernel_name, measured[i].first, measured[i].second);
    } else if (r.fam == family::elementwise) {
      measured[i] = {s.tile_from_grid(r.k.rows, r.k.hidden, r.grid_x, r.grid_y, r.grid_z), 0};
      has_measured[i] = true;
    }
  }
  tiles_assign(s, d.rows, f.tiles);
  const auto pred = s.predictor_make(f.predictor, f.weights.empty() ? root / "weights" : std::filesystem::path(f.weights));
  // One forecast per GPU and measured KV-cache dtype: a forecast runs one cache (a --kv-dtype fp8 run's or the 16-bit
  // one), and the predictor's within-forecast envelopes compare the kernels of one forecast only, so the 16-bit cache's
  // rows are priced as they are without the fp8-cache rows beside them.
  std::map<std::pair<const gpu_spec*, std::string>, std::vector<size_t>> by_run;
  std::set<const gpu_spec*> gpus;
  for (size_t i = 0; i < d.rows.size(); ++i) by_run[{d.rows[i].gpu, d.rows[i].kv_cache}].push_back(i), gpus.insert(d.rows[i].gpu);
  std::vector<double> predicted(d.rows.size());
  // what the predictor says of its forecasts: on stderr and in the JSON, once each (cli/paths.h)
  predictor_warnings said;
  progress(fmt::format("{} rows read from {} files; predicting them on {} GPUs", d.rows.size(), d.files.size(),
                       gpus.size()));
  size_t done = 0;
  for (const auto& [run, idx] : by_run) {
    const gpu_spec* gpu = run.first;
    progress(fmt::format("forecast {} of {}: {}{}, {} rows", ++done, by_run.size(), gpu->name,
                         run.second.empty() ? "" : ", KV cache " + run.second, idx.size()));
    std::vector<kernel_instance> ks;
    for (size_t i : idx) ks.push_back({0, phase::forward, d.rows[i].k});
    const auto sec = pred->predict(ks, *gpu);
    for (size_t j = 0; j < idx.size(); ++j) predicted[idx[j]] = sec[j] * 1e3;
    said.take(*pred);
  }
  const std::vector<std::string> warnings = said.say(s);
  struct agg {
    std::vector<double> ape;
    size_t tiles = 0, tile_hits = 0;
  };
  std::map<std::pair<std::string, std::string>, agg> groups;
  using json = nlohmann::ordered_json;
  json rows = json::array();
  for (size_t i = 0; i < d.rows.size(); ++i) {
    const auto& r = d.rows[i];
    // A kernel measured over a KV cache of another dtype (prefill or decode over an fp8 cache) is a cell of its own,
    // "attention_prefill/kv_fp8", "attention_decode/kv_fp8": the weights never trained on it, and the 16-bit cache's
    // cell keeps the rows it always had.
    const std::string cell = std::string(family_name(r.fam)) + (r.kv_cache.empty() ? "" : "/kv_" + r.kv_cache);
    auto& g = groups[{r.gpu->name, cell}];
    g.ape.push_back(100 * std::abs(predicted[i] - r.latency_ms) / r.latency_ms);
    if (has_measured[i]) {
      ++g.tiles;
      const bool hit = r.fam == family::elementwise ? r.k.tile_elems == measured[i].first
                                                    : (r.k.tile_m == measured[i].first && r.k.tile_k == measured[i].second);
      g.tile_hits += hit;
    }
    if (f.format == "json")
      rows.push_back({{"device", r.device}, {"gpu", r.gpu->name}, {"op", r.op}, {"family", cell},
                      {"where", r.where}, {"measured_ms", r.latency_ms}, {"predicted_ms", predicted[i]}});
  }
  json summary = json::array();
  // columns as wide as the longest GPU and family name (RTX-PRO-6000-Server, attention_prefill)
  size_t gpu_w = 18, fam_w = 12;
  for (const auto& [key, g] : groups) gpu_w = std::max(gpu_w, key.first.size()), fam_w = std::max(fam_w, key.second.size());
  std::string table = fmt::format("{:<{}} {:<{}} {:>6} {:>8} {:>8} {:>8} {:>10}\n", "gpu", gpu_w, "family", fam_w, "rows",
                                  "MAPE %", "median %", "p90 %", "tile hit %");
  std::string csv = "gpu,family,rows,mape,median_ape,p90_ape,tile_match\n";  // the JSON summary's keys
  for (auto& [key, g] : groups) {
    std::sort(g.ape.begin(), g.ape.end());
    double mean = 0;
    for (double a : g.ape) mean += a;
    mean /= double(g.ape.size());
    const double median = median_of(g.ape), p90 = g.ape[std::min(g.ape.size() - 1, g.ape.size() * 9 / 10)];
    const double hit = g.tiles ? 100.0 * double(g.tile_hits) / double(g.tiles) : NAN;
    summary.push_back({{"gpu", key.first}, {"family", key.second}, {"rows", g.ape.size()}, {"mape", mean},
                       {"median_ape", median}, {"p90_ape", p90}, {"tile_match", g.tiles ? json(hit) : json(nullptr)}});
    table += fmt::format("{:<{}} {:<{}} {:>6} {:>8.2f} {:>8.2f} {:>8.2f} {:>10}\n", key.first, gpu_w, key.second, fam_w,
                         g.ape.size(), mean, median, p90, g.tiles ? fmt::format("{:.1f}", hit) : std::string("-"));
    csv += fmt::format("{},{},{},{},{},{},{}\n", csv_field(key.first), csv_field(key.second), g.ape.size(), mean, median,
                       p90, g.tiles ? fmt::format("{}", hit) : std::string());
  }
  size_t skipped = 0;
  for (const auto& [why, n] : d.skipped) skipped += n;
  if (f.format == "json") {
    json j;
    j["predictor"] = f.predictor;
    j["tiles"] = f.tiles;
    j["files"] = d.files;
    j["rows"] = std::move(rows);
    j["summary"] = std::move(summary);
    j["skipped"] = d.skipped;
    j["warnings"] = warnings;
    emit(j.dump(2) + "\n", f.output);
  } else if (f.format == "csv") {
    emit(csv, f.output);  // the summary table's rows; its skips said on stderr above
  } else {
    table += fmt::format("\n{} rows evaluated, {} skipped (predictor {}, {} tiles)\n", d.rows.size(), skipped,
                         f.predictor, f.tiles);
    for (const auto& line : skipped_lines(d)) table += "  " + line + "\n";  // why, in the report itself too
    if (!d.unknown_devices.empty()) table += "  " + gpu_data_resolver::unknown_advice(d.unknown_devices) + "\n";
    emit(table, f.output);
  }
  return 0;
}

namespace {
// One word of a command line as a POSIX shell reads it back: as is when it holds only characters no shell treats
// specially, else in single quotes (a quote inside as '\''). train's model.toml `command`.
std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                       "0123456789_-./,:=+@%") == std::string::npos;
  if (plain) return w;
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

int train_command(flag_targets& t, int argc, char** argv) {
  train_flags& tflags = t.get<train_flags>();
  tflags.opts.hidden.clear();
  paths_into(tflags, t.get<common_flags>());
  for (const auto& w : list_split(t.get<raw_flags>().hidden)) tflags.opts.hidden.push_back(std::stoi(w));  // checked: 1..1024
  for (int i = 0; i < argc; ++i) tflags.command += (i ? " " : "") + shell_word(argv[i]);  // as a shell reads it back
  return train_main(tflags);
}

int eval_kernels_command(flag_targets& t, int, char**) {
  return eval_kernels_main(report_into(t.get<eval_kernels_flags>(), t.get<common_flags>()));
}

}  // namespace ns
