// Process plumbing for FUSE clients: fork/exec detached, /proc inspection, signals.
#include "providers/roset/fuse_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/call_scope.h"
#include "core/directory_listing.h"
#include "core/mount_ops.h"
#include "core/mountinfo.h"
#include "core/run_program.h"
#include "core/unique_fd.h"
#include "core/validate.h"
#include "providers/roset/secret_scrub.h"

namespace rosetctl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(50);

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

bool write_all(int fd, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t done = ::write(fd, bytes, size);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    bytes += done;
    size -= static_cast<size_t>(done);
  }
  return true;
}

bool read_all(int fd, void* data, size_t size) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t got = ::read(fd, bytes, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

// Runs in the grandchild between fork and exec: async-signal-safe calls only.
[[noreturn]] void become_fuse_client(char* const* argv, char* const* envp, int log_fd,
                                     int status_fd) {
  ::setsid();
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig)
    ::signal(sig, SIG_DFL);
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0 ||
      ::chdir("/") != 0) {
    int err = errno;
    write_all(status_fd, &err, sizeof(err));
    ::_exit(127);
  }
  // Everything but 0-2 and the status pipe (close-on-exec) goes.
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != status_fd) ::close(fd);
  }
  ::execve(argv[0], argv, envp);
  int err = errno;
  write_all(status_fd, &err, sizeof(err));
  ::_exit(127);
}

}  // namespace

uint64_t process_start_time(pid_t pid) {
  std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string state;
  fields >> state;
  if (state == "Z" || state == "X") return 0;
  // Fields after the state: ppid(4) … starttime(22); the state was field 3.
  std::string value;
  for (int field = 4; field <= 22; ++field)
    fields >> value;
  return std::strtoull(value.c_str(), nullptr, 10);
}

pid_t parent_pid(pid_t pid) {
  std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string state;
  pid_t parent = 0;
  fields >> state >> parent;
  return parent;
}

bool is_running(const ProcessIdentity& process) {
  if (process.pid <= 0) return false;
  uint64_t started = process_start_time(process.pid);
  return started != 0 && started == process.start_time;
}

Expected<ProcessIdentity> spawn_detached(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& environment,
                                         const std::string& log_path) {
  UniqueFd log(
      ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!log.valid()) return errno_status(errno, fmt::format("cannot open \"{}\"", log_path));
  int pid_pipe[2];
  int status_pipe[2];
  if (::pipe2(pid_pipe, O_CLOEXEC) != 0) return errno_status(errno, "cannot create a pipe");
  UniqueFd pid_read(pid_pipe[0]);
  UniqueFd pid_write(pid_pipe[1]);
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) return errno_status(errno, "cannot create a pipe");
  UniqueFd status_read(status_pipe[0]);
  UniqueFd status_write(status_pipe[1]);

  // Everything the children need is built before fork: they may not allocate.
  std::vector<std::string> args = argv;
  std::vector<std::string> env = environment;
  std::vector<char*> arg_pointers = exec_pointers(args);
  std::vector<char*> env_pointers = exec_pointers(env);

  pid_t middle = ::fork();
  if (middle < 0) return errno_status(errno, "cannot fork");
  if (middle == 0) {
    pid_t grandchild = ::fork();
    if (grandchild == 0) {
      become_fuse_client(arg_pointers.data(), env_pointers.data(), log.get(), status_write.get());
    }
    write_all(pid_write.get(), &grandchild, sizeof(grandchild));
    ::_exit(grandchild < 0 ? 1 : 0);
  }
  pid_write.reset();
  status_write.reset();
  pid_t pid = -1;
  bool got_pid = read_all(pid_read.get(), &pid, sizeof(pid));
  int middle_status = 0;
  while (::waitpid(middle, &middle_status, 0) < 0 && errno == EINTR) {
  }
  if (!got_pid || pid <= 0)
    return error(Code::kInternal, "cannot start \"{}\": fork failed", argv[0]);
  int exec_errno = 0;
  if (read_all(status_read.get(), &exec_errno, sizeof(exec_errno))) {
    return errno_status(exec_errno, fmt::format("cannot run \"{}\"", argv[0]));
  }
  // The exec happened (the status pipe closed). Read the start time while it surely runs;
  // if it already died, report it as it would be found later.
  ProcessIdentity identity{pid, process_start_time(pid)};
  return identity;
}

bool fuse_mounted_at(const std::string& mountpoint) {
  auto table = MountTable::read();
  if (!table) return false;
  const MountEntry* entry = table->find_by_target(mountpoint);
  return entry != nullptr && entry->fs_type.starts_with("fuse");
}

std::string last_log_line(const std::string& log_path, std::string_view api_key) {
  std::string text = scrub_secret(read_file(log_path), api_key);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  size_t newline = text.rfind('\n');
  std::string line = newline == std::string::npos ? text : text.substr(newline + 1);
  return escape_text(line.substr(0, 300));
}

Status wait_for_fuse_mount(const ProcessIdentity& process, const std::string& mountpoint,
                           const std::string& log_path, std::chrono::milliseconds timeout,
                           std::string_view api_key) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (fuse_mounted_at(mountpoint)) return Status::ok();
    if (!is_running(process)) {
      std::string line = last_log_line(log_path, api_key);
      return error(Code::kFailedPrecondition,
                   "roset-fuse (pid {}) exited before mounting \"{}\"{}{}", process.pid, mountpoint,
                   line.empty() ? "" : ": ", line);
    }
    if (Clock::now() >= deadline) {
      return error(Code::kDeadlineExceeded,
                   "roset-fuse (pid {}) did not mount \"{}\" within {} s (--roset-fuse-timeout); "
                   "it was stopped",
                   process.pid, mountpoint, timeout.count() / 1000);
    }
    // The caller stops the process on any failure, a client that gave up included.
    ROSETCTL_RETURN_IF_ERROR(check_current_call());
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status stop_fuse_process(const ProcessIdentity& process, const std::string& mountpoint,
                         std::chrono::milliseconds grace) {
  auto gone_within = [&](std::chrono::milliseconds patience) {
    auto deadline = Clock::now() + patience;
    while (is_running(process) || fuse_mounted_at(mountpoint)) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(kPollInterval);
    }
    return true;
  };
  if (is_running(process)) ::kill(process.pid, SIGTERM);
  if (gone_within(grace)) return Status::ok();
  if (fuse_mounted_at(mountpoint)) {
    auto fusermount = find_program("fusermount3", "fuse3");
    if (!fusermount) fusermount = find_program("fusermount", "fuse");
    if (fusermount) (void)run_program({*fusermount, "-u", "-z", mountpoint}, grace);
  }
  if (gone_within(grace)) return Status::ok();
  if (is_running(process)) ::kill(process.pid, SIGKILL);
  if (fuse_mounted_at(mountpoint)) ::umount2(mountpoint.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  if (gone_within(grace)) return Status::ok();
  return error(Code::kInternal, "roset-fuse (pid {}) at \"{}\" could not be stopped", process.pid,
               mountpoint);
}

std::vector<pid_t> processes_with_argument_under(const std::string& dir) {
  std::vector<pid_t> out;
  auto names = list_directory("/proc");
  if (!names) return out;
  pid_t self = ::getpid();
  for (const std::string& name : *names) {
    char* end = nullptr;
    long pid = std::strtol(name.c_str(), &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    std::string cmdline = read_file(fmt::format("/proc/{}/cmdline", pid));
    size_t start = 0;
    bool first = true;
    while (start < cmdline.size()) {
      size_t stop = cmdline.find('\0', start);
      if (stop == std::string::npos) stop = cmdline.size();
      std::string_view argument(cmdline.data() + start, stop - start);
      if (!first && path_is_within(argument, dir)) {
        out.push_back(static_cast<pid_t>(pid));
        break;
      }
      first = false;
      start = stop + 1;
    }
  }
  return out;
}

}  // namespace rosetctl
