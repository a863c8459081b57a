// Verifying and staging objects received from another store.
#include "core/commit_store/object_receiver.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/parallel_for.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

constexpr const char* kIncomingDir = "incoming";
// Threads that wait for blobs' writeback at a flush: the waits are the disk's, not the CPU's.
constexpr int kSyncWorkers = 8;

std::string partial_name(std::string_view id) {
  return fmt::format("{}.part", id);
}

Status write_all_at(int fd, std::string_view data, int64_t offset, std::string_view shown) {
  while (!data.empty()) {
    ssize_t written = ::pwrite(fd, data.data(), data.size(), offset);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno_status(errno, fmt::format("cannot write {}", shown));
    data.remove_prefix(static_cast<std::size_t>(written));
    offset += written;
  }
  return Status::ok();
}

// Hashes the first `length` bytes of `fd`: the part of a blob kept from an earlier transfer.
Status hash_prefix(int fd, int64_t length, Sha256& hash, std::string_view shown) {
  char buffer[256 * 1024];
  int64_t offset = 0;
  while (offset < length) {
    std::size_t want = static_cast<std::size_t>(std::min<int64_t>(sizeof(buffer), length - offset));
    ssize_t got = ::pread(fd, buffer, want, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return errno_status(got < 0 ? errno : EIO, fmt::format("cannot read {}", shown));
    hash.update(buffer, static_cast<std::size_t>(got));
    offset += got;
  }
  return Status::ok();
}

// Removes the part files in `dir` not modified for `age`. Only with the staging area's lock held
// exclusively: no transfer is at work. A failure leaves the file for the next time.
void collect_stale_parts(int dir, std::chrono::seconds age, std::string_view shown) {
  int fd = ::dup(dir);
  DIR* listing = fd < 0 ? nullptr : ::fdopendir(fd);
  if (listing == nullptr) {
    if (fd >= 0) ::close(fd);
    spdlog::warn("cannot list the staging directory {}: {}", shown, std::strerror(errno));
    return;
  }
  ::rewinddir(listing);
  const auto now = std::chrono::system_clock::now();
  while (const dirent* entry = ::readdir(listing)) {
    std::string_view name = entry->d_name;
    if (!name.ends_with(".part")) continue;
    struct stat st;
    if (::fstatat(dir, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    auto modified = std::chrono::system_clock::time_point(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec));
    if (now - modified < age) continue;
    if (::unlinkat(dir, entry->d_name, 0) == 0) {
      spdlog::info("removed {}/{} ({} bytes): part of a transfer abandoned {} hours ago", shown,
                   escape_text(name), st.st_size,
                   std::chrono::duration_cast<std::chrono::hours>(now - modified).count());
    }
  }
  ::closedir(listing);
}

}  // namespace

Expected<ObjectReceiver> ObjectReceiver::open(const CommitStore& store, std::string source) {
  std::string path = store.root() + "/" + kIncomingDir;
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create the staging directory \"{}\"", path));
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    return errno_status(errno, fmt::format("cannot open the staging directory \"{}\"", path));
  }
  // Alone here: nobody writes or is about to resume a part, so old ones can go. Then shared, as
  // every receiver holds it (the exclusive lock is given up before the shared one is taken, and
  // whoever takes it exclusively meanwhile is waited for: it is collecting).
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
    collect_stale_parts(fd.get(), kStalePartAge, path);
  }
  if (::flock(fd.get(), LOCK_SH) != 0) {
    return errno_status(errno, fmt::format("cannot lock the staging directory \"{}\"", path));
  }
  return ObjectReceiver(store, std::move(source), std::move(fd));
}

int64_t ObjectReceiver::partial_size(std::string_view id) const {
  if (!is_digest_hex(id)) return 0;
  struct stat st;
  if (::fstatat(incoming_.get(), partial_name(id).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISREG(st.st_mode)) {
    return 0;
  }
  return st.st_size;
}

Status ObjectReceiver::start_blob(std::string_view id, int64_t offset) {
  partial_.reset();
  std::string shown = fmt::format("the staged part of blob {}", id);
  UniqueFd fd(::openat(incoming_.get(), partial_name(id).c_str(),
                       O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open {}", shown));
  // Two transfers of the same blob into one store would write over each other.
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    return error(Code::kAborted,
                 "another transfer is receiving blob {} into this node's store; retry when it "
                 "has finished",
                 id);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return errno_status(errno, fmt::format("cannot stat {}", shown));
  Partial partial{std::string(id), std::move(fd), Sha256(), 0};
  if (offset == 0) {
    if (::ftruncate(partial.fd.get(), 0) != 0) {
      return errno_status(errno, fmt::format("cannot truncate {}", shown));
    }
  } else {
    if (st.st_size != offset) {
      return error(Code::kFailedPrecondition,
                   "{} from {} resumes at byte {}, but {} bytes of it are staged here", id, source_,
                   offset, st.st_size);
    }
    ROSETCTL_RETURN_IF_ERROR(hash_prefix(partial.fd.get(), offset, partial.hash, shown));
    partial.received = offset;
  }
  partial_ = std::move(partial);
  return Status::ok();
}

Expected<bool> ObjectReceiver::blob_chunk(std::string_view id, int64_t offset,
                                          std::string_view data, int64_t size) {
  if (!is_digest_hex(id)) return error(Code::kInvalidArgument, "\"{}\" is not a blob id", id);
  if (!partial_ || partial_->id != id || offset == 0) {
    ROSETCTL_RETURN_IF_ERROR(start_blob(id, offset));
  }
  if (offset != partial_->received) {
    return error(Code::kDataLoss,
                 "blob {} from {}: a chunk at byte {} arrived where byte {} was due", id, source_,
                 offset, partial_->received);
  }
  if (size < 0 || offset + static_cast<int64_t>(data.size()) > size) {
    partial_.reset();
    return error(Code::kDataLoss, "blob {} from {}: more bytes arrived than its size ({})", id,
                 source_, size);
  }
  ROSETCTL_RETURN_IF_ERROR(write_all_at(partial_->fd.get(), data, offset,
                                        fmt::format("the staged part of blob {}", id)));
  partial_->hash.update(data);
  partial_->received += static_cast<int64_t>(data.size());
  if (partial_->received < size) return false;
  return finish_blob(size);
}

Expected<bool> ObjectReceiver::finish_blob(int64_t size) {
  Partial partial = std::move(*partial_);
  partial_.reset();
  std::string name = partial_name(partial.id);
  std::string actual = partial.hash.finish_hex();
  if (actual != partial.id) {
    // Never stored, and not kept for a resume either: the next transfer fetches it whole.
    (void)::unlinkat(incoming_.get(), name.c_str(), 0);
    return error(Code::kDataLoss,
                 "blob {} from {} is corrupt: its {} bytes hash to {}; it was not stored (the "
                 "source's copy is damaged: `rosetctl snapshot verify` there names what holds it)",
                 partial.id, source_, size, actual);
  }
  if (::fchmod(partial.fd.get(), 0444) != 0) {
    return errno_status(errno, fmt::format("cannot make blob {} read-only", partial.id));
  }
  // Its writeback starts now, while the next blobs arrive; flush() waits for it.
  (void)::sync_file_range(partial.fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
  verified_.push_back({std::move(partial.id), std::move(partial.fd)});
  if (verified_.size() >= kFlushBatch) ROSETCTL_RETURN_IF_ERROR(flush());
  return true;
}

Status ObjectReceiver::flush() {
  std::vector<Verified> batch = std::move(verified_);
  verified_.clear();
  return parallel_for(batch.size(), kSyncWorkers, [&](std::size_t i, int) -> Status {
    auto added = store_->add_blob(batch[i].fd.get(), batch[i].id);
    if (!added) return added.status();
    // The staged name goes once the blob has its own; a crash between leaves a part file that
    // the next transfer of this blob finds whole (it resumes at its end and stores it).
    (void)::unlinkat(incoming_.get(), partial_name(batch[i].id).c_str(), 0);
    return Status::ok();
  });
}

Expected<Tree> ObjectReceiver::tree(std::string_view id, std::string_view text) const {
  if (!is_digest_hex(id)) return error(Code::kInvalidArgument, "\"{}\" is not a tree id", id);
  if (std::string actual = sha256_hex(text); actual != id) {
    return error(Code::kDataLoss,
                 "tree {} from {} is corrupt: its content hashes to {}; it was not stored", id,
                 source_, actual);
  }
  auto parsed = parse_tree(text);
  if (!parsed) return parsed.status().with_context(fmt::format("tree {} from {}", id, source_));
  auto stored = store_->put_tree(*parsed);
  if (!stored) return stored.status();
  if (*stored != id) {  // hashes right, yet not in the form this store writes
    return error(Code::kDataLoss, "tree {} from {} is not in canonical form (stored as {})", id,
                 source_, *stored);
  }
  return parsed;
}

Expected<CommitObject> ObjectReceiver::commit(std::string_view id, std::string_view text) const {
  if (!is_digest_hex(id)) return error(Code::kInvalidArgument, "\"{}\" is not a commit id", id);
  if (std::string actual = sha256_hex(text); actual != id) {
    return error(Code::kDataLoss,
                 "commit {} from {} is corrupt: its content hashes to {}; it was not stored", id,
                 source_, actual);
  }
  auto parsed = parse_commit(text);
  if (!parsed) return parsed.status().with_context(fmt::format("commit {} from {}", id, source_));
  if (serialize_commit(*parsed) != text) {
    return error(Code::kDataLoss, "commit {} from {} is not in canonical form", id, source_);
  }
  return parsed;
}

Status ObjectReceiver::store_commit(std::string_view id, const CommitObject& commit) const {
  auto stored = store_->put_commit(commit);
  if (!stored) return stored.status();
  if (*stored != id) {
    return error(Code::kInternal, "commit {} was stored as {}", id, *stored);
  }
  return Status::ok();
}

}  // namespace rosetctl
