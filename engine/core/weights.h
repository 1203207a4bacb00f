// engine/core/weights.h — versioned weight folders: model.toml (manifest) + weights.bin (float32, checksummed).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/tile_model.h"

namespace ns {

constexpr int64_t weights_format_version = 1;
// The widest layer a manifest may declare (the shipped models use 32–64); the bytes the widths imply are checked
// against the data-file limit before anything is read.
constexpr int64_t weights_max_layer_width = 65536;

// What produced the weights; written to [training] of model.toml.
struct weights_provenance {
  std::string vendor;                 // "nvidia" | "amd"
  std::vector<std::string> data;      // CSV files or folders read
  std::vector<std::string> gpus;      // GPUs with rows in the training set
  std::vector<std::string> excluded;  // --exclude-gpu
  std::string command, git_commit;
  uint64_t seed = 0;
  int64_t rows = 0, train_rows = 0, val_rows = 0, epochs_run = 0, best_epoch = 0;
  double val_mape = 0, train_mape = 0, seconds = 0;
  std::string tiles;  // "measured" | "rule"
  // [training.range]: the largest value of the family's range input (family_range_input) among the rows trained on;
  // empty for a family without one, or weights from before it (read as: no range known, nothing said)
  std::map<std::string, double> range;
};

// The [training.range] of rows of family `f` (their kernels, each family_of == f): { family_range_input(f) = the
// largest family_range_value }, {} for a family without a range input or no rows. `neusight train` writes it; `train
// --dry-run` prints it (weights_range_text: tests/cli/test_serving_cli.cpp checks the shipped manifests' against it).
std::map<std::string, double> weights_range_of(family f, const std::vector<const kernel*>& kernels);
// `range` as weights_save writes it in model.toml: the [training.range] table, toml++'s formatting.
std::string weights_range_text(const std::map<std::string, double>& range);

uint64_t fnv1a64(const void* data, size_t n);

// The identity of a vendor's weights in a root (<root>/<vendor>/<family>/model.toml, the folders the neusight
// predictor reads for that vendor's GPUs): 16 hex digits, fnv1a64 over each manifest's "<family> <weights_fnv1a64>"
// line in family-name order, so two roots holding the same trained weights (a copy of the bundled ones) are one, and
// a retrained, added or dropped family makes another. "" when the folder holds no manifest. Only the manifests'
// checksum lines are read (weights_load checks the rest). A calibration records it (`weights`: engine/core/
// calibration.h calibration_weights_warning).
std::string weights_identity(const std::filesystem::path& root, const std::string& vendor);

// Writes <dir>/model.toml and <dir>/weights.bin (creates dir; files are written whole, then renamed).
void weights_save(const std::filesystem::path& dir, const tile_model& m, const weights_provenance& p);

// Reads and verifies format version, family, layer sizes, feature names, byte count and checksum.
// Throws ns::error "<dir>/model.toml: ..." or "<dir>/weights.bin: ..." on any mismatch.
tile_model weights_load(const std::filesystem::path& dir, weights_provenance* provenance = nullptr);
// The same checks on a manifest's text: `dir` is the folder it is shown in (messages name <dir>/model.toml), and
// `read(path)` returns the bytes of the weights file the manifest names (path = <dir>/<weights_file>).
using weights_reader = std::function<std::string(const std::string& path)>;
tile_model weights_parse(std::string_view manifest_text, const std::filesystem::path& dir, const weights_reader& read,
                         weights_provenance* provenance = nullptr);

}  // namespace ns
