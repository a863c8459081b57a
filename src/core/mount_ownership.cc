// judge_mount: the topmost mount at a path (find_mount) against the recorded one (statmount),
// or against its fingerprint (the mount table) when it was made in another mount namespace.
#include "core/mount_ownership.h"

#include "core/mount_lookup.h"

namespace rosetctl {
namespace {

const MountEntry* mount_with_id(const MountTable& table, int mount_id) {
  for (const MountEntry& entry : table.entries())
    if (entry.mount_id == mount_id) return &entry;
  return nullptr;
}

// Ours was not found in this namespace: either it is gone, or this process runs in another
// namespace than the one that made it, where it has another id.
Expected<MountAtPath> judge_from_another_namespace(const std::string& path,
                                                   const RecordedMount& recorded, MountAtPath out) {
  out.owner = MountOwner::kForeign;
  if (recorded.mount_ns == 0 || recorded.fingerprint.empty() ||
      recorded.mount_ns == current_mount_namespace())
    return out;  // made here (or cannot tell where): ours is gone
  auto table = MountTable::read();
  if (!table) return table.status();
  out.owner = judge_by_fingerprint(*table, path, recorded.fingerprint);
  if (out.owner == MountOwner::kNothing) out.owner = MountOwner::kForeign;  // it went meanwhile
  if (out.owner != MountOwner::kOurs) return out;
  RecordedMount here = record_mount_at(path);
  // Only a mount that is still the one judged (same filesystem and directory) is adopted.
  if (here.id != 0 && here.fingerprint == recorded.fingerprint) out.adopted = here;
  return out;
}

}  // namespace

std::string MountAtPath::describe_top() const {
  if (!top) return "no mount";
  std::string type = top->fs_type.empty() ? "unknown" : top->fs_type;
  return fmt::format("a {} mount (mount id {})", type, top->mount_id);
}

MountOwner judge_by_fingerprint(const MountTable& table, const std::string& path,
                                const MountFingerprint& fingerprint, const MountEntry** bottom) {
  const MountEntry* top = table.find_by_target(path);
  if (top == nullptr) return MountOwner::kNothing;
  // A mount stacked on another has it as its parent, in every namespace.
  const MountEntry* lowest = top;
  for (int hops = 0; hops < 4096; ++hops) {
    const MountEntry* below = mount_with_id(table, lowest->parent_id);
    if (below == nullptr || below == lowest || below->mount_point != path) break;
    lowest = below;
  }
  if (!fingerprint.matches(*lowest)) return MountOwner::kForeign;
  if (bottom != nullptr) *bottom = lowest;
  return lowest == top ? MountOwner::kOurs : MountOwner::kCovered;
}

Expected<MountAtPath> judge_mount(const std::string& path, const RecordedMount& recorded) {
  MountAtPath out;
  auto top = find_mount(path);
  if (!top) return top.status();
  out.top = std::move(*top);
  if (!out.top) return out;  // kNothing
  if (recorded.id == 0 || out.top->unique_id == recorded.id) {
    out.owner = MountOwner::kOurs;
    return out;
  }
  auto ours = find_mount_by_id(recorded.id);
  if (!ours) return ours.status();
  if (!ours->has_value()) return judge_from_another_namespace(path, recorded, std::move(out));
  // The table (a dead FUSE mount on the way, say) gives no unique id: compare the ids the
  // table uses, which are unique among the mounts that exist now.
  if (out.top->unique_id == 0 && (*ours)->mount_id == out.top->mount_id) {
    out.owner = MountOwner::kOurs;
    return out;
  }
  out.owner = (*ours)->mount_point == path ? MountOwner::kCovered : MountOwner::kForeign;
  return out;
}

}  // namespace rosetctl
