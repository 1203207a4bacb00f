// engine/ingest/csv.cpp — a small, strict CSV parser: every row must have the header's field count.
#include "ingest/csv.h"

#include <fstream>
#include <sstream>

#include "core/text.h"

namespace ns {

size_t csv_table::column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  throw error(source + ": missing column '" + std::string(name) + "'" + text_did_you_mean(name, header));
}

bool csv_table::has_column(std::string_view name) const {
  for (const auto& h : header)
    if (h == name) return true;
  return false;
}

std::string csv_table::where(size_t row) const { return source + ":" + std::to_string(lines[row]); }

csv_table csv_parse(std::string_view text, const std::string& source) {
  csv_table t;
  t.source = source;
  std::vector<std::string> fields;
  std::string field;
  size_t line = 1, row_line = 1;
  bool in_quotes = false, field_started = false;
  auto end_row = [&] {
    fields.push_back(std::move(field));
    field.clear();
    if (t.header.empty()) {
      t.header = std::move(fields);
    } else if (!(fields.size() == 1 && fields[0].empty())) {  // blank lines are skipped
      if (fields.size() != t.header.size())
        throw error(source + ":" + std::to_string(row_line) + ": expected " + std::to_string(t.header.size()) +
                    " fields, found " + std::to_string(fields.size()));
      t.rows.push_back(std::move(fields));
      t.lines.push_back(row_line);
    }
    fields.clear();
    field_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
        else in_quotes = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    switch (c) {
      case '"':
        if (field_started && !field.empty())
          throw error(source + ":" + std::to_string(line) + ": quote inside an unquoted field");
        in_quotes = field_started = true;
        break;
      case ',':
        fields.push_back(std::move(field));
        field.clear();
        field_started = false;
        break;
      case '\r': break;
      case '\n':
        end_row();
        row_line = ++line;
        break;
      default: field += c, field_started = true;
    }
  }
  if (in_quotes) throw error(source + ":" + std::to_string(row_line) + ": unterminated quoted field");
  if (!field.empty() || !fields.empty()) end_row();
  if (t.header.empty()) throw error(source + ": empty CSV file (no header)");
  return t;
}

csv_table csv_load(const std::string& path) {
  return csv_parse(text_file_read(path, path, text_file_max_data), path);
}

}  // namespace ns
