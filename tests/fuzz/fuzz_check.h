// What every fuzz target shares: a failed property aborts with a message, so libFuzzer records
// the input as a crash just as it does a sanitizer's report.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(condition, what)                                              \
  do {                                                                           \
    if (!(condition)) {                                                          \
      std::fprintf(stderr, "fuzz property failed: %s (%s)\n", what, #condition); \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

namespace rosetctl::fuzz {

inline std::string_view as_text(const unsigned char* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace rosetctl::fuzz
