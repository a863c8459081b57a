// Placed ids: the id of a volume or snapshot that lives on a registered node, as the controller
// hands it out. It names the node, so the controller routes every later call on it (delete,
// expand, publish, snapshot, list) to that node without a lookup that could go stale; the node
// itself knows the thing by its local id (what its own plugin issued).
//
//   n<len>.<node>.<local id>      e.g. "n6.node-a.local-0123456789abcdef"
//
// <len> is the node id's length in decimal, so any node id and any local id round-trip (both
// are [A-Za-z0-9._-], which holds '.'). No local id has this shape: providers issue
// "<provider>-..." ids, snapshots "snap-..." or 64 hex digits. The format is stable (ids are
// stored by COs); other code (snapshot streaming) finds a snapshot's node with decode().
//
// Ids stay within the 128 bytes CSI recommends and our validate_id() enforces: a node id too
// long for that (a placed snapshot id needs 6 + node + 29 bytes) is refused at CreateVolume or
// CreateSnapshot with INVALID_ARGUMENT naming the node and its longest usable length.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

struct PlacedId {
  std::string node;      // the node that holds it
  std::string local_id;  // its id on that node
};

// The placed id of `local_id` on `node`; INVALID_ARGUMENT when it would be over 128 bytes.
Expected<std::string> encode_placed_id(std::string_view node, std::string_view local_id);

// The node and local id of a placed id; nullopt for any other id (one this host issued).
std::optional<PlacedId> decode_placed_id(std::string_view id);

// ListVolumes/ListSnapshots tokens of the controller's combined list: where to go on, as a
// node and that node's own token ("" = from its start). Nodes are walked in a fixed order (this
// host, then the others by id), so the token stays valid whatever order nodes answer in and
// when nodes come and go: a node no longer registered is skipped to the next by id.
//   "<len>.<node>.<node's token>"   (the node's token is opaque: ours, or another plugin's)
struct ListPosition {
  std::string node;
  std::string token;
};
std::string encode_list_token(const ListPosition& position);
std::optional<ListPosition> decode_list_token(std::string_view token);

}  // namespace rosetctl

namespace rosetctl {

// Metadata of the combined list (cluster/placement.cc): a caller that sends kPartialListKey (any
// value) gets the volumes or snapshots of the nodes that answered, and one kUnreachableNodesKey
// trailing entry per node that did not ("node \"b\" did not answer: ..."); without it such a
// list fails UNAVAILABLE.
inline constexpr const char* kPartialListKey = "rosetctl-partial-list";
inline constexpr const char* kUnreachableNodesKey = "rosetctl-unreachable-nodes";

// A clone of a volume on node A made on node B (cluster/cross_node_clone.cc): the controller
// takes a snapshot of it on A and sends B the CreateVolume as asked, the volume its source,
// with this metadata naming that snapshot (A's placed id). B restores the snapshot, records the
// volume as a clone of the volume (so a retry is answered by name), and the controller removes
// the snapshot on A and B's copy afterwards. Only a controller's call carries it.
inline constexpr const char* kCloneBySnapshotKey = "rosetctl-clone-by-snapshot";

// A name (or commit) that matches more than one volume or snapshot in the controller's combined
// view (cluster/catalog_everywhere.cc) finds nothing by itself: NOT_FOUND, its message holding
// this phrase and each candidate's id and host. A verb that takes NOT_FOUND for "done already"
// (delete) must not take this so: something of that name exists.
inline constexpr std::string_view kAmbiguousName = "names more than one";
inline bool is_ambiguous_name(const Status& status) {
  return status.code() == Code::kNotFound &&
         status.message().find(kAmbiguousName) != std::string::npos;
}

}  // namespace rosetctl
