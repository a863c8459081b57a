// Naming the full filesystem in a RESOURCE_EXHAUSTED (core/full_filesystem.h).
#include "core/full_filesystem.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/mount_lookup.h"
#include "core/size.h"

namespace rosetctl {
namespace {

bool says_disk_full(const std::string& message) {
  // The texts errno_status() and the SQLite layer give a full disk or quota.
  const std::string texts[] = {std::strerror(ENOSPC), std::strerror(EDQUOT),
                               "database or disk is full"};
  for (const std::string& text : texts) {
    if (message.find(text) != std::string::npos) return true;
  }
  return false;
}

// The mount `dir` is on: the nearest directory at or above it that is a mount point.
std::optional<MountEntry> mount_holding(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path path = std::filesystem::weakly_canonical(dir, ec);
  if (ec) return std::nullopt;
  for (;;) {
    auto found = find_mount(path.string());
    if (found && *found) return **found;
    if (path == path.root_path() || path.empty()) return std::nullopt;
    path = path.parent_path();
  }
}

constexpr std::string_view kNamed = "(state directory ";

std::mutex& state_directory_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::string& state_directory() {
  static std::string dir;
  return dir;
}

}  // namespace

void set_process_state_directory(const std::string& dir) {
  std::lock_guard lock(state_directory_mutex());
  state_directory() = dir;
}

std::string process_state_directory() {
  std::lock_guard lock(state_directory_mutex());
  return state_directory();
}

Status name_full_filesystem(Status status, const std::string& dir) {
  if (status.code() != Code::kResourceExhausted || !says_disk_full(status.message()) ||
      status.message().find(kNamed) != std::string::npos) {
    return status;
  }
  struct statvfs fs {};
  if (dir.empty() || ::statvfs(dir.c_str(), &fs) != 0) return status;
  const auto free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  const auto total_bytes = static_cast<int64_t>(fs.f_blocks) * static_cast<int64_t>(fs.f_frsize);
  std::optional<MountEntry> mount = mount_holding(dir);
  const std::string which =
      mount ? fmt::format("the {} filesystem mounted at {}", mount->fs_type, mount->mount_point)
            : fmt::format("the filesystem holding {}", dir);
  return {status.code(), fmt::format("{}; {} {}{}) has {} free of {}: free space there and retry",
                                     status.message(), which, kNamed, dir, format_size(free_bytes),
                                     format_size(total_bytes))};
}

}  // namespace rosetctl
