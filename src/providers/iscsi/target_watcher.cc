// The target daemon's watcher thread; see target_watcher.h.
#include "providers/iscsi/target_watcher.h"

namespace rosetctl::iscsi {

TargetWatcher::TargetWatcher(std::function<void()> check, std::chrono::milliseconds interval)
    : check_(std::move(check)), interval_(interval), thread_([this] { run(); }) {}

TargetWatcher::~TargetWatcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TargetWatcher::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    check_();
    lock.lock();
  }
}

}  // namespace rosetctl::iscsi
