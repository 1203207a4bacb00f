// tests/core/test_pyliteral.cpp — the strict Python-literal parser: the reference's forms, and exact errors.
#include <catch2/catch.hpp>

#include "ingest/pyliteral.h"
#include "core/text.h"

using namespace ns;
using T = py_value::type;

TEST_CASE("python literals: the forms of the reference's opgraph columns", "[pyliteral]") {
  SECTION("a kernel list with a tuple of dims") {
    const py_value v = py_parse("[['Linear', (4096, 1280, 3840)]]");
    REQUIRE(v.t == T::list);
    REQUIRE(v.items.size() == 1);
    const py_value& k = v.items[0];
    REQUIRE(k.t == T::list);
    REQUIRE(k.items.size() == 2);
    CHECK(k.items[0].t == T::string);
    CHECK(k.items[0].s == "Linear");
    REQUIRE(k.items[1].t == T::tuple);
    REQUIRE(k.items[1].items.size() == 3);
    CHECK(k.items[1].items[0].i == 4096);
    CHECK(k.items[1].items[2].i == 3840);
  }
  SECTION("one-tuples, nested tuples, lists of dims") {
    const py_value v = py_parse("[['MEM', ((1,), (4, 1024, 1280))], ['VECadd', [1, 1280]]]");
    const py_value& shapes = v.items[0].items[1];
    REQUIRE(shapes.t == T::tuple);
    REQUIRE(shapes.items.size() == 2);
    CHECK(shapes.items[0].t == T::tuple);
    CHECK(shapes.items[0].items.size() == 1);
    CHECK(shapes.items[0].items[0].i == 1);
    CHECK(v.items[1].items[1].t == T::list);
  }
  SECTION("a parenthesised value is not a tuple; () is the empty tuple") {
    CHECK(py_parse("(7)").t == T::integer);
    CHECK(py_parse("(7)").i == 7);
    CHECK(py_parse("()").t == T::tuple);
    CHECK(py_parse("()").items.empty());
    CHECK(py_parse("(7,)").t == T::tuple);
  }
  SECTION("sets, the empty set, strings in both quotes with escapes, negative integers, trailing commas") {
    const py_value s = py_parse("{'size', \"view\"}");
    REQUIRE(s.t == T::set);
    REQUIRE(s.items.size() == 2);
    CHECK(s.items[1].s == "view");
    CHECK(py_parse("set()").t == T::set);
    CHECK(py_parse(" set( ) ").items.empty());
    CHECK(py_parse(R"('it\'s \\ "x"')").s == "it's \\ \"x\"");
    CHECK(py_parse("-5").i == -5);
    CHECK(py_parse("[1, 2,]").items.size() == 2);
    CHECK(py_parse("-9223372036854775808").i == INT64_MIN);
    CHECK(py_parse("[]").items.empty());
  }
}

TEST_CASE("python literals: malformed input fails with the exact position", "[pyliteral]") {
  const std::pair<const char*, const char*> cases[] = {
      {"", "expected a value, found end of input at character 1"},
      {"[['Linear', (4096, 1280)]", "expected ',' or ']', found end of input at character 26"},
      {"[1 2]", "expected ',' or ']', found '2' at character 4"},
      {"(1, 2]", "expected ',' or ')', found ']' at character 6"},
      {"'abc", "unterminated string at character 1"},
      {"[1.5]", "floats are not supported at character 2"},
      {"[None]", "unsupported name 'None' at character 2"},
      {"{}", "dicts are not supported ('{}' is a dict; the empty set is 'set()') at character 1"},
      {"{'a': 1}", "dicts are not supported at character 1"},
      {"set([1])", "only the empty 'set()' call is supported at character 1"},
      {"[1] x", "unexpected 'x' after the value at character 5"},
      {"[1, @]", "unexpected '@' at character 5"},
      {"9223372036854775808", "integer out of range at character 1"},
      {"12ab", "malformed number at character 1"},
      {"'a\\qb'", "unsupported escape '\\q' at character 3"},
      {"-x", "expected a digit after the sign, found 'x' at character 2"},
  };
  for (const auto& [text, message] : cases) {
    INFO("input: " << text);
    CHECK_THROWS_WITH(py_parse(text), message);
  }
  CHECK_THROWS_AS(py_parse(std::string(200, '[')), error);  // nesting limit, not a stack overflow
}
