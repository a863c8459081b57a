// The combined view of seed 001's ListVolumes: what every registered node reports of a set of
// volumes (its connections and stagings), asked through the controller's proxy, one call per
// node. A node that cannot be asked (no address, down, refused) is named with the reason, so a
// partial view is marked as such, never silently short.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/session.h"
#include "cli/volume_lookup.h"

namespace rosetctl::cli {

struct NodeReports {
  // Per node that answered: its NodeVolume of each volume asked, in the order asked.
  std::map<std::string, std::vector<v1::NodeVolume>> answered;
  // Per node that was not asked or did not answer: why ("registered no address", the error).
  std::map<std::string, std::string> unreachable;
};

// Asks every registered node except `asked` (the node whose answer the caller has already: this
// host's, or --on-node's) for `volume_ids`. Without --controller, no node is asked: the registered
// ones are reported as not asked (a controller host's local CLI has no way to reach them).
Expected<NodeReports> ask_registered_nodes(Session& session, const std::string& asked,
                                           const std::vector<std::string>& volume_ids);

// The volume's JSON `nodes`: each node it is mapped to or that reported it connected or staged,
// by node id: {node, mapped, connections: [targets], staged}; a mapped node that could not be
// asked has connections and staged null (not known).
nlohmann::json nodes_json(const std::vector<std::string>& published_nodes,
                          const std::map<std::string, const v1::NodeVolume*>& reported);

// JSON `unreachable_nodes`: [{node, reason}] by node id.
nlohmann::json unreachable_json(const std::map<std::string, std::string>& unreachable);

}  // namespace rosetctl::cli
