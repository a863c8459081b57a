// The consumer side of an iSCSI volume: open-iscsi's `iscsiadm` (run with an argv, never a
// shell) makes the node record and logs in; the disk is then found through sysfs and proven to
// be the volume's by its serial number.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "providers/iscsi/iscsi_sysfs.h"
#include "providers/iscsi/node_record.h"
#include "providers/iscsi/target_backend.h"

namespace rosetctl::iscsi {

// One LUN as the controller's publish context names it.
struct LunAddress {
  std::string portal;  // "ADDR:PORT" as given by the controller, never taken from discovery
  std::string target;  // the IQN
  int lun = 1;
  std::string serial;  // what the LUN must report as its unit serial number
};

// What a consumer logs in with: its own CHAP account and, for mutual CHAP, the account the target
// must answer with (open-iscsi's node.session.auth.username_in / password_in).
struct LoginChap {
  ChapCredentials initiator;
  std::optional<ChapCredentials> target;
};

class OpenIscsi {
 public:
  // `sysfs` and `nodes_dir` (open-iscsi's record database) are parameters for tests.
  explicit OpenIscsi(std::string sysfs = "/sys", std::string nodes_dir = "/etc/iscsi/nodes");

  // iscsiadm is installed (open-iscsi); NOT_FOUND naming the package otherwise.
  Status check_installed() const;

  // Makes the node record for exactly this portal (startup manual, CHAP when given), logs in
  // (an existing session is fine) and waits until `timeout` for the LUN's disk to appear.
  // Returns "/dev/sdX" once its serial matches. PERMISSION_DENIED when the target refuses the
  // login (iscsiadm's message), UNAVAILABLE when the portal does not answer,
  // DEADLINE_EXCEEDED when the disk never shows up, FAILED_PRECONDITION when it is another
  // disk. On failure after a new login, it logs out again.
  Expected<std::string> attach(const LunAddress& lun, const std::optional<LoginChap>& chap,
                               std::chrono::milliseconds timeout) const;

  // The disk of a session that exists ("/dev/sdX"), or nullopt when there is no session or
  // no disk for it.
  Expected<std::optional<std::string>> find_disk(const LunAddress& lun) const;

  // Logs out of the target at `portal` and deletes its node record. Not logged in, or no
  // record, is fine (idempotent); works when the disk has gone already.
  Status detach(const std::string& portal, const std::string& target) const;

  // Asks the target for the LUN's size again (after the controller grew it); returns the new
  // size in bytes.
  Expected<int64_t> rescan(const LunAddress& lun) const;

  Expected<std::vector<KernelSession>> sessions() const { return list_kernel_sessions(sysfs_); }

  // The node records open-iscsi keeps (target and portal of each), whether logged in or not.
  Expected<std::vector<KernelSession>> records() const;

  // Logs in with an existing node record (a session that is gone: the target restarted).
  Status login(const std::string& portal, const std::string& target) const;

 private:
  // A new node record's settings, written into its record files (one per interface).
  Status write_settings(const LunAddress& lun, const RecordSettings& settings) const;
  // The record files of the target at the LUN's portal (one per interface).
  std::vector<std::filesystem::path> record_files(const LunAddress& lun) const;

  std::string sysfs_;
  std::string nodes_dir_;
};

// What an iscsiadm exit code means as a status (open-iscsi's include/iscsi_err.h), with
// iscsiadm's own message.
Status iscsiadm_failure(int exit_code, const std::string& message, const std::string& what);

}  // namespace rosetctl::iscsi
