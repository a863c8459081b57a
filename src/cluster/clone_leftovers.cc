// Intent files of clones across nodes (clone_leftovers.h): three `key=value` lines, written
// whole (a temporary file fsynced and renamed) so a crash leaves either no file or a whole one.
#include "cluster/clone_leftovers.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/commit_store/sha256.h"
#include "core/unique_fd.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr const char* kSuffix = ".clone";

Status write_whole(const std::string& path, const std::string& text) {
  std::string partial = path + ".partial";
  UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot create \"{}\"", partial));
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::fsync(fd.get()) != 0) {
    Status failed = errno_status(errno, fmt::format("cannot write \"{}\"", partial));
    ::unlink(partial.c_str());
    return failed;
  }
  if (::rename(partial.c_str(), path.c_str()) != 0) {
    Status failed = errno_status(errno, fmt::format("cannot rename \"{}\"", partial));
    ::unlink(partial.c_str());
    return failed;
  }
  return Status::ok();
}

}  // namespace

Expected<std::string> CloneIntents::record(const std::string& snapshot_id,
                                           const std::string& receiver,
                                           const std::string& volume_name) const {
  if (::mkdir(directory_.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create \"{}\"", directory_));
  }
  std::string file = fmt::format("{}/{}{}", directory_,
                                 sha256_hex(snapshot_id + "\n" + receiver).substr(0, 32), kSuffix);
  ROSETCTL_RETURN_IF_ERROR(write_whole(file, fmt::format("snapshot={}\nreceiver={}\nname={}\n",
                                                         snapshot_id, receiver, volume_name)));
  return file;
}

void CloneIntents::forget(const std::string& file) const {
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("cannot remove the clone's intent file \"{}\": {}", file, std::strerror(errno));
  }
}

std::vector<CloneLeftover> CloneIntents::list() const {
  std::vector<CloneLeftover> out;
  std::error_code failed;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, failed)) {
    std::string path = entry.path().string();
    if (!path.ends_with(kSuffix)) continue;
    std::ifstream in(path);
    CloneLeftover leftover{path, "", "", ""};
    std::string line;
    while (std::getline(in, line)) {
      std::size_t equals = line.find('=');
      if (equals == std::string::npos) continue;
      std::string key = line.substr(0, equals);
      std::string value = line.substr(equals + 1);
      if (key == "snapshot") leftover.snapshot_id = value;
      if (key == "receiver") leftover.receiver = value;
      if (key == "name") leftover.volume_name = value;
    }
    if (!validate_id(leftover.snapshot_id, "snapshot") ||
        !validate_node_id(leftover.receiver, "receiver") ||
        !validate_name(leftover.volume_name, "name")) {
      spdlog::warn("skipping the clone intent file \"{}\": it is not one rosetctl wrote",
                   escape_text(path));
      continue;
    }
    out.push_back(std::move(leftover));
  }
  return out;
}

}  // namespace rosetctl
