// The mark an image volume carries while its filesystem may be frozen (images/<id>.frozen).
//
// The kernel tells whether a filesystem is frozen only through FIFREEZE itself (EBUSY when it is
// frozen already), and freezing a healthy filesystem to ask writes out its dirty data and stalls
// its writers: no health check may do that to every connected volume. So a freeze rosetctl makes
// is marked first (and the mark locked while the freeze lasts), and a freeze someone else made is
// marked when a snapshot meets it. A volume's condition asks the kernel only when its mark is
// there and nobody holds it: a snapshot that died frozen, or a freeze by someone else; the check
// removes the mark once the filesystem is thawed.
#pragma once

#include <string>

#include "core/status.h"
#include "core/unique_fd.h"

namespace rosetctl {

class FreezeMark {
 public:
  // Writes and locks the mark, before a freeze.
  static Expected<FreezeMark> take(const std::string& path);
  // Marks a freeze someone else made (found by a snapshot); nobody holds that mark.
  static Status note_foreign(const std::string& path);
  // Whether a mark is there that nobody holds (no snapshot of ours is running).
  static bool unheld(const std::string& path);
  static void remove(const std::string& path);

  FreezeMark(FreezeMark&&) noexcept = default;
  FreezeMark& operator=(FreezeMark&&) noexcept = default;
  // After the thaw: the mark goes (unless keep() was called), then the lock.
  ~FreezeMark();
  // The freeze failed: leave the mark for the condition check.
  void keep() { path_.clear(); }

 private:
  FreezeMark(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  UniqueFd fd_;
  std::string path_;
};

}  // namespace rosetctl
