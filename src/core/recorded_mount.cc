// Recording a mount: its unique id, the namespace it is in and its fingerprint (statmount).
#include "core/recorded_mount.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <charconv>

#include "core/linux_mount_api.h"
#include "core/mount_lookup.h"

namespace rosetctl {
namespace {

std::string_view without_subtype(std::string_view fs_type) {
  return fs_type.substr(0, fs_type.find('.'));
}

bool parse_unsigned(std::string_view text, unsigned* out) {
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return err == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

bool MountFingerprint::matches(const MountEntry& entry) const {
  return !empty() && entry.major == major && entry.minor == minor && entry.root == root &&
         without_subtype(entry.fs_type) == fs_type;
}

std::string MountFingerprint::to_text() const {
  if (empty()) return "";
  return fmt::format("{}:{} {} {}", major, minor, fs_type, root);
}

MountFingerprint MountFingerprint::from_text(std::string_view text) {
  MountFingerprint out;
  size_t first = text.find(' ');
  size_t second = first == std::string_view::npos ? first : text.find(' ', first + 1);
  if (second == std::string_view::npos) return {};
  std::string_view device = text.substr(0, first);
  size_t colon = device.find(':');
  if (colon == std::string_view::npos || !parse_unsigned(device.substr(0, colon), &out.major) ||
      !parse_unsigned(device.substr(colon + 1), &out.minor))
    return {};
  out.fs_type = std::string(text.substr(first + 1, second - first - 1));
  out.root = std::string(text.substr(second + 1));
  if (out.fs_type.empty() || out.root.empty()) return {};
  return out;
}

MountFingerprint fingerprint_of(const MountEntry& entry) {
  return MountFingerprint{entry.major, entry.minor, std::string(without_subtype(entry.fs_type)),
                          entry.root};
}

MountId current_mount_namespace() {
  struct statx st = {};
  int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC;
  if (::statx(AT_FDCWD, "/", flags, linux_api::kStatxMountIdUnique, &st) != 0) return 0;
  return (st.stx_mask & linux_api::kStatxMountIdUnique) ? st.stx_mnt_id : 0;
}

RecordedMount record_mount_at(const std::string& path) {
  RecordedMount out;
  out.id = mount_made_at(path);
  if (out.id == 0) return out;
  out.mount_ns = current_mount_namespace();
  auto entry = find_mount_by_id(out.id);
  if (entry && entry->has_value()) out.fingerprint = fingerprint_of(**entry);
  return out;
}

}  // namespace rosetctl
