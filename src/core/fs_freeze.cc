// FIFREEZE / FITHAW through a descriptor of the mount point (see fs_freeze.h).
#include "core/fs_freeze.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "core/log.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

// How long a freeze waits for another one to go: longer than filesystem_is_frozen holds one.
constexpr auto kProbePatience = std::chrono::milliseconds(500);

Expected<UniqueFd> open_mount_point(const std::string& mount_point) {
  UniqueFd fd(::open(mount_point.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open \"{}\"", mount_point));
  return fd;
}

// Descriptors of the filesystems this process holds frozen, for the signal handler (which may
// only use async-signal-safe calls: atomics, ioctl). -1 is a free slot. A freeze that finds no
// slot is still thawed by its guard; it just is not thawed by a signal.
constexpr int kFreeSlot = -1;
std::atomic<int> frozen_fds[16] = {kFreeSlot, kFreeSlot, kFreeSlot, kFreeSlot, kFreeSlot, kFreeSlot,
                                   kFreeSlot, kFreeSlot, kFreeSlot, kFreeSlot, kFreeSlot, kFreeSlot,
                                   kFreeSlot, kFreeSlot, kFreeSlot, kFreeSlot};

void remember_frozen(int fd) {
  for (std::atomic<int>& slot : frozen_fds) {
    int expected = kFreeSlot;
    if (slot.compare_exchange_strong(expected, fd)) return;
  }
}

void forget_frozen(int fd) {
  for (std::atomic<int>& slot : frozen_fds) {
    int expected = fd;
    if (slot.compare_exchange_strong(expected, kFreeSlot)) return;
  }
}

void thaw_then_die(int signal_number) {
  for (std::atomic<int>& slot : frozen_fds) {
    int fd = slot.load();
    if (fd != kFreeSlot) ::ioctl(fd, FITHAW, 0);
  }
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  ::sigaction(signal_number, &fallback, nullptr);
  ::raise(signal_number);
}

}  // namespace

void thaw_on_fatal_signals() {
  struct sigaction action = {};
  action.sa_handler = thaw_then_die;
  ::sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
    ::sigaction(signal_number, &action, nullptr);
}

Expected<FrozenFilesystem> FrozenFilesystem::freeze(const std::string& mount_point) {
  auto fd = open_mount_point(mount_point);
  if (!fd) return fd.status();
  // A health check (filesystem_is_frozen) holds a freeze for a moment: wait that out.
  auto give_up = std::chrono::steady_clock::now() + kProbePatience;
  while (::ioctl(fd->get(), FIFREEZE, 0) != 0) {
    if (errno != EBUSY) {
      return errno_status(errno,
                          fmt::format("cannot freeze the filesystem at \"{}\"", mount_point));
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      // Not a call in flight (CSI's ABORTED, which callers retry): it stays frozen until thawed.
      return error(Code::kFailedPrecondition,
                   "the filesystem at \"{}\" is frozen already (by fsfreeze, or by a process "
                   "that died while copying it); thaw it with `fsfreeze -u {}` and retry",
                   mount_point, mount_point);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  remember_frozen(fd->get());
  return FrozenFilesystem(std::move(*fd), mount_point);
}

Status FrozenFilesystem::thaw() {
  if (!fd_.valid()) return Status::ok();
  UniqueFd fd = std::move(fd_);
  forget_frozen(fd.get());
  if (::ioctl(fd.get(), FITHAW, 0) != 0 && errno != EINVAL) {  // EINVAL: not frozen any more
    return errno_status(errno, fmt::format("cannot thaw the filesystem at \"{}\"", mount_point_));
  }
  return Status::ok();
}

FrozenFilesystem::~FrozenFilesystem() {
  if (Status thawed = thaw(); !thawed) {
    spdlog::error("{}: writers to it stay blocked until it is thawed (`fsfreeze -u {}`)",
                  escape_text(thawed.message()), mount_point_);
  }
}

Expected<bool> filesystem_is_frozen(const std::string& mount_point) {
  auto fd = open_mount_point(mount_point);
  if (!fd) return fd.status();
  if (::ioctl(fd->get(), FIFREEZE, 0) != 0) {
    if (errno == EBUSY) return true;
    if (errno == EOPNOTSUPP || errno == ENOTTY) return false;  // cannot be frozen at all
    return errno_status(errno, fmt::format("cannot check whether the filesystem at \"{}\" is "
                                           "frozen",
                                           mount_point));
  }
  remember_frozen(fd->get());  // a signal now must not leave it frozen
  int thawed = ::ioctl(fd->get(), FITHAW, 0);
  int err = errno;
  forget_frozen(fd->get());
  if (thawed != 0 && err != EINVAL) {
    return errno_status(err, fmt::format("cannot thaw the filesystem at \"{}\"", mount_point));
  }
  return false;
}

Expected<bool> thaw_filesystem(const std::string& mount_point) {
  auto fd = open_mount_point(mount_point);
  if (!fd) return fd.status();
  if (::ioctl(fd->get(), FITHAW, 0) == 0) return true;
  if (errno == EINVAL) return false;
  return errno_status(errno, fmt::format("cannot thaw the filesystem at \"{}\"", mount_point));
}

}  // namespace rosetctl
