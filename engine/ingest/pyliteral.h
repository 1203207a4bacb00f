// engine/ingest/pyliteral.h — a small strict parser for the Python literals of the reference's CSV files.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ns {

// The subset the reference's parsed operator graphs use (results/opgraph/*.csv, spec §4.3): integers,
// quoted strings, lists, tuples and sets, nested. Python's rules apply: `(x)` is x itself, `(x,)` a
// one-tuple, trailing commas are allowed, `set()` is the empty set and `{}` would be a dict. Everything
// else (floats, None, True/False, dicts, bytes, names) is an error, never a guess.
struct py_value {
  enum class type { integer, string, list, tuple, set };
  type t = type::integer;
  int64_t i = 0;
  std::string s;
  std::vector<py_value> items;  // list, tuple or set, in source order

  bool is_sequence() const { return t == type::list || t == type::tuple || t == type::set; }
};

std::string_view py_type_name(py_value::type t);

// Throws ns::error "<what> at character N" (N 1-based within `text`) on anything outside the subset.
py_value py_parse(std::string_view text);

}  // namespace ns
