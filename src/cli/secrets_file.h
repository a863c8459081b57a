// CSI secrets for CLI runs (what kubelet's sidecars send from a Kubernetes Secret): a JSON
// object of strings in a private file, named by --secrets-file / ROSETCTL_SECRETS_FILE. The
// Ansible module writes one for its `secrets` option.
#pragma once

#include <map>
#include <string>

#include "core/status.h"

namespace rosetctl::cli {

// {"api-key": "..."} → the map. The file must be mode 0600 (or stricter); errors name the file
// and what is wrong with it, never its content.
Expected<std::map<std::string, std::string>> read_secrets_file(const std::string& path);

}  // namespace rosetctl::cli
