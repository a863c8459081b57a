// Whether this host's state directory is a node's: `serve --controller ADDRESS` (a node
// registering with a controller) records in it which controller it serves as which node, so
// that the same host's CLI without --controller, which answers from this store alone, can say so
// and name that controller. A one-host user (no controller anywhere) has no such record and sees
// no note. Not a secret: the node id and the controller's address are in the registry already.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace rosetctl::cli {

struct NodeMarker {
  std::string node_id;     // the id this state directory is served as
  std::string controller;  // HOST:PORT of the controller it registers with
};

// Records `marker` in the state directory `state_dir` (normalised, existing): whole or not at
// all, mode 0600.
Status write_node_marker(const std::string& state_dir, const NodeMarker& marker);

// Removes the record (a serve without --controller: this state directory is no node's any more).
// A missing one is fine.
Status remove_node_marker(const std::string& state_dir);

// The record, or nullopt when there is none. The file is untrusted input: one that is not a
// regular owner-only file, too large, or whose fields do not validate is ignored (a debug log
// says why), never an error.
std::optional<NodeMarker> read_node_marker(const std::string& state_dir);

}  // namespace rosetctl::cli
