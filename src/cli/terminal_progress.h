// A one-line progress bar on stderr for long operations (commit, restore, clone, verify):
// phase, files, bytes and rate, redrawn at most ten times a second, erased when the phase ends.
// The CLI installs it only when stderr is a terminal and the output is not JSON.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/progress.h"

namespace rosetctl::cli {

class TerminalProgress final : public ProgressSink {
 public:
  void start(std::string_view title, int64_t files_total, int64_t bytes_total) override;
  void advance(int64_t files, int64_t bytes) override;
  void finish() override;

 private:
  void draw_locked(std::chrono::steady_clock::time_point now);

  std::atomic<int64_t> files_done_{0};
  std::atomic<int64_t> bytes_done_{0};

  std::mutex mutex_;  // guards everything below, and the terminal line
  std::string title_;
  int64_t files_total_ = 0;
  int64_t bytes_total_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;
};

// "1.5 GiB", "312 KiB", "17 B": for people, not for parsing.
std::string approximate_size(int64_t bytes);

}  // namespace rosetctl::cli
