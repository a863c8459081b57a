// Snapshots of this host's volumes (local_storage.h): commits in the content-addressed store under
// the state dir (core/commit_store), restores and clones into new volume directories, and the
// garbage collection that keeps the store's blobs to what some commit still needs.
//
// Locking: every commit and restore holds the store's GC lock shared from its first object until
// the daemon has recorded the result; collection takes it exclusively. So a commit file without
// a snapshot record, found under the exclusive lock, was left by an interrupted commit or delete
// and is removed.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "core/clock.h"
#include "core/commit_store/commit_directory.h"
#include "core/commit_store/restore.h"
#include "core/commit_store/sha256.h"
#include "core/commit_store/store_gc.h"
#include "core/commit_store/store_verify.h"
#include "core/directory_listing.h"
#include "core/log.h"
#include "core/parallel_for.h"
#include "core/remove_tree.h"
#include "core/validate.h"
#include "providers/common/local_storage.h"
#include "providers/common/prepared_restores.h"

namespace rosetctl {
namespace {

// Data directories being filled by a restore or clone: "<volumes>/.restore-<id>".
constexpr std::string_view kPartialPrefix = ".restore-";
// How far back a restore looks for a restore made ahead among its commit's ancestors: a move
// takes one round after the one it restores ahead.
constexpr int kPreparedAncestors = 4;

// A data directory being filled. It is flocked while its filler lives, so a sweep can tell an
// abandoned one (its process died) from one in progress; it is removed unless finished.
class PartialVolume {
 public:
  static Expected<PartialVolume> create(const std::string& path) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
        return errno_status(errno, fmt::format("cannot create \"{}\"", path));
      }
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      struct stat held, named;
      if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0 &&
          ::fstat(fd.get(), &held) == 0 && ::lstat(path.c_str(), &named) == 0 &&
          held.st_ino == named.st_ino) {
        PartialVolume partial(path);
        partial.fd_ = std::move(fd);
        return partial;
      }
      // A sweep of abandoned restores got to the new directory between mkdir and flock.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return error(Code::kAborted, "cannot claim \"{}\" for a restore; retry", path);
  }
  PartialVolume(PartialVolume&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::move(other.fd_)), done_(other.done_) {
    other.done_ = true;
  }
  PartialVolume& operator=(PartialVolume&&) = delete;
  ~PartialVolume() {
    if (!done_) (void)remove_tree(path_);
  }

  const std::string& path() const { return path_; }
  // Moves the filled directory to its final name.
  Status finish(const std::string& final_path) {
    if (::rename(path_.c_str(), final_path.c_str()) != 0) {
      return errno_status(errno, fmt::format("cannot move \"{}\" to \"{}\"", path_, final_path));
    }
    done_ = true;
    return Status::ok();
  }

 private:
  explicit PartialVolume(std::string path) : path_(std::move(path)) {}
  std::string path_;
  UniqueFd fd_;
  bool done_ = false;
};

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> directory_entries(const std::string& path) {
  auto names = list_directory(path);
  return names ? std::move(*names) : std::vector<std::string>();
}

// Partial restores whose process is gone (their flock is free).
void remove_abandoned_partials(const std::string& volumes_dir) {
  for (const std::string& name : directory_entries(volumes_dir)) {
    if (!name.starts_with(kPartialPrefix)) continue;
    std::string path = volumes_dir + "/" + name;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid() || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // in progress
    if (Status removed = remove_tree(path); !removed) {
      spdlog::warn("cannot remove abandoned restore \"{}\": {}", path,
                   escape_text(removed.message()));
    }
  }
}

}  // namespace

Expected<const CommitStore*> LocalStorage::commit_store() const {
  std::lock_guard lock(commit_store_mutex_);
  if (!commit_store_) {
    auto opened = CommitStore::open(layout_.commit_store_dir());
    if (!opened) return opened.status();
    commit_store_ = std::move(*opened);
  }
  return commit_store_.get();
}

std::vector<ProviderGauge> LocalStorage::gauges() {
  // A store never used is not made for a scrape.
  if (::access(layout_.commit_store_dir().c_str(), F_OK) != 0) return {};
  auto store = commit_store();
  if (!store) return {};
  // The blobs are the store's bulk (trees and commits are small); their listing takes no lock.
  int64_t bytes = 0;
  if (!(*store)->for_each_blob([&bytes](std::string_view, int64_t size) { bytes += size; }))
    return {};
  return {{"rosetctl_commit_store_bytes",
           "Bytes on disk of the file contents (blobs) in the local provider's commit store",
           static_cast<double>(bytes)}};
}

Expected<ProvisionedSnapshot> LocalStorage::create_snapshot(const SnapshotSpec& spec,
                                                            const RecordSnapshot& record) {
  auto volume = load(spec.volume_id);
  if (!volume) return volume.status();
  if (is_image_volume(*volume)) return create_image_snapshot(spec, *volume, record);
  auto store = commit_store();
  if (!store) return store.status();
  // A volume never staged has no directory yet; its content is an empty directory.
  ROSETCTL_RETURN_IF_ERROR(ensure_data_dir(spec.volume_id));
  auto lock = (*store)->lock_shared(kStorePatience);
  if (!lock) return lock.status();
  CommitRequest request{data_dir(spec.volume_id), spec.volume_id, spec.volume_name,
                        spec.parent_id,           spec.message,   unix_now_ns(),
                        default_worker_count(),   spec.progress,  spec.pre_copy};
  auto outcome = commit_directory(**store, request, *lock);
  if (!outcome)
    return outcome.status().with_context(fmt::format("volume \"{}\"", spec.volume_name));
  ProvisionedSnapshot snapshot{
      outcome->id,        outcome->commit.bytes,   outcome->commit.files,
      outcome->new_bytes, outcome->commit.time_ns, {{kContextType, std::string(kTypeDir)}}};
  if (Status recorded = record(snapshot); !recorded) {
    (void)(*store)->remove_commit(outcome->id);  // its objects go at the next collection
    return recorded;
  }
  return snapshot;
}

Status LocalStorage::delete_snapshot(const SnapshotRecord& snapshot) {
  auto store = commit_store();
  if (!store) return store.status();
  ROSETCTL_RETURN_IF_ERROR((*store)->remove_commit(snapshot.commit_id));
  // Reclaim now if nothing else uses the store; otherwise the next collection will.
  auto collected = collect_garbage(std::chrono::milliseconds(0));
  if (!collected) {
    spdlog::warn("snapshot {} deleted, but its storage was not reclaimed: {}", snapshot.id,
                 escape_text(collected.status().message()));
  }
  return Status::ok();
}

Expected<std::vector<TreeChange>> LocalStorage::diff_snapshots(const SnapshotRecord& from,
                                                               const SnapshotRecord& to) {
  auto store = commit_store();
  if (!store) return store.status();
  auto lock = (*store)->lock_shared(kStorePatience);
  if (!lock) return lock.status();
  std::vector<Tree> trees;
  std::vector<std::string> kinds;
  for (const SnapshotRecord* snapshot : {&from, &to}) {
    auto commit = (*store)->read_commit(snapshot->commit_id);
    if (!commit) return commit.status();
    kinds.push_back(commit->image);
    auto tree = (*store)->read_tree(commit->tree);
    if (!tree) return tree.status();
    trees.push_back(std::move(*tree));
  }
  // An image commit's tree is the image as one file: two of them compare as that file's
  // content; an image against a directory's files has no meaningful answer.
  if (kinds[0].empty() != kinds[1].empty()) {
    const SnapshotRecord& image = kinds[0].empty() ? to : from;
    return error(Code::kInvalidArgument,
                 "snapshot \"{}\" is of an image volume and the other of a directory volume; "
                 "only snapshots of the same kind can be compared",
                 image.name);
  }
  return diff_trees(trees[0], trees[1]);
}

Expected<SnapshotVerification> LocalStorage::verify_snapshots(
    const std::vector<SnapshotRecord>& snapshots, ProgressSink* progress) {
  auto store = commit_store();
  if (!store) return store.status();
  auto lock = (*store)->lock_shared(kStorePatience);
  if (!lock) return lock.status();
  std::vector<std::string> ids;
  for (const SnapshotRecord& snapshot : snapshots) {
    if (snapshot.ready) ids.push_back(snapshot.commit_id);
  }
  auto report = verify_commits(**store, ids, default_worker_count(), progress, *lock);
  if (!report) return report.status();
  SnapshotVerification verification{
      report->commits, report->blobs, report->bytes, std::move(report->problems), {}, {}};
  for (const SnapshotRecord& snapshot : snapshots) {
    if (std::binary_search(report->damaged_commits.begin(), report->damaged_commits.end(),
                           snapshot.commit_id)) {
      verification.damaged.push_back(snapshot.name);
    }
  }
  auto stored = (*store)->commit_ids();
  if (!stored) return stored.status();
  for (const std::string& id : *stored) {
    auto recorded = store_.find_snapshot_by_commit(id);
    if (!recorded) return recorded.status();
    if (!recorded->has_value()) {
      verification.notes.push_back(
          fmt::format("commit {} has no snapshot record (an interrupted commit or delete left it); "
                      "`rosetctl snapshot gc` removes it",
                      id));
    }
  }
  return verification;
}

Status LocalStorage::remove_unrecorded_commits(const CommitStore& store,
                                               StorageCollection& collection) {
  auto ids = store.commit_ids();
  if (!ids) return ids.status();
  for (const std::string& id : *ids) {
    auto recorded = store_.find_snapshot_by_commit(id);
    if (!recorded) return recorded.status();
    if (recorded->has_value()) continue;
    ROSETCTL_RETURN_IF_ERROR(store.remove_commit(id));
    ++collection.unrecorded_removed;
  }
  return Status::ok();
}

void LocalStorage::remove_leftovers(const CommitStore& store) {
  remove_abandoned_partials(layout_.volumes_dir());
  remove_stale_prepared_restores(layout_.volumes_dir(), store);
  // Stat caches of volumes that are gone, and temporary files of interrupted cache writes.
  std::string index = layout_.commit_store_dir() + "/index";
  for (const std::string& name : directory_entries(index)) {
    bool temporary = name.ends_with(".tmp");
    if (!temporary) {
      auto volume = store_.find_volume(name);
      if (!volume || volume->has_value()) continue;
    }
    (void)::unlink(store.stat_cache_path(name).c_str());
  }
}

Expected<StorageCollection> LocalStorage::collect_garbage(std::chrono::milliseconds patience) {
  auto store = commit_store();
  if (!store) return store.status();
  StorageCollection collection;
  auto lock = (*store)->lock_exclusive(patience);
  if (!lock) {
    if (lock.status().code() == Code::kAborted) return collection;  // busy: ran = false
    return lock.status();
  }
  collection.ran = true;
  ROSETCTL_RETURN_IF_ERROR(remove_unrecorded_commits(**store, collection));
  auto report = ::rosetctl::collect_garbage(**store, *lock);
  if (!report) return report.status();
  collection.snapshots = report->commits;
  collection.objects_removed = report->trees_removed + report->blobs_removed;
  collection.bytes_reclaimed = report->bytes_reclaimed;
  remove_leftovers(**store);
  return collection;
}

Status LocalStorage::populate_volume(std::string_view volume_id, const CreateVolumeSpec& spec) {
  const VolumeSource& source = spec.source;
  std::string source_dir = data_dir(source.id);
  // A source volume that was never staged is empty, and so is its clone.
  if (source.kind == VolumeSource::Kind::kVolume && !path_exists(source_dir)) return Status::ok();
  remove_abandoned_partials(layout_.volumes_dir());
  auto partial = PartialVolume::create(
      fmt::format("{}/{}{}", layout_.volumes_dir(), kPartialPrefix, volume_id));
  if (!partial) return partial.status();
  RestoreOptions options{"", default_worker_count(), spec.progress, source.from_another_host};
  if (source.kind == VolumeSource::Kind::kSnapshot) {
    auto store = commit_store();
    if (!store) return store.status();
    auto lock = (*store)->lock_shared(kStorePatience);
    if (!lock) return lock.status();
    options.title = fmt::format("restoring {}", source.id.substr(0, 12));
    // Made ahead from this commit or one before it (a move's last rounds): its unchanged files
    // move.
    std::vector<std::string> ahead{source.id};
    for (int up = 0; up < kPreparedAncestors; ++up) {
      auto commit = (*store)->read_commit(ahead.back());
      if (!commit || commit->parent.empty() || !(*store)->has_commit(commit->parent)) break;
      ahead.push_back(commit->parent);
    }
    auto claimed = ClaimedRestore::claim(layout_.volumes_dir(), volume_id, ahead);
    if (claimed) {
      options.reuse_directory = claimed->path();
      options.reuse_commit = claimed->commit();
    }
    auto restored = restore_commit(**store, source.id, partial->path(), options, *lock);
    if (!restored) return restored.status();
    if (claimed) {
      spdlog::info(
          "volume {} restored from commit {}: {} of {} files moved from the restore made "
          "ahead of commit {}",
          volume_id, source.id, restored->reused_files, restored->files, claimed->commit());
    }
  } else {
    options.title = fmt::format("cloning {}", source.id);
    auto cloned = clone_directory(source_dir, partial->path(), options);
    if (!cloned) return cloned.status();
  }
  return partial->finish(data_dir(volume_id));
}

Status LocalStorage::prepare_restore(std::string_view commit_id, bool from_another_host) {
  if (!is_digest_hex(commit_id)) {
    return error(Code::kInvalidArgument, "\"{}\" is not a commit id", commit_id.substr(0, 80));
  }
  std::string ready = prepared_restore_dir(layout_.volumes_dir(), commit_id);
  if (path_exists(ready)) return Status::ok();
  auto store = commit_store();
  if (!store) return store.status();
  auto lock = (*store)->lock_shared(kStorePatience);
  if (!lock) return lock.status();
  remove_abandoned_partials(layout_.volumes_dir());
  auto partial = PartialVolume::create(
      fmt::format("{}/{}prepared-{}", layout_.volumes_dir(), kPartialPrefix, commit_id));
  if (!partial) return partial.status();
  RestoreOptions options{fmt::format("preparing {}", commit_id.substr(0, 12)),
                         default_worker_count(), nullptr, from_another_host};
  auto restored = restore_commit(**store, commit_id, partial->path(), options, *lock);
  if (!restored) return restored.status();
  Status finished = partial->finish(ready);
  return finished || path_exists(ready) ? Status::ok() : finished;  // or another made it
}

Status LocalStorage::forget_volume(std::string_view volume_id) {
  std::string cache = fmt::format("{}/index/{}", layout_.commit_store_dir(), volume_id);
  if (::unlink(cache.c_str()) != 0 && errno != ENOENT) {
    return errno_status(errno, fmt::format("cannot remove the stat cache \"{}\"", cache));
  }
  return Status::ok();
}

}  // namespace rosetctl
