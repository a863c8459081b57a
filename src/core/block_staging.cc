// Block stagings: tmpfs plus a device node.
#include "core/block_staging.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "core/mount_filesystem.h"
#include "core/mount_ops.h"
#include "core/mount_point.h"

namespace rosetctl {
namespace {

// Holds two device nodes; nothing else is ever written there.
constexpr const char* kBlockStagingData = "size=16k,nr_inodes=8,mode=0700";

}  // namespace

Status stage_block_device(const std::string& staging, dev_t numbers, const char* name) {
  ROSETCTL_RETURN_IF_ERROR(mount_tmpfs(staging, kBlockStagingData, MS_NOSUID | MS_NOEXEC));
  MountGuard mounted(staging);
  ROSETCTL_RETURN_IF_ERROR(make_device_node(staging, name, numbers));
  mounted.release();
  return Status::ok();
}

Status make_device_node(const std::string& staging, const char* name, dev_t numbers) {
  std::string path = staging + "/" + name;
  auto dir = PinnedPath::open(staging, "staging_target_path");
  if (!dir) return dir.status();
  if (::mknodat(dir->fd(), name, S_IFBLK | 0600, numbers) != 0) {
    return errno_status(errno, fmt::format("cannot create device node \"{}\"", path));
  }
  return Status::ok();
}

Expected<dev_t> device_numbers(const std::string& node) {
  struct stat st;
  if (::stat(node.c_str(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect device node \"{}\"", node));
  }
  if (!S_ISBLK(st.st_mode)) {
    return error(Code::kInternal, "\"{}\" is not a block device node", node);
  }
  return st.st_rdev;
}

}  // namespace rosetctl
