// What an iSCSI volume's publish context carries from the controller to the consumer: where
// to log in and how to recognise the disk. CHAP secrets never travel in it: the consumer gets
// them from the controller over mutual TLS (kPublishSecretsFromController) or as CSI secrets.
#pragma once

#include <string_view>

namespace rosetctl::iscsi {

inline constexpr std::string_view kPublishPortal = "portal";  // "ADDR:PORT"
inline constexpr std::string_view kPublishTarget = "iqn";
inline constexpr std::string_view kPublishLun = "lun";
inline constexpr std::string_view kPublishSerial = "serial";
// The CHAP user name to log in with (not a secret): the node's account on this volume's target,
// which the target backend names after the volume (TargetBackend::chap_account), not the
// chap-user secret as given. Absent: log in as the chap-user secret says (a controller from
// before).
inline constexpr std::string_view kPublishChapUser = "chap-user";

// CSI secret keys of a volume's CHAP credentials.
inline constexpr std::string_view kSecretChapUser = "chap-user";
inline constexpr std::string_view kSecretChapPassword = "chap-password";
// Mutual CHAP: what the target answers with when the consumer asks it to prove itself.
inline constexpr std::string_view kSecretChapUserIn = "chap-user-in";
inline constexpr std::string_view kSecretChapPasswordIn = "chap-password-in";

}  // namespace rosetctl::iscsi
