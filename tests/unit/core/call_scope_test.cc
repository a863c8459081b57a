// Tests for src/core/call_scope.cc: long work and lock waits stop when their call ends.
#include "core/call_scope.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "core/lock_space.h"
#include "core/parallel_for.h"

namespace {

using namespace std::chrono_literals;
using rosetctl::CallLimits;
using rosetctl::Code;
using rosetctl::CurrentCall;
using rosetctl::Status;

CallLimits far_deadline(std::function<bool()> cancelled) {
  return CallLimits(CallLimits::Clock::now() + 1h, std::move(cancelled));
}

}  // namespace

TEST_CASE("a thread with no call is never stopped", "[call_scope]") {
  REQUIRE(rosetctl::current_call() == nullptr);
  REQUIRE(rosetctl::check_current_call().is_ok());
}

TEST_CASE("a call says which way it ended", "[call_scope]") {
  CallLimits past(CallLimits::Clock::now() - 1ms, [] { return true; });
  CHECK(past.check().code() == Code::kDeadlineExceeded);
  CallLimits cancelled = far_deadline([] { return true; });
  CHECK(cancelled.check().code() == Code::kCancelled);
  CallLimits going_on = far_deadline([] { return false; });
  CHECK(going_on.check().is_ok());
  {
    CurrentCall scope(&cancelled);
    CHECK(rosetctl::check_current_call().code() == Code::kCancelled);
  }
  CHECK(rosetctl::current_call() == nullptr);
}

TEST_CASE("parallel_for's workers stop starting items once the call is cancelled", "[call_scope]") {
  std::atomic<bool> cancelled{false};
  std::atomic<int> done{0};
  CallLimits limits = far_deadline([&] { return cancelled.load(); });
  CurrentCall scope(&limits);
  Status status = rosetctl::parallel_for(1000, 4, [&](std::size_t, int) {
    if (++done == 10) cancelled = true;
    return Status::ok();
  });
  CHECK(status.code() == Code::kCancelled);
  // Each of the 4 workers may finish the item it had begun.
  CHECK(done.load() < 10 + 4);
}

TEST_CASE("a lock wait ends with its call's deadline, not its own patience", "[call_scope]") {
  char pattern[] = "/tmp/rosetctl-call-lock-XXXXXX";
  int fd = ::mkstemp(pattern);
  REQUIRE(fd >= 0);
  ::close(fd);
  auto space = rosetctl::LockSpace::open(pattern);
  REQUIRE(space);
  auto held = space->try_lock("volume", rosetctl::LockMode::kExclusive, "busy");
  REQUIRE(held);
  CallLimits limits(CallLimits::Clock::now() + 200ms, [] { return false; });
  CurrentCall scope(&limits);
  auto started = std::chrono::steady_clock::now();
  auto waited = space->wait_lock("volume", rosetctl::LockMode::kExclusive, "busy", 60s);
  auto took = std::chrono::steady_clock::now() - started;
  CHECK(waited.status().code() == Code::kDeadlineExceeded);
  CHECK(took < 5s);
  std::filesystem::remove(pattern);
}
