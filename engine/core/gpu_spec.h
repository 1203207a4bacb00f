// engine/core/gpu_spec.h — a GPU described by one gpus/*.toml file, and the catalogue that resolves names.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ns {

struct gpu_spec {
  std::string name;
  std::vector<std::string> aliases;
  std::string vendor;        // "nvidia" | "amd"
  std::string architecture;  // "hopper", "cdna2", ...
  std::string compute_capability;
  int64_t num_sm = 0;
  int64_t cores_per_sm = 0;
  int64_t base_clock_mhz = 0;
  int64_t boost_clock_mhz = 0;
  double mem_gb = 0;
  // Optional: the total memory the device reports, GiB (2^30 bytes): torch.cuda.mem_get_info()[1] /
  // get_device_properties().total_memory, what a CUDA out-of-memory message prints as "total capacity" (H100 80GB:
  // 79.1 GiB = 84.9e9 bytes); 0 when the file does not say. A serving engine's gpu_memory_utilization is a share of it
  // (scripts/neusight/memory.lua budget_gb). At most mem_gb, at least 0.8 × mem_gb (gpu_spec_parse).
  double mem_reported_gib = 0;
  double mem_bw_gbps = 0;  // GB/s, 1e9 bytes per second
  double l2_mb = 0;
  double peak_fp32_tflops = 0;
  double peak_fp32_matrix_tflops = 0;
  double peak_tf32_tflops = 0;
  double peak_fp16_tflops = 0;
  double peak_bf16_tflops = 0;
  double peak_fp8_tflops = 0;
  int64_t max_threads_per_sm = 0;
  int64_t max_threads_per_block = 0;
  int64_t max_blocks_per_sm = 0;
  int64_t max_warps_per_sm = 0;
  int64_t warp_size = 0;
  int64_t max_regs_per_sm = 0;
  int64_t max_regs_per_block = 0;
  int64_t max_regs_per_thread = 0;
  double max_smem_per_sm_kb = 0;
  double max_smem_per_block_kb = 0;
  std::string interconnect;
  double interconnect_bw_gbps = 0;
  int64_t pcie_gen = 0;
  double pcie_bw_gbps = 0;
  // Optional: how many GPUs one NVLink / Infinity Fabric bridge joins, where that is fewer than a server holds (A100
  // and H100 PCIe: a 2-GPU bridge; MI210: 2 or 4); 0 when the file does not say (the link reaches every GPU of the
  // node). scripts/neusight/topology.lua prices a group beyond it over pcie_bw_gbps unless a cluster names the links.
  int64_t nvlink_domain_gpus = 0;
  // Optional: what one GPU-hour costs, US dollars (a public on-demand price, with its dated source in the file);
  // 0 when the file does not say. Present means a positive finite number. Drives the cost figures
  // (scripts/neusight/figures.lua).
  double price_per_hour_usd = 0;
  // Optional: the file describes a hypothetical part (a what-if: "the H100 with twice the bf16 peak"), in words; its
  // numbers are then not held to what a real chip of its SMs and clock reaches (scripts/neusight/gpu_check.lua).
  // Empty when the file does not say.
  std::string what_if;
  // Optional: what the file is of, in words, where its name alone misleads ("one GCD of the two-GCD MI250 package"):
  // `neusight gpus` lists it below the table and a run on it says it once. Empty when the file does not say.
  std::string note;

  std::string source;  // where it was loaded from, as shown in messages
  std::string file;    // the file's path (gpu_spec_load; empty when parsed from text): calibrations live beside it
  // The line of its vendor key (gpu_spec_parse): what the tile rules' check of the architecture (gpu_check) names.
  int64_t vendor_line = 0;
  // Where the file states each key ("<source>:<line>:<col>"; empty when not parsed from TOML): gpu_key_at.
  std::map<std::string, std::string> key_at;
};

// Where `gpu`'s file states `key` ("<source>:<line>:<col>"), else its source: what a message about that key names
// (the architecture check, the occupancy table's compute capability, scripts/neusight/gpu_check.lua's findings).
std::string gpu_key_at(const gpu_spec& gpu, const std::string& key);

// One row per TOML key: drives parsing, the Lua view, JSON and the `gpus` table, so they cannot drift.
using gpu_member = std::variant<std::string gpu_spec::*, std::vector<std::string> gpu_spec::*, int64_t gpu_spec::*,
                                double gpu_spec::*>;
struct gpu_field {
  const char* key;
  gpu_member member;
  bool positive;  // numbers that must be > 0 (others must be >= 0)
  // May be left out of the file (then the member keeps 0 and the Lua view, JSON and `gpus` omit it); when present
  // it must be a positive finite number.
  bool optional = false;
  // The physical range of a number (a non-zero value must lie in [lo, hi]; zero is allowed where `positive` is
  // false): generous bounds around every GPU made so far, so that a unit slip (1e-300, 2^63 SMs, inf bandwidth) is
  // an error, not a forecast. 0, 0: no range (strings and arrays).
  double lo = 0, hi = 0;
};
const std::vector<gpu_field>& gpu_fields();

// A check a GPU file must pass beyond its keys' own: the tile rules' architectures (scripts/tiling/gemm.lua M.vendors,
// asked through session::gpu_check), which the core does not know. gpu_catalog runs it on every file it loads; it
// throws ns::error naming the file and line.
using gpu_check = std::function<void(const gpu_spec&)>;
// The GPU-to-GPU links a file may name (key `interconnect`), each with its vendor ("" for "none": any; "none" is
// first). "none" takes interconnect_bw_gbps = 0 and the others a positive bandwidth (gpu_spec_parse).
const std::vector<std::pair<std::string, std::string>>& gpu_interconnects();

// Whether an optional field holds a value (a required field always does).
bool gpu_field_present(const gpu_spec& gpu, const gpu_field& f);

// A string equal for two specs exactly when every field (and the source) is: numbers bit for bit. Keys the
// per-process memos of what is computed from a GPU (expansions, tiles, predictions).
std::string gpu_spec_key(const gpu_spec& gpu);

// Throws ns::error "<source>:<line>:<col>: <what>" on any syntax error, missing (required), unknown or mistyped key,
// and on a number out of range (negative, zero where it must be positive, infinite or NaN, outside the field's
// physical range gpu_field::lo..hi), and on link keys that disagree (an unknown interconnect, a bandwidth with "none"
// or none with a link, an NVIDIA link with vendor "amd" and the reverse). The architecture is the tile rules' to
// check (gpu_check).
gpu_spec gpu_spec_parse(std::string_view toml_text, const std::string& source);
gpu_spec gpu_spec_load(const std::filesystem::path& file, const std::string& display_name);

// "<stem>.calibration.toml": a GPU's calibration (engine/core/calibration.h) kept beside its file, not a GPU file.
inline bool calibration_file_is(const std::filesystem::path& p) {
  const std::string n = p.filename().string(), tail = ".calibration.toml";
  return n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
}

// Whether `name` names `gpu`: its name, an alias or its file's stem, as people type them (case, spaces, '-' and '_'
// ignored: "H100 SXM", "h100sxm" and "H100-SXM" are one name).
bool gpu_spec_named(const gpu_spec& gpu, const std::string& name);

// Whether a --gpu / workload `gpu` value is a file path (ends in .toml or contains '/') rather than a name or alias.
bool gpu_query_is_path(const std::string& query);

// A folder of user GPU files searched before the bundled gpus/ (--gpus-dir DIR, NEUSIGHT_GPUS_PATH) and how its files
// are labelled in messages ("DIR/<file>.toml").
struct gpu_dir {
  std::filesystem::path path;
  std::string display;
};

// The GPU files of the user's folders (in order), then the bundled gpus/*.toml. A user file hides a bundled one of its
// stem or its GPU name (shadows() lists them; -v prints them). resolve() accepts a file path, a file stem, the GPU's
// name or any alias (case, spaces, '-' and '_' aside), the user's files first; unknown names fail with the closest
// matches. A name that is an alias of one GPU and also names others in part ("A100": A100-SXM4-80GB, and the A100
// PCIe and 40GB files; "H100": the SXM5 and the PCIe) resolves to the GPU whose file lists it as an alias (the
// documented default) and says so in `note` (resolve_note): never silently. A name or alias that two GPUs answer to is
// an error naming both files: two files of one folder (load_all, `neusight gpus`), or a user's file and a bundled one
// (resolve, when asked for it). Every file is read to resolve a name or alias; a stem is the one file of it.
class gpu_catalog {
 public:
  // `check`: run on every file loaded (gpu_check; none: the keys' own checks only).
  explicit gpu_catalog(std::filesystem::path dir, gpu_check check = {}, std::vector<gpu_dir> user_dirs = {});
  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<gpu_dir>& user_dirs() const { return user_dirs_; }
  std::vector<gpu_spec> load_all() const;
  gpu_spec resolve(const std::string& query) const;
  // As resolve; `note` gets the line to show when a short name stands for one of several GPUs (empty otherwise):
  // "GPU 'a100' taken as A100-SXM4-80GB (gpus/a100_sxm4_80gb.toml); name a100_pcie_40gb, … for another".
  gpu_spec resolve(const std::string& query, std::string& note) const;
  // "DIR/x.toml shadows gpus/x.toml" for each bundled file a user file hides (by stem or GPU name).
  std::vector<std::string> shadows() const;

 private:
  std::filesystem::path dir_;
  gpu_check check_;
  std::vector<gpu_dir> user_dirs_;
  struct file_entry {
    std::filesystem::path path;
    std::string display;
    bool bundled;
  };
  std::vector<file_entry> files() const;  // user folders' files first, then the bundled ones, each folder's sorted
  // every GPU the catalogue holds (a hidden bundled file left out) and the lines of shadows(), read on first use and
  // kept for the catalogue and its copies (a session hands out copies of one: each name it resolves reads no file
  // again); throws for a file that does not load and for two files of one folder that answer to one name or alias
  // (naming both)
  struct visible_files {
    std::vector<gpu_spec> gpus;
    std::vector<std::string> hidden;
  };
  std::shared_ptr<std::optional<visible_files>> visible_ = std::make_shared<std::optional<visible_files>>();
  const visible_files& visible() const;
  gpu_spec load(const std::filesystem::path& file, const std::string& display_name) const;
};

// The GPUs of measured data (eval kernels, eval models, train), whose rows name their GPU by a device string (a CSV's
// Device column, a label folder's name): the bundled GPUs, and the GPU files the user gives (--gpu FILE, repeatable),
// each loaded as predict loads its --gpu file (gpu_catalog::resolve). A device a given file names (gpu_spec_named:
// its name, an alias or the file's stem) is that file's GPU, and so is every device of the bundled GPU whose name the
// file has (a copy with other numbers replaces it); any other device is the bundled GPU it names, if any.
class gpu_data_resolver {
 public:
  // Throws for a value that is not a file path (gpu_query_is_path), a file that does not load (file:line) and two files
  // of one GPU name.
  gpu_data_resolver(const gpu_catalog& catalog, const std::vector<std::string>& files);
  // nullopt for a device no GPU file names; throws when two given files name it.
  std::optional<gpu_spec> device(const std::string& device);
  // A GPU named on the command line (--exclude-gpu): a given file it names, else the bundled one (throws when unknown).
  gpu_spec named(const std::string& query) const;
  // Throws for the first given file that no device has resolved to: "--gpu FILE: no device of <what> is GPU '…'",
  // naming the `unknown` devices (those no file names) the file might have been meant for.
  void unused_check(const std::string& what, const std::vector<std::string>& unknown) const;
  // What to do about `devices` that no GPU file names: write one and pass it with --gpu FILE ("" for none).
  static std::string unknown_advice(const std::vector<std::string>& devices);
  const gpu_catalog& catalog() const { return catalog_; }

 private:
  const gpu_catalog& catalog_;
  std::vector<gpu_spec> given_;
  std::vector<bool> used_;
};

}  // namespace ns
