// Drawing the progress line.
#include "cli/terminal_progress.h"

#include <fmt/format.h>

#include <cstdio>

namespace rosetctl::cli {
namespace {

// Quick phases never flicker a bar onto the screen.
constexpr auto kFirstDrawAfter = std::chrono::milliseconds(300);
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

}  // namespace

std::string approximate_size(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

void TerminalProgress::start(std::string_view title, int64_t files_total, int64_t bytes_total) {
  std::lock_guard lock(mutex_);
  title_ = std::string(title);
  files_total_ = files_total;
  bytes_total_ = bytes_total;
  files_done_ = 0;
  bytes_done_ = 0;
  started_ = last_draw_ = std::chrono::steady_clock::now();
  drawn_ = false;
}

void TerminalProgress::advance(int64_t files, int64_t bytes) {
  files_done_ += files;
  bytes_done_ += bytes;
  auto now = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_, std::try_to_lock);  // a busy drawer is enough
  if (!lock.owns_lock() || now - started_ < kFirstDrawAfter || now - last_draw_ < kRedrawEvery) {
    return;
  }
  draw_locked(now);
}

void TerminalProgress::draw_locked(std::chrono::steady_clock::time_point now) {
  double seconds = std::chrono::duration<double>(now - started_).count();
  int64_t bytes = bytes_done_;
  std::string rate =
      seconds > 0 ? approximate_size(static_cast<int64_t>(static_cast<double>(bytes) / seconds))
                  : "-";
  std::string line =
      fmt::format("{}: {}/{} files, {}/{}, {}/s", title_, files_done_.load(), files_total_,
                  approximate_size(bytes), approximate_size(bytes_total_), rate);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  last_draw_ = now;
  drawn_ = true;
}

void TerminalProgress::finish() {
  std::lock_guard lock(mutex_);
  if (drawn_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  drawn_ = false;
}

}  // namespace rosetctl::cli
