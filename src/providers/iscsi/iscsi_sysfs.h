// What the kernel's iSCSI initiator shows in sysfs: its sessions and the disks behind them.
// Read directly, because udev (and so /dev/disk/by-path) may be absent on a consumer host.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace rosetctl::iscsi {

struct KernelSession {
  std::string name;    // "session3"
  std::string target;  // the target's IQN
  std::string portal;  // "10.0.2.2:3260", where the session's connection goes ("" if unknown)
};

// Every session the kernel initiator holds, read under `sysfs` ("/sys" on a real host).
// A host without the iSCSI transport (no class directory) has none.
Expected<std::vector<KernelSession>> list_kernel_sessions(const std::string& sysfs);

// The block device name ("sdb") of LUN `lun` in the session to `target`, or nullopt while the
// kernel has not found it yet (the LUN scan after login is asynchronous).
Expected<std::optional<std::string>> find_session_disk(const std::string& sysfs,
                                                       const std::string& target, int lun);

// The unit serial number the disk reports (SCSI VPD page 0x80), blanks trimmed; "" when the
// disk reports none.
Expected<std::string> read_unit_serial(const std::string& sysfs, const std::string& disk);

// The disk's size in bytes as the kernel last read it.
Expected<int64_t> read_disk_bytes(const std::string& sysfs, const std::string& disk);

}  // namespace rosetctl::iscsi
