// Bounds on what one request may carry beyond gRPC's own message limit (4 MiB by default).
//
// CSI's map fields (parameters, secrets, volume_context, publish_context, mutable_parameters)
// are copied, logged (redacted), stored and handed to providers. The spec limits a map to
// 4 KiB; rosetctl takes up to 16 times that, so a CO that is lax about the spec still works,
// and refuses more, naming the field, before any handler copies it: a request of 100,000
// entries or a megabyte of "secret" is an attack or a bug, never a volume's real settings.
#pragma once

#include <google/protobuf/message.h>

#include <cstddef>

#include "core/status.h"

namespace rosetctl {

inline constexpr std::size_t kMaxMapBytes = 64 * 1024;

// INVALID_ARGUMENT naming the first map field (at any depth of singular message fields) whose
// keys and values together exceed kMaxMapBytes. Never quotes a value (it may be a secret).
Status check_map_sizes(const google::protobuf::Message& request);

}  // namespace rosetctl
