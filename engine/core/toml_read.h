// engine/core/toml_read.h — the TOML reading every strict file loader shares (GPU specs, clusters): positions and syntax errors.
#pragma once
#include <string>
#include <string_view>
#include <toml++/toml.h>

#include "core/text.h"

namespace ns {

// "file:line:col" of a position in a TOML source.
inline std::string toml_where(const std::string& source, const toml::source_position& p) {
  return source + ":" + std::to_string(p.line) + ":" + std::to_string(p.column);
}

// A value's TOML type as messages name it: string, integer, float, boolean, array, table, date/time.
inline const char* toml_type_name(const toml::node& v) {
  switch (v.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "date/time";
  }
}

// Parses TOML text; a syntax error becomes ns::error "file:line:col: <description>".
inline toml::table toml_parse_text(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw error(toml_where(source, e.source().begin) + ": " + std::string(e.description()));
  }
}

}  // namespace ns
