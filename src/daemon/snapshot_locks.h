// Lock keys of the snapshot RPCs (see volume_locks.h for the volume keys they combine with).
//
// CreateSnapshot holds `snapshot-name:` exclusive (idempotency by name), the source's `volume:`
// key shared (so the volume cannot be deleted meanwhile) and `commit:` exclusive (one commit of
// a volume at a time). DeleteSnapshot holds `snapshot:` exclusive; a restore holds it shared.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace rosetctl {

inline std::string snapshot_name_lock_key(std::string_view name) {
  return fmt::format("snapshot-name:{}", name);
}
inline std::string snapshot_lock_key(std::string_view id) {
  return fmt::format("snapshot:{}", id);
}
inline std::string commit_lock_key(std::string_view volume_id) {
  return fmt::format("commit:{}", volume_id);
}

}  // namespace rosetctl
