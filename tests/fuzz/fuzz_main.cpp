// tests/fuzz/fuzz_main.cpp — the libFuzzer driver of one entry of fuzz_entries.h (NEUSIGHT_FUZZ_TARGET names it).
// ns::error naming the input is the loaders' documented failure; anything else aborts, and libFuzzer keeps the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/text.h"
#include "fuzz_entries.h"

namespace {
ns_fuzz::entry_fn entry() {
  static const ns_fuzz::entry_fn fn = [] {
    for (const auto& t : ns_fuzz::targets())
      if (std::strcmp(t.name, NEUSIGHT_FUZZ_TARGET) == 0) return t.run;
    std::abort();
  }();
  return fn;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string source = "fuzz/input";
  try {
    entry()(std::string_view(reinterpret_cast<const char*>(data), size), source);
  } catch (const ns::error& e) {
    if (std::strstr(e.what(), source.c_str()) == nullptr) {
      std::fprintf(stderr, "error without the file name: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
