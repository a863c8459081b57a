// The tgt target backend: Debian's `tgt` (tgtd, a user-space iSCSI target) driven through
// `tgtadm`, run as a child process with an argv. tgtd keeps its configuration in memory only;
// the provider's database is the truth and re-creates what a restarted tgtd lost.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "providers/iscsi/target_backend.h"
#include "providers/iscsi/tgt_show.h"

namespace rosetctl {

struct TgtOptions {
  std::string iqn_prefix = std::string(kDefaultIscsiIqnPrefix);
  int control_port = 0;                       // tgtd -C N / tgtadm -C N; 0 is tgtd's default
  std::chrono::milliseconds timeout{10'000};  // per tgtadm call
};

// The tgtd account that holds a volume's CHAP credentials: "<volume id>:<user>" (tgt_chap.cc
// says why). Initiators log in with this name, which the publish context carries.
std::string tgt_chap_account(std::string_view volume_id, std::string_view user);

class TgtBackend final : public TargetBackend {
 public:
  // INVALID_ARGUMENT for a bad prefix or port; FAILED_PRECONDITION when tgtadm is not
  // installed. Does not contact tgtd (check_health does).
  static Expected<std::unique_ptr<TgtBackend>> open(TgtOptions options);

  std::string_view name() const override { return "tgt"; }
  std::string iqn(std::string_view volume_id) const override;

  Expected<TargetInfo> ensure_target(const TargetSpec& spec) override;
  Status remove_target(std::string_view volume_id) override;
  Status bind_initiator(std::string_view volume_id, std::string_view initiator) override;
  Status unbind_initiator(std::string_view volume_id, std::string_view initiator) override;
  std::string chap_account(std::string_view volume_id, std::string_view user) const override;
  Expected<std::vector<std::string>> set_chap_accounts(
      std::string_view volume_id, const std::vector<ChapCredentials>& incoming,
      const std::optional<ChapCredentials>& outgoing) override;
  Status clear_chap(std::string_view volume_id) override;
  Status resize_lun(const TargetSpec& spec) override;
  Expected<std::vector<TargetInfo>> list_targets() override;
  Status check_health() override;

 private:
  TgtBackend(TgtOptions options, std::string tgtadm);

  // Runs `tgtadm -C N --lld iscsi <args>`; its stdout, or a Status whose code says what went
  // wrong (UNAVAILABLE: tgtd unreachable; NOT_FOUND, ALREADY_EXISTS, ...). `what` starts the
  // message, which never quotes `args` (add_account passes a password there).
  Expected<std::string> tgtadm(std::vector<std::string> args, std::string_view what);
  Expected<std::vector<TgtTarget>> show_targets();
  // The volume's target, or nullopt when tgtd has none.
  Expected<std::optional<TgtTarget>> find_target(std::string_view volume_id);
  Expected<TgtTarget> create_target(std::string_view volume_id);
  Status set_state(int tid, std::string_view state, std::string_view volume_id);
  Status add_lun(int tid, const TargetSpec& spec);
  Status add_account(const ChapCredentials& chap);
  Status bind_account(int tid, std::string_view user, std::string_view volume_id,
                      bool outgoing = false);
  Status unbind_account(int tid, std::string_view user, std::string_view volume_id,
                        bool outgoing = false);
  Status end_sessions_of(const TgtTarget& target, std::string_view initiator);
  // Deletes the accounts among `users` that no target uses any more.
  Status delete_unused_accounts(const std::vector<std::string>& users);
  // Made to the end by ensure_target: LUN 1 with the volume id as serial.
  bool is_complete(const TgtTarget& target) const;
  TargetInfo info_of(const TgtTarget& target, std::string_view volume_id) const;

  const TgtOptions options_;
  const std::string tgtadm_path_;
  // Serialises sequences of tgtadm calls (choosing a free tid, re-creating an account) within
  // this process; tgtd itself answers one request at a time.
  std::mutex mutex_;
};

}  // namespace rosetctl
