// The controller side of the iscsi provider: a user-space or kernel iSCSI target that exports
// one image file per volume. TargetBackend is the contract (tgt today, LIO later); what it
// shares with every implementation (target names, what a valid initiator name or CHAP secret
// is) lives here too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

// The default IQN prefix of our targets; a target is `<prefix>:<volume id>`.
inline constexpr std::string_view kDefaultIscsiIqnPrefix = "iqn.2026-11.io.roset";
// Every volume is LUN 1 of its own target (tgt keeps LUN 0 for its controller device).
inline constexpr int kIscsiVolumeLun = 1;

// What one volume's target exports.
struct TargetSpec {
  std::string volume_id;   // also the LUN's SCSI serial: a consumer checks it after login
  std::string image_path;  // the regular file behind LUN 1
};

// What the target backend holds for one of our targets, as read back from it.
struct TargetInfo {
  std::string volume_id;
  std::string iqn;
  bool has_lun = false;                     // LUN 1 exists
  std::string serial;                       // LUN 1's SCSI serial
  std::string backing_path;                 // LUN 1's image file
  std::vector<std::string> initiators;      // the ACL: initiator names allowed to log in
  std::vector<std::string> chap_users;      // incoming CHAP accounts bound to the target
  std::vector<std::string> chap_users_out;  // its outgoing account (mutual CHAP), if any
  int sessions = 0;                         // initiators logged in now
};

// Incoming CHAP: the initiator proves it knows `password`. The password is a secret: it never
// appears in a message or a log line.
struct ChapCredentials {
  std::string user;
  std::string password;

  bool operator==(const ChapCredentials&) const = default;
};

class TargetBackend {
 public:
  virtual ~TargetBackend() = default;

  // "tgt", "lio": for messages and the provider's probe.
  virtual std::string_view name() const = 0;
  // The IQN of a volume's target.
  virtual std::string iqn(std::string_view volume_id) const = 0;

  // Makes the volume's target exist with LUN 1 backed by spec.image_path and its serial set to
  // the volume id. A target that exists already is kept as it is (its ACL and CHAP too).
  virtual Expected<TargetInfo> ensure_target(const TargetSpec& spec) = 0;
  // Ends every session of the target and deletes it; OK when there is no such target.
  virtual Status remove_target(std::string_view volume_id) = 0;

  // Adds / removes an initiator name to / from the target's ACL. NOT_FOUND when the target is
  // missing (the backend lost it: re-create it with ensure_target and bind again).
  virtual Status bind_initiator(std::string_view volume_id, std::string_view initiator) = 0;
  virtual Status unbind_initiator(std::string_view volume_id, std::string_view initiator) = 0;

  // The name of the backend's CHAP account that holds `user`'s credentials for the volume's
  // target, which initiators log in as: a backend whose accounts are global (tgt) makes it from
  // the volume id and `user`, so that no caller can name, and so re-password, another volume's
  // account.
  virtual std::string chap_account(std::string_view volume_id, std::string_view user) const = 0;
  // Makes the target require CHAP with exactly these credentials: any of `incoming` (one per
  // node the volume is published to) lets an initiator in, and `outgoing`, when given, is what
  // the target answers an initiator that asks it to prove itself (mutual CHAP). Every other
  // account goes from the target. Returns the account names of `incoming`, in order.
  // clear_chap lets initiators in without CHAP again.
  virtual Expected<std::vector<std::string>> set_chap_accounts(
      std::string_view volume_id, const std::vector<ChapCredentials>& incoming,
      const std::optional<ChapCredentials>& outgoing) = 0;
  virtual Status clear_chap(std::string_view volume_id) = 0;
  // One incoming account and no outgoing one: its account name.
  Expected<std::string> set_chap(std::string_view volume_id, const ChapCredentials& chap);

  // Makes LUN 1 report the image file's current size (after the file grew).
  virtual Status resize_lun(const TargetSpec& spec) = 0;

  // Our targets (IQN under our prefix) that the backend has now. An empty list from a backend
  // whose database says otherwise means the backend restarted and lost them.
  virtual Expected<std::vector<TargetInfo>> list_targets() = 0;

  // OK when the backend answers; UNAVAILABLE (with the reason) when it does not.
  virtual Status check_health() = 0;
};

// `<prefix>:<volume id>`.
std::string target_iqn(std::string_view prefix, std::string_view volume_id);

// An IQN prefix: "iqn.YYYY-MM.reversed.domain", lowercase [a-z0-9.-], at most 160 bytes (the
// volume id and ':' must still fit in 223). INVALID_ARGUMENT naming `what` otherwise.
Status validate_iqn_prefix(std::string_view prefix, std::string_view what);

// A volume id usable in an IQN and as a SCSI serial: 1..36 bytes of lowercase [a-z0-9.-],
// starting with a letter or digit (an IQN is lowercase; tgt keeps 36 bytes of serial).
Status validate_target_volume_id(std::string_view volume_id);

// CHAP user: 1..64 bytes of [A-Za-z0-9._@:-]. Password: 12..255 printable ASCII bytes without
// spaces or commas (RFC 3720 asks for at least 96 bits; the target's request format splits on
// commas). Messages never contain the password.
Status validate_chap(const ChapCredentials& chap);

}  // namespace rosetctl
