// Reading a file that holds a secret (an API key, CSI secrets): the one opener for every such
// file. It must be a regular file (not a symlink, FIFO, device, ...) that only its owner can
// access, and its content never appears in an error message. The one symlink followed is a
// Kubernetes Secret volume's key, through exactly kubelet's links (core/secret_volume_file.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

// The file's content, at most `max_bytes` of it. `what` names the file in errors ("the Roset API
// key file"). PERMISSION_DENIED, saying what the path is, for anything but a regular file (it
// is never waited on, and a symlink is followed only as open_secret_volume_file says), and,
// naming the access that is wrong, when group or others have any access to it.
Expected<std::string> read_private_file(const std::string& path, std::string_view what,
                                        size_t max_bytes);

// Writes `content` to `path` whole or not at all, mode 0600: a temporary "<path>.<8 hex>.tmp"
// (never following a symlink, never an existing file), fsynced, then renamed over `path`. The
// content never appears in an error message.
Status write_private_file(const std::string& path, std::string_view content);

}  // namespace rosetctl
