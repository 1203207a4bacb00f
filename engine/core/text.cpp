// engine/core/text.cpp — string helpers: lower-casing, Levenshtein distance, close-match suggestions.
#include "core/text.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace ns {

std::string text_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

size_t text_edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> text_close_matches(std::string_view word, const std::vector<std::string>& candidates,
                                            size_t max_results) {
  const std::string w = text_lower(word);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& c : candidates) {
    const std::string lc = text_lower(c);
    size_t d = text_edit_distance(w, lc);
    // A substring hit ("h100" in "nvidia h100 80gb hbm3") counts as close too, unless the shorter side is
    // too short to mean anything ("n" is in "second").
    const size_t shorter = std::min(w.size(), lc.size());
    if (shorter >= 3 && (lc.find(w) != std::string::npos || w.find(lc) != std::string::npos)) d = std::min<size_t>(d, 1);
    const size_t limit = std::max<size_t>(2, w.size() / 3);
    if (d <= limit) scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (const auto& [d, c] : scored) {
    if (out.size() == max_results) break;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

std::string text_did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const auto m = text_close_matches(word, candidates, 1);
  return m.empty() ? std::string{} : " (did you mean '" + m.front() + "'?)";
}

}  // namespace ns
