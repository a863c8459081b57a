// A thread that runs one check every interval until it is destroyed: the controller's watch on
// its target daemon (IscsiExports::check_targets), so that a tgtd that restarted or was emptied
// is noticed within seconds and its targets made again, not only when a call next asks for one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace rosetctl::iscsi {

class TargetWatcher {
 public:
  // Starts the thread; `check` runs on it first after one `interval`, then every `interval`.
  TargetWatcher(std::function<void()> check, std::chrono::milliseconds interval);
  // Stops the thread (a check under way finishes first) and joins it.
  ~TargetWatcher();

  TargetWatcher(const TargetWatcher&) = delete;
  TargetWatcher& operator=(const TargetWatcher&) = delete;

 private:
  void run();

  const std::function<void()> check_;
  const std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;     // last: started once the members it reads exist
};

}  // namespace rosetctl::iscsi
