// Verifying and staging objects received from another store.
#include "core/commit_store/object_receiver.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/commit_store/file_content.h"
#include "core/directory_listing.h"
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
  auto names = list_directory_at(dir, std::string(shown));
  if (!names) {
    spdlog::warn("cannot list the staging directory: {}", names.status().message());
    return;
  }
  const auto now = std::chrono::system_clock::now();
  for (const std::string& name : *names) {
    if (!name.ends_with(".part")) continue;
    struct stat st;
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    auto modified = std::chrono::system_clock::time_point(
        std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec));
    if (now - modified < age) continue;
    if (::unlinkat(dir, name.c_str(), 0) == 0) {
      spdlog::info("removed {}/{} ({} bytes): part of a transfer abandoned {} hours ago", shown,
                   escape_text(name), st.st_size,
                   std::chrono::duration_cast<std::chrono::hours>(now - modified).count());
    }
  }
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

Expected<int64_t> ObjectReceiver::seed_part(std::string_view id, std::string_view earlier) {
  if (!is_digest_hex(id)) return 0;
  std::string shown = fmt::format("the staged part of blob {}", id);
  UniqueFd fd(::openat(incoming_.get(), partial_name(id).c_str(),
                       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    if (errno == EEXIST) return 0;  // a part of an earlier transfer, which resumes
    return errno_status(errno, fmt::format("cannot create {}", shown));
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return 0;  // another transfer's, just made
  auto from = store_->open_blob(earlier);
  if (!from) return from.status();
  struct stat st;
  if (::fstat(from->get(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot stat blob {}", earlier));
  }
  auto copied = clone_or_copy(from->get(), fd.get(), st.st_size, shown);
  if (!copied) {
    (void)::unlinkat(incoming_.get(), partial_name(id).c_str(), 0);
    return copied.status();
  }
  return static_cast<int64_t>(st.st_size);
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

void ObjectReceiver::expect_blob(std::string_view id, int64_t size) {
  wanted_blobs_.insert_or_assign(std::string(id), size);
}

Status ObjectReceiver::refuse_blob(std::string_view refused, std::string_view why) {
  // A copy: `refused` may be the id of the part reset below.
  const std::string id(refused);
  // Only a part this receiver holds (and so has locked) is removed: a part of the same name that
  // another transfer is writing is not this one's to take.
  if (partial_ && partial_->id == id) {
    (void)::unlinkat(incoming_.get(), partial_name(id).c_str(), 0);
    partial_.reset();
  }
  if (auto wanted = wanted_blobs_.find(id); wanted != wanted_blobs_.end()) {
    wanted_blobs_.erase(wanted);
  }
  return error(Code::kDataLoss, "blob {} from {}: {}; it was refused and not stored", id, source_,
               why);
}

Expected<bool> ObjectReceiver::blob_chunk(std::string_view id, int64_t offset,
                                          std::string_view data, int64_t size) {
  auto wanted = wanted_blobs_.find(id);
  if (wanted == wanted_blobs_.end()) {
    return error(Code::kDataLoss,
                 "{} sent blob {}, which was not asked for (or had arrived whole already); it "
                 "was refused and not stored",
                 source_, is_digest_hex(id) ? std::string(id) : display_quoted(id));
  }
  const int64_t expected = wanted->second;
  if (partial_ && partial_->id != id) {
    return refuse_blob(partial_->id, fmt::format("blob {} began before it was whole", id));
  }
  if (size != expected) {
    return refuse_blob(
        id, fmt::format("it was said to hold {} bytes, where its tree says {}", size, expected));
  }
  if (offset < 0 || offset > expected || static_cast<int64_t>(data.size()) > expected - offset) {
    return refuse_blob(id, fmt::format("a chunk of {} bytes at byte {} reaches past the {} bytes "
                                       "its tree says it holds",
                                       data.size(), offset, expected));
  }
  if (!partial_) ROSETCTL_RETURN_IF_ERROR(start_blob(id, offset));
  if (offset != partial_->received) {
    return refuse_blob(id, fmt::format("a chunk at byte {} arrived where byte {} was due", offset,
                                       partial_->received));
  }
  ROSETCTL_RETURN_IF_ERROR(write_all_at(partial_->fd.get(), data, offset,
                                        fmt::format("the staged part of blob {}", id)));
  partial_->hash.update(data);
  partial_->received += static_cast<int64_t>(data.size());
  if (partial_->received < size) return false;
  wanted_blobs_.erase(wanted);
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

Status ObjectReceiver::expect_text(TextKind kind, std::string_view id) {
  if (!is_digest_hex(id)) {
    return error(Code::kInvalidArgument, "{} is not an object id", display_quoted(id));
  }
  wanted_texts_.insert_or_assign(std::string(id), WantedText{kind, std::nullopt});
  return Status::ok();
}

namespace {

const char* kind_name(ObjectReceiver::TextKind kind) {
  return kind == ObjectReceiver::TextKind::kTree ? "tree" : "commit";
}

}  // namespace

Status ObjectReceiver::text_chunk(TextKind kind, std::string_view id, int64_t offset,
                                  std::string_view data, int64_t size) {
  auto wanted = wanted_texts_.find(id);
  if (wanted == wanted_texts_.end() || wanted->second.kind != kind) {
    return error(Code::kDataLoss, "{} sent {} {}, which was not asked for; it was not stored",
                 source_, kind_name(kind),
                 is_digest_hex(id) ? std::string(id) : display_quoted(id));
  }
  std::optional<ReceivedText>& text = wanted->second.text;
  if (!text) {
    auto opened = ReceivedText::open(incoming_.get(),
                                     fmt::format("{} {} from {}", kind_name(kind), id, source_),
                                     kind == TextKind::kTree ? kMaxTreeBytes : kMaxCommitBytes);
    if (!opened) return opened.status();
    text.emplace(std::move(*opened));
  }
  Status appended = text->append(offset, data, size);
  if (!appended) wanted_texts_.erase(wanted);  // what arrived of it goes (its file has no name)
  return appended;
}

Expected<std::string> ObjectReceiver::whole_text(TextKind kind, std::string_view id) {
  auto wanted = wanted_texts_.find(id);
  if (wanted == wanted_texts_.end() || wanted->second.kind != kind || !wanted->second.text) {
    return error(Code::kUnavailable, "{} ended the transfer before {} {} arrived; retry", source_,
                 kind_name(kind), id);
  }
  auto text = wanted->second.text->finish(id);
  wanted_texts_.erase(wanted);
  return text;
}

Expected<Tree> ObjectReceiver::tree(std::string_view id) {
  auto text = whole_text(TextKind::kTree, id);
  if (!text) return text.status();
  return store_tree(id, *text);
}

Expected<CommitObject> ObjectReceiver::commit(std::string_view id) {
  auto text = whole_text(TextKind::kCommit, id);
  if (!text) return text.status();
  return parse_commit_text(id, *text);
}

Expected<Tree> ObjectReceiver::tree(std::string_view id, std::string_view text) const {
  if (!is_digest_hex(id)) return error(Code::kInvalidArgument, "\"{}\" is not a tree id", id);
  if (static_cast<int64_t>(text.size()) > kMaxTreeBytes) {
    return error(Code::kDataLoss, "tree {} from {} holds {} bytes, over the limit of {}", id,
                 source_, text.size(), kMaxTreeBytes);
  }
  if (std::string actual = sha256_hex(text); actual != id) {
    return error(Code::kDataLoss,
                 "tree {} from {} is corrupt: its content hashes to {}; it was not stored", id,
                 source_, actual);
  }
  return store_tree(id, text);
}

Expected<Tree> ObjectReceiver::store_tree(std::string_view id, std::string_view text) const {
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
  if (static_cast<int64_t>(text.size()) > kMaxCommitBytes) {
    return error(Code::kDataLoss, "commit {} from {} holds {} bytes, over the limit of {}", id,
                 source_, text.size(), kMaxCommitBytes);
  }
  if (std::string actual = sha256_hex(text); actual != id) {
    return error(Code::kDataLoss,
                 "commit {} from {} is corrupt: its content hashes to {}; it was not stored", id,
                 source_, actual);
  }
  return parse_commit_text(id, text);
}

Expected<CommitObject> ObjectReceiver::parse_commit_text(std::string_view id,
                                                         std::string_view text) const {
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
