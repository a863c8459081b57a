// The lock keys of the CSI services, in one place so every RPC agrees on them.
//
// A volume key is held shared by node and publish work and exclusively by delete/expand; the
// stage key is exclusive for stage/unstage and shared by publish/unpublish (which need the
// staging mount to stay put); a target key serialises calls on one target path. Keys are per
// volume and per target, so different targets of one volume never block each other. A node key
// is held shared by ControllerPublishVolume to that node and exclusively by RemoveNode, so no
// publication lands on a node while it is being removed.
#pragma once

#include <string>
#include <string_view>

#include "core/lock_space.h"

namespace rosetctl {

inline std::string name_lock_key(std::string_view name) {
  return fmt::format("name:{}", name);
}
inline std::string volume_lock_key(std::string_view id) {
  return fmt::format("volume:{}", id);
}
inline std::string stage_lock_key(std::string_view id) {
  return fmt::format("stage:{}", id);
}
inline std::string target_lock_key(std::string_view path) {
  return fmt::format("target:{}", path);
}
inline std::string node_lock_key(std::string_view node) {
  return fmt::format("node:{}", node);
}
// Held by a registration that gives a node this iSCSI initiator name (a normal form), so two
// nodes cannot claim one name at once.
inline std::string initiator_lock_key(std::string_view initiator) {
  return fmt::format("initiator:{}", initiator);
}
inline std::string node_publish_lock_key(std::string_view id, std::string_view node) {
  return fmt::format("controller-publish:{}:{}", id, node);
}

// ABORTED text used for every conflict, as the spec's error tables word it.
inline std::string busy_message(std::string_view what) {
  return fmt::format("an operation on {} is already in progress; retry later", what);
}

// The volume key of `id`, ABORTED with busy_message when another call holds it.
inline Expected<HeldLock> try_lock_volume(const LockSpace& locks, std::string_view id,
                                          LockMode mode) {
  return locks.try_lock(volume_lock_key(id), mode, busy_message(fmt::format("volume \"{}\"", id)));
}

// The stage key of `id`, ABORTED with busy_message when another call holds it.
inline Expected<HeldLock> try_lock_stage(const LockSpace& locks, std::string_view id,
                                         LockMode mode) {
  return locks.try_lock(stage_lock_key(id), mode, busy_message(fmt::format("volume \"{}\"", id)));
}

}  // namespace rosetctl
