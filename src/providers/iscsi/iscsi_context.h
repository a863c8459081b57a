// What an iSCSI volume's publish context carries from the controller to the consumer: where
// to log in and how to recognise the disk. CHAP credentials travel only as CSI secrets.
#pragma once

#include <string_view>

namespace rosetctl::iscsi {

inline constexpr std::string_view kPublishPortal = "portal";  // "ADDR:PORT"
inline constexpr std::string_view kPublishTarget = "iqn";
inline constexpr std::string_view kPublishLun = "lun";
inline constexpr std::string_view kPublishSerial = "serial";
// The CHAP user name to log in with (not a secret): the target's account of this volume, which
// the target backend names after the volume (TargetBackend::set_chap), not the chap-user secret
// as given. Absent: log in as the chap-user secret says (a controller from before).
inline constexpr std::string_view kPublishChapUser = "chap-user";

// CSI secret keys of a volume's CHAP credentials.
inline constexpr std::string_view kSecretChapUser = "chap-user";
inline constexpr std::string_view kSecretChapPassword = "chap-password";

}  // namespace rosetctl::iscsi
