// Refusal messages and condition messages for foreign mounts.
#include "daemon/node_mounts.h"

namespace rosetctl {

Status refuse_foreign_mount(const MountAtPath& judged, std::string_view volume_id,
                            std::string_view role, const std::string& path) {
  switch (judged.owner) {
    case MountOwner::kNothing:
    case MountOwner::kOurs:
      return Status::ok();
    case MountOwner::kCovered:
      return error(Code::kFailedPrecondition,
                   "\"{}\" has {} stacked on top of the {} of volume \"{}\"; rosetctl did not "
                   "make it and leaves it alone: unmount it (umount \"{}\"), then try again",
                   path, judged.describe_top(), role, volume_id, path);
    case MountOwner::kForeign:
      break;
  }
  return error(Code::kFailedPrecondition,
               "\"{}\" holds {} that is not the {} of volume \"{}\" (that mount is gone); "
               "rosetctl leaves it alone: unmount it (umount \"{}\"), then try again",
               path, judged.describe_top(), role, volume_id, path);
}

std::string recorded_mount_problem(const std::string& path, MountId recorded) {
  auto judged = judge_mount(path, recorded);
  if (!judged)
    return fmt::format("cannot tell what is mounted at \"{}\": {}", path,
                       judged.status().message());
  switch (judged->owner) {
    case MountOwner::kOurs:
      return "";
    case MountOwner::kNothing:
      return fmt::format("\"{}\" is no longer mounted", path);
    case MountOwner::kCovered:
      return fmt::format("\"{}\" has {} stacked on top of this volume's mount", path,
                         judged->describe_top());
    case MountOwner::kForeign:
      break;
  }
  return fmt::format("\"{}\" holds a foreign mount, {}, instead of this volume's", path,
                     judged->describe_top());
}

}  // namespace rosetctl
