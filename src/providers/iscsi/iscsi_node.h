// The consumer side of the iscsi provider: NodeStage logs in to the volume's target (as the
// publish context names it), proves the disk is the volume's by its serial, then mounts its
// filesystem (made only on a blank disk) or stages the raw device; NodeUnstage unmounts and
// logs out, also when the disk is gone.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "providers/iscsi/open_iscsi.h"
#include "providers/provider.h"

namespace rosetctl::iscsi {

// The LUN a publish context names; INVALID_ARGUMENT naming a missing or malformed key.
Expected<LunAddress> lun_from_publish_context(const StringMap& publish_context);

// CHAP credentials from CSI secrets: none when neither key is given, INVALID_ARGUMENT when
// only one is.
Expected<std::optional<ChapCredentials>> chap_from_secrets(const StringMap& secrets);

// What the consumer logs in with: the password of the secrets, as the user the publish context
// names (the node's account on the volume's target; the chap-user secret when it names none);
// and the target's account when the secrets hold one (chap-user-in, chap-password-in: mutual
// CHAP). INVALID_ARGUMENT when only one of a pair is given.
Expected<std::optional<LoginChap>> chap_for_login(const StringMap& secrets,
                                                  const StringMap& publish_context);

class IscsiNode {
 public:
  explicit IscsiNode(OpenIscsi initiator,
                     std::chrono::milliseconds disk_patience = std::chrono::seconds(30))
      : initiator_(std::move(initiator)), disk_patience_(disk_patience) {}

  Status check_installed() const { return initiator_.check_installed(); }

  // `other_stagings`: whether the volume is staged elsewhere on this node already (it then
  // shares the session and the disk).
  Status stage(const StageSpec& spec) const;
  // `last`: no other staging of the volume remains here, so the session can go.
  Status unstage(std::string_view volume_id, const std::string& staging_path, bool last) const;
  // Rescans the session and grows the filesystem mounted at spec.volume_path (mount volumes).
  Expected<int64_t> expand(const NodeExpandSpec& spec, bool block) const;
  VolumeCondition condition(std::string_view volume_id) const;

  // Sessions to our targets (`iqn_prefix`) whose volume is not among `staged_volume_ids`.
  Expected<std::vector<KernelSession>> unstaged_sessions(
      const std::vector<std::string>& staged_volume_ids, std::string_view iqn_prefix) const;
  // Startup repairs: logs out of sessions to our targets (`iqn_prefix`) that no staging here
  // knows (a crash between login and record), and logs in again where a staged volume's
  // session is gone (the controller or its target restarted). Returns what it did, one line
  // each, for the log; a failure to repair one volume is a line too, not an error.
  Expected<std::vector<std::string>> repair(const std::vector<std::string>& staged_volume_ids,
                                            std::string_view iqn_prefix) const;

  // The kernel session of the volume's target (found by the IQN's ":<volume id>" suffix).
  Expected<std::optional<KernelSession>> session_of(std::string_view volume_id) const;

 private:
  Status stage_mount(const StageSpec& spec, const std::string& device) const;

  OpenIscsi initiator_;
  std::chrono::milliseconds disk_patience_;
};

}  // namespace rosetctl::iscsi
