// Refusal messages and condition messages for foreign mounts.
#include "daemon/node_mounts.h"

#include <spdlog/spdlog.h>

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

namespace {

void log_adopted(const std::string& path, MountId before, MountId now, const Status& recorded) {
  if (!recorded) {
    spdlog::warn("cannot record the mount at \"{}\" under its id here: {}", path,
                 recorded.message());
    return;
  }
  spdlog::info("\"{}\": our mount (id {} in the mount namespace that made it) is mount {} here",
               path, before, now);
}

}  // namespace

Expected<MountAtPath> judge_staging(StateStore& store, const std::string& path,
                                    const Staging* record) {
  auto judged = judge_mount(path, record ? record->mount : RecordedMount{});
  if (judged && judged->adopted) {
    log_adopted(path, record->mount.id, judged->adopted->id,
                store.set_staging_mount(record->volume_id, path, *judged->adopted));
  }
  return judged;
}

Expected<MountAtPath> judge_publication(StateStore& store, const std::string& path,
                                        const NodePublication* record) {
  auto judged = judge_mount(path, record ? record->mount : RecordedMount{});
  if (judged && judged->adopted)
    log_adopted(path, record->mount.id, judged->adopted->id,
                store.set_node_publication_mount(path, *judged->adopted));
  return judged;
}

std::string recorded_mount_problem(const std::string& path, const RecordedMount& recorded) {
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
