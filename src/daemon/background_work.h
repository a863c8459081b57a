// Work that outlives the RPC that started it (a snapshot still being taken when CreateSnapshot
// answers ready_to_use=false). Each job runs on a thread of its own; the owner's destructor waits
// for all of them, so nothing a job uses goes away under it.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <list>
#include <mutex>
#include <thread>

namespace rosetctl {

class BackgroundWork {
 public:
  BackgroundWork() = default;
  BackgroundWork(const BackgroundWork&) = delete;
  BackgroundWork& operator=(const BackgroundWork&) = delete;
  ~BackgroundWork();

  // Starts `job`; the future becomes ready when it has returned.
  std::shared_future<void> start(std::function<void()> job);

 private:
  struct Job {
    std::thread thread;
    std::shared_future<void> done;
  };
  void join_finished();  // with mutex_ held

  std::mutex mutex_;
  std::list<Job> jobs_;
};

}  // namespace rosetctl
