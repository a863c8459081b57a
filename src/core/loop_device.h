// Loop devices: attaching a file (LOOP_CTL_GET_FREE + LOOP_CONFIGURE), the LoopDevice guard
// that detaches it again on a failure path, finding the devices backed by a file (sysfs, and
// LOOP_GET_STATUS64 for the file's identity), refreshing a device's size after its file grew, and
// switching direct I/O while attached.
#pragma once

#include <sys/types.h>

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/unique_fd.h"

namespace rosetctl {

struct LoopAttachOptions {
  bool read_only = false;
  // The kernel detaches the device by itself when its last user goes away (the mount on it,
  // or our descriptor if nothing else took it): a process killed mid-way leaks nothing.
  bool autoclear = true;
  // Bypass the page cache of the backing file (no double caching). Falls back to buffered
  // I/O when the backing filesystem cannot do it.
  bool direct_io = true;
};

// An attached loop device this process owns until release(): on any early return the
// destructor detaches it. Best effort, as a destructor cannot report.
class LoopDevice {
 public:
  // Attaches `backing_file` to a free loop device.
  static Expected<LoopDevice> attach(const std::string& backing_file,
                                     const LoopAttachOptions& options);

  LoopDevice() = default;
  ~LoopDevice();
  LoopDevice(LoopDevice&& other) noexcept;
  LoopDevice& operator=(LoopDevice&& other) noexcept;
  LoopDevice(const LoopDevice&) = delete;
  LoopDevice& operator=(const LoopDevice&) = delete;

  const std::string& path() const { return path_; }  // "/dev/loop3"
  int number() const { return number_; }
  // Whether direct I/O took effect (the kernel may decline it for the backing file).
  bool direct_io() const { return direct_io_; }

  // Success: keep the device attached and close our descriptor. An autoclear device then
  // lives exactly as long as something else holds it open (a mount).
  void release();

 private:
  LoopDevice(UniqueFd fd, int number, bool direct_io);
  void reset();

  UniqueFd fd_;
  std::string path_;
  int number_ = -1;
  bool direct_io_ = false;
};

// One attached loop device as sysfs describes it.
struct LoopInfo {
  int number = -1;
  std::string path;          // "/dev/loop3"
  std::string backing_file;  // as the kernel shows it, without the " (deleted)" mark
  bool backing_deleted = false;
  bool read_only = false;
  bool autoclear = false;
  bool direct_io = false;
  unsigned major = 0;
  unsigned minor = 0;
  int64_t size_bytes = 0;
};

// Every attached loop device, read from `sysfs_block` (/sys/block).
Expected<std::vector<LoopInfo>> list_loop_devices(const std::string& sysfs_block = "/sys/block");

// A file as the kernel identifies it: its filesystem's device numbers and its inode number.
struct FileIdentity {
  unsigned major = 0;
  unsigned minor = 0;
  uint64_t inode = 0;
  auto operator<=>(const FileIdentity&) const = default;
};

// The identity of the file at `path` (stat), or nullopt when there is none to stat.
std::optional<FileIdentity> file_identity(const std::string& path);

// The identity of the file attached to `loop` (LOOP_GET_STATUS64 lo_device / lo_inode), or
// nullopt when it cannot be read (detached meanwhile, no device node, no permission).
// Unlike sysfs's backing_file, it names the same file from every mount namespace: that path
// is resolved in the namespace that attached the device, and once that namespace is gone (a
// node plugin's container restarted) it reads relative to a detached mount ("/img").
std::optional<FileIdentity> loop_backing_identity(const LoopInfo& loop);

// Whether `loop` is backed by the file at `path`, whose identity is `identity` (nullopt when
// it has none: deleted): the identities match, or, where no identity can be compared or the
// backing file was deleted, sysfs shows the same path.
bool loop_backed_by(const LoopInfo& loop, const std::string& path,
                    const std::optional<FileIdentity>& identity);

// The attached loop devices whose backing file is `file` (also once it has been deleted, and
// also when sysfs shows its path as another mount namespace saw it).
Expected<std::vector<LoopInfo>> loop_devices_backed_by(const std::string& file);

// LOOP_CLR_FD. A device with nothing attached is fine. A device still open elsewhere (a mount
// on it) is only marked to detach when its last user lets go: that is the kernel's rule.
Status detach_loop_device(const std::string& device);

// LOOP_SET_CAPACITY: the device takes the current size of its backing file.
Status refresh_loop_capacity(const std::string& device);

// LOOP_SET_DIRECT_IO: the device reads and writes its backing file with direct I/O (bypassing
// the page cache) or buffered, from now on, also while mounted. INVALID_ARGUMENT when the
// kernel cannot do direct I/O on that file (its filesystem, or a block size that does not fit).
Status set_loop_direct_io(const std::string& device, bool direct_io);

// Loop devices are always attached with sectors of this size (see LoopDevice::attach).
inline constexpr uint32_t kLoopSectorBytes = 512;

// What direct I/O on a file needs: the file offset alignment its filesystem asks for now
// (statx STATX_DIOALIGN), 0 when it cannot do direct I/O at all. It can change under a file:
// xfs asks for its block size once the file shares extents with a reflinked copy. Kernels
// without STATX_DIOALIGN: 512 when the file opens with O_DIRECT.
Expected<uint32_t> direct_io_alignment(const std::string& file);

// Whether a loop device (kLoopSectorBytes sectors) can do direct I/O on a file that needs
// `alignment`: the kernel refuses it when the file needs a coarser one than the device's sectors.
constexpr bool loop_direct_io_fits(uint32_t alignment) {
  return alignment != 0 && alignment <= kLoopSectorBytes;
}

// loop_direct_io_fits for `file` now.
Expected<bool> file_allows_direct_io(const std::string& file);

// Why a loop device cannot do direct I/O on a file needing `alignment` (see above), for errors.
std::string direct_io_refusal(uint32_t alignment);

// Size in bytes of a block device (BLKGETSIZE64).
Expected<int64_t> block_device_size(const std::string& device);

}  // namespace rosetctl
