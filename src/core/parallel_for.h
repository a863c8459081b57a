// Running independent work items on a few threads, stopping at the first failure.
#pragma once

#include <cstddef>
#include <functional>

#include "core/status.h"

namespace rosetctl {

// Threads for I/O-and-hash work: one per CPU, at most 8.
int default_worker_count();

// Calls `work(index, worker)` for every index in [0, count) on up to `workers` threads
// (`worker` is the thread's number, for per-thread buffers). After a failure no new items start;
// the first failure is returned. The threads work for the caller's call (core/call_scope.h): no
// item starts once its client is gone.
Status parallel_for(std::size_t count, int workers,
                    const std::function<Status(std::size_t index, int worker)>& work);

}  // namespace rosetctl
