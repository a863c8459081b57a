// Whether a call may run, decided before any handler does. This host's services do not judge
// callers: a serve puts a gate in front of every server (cluster/authorization.h decides from
// the caller's certificate and sets the gate at assembly), and each entry point (call_log.h's
// run_logged, the streaming ones) asks it for the decision. With no gate set every call is
// refused: handlers fail closed.
#pragma once

#include <grpcpp/server_context.h>

#include <memory>
#include <string>

#include "core/status.h"

namespace rosetctl {

// What the handler's thread holds for the call while it runs (a transfer grant the call
// carries, made current for the transfers the handler starts). Released when the call ends.
class CallCarried {
 public:
  virtual ~CallCarried() = default;
};

struct CallAdmission {
  Status status;             // OK: the call may run; else why not (PERMISSION_DENIED)
  bool local_caller = true;  // this host's own (unix socket, in-process channel)
  std::string caller;        // who called, for the log line's peer= field ("" when local)
};

class CallGate {
 public:
  virtual ~CallGate() = default;
  // The decision made for `call`, and who it was made for.
  virtual CallAdmission admission_of(const grpc::ServerContextBase& call) const = 0;
  // What `call` carries for its handler's thread; null when nothing. Made on that thread.
  virtual std::unique_ptr<CallCarried> carried_by(const grpc::ServerContextBase& call) const = 0;
};

// The gate every server of this process answers behind; set once, before the first server
// starts (the gate lives as long as the process).
void set_call_gate(const CallGate& gate);

// The gate's decision; PERMISSION_DENIED when no gate is set.
CallAdmission admission_of(const grpc::ServerContextBase& call);
std::unique_ptr<CallCarried> carried_by(const grpc::ServerContextBase& call);

}  // namespace rosetctl
