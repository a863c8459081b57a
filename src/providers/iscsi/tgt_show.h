// Reading what `tgtadm --op show` prints: tgtd has no machine-readable output, so its text
// report (tgt 1.0.x's layout, indented by four spaces per level) is parsed here, in one place.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

// The target states tgtd reports and takes ("State: ready"): an offline target refuses logins.
inline constexpr std::string_view kTgtReady = "ready";
inline constexpr std::string_view kTgtOffline = "offline";

struct TgtLun {
  int lun = -1;
  std::string serial;        // "SCSI SN"
  std::string backing_path;  // "Backing store path" ("None" for the controller LUN 0)
};

// An I_T nexus: one initiator's session and its connections.
struct TgtSession {
  std::string sid;  // kept as printed: tgtadm takes it back as --sid
  std::string initiator;
  std::vector<std::string> connections;  // the cids
};

struct TgtTarget {
  int tid = 0;
  std::string name;                  // the IQN
  std::string state;                 // "ready", "offline"
  std::vector<TgtSession> sessions;  // "I_T nexus information"
  std::vector<TgtLun> luns;
  std::vector<std::string> incoming_users;  // "Account information"
  std::vector<std::string> outgoing_users;  // the same, marked " (outgoing)"
  std::vector<std::string> acl;             // "ACL information": initiator names or addresses
};

// `tgtadm --mode target --op show`. INTERNAL, quoting the line, when the text does not have
// the expected shape (a tgt whose report changed must not be misread as "no targets").
Expected<std::vector<TgtTarget>> parse_tgt_targets(std::string_view text);

// `tgtadm --mode account --op show`: the account names.
Expected<std::vector<std::string>> parse_tgt_accounts(std::string_view text);

// `tgtadm --mode system --op show`: the system's "State" ("ready", "offline").
Expected<std::string> parse_tgt_system_state(std::string_view text);

}  // namespace rosetctl
