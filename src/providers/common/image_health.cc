// Health of image volumes and the startup reconcile of their loop devices (see image_node.h).
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>

#include "core/fs_freeze.h"
#include "core/log.h"
#include "core/mount_ops.h"
#include "providers/common/image_node.h"

namespace rosetctl {
namespace {

// Far longer than a CreateVolume takes between making an image and recording the volume, so an
// image this old without a record is an orphan, not a create in flight.
constexpr time_t kOrphanAgeSeconds = 10 * 60;

bool attached(const std::vector<LoopInfo>& loops, unsigned major, unsigned minor) {
  for (const LoopInfo& loop : loops) {
    if (loop.major == major && loop.minor == minor) return true;
  }
  return false;
}

// Why one staging of the volume is unhealthy, or "".
std::string staging_problem(const Staging& staging, bool block, const MountTable& table,
                            const std::vector<LoopInfo>& loops) {
  const MountEntry* mount = table.find_by_target(staging.staging_path);
  if (mount == nullptr) {
    return fmt::format(
        "it is recorded as staged at \"{}\" but nothing is mounted there; "
        "disconnect and connect it again",
        staging.staging_path);
  }
  int err = 0;
  if (probe_path(staging.staging_path, &err) != PathHealth::kOk) {
    return fmt::format("its mount at \"{}\" is dead ({}); disconnect and connect it again",
                       staging.staging_path, std::strerror(err));
  }
  unsigned major = mount->major;
  unsigned minor = mount->minor;
  if (block) {
    struct stat st;
    if (::stat((staging.staging_path + "/device").c_str(), &st) != 0) {
      return fmt::format("its device node in \"{}\" is missing", staging.staging_path);
    }
    major = ::major(st.st_rdev);
    minor = ::minor(st.st_rdev);
  }
  if (!attached(loops, major, minor)) {
    return fmt::format(
        "the loop device staged at \"{}\" ({}:{}) is no longer attached to its "
        "image; disconnect and connect it again",
        staging.staging_path, major, minor);
  }
  return "";
}

// Every write to a frozen filesystem waits until it is thawed: the volume looks mounted and
// readable, but its users hang. Asked of the kernel only when the volume's freeze mark says a
// freeze may have been left (freeze_mark.h): a check must not freeze a healthy filesystem.
std::string freeze_problem(const std::string& mark, const std::string& mount_point) {
  if (!FreezeMark::unheld(mark)) return "";  // none, or a snapshot of ours holds it now
  auto frozen = filesystem_is_frozen(mount_point);
  if (!frozen) return frozen.status().message();
  if (!*frozen) {
    FreezeMark::remove(mark);
    return "";
  }
  return fmt::format(
      "its filesystem at \"{}\" is frozen, so every write to it waits; thaw it with "
      "`fsfreeze -u {}`",
      mount_point, mount_point);
}

}  // namespace

VolumeCondition ImageNode::condition(const VolumeRecord& volume) const {
  std::string image = files_.image(volume.id);
  auto stagings = store_.stagings(volume.id);
  if (!stagings) return {true, stagings.status().message()};
  struct stat st;
  if (::stat(image.c_str(), &st) != 0) {
    int err = errno;
    std::string staged = stagings->empty()
                             ? ""
                             : "; it is still staged, and what is written to it now is lost "
                               "when it is disconnected";
    if (err == ENOENT) return {true, fmt::format("its image \"{}\" is missing{}", image, staged)};
    return {true, fmt::format("its image \"{}\" is not accessible: {}", image, std::strerror(err))};
  }
  if (stagings->empty()) return {};
  auto table = MountTable::read();
  if (!table) return {true, table.status().message()};
  auto loops = loop_devices_backed_by(image);
  if (!loops) return {true, loops.status().message()};
  for (const Staging& staging : *stagings) {
    std::string problem = staging_problem(staging, is_block_volume(volume), *table, *loops);
    if (problem.empty() && !is_block_volume(volume))
      problem = freeze_problem(files_.freeze_marker(volume.id), staging.staging_path);
    if (!problem.empty()) return {true, problem};
  }
  return {};
}

Status ImageNode::reconcile(const VolumeLocker& lock) {
  auto loops = list_loop_devices();
  if (!loops) return loops.status();
  auto images = image_identities();
  if (!images) return images.status();
  std::map<std::string, int> volumes;  // volume id → devices backed by its image
  for (const LoopInfo& loop : *loops) {
    std::string id = volume_of_loop(loop, *images);
    if (!id.empty()) ++volumes[id];
  }
  for (const auto& [id, count] : volumes) {
    auto held = lock(id);
    if (!held) {
      spdlog::info("reconcile: volume \"{}\" is busy; leaving its {} loop device(s) alone", id,
                   count);
      continue;
    }
    ROSETCTL_RETURN_IF_ERROR(thaw_leftover_freezes(id));
    auto released = release_unused_devices(id);
    if (!released) return released.status().with_context(fmt::format("reconcile of \"{}\"", id));
    for (const std::string& device : *released) {
      spdlog::warn(
          "reconcile: detached {} (image of volume \"{}\"): no staging used it, so an "
          "interrupted operation left it behind",
          device, id);
    }
  }
  return forget_orphan_images();
}

Expected<std::map<FileIdentity, std::string>> ImageNode::image_identities() const {
  auto ids = files_.volume_ids();
  if (!ids) return ids.status();
  std::map<FileIdentity, std::string> images;
  for (std::string& id : *ids) {
    if (auto identity = file_identity(files_.image(id))) images.emplace(*identity, std::move(id));
  }
  return images;
}

std::string ImageNode::volume_of_loop(const LoopInfo& loop,
                                      const std::map<FileIdentity, std::string>& images) const {
  if (auto backing = loop_backing_identity(loop)) {
    auto found = images.find(*backing);
    if (found != images.end()) return found->second;
    // Another file that happens to show our path (another namespace's), unless it was deleted:
    // a deleted image has no identity left to find.
    if (!loop.backing_deleted) return "";
  }
  return files_.volume_of_image(loop.backing_file);
}

Status ImageNode::forget_orphan_images() {
  auto ids = files_.volume_ids();
  if (!ids) return ids.status();
  for (const std::string& id : *ids) {
    auto record = store_.find_volume(id);
    if (!record) return record.status();
    std::string image = files_.image(id);
    struct stat st;
    if (record->has_value() || ::stat(image.c_str(), &st) != 0) continue;
    auto loops = loop_devices_backed_by(image);
    if (!loops) return loops.status();
    if (!loops->empty() || ::time(nullptr) - st.st_mtime < kOrphanAgeSeconds) continue;
    if (st.st_blocks != 0) {
      spdlog::warn(
          "reconcile: image \"{}\" belongs to no volume but holds data; left in place "
          "(remove it by hand once it is not needed)",
          image);
      continue;
    }
    // Never written, so nothing is lost; left alone, its size would count as promised forever.
    ROSETCTL_RETURN_IF_ERROR(files_.remove(id));
    spdlog::warn("reconcile: removed image \"{}\": it belongs to no volume and was never written",
                 image);
  }
  return Status::ok();
}

}  // namespace rosetctl
