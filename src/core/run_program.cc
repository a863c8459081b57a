// Helper programs via posix_spawn with pipes for stdout/stderr and a poll(2) loop for the
// deadline.
#include "core/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/unique_fd.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kSystemDirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
// A child's PATH when ours has none.
constexpr std::string_view kDefaultPath = "/usr/sbin:/usr/bin:/sbin:/bin";

std::string last_line(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  size_t newline = text.rfind('\n');
  return std::string(newline == std::string_view::npos ? text : text.substr(newline + 1));
}

// The child's whole environment: PATH, for helpers that run other programs, and
// LC_ALL=C, for untranslated messages. Nothing else of ours: serve's environment may hold
// secrets (ROSET_API_KEY, whatever an operator exported) that mkfs, tgtadm or iscsiadm must
// never see (a child's /proc/PID/environ is as readable as its own).
std::vector<std::string> child_environment() {
  std::vector<std::string> out;
  const char* path = std::getenv("PATH");
  out.emplace_back(fmt::format("PATH={}", path != nullptr ? path : kDefaultPath));
  out.emplace_back("LC_ALL=C");
  return out;
}

// posix_spawn's attribute and file-action objects, released on every path.
class SpawnSetup {
 public:
  SpawnSetup() {
    ::posix_spawnattr_init(&attributes_);
    ::posix_spawn_file_actions_init(&actions_);
  }
  ~SpawnSetup() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attributes_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  // The child starts with default signal dispositions and nothing blocked, whatever the
  // server's threads had set, and with only stdin/stdout/stderr open.
  int prepare(int out_fd, int err_fd) {
    sigset_t none;
    sigset_t all;
    sigemptyset(&none);
    sigfillset(&all);
    int rc = ::posix_spawnattr_setsigmask(&attributes_, &none);
    if (rc == 0) rc = ::posix_spawnattr_setsigdefault(&attributes_, &all);
    if (rc == 0) {
      rc = ::posix_spawnattr_setflags(&attributes_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    }
    if (rc == 0) rc = ::posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&actions_, out_fd, 1);
    if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&actions_, err_fd, 2);
    if (rc == 0) rc = ::posix_spawn_file_actions_addclosefrom_np(&actions_, 3);
    return rc;
  }

  const posix_spawnattr_t* attributes() const { return &attributes_; }
  const posix_spawn_file_actions_t* actions() const { return &actions_; }

 private:
  posix_spawnattr_t attributes_;
  posix_spawn_file_actions_t actions_;
};

// Appends what is readable on `fd` to `into`, up to `limit` bytes in all (`cut` set when more
// came); false once it reached end of file.
bool drain(int fd, std::string* into, size_t limit, bool* cut) {
  char buffer[8192];
  ssize_t got = ::read(fd, buffer, sizeof(buffer));
  if (got < 0) return errno == EINTR || errno == EAGAIN;
  if (got == 0) return false;
  size_t room = limit - std::min(into->size(), limit);
  if (static_cast<size_t>(got) > room) *cut = true;
  into->append(buffer, std::min(room, static_cast<size_t>(got)));
  return true;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Waits for the child until `deadline`; false (and `status` untouched) when it is still
// running then. A program may close its output long before it exits.
bool wait_until(pid_t pid, Clock::time_point deadline, int* status) {
  while (true) {
    pid_t done = ::waitpid(pid, status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return true;
    if (Clock::now() >= deadline) return false;
    ::usleep(10'000);
  }
}

std::string seconds(std::chrono::milliseconds duration) {
  return fmt::format("{:.1f} s", static_cast<double>(duration.count()) / 1000.0);
}

}  // namespace

std::string ProgramResult::describe() const {
  // A program's output is outside text: escaped, it cannot add lines to a message or log.
  // Past the capture limit, the last line kept is not the program's last (its error, for
  // iscsiadm and tgtadm, comes at the end): say so rather than quote a line from the middle.
  bool from_err = !err.empty();
  std::string detail =
      (from_err ? err_cut : out_cut)
          ? fmt::format("its {} ran past the {} bytes rosetctl reads, and its last line with it",
                        from_err ? "error output" : "output", from_err ? err.size() : out.size())
          : escape_text(last_line(from_err ? err : out));
  std::string head = signal != 0 ? fmt::format("killed by signal {}", signal)
                                 : fmt::format("exit code {}", exit_code);
  return detail.empty() ? head : fmt::format("{}: {}", head, detail);
}

Expected<std::string> find_program(std::string_view name, std::string_view package) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(dir);
      rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    }
  }
  for (std::string_view dir : kSystemDirs)
    dirs.emplace_back(dir);
  for (const std::string& dir : dirs) {
    std::string candidate = fmt::format("{}/{}", dir, name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return error(Code::kFailedPrecondition,
               "program \"{}\" is not installed (looked in $PATH, /usr/sbin and /sbin); install "
               "the {} package",
               name, package);
}

Expected<ProgramResult> run_program(const std::vector<std::string>& argv,
                                    std::chrono::milliseconds timeout, size_t max_captured) {
  if (argv.empty()) return error(Code::kInvalidArgument, "run_program: empty argv");
  const std::string& program = argv.front();
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return errno_status(errno, fmt::format("cannot create a pipe to run \"{}\"", program));
  }
  UniqueFd out_read(out_pipe[0]);
  UniqueFd out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return errno_status(errno, fmt::format("cannot create a pipe to run \"{}\"", program));
  }
  UniqueFd err_read(err_pipe[0]);
  UniqueFd err_write(err_pipe[1]);

  SpawnSetup setup;
  if (int rc = setup.prepare(out_write.get(), err_write.get()); rc != 0) {
    return errno_status(rc, fmt::format("cannot prepare to run \"{}\"", program));
  }
  std::vector<std::string> args = argv;
  std::vector<std::string> env = child_environment();
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, program.c_str(), setup.actions(), setup.attributes(),
                         exec_pointers(args).data(), exec_pointers(env).data());
  if (rc != 0) return errno_status(rc, fmt::format("cannot run \"{}\"", program));
  out_write.reset();  // the child has its copies; end of file arrives when it exits
  err_write.reset();

  ProgramResult result;
  Clock::time_point deadline = Clock::now() + timeout;
  bool out_open = true;
  bool err_open = true;
  bool timed_out = false;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_read.get() : -1, POLLIN, 0},
                     {err_open ? err_read.get() : -1, POLLIN, 0}};
    int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
    if (ready < 0 && errno != EINTR) {
      int err = errno;
      ::kill(pid, SIGKILL);
      wait_for(pid);
      return errno_status(err, fmt::format("cannot read the output of \"{}\"", program));
    }
    if (ready <= 0) continue;
    if (out_open && fds[0].revents != 0)
      out_open = drain(out_read.get(), &result.out, max_captured, &result.out_cut);
    if (err_open && fds[1].revents != 0)
      err_open = drain(err_read.get(), &result.err, max_captured, &result.err_cut);
  }
  int status = 0;
  if (timed_out || !wait_until(pid, deadline, &status)) {
    ::kill(pid, SIGKILL);
    wait_for(pid);
    return error(Code::kDeadlineExceeded, "\"{}\" did not finish within {} and was killed", program,
                 seconds(timeout));
  }
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

std::vector<char*> exec_pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& text : strings)
    out.push_back(text.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace rosetctl
