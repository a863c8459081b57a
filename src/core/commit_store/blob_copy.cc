// Verified blob copies (see blob_copy.h).
#include "core/commit_store/blob_copy.h"

#include <sys/stat.h>

namespace rosetctl {
namespace {

// What every damaged-blob error ends with: what happened to the restore and what to do.
constexpr std::string_view kDamagedBlobAdvice =
    "the restore was abandoned and left nothing behind; `rosetctl snapshot verify` lists every "
    "snapshot that holds this blob, and the next commit of a volume that still has this content "
    "stores it again";

}  // namespace

Status BlobCopier::copy(const CommitStore& store, std::string_view id, int64_t size, int dst_fd,
                        ContentBuffer& buffer, const std::string& user) {
  auto blob = store.open_blob(id);
  if (!blob) {
    // The commit names it, so it was stored: gone is lost, not "not found".
    if (blob.status().code() == Code::kNotFound) {
      return error(Code::kDataLoss, "{}: blob {} is missing from the commit store; {}", user, id,
                   kDamagedBlobAdvice);
    }
    return blob.status().with_context(user);
  }
  struct stat st;
  if (::fstat(blob->get(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect blob {}", id));
  }
  if (st.st_size != size) {
    return error(Code::kDataLoss, "{}: blob {} has {} bytes instead of {}; {}", user, id,
                 st.st_size, size, kDamagedBlobAdvice);
  }
  std::string shown = fmt::format("blob {}", id);
  bool cloned = false;
  if (size > 0 && reflink_works_.load(std::memory_order_relaxed)) {
    auto clone = clone_content(blob->get(), dst_fd, shown);
    if (!clone) return clone.status();
    cloned = *clone;
    if (!cloned) reflink_works_ = false;
  }
  auto hashed = cloned ? hash_content(dst_fd, size, -1, buffer, shown)
                       : hash_content(blob->get(), size, dst_fd, buffer, shown);
  if (!hashed) return hashed.status();
  if (hashed->short_read) {
    return error(Code::kDataLoss, "{}: blob {} ended before its {} bytes while being read; {}",
                 user, id, size, kDamagedBlobAdvice);
  }
  if (hashed->sha256 != id) {
    return error(Code::kDataLoss, "{}: blob {} is corrupt (its content hashes to {}); {}", user, id,
                 hashed->sha256, kDamagedBlobAdvice);
  }
  return Status::ok();
}

}  // namespace rosetctl
