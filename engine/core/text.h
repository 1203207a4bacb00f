// engine/core/text.h — small string helpers shared by the engine: errors, case folding, "did you mean".
#pragma once
#include <cstddef>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ns {

// Every user-facing failure is an ns::error; the CLI prints "neusight: <what>" and exits non-zero.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A script error: `what()` keeps file:line; the traceback is kept apart (printed on --traceback).
struct script_error : error {
  script_error(const std::string& msg, std::string tb) : error(msg), traceback(std::move(tb)) {}
  std::string traceback;
};

std::string text_lower(std::string_view s);
size_t text_edit_distance(std::string_view a, std::string_view b);

// Candidates close to `word` (case-insensitive): within edit distance max(2, |word| / 3), or containing the word, or
// a prefix of it (3+ characters); closest first (candidates that begin with the word before all others), ties by edit
// distance; never the word itself (a suggestion of what was typed contradicts the error). The one did-you-mean rule:
// Lua scripts reach
// it as require("neusight").closest / did_you_mean.
std::vector<std::string> text_close_matches(std::string_view word, const std::vector<std::string>& candidates,
                                            size_t max_results = 3);

// "a, b or c" of `names` (each between `quote`s): how messages list the values a field takes.
std::string text_or_list(const std::vector<std::string>& names, std::string_view quote = "");

// " (did you mean 'x'?)" or "" when nothing is close.
std::string text_did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// "1 op", "3 ops": a count with its noun, singular for one (`many` defaults to `one` + "s"). The one way messages
// write a count that can be 1.
std::string text_count(size_t n, std::string_view one, std::string_view many = {});

// A limit as the messages print it: %g, its exponent without '+' or leading zeros, as the code writes the limits
// ("1e6", "1e-9", "2.5e-7", "25"; %g alone gives "1e+06"). The one form of the time limits (core/time_limits.cpp)
// and the cluster limits (core/cluster_spec.cpp; scripts/neusight/topology.lua as require("neusight").limit_text).
std::string text_limit(double x);

// Caps a message that a script built (an error object, a name) at `max` bytes for printing: the head, then
// "… [N more bytes]".
std::string text_cap(const std::string& s, size_t max = 4096);

// Input files are read whole: scripts and configs (Lua, TOML, JSON) up to 1 MB, data (CSV, traces, weights) up to
// 256 MB.
inline constexpr size_t text_file_max_script = size_t(1) << 20;
inline constexpr size_t text_file_max_data = size_t(256) << 20;

// "<display>: no such file": the one wording of an input file that is not there (every reader's, an error: exit 1).
std::string text_no_such_file(const std::string& display);

// Reads a regular file of at most `max_bytes`. A FIFO, a device or a directory is refused without being read
// (opened non-blocking, checked with fstat). Throws ns::error "<display>: no such file" (text_no_such_file),
// "<display>: <what>" when it cannot be read otherwise (`what` defaults to "cannot read file"), "<display>: not a
// regular file (…)" or "<display>: larger than N MB".
std::string text_file_read(const std::string& path, const std::string& display, size_t max_bytes,
                           const std::string& what = "cannot read file");

// Each input file read once: add() every file of a list of inputs (files, and the files found in folders) with the
// input that reached it; a file reached a second time (the same file by another path, `f.csv ./f.csv`, or a file also
// inside a folder given) throws ns::error "<file>: given twice (as 'A' and as 'B'): give each input once (its rows
// would count twice)". Files are compared by their canonical path (links and `..` resolved).
class text_inputs_once {
 public:
  void add(const std::filesystem::path& file, const std::string& given);

 private:
  std::map<std::filesystem::path, std::string> seen_;  // canonical path -> the input that reached it
};

}  // namespace ns
