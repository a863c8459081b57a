// This host's iSCSI initiator name, as open-iscsi keeps it (/etc/iscsi/initiatorname.iscsi:
// a line `InitiatorName=iqn....`), for `rosetctl node register`.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace rosetctl::cli {

inline constexpr const char* kInitiatorNameFile = "/etc/iscsi/initiatorname.iscsi";

// The file this host's name is read from: kInitiatorNameFile, or the path in the environment
// variable ROSETCTL_ISCSI_INITIATOR_FILE where open-iscsi's /etc/iscsi is elsewhere (a
// container that mounts the host's at another path; the tests' host lab, whose hosts share one
// /etc but are each a host with a name of its own, or none).
std::string initiator_name_file();

// The name on the file's first `InitiatorName=` line, blanks around it trimmed; nullopt when
// the file does not exist or names none. A file that cannot be read is an error naming it.
Expected<std::optional<std::string>> read_initiator_name(const std::string& path);

}  // namespace rosetctl::cli
