// Formatting of the per-call log lines.
#include "daemon/call_log.h"

#include <google/protobuf/descriptor.h>
#include <spdlog/spdlog.h>

#include "core/validate.h"
#include "daemon/redact.h"

namespace rosetctl {
namespace {

// The object a call is about, for the one-line summary: the first of these fields that is set.
std::string subject_of(const google::protobuf::Message& request) {
  static constexpr std::string_view kFields[] = {
      "volume_id", "source_volume_id", "snapshot_id", "name", "node_id", "name_or_id", "reference"};
  const auto* descriptor = request.GetDescriptor();
  const auto* reflection = request.GetReflection();
  for (std::string_view name : kFields) {
    const auto* field = descriptor->FindFieldByName(std::string(name));
    if (field == nullptr ||
        field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_STRING ||
        field->is_repeated()) {
      continue;
    }
    std::string value = reflection->GetString(request, field);
    if (!value.empty()) return fmt::format(" {}={}", name, display_quoted(value));
  }
  return "";
}

}  // namespace

void log_call_start(std::string_view method, const google::protobuf::Message& request) {
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("{} request: {}", method, redacted_text(request));
  }
}

void log_call_end(std::string_view method, const CallAdmission& caller,
                  const google::protobuf::Message& request,
                  const google::protobuf::Message& response, const Status& status,
                  std::chrono::steady_clock::duration elapsed) {
  double ms = std::chrono::duration<double, std::milli>(elapsed).count();
  if (spdlog::should_log(spdlog::level::debug) && status.is_ok()) {
    spdlog::debug("{} response: {}", method, redacted_text(response));
  }
  // kubelet's liveness probe asks every few seconds for as long as the node runs: a local
  // Probe that found everything ready is a debug line. A failed one, and any remote caller's
  // (the audit trail below), is logged like every other call.
  if (status.is_ok() && caller.local_caller && method == "Probe") {
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("Probe duration={:.2f}ms status=OK", ms);
    return;
  }
  // subject_of() reflects over the request, which builds the protobuf descriptor pool the first
  // time: a CLI run (which logs calls only with -v) would pay for it on every invocation.
  if (!spdlog::should_log(spdlog::level::info)) return;
  // Who called, when it was not this host: the audit trail of remote calls.
  std::string by = caller.local_caller ? "" : fmt::format(" peer={}", caller.caller);
  if (status.is_ok()) {
    spdlog::info("{}{}{} duration={:.2f}ms status=OK", method, subject_of(request), by, ms);
  } else {
    // The message quotes what callers and servers said: escaped like every field, it stays
    // inside its quotes and on this line.
    spdlog::info("{}{}{} duration={:.2f}ms status={} message=\"{}\"", method, subject_of(request),
                 by, ms, code_name(status.code()), escape_text(status.message()));
  }
}

}  // namespace rosetctl
