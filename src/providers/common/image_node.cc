// Staging, publishing and growing image volumes on this node (see image_node.h).
#include "providers/common/image_node.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>

#include "core/block_staging.h"
#include "core/crash_point.h"
#include "core/fs_signature.h"
#include "core/log.h"
#include "core/mount_filesystem.h"
#include "core/mount_ops.h"
#include "core/mount_point.h"
#include "core/unique_fd.h"
#include "core/validate.h"
#include "providers/common/image_filesystem.h"
#include "providers/common/mutable_parameters.h"

namespace rosetctl {
namespace {

constexpr const char* kDeviceNode = kStagedDeviceNode;
constexpr const char* kReadOnlyDeviceNode = "device-ro";

// The image's size; FAILED_PRECONDITION when it is gone (and the volume's data with it).
Expected<int64_t> image_size(const std::string& image) {
  struct stat st;
  if (::stat(image.c_str(), &st) == 0) return static_cast<int64_t>(st.st_size);
  if (errno == ENOENT) {
    return error(Code::kFailedPrecondition,
                 "its image \"{}\" is missing, so its data is gone; delete the volume", image);
  }
  return errno_status(errno, fmt::format("cannot inspect image \"{}\"", image));
}

const MountEntry* mount_of_device(const MountTable& table, unsigned major, unsigned minor) {
  for (const MountEntry& entry : table.entries()) {
    if (entry.major == major && entry.minor == minor) return &entry;
  }
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------- stage / unstage

Expected<LoopDevice> ImageNode::attach(const VolumeRecord& volume, LoopAttachOptions options) {
  DirectIo wanted = direct_io_setting(volume.mutable_parameters);
  options.direct_io = wanted != DirectIo::kOff;
  auto loop = LoopDevice::attach(files_.image(volume.id), options);
  if (loop && wanted == DirectIo::kOn && !loop->direct_io()) {
    // Not a reason to refuse the volume: what the image's filesystem allows can change after
    // directIO=true was accepted (a reflinked snapshot on xfs), and buffered I/O is correct.
    auto alignment = direct_io_alignment(files_.image(volume.id));
    spdlog::warn(
        "volume \"{}\" asks for direct I/O ({}=true), but the kernel did not give it to loop "
        "device \"{}\" on image \"{}\" ({}): it runs with buffered I/O",
        volume.name, kParameterDirectIo, loop->path(), files_.image(volume.id),
        alignment ? direct_io_refusal(*alignment) : alignment.status().message());
  }
  return loop;
}

Status ImageNode::stage(const VolumeRecord& volume, const StageSpec& spec) {
  Status status = image_size(files_.image(volume.id)).status();
  if (status)
    status = is_block_volume(volume) ? stage_block(volume, spec) : stage_mount(volume, spec);
  return status ? status : status.with_context(fmt::format("volume \"{}\"", volume.name));
}

Status ImageNode::stage_mount(const VolumeRecord& volume, const StageSpec& spec) {
  std::string filesystem = filesystem_of(volume);
  if (!spec.capability.fs_type.empty() && spec.capability.fs_type != filesystem) {
    return error(Code::kInvalidArgument,
                 "it holds an {} filesystem; volume_capability asks for fs_type {}", filesystem,
                 display_quoted(spec.capability.fs_type));
  }
  auto table = MountTable::read();
  if (!table) return table.status();
  auto loops = loop_devices_backed_by(files_.image(volume.id));
  if (!loops) return loops.status();
  // Staged elsewhere already: mount that same device again (one filesystem, one superblock).
  // A second loop device on the image would be a second filesystem writing the same file.
  for (const LoopInfo& loop : *loops) {
    if (!loop.read_only && mount_of_device(*table, loop.major, loop.minor) != nullptr) {
      ROSETCTL_RETURN_IF_ERROR(mount_device(loop.path, spec.staging_path, filesystem,
                                            MountOptions{}, mount_data(filesystem)));
      MountGuard mounted(spec.staging_path);
      ROSETCTL_RETURN_IF_ERROR(grow_mounted_if_pending(volume, loop.path, spec.staging_path));
      mounted.release();
      return Status::ok();
    }
  }
  ROSETCTL_RETURN_IF_ERROR(release_unused_devices(volume.id).status());

  auto loop = attach(volume, LoopAttachOptions{});
  if (!loop) return loop.status();
  crash_point("image-stage-attached");
  ROSETCTL_RETURN_IF_ERROR(prepare_filesystem(volume, loop->path()));
  ROSETCTL_RETURN_IF_ERROR(mount_device(loop->path(), spec.staging_path, filesystem, MountOptions{},
                                        mount_data(filesystem)));
  MountGuard mounted(spec.staging_path);  // destroyed before `loop`: unmount, then detach
  // xfs grows only while mounted (ext4 without CAP_SYS_RESOURCE has grown offline already).
  ROSETCTL_RETURN_IF_ERROR(grow_mounted_if_pending(volume, loop->path(), spec.staging_path));
  mounted.release();
  loop->release();  // autoclear: the mount now holds the device
  return Status::ok();
}

Status ImageNode::grow_mounted_if_pending(const VolumeRecord& volume, const std::string& device,
                                          const std::string& mount_point) {
  if (!files_.grow_pending(volume.id)) return Status::ok();
  std::string filesystem = filesystem_of(volume);
  // The device may have been attached before the image grew.
  ROSETCTL_RETURN_IF_ERROR(refresh_loop_capacity(device));
  Status grown = grow_filesystem_online(filesystem, device, mount_point);
  if (grown) return files_.clear_grow_pending(volume.id);
  if (can_grow_online(filesystem)) return grown;
  // Mounted elsewhere already, so it cannot grow offline now either: the stage still works,
  // and the growth stays pending for the next stage that finds the volume unmounted.
  spdlog::warn(
      "volume \"{}\": cannot grow {} online ({}); it grows at the next connect where it is not "
      "mounted already",
      volume.name, filesystem, escape_text(grown.message()));
  return Status::ok();
}

Status ImageNode::prepare_filesystem(const VolumeRecord& volume, const std::string& device) {
  std::string filesystem = filesystem_of(volume);
  auto signature = probe_signature(device);
  if (!signature) return signature.status();
  if (!signature->has_value()) {
    // First stage: a blank image. A fresh filesystem spans the whole device already.
    ROSETCTL_RETURN_IF_ERROR(make_filesystem(filesystem, device));
    return files_.clear_grow_pending(volume.id);
  }
  if (**signature != filesystem) {
    return error(Code::kFailedPrecondition,
                 "its image holds {}, not the {} filesystem it was created with; rosetctl never "
                 "formats a device that carries data",
                 **signature, filesystem);
  }
  if (files_.grow_pending(volume.id) && !can_grow_online(filesystem)) {
    // Growing ext4 in place was refused earlier (no CAP_SYS_RESOURCE): grow it now, unmounted.
    Status grown = grow_filesystem_offline(filesystem, device);
    if (!grown) {
      return grown.with_context(fmt::format(
          "growing {} to the image's new size before mounting failed; the image \"{}\" is "
          "unchanged beyond what the tool reports",
          filesystem, files_.image(volume.id)));
    }
    return files_.clear_grow_pending(volume.id);
  }
  return Status::ok();
}

Status ImageNode::stage_block(const VolumeRecord& volume, const StageSpec& spec) {
  auto stagings = store_.stagings(volume.id);
  if (!stagings) return stagings.status();
  auto table = MountTable::read();
  if (!table) return table.status();
  // Staged elsewhere already: share that device, as two devices would cache the image twice.
  for (const Staging& other : *stagings) {
    if (other.staging_path == spec.staging_path) continue;
    if (table->find_by_target(other.staging_path) == nullptr) continue;
    auto numbers = device_numbers(other.staging_path + "/" + kDeviceNode);
    if (!numbers) continue;
    return stage_block_device(spec.staging_path, *numbers);
  }
  ROSETCTL_RETURN_IF_ERROR(release_unused_devices(volume.id).status());

  // Nothing holds a raw block device open, so autoclear would detach it at once.
  auto loop = attach(volume, LoopAttachOptions{.autoclear = false});
  if (!loop) return loop.status();
  crash_point("image-stage-attached");
  auto numbers = device_numbers(loop->path());
  if (!numbers) return numbers.status();
  ROSETCTL_RETURN_IF_ERROR(stage_block_device(spec.staging_path, *numbers));
  loop->release();
  return Status::ok();
}

Status ImageNode::unstage(const VolumeRecord& volume, const std::string& staging_path) {
  ROSETCTL_RETURN_IF_ERROR(unmount_topmost(staging_path));
  auto released = release_unused_devices(volume.id);
  if (!released) return released.status().with_context(fmt::format("volume \"{}\"", volume.name));
  return Status::ok();
}

// ---------------------------------------------------------------- publish

Status ImageNode::publish_block(const VolumeRecord& volume, const PublishSpec& spec) {
  std::string node = spec.staging_path + "/" + kDeviceNode;
  if (spec.readonly) {
    auto read_only = read_only_node(volume, spec.staging_path);
    if (!read_only) return read_only.status();
    node = *read_only;
  }
  MountOptions options;
  options.read_only = spec.readonly;
  return bind_mount(node, spec.target_path, options, spec.before_attach);
}

// A read-only bind mount of a device node still lets a writer open the device, so read-only
// publications get a device of their own that the kernel keeps read-only.
Expected<std::string> ImageNode::read_only_node(const VolumeRecord& volume,
                                                const std::string& staging) {
  std::string node = staging + "/" + kReadOnlyDeviceNode;
  if (::access(node.c_str(), F_OK) == 0) return node;
  auto loop = attach(volume, LoopAttachOptions{.read_only = true, .autoclear = false});
  if (!loop) return loop.status();
  auto numbers = device_numbers(loop->path());
  if (!numbers) return numbers.status();
  Status made = make_device_node(staging, kReadOnlyDeviceNode, *numbers);
  if (!made) {
    // A concurrent read-only publish made it first: use theirs, our device goes away.
    if (made.code() == Code::kAlreadyExists) return node;
    return made;
  }
  loop->release();
  return node;
}

// ---------------------------------------------------------------- expand

Expected<int64_t> ImageNode::expand(const VolumeRecord& volume, const NodeExpandSpec& spec) {
  auto grown = expand_staged(volume, spec);
  if (!grown) return grown.status().with_context(fmt::format("volume \"{}\"", volume.name));
  return grown;
}

Expected<int64_t> ImageNode::expand_staged(const VolumeRecord& volume, const NodeExpandSpec& spec) {
  std::string image = files_.image(volume.id);
  auto size = image_size(image);
  if (!size) return size.status();
  auto loops = loop_devices_backed_by(image);
  if (!loops) return loops.status();
  if (loops->empty()) {
    return error(Code::kFailedPrecondition,
                 "it is not staged on this node; it grows when it is next staged");
  }
  for (const LoopInfo& loop : *loops)
    ROSETCTL_RETURN_IF_ERROR(refresh_loop_capacity(loop.path));
  if (is_block_volume(volume)) return *size;

  auto table = MountTable::read();
  if (!table) return table.status();
  std::string mount_point = spec.staging_path.empty() ? spec.volume_path : spec.staging_path;
  const MountEntry* mounted = table->find_by_target(mount_point);
  const LoopInfo* device = nullptr;
  for (const LoopInfo& loop : *loops) {
    if (mounted != nullptr && mounted->major == loop.major && mounted->minor == loop.minor) {
      device = &loop;
    }
  }
  if (device == nullptr) {
    return error(Code::kFailedPrecondition,
                 "it is not mounted at \"{}\"; it grows when it is next staged", mount_point);
  }
  std::string filesystem = filesystem_of(volume);
  Status grown = grow_filesystem_online(filesystem, device->path, mount_point);
  if (!grown) {
    if (can_grow_online(filesystem)) return grown;
    ROSETCTL_RETURN_IF_ERROR(files_.mark_grow_pending(volume.id));
    return error(Code::kFailedPrecondition,
                 "cannot grow {} online ({}); a mounted {} grows only with CAP_SYS_RESOURCE, "
                 "which rosetctl lacks here; it grows at the next connect",
                 filesystem, grown.message(), filesystem);
  }
  ROSETCTL_RETURN_IF_ERROR(files_.clear_grow_pending(volume.id));
  return *size;
}

// ---------------------------------------------------------------- copies

Expected<HeldImage> ImageNode::hold_still(const VolumeRecord& volume) {
  HeldImage held;
  auto loops = loop_devices_backed_by(files_.image(volume.id));
  if (!loops) return loops.status();
  if (loops->empty()) return held;  // staged nowhere: nothing writes to it
  if (is_block_volume(volume)) {
    for (const LoopInfo& loop : *loops) {
      UniqueFd fd(::open(loop.path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid() || ::fsync(fd.get()) != 0) {
        return errno_status(errno, fmt::format("cannot flush {} before copying the image of "
                                               "volume \"{}\"",
                                               loop.path, volume.name));
      }
    }
    return held;
  }
  auto table = MountTable::read();
  if (!table) return table.status();
  for (const LoopInfo& loop : *loops) {
    // One mounted device per image (stage_mount shares it), so one freeze covers every mount.
    const MountEntry* mount = mount_of_device(*table, loop.major, loop.minor);
    if (mount == nullptr) continue;
    auto mark = FreezeMark::take(files_.freeze_marker(volume.id));
    if (!mark) return mark.status();
    auto frozen = FrozenFilesystem::freeze(mount->mount_point);
    if (!frozen) {
      // Frozen by someone else: the mark stays, so the volume's condition reports it.
      if (frozen.status().code() == Code::kFailedPrecondition) mark->keep();
      return frozen.status();  // the caller names the volume
    }
    held.mark.emplace(std::move(*mark));
    held.frozen.emplace(std::move(*frozen));
    break;
  }
  return held;
}

Status ImageNode::thaw_leftover_freezes(std::string_view volume_id) {
  auto loops = loop_devices_backed_by(files_.image(volume_id));
  if (!loops) return loops.status();
  if (loops->empty()) return Status::ok();
  auto table = MountTable::read();
  if (!table) return table.status();
  for (const LoopInfo& loop : *loops) {
    const MountEntry* mount = mount_of_device(*table, loop.major, loop.minor);
    if (mount == nullptr) continue;
    auto thawed = thaw_filesystem(mount->mount_point);
    if (!thawed) return thawed.status();
    FreezeMark::remove(files_.freeze_marker(volume_id));
    if (*thawed) {
      spdlog::warn(
          "reconcile: thawed the filesystem of volume \"{}\" at \"{}\": a snapshot or clone "
          "that froze it was interrupted",
          volume_id, mount->mount_point);
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------- direct I/O

Status ImageNode::check_direct_io_possible(std::string_view volume_id, std::string_view name,
                                           bool shared_extents) const {
  auto alignment = direct_io_alignment(files_.image(volume_id));
  if (!alignment) return alignment.status();
  if (loop_direct_io_fits(*alignment)) return Status::ok();
  std::string why =
      fmt::format("volume \"{}\": {}=true is not possible for image \"{}\": {}", name,
                  kParameterDirectIo, files_.image(volume_id), direct_io_refusal(*alignment));
  if (shared_extents && *alignment != 0) {
    spdlog::warn("{}; {}=true is recorded and applies where the kernel allows it", why,
                 kParameterDirectIo);
    return Status::ok();
  }
  return error(Code::kInvalidArgument, "{}", why);
}

Status ImageNode::set_direct_io(const VolumeRecord& volume, bool on) {
  auto loops = loop_devices_backed_by(files_.image(volume.id));
  if (!loops) return loops.status();
  if (loops->empty()) {
    Status present = image_size(files_.image(volume.id)).status();
    if (!present) return present.with_context(fmt::format("volume \"{}\"", volume.name));
    return on ? check_direct_io_possible(volume.id, volume.name) : Status::ok();
  }
  for (size_t i = 0; i < loops->size(); ++i) {
    Status switched = set_loop_direct_io((*loops)[i].path, on);
    if (!switched) {
      // All or nothing: the devices switched already go back.
      for (size_t j = 0; j < i; ++j)
        (void)set_loop_direct_io((*loops)[j].path, (*loops)[j].direct_io);
      if (switched.code() == Code::kInvalidArgument) {
        // Say why: reconnecting does not help when the image's filesystem wants coarser
        // alignment than the device's sectors.
        auto alignment = direct_io_alignment(files_.image(volume.id));
        if (alignment && !loop_direct_io_fits(*alignment)) {
          switched =
              error(Code::kInvalidArgument, "the kernel refuses direct I/O for image \"{}\": {}",
                    files_.image(volume.id), direct_io_refusal(*alignment));
        }
      }
      return switched.with_context(fmt::format("volume \"{}\": {}={}", volume.name,
                                               kParameterDirectIo, on ? "true" : "false"));
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------- doctor

std::vector<HostFinding> ImageNode::unaccounted_devices(const std::string& state_root) const {
  auto loops = list_loop_devices();
  auto table = MountTable::read();
  if (!loops || !table) {
    Status why = !loops ? loops.status() : table.status();
    return {{kLoopDevicesRow, true, fmt::format("cannot list loop devices: {}", why.message())}};
  }
  auto images = image_identities();
  if (!images) {
    return {{kLoopDevicesRow, true,
             fmt::format("cannot identify the volumes' images: {}", images.status().message())}};
  }
  std::vector<HostFinding> found;
  for (const LoopInfo& loop : *loops) {
    std::string volume_id = volume_of_loop(loop, *images);
    if (volume_id.empty() && !loop.backing_file.starts_with(state_root + "/")) continue;
    auto record = volume_id.empty() ? Expected<std::optional<VolumeRecord>>(std::nullopt)
                                    : store_.find_volume(volume_id);
    if (!record || !record->has_value()) {
      found.push_back({kLoopDevicesRow, true,
                       fmt::format("{} backs \"{}\", which no volume record names; detach it "
                                   "(losetup -d {}) once nothing uses it",
                                   loop.path, loop.backing_file, loop.path)});
      continue;
    }
    auto used = devices_in_use(volume_id, *table);
    if (used && used->contains({loop.major, loop.minor})) continue;
    found.push_back(
        {kLoopDevicesRow, true,
         fmt::format("{} backs volume \"{}\"'s image, and no staging or mount uses it (an "
                     "interrupted stage); `rosetctl doctor --fix` detaches it",
                     loop.path, (*record)->name)});
  }
  return found;
}

// ---------------------------------------------------------------- devices in use

Expected<std::set<ImageNode::DeviceNumbers>> ImageNode::devices_in_use(
    std::string_view volume_id, const MountTable& table) const {
  std::set<DeviceNumbers> used;
  for (const MountEntry& entry : table.entries())
    used.emplace(entry.major, entry.minor);
  auto stagings = store_.stagings(volume_id);
  if (!stagings) return stagings.status();
  for (const Staging& staging : *stagings) {
    if (table.find_by_target(staging.staging_path) == nullptr) continue;
    for (const char* name : {kDeviceNode, kReadOnlyDeviceNode}) {
      auto numbers = device_numbers(staging.staging_path + "/" + name);
      if (numbers) used.emplace(::major(*numbers), ::minor(*numbers));
    }
  }
  return used;
}

Expected<std::vector<std::string>> ImageNode::release_unused_devices(std::string_view volume_id) {
  auto loops = loop_devices_backed_by(files_.image(volume_id));
  if (!loops) return loops.status();
  std::vector<std::string> released;
  if (loops->empty()) return released;
  auto table = MountTable::read();
  if (!table) return table.status();
  auto used = devices_in_use(volume_id, *table);
  if (!used) return used.status();
  for (const LoopInfo& loop : *loops) {
    if (used->contains({loop.major, loop.minor})) continue;
    ROSETCTL_RETURN_IF_ERROR(detach_loop_device(loop.path));
    released.push_back(loop.path);
  }
  return released;
}

}  // namespace rosetctl
