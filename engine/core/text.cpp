// engine/core/text.cpp — string helpers: lower-casing, Levenshtein distance, close-match suggestions.
#include "core/text.h"
#include "core/json_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <numeric>

namespace ns {

std::string text_count(size_t n, std::string_view one, std::string_view many) {
  std::string out = std::to_string(n) + ' ';
  if (n == 1) return out.append(one);
  return many.empty() ? out.append(one) + 's' : out.append(many);
}

std::string text_limit(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  const std::string s = buf;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;  // no exponent: 25, inf, nan
  const size_t digits = s.find_first_not_of("+-0", e + 1);  // %g writes at least two exponent digits, not all zero
  return s.substr(0, e + 1) + (s[e + 1] == '-' ? "-" : "") + s.substr(digits);
}

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
  struct score {
    size_t close, edits;  // close: the edit distance, or 1 for a containment hit; edits break its ties
    std::string c;
  };
  std::vector<score> scored;
  for (const auto& c : candidates) {
    if (c == word) continue;  // never the word itself: a list that holds it is not what the word was looked up in
    const std::string lc = text_lower(c);
    const size_t edits = text_edit_distance(w, lc);
    size_t d = edits;
    // Close too: the word inside a candidate ("h100" in "nvidia h100 80gb hbm3"), or a candidate the word begins with
    // ("batchsize" → "batch"), unless the shorter side is too short to mean anything ("n" is in "second"). A candidate
    // inside the word elsewhere is not ("intermediate_size" for "shared_expert_intermediate_size" is another key).
    if ((w.size() >= 3 && lc.find(w) != std::string::npos) || (lc.size() >= 3 && w.rfind(lc, 0) == 0))
      d = std::min<size_t>(d, 1);
    // Closest of all: a candidate that begins with the word, what people type of a longer name ("a100" → "A100-40GB",
    // "A100-SXM-80GB" before "A10G" or "V100", one edit away but another thing).
    if (w.size() >= 3 && lc.rfind(w, 0) == 0) d = 0;
    const size_t limit = std::max<size_t>(2, w.size() / 3);
    if (d <= limit) scored.push_back({d, edits, c});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const score& x, const score& y) {
    return x.close != y.close ? x.close < y.close : x.edits < y.edits;
  });
  std::vector<std::string> out;
  for (const auto& [d, e, c] : scored) {
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

namespace ns {

size_t text_json_key_line(std::string_view text, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  const size_t at = text.find(quoted);
  if (at == std::string_view::npos || text.find(quoted, at + 1) != std::string_view::npos) return 0;
  return 1 + size_t(std::count(text.begin(), text.begin() + std::ptrdiff_t(at), '\n'));
}

size_t text_json_nth_key_line(std::string_view text, size_t n) {
  size_t line = 1, keys = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') ++line;
    if (text[i] != '"') continue;
    const size_t at = line;  // a string: to its closing quote (no newline inside valid JSON's), then a ':' makes it a key
    for (++i; i < text.size() && text[i] != '"'; ++i) i += text[i] == '\\';
    size_t j = i + 1;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r' || text[j] == '\n')) ++j;
    if (j < text.size() && text[j] == ':' && keys++ == n) return at;
  }
  return 0;
}

std::string text_cap(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return s.substr(0, cut) + "… [" + std::to_string(s.size() - cut) + " more bytes]";
}

std::string text_no_such_file(const std::string& display) { return display + ": no such file"; }

std::string text_file_read(const std::string& path, const std::string& display, size_t max_bytes,
                           const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a FIFO opens without waiting
  if (fd < 0) throw error(errno == ENOENT ? text_no_such_file(display) : display + ": " + what);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw error(display + ": " + what);
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" :
                       S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ? "a block device" :
                       S_ISSOCK(st.st_mode) ? "a socket" : "a special file";
    throw error(display + ": not a regular file (" + kind + ")");
  }
  const std::string limit = max_bytes >= (size_t(1) << 20) ? std::to_string(max_bytes >> 20) + " MB"
                                                            : std::to_string(max_bytes) + " bytes";
  if (size_t(st.st_size) > max_bytes) throw error(display + ": larger than " + limit + ", the limit for this kind of file");
  std::string out;
  out.reserve(size_t(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw error(display + ": " + what);
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
    if (out.size() > max_bytes) throw error(display + ": larger than " + limit + ", the limit for this kind of file");
  }
  return out;
}

void text_inputs_once::add(const std::filesystem::path& file, const std::string& given) {
  std::error_code ec;
  std::filesystem::path key = std::filesystem::weakly_canonical(file, ec);
  if (ec) key = std::filesystem::absolute(file).lexically_normal();
  const auto [it, fresh] = seen_.emplace(key, given);
  if (fresh) return;
  const std::string how = it->second == given ? "" : " (as '" + it->second + "' and as '" + given + "')";
  throw error(file.string() + ": given twice" + how + ": give each input once (its rows would count twice)");
}

std::string text_or_list(const std::vector<std::string>& names, std::string_view quote) {
  std::string out;
  for (size_t k = 0; k < names.size(); ++k)
    out += std::string(k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + std::string(quote) + names[k] +
           std::string(quote);
  return out;
}

}  // namespace ns
