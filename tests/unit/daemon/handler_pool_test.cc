// Tests for src/daemon/handler_pool.cc: every call runs once, a burst shares a few threads, a
// call stuck behind slow ones still gets a thread, and idle threads beyond the kept ones end.
#include "daemon/handler_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace {

using namespace std::chrono_literals;
using rosetctl::HandlerPool;

// Holds the calls that wait on it until released.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  bool wait_for_waiters(int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return waiting_ >= count; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

template <typename Predicate>
bool eventually(Predicate predicate) {
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(5ms)) {
    if (predicate()) return true;
  }
  return predicate();
}

}  // namespace

TEST_CASE("every call runs exactly once, also when queued at destruction", "[handler_pool]") {
  std::atomic<int> runs = 0;
  {
    HandlerPool pool(HandlerPool::Limits{.busy_threads = 3});
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
      callers.emplace_back([&] {
        for (int i = 0; i < 250; ++i)
          pool.run([&] { ++runs; });
      });
    }
    for (auto& caller : callers)
      caller.join();
  }
  CHECK(runs == 1000);
}

TEST_CASE("a burst of quick calls runs on at most busy_threads threads", "[handler_pool]") {
  std::atomic<int> running = 0, most = 0, runs = 0;
  {
    HandlerPool pool(HandlerPool::Limits{.busy_threads = 4, .max_wait = 60s});
    for (int i = 0; i < 40; ++i) {
      pool.run([&] {
        int now = ++running;
        for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(2ms);
        --running;
        ++runs;
      });
    }
    CHECK(pool.thread_count() <= 4);
  }
  CHECK(runs == 40);
  CHECK(most <= 4);
  CHECK(most >= 2);
}

TEST_CASE("a call queued behind slow ones gets a thread after max_wait", "[handler_pool]") {
  Gate gate;
  std::atomic<bool> quick_ran = false;
  HandlerPool pool(HandlerPool::Limits{.busy_threads = 2, .max_wait = 20ms});
  pool.run([&] { gate.wait(); });
  pool.run([&] { gate.wait(); });
  REQUIRE(gate.wait_for_waiters(2));
  pool.run([&] { quick_ran = true; });
  CHECK(eventually([&] { return quick_ran.load(); }));
  CHECK(pool.thread_count() >= 3);
  gate.open();
}

TEST_CASE("idle threads beyond kept_idle end after linger", "[handler_pool]") {
  Gate gate;
  HandlerPool pool(HandlerPool::Limits{.busy_threads = 6, .kept_idle = 2, .linger = 20ms});
  for (int i = 0; i < 6; ++i)
    pool.run([&] { gate.wait(); });
  REQUIRE(gate.wait_for_waiters(6));
  CHECK(pool.thread_count() == 6);
  gate.open();
  CHECK(eventually([&] { return pool.thread_count() == 2; }));
  // The kept threads still serve.
  std::atomic<bool> ran = false;
  pool.run([&] { ran = true; });
  CHECK(eventually([&] { return ran.load(); }));
}
