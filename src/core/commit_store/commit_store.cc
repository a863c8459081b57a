// Object files, fan-out directories and the GC lock.
#include "core/commit_store/commit_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "core/call_scope.h"
#include "core/commit_store/sha256.h"
#include "core/directory_listing.h"
#include "core/fsync_scope.h"
#include "core/log.h"
#include "core/parallel_for.h"

namespace rosetctl {
namespace {

Expected<UniqueFd> open_directory(int parent_fd, const std::string& name, const std::string& shown,
                                  bool create) {
  if (create && ::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create directory \"{}\"", shown));
  }
  int fd = ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open directory \"{}\"", shown));
  return UniqueFd(fd);
}

// "ab/abcdef...": objects are spread over 256 directories so none grows huge.
std::string fanout_name(std::string_view id) {
  return fmt::format("{}/{}", id.substr(0, 2), id);
}

// Gives the anonymous file open at `fd` the name `name` under `dir_fd`. False: it existed.
Expected<bool> link_anonymous(int fd, int dir_fd, const std::string& name,
                              const std::string& shown) {
  std::string proc_path = fmt::format("/proc/self/fd/{}", fd);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::linkat(AT_FDCWD, proc_path.c_str(), dir_fd, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      return true;
    }
    if (errno == EEXIST) return false;
    std::size_t slash = name.find('/');
    if (errno != ENOENT || slash == std::string::npos || attempt > 0) break;
    // The fan-out directory does not exist yet.
    std::string fanout = name.substr(0, slash);
    if (::mkdirat(dir_fd, fanout.c_str(), 0700) != 0 && errno != EEXIST) break;
  }
  return errno_status(errno, fmt::format("cannot store \"{}\"", shown));
}

// Gives the anonymous file open at `fd` the name `name` under `dir_fd` even when that name is
// taken: the file is linked under a spare name of its own, then renamed over the old one, so
// the name never goes missing, even in a crash. False: the name existed and now names this file.
// A crash between the two steps leaves the spare name "<name>.<pid>-<fd>": under blobs/ and
// trees/ garbage collection removes it like any object no commit needs; under commits/ (only a
// damaged commit file is ever replaced) nothing reads it.
Expected<bool> link_replacing(int fd, int dir_fd, const std::string& name,
                              const std::string& shown) {
  auto linked = link_anonymous(fd, dir_fd, name, shown);
  if (!linked || *linked) return linked;
  // Unique among live writers: a process's fds are distinct; processes' pids are.
  std::string spare = fmt::format("{}.{}-{}", name, ::getpid(), fd);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto spare_linked = link_anonymous(fd, dir_fd, spare, shown);
    if (!spare_linked) return spare_linked.status();
    if (*spare_linked) break;
    // Left by a crashed process that had our pid: garbage.
    if (attempt > 0 || ::unlinkat(dir_fd, spare.c_str(), 0) != 0) {
      return errno_status(errno, fmt::format("cannot store \"{}\"", shown));
    }
  }
  if (::renameat(dir_fd, spare.c_str(), dir_fd, name.c_str()) != 0) {
    int saved = errno;
    (void)::unlinkat(dir_fd, spare.c_str(), 0);
    return errno_status(saved, fmt::format("cannot store \"{}\"", shown));
  }
  return false;
}

Expected<UniqueFd> anonymous_file(int dir_fd, mode_t mode, const std::string& shown) {
  int fd = ::openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
  if (fd < 0) {
    return errno_status(errno, fmt::format("cannot create a file in \"{}\" (the commit store "
                                           "needs a filesystem with O_TMPFILE: ext4, xfs, btrfs)",
                                           shown));
  }
  return UniqueFd(fd);
}

Status write_whole(int fd, std::string_view text, const std::string& shown) {
  while (!text.empty()) {
    ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno_status(errno, fmt::format("cannot write \"{}\"", shown));
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  return Status::ok();
}

Expected<std::string> read_whole(int dir_fd, const std::string& name, const std::string& shown) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open \"{}\"", shown));
  std::string text;
  char buffer[64 * 1024];
  while (true) {
    ssize_t got = ::read(fd.get(), buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, fmt::format("cannot read \"{}\"", shown));
    if (got == 0) return text;
    text.append(buffer, static_cast<std::size_t>(got));
  }
}

// Reads an object and checks that its content still hashes to its name.
Expected<std::string> read_verified(int dir_fd, const std::string& name, std::string_view id,
                                    std::string_view kind) {
  auto text = read_whole(dir_fd, name, fmt::format("{} {}", kind, id));
  if (!text) {
    if (text.status().code() == Code::kNotFound) {
      return error(Code::kNotFound, "{} {} is not in the commit store", kind, id);
    }
    return text.status();
  }
  if (std::string actual = sha256_hex(*text); actual != id) {
    return error(Code::kDataLoss,
                 "{} {} is corrupt: its content hashes to {}; restore the commit store from a "
                 "backup or delete the snapshots that use it",
                 kind, id, actual);
  }
  return text;
}

Status sync_directory(int parent_fd, const std::string& name, const std::string& shown) {
  UniqueFd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) {
    return errno_status(errno, fmt::format("cannot sync directory \"{}\"", shown));
  }
  return Status::ok();
}

Status remove_object(int dir_fd, const std::string& name, const std::string& shown) {
  if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
    return errno_status(errno, fmt::format("cannot remove \"{}\"", shown));
  }
  return Status::ok();
}

// Entries of a directory other than "." and "..".
Expected<std::vector<std::string>> list_names(int dir_fd, const std::string& shown) {
  auto names = list_directory_at(dir_fd, shown);
  if (names) std::sort(names->begin(), names->end());
  return names;
}

// Visits every object name in a fan-out directory tree.
Status for_each_fanout(int dir_fd, const std::string& shown,
                       const std::function<void(std::string_view, int64_t)>& visit) {
  auto fanouts = list_names(dir_fd, shown);
  if (!fanouts) return fanouts.status();
  for (const std::string& fanout : *fanouts) {
    auto sub = open_directory(dir_fd, fanout, shown + "/" + fanout, false);
    if (!sub) return sub.status();
    auto names = list_names(sub->get(), shown + "/" + fanout);
    if (!names) return names.status();
    for (const std::string& name : *names) {
      struct stat st;
      int64_t bytes = ::fstatat(sub->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0
                          ? static_cast<int64_t>(st.st_blocks) * 512
                          : 0;
      visit(name, bytes);
    }
  }
  return Status::ok();
}

Expected<StoreLock> take_lock(const std::string& root, bool exclusive,
                              std::chrono::milliseconds patience) {
  std::string path = root + "/lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid())
    return errno_status(errno, fmt::format("cannot open the store lock \"{}\"", path));
  auto give_up = std::chrono::steady_clock::now() + patience;
  auto pause = std::chrono::milliseconds(5);
  while (::flock(fd.get(), (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return errno_status(errno, fmt::format("cannot lock \"{}\"", path));
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      return Status(Code::kAborted,
                    exclusive ? "the commit store is busy with a commit, restore or "
                                "verification; garbage collection will run later"
                              : "the commit store is busy with garbage collection; retry shortly");
    }
    // A wait never outlasts the call it is made for.
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  return StoreLock(std::move(fd), exclusive);
}

}  // namespace

Expected<std::unique_ptr<CommitStore>> CommitStore::open(const std::string& root) {
  if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create the commit store \"{}\"", root));
  }
  std::unique_ptr<CommitStore> store(new CommitStore());
  store->root_ = root;
  auto root_fd = open_directory(AT_FDCWD, root, root, false);
  if (!root_fd) return root_fd.status();
  store->root_fd_ = std::move(*root_fd);
  struct Sub {
    const char* name;
    UniqueFd* fd;
  };
  UniqueFd index_fd;
  for (const Sub& sub : {Sub{"blobs", &store->blobs_fd_}, Sub{"trees", &store->trees_fd_},
                         Sub{"commits", &store->commits_fd_}, Sub{"index", &index_fd}}) {
    auto fd = open_directory(store->root_fd_.get(), sub.name, root + "/" + sub.name, true);
    if (!fd) return fd.status();
    *sub.fd = std::move(*fd);
  }
  store->one_fsync_commits_all_ = fsync_commits_earlier_metadata(store->blobs_fd_.get());
  return store;
}

Expected<StoreLock> CommitStore::lock_shared(std::chrono::milliseconds patience) const {
  return take_lock(root_, false, patience);
}

Expected<StoreLock> CommitStore::lock_exclusive(std::chrono::milliseconds patience) const {
  return take_lock(root_, true, patience);
}

bool CommitStore::has_blob(std::string_view id) const {
  return ::faccessat(blobs_fd_.get(), fanout_name(id).c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

Expected<UniqueFd> CommitStore::open_blob(std::string_view id) const {
  int fd = ::openat(blobs_fd_.get(), fanout_name(id).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  if (errno == ENOENT) return error(Code::kNotFound, "blob {} is not in the commit store", id);
  return errno_status(errno, fmt::format("cannot open blob {}", id));
}

Expected<UniqueFd> CommitStore::new_blob_file() const {
  return anonymous_file(blobs_fd_.get(), 0444, root_ + "/blobs");
}

Expected<bool> CommitStore::add_blob(int fd, std::string_view id) const {
  std::string shown = fmt::format("blob {}", id);
  // A name whose content a crash lost would be named by every later commit of that content.
  ROSETCTL_RETURN_IF_ERROR(wait_until_stored(fd, shown));
  // A blob of that name already stored is not trusted: it may have been damaged since, and a
  // commit that deduplicated against it would inherit the damage. The content in hand was
  // hashed as it was written, and is written already; taking the name costs a link and a
  // rename, where checking the old blob would cost reading it. It also repairs every commit
  // that names a damaged blob.
  return link_replacing(fd, blobs_fd_.get(), fanout_name(id), shown);
}

Status CommitStore::wait_until_stored(int fd, const std::string& shown) const {
  int done = one_fsync_commits_all_
                 ? ::sync_file_range(fd, 0, 0,
                                     SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                         SYNC_FILE_RANGE_WAIT_AFTER)
                 : ::fsync(fd);
  if (done != 0) return errno_status(errno, fmt::format("cannot write out {}", shown));
  return Status::ok();
}

Status CommitStore::sync_blob_names(const std::vector<std::string>& ids, int workers) const {
  if (one_fsync_commits_all_) return Status::ok();
  std::vector<std::string> fanouts;
  for (const std::string& id : ids)
    fanouts.push_back(id.substr(0, 2));
  std::sort(fanouts.begin(), fanouts.end());
  fanouts.erase(std::unique(fanouts.begin(), fanouts.end()), fanouts.end());
  ROSETCTL_RETURN_IF_ERROR(parallel_for(fanouts.size(), workers, [&](std::size_t i, int) {
    return sync_directory(blobs_fd_.get(), fanouts[i], root_ + "/blobs/" + fanouts[i]);
  }));
  return sync_directory(blobs_fd_.get(), ".", root_ + "/blobs");  // new fan-out directories
}

Status CommitStore::remove_blob(std::string_view id) const {
  return remove_object(blobs_fd_.get(), fanout_name(id), fmt::format("blob {}", id));
}

Status CommitStore::for_each_blob(
    const std::function<void(std::string_view, int64_t)>& visit) const {
  return for_each_fanout(blobs_fd_.get(), root_ + "/blobs", visit);
}

Expected<std::string> CommitStore::put_tree(const Tree& tree) const {
  std::string text = serialize_tree(tree);
  std::string id = sha256_hex(text);
  std::string name = fanout_name(id);
  std::string shown = fmt::format("tree {}", id);
  // An equal tree stored already is reused only when it still holds exactly this text (trees
  // are small, and a re-commit of an unchanged volume writes nothing this way); one missing or
  // damaged is written again, over its name.
  auto stored = read_whole(trees_fd_.get(), name, shown);
  if (!stored || *stored != text) {
    auto fd = anonymous_file(trees_fd_.get(), 0444, root_ + "/trees");
    if (!fd) return fd.status();
    ROSETCTL_RETURN_IF_ERROR(write_whole(fd->get(), text, shown));
    // On disk before it has a name, as blobs are (add_blob).
    ROSETCTL_RETURN_IF_ERROR(wait_until_stored(fd->get(), shown));
    auto added = link_replacing(fd->get(), trees_fd_.get(), name, shown);
    if (!added) return added.status();
  }
  // The name too, found or made (another commit may have made it a moment ago).
  if (!one_fsync_commits_all_) {
    std::string fanout = id.substr(0, 2);
    ROSETCTL_RETURN_IF_ERROR(sync_directory(trees_fd_.get(), fanout, root_ + "/trees/" + fanout));
    ROSETCTL_RETURN_IF_ERROR(sync_directory(trees_fd_.get(), ".", root_ + "/trees"));
  }
  return id;
}

Expected<Tree> CommitStore::read_tree(std::string_view id) const {
  if (!is_digest_hex(id)) return error(Code::kInvalidArgument, "\"{}\" is not a tree id", id);
  auto text = read_verified(trees_fd_.get(), fanout_name(id), id, "tree");
  if (!text) return text.status();
  auto tree = parse_tree(*text);
  if (!tree) return tree.status().with_context(fmt::format("tree {}", id));
  return tree;
}

Status CommitStore::remove_tree_object(std::string_view id) const {
  return remove_object(trees_fd_.get(), fanout_name(id), fmt::format("tree {}", id));
}

Status CommitStore::for_each_tree(const std::function<void(std::string_view)>& visit) const {
  return for_each_fanout(trees_fd_.get(), root_ + "/trees",
                         [&](std::string_view id, int64_t) { visit(id); });
}

Expected<std::string> CommitStore::put_commit(const CommitObject& commit) const {
  std::string text = serialize_commit(commit);
  std::string id = sha256_hex(text);
  std::string shown = fmt::format("commit {}", id);
  auto fd = anonymous_file(commits_fd_.get(), 0444, root_ + "/commits");
  if (!fd) return fd.status();
  ROSETCTL_RETURN_IF_ERROR(write_whole(fd->get(), text, shown));
  if (::fsync(fd->get()) != 0) return errno_status(errno, fmt::format("cannot sync {}", shown));
  auto added = link_anonymous(fd->get(), commits_fd_.get(), id, shown);
  if (!added) return added.status();
  // The same commit stored again (same tree, parent, volume, time and message): like every
  // object, the file found is not trusted by its name alone.
  if (!*added && !read_verified(commits_fd_.get(), id, id, "commit")) {
    added = link_replacing(fd->get(), commits_fd_.get(), id, shown);
    if (!added) return added.status();
  }
  if (::fsync(commits_fd_.get()) != 0) {
    return errno_status(errno, fmt::format("cannot sync \"{}/commits\"", root_));
  }
  return id;
}

bool CommitStore::has_commit(std::string_view id) const {
  return is_digest_hex(id) &&
         ::faccessat(commits_fd_.get(), std::string(id).c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

Expected<CommitObject> CommitStore::read_commit(std::string_view id) const {
  if (!is_digest_hex(id)) return error(Code::kInvalidArgument, "\"{}\" is not a commit id", id);
  auto text = read_verified(commits_fd_.get(), std::string(id), id, "commit");
  if (!text) return text.status();
  auto commit = parse_commit(*text);
  if (!commit) return commit.status().with_context(fmt::format("commit {}", id));
  return commit;
}

Expected<std::vector<std::string>> CommitStore::commit_ids() const {
  auto names = list_names(commits_fd_.get(), root_ + "/commits");
  if (!names) return names.status();
  std::erase_if(*names, [](const std::string& name) { return !is_digest_hex(name); });
  return names;
}

Status CommitStore::remove_commit(std::string_view id) const {
  std::string shown = fmt::format("commit {}", id);
  ROSETCTL_RETURN_IF_ERROR(remove_object(commits_fd_.get(), std::string(id), shown));
  if (::fsync(commits_fd_.get()) != 0) {
    return errno_status(errno, fmt::format("cannot sync \"{}/commits\"", root_));
  }
  return Status::ok();
}

std::string CommitStore::stat_cache_path(std::string_view volume_id) const {
  return fmt::format("{}/index/{}", root_, volume_id);
}

void CommitStore::distrust_stat_caches() const {
  Status dropped = [&]() -> Status {
    auto index = open_directory(root_fd_.get(), "index", root_ + "/index", false);
    if (!index) return index.status();
    auto names = list_names(index->get(), root_ + "/index");
    if (!names) return names.status();
    for (const std::string& name : *names) {
      ROSETCTL_RETURN_IF_ERROR(remove_object(index->get(), name, root_ + "/index/" + name));
    }
    return Status::ok();
  }();
  if (!dropped) {
    spdlog::warn(
        "damaged snapshot data was found, but the stat caches that may name it were not "
        "all removed ({}); the next commit of an unchanged file may name the damaged "
        "blob again",
        dropped.message());
  }
}

}  // namespace rosetctl
