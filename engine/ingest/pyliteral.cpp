// engine/ingest/pyliteral.cpp — recursive descent over Python literals; positions in errors are 1-based characters.
#include "ingest/pyliteral.h"

#include <cctype>
#include <limits>

#include "core/text.h"

namespace ns {

std::string_view py_type_name(py_value::type t) {
  switch (t) {
    case py_value::type::integer: return "integer";
    case py_value::type::string: return "string";
    case py_value::type::list: return "list";
    case py_value::type::tuple: return "tuple";
    case py_value::type::set: return "set";
  }
  return "?";
}

namespace {

constexpr int max_depth = 64;  // the graphs nest 4 deep; this only stops runaway recursion on garbage

class parser {
 public:
  explicit parser(std::string_view s) : s_(s) {}

  py_value parse() {
    py_value v = value(0);
    skip_ws();
    if (pos_ < s_.size()) fail("unexpected " + describe(pos_) + " after the value", pos_);
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw error(what + " at character " + std::to_string(at + 1));
  }

  std::string describe(size_t at) const {
    if (at >= s_.size()) return "end of input";
    return "'" + std::string(1, s_[at]) + "'";
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  py_value value(int depth) {
    skip_ws();
    if (pos_ >= s_.size()) fail("expected a value, found end of input", pos_);
    if (depth > max_depth) fail("nesting deeper than " + std::to_string(max_depth) + " levels", pos_);
    const char c = s_[pos_];
    if (c == '[') return sequence(py_value::type::list, ']', depth);
    if (c == '(') return sequence(py_value::type::tuple, ')', depth);
    if (c == '{') return sequence(py_value::type::set, '}', depth);
    if (c == '\'' || c == '"') return string();
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+') return integer();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return name();
    fail("unexpected " + describe(pos_), pos_);
  }

  // [a, b], (a, b), {a, b}; `(a)` is a itself, `{}` a dict (rejected).
  py_value sequence(py_value::type t, char close, int depth) {
    const size_t open = pos_++;
    py_value v;
    v.t = t;
    bool comma = false;
    for (;;) {
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == close) break;
      v.items.push_back(value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_, comma = true;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == close) break;
      if (t == py_value::type::set && pos_ < s_.size() && s_[pos_] == ':') fail("dicts are not supported", open);
      fail(std::string("expected ',' or '") + close + "', found " + describe(pos_), pos_);
    }
    ++pos_;
    if (t == py_value::type::set && v.items.empty()) fail("dicts are not supported ('{}' is a dict; the empty set is 'set()')", open);
    if (t == py_value::type::tuple && v.items.size() == 1 && !comma) {
      py_value inner = std::move(v.items.front());  // parenthesised expression, not a tuple
      return inner;
    }
    return v;
  }

  py_value string() {
    const size_t start = pos_;
    const char quote = s_[pos_++];
    py_value v;
    v.t = py_value::type::string;
    for (;;) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') fail("unterminated string", start);
      const char c = s_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        v.s += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string", start);
      const char e = s_[pos_++];
      switch (e) {
        case '\\': case '\'': case '"': v.s += e; break;
        case 'n': v.s += '\n'; break;
        case 't': v.s += '\t'; break;
        case 'r': v.s += '\r'; break;
        default: fail(std::string("unsupported escape '\\") + e + "'", pos_ - 2);
      }
    }
    return v;
  }

  py_value integer() {
    const size_t start = pos_;
    bool negative = false;
    if (s_[pos_] == '-' || s_[pos_] == '+') negative = s_[pos_++] == '-';
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_])))
      fail("expected a digit after the sign, found " + describe(pos_), pos_);
    uint64_t magnitude = 0;
    const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const uint64_t d = uint64_t(s_[pos_++] - '0');
      if (magnitude > (limit - d) / 10) fail("integer out of range", start);
      magnitude = magnitude * 10 + d;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      fail("floats are not supported", start);
    if (pos_ < s_.size() && (std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      fail("malformed number", start);
    py_value v;
    v.t = py_value::type::integer;
    v.i = negative ? int64_t(0 - magnitude) : int64_t(magnitude);
    return v;
  }

  // Only `set()` is a literal the graphs need; None/True/False and other names are rejected.
  py_value name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    const std::string word(s_.substr(start, pos_ - start));
    if (word == "set") {
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == '(') {
        ++pos_;
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ')') {
          ++pos_;
          py_value v;
          v.t = py_value::type::set;
          return v;
        }
      }
      fail("only the empty 'set()' call is supported", start);
    }
    fail("unsupported name '" + word + "'", start);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

py_value py_parse(std::string_view text) { return parser(text).parse(); }

}  // namespace ns
