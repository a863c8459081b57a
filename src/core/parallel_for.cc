// A minimal work-sharing loop: an atomic cursor, a failure flag, the first error kept.
#include "core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "core/call_scope.h"

namespace rosetctl {

int default_worker_count() {
  unsigned cpus = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cpus, 1u, 8u));
}

Status parallel_for(std::size_t count, int workers,
                    const std::function<Status(std::size_t index, int worker)>& work) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex failure_mutex;
  Status failure;  // guarded by failure_mutex
  // The workers answer to the caller's call too: its end stops them between items.
  const CallLimits* call = current_call();
  auto run = [&](int worker) {
    CurrentCall same_call(call);
    while (!failed.load(std::memory_order_relaxed)) {
      std::size_t index = next.fetch_add(1);
      if (index >= count) return;
      Status status = check_current_call();
      if (status) status = work(index, worker);
      if (!status) {
        std::lock_guard lock(failure_mutex);
        if (!failed.exchange(true)) failure = std::move(status);
      }
    }
  };
  int threads = static_cast<int>(std::min<std::size_t>(std::max(workers, 1), count));
  std::vector<std::thread> pool;
  for (int worker = 1; worker < threads; ++worker)
    pool.emplace_back(run, worker);
  run(0);
  for (std::thread& thread : pool)
    thread.join();
  return failure;
}

}  // namespace rosetctl
