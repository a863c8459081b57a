// Wall-clock time as unix nanoseconds (what records and commits store as their times) or seconds,
// and as the text every output shows (RFC 3339 in UTC).
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace rosetctl {

inline int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline int64_t unix_now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "2026-11-28T22:02:00Z".
inline std::string utc_time_text(int64_t unix_seconds) {
  time_t time = static_cast<time_t>(unix_seconds);
  struct tm utc = {};
  ::gmtime_r(&time, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace rosetctl
