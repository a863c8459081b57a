// What this node remembers about each shared roset-fuse process, on disk under
// <state>/roset/fuse/<key>/ so a restarted `serve` (or another CLI run) finds and adopts it:
// record.json (pid, start time, endpoint without the key, the stagings using it), the
// credentials file in a private secret/ directory, the mountpoint mnt/ and the client's log.
// Changes to one key's files happen under that key's lock file (<state>/roset/locks/<key>).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"
#include "providers/roset/fuse_process.h"

namespace rosetctl {

// One staging served from the process: `folder` (the volume's root path in the Roset mount)
// bind-mounted at `staging_path`.
struct FuseUser {
  std::string volume_id;
  std::string staging_path;
  std::string folder;
  bool read_only = false;

  bool operator==(const FuseUser&) const = default;
};

struct FuseRecord {
  ProcessIdentity process;  // pid 0: not running
  std::string api_url;
  std::string mount_id;
  std::string credentials_mode;  // "file" or "env"
  std::vector<FuseUser> users;
};

// The files of one key.
struct FuseFiles {
  std::string dir;  // <root>/<key>

  std::string record() const { return dir + "/record.json"; }
  std::string mountpoint() const { return dir + "/mnt"; }
  std::string log() const { return dir + "/fuse.log"; }
  std::string secret_dir() const { return dir + "/secret"; }
  std::string credentials() const { return secret_dir() + "/credentials"; }
};

// An exclusive flock(2) on a lock file, released with the object.
class KeyLock {
 public:
  // Waits up to `patience`, then ABORTED saying `busy`.
  static Expected<KeyLock> acquire(const std::string& path, std::chrono::milliseconds patience,
                                   std::string_view busy);

 private:
  explicit KeyLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// nullopt when there is no record.
Expected<std::optional<FuseRecord>> load_fuse_record(const FuseFiles& files);
// Atomically (write a temporary file, fsync, rename).
Status save_fuse_record(const FuseFiles& files, const FuseRecord& record);
// Writes the key to the credentials file: secret/ 0700, the file 0600, replaced atomically.
Status write_credentials(const FuseFiles& files, const std::string& api_key);
Expected<std::string> read_credentials(const FuseFiles& files);
// Removes the credentials, the record, temporaries a killed save of either left, and the
// directory (the mountpoint must be unmounted).
Status remove_fuse_files(const FuseFiles& files);

}  // namespace rosetctl
