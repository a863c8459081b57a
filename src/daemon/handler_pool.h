// Threads that run RPC handlers for gRPC's callback API. Handlers block (on fsync, mounts,
// child processes), so they cannot run on gRPC's own two callback threads. gRPC's synchronous
// server gave every call a thread of its own and started and ended threads all the time under
// load; on small VMs that cost more than many calls (bench/README.md). Here a few threads are
// kept and reused; a burst waits for them instead of starting a thread per call, and a call
// that has waited too long (every thread busy with something slow, such as mkfs or a restore)
// gets a thread of its own, so a quick call (a Probe) never queues behind slow ones for long.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace rosetctl {

class HandlerPool {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    std::size_t busy_threads = 8;             // threads running calls at once, normally
    std::size_t kept_idle = 2;                // idle threads kept for good
    std::chrono::milliseconds linger{500};    // how long other idle threads stay
    std::chrono::milliseconds max_wait{200};  // then a waiting call gets a thread of its own
  };

  HandlerPool() : HandlerPool(Limits{}) {}
  explicit HandlerPool(Limits limits) : limits_(limits) {}
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;
  // Runs what was queued, then joins every thread.
  ~HandlerPool();

  void run(std::function<void()> work);

  std::size_t thread_count() const;

 private:
  struct Queued {
    std::function<void()> work;
    Clock::time_point since;
  };

  void start_worker();  // with mutex_ held
  void work_loop(std::list<std::thread>::iterator self);
  // Watches the queue while every worker is busy; started the first time that happens.
  void watch_loop();
  void join_finished();  // with mutex_ held

  const Limits limits_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable queue_stuck_;
  std::condition_variable thread_ended_;
  std::deque<Queued> queue_;
  std::list<std::thread> threads_;
  std::vector<std::thread> finished_;  // ended, not joined yet
  std::thread watcher_;
  std::size_t idle_ = 0;  // threads waiting for work
  bool stopping_ = false;
};

}  // namespace rosetctl
