// The RPC a thread works for: its deadline and whether its client has gone away. Handlers set it
// for their thread (daemon/call_log.h); long work (restores, clones, commits, verification, lock
// waits) asks `check_current_call()` between pieces and stops with CANCELLED or DEADLINE_EXCEEDED,
// unwinding as on any failure midway, so nothing is left half-done for a client that gave up.
// Work that outlives its call (a snapshot's commit after CreateSnapshot answered) runs on threads
// of its own and so answers to no call.
#pragma once

#include <chrono>
#include <functional>

#include "core/status.h"

namespace rosetctl {

class CallLimits {
 public:
  using Clock = std::chrono::system_clock;
  // `cancelled` is asked from any of the call's threads; it must be thread-safe and cheap.
  CallLimits(Clock::time_point deadline, std::function<bool()> cancelled)
      : deadline_(deadline), cancelled_(std::move(cancelled)) {}

  // OK while the call may go on; DEADLINE_EXCEEDED or CANCELLED when its client is gone.
  Status check() const;
  Clock::time_point deadline() const { return deadline_; }

  // How close to the deadline a client's cancel counts as the deadline passing (see check()).
  static constexpr std::chrono::milliseconds kDeadlineSlack{250};

 private:
  static Status deadline_passed();

  Clock::time_point deadline_;
  std::function<bool()> cancelled_;
};

// Makes `limits` the calling thread's call until destroyed (the previous one comes back).
class CurrentCall {
 public:
  explicit CurrentCall(const CallLimits* limits);
  ~CurrentCall();
  CurrentCall(const CurrentCall&) = delete;
  CurrentCall& operator=(const CurrentCall&) = delete;

 private:
  const CallLimits* previous_;
};

// The calling thread's call, or null when it works for none (a CLI's own step, background work).
const CallLimits* current_call();

// check() of the thread's call; OK when there is none.
Status check_current_call();

}  // namespace rosetctl
