// Filesystem type from fstatfs; for ext4, the journal from sysfs.
#include "core/fsync_scope.h"

#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace rosetctl {
namespace {

// ext4 names its sysfs directory after the block device: /sys/fs/ext4/<name>/journal_task holds
// the journal thread's pid, or "<none>" when mounted without a journal.
bool ext4_has_journal(dev_t device) {
  std::string link = fmt::format("/sys/dev/block/{}:{}", major(device), minor(device));
  char target[4096];
  ssize_t length = ::readlink(link.c_str(), target, sizeof(target) - 1);
  if (length <= 0) return false;
  std::string path(target, static_cast<std::size_t>(length));
  std::string name = path.substr(path.rfind('/') + 1);
  std::ifstream task(fmt::format("/sys/fs/ext4/{}/journal_task", name));
  std::string value;
  return task >> value && value != "<none>";
}

}  // namespace

bool fsync_commits_earlier_metadata(int fd) {
  struct statfs fs;
  struct stat st;
  if (::fstatfs(fd, &fs) != 0 || ::fstat(fd, &st) != 0) return false;
  if (fs.f_type == XFS_SUPER_MAGIC) return true;
  if (fs.f_type == EXT4_SUPER_MAGIC) return ext4_has_journal(st.st_dev);
  return false;
}

}  // namespace rosetctl
