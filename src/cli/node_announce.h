// What this host tells a controller's registry about itself (rosetctl.v1.RegisterNodeRequest):
// its node id and topology, the address its serve listens on, its iSCSI initiator name (from
// open-iscsi's /etc/iscsi/initiatorname.iscsi) and its version. `rosetctl node register`,
// serve's heartbeat and a consumer's CLI calls all say it the same way.
#pragma once

#include <optional>
#include <string>

#include "cli/csi_client.h"
#include "core/status.h"
#include "rosetctl.pb.h"

namespace rosetctl::cli {

// `initiator`: nullopt reads it from open-iscsi's file (none when there is none).
Expected<v1::RegisterNodeRequest> node_registration(
    const std::string& node_id, const std::string& address,
    std::optional<std::string> initiator = std::nullopt);

// Whether `certificate_file` is a node's certificate for `node_id` (OU=node, CN=node_id): only
// such a host's CLI announces itself; an admin's or another node's certificate does not.
bool is_certificate_of_node(const std::string& certificate_file, const std::string& node_id);

// A consumer's CLI call keeps its registry entry fresh: last_seen is refreshed, and a host the
// controller does not know yet is registered. One attempt, without waiting: a controller that
// does not answer is reported by the verb's own calls.
void announce_node(CsiClient& client, const std::string& node_id);

}  // namespace rosetctl::cli
