// Worker threads for RPC handlers: a few kept, more only for calls that waited too long.
#include "daemon/handler_pool.h"

namespace rosetctl {

HandlerPool::~HandlerPool() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  work_ready_.notify_all();
  queue_stuck_.notify_all();
  // Workers drain the queue, then move themselves to finished_ as they end.
  thread_ended_.wait(lock, [&] { return threads_.empty(); });
  join_finished();
  lock.unlock();
  if (watcher_.joinable()) watcher_.join();
}

void HandlerPool::run(std::function<void()> work) {
  std::unique_lock lock(mutex_);
  join_finished();
  queue_.push_back({std::move(work), Clock::now()});
  if (idle_ >= queue_.size()) {
    // Woken after the unlock: a worker woken under the lock would at once block on it again
    // (a second context switch per call, bench/README.md).
    lock.unlock();
    work_ready_.notify_one();
  } else if (threads_.size() < limits_.busy_threads) {
    start_worker();
  } else if (!watcher_.joinable()) {
    watcher_ = std::thread(&HandlerPool::watch_loop, this);
  } else {
    queue_stuck_.notify_one();
  }
}

std::size_t HandlerPool::thread_count() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

void HandlerPool::start_worker() {
  threads_.emplace_front();
  // The new thread blocks on mutex_ (held here) until its own handle is in place.
  threads_.front() = std::thread(&HandlerPool::work_loop, this, threads_.begin());
}

void HandlerPool::work_loop(std::list<std::thread>::iterator self) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!queue_.empty()) {
      std::function<void()> work = std::move(queue_.front().work);
      queue_.pop_front();
      lock.unlock();
      work();
      work = nullptr;  // what it captured goes before the lock is taken again
      lock.lock();
      continue;
    }
    if (stopping_) break;
    ++idle_;
    bool woken =
        work_ready_.wait_for(lock, limits_.linger, [&] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (!woken && idle_ >= limits_.kept_idle) break;
  }
  finished_.push_back(std::move(*self));
  threads_.erase(self);
  thread_ended_.notify_all();
}

void HandlerPool::watch_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (queue_.empty()) {
      queue_stuck_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      continue;
    }
    Clock::time_point due = queue_.front().since + limits_.max_wait;
    if (Clock::now() < due) {
      queue_stuck_.wait_until(lock, due);
      continue;
    }
    // Calls have waited max_wait: every thread is busy with something slow. One thread per
    // such call (idle threads about to take one count), then give them time to start.
    std::size_t overdue = 0;
    for (const Queued& queued : queue_) {
      if (queued.since + limits_.max_wait > Clock::now()) break;
      ++overdue;
    }
    for (std::size_t i = idle_; i < overdue; ++i)
      start_worker();
    queue_stuck_.wait_for(lock, limits_.max_wait, [&] { return stopping_; });
  }
}

void HandlerPool::join_finished() {
  for (std::thread& thread : finished_)
    thread.join();
  finished_.clear();
}

}  // namespace rosetctl
