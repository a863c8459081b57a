// FreezeMark: a file per image, flocked by the process whose freeze it marks.
#include "providers/common/freeze_mark.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

namespace rosetctl {
namespace {

int open_mark(const std::string& path) {
  return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

}  // namespace

Expected<FreezeMark> FreezeMark::take(const std::string& path) {
  UniqueFd fd(open_mark(path));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot write \"{}\"", path));
  if (::flock(fd.get(), LOCK_EX) != 0) {
    return errno_status(errno, fmt::format("cannot lock \"{}\"", path));
  }
  return FreezeMark(std::move(fd), path);
}

Status FreezeMark::note_foreign(const std::string& path) {
  UniqueFd fd(open_mark(path));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot write \"{}\"", path));
  return Status::ok();
}

bool FreezeMark::unheld(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return false;
  return ::flock(fd.get(), LOCK_SH | LOCK_NB) == 0;  // released when fd closes
}

void FreezeMark::remove(const std::string& path) {
  (void)::unlink(path.c_str());
}

FreezeMark::~FreezeMark() {
  if (!path_.empty() && fd_.valid()) remove(path_);
}

}  // namespace rosetctl
