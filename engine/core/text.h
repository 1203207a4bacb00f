// engine/core/text.h — small string helpers shared by the engine: errors, case folding, "did you mean".
#pragma once
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

// Candidates within a small edit distance of `word` (case-insensitive), closest first.
std::vector<std::string> text_close_matches(std::string_view word, const std::vector<std::string>& candidates,
                                            size_t max_results = 3);

// " (did you mean 'x'?)" or "" when nothing is close.
std::string text_did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ns
