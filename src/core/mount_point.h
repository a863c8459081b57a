// Where mounts go and come off, resolved once and without following a symlink anywhere on the
// path, and the identity of the mounts made there.
//
// A path that is checked and then handed to mount(2) is looked up twice, and a rename or a
// symlink swapped in between (renameat2 RENAME_EXCHANGE) moves the mount somewhere else, over
// /etc say. So every mount rosetctl makes is built detached (open_tree, fsmount), checked
// against the directory it goes on through one descriptor of it, attached to exactly that
// descriptor (move_mount) and then looked up again by its path: a path that no longer shows the
// new mount means the path changed meanwhile, and the mount is taken away again. Every unmount
// goes through a descriptor of the parent directory opened the same way.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/unique_fd.h"

namespace rosetctl {

// The kernel's unique mount id (statx STATX_MNT_ID_UNIQUE, Linux 6.8+): never given to another
// mount until the machine restarts. 0 means unknown (an older kernel, or a record made before
// rosetctl recorded them).
using MountId = uint64_t;

// A directory or file opened with O_PATH through openat2(RESOLVE_NO_SYMLINKS): checks made
// through it and a mount attached to it concern the same object, whatever happens to its path.
class PinnedPath {
 public:
  // `path` must be absolute and free of symlinks (canonical_mount_path's form). NOT_FOUND when
  // it does not exist; INVALID_ARGUMENT naming `field` when a component is a symlink (or has
  // just been swapped for one).
  static Expected<PinnedPath> open(const std::string& path, std::string_view field);
  // Opens `name` (one component, no slash) inside `parent` the same way.
  static Expected<PinnedPath> open_in(const PinnedPath& parent, const std::string& name,
                                      std::string_view field);

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  // "/proc/self/fd/N": names this very object to calls that take a path.
  std::string proc_path() const;

 private:
  PinnedPath(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  UniqueFd fd_;
  std::string path_;
};

// The topmost mount whose root `path` is: its unique id (0 on kernels without unique ids), or
// nullopt when `path` is not a mount point. A path whose mount does not answer (a dead FUSE
// client) is UNAVAILABLE.
Expected<std::optional<MountId>> mount_id_at(const std::string& path);

// The unique id of the mount now at `path`, to record after a stage or publish made it; 0
// when there is none or the kernel gives none (ownership then falls back to "whatever is
// mounted", core/mount_ownership.h).
MountId mount_made_at(const std::string& path);

// The parent directory of `path` (absolute, canonical), pinned, and the last component.
struct PinnedParent {
  PinnedPath parent;
  std::string name;
};
Expected<PinnedParent> pin_parent(const std::string& path, std::string_view field);

// What a mount point must be for rosetctl to mount on it: an empty directory (or, when
// `file` is true, an empty regular file) that is not a mount point itself. Checked through the
// descriptor, so it holds for the object a mount then goes on: INVALID_ARGUMENT for the wrong
// kind of file, FAILED_PRECONDITION for contents a mount would hide, ALREADY_EXISTS for a
// mount already there.
Status check_mount_point(const PinnedPath& point, bool file, std::string_view field);

// Attaches the detached mount `mount_fd` (from open_tree or fsmount) onto `point`, after
// check_mount_point, and verifies that point.path() now shows it; otherwise takes it away
// again (FAILED_PRECONDITION: the path changed while it was being mounted). `what` names the
// mount in messages ("bind mount of \"/a\"").
Status attach_mount(int mount_fd, const PinnedPath& point, bool file, std::string_view what);

// umount2 of the topmost mount at `path` through its pinned parent, never following a symlink.
// `flags` may add MNT_DETACH. errno is left as umount2 set it; returns false on failure.
bool unmount_pinned(const PinnedParent& at, int flags);

}  // namespace rosetctl
