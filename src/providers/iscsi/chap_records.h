// The CHAP credentials the controller makes for iscsi volumes and keeps, so that a target tgtd
// lost (it keeps nothing across a restart) comes back with them: one file per node a volume is
// published to, and one for the volume's target (what it answers a node that asks it to prove
// itself: mutual CHAP), under <state>/iscsi/chap/<volume id>/, each 0600 in 0700 directories,
// written whole or not at all. Only root reads them; no message or log line ever quotes one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "providers/iscsi/target_backend.h"

namespace rosetctl::iscsi {

// The user name of a volume target's own account (mutual CHAP); no node's may take it.
inline constexpr std::string_view kTargetChapUser = "target";

// New credentials: `user` (or a random one when empty) and a random 128-bit password.
ChapCredentials random_chap(std::string_view user = "");

class ChapRecords {
 public:
  explicit ChapRecords(std::string dir) : dir_(std::move(dir)) {}

  // The credentials of `node_id`'s publication of the volume, or nullopt when none are kept.
  Expected<std::optional<ChapCredentials>> of_node(std::string_view volume_id,
                                                   std::string_view node_id) const;
  Status put_node(std::string_view volume_id, std::string_view node_id,
                  const ChapCredentials& chap) const;
  Status remove_node(std::string_view volume_id, std::string_view node_id) const;
  // Every node's credentials of the volume, by node id.
  Expected<std::vector<std::pair<std::string, ChapCredentials>>> of_volume(
      std::string_view volume_id) const;

  // The target's own credentials, made (and kept) at the first call.
  Expected<ChapCredentials> target(std::string_view volume_id) const;
  // Everything kept for the volume (DeleteVolume).
  Status remove_volume(std::string_view volume_id) const;

 private:
  std::string volume_dir(std::string_view volume_id) const;
  Expected<std::optional<ChapCredentials>> read(const std::string& path) const;
  Status write(std::string_view volume_id, const std::string& path,
               const ChapCredentials& chap) const;

  std::string dir_;
};

}  // namespace rosetctl::iscsi
