// Files of a shared roset-fuse process.
#include "providers/roset/fuse_record.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/call_scope.h"
#include "core/directory_listing.h"
#include "core/private_file.h"
#include "core/random_id.h"

namespace rosetctl {
namespace {

using nlohmann::json;

// Removes what write_private_file(path, ...) leaves when the process is killed between
// making its temporary and renaming it: "<path>.<8 hex>.tmp". The directory is private to
// rosetctl, so such a name is ours; it may hold the API key.
Status remove_temporaries_of(const std::string& path) {
  std::size_t slash = path.rfind('/');
  std::string dir = path.substr(0, slash), prefix = path.substr(slash + 1) + ".";
  auto names = list_directory(dir);
  if (!names) return Status::ok();  // no directory, nothing left in it
  Status status;
  for (std::string_view name : *names) {
    bool temporary = name.size() == prefix.size() + 8 + 4 &&
                     name.substr(0, prefix.size()) == prefix &&
                     name.substr(name.size() - 4) == ".tmp";
    if (!temporary) continue;
    std::string leftover = dir + "/" + std::string(name);
    if (::unlink(leftover.c_str()) != 0 && errno != ENOENT && status.is_ok()) {
      status = errno_status(errno, fmt::format("cannot remove \"{}\"", leftover));
    }
  }
  return status;
}

Status make_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create \"{}\"", path));
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return error(Code::kFailedPrecondition, "\"{}\" is not a directory", path);
  }
  if ((st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0700) != 0) {
    return errno_status(errno, fmt::format("cannot make \"{}\" private", path));
  }
  return Status::ok();
}

}  // namespace

Expected<KeyLock> KeyLock::acquire(const std::string& path, std::chrono::milliseconds patience,
                                   std::string_view busy) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open lock \"{}\"", path));
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return errno_status(errno, fmt::format("cannot lock \"{}\"", path));
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return Status(Code::kAborted, std::string(busy));
    // A wait never outlasts the call it is made for.
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return KeyLock(std::move(fd));
}

Expected<std::optional<FuseRecord>> load_fuse_record(const FuseFiles& files) {
  std::ifstream in(files.record());
  if (!in) return std::optional<FuseRecord>();
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str(), nullptr, false);
  if (!parsed.is_object()) {
    return error(Code::kInternal,
                 "\"{}\" is not a valid record; remove it after stopping its "
                 "roset-fuse process",
                 files.record());
  }
  FuseRecord record;
  record.process.pid = parsed.value("pid", 0);
  record.process.start_time = parsed.value("start_time", uint64_t{0});
  record.api_url = parsed.value("api_url", "");
  record.mount_id = parsed.value("mount_id", "");
  record.credentials_mode = parsed.value("credentials_mode", "file");
  for (const json& user : parsed.value("users", json::array())) {
    record.users.push_back({user.value("volume_id", ""), user.value("staging_path", ""),
                            user.value("folder", ""), user.value("read_only", false)});
  }
  return std::optional<FuseRecord>(std::move(record));
}

Status save_fuse_record(const FuseFiles& files, const FuseRecord& record) {
  json users = json::array();
  for (const FuseUser& user : record.users) {
    users.push_back({{"volume_id", user.volume_id},
                     {"staging_path", user.staging_path},
                     {"folder", user.folder},
                     {"read_only", user.read_only}});
  }
  json out = {{"pid", record.process.pid},
              {"start_time", record.process.start_time},
              {"api_url", record.api_url},
              {"mount_id", record.mount_id},
              {"credentials_mode", record.credentials_mode},
              {"users", users}};
  return write_private_file(files.record(), out.dump(2) + "\n");
}

Status write_credentials(const FuseFiles& files, const std::string& api_key) {
  ROSETCTL_RETURN_IF_ERROR(make_private_dir(files.secret_dir()));
  return write_private_file(files.credentials(), api_key + "\n");
}

Expected<std::string> read_credentials(const FuseFiles& files) {
  std::ifstream in(files.credentials());
  std::string key;
  if (!in || !std::getline(in, key) || key.empty()) {
    return error(Code::kUnauthenticated,
                 "the stored credentials of roset-fuse at \"{}\" are gone; stage the volume again "
                 "with its secrets",
                 files.mountpoint());
  }
  return key;
}

Status remove_fuse_files(const FuseFiles& files) {
  for (const std::string& path : {files.credentials(), files.record(), files.log()}) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
    }
  }
  // A kill -9 in the middle of an earlier save leaves a temporary beside the file (found by
  // the soak: every later last unstage then failed on the directory that was not empty).
  ROSETCTL_RETURN_IF_ERROR(remove_temporaries_of(files.credentials()));
  ROSETCTL_RETURN_IF_ERROR(remove_temporaries_of(files.record()));
  for (const std::string& path : {files.secret_dir(), files.mountpoint(), files.dir}) {
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
      return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
    }
  }
  return Status::ok();
}

}  // namespace rosetctl
