// Tests for src/core/parallel_for.cc.
#include "core/parallel_for.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

using namespace rosetctl;

TEST_CASE("parallel_for visits every index once", "[parallel_for]") {
  std::vector<std::atomic<int>> visits(1000);
  Status status = parallel_for(visits.size(), 3, [&](std::size_t i, int worker) {
    CHECK(worker >= 0);
    CHECK(worker < 3);
    ++visits[i];
    return Status::ok();
  });
  CHECK(status.is_ok());
  for (const auto& count : visits)
    CHECK(count == 1);
  CHECK(parallel_for(0, 4, [](std::size_t, int) { return Status::ok(); }).is_ok());
}

TEST_CASE("parallel_for returns the first failure and starts nothing after it", "[parallel_for]") {
  auto fail_at_5 = [](std::atomic<int>& started, std::chrono::microseconds pause) {
    return [&started, pause](std::size_t i, int) {
      ++started;
      if (i == 5) return error(Code::kAborted, "item {} failed", i);
      std::this_thread::sleep_for(pause);
      return Status::ok();
    };
  };
  std::atomic<int> started{0};
  Status status = parallel_for(10'000, 1, fail_at_5(started, std::chrono::microseconds(0)));
  CHECK(status.code() == Code::kAborted);
  CHECK(status.message() == "item 5 failed");
  CHECK(started == 6);  // one worker: exactly the items up to the failure

  // Two workers: the other one stops once the failure is seen. Its items take a while, so it
  // cannot run through all 10,000 (2 s) before the failing worker records the failure; without
  // the pause, a busy machine could deschedule that worker for as long as the rest takes.
  started = 0;
  status = parallel_for(10'000, 2, fail_at_5(started, std::chrono::microseconds(200)));
  CHECK(status.code() == Code::kAborted);
  CHECK(status.message() == "item 5 failed");
  CHECK(started < 10'000);
}
