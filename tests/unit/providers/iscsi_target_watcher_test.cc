// The controller's watch on tgtd (providers/iscsi/target_watcher.cc): its check runs again and
// again on its own thread, and the watcher's end stops it at once, not an interval later.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "providers/iscsi/target_watcher.h"

using namespace rosetctl::iscsi;
using namespace std::chrono_literals;

TEST_CASE("the target watcher checks every interval until it is destroyed", "[iscsi]") {
  std::atomic<int> checks = 0;
  auto started = std::chrono::steady_clock::now();
  {
    TargetWatcher watcher([&] { ++checks; }, 10ms);
    while (checks < 3 && std::chrono::steady_clock::now() - started < 10s)
      std::this_thread::sleep_for(1ms);
  }
  CHECK(checks >= 3);
  int after = checks;
  std::this_thread::sleep_for(50ms);
  CHECK(checks == after);  // joined: no check runs after the end
}

TEST_CASE("destroying the target watcher does not wait out its interval", "[iscsi]") {
  std::atomic<int> checks = 0;
  auto started = std::chrono::steady_clock::now();
  {
    TargetWatcher watcher([&] { ++checks; }, 1h);
  }
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  CHECK(checks == 0);  // the first check comes one interval after the start
}
