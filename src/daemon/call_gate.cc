// The process's call gate (call_gate.h).
#include "daemon/call_gate.h"

#include <atomic>

namespace rosetctl {
namespace {

std::atomic<const CallGate*> g_gate{nullptr};

}  // namespace

void set_call_gate(const CallGate& gate) {
  g_gate.store(&gate, std::memory_order_release);
}

CallAdmission admission_of(const grpc::ServerContextBase& call) {
  const CallGate* gate = g_gate.load(std::memory_order_acquire);
  if (gate != nullptr) return gate->admission_of(call);
  return {error(Code::kPermissionDenied,
                "this call was not authorized: this server has no authorization in front of it"),
          true, ""};
}

std::unique_ptr<CallCarried> carried_by(const grpc::ServerContextBase& call) {
  const CallGate* gate = g_gate.load(std::memory_order_acquire);
  return gate == nullptr ? nullptr : gate->carried_by(call);
}

}  // namespace rosetctl
