// The size bound on requests' map fields; see request_limits.h.
#include "daemon/request_limits.h"

#include <google/protobuf/descriptor.h>

#include <string>

namespace rosetctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

Status check_fields(const Message& message, const std::string& prefix) {
  const auto* descriptor = message.GetDescriptor();
  const auto* reflection = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    std::string name = prefix + field->name();
    if (field->is_map()) {
      int entries = reflection->FieldSize(message, field);
      std::size_t bytes = 0;
      for (int e = 0; e < entries; ++e) {
        // Serialized size: key and value bytes plus a few bytes of framing each, which is
        // what the map costs on the wire and roughly what it costs in memory.
        bytes += reflection->GetRepeatedMessage(message, field, e).ByteSizeLong();
      }
      if (bytes > kMaxMapBytes) {
        return error(Code::kInvalidArgument,
                     "{} holds {} bytes in {} entries; the limit is {} bytes (CSI's is 4096)", name,
                     bytes, entries, kMaxMapBytes);
      }
    } else if (!field->is_repeated() && reflection->HasField(message, field)) {
      ROSETCTL_RETURN_IF_ERROR(check_fields(reflection->GetMessage(message, field), name + "."));
    }
  }
  return Status::ok();
}

}  // namespace

Status check_map_sizes(const Message& request) {
  // Every request under the limit as a whole passes without reflection, which would build
  // the descriptor pool (a CLI run pays for that on every invocation; see call_log.cc).
  if (request.ByteSizeLong() <= kMaxMapBytes) return Status::ok();
  return check_fields(request, "");
}

}  // namespace rosetctl
