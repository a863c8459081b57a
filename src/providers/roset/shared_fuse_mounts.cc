// Shared, reference-counted roset-fuse processes and the stagings bound inside them.
#include "providers/roset/shared_fuse_mounts.h"

#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/commit_store/sha256.h"
#include "core/directory_listing.h"
#include "core/mount_ops.h"
#include "core/mount_point.h"
#include "core/mountinfo.h"
#include "core/run_program.h"
#include "core/validate.h"

extern char** environ;

namespace rosetctl {
namespace {

constexpr auto kLockPatience = std::chrono::seconds(150);

Status make_dir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create \"{}\"", path));
  }
  return Status::ok();
}

// Unmounts everything at `path`, lazily when a plain unmount cannot (busy, or a dead FUSE
// mount that will not answer). Only for the FUSE client's own mountpoint, which is ours alone.
void detach_all(const std::string& path) {
  if (unmount_all(path)) return;
  for (int i = 0; i < 16 && ::umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0; ++i) {
  }
}

// Unmounts the topmost mount at a staging path (the daemon has checked it is the staging's),
// lazily when a plain unmount cannot.
void detach_staging(const std::string& path) {
  if (unmount_topmost(path)) return;
  auto at = pin_parent(path, "staging_target_path");
  if (at) (void)unmount_pinned(*at, MNT_DETACH);
}

// The parent's environment without any Roset credential variables: the child gets exactly
// the one channel for the key that the settings choose.
std::vector<std::string> child_environment() {
  std::vector<std::string> out;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view item = *entry;
    if (item.starts_with("ROSET_API_KEY") || item.starts_with("ROSET_CREDENTIALS_FILE=")) continue;
    out.emplace_back(item);
  }
  return out;
}

std::string folder_in(const FuseFiles& files, const std::string& folder) {
  return folder == "/" ? files.mountpoint() : files.mountpoint() + folder;
}

}  // namespace

Expected<std::string> SharedFuseMounts::fuse_binary() const {
  std::string binary = settings_.fuse_binary.empty() ? "roset-fuse" : settings_.fuse_binary;
  if (binary.find('/') == std::string::npos) {
    auto found = find_program(binary, "roset-fuse (Roset's FUSE client)");
    if (!found) {
      return error(Code::kFailedPrecondition,
                   "the Roset FUSE client \"{}\" is not on this host's PATH (the host that "
                   "connects a roset volume mounts it with roset-fuse): install roset-fuse here "
                   "or name it with roset-fuse (ROSET_FUSE_BINARY) in this host's configuration",
                   binary);
    }
    return found;
  }
  if (::access(binary.c_str(), X_OK) != 0) {
    return errno_status(
        errno, fmt::format("the Roset FUSE client \"{}\" (--roset-fuse) cannot be run", binary));
  }
  return binary;
}

std::string SharedFuseMounts::key_of(const RosetEndpoint& endpoint) const {
  // The key's hash tells processes of different credentials apart without storing the key.
  std::string identity =
      fmt::format("{}\n{}\n{}", endpoint.api_url, endpoint.mount_id, endpoint.api_key);
  return sha256_hex(identity).substr(0, 24);
}

FuseFiles SharedFuseMounts::files_of(std::string_view key) const {
  return FuseFiles{fmt::format("{}/fuse/{}", settings_.root, key)};
}

std::string SharedFuseMounts::lock_path(std::string_view key) const {
  return fmt::format("{}/locks/{}", settings_.root, key);
}

std::vector<std::string> SharedFuseMounts::all_keys() const {
  auto keys = list_directory(settings_.root + "/fuse");
  if (!keys) return {};
  std::sort(keys->begin(), keys->end());
  return std::move(*keys);
}

int SharedFuseMounts::running_clients() const {
  int running = 0;
  for (const std::string& key : all_keys()) {
    auto record = load_fuse_record(files_of(key));
    if (record && record->has_value() && is_running((*record)->process)) ++running;
  }
  return running;
}

std::vector<std::string> SharedFuseMounts::keys_serving(std::string_view volume_id,
                                                        const std::string& staging_path) const {
  std::vector<std::string> out;
  for (const std::string& key : all_keys()) {
    auto record = load_fuse_record(files_of(key));
    if (!record || !record->has_value()) continue;
    for (const FuseUser& user : (*record)->users) {
      if (user.volume_id == volume_id && user.staging_path == staging_path) {
        out.push_back(key);
        break;
      }
    }
  }
  return out;
}

Status SharedFuseMounts::start_process(const FuseFiles& files, FuseRecord& record,
                                       const RosetEndpoint& endpoint) {
  auto binary = fuse_binary();
  if (!binary) return binary.status();
  ROSETCTL_RETURN_IF_ERROR(check_access_(endpoint));
  ROSETCTL_RETURN_IF_ERROR(write_credentials(files, endpoint.api_key));
  ROSETCTL_RETURN_IF_ERROR(make_dir(files.mountpoint(), 0755));

  // Only flags roset-fuse really has (roset-api.md §5); the key is never an argument.
  std::vector<std::string> argv = {*binary, "--foreground", "--allow-other", "--api-url",
                                   endpoint.api_url};
  if (!endpoint.mount_id.empty()) {
    argv.insert(argv.end(), {"--mount-id", endpoint.mount_id});
  }
  argv.push_back(files.mountpoint());
  std::vector<std::string> environment = child_environment();
  if (settings_.credentials == FuseCredentials::kEnv) {
    environment.push_back("ROSET_API_KEY=" + endpoint.api_key);
  } else {
    environment.push_back("ROSET_CREDENTIALS_FILE=" + files.credentials());
  }

  auto process = spawn_detached(argv, environment, files.log());
  if (!process) return process.status();
  record.process = *process;
  record.api_url = endpoint.api_url;
  record.mount_id = endpoint.mount_id;
  record.credentials_mode = settings_.credentials == FuseCredentials::kEnv ? "env" : "file";
  // Recorded before waiting: a crash now leaves a process a later reconcile knows about.
  ROSETCTL_RETURN_IF_ERROR(save_fuse_record(files, record));
  Status ready = wait_for_fuse_mount(*process, files.mountpoint(), files.log(),
                                     settings_.ready_timeout, endpoint.api_key);
  if (!ready) {
    (void)stop_fuse_process(*process, files.mountpoint(), settings_.stop_grace);
    record.process = {};
    (void)save_fuse_record(files, record);
    return ready;
  }
  spdlog::info("roset: started roset-fuse pid {} for {} mount {} at \"{}\"", process->pid,
               endpoint.api_url, display_quoted(endpoint.mount_id), files.mountpoint());
  return Status::ok();
}

Status SharedFuseMounts::ensure_running(const FuseFiles& files, FuseRecord& record,
                                        const RosetEndpoint& endpoint, bool* restarted) {
  *restarted = false;
  bool alive = is_running(record.process);
  if (alive && fuse_mounted_at(files.mountpoint()) &&
      probe_path(files.mountpoint()) == PathHealth::kOk) {
    return Status::ok();
  }
  if (record.process.pid != 0) {
    spdlog::warn("roset: roset-fuse pid {} at \"{}\" is {}; restarting it", record.process.pid,
                 files.mountpoint(), alive ? "not serving its mount" : "gone");
    (void)stop_fuse_process(record.process, files.mountpoint(), settings_.stop_grace);
  }
  if (fuse_mounted_at(files.mountpoint())) detach_all(files.mountpoint());
  *restarted = true;
  return start_process(files, record, endpoint);
}

Status SharedFuseMounts::bind_user(const FuseFiles& files, const FuseUser& user) const {
  std::string source = folder_in(files, user.folder);
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return error(Code::kNotFound,
                   "folder \"{}\" of volume \"{}\" does not exist in the Roset mount (deleted "
                   "there?)",
                   user.folder, user.volume_id);
    }
    return errno_status(errno,
                        fmt::format("cannot reach folder \"{}\" through roset-fuse", user.folder));
  }
  if (!S_ISDIR(st.st_mode)) {
    return error(Code::kFailedPrecondition, "\"{}\" in the Roset mount is not a folder",
                 user.folder);
  }
  MountOptions options;
  options.read_only = user.read_only;
  return bind_mount(source, user.staging_path, options);
}

Status SharedFuseMounts::rebind_users(const FuseFiles& files, const FuseRecord& record) const {
  Status first_failure;
  for (const FuseUser& user : record.users) {
    detach_staging(user.staging_path);
    if (Status bound = bind_user(files, user); !bound) {
      spdlog::warn("roset: cannot bind volume \"{}\" at \"{}\" again: {}", user.volume_id,
                   user.staging_path, escape_text(bound.message()));
      if (first_failure.is_ok()) first_failure = bound;
      continue;
    }
    rebound_(user);
  }
  return first_failure;
}

Status SharedFuseMounts::stop_and_remove(const FuseFiles& files, const FuseRecord& record) {
  Status stopped = stop_fuse_process(record.process, files.mountpoint(), settings_.stop_grace);
  if (!stopped) return stopped;
  spdlog::info("roset: stopped roset-fuse pid {} at \"{}\" (no volume uses it)", record.process.pid,
               files.mountpoint());
  return remove_fuse_files(files);
}

Status SharedFuseMounts::stage(const RosetEndpoint& endpoint, const FuseUser& user) {
  ROSETCTL_RETURN_IF_ERROR(make_dir(settings_.root, 0700));
  ROSETCTL_RETURN_IF_ERROR(make_dir(settings_.root + "/fuse", 0700));
  ROSETCTL_RETURN_IF_ERROR(make_dir(settings_.root + "/locks", 0700));
  std::string key = key_of(endpoint);
  FuseFiles files = files_of(key);
  auto lock = KeyLock::acquire(lock_path(key), kLockPatience,
                               "another call is starting or stopping this roset-fuse process");
  if (!lock) return lock.status();
  ROSETCTL_RETURN_IF_ERROR(make_dir(files.dir, 0700));
  auto loaded = load_fuse_record(files);
  if (!loaded) return loaded.status();
  FuseRecord record = loaded->value_or(FuseRecord{});

  bool restarted = false;
  Status running = ensure_running(files, record, endpoint, &restarted);
  if (!running) {
    if (record.users.empty()) (void)remove_fuse_files(files);
    return running;
  }
  if (restarted && !record.users.empty()) (void)rebind_users(files, record);

  std::erase_if(record.users, [&](const FuseUser& other) {
    return other.volume_id == user.volume_id && other.staging_path == user.staging_path;
  });
  record.users.push_back(user);
  ROSETCTL_RETURN_IF_ERROR(save_fuse_record(files, record));  // the intent, before the mount
  Status bound = bind_user(files, user);
  if (!bound) {
    record.users.pop_back();
    if (record.users.empty()) {
      (void)stop_and_remove(files, record);
    } else {
      (void)save_fuse_record(files, record);
    }
    return bound;
  }
  return Status::ok();
}

Status SharedFuseMounts::unstage(std::string_view volume_id, const std::string& staging_path) {
  bool detached = false;
  for (const std::string& key : keys_serving(volume_id, staging_path)) {
    FuseFiles files = files_of(key);
    auto lock = KeyLock::acquire(lock_path(key), kLockPatience,
                                 "another call is starting or stopping this roset-fuse process");
    if (!lock) return lock.status();
    auto loaded = load_fuse_record(files);
    if (!loaded) return loaded.status();
    if (!loaded->has_value()) continue;
    FuseRecord record = std::move(**loaded);
    if (!detached) detach_staging(staging_path);
    detached = true;
    std::erase_if(record.users, [&](const FuseUser& user) {
      return user.volume_id == volume_id && user.staging_path == staging_path;
    });
    if (record.users.empty()) {
      ROSETCTL_RETURN_IF_ERROR(stop_and_remove(files, record));
    } else {
      ROSETCTL_RETURN_IF_ERROR(save_fuse_record(files, record));
    }
  }
  // No record served it (a crash between the mount and the record): the mount may still be
  // there, and it is the staging's (the daemon checked).
  if (!detached) detach_staging(staging_path);
  return Status::ok();
}

Status SharedFuseMounts::revive(std::string_view volume_id, const std::string& staging_path) {
  auto keys = keys_serving(volume_id, staging_path);
  if (keys.empty()) {
    return error(Code::kNotFound,
                 "no roset-fuse process of this node serves volume \"{}\" at "
                 "\"{}\"",
                 volume_id, staging_path);
  }
  const std::string& key = keys.front();
  FuseFiles files = files_of(key);
  auto lock = KeyLock::acquire(lock_path(key), kLockPatience,
                               "another call is starting or stopping this roset-fuse process");
  if (!lock) return lock.status();
  auto loaded = load_fuse_record(files);
  if (!loaded) return loaded.status();
  if (!loaded->has_value()) return error(Code::kNotFound, "the roset-fuse record is gone");
  FuseRecord record = std::move(**loaded);
  auto api_key = read_credentials(files);
  if (!api_key) return api_key.status();
  RosetEndpoint endpoint{record.api_url, *api_key, record.mount_id};
  bool restarted = false;
  Status running = ensure_running(files, record, endpoint, &restarted);
  if (!running) return running.with_context("cannot restart roset-fuse");
  if (restarted) {
    spdlog::warn("roset: restarted roset-fuse for {} volume(s) at \"{}\"", record.users.size(),
                 files.mountpoint());
    return rebind_users(files, record);
  }
  // The process is fine; only this staging's bind went bad.
  for (const FuseUser& user : record.users) {
    if (user.volume_id != volume_id || user.staging_path != staging_path) continue;
    detach_staging(user.staging_path);
    return bind_user(files, user);
  }
  return Status::ok();
}

bool SharedFuseMounts::staged_read_only(std::string_view volume_id,
                                        const std::string& staging_path) const {
  for (const std::string& key : keys_serving(volume_id, staging_path)) {
    auto record = load_fuse_record(files_of(key));
    if (!record || !record->has_value()) continue;
    for (const FuseUser& user : (*record)->users) {
      if (user.volume_id == volume_id && user.staging_path == staging_path) return user.read_only;
    }
  }
  return false;
}

VolumeCondition SharedFuseMounts::condition(std::string_view volume_id) const {
  for (const std::string& key : all_keys()) {
    FuseFiles files = files_of(key);
    auto record = load_fuse_record(files);
    if (!record || !record->has_value()) continue;
    bool used = std::any_of((*record)->users.begin(), (*record)->users.end(),
                            [&](const FuseUser& user) { return user.volume_id == volume_id; });
    if (!used) continue;
    if (!is_running((*record)->process)) {
      return {true, fmt::format("roset-fuse (pid {}) serving this volume has exited; the next "
                                "stage or publish restarts it",
                                (*record)->process.pid)};
    }
    if (probe_path(files.mountpoint()) != PathHealth::kOk) {
      return {true, fmt::format("the roset-fuse mount \"{}\" does not answer", files.mountpoint())};
    }
  }
  return {};
}

std::vector<ProcessIdentity> SharedFuseMounts::unrecorded_clients() const {
  std::vector<ProcessIdentity> known;
  for (const std::string& key : all_keys()) {
    auto record = load_fuse_record(files_of(key));
    if (record && record->has_value()) known.push_back((*record)->process);
  }
  std::vector<ProcessIdentity> unknown;
  for (pid_t pid : processes_with_argument_under(settings_.root + "/fuse")) {
    ProcessIdentity process{pid, process_start_time(pid)};
    auto is_known = [&](const ProcessIdentity& candidate) {
      return std::find(known.begin(), known.end(), candidate) != known.end();
    };
    // A known client's own helpers (fusermount3 watching for its exit) belong to it.
    pid_t parent = parent_pid(pid);
    if (is_known(process) || is_known(ProcessIdentity{parent, process_start_time(parent)}))
      continue;
    unknown.push_back(process);
  }
  return unknown;
}

Status SharedFuseMounts::kill_orphans() {
  for (const ProcessIdentity& process : unrecorded_clients()) {
    pid_t pid = process.pid;
    spdlog::warn("reconcile: roset-fuse pid {} serves a mount no record knows; stopping it", pid);
    (void)stop_fuse_process(process, "", settings_.stop_grace);
  }
  // FUSE mounts on our mountpoints whose process is gone and that no live record serves.
  auto table = MountTable::read();
  if (!table) return table.status();
  std::vector<std::string> dead;
  for (const MountEntry* entry : table->under(settings_.root + "/fuse")) {
    if (!entry->fs_type.starts_with("fuse")) continue;
    bool served = false;
    for (const std::string& key : all_keys()) {
      auto record = load_fuse_record(files_of(key));
      served = served ||
               (record && record->has_value() && files_of(key).mountpoint() == entry->mount_point &&
                is_running((*record)->process));
    }
    if (!served) dead.push_back(entry->mount_point);
  }
  for (const std::string& mountpoint : dead) {
    spdlog::warn("reconcile: unmounting \"{}\": no roset-fuse process serves it", mountpoint);
    detach_all(mountpoint);
  }
  return Status::ok();
}

Status SharedFuseMounts::reconcile(const std::function<bool(const FuseUser&)>& still_staged) {
  for (const std::string& key : all_keys()) {
    FuseFiles files = files_of(key);
    // A busy key is being staged or unstaged right now: that call finishes the job.
    auto lock = KeyLock::acquire(lock_path(key), std::chrono::milliseconds(0), "busy");
    if (!lock) continue;
    auto loaded = load_fuse_record(files);
    if (!loaded || !loaded->has_value()) {
      if (fuse_mounted_at(files.mountpoint())) detach_all(files.mountpoint());
      (void)remove_fuse_files(files);
      continue;
    }
    FuseRecord record = std::move(**loaded);
    std::erase_if(record.users, [&](const FuseUser& user) {
      if (still_staged(user)) return false;
      spdlog::warn(
          "reconcile: volume \"{}\" is no longer staged at \"{}\"; releasing its "
          "roset-fuse bind",
          user.volume_id, user.staging_path);
      detach_staging(user.staging_path);
      return true;
    });
    if (record.users.empty()) {
      (void)stop_and_remove(files, record);
      continue;
    }
    ROSETCTL_RETURN_IF_ERROR(save_fuse_record(files, record));
    if (is_running(record.process) && fuse_mounted_at(files.mountpoint())) {
      spdlog::info("reconcile: adopted roset-fuse pid {} serving {} staging(s)", record.process.pid,
                   record.users.size());
      continue;
    }
    auto api_key = read_credentials(files);
    if (!api_key) {
      spdlog::warn("reconcile: roset-fuse at \"{}\" is gone: {}", files.mountpoint(),
                   escape_text(api_key.status().message()));
      continue;
    }
    RosetEndpoint endpoint{record.api_url, *api_key, record.mount_id};
    bool restarted = false;
    if (Status running = ensure_running(files, record, endpoint, &restarted); !running) {
      spdlog::warn("reconcile: cannot restart roset-fuse at \"{}\": {}", files.mountpoint(),
                   escape_text(running.message()));
      continue;
    }
    (void)rebind_users(files, record);
  }
  return kill_orphans();
}

}  // namespace rosetctl
