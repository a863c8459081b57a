// find_mount: statx + statmount(2) where the kernel has them, the mount table elsewhere.
#include "core/mount_lookup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/linux_mount_api.h"

namespace rosetctl {
namespace {

using linux_api::kStatmountSyscall;
using linux_api::kStatxMountIdUnique;
using linux_api::kStatxMountRoot;
constexpr uint64_t kWantedFields = 0x1 | 0x2 | 0x8 | 0x10 | 0x20;  // SB_BASIC, MNT_BASIC,
                                                                   // MNT_ROOT, MNT_POINT, FS_TYPE

// MOUNT_ATTR_* (linux/mount.h).
constexpr uint64_t kAttrReadOnly = 0x1;
constexpr uint64_t kAttrNoSuid = 0x2;
constexpr uint64_t kAttrNoDev = 0x4;
constexpr uint64_t kAttrNoExec = 0x8;
constexpr uint64_t kAttrAtimeMask = 0x70;
constexpr uint64_t kAttrNoAtime = 0x10;
constexpr uint64_t kAttrRelatime = 0x0;
constexpr uint64_t kAttrNoDirAtime = 0x80;
constexpr uint64_t kAttrNoSymFollow = 0x200000;

struct MountIdRequest {  // struct mnt_id_req, version 0
  uint32_t size;
  uint32_t spare;
  uint64_t mount_id;
  uint64_t fields;
};

// The fixed part of struct statmount that Linux 6.8 defined; strings follow the whole struct
// and are named by offsets into its str[] member.
struct StatmountHeader {
  uint32_t size;
  uint32_t mount_options_string;  // 6.11+; unused here
  uint64_t mask;
  uint32_t device_major;
  uint32_t device_minor;
  uint64_t magic;
  uint32_t superblock_flags;
  uint32_t fs_type;
  uint64_t mount_id;
  uint64_t parent_mount_id;
  uint32_t mount_id_old;  // the ids /proc/self/mountinfo shows
  uint32_t parent_mount_id_old;
  uint64_t attributes;
  uint64_t propagation;
  uint64_t peer_group;
  uint64_t master;
  uint64_t propagate_from;
  uint32_t root;
  uint32_t mount_point;
  uint64_t spare[50];  // later kernels' fields: the struct's size is fixed at 512 bytes
};
static_assert(sizeof(StatmountHeader) == 512);

// What /proc/self/mountinfo shows as per-mount options (the kernel's show_mnt_opts order).
std::string mount_options_of(uint64_t attributes) {
  std::string options = attributes & kAttrReadOnly ? "ro" : "rw";
  if (attributes & kAttrNoSuid) options += ",nosuid";
  if (attributes & kAttrNoDev) options += ",nodev";
  if (attributes & kAttrNoExec) options += ",noexec";
  if ((attributes & kAttrAtimeMask) == kAttrNoAtime) options += ",noatime";
  if (attributes & kAttrNoDirAtime) options += ",nodiratime";
  if ((attributes & kAttrAtimeMask) == kAttrRelatime) options += ",relatime";
  if (attributes & kAttrNoSymFollow) options += ",nosymfollow";
  return options;
}

// The same fields as the fast path, from the table.
Expected<std::optional<MountEntry>> find_in_table(const std::string& path) {
  auto table = MountTable::read();
  if (!table) return table.status();
  const MountEntry* found = table->find_by_target(path);
  if (found == nullptr) return std::optional<MountEntry>();
  MountEntry entry;
  entry.mount_id = found->mount_id;
  entry.parent_id = found->parent_id;
  entry.major = found->major;
  entry.minor = found->minor;
  entry.root = found->root;
  entry.mount_point = found->mount_point;
  entry.fs_type = found->fs_type;
  entry.mount_options = found->mount_options;
  return std::optional<MountEntry>(std::move(entry));
}

enum class Answer { kMounted, kNotMounted, kAskTheTable };

// Room for the header and two paths of PATH_MAX: a longer answer is EOVERFLOW, and the table.
struct alignas(8) StatmountBuffer {
  StatmountHeader header;
  char strings[2 * 4096 + 256];
};

// statmount(2) of one mount: false (errno set) when the kernel cannot answer.
bool statmount_of(uint64_t mount_id, StatmountBuffer* buffer) {
  MountIdRequest request{sizeof(MountIdRequest), 0, mount_id, kWantedFields};
  return ::syscall(kStatmountSyscall, &request, buffer, sizeof *buffer, 0) == 0;
}

// Fills `entry` from a statmount answer; false when it lacks what was asked for.
bool read_statmount(const StatmountBuffer& buffer, MountEntry* entry) {
  const StatmountHeader& header = buffer.header;
  if ((header.mask & kWantedFields) != kWantedFields || header.size < sizeof header ||
      header.size > sizeof buffer)
    return false;
  // Offsets are into the strings that follow the header.
  const char* strings = reinterpret_cast<const char*>(&buffer) + sizeof(StatmountHeader);
  size_t room = header.size - sizeof(StatmountHeader);
  auto string_at = [&](uint32_t offset) {
    return offset < room ? std::string(strings + offset, ::strnlen(strings + offset, room - offset))
                         : std::string();
  };
  entry->fs_type = string_at(header.fs_type);
  entry->mount_point = string_at(header.mount_point);
  entry->mount_id = static_cast<int>(header.mount_id_old);
  entry->unique_id = header.mount_id;
  entry->parent_id = static_cast<int>(header.parent_mount_id_old);
  entry->major = header.device_major;
  entry->minor = header.device_minor;
  entry->root = string_at(header.root);
  entry->mount_options = mount_options_of(header.attributes);
  return true;
}

Answer describe_mount(uint64_t mount_id, const std::string& path, MountEntry* entry) {
  StatmountBuffer buffer;
  if (!statmount_of(mount_id, &buffer) || !read_statmount(buffer, entry))
    return Answer::kAskTheTable;
  // mountinfo names a FUSE mount "fuse.<subtype>", which statmount(2) tells apart only on
  // newer kernels; and a mount point other than `path` is not what the table would find.
  if (entry->fs_type.starts_with("fuse") || entry->mount_point != path) return Answer::kAskTheTable;
  return Answer::kMounted;
}

Answer ask_the_kernel(const std::string& path, MountEntry* entry) {
  struct statx st = {};
  // DONT_SYNC: a FUSE or network mount answers from its cache instead of from its server.
  int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC;
  if (::statx(AT_FDCWD, path.c_str(), flags, kStatxMountIdUnique, &st) != 0) {
    return errno == ENOENT || errno == ENOTDIR ? Answer::kNotMounted : Answer::kAskTheTable;
  }
  if (!(st.stx_mask & kStatxMountIdUnique) || !(st.stx_attributes_mask & kStatxMountRoot))
    return Answer::kAskTheTable;  // older than Linux 6.8
  if (!(st.stx_attributes & kStatxMountRoot)) return Answer::kNotMounted;
  return describe_mount(st.stx_mnt_id, path, entry);
}

}  // namespace

Expected<std::optional<MountEntry>> find_mount_by_id(uint64_t unique_id) {
  StatmountBuffer buffer;
  if (!statmount_of(unique_id, &buffer)) {
    int err = errno;
    if (err == ENOENT) return std::optional<MountEntry>();
    return errno_status(err, fmt::format("statmount of mount {} failed", unique_id));
  }
  MountEntry entry;
  if (!read_statmount(buffer, &entry))
    return error(Code::kInternal, "statmount of mount {} gave an incomplete answer", unique_id);
  return std::optional<MountEntry>(std::move(entry));
}

Expected<std::optional<MountEntry>> find_mount(const std::string& path) {
  MountEntry entry;
  switch (ask_the_kernel(path, &entry)) {
    case Answer::kMounted:
      return std::optional<MountEntry>(std::move(entry));
    case Answer::kNotMounted:
      return std::optional<MountEntry>();
    case Answer::kAskTheTable:
      break;
  }
  return find_in_table(path);
}

}  // namespace rosetctl
