// One FUSE client process (roset-fuse) outside our own process tree: started detached in its own
// session (so it outlives `serve` and the CLI run that started it, and no zombie is left for
// us to reap), identified by pid and start time (so a reused pid is never mistaken for it),
// waited for until its mount appears, and stopped politely, then firmly.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_time = 0;  // field 22 of /proc/<pid>/stat (clock ticks since boot)

  bool operator==(const ProcessIdentity&) const = default;
};

// The start time of a live (not zombie) process, or 0 when there is none.
uint64_t process_start_time(pid_t pid);

// The parent of a process, or 0 when it is gone.
pid_t parent_pid(pid_t pid);

// True while that very process runs (same pid and start time, not a zombie).
bool is_running(const ProcessIdentity& process);

// Starts `argv` (argv[0] absolute) with exactly `environment`, in a new session, stdin from
// /dev/null, stdout and stderr appended to `log_path` (created 0600), no other descriptors.
// Double-forked: init adopts it, so it survives us. Fails if the program cannot be executed.
Expected<ProcessIdentity> spawn_detached(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& environment,
                                         const std::string& log_path);

// Waits until a FUSE filesystem is mounted at `mountpoint`. FAILED_PRECONDITION (with the last
// line of `log_path`, escaped and without `api_key`: the client may print what the API answered
// it) when the process exits first; DEADLINE_EXCEEDED after `timeout`.
Status wait_for_fuse_mount(const ProcessIdentity& process, const std::string& mountpoint,
                           const std::string& log_path, std::chrono::milliseconds timeout,
                           std::string_view api_key);

// True when a FUSE filesystem is mounted at `mountpoint` (mountinfo, not stat: a dead FUSE
// mount still shows there).
bool fuse_mounted_at(const std::string& mountpoint);

// SIGTERM; after `grace`, `fusermount3 -u` of the mountpoint; after another `grace`, SIGKILL;
// finally a lazy unmount of whatever is left at `mountpoint`. Best effort; says what it did not
// manage.
Status stop_fuse_process(const ProcessIdentity& process, const std::string& mountpoint,
                         std::chrono::milliseconds grace);

// Pids of processes (other than us) with an argument at or below `dir`: FUSE clients serving a
// mountpoint there, found after a crash lost their record.
std::vector<pid_t> processes_with_argument_under(const std::string& dir);

// The last non-empty line of a log file (at most 300 bytes), for error messages.
std::string last_log_line(const std::string& log_path);

}  // namespace rosetctl
