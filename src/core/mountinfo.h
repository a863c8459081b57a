// MountTable: the mounts this process sees, parsed from /proc/self/mountinfo (never from
// `mount` output), and the queries the node service asks of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

// One line of mountinfo (proc(5)). Paths are decoded: the kernel writes a space as \040.
struct MountEntry {
  int mount_id = 0;        // the id /proc/self/mountinfo shows (reused after an unmount)
  uint64_t unique_id = 0;  // never reused (statmount, Linux 6.8+); 0 when read from the table
  int parent_id = 0;
  unsigned major = 0;
  unsigned minor = 0;
  std::string root;           // directory of the filesystem shown at mount_point ("/" = all)
  std::string mount_point;    // relative to this process's root
  std::string mount_options;  // per-mount: "ro,nosuid,relatime"
  std::vector<std::string> optional_fields;  // "shared:1", "master:2", ...
  std::string fs_type;
  std::string source;         // "/dev/sda1", "tmpfs", "" when the mounter gave none
  std::string super_options;  // per-filesystem options

  // True when this mount (not necessarily its filesystem) is read-only.
  bool read_only() const;
};

// True when both mounts show the same directory of the same filesystem: how the node service
// checks that a publish target is a bind mount of a given staging mount.
bool same_source(const MountEntry& a, const MountEntry& b);

class MountTable {
 public:
  static Expected<MountTable> read(const std::string& path = "/proc/self/mountinfo");
  // Fails on the first malformed line, naming it: a half-understood table is worse than none.
  static Expected<MountTable> parse(std::string_view text);

  // In the kernel's order: a mount comes after the mount it sits on.
  const std::vector<MountEntry>& entries() const { return entries_; }

  // The topmost (last listed) mount whose mount point is `path`, or nullptr.
  const MountEntry* find_by_target(std::string_view path) const;
  // How many mounts are stacked at `path`.
  int count_at(std::string_view path) const;
  // Mounts at `dir` or below it, by whole path components: /a/b is under /a, /ab is not.
  // In table order, so unmount them in reverse.
  std::vector<const MountEntry*> under(std::string_view dir) const;

 private:
  std::vector<MountEntry> entries_;
};

}  // namespace rosetctl
