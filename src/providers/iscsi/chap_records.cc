// CHAP credentials kept in private files; see chap_records.h.
#include "providers/iscsi/chap_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/directory_listing.h"
#include "core/private_file.h"
#include "core/random_id.h"
#include "core/remove_tree.h"

namespace rosetctl::iscsi {
namespace {

// A node's file is "node.<node id>" (node ids are names: [A-Za-z0-9._-]), the target's "target":
// no node id can make either name the other.
constexpr std::string_view kNodePrefix = "node.";
constexpr std::string_view kTargetFile = "target";
constexpr size_t kMaxRecordBytes = 1024;

Status make_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create \"{}\"", path));
  }
  return Status::ok();
}

}  // namespace

ChapCredentials random_chap(std::string_view user) {
  // 16 random bytes as hex: 128 bits, printable, no ',' (tgtd splits its requests on commas).
  return {user.empty() ? "n" + random_hex(6) : std::string(user), random_hex(16)};
}

std::string ChapRecords::volume_dir(std::string_view volume_id) const {
  return fmt::format("{}/{}", dir_, volume_id);
}

Expected<std::optional<ChapCredentials>> ChapRecords::read(const std::string& path) const {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return std::optional<ChapCredentials>();
  }
  auto text = read_private_file(path, "CHAP record", kMaxRecordBytes);
  if (!text) return text.status();
  size_t newline = text->find('\n');
  ChapCredentials chap;
  if (newline != std::string::npos) {
    chap.user = text->substr(0, newline);
    chap.password = text->substr(newline + 1);
    if (!chap.password.empty() && chap.password.back() == '\n') chap.password.pop_back();
  }
  if (newline == std::string::npos || !validate_chap(chap)) {
    // The message names the file only: its content is a secret.
    return error(Code::kDataLoss,
                 "CHAP record \"{}\" is damaged (not a user and a password line); remove it and "
                 "publish the volume to the node again",
                 path);
  }
  return std::optional<ChapCredentials>(std::move(chap));
}

Status ChapRecords::write(std::string_view volume_id, const std::string& path,
                          const ChapCredentials& chap) const {
  ROSETCTL_RETURN_IF_ERROR(make_private_dir(dir_.substr(0, dir_.rfind('/'))));
  ROSETCTL_RETURN_IF_ERROR(make_private_dir(dir_));
  ROSETCTL_RETURN_IF_ERROR(make_private_dir(volume_dir(volume_id)));
  return write_private_file(path, fmt::format("{}\n{}\n", chap.user, chap.password));
}

Expected<std::optional<ChapCredentials>> ChapRecords::of_node(std::string_view volume_id,
                                                              std::string_view node_id) const {
  return read(fmt::format("{}/{}{}", volume_dir(volume_id), kNodePrefix, node_id));
}

Status ChapRecords::put_node(std::string_view volume_id, std::string_view node_id,
                             const ChapCredentials& chap) const {
  return write(volume_id, fmt::format("{}/{}{}", volume_dir(volume_id), kNodePrefix, node_id),
               chap);
}

Status ChapRecords::remove_node(std::string_view volume_id, std::string_view node_id) const {
  std::string path = fmt::format("{}/{}{}", volume_dir(volume_id), kNodePrefix, node_id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
  }
  return Status::ok();
}

Expected<std::vector<std::pair<std::string, ChapCredentials>>> ChapRecords::of_volume(
    std::string_view volume_id) const {
  std::vector<std::pair<std::string, ChapCredentials>> found;
  std::string dir = volume_dir(volume_id);
  auto names = list_directory(dir);
  if (!names) {
    if (names.status().code() == Code::kNotFound) return found;
    return names.status();
  }
  std::vector<std::string> nodes;
  for (std::string_view name : *names) {
    if (name.starts_with(kNodePrefix) && !name.ends_with(".tmp")) {
      nodes.emplace_back(name.substr(kNodePrefix.size()));
    }
  }
  std::sort(nodes.begin(), nodes.end());  // one order: the first bound is the same every time
  for (std::string& node : nodes) {
    auto chap = of_node(volume_id, node);
    if (!chap) return chap.status();
    if (chap->has_value()) found.emplace_back(std::move(node), std::move(**chap));
  }
  return found;
}

Expected<ChapCredentials> ChapRecords::target(std::string_view volume_id) const {
  std::string path = fmt::format("{}/{}", volume_dir(volume_id), kTargetFile);
  auto kept = read(path);
  if (!kept) return kept.status();
  if (kept->has_value()) return std::move(**kept);
  ChapCredentials made = random_chap(kTargetChapUser);
  ROSETCTL_RETURN_IF_ERROR(write(volume_id, path, made));
  return made;
}

Status ChapRecords::remove_volume(std::string_view volume_id) const {
  return remove_tree(volume_dir(volume_id));
}

}  // namespace rosetctl::iscsi
