// Tests for src/cli/terminal_progress.cc: what the bar draws on stderr, and when.
#include "cli/terminal_progress.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

using rosetctl::cli::approximate_size;
using rosetctl::cli::TerminalProgress;

namespace {

// Captures everything written to stderr while alive.
class StderrCapture {
 public:
  StderrCapture() {
    REQUIRE(::pipe2(pipe_, O_CLOEXEC) == 0);
    saved_ = ::dup(STDERR_FILENO);
    REQUIRE(::dup2(pipe_[1], STDERR_FILENO) == STDERR_FILENO);
  }
  ~StderrCapture() { restore(); }

  std::string take() {
    restore();
    std::string out;
    char buffer[4096];
    ssize_t got;
    while ((got = ::read(pipe_[0], buffer, sizeof(buffer))) > 0)
      out.append(buffer, static_cast<std::size_t>(got));
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::close(pipe_[1]);
    saved_ = -1;
  }
  int pipe_[2] = {-1, -1};
  int saved_ = -1;
};

}  // namespace

TEST_CASE("the progress bar shows files, bytes and rate, then erases itself", "[cli]") {
  StderrCapture capture;
  TerminalProgress progress;
  progress.start("committing demo", 4, 4 << 20);
  progress.advance(1, 1 << 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  progress.advance(1, 1 << 20);
  progress.finish();
  std::string drawn = capture.take();
  CHECK(drawn.find("\r\x1b[Kcommitting demo: 2/4 files, 2.0 MiB/4.0 MiB, ") != std::string::npos);
  CHECK(drawn.find("/s") != std::string::npos);
  CHECK(drawn.size() > 4);
  CHECK(drawn.substr(drawn.size() - 4) == "\r\x1b[K");
}

TEST_CASE("a quick phase draws nothing", "[cli]") {
  StderrCapture capture;
  TerminalProgress progress;
  progress.start("restoring", 1, 10);
  progress.advance(1, 10);
  progress.finish();
  CHECK(capture.take().empty());
}

TEST_CASE("sizes for people", "[cli]") {
  CHECK(approximate_size(17) == "17 B");
  CHECK(approximate_size(1536) == "1.5 KiB");
  CHECK(approximate_size(512LL << 20) == "512.0 MiB");
}
