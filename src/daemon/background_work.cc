#include "daemon/background_work.h"

namespace rosetctl {

BackgroundWork::~BackgroundWork() {
  std::lock_guard lock(mutex_);
  for (Job& job : jobs_)
    job.thread.join();
}

std::shared_future<void> BackgroundWork::start(std::function<void()> job) {
  std::packaged_task<void()> task(std::move(job));
  std::shared_future<void> done = task.get_future().share();
  std::lock_guard lock(mutex_);
  join_finished();
  jobs_.push_back(Job{std::thread(std::move(task)), done});
  return done;
}

void BackgroundWork::join_finished() {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->done.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      it->thread.join();
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace rosetctl
