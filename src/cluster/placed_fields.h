// The id fields of CSI and rosetctl messages, rewritten between placed ids (cluster/placed_id.h)
// and a node's local ids: the controller localizes a request before it sends it to the node
// that holds its volume and places the node's answer; a node localizes what arrives with its
// own placed ids (kubelet's NodeStageVolume, the CLI's connect) before its handlers see it. So
// the handlers on both sides are the code that runs without placement.
//
// The fields: every `volume_id`, `source_volume_id`, `snapshot_id`, `volume_ids` and
// `snapshot_ids`, at any depth (a content source's too), and the `id` of rosetctl.v1's
// SnapshotDetails.
#pragma once

#include <google/protobuf/message.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

// Every id field holding a placed id of `node` gets its local id; others stay as they are.
void localize_ids(google::protobuf::Message& message, std::string_view node);

// Every non-empty id field that is not yet a placed id becomes `node`'s placed id of it.
Status place_ids(google::protobuf::Message& message, std::string_view node);

// `visit` on every message set in `message` one level down (each element of a repeated field;
// not map entries); the first failure stops the walk.
Status for_each_submessage(const google::protobuf::Message& message,
                           const std::function<Status(const google::protobuf::Message&)>& visit);

// DATA_LOSS naming `node` unless every Volume's volume_id and Snapshot's snapshot_id (and
// SnapshotDetails' id) in
// `message`, a node's answer, is a local id (content sources and source volumes may name other
// nodes: a pulled snapshot's, a restore's source).
Status check_answer_names_its_own(const google::protobuf::Message& message, std::string_view node);

// The node of every placed id in `message`, in the order met (cluster/authorization.cc); an id
// wrapped in another ("n3.ctl.n6.node-b.x") names both.
std::vector<std::string> placed_nodes_of(const google::protobuf::Message& message);

}  // namespace rosetctl
