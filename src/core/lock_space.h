// Named try-locks shared by every thread and process on this host (CLI runs and `serve`).
//
// Each key maps to one byte of a single lock file, locked with an open-file-description lock
// (F_OFD_SETLK): such locks conflict between threads of one process as well as between
// processes, vanish when their holder dies, and need no lock file per key.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

enum class LockMode { kShared, kExclusive };

// A held lock; releasing closes its private descriptor, which drops the lock.
class HeldLock {
 public:
  HeldLock() = default;
  explicit HeldLock(int fd) : fd_(fd) {}
  HeldLock(HeldLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  HeldLock& operator=(HeldLock&& other) noexcept;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  ~HeldLock();

 private:
  int fd_ = -1;
};

class LockSpace {
 public:
  // `path` is created (0600) if missing.
  static Expected<LockSpace> open(std::string path);

  // Never blocks: a conflicting holder yields ABORTED with `busy_message`, which the CSI spec
  // asks for when an operation on the same volume is already in flight.
  Expected<HeldLock> try_lock(std::string_view key, LockMode mode,
                              std::string_view busy_message) const;

  // Polls try_lock (with backoff) until it succeeds or `patience` has passed. For callers that
  // would rather wait their turn than fail, such as a CLI run serialising its own multi-call
  // sequences against another CLI run.
  Expected<HeldLock> wait_lock(std::string_view key, LockMode mode, std::string_view busy_message,
                               std::chrono::milliseconds patience) const;

 private:
  explicit LockSpace(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace rosetctl
