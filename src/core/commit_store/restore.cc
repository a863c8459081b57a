// Content writers for restore (from blobs, checked as they are copied) and clone (from a live
// directory).
#include "core/commit_store/restore.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <optional>

#include "core/commit_store/blob_copy.h"
#include "core/commit_store/commit_directory.h"
#include "core/commit_store/materialize_tree.h"
#include "core/commit_store/open_beneath.h"
#include "core/commit_store/tree_walk.h"

namespace rosetctl {
namespace {

// Shares a live file's extents when possible and remembers when it is not, so a filesystem
// without reflinks costs one failed FICLONE per clone, not one per file. (Restores copy blobs
// through BlobCopier, which checks what it copies.)
class ExtentCopier {
 public:
  Status copy(int src_fd, int dst_fd, int64_t size, const std::string& shown) {
    if (size == 0) return Status::ok();
    if (reflink_works_.load(std::memory_order_relaxed)) {
      auto cloned = clone_content(src_fd, dst_fd, shown);
      if (!cloned) return cloned.status();
      if (*cloned) return Status::ok();
      reflink_works_ = false;
    }
    return copy_content(src_fd, dst_fd, size, shown);
  }

 private:
  std::atomic<bool> reflink_works_{true};
};

Expected<UniqueFd> open_directory(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open \"{}\"", path));
  return fd;
}

RestoreOutcome outcome_of(const Tree& tree) {
  TreeTotals totals = tree_totals(tree);
  return {totals.files, totals.bytes};
}

}  // namespace

Expected<RestoreOutcome> restore_commit(const CommitStore& store, std::string_view id,
                                        const std::string& destination,
                                        const RestoreOptions& options,
                                        const StoreLock& /*lock: held by the caller*/) {
  auto commit = store.read_commit(id);
  if (!commit) return commit.status();
  auto tree = store.read_tree(commit->tree);
  if (!tree) return tree.status();
  if (options.from_another_host) strip_privileged_metadata(*tree);
  auto dest = open_directory(destination);
  if (!dest) return dest.status();
  BlobCopier copier;
  auto write_blob = [&](TreeEntry& entry, int dest_fd, ContentBuffer& buffer) -> Status {
    return copier.copy(store, entry.content, entry.size, dest_fd, buffer,
                       fmt::format("file \"{}\"", entry.path));
  };
  MaterializeOptions materialize{destination, options.title, options.workers, options.progress};
  // Reuse is an optimisation: without the earlier tree or its directory, everything is copied.
  std::optional<Tree> earlier;
  UniqueFd reuse;
  std::atomic<int64_t> reused{0};
  if (!options.reuse_directory.empty()) {
    auto reused_commit = store.read_commit(options.reuse_commit);
    auto reused_tree = reused_commit ? store.read_tree(reused_commit->tree)
                                     : Expected<Tree>(reused_commit.status());
    auto reused_dir = open_directory(options.reuse_directory);
    if (reused_tree && reused_dir) {
      earlier = std::move(*reused_tree);
      if (options.from_another_host) strip_privileged_metadata(*earlier);
      reuse = std::move(*reused_dir);
      materialize.reuse_fd = reuse.get();
      materialize.reuse_tree = &*earlier;
      materialize.reused_files = &reused;
    }
  }
  Status restored = materialize_tree(*tree, dest->get(), write_blob, materialize);
  if (restored.code() == Code::kDataLoss) store.distrust_stat_caches();
  ROSETCTL_RETURN_IF_ERROR(restored);
  RestoreOutcome outcome = outcome_of(*tree);
  outcome.reused_files = reused.load();
  return outcome;
}

Expected<RestoreOutcome> clone_directory(const std::string& source, const std::string& destination,
                                         const RestoreOptions& options) {
  auto src = open_directory(source);
  if (!src) return src.status();
  auto dest = open_directory(destination);
  if (!dest) return dest.status();
  auto walked = walk_tree(src->get(), source);
  if (!walked) return walked.status();
  Tree tree;
  for (WalkedEntry& entry : *walked)
    tree.entries.push_back(std::move(entry.entry));

  ExtentCopier copier;
  auto copy_live = [&](TreeEntry& entry, int dest_fd, ContentBuffer&) -> Status {
    std::string shown = source + "/" + entry.path;
    for (int attempt = 0; attempt < kMaxCaptureAttempts; ++attempt) {
      UniqueFd fd(open_beneath(src->get(), entry.path, O_RDONLY));
      struct stat before, after;
      if (!fd.valid() || ::fstat(fd.get(), &before) != 0 || !S_ISREG(before.st_mode)) {
        return error(Code::kAborted, "\"{}\" was removed or replaced during the clone; retry",
                     shown);
      }
      if (::ftruncate(dest_fd, 0) != 0) {
        return errno_status(errno, fmt::format("cannot reset the copy of \"{}\"", shown));
      }
      Status copied = copier.copy(fd.get(), dest_fd, before.st_size, shown);
      if (!copied && copied.code() != Code::kAborted) return copied;
      if (::fstat(fd.get(), &after) != 0) {
        return errno_status(errno, fmt::format("cannot inspect \"{}\"", shown));
      }
      if (!copied || !(FileVersion::of(before) == FileVersion::of(after))) continue;
      auto xattrs = read_xattrs(fd.get(), "", shown);
      if (!xattrs) return xattrs.status();
      entry.xattrs = std::move(*xattrs);
      entry.size = before.st_size;
      entry.mtime_ns = mtime_ns_of(before);
      entry.mode = before.st_mode & 07777;
      entry.uid = before.st_uid;
      entry.gid = before.st_gid;
      return Status::ok();
    }
    return error(Code::kFailedPrecondition,  // a busy writer, not a call in flight (ABORTED)
                 "\"{}\" changed while being copied, {} times in a row; pause whatever writes to "
                 "it (or disconnect the volume) and clone again",
                 shown, kMaxCaptureAttempts);
  };
  MaterializeOptions materialize{destination, options.title, options.workers, options.progress};
  ROSETCTL_RETURN_IF_ERROR(materialize_tree(tree, dest->get(), copy_live, materialize));
  return outcome_of(tree);
}

}  // namespace rosetctl
