// engine/cli/report.h — what the commands print besides a single forecast and a comparison (scripts/neusight/report.lua
// and compare.lua render those): the GPU list; and emit(), which writes any report.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/gpu_spec.h"

namespace ns {

struct calibration;  // core/calibration.h

// A CSV field: quoted (quotes doubled) when it holds a comma, a quote, a line feed or a carriage return (the C++
// commands' twin of scripts/neusight/report.lua csv_field, which the scripts' CSV writers share).
std::string csv_field(const std::string& s);

// The median of `v`: its middle value, or the mean of the two middle values of an even count (0 when empty). The
// "median" of every error summary (eval kernels, eval models).
double median_of(std::vector<double> v);

// Writes the whole text at once: to stdout, or to a file through a temporary + rename (never half-written).
void emit(const std::string& text, const std::string& output);

// How emit writes `output`: to standard output ("" or "-", and a path of descriptor 1: /dev/stdout, /dev/fd/1); in
// place, another descriptor's path (/dev/stderr, /dev/fd/3: written to the descriptor as it stands) or a file that
// exists and is neither a regular file nor a folder (a device, FIFO or socket: /dev/null), never replaced; a folder is
// emit's error; any other is a regular file, new or replaced (through its symbolic links). The one rule emit, emit_check and --report's check follow.
enum class emit_kind { standard_output, in_place, folder, file };
emit_kind emit_kind_of(const std::string& output);

// Throws emit's error now when `output` (a file; "" or "-": stdout) could not be written: a missing or unwritable
// folder (with the OS's reason), a directory. For a run to find before it prints or writes anything else.
void emit_check(const std::string& output);

// A --gpu list (predict's and run's comparisons, serve --sweep) names each GPU once: throws ns::error "--gpu: A and B
// name the same GPU (NAME): give each GPU once" when two items resolve to the same GPU file (h100,H100 and
// h100,h100_sxm5_80gb: two equal rows), or to files whose specs are alike field for field (a copy of the file in another
// folder; compared as `resolve` parsed them, not read again). Two files that share a `name` (a copy of a GPU file with
// another bandwidth, a what-if) are two GPUs. `resolve` gives an item's GPU (it may throw: a typo stops the run there), or nullptr when the
// caller reports an unknown one itself. `calibration_of` gives the calibration the GPU's forecasts apply (session::
// calibration_of: nullptr under --no-calibration), which a copy is alike by too.
void gpu_list_once(const std::vector<std::string>& given,
                   const std::function<const gpu_spec*(const std::string&)>& resolve,
                   const std::function<const calibration*(const gpu_spec&)>& calibration_of);

std::string gpus_table(const std::vector<gpu_spec>& gpus);
std::string gpus_json(const std::vector<gpu_spec>& gpus);

// Writes `gpu`'s calibration file (core/calibration.h calibration_text) at `path`, with a header naming `by` (the
// command that fitted it) and `facts` (what was measured), after checking that `output` (the report that follows)
// can be written: nothing is written when it could not be; returns the path as messages show it. predict's and serve's
// --calibrate (decode_factors: the file's [decode_factors], empty when no decode step was measured; nullopt for a
// profiler trace's, whose factors apply to every forecast).
std::string calibration_write(const gpu_spec& gpu, const std::filesystem::path& path,
                              const std::map<std::string, double>& factors,
                              const std::optional<std::map<std::string, double>>& decode_factors, const std::string& by,
                              const std::string& output,
                              const std::vector<std::pair<std::string, std::variant<std::string, double>>>& facts);

}  // namespace ns
