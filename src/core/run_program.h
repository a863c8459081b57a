// Running a helper program (mkfs.ext4, resize2fs, xfs_growfs, ...) to completion: an argv
// vector and never a shell, stdin from /dev/null, stdout and stderr captured, a deadline.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

struct ProgramResult {
  int exit_code = -1;  // meaningful when signal == 0
  int signal = 0;      // the signal that ended the program, 0 when it exited
  std::string out;     // captured stdout and stderr, each cut at the capture limit
  std::string err;
  // Whether the program printed more than the limit: `out` (`err`) is then only the start of
  // it, which a caller that parses the output must not take for the whole.
  bool out_cut = false;
  bool err_cut = false;

  static constexpr size_t kMaxCapturedBytes = 64 * 1024;  // the default capture limit

  bool succeeded() const { return signal == 0 && exit_code == 0; }
  // "exit code 1: <last line of stderr>" (or of stdout when stderr is empty), for messages.
  std::string describe() const;
};

// The absolute path of `name`: searched in $PATH, then in /usr/sbin, /sbin, /usr/bin and /bin
// (a daemon's PATH often lacks the sbin directories where mkfs and friends live). NOT_FOUND,
// naming the program and `package` to install, when it is nowhere.
Expected<std::string> find_program(std::string_view name, std::string_view package);

// Runs argv[0] (an absolute path, see find_program) with `argv`, an environment of only our
// PATH and LC_ALL=C (messages untranslated; none of our variables, which may hold secrets) and
// no descriptors beyond 0-2. A
// program that exits non-zero is a ProgramResult, not an error: the caller knows which codes
// mean what. Past `timeout` the program is killed (SIGKILL) and the call is DEADLINE_EXCEEDED.
// Each of stdout and stderr is kept up to `max_captured` bytes (the rest is read and dropped,
// and out_cut / err_cut say so).
Expected<ProgramResult> run_program(const std::vector<std::string>& argv,
                                    std::chrono::milliseconds timeout,
                                    size_t max_captured = ProgramResult::kMaxCapturedBytes);

// The NULL-terminated char* array exec and posix_spawn take, pointing into `strings`.
std::vector<char*> exec_pointers(std::vector<std::string>& strings);

}  // namespace rosetctl
