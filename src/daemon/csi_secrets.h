// The one place a CSI request's `secrets` map is read into the providers' StringMap.
#pragma once

#include <google/protobuf/map.h>

#include <string>

#include "providers/provider.h"

namespace rosetctl {

// The request's secrets, each value without one trailing line ending ("\n" or "\r\n").
// Kubernetes Secrets made with `kubectl create secret --from-file` hold the file's bytes, and an
// editor ends a file with a newline: a CHAP password or an API key never ends with one, so the
// newline is the file's, not the secret's. Only one is removed: anything else is the caller's.
StringMap csi_secrets(const google::protobuf::Map<std::string, std::string>& secrets);

}  // namespace rosetctl
