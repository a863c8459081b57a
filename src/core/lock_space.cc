// OFD byte-range locks keyed by a hash of the lock name.
#include "core/lock_space.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

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

// Why reuse is safe with OFD locks: a descriptor is handed out to one holder at a time, so
// every held lock still has an open file description of its own and conflicts with every
// other holder, in this process or another. Released, its one byte is unlocked (F_UNLCK of
// exactly that byte), so a reused descriptor holds nothing from before; when the unlock
// fails it is closed instead, which drops any lock on it. Descriptors are O_CLOEXEC: a
// spawned program never holds one. Shared locks need only read access, which a caller that
// may not write the lock file still has, so the two modes keep separate descriptors.
class LockFileDescriptors {
 public:
  explicit LockFileDescriptors(std::string path) : path_(std::move(path)) {}
  ~LockFileDescriptors() {
    for (auto& idle : idle_)
      for (int fd : idle)
        ::close(fd);
  }
  LockFileDescriptors(const LockFileDescriptors&) = delete;
  LockFileDescriptors& operator=(const LockFileDescriptors&) = delete;

  // An idle descriptor for `mode`, or a freshly opened one; -1 with errno set on failure.
  int take(LockMode mode) {
    {
      std::lock_guard lock(mutex_);
      std::vector<int>& idle = idle_[index(mode)];
      if (!idle.empty()) {
        int fd = idle.back();
        idle.pop_back();
        return fd;
      }
    }
    return ::open(path_.c_str(),
                  mode == LockMode::kShared ? O_RDONLY | O_CLOEXEC : O_RDWR | O_CLOEXEC);
  }

  // `fd` holds no lock any more; kept for the next lock unless enough are idle already.
  void give_back(int fd, LockMode mode) {
    {
      std::lock_guard lock(mutex_);
      std::vector<int>& idle = idle_[index(mode)];
      if (idle.size() < kMaxIdle) {
        idle.push_back(fd);
        return;
      }
    }
    ::close(fd);
  }

 private:
  // Enough for the locks of a burst of concurrent calls (three per NodePublish).
  static constexpr size_t kMaxIdle = 32;
  static size_t index(LockMode mode) { return mode == LockMode::kShared ? 0 : 1; }

  const std::string path_;
  std::mutex mutex_;
  std::array<std::vector<int>, 2> idle_;  // by mode; guarded by mutex_
};

HeldLock::HeldLock(HeldLock&& other) noexcept
    : fd_(other.fd_), mode_(other.mode_), offset_(other.offset_), reuse_(std::move(other.reuse_)) {
  other.fd_ = -1;
}

HeldLock& HeldLock::operator=(HeldLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    mode_ = other.mode_;
    offset_ = other.offset_;
    reuse_ = std::move(other.reuse_);
    other.fd_ = -1;
  }
  return *this;
}

HeldLock::~HeldLock() {
  release();
}

void HeldLock::release() {
  if (fd_ < 0) return;
  struct flock range = {};
  range.l_type = F_UNLCK;
  range.l_whence = SEEK_SET;
  range.l_start = offset_;
  range.l_len = 1;
  if (reuse_ && ::fcntl(fd_, F_OFD_SETLK, &range) == 0) {
    reuse_->give_back(fd_, mode_);
  } else {
    ::close(fd_);  // drops whatever lock it holds
  }
  fd_ = -1;
  reuse_.reset();
}

LockSpace::LockSpace(std::string path)
    : path_(std::move(path)), descriptors_(std::make_shared<LockFileDescriptors>(path_)) {}

Expected<LockSpace> LockSpace::open(std::string path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open lock file \"{}\"", path));
  ::close(fd);
  return LockSpace(std::move(path));
}

Expected<HeldLock> LockSpace::try_lock(std::string_view key, LockMode mode,
                                       std::string_view busy_message) const {
  // An open file description of its own per held lock, so two holders in one process conflict.
  int fd = descriptors_->take(mode);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open lock file \"{}\"", path_));
  struct flock range = {};
  range.l_type = mode == LockMode::kShared ? F_RDLCK : F_WRLCK;
  range.l_whence = SEEK_SET;
  // Offsets up to 2^62 keep clear of off_t overflow; collisions are astronomically unlikely
  // and would only make two unrelated operations take turns.
  range.l_start = static_cast<off_t>(stable_hash(key) >> 2);
  range.l_len = 1;
  if (::fcntl(fd, F_OFD_SETLK, &range) == 0) return HeldLock(fd, mode, range.l_start, descriptors_);
  int err = errno;
  descriptors_->give_back(fd, mode);  // it holds nothing: the lock was refused
  if (err == EAGAIN || err == EACCES) return Status(Code::kAborted, std::string(busy_message));
  return errno_status(err, fmt::format("cannot lock \"{}\" in \"{}\"", key, path_));
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
