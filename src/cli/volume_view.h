// The JSON model of a volume that `volume create|show|list|connect` print. Field names are a
// documented interface (docs/reference/json.md): add fields, never rename them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/volume_lookup.h"
#include "core/state_store.h"

namespace rosetctl::cli {

// The volume as CSI describes it, with what the node knows beside (asked through NodeState: this
// host's, or --on-node's): its mounts there (publications and stagings, each with its condition: a
// mount that is gone, or someone else's in its place, makes it abnormal) and the mutable parameters
// in effect.
//
// JSON `nodes` and `unreachable_nodes` say where else the volume is: `volume list` and `volume
// show` ask every registered node (kEveryNode: node_reports.h); the verbs that print a volume
// after changing it ask only the node above, and name the other nodes it is mapped to as not asked.
enum class NodesAsked { kThisNode, kEveryNode };
Expected<nlohmann::json> describe_volume(Session& session, const VolumeInfo& info,
                                         NodesAsked asked = NodesAsked::kThisNode);
// What the controller records beside CSI's Volume (the mutable parameters in effect, its replica),
// by id.
using VolumeParameters = std::map<std::string, v1::VolumeDetails>;
Expected<VolumeParameters> fetch_volume_parameters(Session& session,
                                                   const std::vector<VolumeInfo>& infos);
// describe_volume with the controller's part fetched before: asks the controller nothing.
Expected<nlohmann::json> describe_volume(Session& session, const VolumeInfo& info,
                                         const VolumeParameters& parameters);
// The same for many, asking the controller once (or, with `parameters`, not at all).
Expected<std::vector<nlohmann::json>> describe_volumes(Session& session,
                                                       const std::vector<VolumeInfo>& infos,
                                                       NodesAsked asked = NodesAsked::kThisNode);
Expected<std::vector<nlohmann::json>> describe_volumes(Session& session,
                                                       const std::vector<VolumeInfo>& infos,
                                                       const VolumeParameters& parameters,
                                                       NodesAsked asked = NodesAsked::kThisNode);

// A volume's replica (volume replicate) as the JSON `replica` field shows it.
nlohmann::json volume_replica_json(const v1::VolumeReplica& replica);

std::vector<Column> volume_fields();   // `volume show` (one volume)
std::vector<Column> volume_columns();  // `volume list`

}  // namespace rosetctl::cli
