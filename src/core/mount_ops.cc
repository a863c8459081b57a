// Mount flag parsing, bind mounts, unmounting, MountGuard and path probing via raw syscalls.
#include "core/mount_ops.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "core/mount_lookup.h"
#include "core/real_path.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr unsigned long kAtimeModes = MS_NOATIME | MS_RELATIME | MS_STRICTATIME;
// The flags a bind remount can change; everything else belongs to the filesystem.
constexpr unsigned long kPerMountFlags =
    MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NODIRATIME | kAtimeModes;

struct FlagName {
  std::string_view name;
  std::optional<bool> read_only;  // nullopt: leaves read_only as it was
  unsigned long clear;            // applied before set, so "noatime" replaces "relatime"
  unsigned long set;
};

constexpr FlagName kFlagNames[] = {
    {"ro", true, 0, 0},
    {"rw", false, 0, 0},
    {"nosuid", std::nullopt, 0, MS_NOSUID},
    {"suid", std::nullopt, MS_NOSUID, 0},
    {"nodev", std::nullopt, 0, MS_NODEV},
    {"dev", std::nullopt, MS_NODEV, 0},
    {"noexec", std::nullopt, 0, MS_NOEXEC},
    {"exec", std::nullopt, MS_NOEXEC, 0},
    {"noatime", std::nullopt, kAtimeModes, MS_NOATIME},
    {"atime", std::nullopt, MS_NOATIME, 0},
    {"nodiratime", std::nullopt, 0, MS_NODIRATIME},
    {"relatime", std::nullopt, kAtimeModes, MS_RELATIME},
    {"strictatime", std::nullopt, kAtimeModes, MS_STRICTATIME},
    {"sync", std::nullopt, 0, MS_SYNCHRONOUS},
    {"async", std::nullopt, MS_SYNCHRONOUS, 0},
    // mount(8)'s defaults: rw,suid,dev,exec,async (the atime mode is the kernel's choice).
    {"defaults", false, MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SYNCHRONOUS, 0},
    {"bind", std::nullopt, 0, 0},  // every publish is a bind already
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ')
    text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ')
    text.remove_suffix(1);
  return text;
}

Status apply_flag(std::string_view name, MountOptions* options) {
  for (const FlagName& flag : kFlagNames) {
    if (flag.name != name) continue;
    if (flag.read_only) options->read_only = *flag.read_only;
    options->flags = (options->flags & ~flag.clear) | flag.set;
    return Status::ok();
  }
  std::string supported;
  for (const FlagName& flag : kFlagNames) {
    supported += supported.empty() ? "" : ", ";
    supported += flag.name;
  }
  return error(Code::kInvalidArgument, "unsupported mount flag {} (supported: {})",
               display_quoted(name), supported);
}

// "ro,nosuid,noexec": for error messages about a remount.
std::string describe(const MountOptions& options) {
  std::string text = options.read_only ? "ro" : "rw";
  for (const FlagName& flag : kFlagNames) {
    if (flag.set != 0 && (options.flags & kPerMountFlags & flag.set) == flag.set) {
      text += ',';
      text += flag.name;
    }
  }
  return text;
}

// A bind remount replaces every per-mount flag, and in a user namespace clearing one that was
// inherited (locked) fails with EPERM; so keep what the new bind already has and add ours.
Expected<unsigned long> remount_flags(const std::string& target, const MountOptions& options) {
  struct statvfs current;
  if (::statvfs(target.c_str(), &current) != 0) {
    int err = errno;  // read before formatting, which may allocate
    return errno_status(err, fmt::format("cannot read the flags of the mount on \"{}\"", target));
  }
  unsigned long flags = options.flags & kPerMountFlags;
  if (options.read_only || (current.f_flag & ST_RDONLY)) flags |= MS_RDONLY;
  if (current.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (current.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (current.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (current.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if ((flags & kAtimeModes) == 0) {  // none asked for: keep the current one, not the default
    if (current.f_flag & ST_NOATIME) {
      flags |= MS_NOATIME;
    } else if (current.f_flag & ST_RELATIME) {
      flags |= MS_RELATIME;
    } else {
      flags |= MS_STRICTATIME;
    }
  }
  return flags;
}

// Takes away a mount we made; lazily when busy, so it at least leaves the namespace. Nothing
// mounted there (EINVAL, ENOENT) counts as done.
Status undo_mount(const std::string& target) {
  if (::umount2(target.c_str(), UMOUNT_NOFOLLOW) == 0) return Status::ok();
  if (errno == EINVAL || errno == ENOENT) return Status::ok();
  if (::umount2(target.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) return Status::ok();
  int err = errno;
  return errno_status(err, fmt::format("unmount of \"{}\" failed", target));
}

// The path as mountinfo shows it: the parent resolved (it may contain symlinks), the last
// component not (stat-ing a dead mount there would fail).
std::string table_path(const std::string& target) {
  std::string_view path = target;
  while (path.size() > 1 && path.back() == '/')
    path.remove_suffix(1);
  size_t slash = path.rfind('/');
  std::string parent = slash == std::string_view::npos ? "."
                       : slash == 0                    ? "/"
                                                       : std::string(path.substr(0, slash));
  if (path == "/") return std::string(path);
  std::optional<std::string> resolved = real_directory_path(parent);
  if (!resolved) return std::string(path);
  std::string out = *resolved;
  if (out != "/") out += '/';
  out += path.substr(slash == std::string_view::npos ? 0 : slash + 1);
  return out;
}

}  // namespace

Expected<MountOptions> parse_mount_flags(const std::vector<std::string>& flags) {
  MountOptions options;
  for (const std::string& entry : flags) {
    size_t start = 0;
    while (start <= entry.size()) {  // an entry may hold several: "nosuid,nodev"
      size_t comma = std::min(entry.find(',', start), entry.size());
      ROSETCTL_RETURN_IF_ERROR(
          apply_flag(trim(std::string_view(entry).substr(start, comma - start)), &options));
      start = comma + 1;
    }
  }
  return options;
}

Status bind_mount(const std::string& source, const std::string& target,
                  const MountOptions& options) {
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    int err = errno;  // read before formatting, which may allocate
    return errno_status(err, fmt::format("bind mount of \"{}\" on \"{}\" failed", source, target));
  }
  if (!options.read_only && (options.flags & kPerMountFlags) == 0) return Status::ok();

  Status failure;
  auto flags = remount_flags(target, options);
  if (!flags) {
    failure = flags.status();
  } else if (::mount(source.c_str(), target.c_str(), nullptr, MS_REMOUNT | MS_BIND | *flags,
                     nullptr) != 0) {
    int err = errno;  // before formatting, which may allocate and touch errno
    std::string what = fmt::format("remount of the bind mount of \"{}\" on \"{}\" as {} failed",
                                   source, target, describe(options));
    failure = errno_status(err, what);
  } else {
    return Status::ok();
  }
  Status undone = undo_mount(target);
  if (!undone) {
    return {failure.code(), fmt::format("{}; undoing the bind mount also failed: {}",
                                        failure.message(), undone.message())};
  }
  return failure;
}

Status unmount(const std::string& target) {
  if (::umount2(target.c_str(), UMOUNT_NOFOLLOW) == 0) return Status::ok();
  int err = errno;
  std::string what = fmt::format("unmount of \"{}\" failed", target);
  switch (err) {
    case EINVAL:
      return error(Code::kFailedPrecondition, "{}: not a mount point", what);
    case EBUSY:
      return error(Code::kUnavailable, "{}: {} (something still uses it)", what,
                   std::strerror(err));
    default:
      return errno_status(err, what);
  }
}

Status unmount_all(const std::string& target) {
  std::string point = table_path(target);
  std::optional<int> unmounted;  // the mount the last round took away
  while (true) {
    auto top = find_mount(point);
    if (!top) return top.status();
    if (!top->has_value()) return Status::ok();
    // Each unmount must take the top one away; if not (mount propagation?), stop rather than
    // spin.
    if (unmounted == (*top)->mount_id) {
      return error(Code::kInternal,
                   "unmount of \"{}\" did not take effect: mount {} is still there", target,
                   *unmounted);
    }
    unmounted = (*top)->mount_id;
    ROSETCTL_RETURN_IF_ERROR(unmount(target));
  }
}

MountGuard::~MountGuard() {
  reset();
}

MountGuard::MountGuard(MountGuard&& other) noexcept
    : target_(std::move(other.target_)), active_(std::exchange(other.active_, false)) {}

MountGuard& MountGuard::operator=(MountGuard&& other) noexcept {
  if (this != &other) {
    reset();
    target_ = std::move(other.target_);
    active_ = std::exchange(other.active_, false);
  }
  return *this;
}

void MountGuard::reset() {
  if (active_) (void)undo_mount(target_);  // best effort: a destructor has no one to tell
  active_ = false;
}

PathHealth probe_path(const std::string& path, int* err_out) {
  struct stat st;
  int err = ::stat(path.c_str(), &st) == 0 ? 0 : errno;
  if (err_out != nullptr) *err_out = err;
  switch (err) {
    case 0:
      return PathHealth::kOk;
    case ENOENT:
      return PathHealth::kMissing;
    case ENOTCONN:
    case ESTALE:
    case EIO:
    case ECONNABORTED:  // FUSE answers pending requests with it when the connection is aborted
      return PathHealth::kDisconnected;
    default:
      return PathHealth::kOther;
  }
}

}  // namespace rosetctl
