// tests/cli/cli_csv.h — read the CSV a neusight command wrote: one line's cells, or a whole text's header and rows.
// Quoting as RFC 4180 (and report.lua's CSV writer): a quoted cell may hold commas, line breaks and "" for a quote.
#pragma once
#include <iterator>
#include <string>
#include <vector>

namespace ns_test {

// The records of `text`, each a list of cells; a final line break ends the last record and adds none.
inline std::vector<std::vector<std::string>> csv_records(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> record(1);
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') record.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else record.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      record.emplace_back();
    } else if (c == '\n') {
      out.push_back(std::move(record));
      record.assign(1, "");
    } else {
      record.back() += c;
    }
  }
  if (record.size() > 1 || !record.back().empty()) out.push_back(std::move(record));
  return out;
}

// The cells of one CSV line.
inline std::vector<std::string> csv_split(const std::string& line) {
  const auto records = csv_records(line);
  return records.empty() ? std::vector<std::string>(1) : records.front();
}

struct csv_text {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// A CSV text as its header (the first record) and its rows (the others); both empty for an empty text.
inline csv_text csv_table(const std::string& text) {
  csv_text t;
  auto records = csv_records(text);
  if (records.empty()) return t;
  t.header = std::move(records.front());
  t.rows.assign(std::make_move_iterator(records.begin() + 1), std::make_move_iterator(records.end()));
  return t;
}

}  // namespace ns_test
