// Wall-clock time as unix nanoseconds: what records and commits store as their times.
#pragma once

#include <chrono>
#include <cstdint>

namespace rosetctl {

inline int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace rosetctl
