// Image-backed local volumes, node side: a loop device per staged image, the filesystem on it
// (made on first stage, only on a device without a signature), raw block staging, growing on
// the node, health, and the reconcile that reclaims devices a crash left behind.
//
// A staged mount volume is its loop device's filesystem mounted at the staging path; the loop
// device is autoclear, so the kernel detaches it when the last mount goes (a kill -9 before
// the mount leaks nothing). A staged block volume is a small tmpfs at the staging path holding
// the device node `device` (and `device-ro`, a read-only loop device, once a read-only publish
// asks for it); nothing holds those devices open, so they are detached explicitly at unstage
// and, after a crash, by reconcile or the next stage.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "core/fs_freeze.h"
#include "core/loop_device.h"
#include "core/mountinfo.h"
#include "core/state_store.h"
#include "providers/common/freeze_mark.h"
#include "providers/common/image_volume.h"
#include "providers/provider.h"

namespace rosetctl {

// The doctor's row of unaccounted_devices' findings.
inline constexpr const char* kLoopDevicesRow = "loop-devices";

// What holds an image still while it is copied (ImageNode::hold_still); releases it when it goes.
struct HeldImage {
  std::optional<FreezeMark> mark;          // declared first: goes after the thaw
  std::optional<FrozenFilesystem> frozen;  // the filesystem in it, where it is mounted here
};

class ImageNode {
 public:
  ImageNode(const ImageFiles& files, StateStore& store) : files_(files), store_(store) {}

  // Node calls, made with the daemon's per-volume locks held.
  Status stage(const VolumeRecord& volume, const StageSpec& spec);
  Status unstage(const VolumeRecord& volume, const std::string& staging_path);
  Status publish_block(const VolumeRecord& volume, const PublishSpec& spec);
  Expected<int64_t> expand(const VolumeRecord& volume, const NodeExpandSpec& spec);

  // The volume's directIO parameter changed: every loop device on its image switches now, also
  // while mounted (the next stage attaches accordingly anyway). Switching on where the kernel
  // cannot, or with nothing attached on an image that cannot do direct I/O, is INVALID_ARGUMENT
  // and changes nothing.
  Status set_direct_io(const VolumeRecord& volume, bool on);
  // INVALID_ARGUMENT when a loop device cannot do direct I/O on the image. `name`: the volume's.
  // With `shared_extents` (a restore or clone, whose image may share extents with its source),
  // only a filesystem that can never do direct I/O is refused; a coarser alignment, which the
  // sharing alone may cause, is logged and accepted (stages then run buffered).
  Status check_direct_io_possible(std::string_view volume_id, std::string_view name,
                                  bool shared_extents = false) const;

  // Detaches every loop device of the volume's image that no mount and no mounted staging of
  // the volume uses (leftovers of an interrupted stage). Returns the devices detached.
  Expected<std::vector<std::string>> release_unused_devices(std::string_view volume_id);

  // Makes the image safe to copy, with the daemon's stage lock of the volume held (so it is
  // neither staged nor unstaged meanwhile): a filesystem on it mounted here is frozen
  // (FIFREEZE) until the result goes, which writes out everything written so far and holds new
  // writes back; a raw block volume's loop devices are flushed (fsync) instead, which cannot
  // hold a writer back. An image staged nowhere needs nothing.
  Expected<HeldImage> hold_still(const VolumeRecord& volume);

  // Abnormal when the image is missing, a staging's mount is gone or dead, or its loop device
  // is no longer attached to the image.
  VolumeCondition condition(const VolumeRecord& volume) const;

  // Every loop device backed by an image in our directory that nothing uses is detached, and
  // images without a volume record (a crash between making the file and recording the volume)
  // are removed when they were never written, else reported.
  Status reconcile(const VolumeLocker& lock);
  // `doctor`: loop devices backed by a file under `state_root` that no staging uses: an image
  // whose staging is gone (reconcile detaches it), or a file that is no volume's image.
  std::vector<HostFinding> unaccounted_devices(const std::string& state_root) const;

 private:
  using DeviceNumbers = std::pair<unsigned, unsigned>;

  // Attaches the image as the volume's directIO parameter asks (FAILED_PRECONDITION when it
  // asks for direct I/O the kernel will not give).
  Expected<LoopDevice> attach(const VolumeRecord& volume, LoopAttachOptions options);
  Status stage_mount(const VolumeRecord& volume, const StageSpec& spec);
  Status stage_block(const VolumeRecord& volume, const StageSpec& spec);
  Expected<int64_t> expand_staged(const VolumeRecord& volume, const NodeExpandSpec& spec);
  // Grows the filesystem mounted at `mount_point` if a growth is pending (online; an ext4 that
  // may not grow online stays pending, and the stage goes on).
  Status grow_mounted_if_pending(const VolumeRecord& volume, const std::string& device,
                                 const std::string& mount_point);
  // Formats a blank device, refuses one holding anything else, grows ext4 if a grow is due.
  Status prepare_filesystem(const VolumeRecord& volume, const std::string& device);
  Status forget_orphan_images();
  // The volume whose image backs `loop`, or "": by the image files' identities (`images`, from
  // image_identities), which hold in any mount namespace, else by sysfs's path.
  std::string volume_of_loop(const LoopInfo& loop,
                             const std::map<FileIdentity, std::string>& images) const;
  Expected<std::map<FileIdentity, std::string>> image_identities() const;
  // Thaws filesystems of the volume's image left frozen by a process killed mid-copy.
  Status thaw_leftover_freezes(std::string_view volume_id);
  Expected<std::string> read_only_node(const VolumeRecord& volume, const std::string& staging);
  // Devices in use for `volume_id`: anything mounted from them, and the device nodes of the
  // volume's mounted block stagings.
  Expected<std::set<DeviceNumbers>> devices_in_use(std::string_view volume_id,
                                                   const MountTable& table) const;

  const ImageFiles& files_;
  StateStore& store_;
};

}  // namespace rosetctl
