// The thread's current call (see call_scope.h).
#include "core/call_scope.h"

namespace rosetctl {
namespace {

thread_local const CallLimits* t_current = nullptr;

}  // namespace

Status CallLimits::check() const {
  // gRPC cancels a call whose deadline passed too: the deadline first, to say which it was.
  Clock::time_point now = Clock::now();
  if (now >= deadline_) return deadline_passed();
  if (cancelled_ && cancelled_()) {
    // A client ends its call when its own deadline passes, a moment before ours (which gRPC set
    // from the timeout as the request arrived, a network's latency later): a cancel that close
    // to the deadline is the deadline passing.
    if (now + kDeadlineSlack >= deadline_) return deadline_passed();
    return Status(Code::kCancelled, "the client cancelled the call; it was stopped and undone");
  }
  return Status::ok();
}

Status CallLimits::deadline_passed() {
  return Status(Code::kDeadlineExceeded,
                "the call's deadline passed before it was done; it was stopped and undone, retry "
                "with a longer deadline");
}

CurrentCall::CurrentCall(const CallLimits* limits) : previous_(t_current) {
  t_current = limits;
}

CurrentCall::~CurrentCall() {
  t_current = previous_;
}

const CallLimits* current_call() {
  return t_current;
}

Status check_current_call() {
  return t_current == nullptr ? Status::ok() : t_current->check();
}

}  // namespace rosetctl
