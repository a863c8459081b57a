// openat2 through syscall(2): Debian 12's glibc has no wrapper for it.
#include "core/commit_store/open_beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace rosetctl {

int open_beneath(int root_fd, const std::string& path, int flags, mode_t mode) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  long fd = -1;
  // EAGAIN: a concurrent rename raced the lookup; the kernel asks us to try again.
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd = ::syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how));
    if (fd >= 0 || errno != EAGAIN) break;
  }
  return static_cast<int>(fd);
}

}  // namespace rosetctl
