// OFD byte-range locks keyed by a hash of the lock name.
#include "core/lock_space.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <thread>

#include "core/call_scope.h"

namespace rosetctl {
namespace {

// FNV-1a: stable across runs and processes (std::hash is not guaranteed to be).
uint64_t stable_hash(std::string_view key) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

HeldLock& HeldLock::operator=(HeldLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

HeldLock::~HeldLock() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<LockSpace> LockSpace::open(std::string path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open lock file \"{}\"", path));
  ::close(fd);
  return LockSpace(std::move(path));
}

Expected<HeldLock> LockSpace::try_lock(std::string_view key, LockMode mode,
                                       std::string_view busy_message) const {
  // A fresh open file description per lock, so two holders in one process conflict too.
  int fd =
      ::open(path_.c_str(), mode == LockMode::kShared ? O_RDONLY | O_CLOEXEC : O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open lock file \"{}\"", path_));
  HeldLock held(fd);
  struct flock range = {};
  range.l_type = mode == LockMode::kShared ? F_RDLCK : F_WRLCK;
  range.l_whence = SEEK_SET;
  // Offsets up to 2^62 keep clear of off_t overflow; collisions are astronomically unlikely
  // and would only make two unrelated operations take turns.
  range.l_start = static_cast<off_t>(stable_hash(key) >> 2);
  range.l_len = 1;
  if (::fcntl(fd, F_OFD_SETLK, &range) == 0) return held;
  if (errno == EAGAIN || errno == EACCES) return Status(Code::kAborted, std::string(busy_message));
  return errno_status(errno, fmt::format("cannot lock \"{}\" in \"{}\"", key, path_));
}

Expected<HeldLock> LockSpace::wait_lock(std::string_view key, LockMode mode,
                                        std::string_view busy_message,
                                        std::chrono::milliseconds patience) const {
  auto give_up = std::chrono::steady_clock::now() + patience;
  auto pause = std::chrono::milliseconds(5);
  while (true) {
    auto held = try_lock(key, mode, busy_message);
    if (held || held.status().code() != Code::kAborted ||
        std::chrono::steady_clock::now() >= give_up) {
      return held;
    }
    // A wait never outlasts the call it is made for.
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

}  // namespace rosetctl
