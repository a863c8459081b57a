// The committer: walk, capture file contents in parallel, write tree and commit.
#include "core/commit_store/commit_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <set>
#include <thread>

#include "core/clock.h"
#include "core/commit_store/open_beneath.h"
#include "core/commit_store/sha256.h"
#include "core/commit_store/stat_cache.h"
#include "core/commit_store/tree_walk.h"
#include "core/parallel_for.h"

namespace rosetctl {
namespace {

// A cached version is trusted only if its ctime is this much older than the moment the walk
// began (its xattrs are read by the walk, its content after it): a change landing in the same
// timestamp tick as the previous one would otherwise go unnoticed by the next commit (git calls
// these entries "racily clean").
constexpr int64_t kRacyWindowNs = 100'000'000;

struct FileResult {
  bool vanished = false;  // deleted or replaced by a non-file during the commit
  bool reused = false;
  bool added = false;     // its blob is new to the store
  bool changing = false;  // pre-copy: kept as read while it was written to
  std::optional<CachedFile> cache;
};

struct StoredContent {
  std::string sha256;
  bool short_read = false;
  bool added = false;
};

class Capturer {
 public:
  // `walk_started`: when the walk that produced the entries began. `blobs_assured`: every
  // blob the cache names is known to be stored (its anchor commit exists).
  Capturer(const CommitStore& store, int root_fd, const std::string& shown_root,
           const StatCache& cache, int64_t walk_started, bool blobs_assured,
           bool keep_changing_files)
      : store_(store),
        root_fd_(root_fd),
        shown_root_(shown_root),
        cache_(cache),
        walk_started_(walk_started),
        blobs_assured_(blobs_assured),
        keep_changing_files_(keep_changing_files) {}

  // The content recorded by the previous commit, when the file is as it was then.
  bool reuse_cached(WalkedEntry& walked, FileResult& result) const;
  Status capture(WalkedEntry& walked, FileResult& result, ContentBuffer& buffer);

 private:
  Expected<StoredContent> store_content(int fd, int64_t size, const std::string& shown,
                                        ContentBuffer& buffer);

  const CommitStore& store_;
  int root_fd_;
  const std::string& shown_root_;
  const StatCache& cache_;
  int64_t walk_started_;
  bool blobs_assured_;
  bool keep_changing_files_;
  std::atomic<bool> reflink_works_{true};  // until the first FICLONE says otherwise
};

Expected<StoredContent> Capturer::store_content(int fd, int64_t size, const std::string& shown,
                                                ContentBuffer& buffer) {
  auto blob = store_.new_blob_file();
  if (!blob) return blob.status();
  bool cloned = false;
  if (reflink_works_.load(std::memory_order_relaxed)) {
    auto clone = clone_content(fd, blob->get(), shown);
    if (!clone) return clone.status();
    cloned = *clone;
    if (!cloned) reflink_works_ = false;
    // A file that grew after `size` was taken is caught by the version check; until then, the
    // blob must hold exactly the bytes that get hashed.
    if (cloned && ::ftruncate(blob->get(), size) != 0) {
      return errno_status(errno, fmt::format("cannot size the clone of \"{}\"", shown));
    }
  }
  // A clone is a point-in-time copy, so hashing the clone names exactly what is stored. A copy
  // stores exactly the bytes that were hashed. Either way a blob always matches its name.
  auto hashed = cloned ? hash_content(blob->get(), size, -1, buffer, shown)
                       : hash_content(fd, size, blob->get(), buffer, shown);
  if (!hashed) return hashed.status();
  StoredContent stored{hashed->sha256, hashed->short_read, false};
  if (stored.short_read) return stored;
  auto added = store_.add_blob(blob->get(), stored.sha256);
  if (!added) return added.status();
  stored.added = *added;
  return stored;
}

bool Capturer::reuse_cached(WalkedEntry& walked, FileResult& result) const {
  const CachedFile* cached = cache_.find_unchanged(walked.entry.path, walked.version);
  if (cached == nullptr || (!blobs_assured_ && !store_.has_blob(cached->content))) {
    return false;
  }
  walked.entry.content = cached->content;
  result.reused = true;
  result.cache = *cached;
  return true;
}

Status Capturer::capture(WalkedEntry& walked, FileResult& result, ContentBuffer& buffer) {
  TreeEntry& entry = walked.entry;
  if (reuse_cached(walked, result)) return Status::ok();
  std::string shown = shown_root_ + "/" + entry.path;
  for (int attempt = 0; attempt < kMaxCaptureAttempts; ++attempt) {
    UniqueFd fd(open_beneath(root_fd_, entry.path, O_RDONLY));
    struct stat before, after;
    if (!fd.valid() || ::fstat(fd.get(), &before) != 0 || !S_ISREG(before.st_mode)) {
      if (!fd.valid() && errno != ENOENT && errno != ELOOP && errno != EXDEV) {
        return errno_status(errno, fmt::format("cannot open \"{}\"", shown));
      }
      result.vanished = true;  // gone, or no longer a regular file: as if committed later
      return Status::ok();
    }
    auto stored = store_content(fd.get(), before.st_size, shown, buffer);
    if (!stored) return stored.status();
    if (::fstat(fd.get(), &after) != 0) {
      return errno_status(errno, fmt::format("cannot inspect \"{}\"", shown));
    }
    FileVersion version = FileVersion::of(before);
    bool written_to = stored->short_read || !(FileVersion::of(after) == version);
    // A pre-copy keeps what it read; a shrunk file's read has no whole blob to keep.
    if (written_to && (!keep_changing_files_ || stored->short_read)) continue;
    if (!(version == walked.version)) {
      // Changed between the walk and the read: take metadata from what was read.
      auto xattrs = read_xattrs(fd.get(), "", shown);
      if (!xattrs) return xattrs.status();
      entry.xattrs = std::move(*xattrs);
    }
    entry.content = stored->sha256;
    entry.size = before.st_size;
    entry.mtime_ns = version.mtime_ns;
    entry.mode = before.st_mode & 07777;
    entry.uid = before.st_uid;
    entry.gid = before.st_gid;
    result.added = stored->added;
    result.changing = written_to;
    if (!written_to && version.ctime_ns + kRacyWindowNs < walk_started_)
      result.cache = CachedFile{version, entry.content, entry.xattrs};
    return Status::ok();
  }
  if (keep_changing_files_) {
    result.vanished = true;  // it kept shrinking: the consistent commit that follows takes it
    return Status::ok();
  }
  // FAILED_PRECONDITION, not ABORTED: the writer is no call in flight that ends by itself, so
  // the volume must be made quiet before a retry can succeed.
  return error(Code::kFailedPrecondition,
               "\"{}\" changed while being read, {} times in a row; pause whatever writes to it "
               "(or disconnect the volume) and commit again",
               shown, kMaxCaptureAttempts);
}

// Drops entries that vanished, and hard links whose first name vanished.
std::vector<TreeEntry> surviving_entries(std::vector<WalkedEntry>& walked,
                                         const std::vector<FileResult>& results) {
  std::set<std::string> vanished;
  std::vector<TreeEntry> entries;
  entries.reserve(walked.size());
  for (std::size_t i = 0; i < walked.size(); ++i) {
    TreeEntry& entry = walked[i].entry;
    if (results[i].vanished) {
      vanished.insert(entry.path);
      continue;
    }
    if (entry.type == EntryType::kHardlink && vanished.contains(entry.target)) continue;
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace

Expected<CommitOutcome> commit_directory(const CommitStore& store, const CommitRequest& request,
                                         const StoreLock& /*lock: held by the caller*/) {
  UniqueFd root(::open(request.directory.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid())
    return errno_status(errno, fmt::format("cannot open \"{}\"", request.directory));
  // The tree and commit objects need SHA-256: its library loads while the walk runs.
  std::jthread hashing_ready = load_sha256_in_background();
  StatCache previous = StatCache::load(store.stat_cache_path(request.volume_id));
  int64_t walk_started = unix_now_ns();
  auto walked = walk_tree(root.get(), request.directory,
                          [&](const std::string& path, const FileVersion& version) {
                            const CachedFile* cached = previous.find_unchanged(path, version);
                            return cached != nullptr ? &cached->xattrs : nullptr;
                          });
  if (!walked) return walked.status();

  std::vector<std::size_t> files;
  int64_t bytes_total = 0;
  for (std::size_t i = 0; i < walked->size(); ++i) {
    if ((*walked)[i].entry.type != EntryType::kRegular) continue;
    files.push_back(i);
    bytes_total += (*walked)[i].entry.size;
  }
  Progress progress(request.progress);
  progress.start(fmt::format("committing {}", request.volume_name), files.size(), bytes_total);
  bool blobs_assured = !previous.anchor().empty() && store.has_commit(previous.anchor());
  Capturer capturer(store, root.get(), request.directory, previous, walk_started, blobs_assured,
                    request.keep_changing_files);
  std::vector<FileResult> results(walked->size());
  // Unchanged files first, on this thread: a re-commit of an unchanged volume then starts no
  // workers at all.
  std::vector<std::size_t> to_read;
  for (std::size_t i : files) {
    if (capturer.reuse_cached((*walked)[i], results[i])) {
      progress.advance(1, (*walked)[i].entry.size);
    } else {
      to_read.push_back(i);
    }
  }
  // Each new blob waits for the disk before it is named (CommitStore::add_blob): more threads
  // than CPUs keep the CPUs hashing while others wait.
  int capture_workers = std::max(request.workers, 1) * kCaptureThreadsPerWorker;
  std::vector<ContentBuffer> buffers(capture_workers);
  Status captured = parallel_for(to_read.size(), capture_workers, [&](std::size_t n, int worker) {
    std::size_t i = to_read[n];
    ROSETCTL_RETURN_IF_ERROR(capturer.capture((*walked)[i], results[i], buffers[worker]));
    progress.advance(1, (*walked)[i].entry.size);
    return Status::ok();
  });
  progress.finish();
  if (!captured) return captured;

  CommitOutcome outcome;
  StatCache next;
  // Every blob read in this commit, not only the new ones: another commit may have added one
  // and not yet made its name durable.
  std::vector<std::string> read_blobs;
  for (std::size_t i : files) {
    const FileResult& result = results[i];
    if (result.reused) ++outcome.reused_files;
    if (result.changing) ++outcome.changing_files;
    if (result.added) outcome.new_bytes += (*walked)[i].entry.size;
    if (!result.reused && !result.vanished) read_blobs.push_back((*walked)[i].entry.content);
    if (result.cache && !result.vanished) next.add((*walked)[i].entry.path, *result.cache);
  }
  ROSETCTL_RETURN_IF_ERROR(store.sync_blob_names(read_blobs, request.workers));
  Tree tree{surviving_entries(*walked, results)};
  auto tree_id = store.put_tree(tree);
  if (!tree_id) return tree_id.status();
  TreeTotals totals = tree_totals(tree);
  outcome.commit =
      CommitObject{*tree_id,        request.parent, request.volume_id, request.volume_name,
                   request.time_ns, totals.files,   totals.bytes,      request.message};
  auto id = store.put_commit(outcome.commit);
  if (!id) return id.status();
  outcome.id = *id;
  next.set_anchor(*id);
  // Only a cache: failing to save it makes the next commit slower, not wrong.
  (void)next.save(store.stat_cache_path(request.volume_id));
  return outcome;
}

}  // namespace rosetctl
