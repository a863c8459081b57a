// How long operations (snapshot commits, restores, clones) report how far they are. The CLI
// draws a bar on a terminal; `serve` and JSON output pass no sink and stay quiet.
#pragma once

#include <cstdint>
#include <string_view>

namespace rosetctl {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // A new phase with its totals (0 when unknown); called from the operation's own thread.
  virtual void start(std::string_view title, int64_t files_total, int64_t bytes_total) = 0;
  // Work done since the last call; called from worker threads concurrently.
  virtual void advance(int64_t files, int64_t bytes) = 0;
  // The phase is over (successfully or not).
  virtual void finish() = 0;
};

// Null-tolerant wrapper, so code that reports progress never checks for a sink itself.
class Progress {
 public:
  explicit Progress(ProgressSink* sink) : sink_(sink) {}
  void start(std::string_view title, int64_t files_total, int64_t bytes_total) const {
    if (sink_ != nullptr) sink_->start(title, files_total, bytes_total);
  }
  void advance(int64_t files, int64_t bytes) const {
    if (sink_ != nullptr) sink_->advance(files, bytes);
  }
  void finish() const {
    if (sink_ != nullptr) sink_->finish();
  }

 private:
  ProgressSink* sink_;
};

}  // namespace rosetctl
