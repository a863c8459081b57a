// judge_mount: the topmost mount at a path (find_mount) against the recorded one (statmount).
#include "core/mount_ownership.h"

#include "core/mount_lookup.h"

namespace rosetctl {

std::string MountAtPath::describe_top() const {
  if (!top) return "no mount";
  std::string type = top->fs_type.empty() ? "unknown" : top->fs_type;
  return fmt::format("a {} mount (mount id {})", type, top->mount_id);
}

Expected<MountAtPath> judge_mount(const std::string& path, MountId recorded) {
  MountAtPath out;
  auto top = find_mount(path);
  if (!top) return top.status();
  out.top = std::move(*top);
  if (!out.top) return out;  // kNothing
  if (recorded == 0 || out.top->unique_id == recorded) {
    out.owner = MountOwner::kOurs;
    return out;
  }
  auto ours = find_mount_by_id(recorded);
  if (!ours) return ours.status();
  if (!ours->has_value()) {
    out.owner = MountOwner::kForeign;
    return out;
  }
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
