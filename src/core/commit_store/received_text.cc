// A tree's or commit's text received into an unnamed file, bounded and hashed as it arrives.
#include "core/commit_store/received_text.h"

#include <fcntl.h>

#include <cerrno>

namespace rosetctl {

Expected<ReceivedText> ReceivedText::open(int dir, std::string what, int64_t limit) {
  UniqueFd fd(::openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return errno_status(errno, fmt::format("cannot make a file to receive {} into", what));
  }
  return ReceivedText(std::move(fd), std::move(what), limit);
}

Status ReceivedText::append(int64_t offset, std::string_view data, int64_t size) {
  if (size_ < 0) {
    // Every text has at least its header line: a size of 0 (or less) is no text of ours.
    if (size <= 0 || size > limit_) {
      return error(Code::kDataLoss,
                   "{} is said to hold {} bytes; a text of this kind holds 1 to {} bytes, so it "
                   "was refused and not stored",
                   what_, size, limit_);
    }
    size_ = size;
  }
  if (size != size_) {
    return error(Code::kDataLoss,
                 "{} was said to hold {} bytes, then {}; it was refused and not stored", what_,
                 size_, size);
  }
  if (offset != received_) {
    return error(Code::kDataLoss, "{}: a chunk at byte {} arrived where byte {} was due", what_,
                 offset, received_);
  }
  if (static_cast<int64_t>(data.size()) > size_ - received_) {
    return error(Code::kDataLoss,
                 "{}: more bytes arrived than the {} it was said to hold; it was refused and not "
                 "stored",
                 what_, size_);
  }
  std::string_view rest = data;
  int64_t at = offset;
  while (!rest.empty()) {
    ssize_t written = ::pwrite(fd_.get(), rest.data(), rest.size(), at);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno_status(errno, fmt::format("cannot write {}", what_));
    rest.remove_prefix(static_cast<std::size_t>(written));
    at += written;
  }
  hash_.update(data);
  received_ += static_cast<int64_t>(data.size());
  return Status::ok();
}

Expected<std::string> ReceivedText::finish(std::string_view id) {
  if (size_ < 0 || received_ < size_) {
    return error(Code::kUnavailable,
                 "{} did not arrive whole ({} of {} bytes): the transfer ended first; retry", what_,
                 received_, std::max<int64_t>(size_, 0));
  }
  if (std::string actual = hash_.finish_hex(); actual != id) {
    return error(Code::kDataLoss, "{} is corrupt: its content hashes to {}; it was not stored",
                 what_, actual);
  }
  std::string text(static_cast<std::size_t>(size_), '\0');
  std::size_t filled = 0;
  while (filled < text.size()) {
    ssize_t got =
        ::pread(fd_.get(), text.data() + filled, text.size() - filled, static_cast<off_t>(filled));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return errno_status(got < 0 ? errno : EIO, fmt::format("cannot read back {}", what_));
    }
    filled += static_cast<std::size_t>(got);
  }
  return text;
}

}  // namespace rosetctl
