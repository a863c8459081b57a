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

#include "core/linux_mount_api.h"
#include "core/mount_lookup.h"
#include "core/mount_point.h"
#include "core/real_path.h"
#include "core/unique_fd.h"
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

// MountOptions as mount_setattr(2) attributes. Only set, never cleared (but the atime mode
// when one is asked for): a bind keeps its source's nosuid/nodev/noexec, which the kernel
// requires in a user namespace.
struct mount_attr attributes_of(const MountOptions& options) {
  struct mount_attr attr = {};
  if (options.read_only) attr.attr_set |= MOUNT_ATTR_RDONLY;
  if (options.flags & MS_NOSUID) attr.attr_set |= MOUNT_ATTR_NOSUID;
  if (options.flags & MS_NODEV) attr.attr_set |= MOUNT_ATTR_NODEV;
  if (options.flags & MS_NOEXEC) attr.attr_set |= MOUNT_ATTR_NOEXEC;
  if (options.flags & MS_NODIRATIME) attr.attr_set |= MOUNT_ATTR_NODIRATIME;
  if (options.flags & kAtimeModes) {
    attr.attr_clr |= MOUNT_ATTR__ATIME;
    if (options.flags & MS_NOATIME) {
      attr.attr_set |= MOUNT_ATTR_NOATIME;
    } else if (options.flags & MS_STRICTATIME) {
      attr.attr_set |= MOUNT_ATTR_STRICTATIME;
    } else {
      attr.attr_set |= MOUNT_ATTR_RELATIME;
    }
  }
  return attr;
}

// N when `path` is "/proc/self/fd/N" (a descriptor of this process), else -1.
int descriptor_named_by(std::string_view path) {
  constexpr std::string_view kPrefix = "/proc/self/fd/";
  if (!path.starts_with(kPrefix) || path.size() == kPrefix.size()) return -1;
  int fd = 0;
  for (char c : path.substr(kPrefix.size())) {
    if (c < '0' || c > '9' || fd > 1'000'000) return -1;
    fd = fd * 10 + (c - '0');
  }
  return fd;
}

// Takes away a mount we made; lazily when busy, so it at least leaves the namespace. Nothing
// mounted there (EINVAL, ENOENT) counts as done.
Status undo_mount(const std::string& target) {
  auto at = pin_parent(target, "mount point");
  if (!at) return at.status().code() == Code::kNotFound ? Status::ok() : at.status();
  if (unmount_pinned(*at, 0)) return Status::ok();
  if (errno == EINVAL || errno == ENOENT) return Status::ok();
  if (unmount_pinned(*at, MNT_DETACH)) return Status::ok();
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

// The unique mount id of `fd`'s mount (0 when the kernel gives none); `root` (when given) says
// whether `fd` is that mount's root.
MountId unique_mount_id(int fd, bool* root = nullptr) {
  struct statx st = {};
  int flags = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC;
  if (::statx(fd, "", flags, linux_api::kStatxMountIdUnique, &st) != 0 ||
      !(st.stx_mask & linux_api::kStatxMountIdUnique))
    return 0;
  if (root) {
    *root = (st.stx_attributes_mask & linux_api::kStatxMountRoot) &&
            (st.stx_attributes & linux_api::kStatxMountRoot);
  }
  return st.stx_mnt_id;
}

// What record_mount_at will find of the bind `tree_fd` of `source_fd` once it is attached
// (bind_mount's before_attach says why it is read before).
RecordedMount recorded_bind(int source_fd, int tree_fd) {
  RecordedMount out;
  out.id = unique_mount_id(tree_fd);
  if (out.id == 0) return out;
  out.mount_ns = current_mount_namespace();
  // The detached bind is in no namespace statmount looks in; the source's mount is, and a
  // bind of that mount's root shows the same filesystem and directory of it.
  bool source_is_root = false;
  MountId source_mount = unique_mount_id(source_fd, &source_is_root);
  if (source_mount == 0 || !source_is_root) return out;
  auto entry = find_mount_by_id(source_mount);
  if (entry && entry->has_value()) out.fingerprint = fingerprint_of(**entry);
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

Status bind_mount(const std::string& source, const std::string& target, const MountOptions& options,
                  const BeforeAttach& before_attach) {
  std::string what = fmt::format("bind mount of \"{}\"", source);
  // A caller that pinned the source itself names its descriptor (/proc/self/fd/N): use that
  // very descriptor. Any other source is pinned here, without following symlinks.
  std::optional<PinnedPath> pinned;
  int source_fd = descriptor_named_by(source);
  if (source_fd < 0) {
    auto from = PinnedPath::open(source, "bind source");
    if (!from) return from.status().with_context(what);
    pinned.emplace(std::move(*from));
    source_fd = pinned->fd();
  }
  struct stat st;
  if (::fstat(source_fd, &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect \"{}\"", source));
  }
  // A detached copy of the source's mount, given its flags before anyone can see it: never
  // writable for a moment when it was asked to be read-only.
  UniqueFd tree(::open_tree(source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
  if (!tree.valid()) return errno_status(errno, fmt::format("{} failed", what));
  struct mount_attr attr = attributes_of(options);
  if ((attr.attr_set | attr.attr_clr) != 0 &&
      ::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
    int err = errno;  // read before formatting, which may allocate
    return errno_status(err, fmt::format("{} as {} failed", what, describe(options)));
  }
  if (before_attach) ROSETCTL_RETURN_IF_ERROR(before_attach(recorded_bind(source_fd, tree.get())));
  auto point = PinnedPath::open(target, "mount point");
  if (!point) return point.status().with_context(what);
  return attach_mount(tree.get(), *point, !S_ISDIR(st.st_mode), what);
}

Status unmount(const std::string& target) {
  std::string what = fmt::format("unmount of \"{}\" failed", target);
  auto at = pin_parent(target, "mount point");
  if (!at) return at.status().with_context(what);
  if (unmount_pinned(*at, 0)) return Status::ok();
  int err = errno;
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

Status unmount_topmost(const std::string& target) {
  Status status = unmount(target);
  if (status.code() == Code::kFailedPrecondition || status.code() == Code::kNotFound)
    return Status::ok();
  return status;
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

MountGuard::MountGuard(std::string target) : target_(std::move(target)), active_(true) {
  auto id = mount_id_at(target_);
  if (id && id->has_value()) id_ = **id;
}

MountGuard::MountGuard(MountGuard&& other) noexcept
    : target_(std::move(other.target_)),
      id_(other.id_),
      active_(std::exchange(other.active_, false)) {}

MountGuard& MountGuard::operator=(MountGuard&& other) noexcept {
  if (this != &other) {
    reset();
    target_ = std::move(other.target_);
    id_ = other.id_;
    active_ = std::exchange(other.active_, false);
  }
  return *this;
}

void MountGuard::reset() {
  if (!active_) return;
  active_ = false;
  // Only the mount this guard was given: another one stacked there since is not ours.
  if (id_ != 0) {
    auto top = mount_id_at(target_);
    if (top && (!top->has_value() || **top != id_)) return;
  }
  (void)undo_mount(target_);  // best effort: a destructor has no one to tell
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
