// Named try-locks shared by every thread and process on this host (CLI runs and `serve`).
//
// Each key maps to one byte of a single lock file, locked with an open-file-description lock
// (F_OFD_SETLK): such locks conflict between threads of one process as well as between
// processes, vanish when their holder dies, and need no lock file per key.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

enum class LockMode { kShared, kExclusive };

// Descriptors of the lock file no lock is held through, kept open for the next lock instead of
// an open(2) and close(2) per lock (lock_space.cc).
class LockFileDescriptors;

// A held lock. Its descriptor is its own open file description while held; releasing unlocks
// its byte and hands the descriptor back for reuse (or closes it, which drops the lock too).
class HeldLock {
 public:
  HeldLock() = default;
  HeldLock(HeldLock&& other) noexcept;
  HeldLock& operator=(HeldLock&& other) noexcept;
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  ~HeldLock();

 private:
  friend class LockSpace;
  HeldLock(int fd, LockMode mode, off_t offset, std::shared_ptr<LockFileDescriptors> reuse)
      : fd_(fd), mode_(mode), offset_(offset), reuse_(std::move(reuse)) {}
  void release();

  int fd_ = -1;
  LockMode mode_ = LockMode::kShared;
  off_t offset_ = 0;
  std::shared_ptr<LockFileDescriptors> reuse_;
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
  explicit LockSpace(std::string path);
  std::string path_;
  std::shared_ptr<LockFileDescriptors> descriptors_;
};

}  // namespace rosetctl
