// What every fuzz target shares: a failed property aborts with a message, so libFuzzer records
// the input as a crash just as it does a sanitizer's report.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
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

// One private scratch directory for the whole run (mkdtemp: 0700), `name` in its name, removed
// at exit. On tmpfs unless TMPDIR says otherwise: the stores fsync what they write, which on a
// disk would make each input wait for it. Call it from one target only once per process
// (`name` is fixed by the first call). Never freed: the exit handler needs it after static
// objects are destroyed.
inline const std::string& scratch_directory(std::string_view name) {
  static const std::string* const dir = [name] {
    const char* tmp = ::getenv("TMPDIR");
    std::string parent = tmp != nullptr && *tmp != '\0'    ? tmp
                         : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                           : "/tmp";
    auto* pattern = new std::string(parent + "/rosetctl-fuzz-" + std::string(name) + "-XXXXXX");
    if (::mkdtemp(pattern->data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*dir, ignored);
    });
    return pattern;
  }();
  return *dir;
}

}  // namespace rosetctl::fuzz
