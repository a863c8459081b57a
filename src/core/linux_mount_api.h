// Linux mount interfaces newer than Debian 12's kernel headers (statx mount ids, statmount),
// named once for the files that use them.
#pragma once

#include <sys/syscall.h>

#include <cstdint>

namespace rosetctl::linux_api {

constexpr unsigned kStatxMountIdUnique = 0x4000;  // STATX_MNT_ID_UNIQUE (6.8)
constexpr uint64_t kStatxMountRoot = 0x2000;      // STATX_ATTR_MOUNT_ROOT (5.8)
#ifdef __NR_statmount
constexpr long kStatmountSyscall = __NR_statmount;
#else
constexpr long kStatmountSyscall = 457;  // the generic syscall table's number (x86_64, arm64)
#endif

}  // namespace rosetctl::linux_api
