// Log-safe text of a CSI message: every field the spec marks `csi_secret` is redacted, found by
// walking the descriptors (no per-call hand redaction to forget).
#pragma once

#include <google/protobuf/message.h>

#include <string>

namespace rosetctl {

inline constexpr const char* kRedacted = "<redacted>";

// Copy of `message` with every csi_secret field (at any depth) redacted: map values and strings
// become "<redacted>" (map keys stay, they name which secrets were given), other types are
// cleared.
std::unique_ptr<google::protobuf::Message> redacted_copy(const google::protobuf::Message& message);

// One-line text form of redacted_copy(message).
std::string redacted_text(const google::protobuf::Message& message);

}  // namespace rosetctl
