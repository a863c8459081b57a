// Tests that need root (mount(2), loop devices) skip with a warning elsewhere, unless
// ROSETCTL_REQUIRE_ROOT_TESTS=1 (as CI sets it) makes skipping a failure.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <string_view>

namespace rosetctl::testing {

// `why`: what root is needed for, shown when the test skips.
inline bool have_root(std::string_view why) {
  if (::geteuid() == 0) return true;
  const char* required = std::getenv("ROSETCTL_REQUIRE_ROOT_TESTS");
  if (required != nullptr && std::string_view(required) == "1") {
    FAIL("ROSETCTL_REQUIRE_ROOT_TESTS=1 but not running as root");
  }
  WARN("skipped: needs root " + std::string(why));
  return false;
}

}  // namespace rosetctl::testing
