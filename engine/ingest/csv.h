// engine/ingest/csv.h — RFC 4180 CSV reading (quoted fields, embedded commas/quotes/newlines) with line numbers.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ns {

struct csv_table {
  std::string source;                      // shown in messages
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> lines;               // 1-based line where each row starts

  // Column index by name; throws "<source>: missing column 'x'".
  size_t column(std::string_view name) const;
  bool has_column(std::string_view name) const;
  // "<source>:<line>" of row i
  std::string where(size_t row) const;
};

// Throws ns::error "<source>:<line>: ..." on an unterminated quote or a row with the wrong field count.
csv_table csv_parse(std::string_view text, const std::string& source);
csv_table csv_load(const std::string& path);

}  // namespace ns
