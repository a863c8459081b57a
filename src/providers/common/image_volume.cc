// Image volume plans, image files and the capacity policy (see image_volume.h).
#include "providers/common/image_volume.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <optional>

#include "core/crash_point.h"
#include "core/directory_listing.h"
#include "core/map_lookup.h"
#include "core/size.h"
#include "core/unique_fd.h"
#include "core/validate.h"
#include "providers/common/image_filesystem.h"

namespace rosetctl {
namespace {

constexpr int64_t kBlockBytes = 4096;
constexpr std::string_view kImageSuffix = ".img";
constexpr std::string_view kReservationSuffix = ".reserved";

int64_t round_up(int64_t bytes) {
  return (bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
}

// The one filesystem the mount capabilities agree on ("" when none names one).
Expected<std::string> requested_filesystem(const std::vector<Capability>& capabilities) {
  std::string chosen;
  for (const Capability& capability : capabilities) {
    if (capability.fs_type.empty()) continue;
    if (!chosen.empty() && chosen != capability.fs_type) {
      return error(Code::kInvalidArgument,
                   "volume_capabilities ask for different filesystems ({} and {}); an image "
                   "volume has one",
                   display_quoted(chosen), display_quoted(capability.fs_type));
    }
    chosen = capability.fs_type;
  }
  return chosen;
}

Status sync_directory(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) {
    return errno_status(errno, fmt::format("cannot sync directory \"{}\"", dir));
  }
  return Status::ok();
}

// The largest file the filesystem holding `dir` allows (its s_maxbytes, which no system call
// reports), found by sizing an unnamed file: sparse, so nothing is allocated. nullopt if unknown.
std::optional<int64_t> largest_file_bytes(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return std::nullopt;
  int64_t fits = 0;
  int64_t too_large = std::numeric_limits<int64_t>::max();
  while (too_large - fits > 1) {
    int64_t middle = fits + (too_large - fits) / 2;
    if (::ftruncate(fd.get(), middle) == 0) {
      fits = middle;
    } else if (errno == EFBIG || errno == EINVAL) {
      too_large = middle;
    } else {
      return std::nullopt;
    }
  }
  return fits;
}

// A limit as people say it: rounded up to whole units of its largest binary unit ("16Ti").
std::string rounded_up_size(int64_t bytes) {
  int64_t unit = 1;
  while (unit <= bytes / 1024)
    unit *= 1024;
  return format_size((bytes / unit + (bytes % unit != 0 ? 1 : 0)) * unit);
}

// Sets the image's size. EFBIG (beyond the filesystem's largest file: just under 16 TiB on ext4
// with 4 KiB blocks) is OUT_OF_RANGE naming that limit: CSI's code for a capacity the plugin
// cannot provide, which no retry and no free space would change.
Status size_image(int fd, int64_t bytes, const std::string& dir, const std::string& path) {
  if (::ftruncate(fd, bytes) == 0) return Status::ok();
  int err = errno;
  if (err != EFBIG) {
    return errno_status(err, fmt::format("cannot size image \"{}\" to {} bytes", path, bytes));
  }
  std::optional<int64_t> limit = largest_file_bytes(dir);
  if (!limit) {
    return error(Code::kOutOfRange,
                 "an image of {} does not fit in one file of the filesystem holding \"{}\" "
                 "(File too large)",
                 format_size(bytes), dir);
  }
  return error(Code::kOutOfRange,
               "an image of {} does not fit in one file of the filesystem holding \"{}\": its "
               "largest file is {} bytes (under {}); ask for less, or keep images on a "
               "filesystem with larger files (xfs)",
               format_size(bytes), dir, *limit, rounded_up_size(*limit));
}

}  // namespace

bool is_image_volume(const VolumeRecord& volume) {
  return value_or_empty(volume.context, kContextType) == kTypeImage;
}

bool is_block_volume(const VolumeRecord& volume) {
  return volume.access_type == "block";
}

std::string filesystem_of(const VolumeRecord& volume) {
  return value_or_empty(volume.context, kContextFilesystem);
}

bool wants_image(const CreateVolumeSpec& spec) {
  auto type = spec.parameters.find(kContextType);
  if (type != spec.parameters.end() && type->second == kTypeImage) return true;
  for (const Capability& capability : spec.capabilities) {
    if (capability.access_type == AccessType::kBlock) return true;
  }
  return false;
}

Expected<ImagePlan> plan_image(const CreateVolumeSpec& spec) {
  ImagePlan plan;
  plan.block =
      !spec.capabilities.empty() && spec.capabilities.front().access_type == AccessType::kBlock;
  if (!plan.block) {
    auto requested = requested_filesystem(spec.capabilities);
    if (!requested) return requested.status();
    auto filesystem = checked_filesystem(*requested);
    if (!filesystem) return filesystem.status();
    plan.filesystem = std::move(*filesystem);
  }

  // COs may leave the size to the plugin (CSI allows an empty capacity_range); the image is
  // sparse, so the default costs nothing until written.
  int64_t asked = spec.required_bytes > 0 ? spec.required_bytes : spec.limit_bytes;
  if (asked <= 0) asked = kDefaultImageBytes;
  auto bytes = image_bytes(asked, spec.limit_bytes);
  if (!bytes) return bytes.status();
  plan.bytes = *bytes;
  int64_t minimum = plan.block ? kBlockBytes : minimum_filesystem_bytes(plan.filesystem);
  if (plan.bytes < minimum) {
    return error(Code::kOutOfRange,
                 "an {} image volume needs at least {} ({} bytes); {} bytes were asked for",
                 plan.block ? "block" : plan.filesystem, format_size(minimum), minimum, asked);
  }
  return plan;
}

StringMap image_context(const ImagePlan& plan) {
  StringMap context = {{kContextType, std::string(kTypeImage)},
                       {kContextAccess, std::string(plan.block ? kAccessBlock : kAccessMount)}};
  if (!plan.block) context[kContextFilesystem] = plan.filesystem;
  return context;
}

Expected<int64_t> image_bytes(int64_t required, int64_t limit) {
  int64_t bytes = round_up(required);
  if (limit > 0 && bytes > limit) {
    return error(Code::kOutOfRange,
                 "image volumes come in whole 4 KiB blocks: {} bytes rounds up to {}, above "
                 "capacity_range.limit_bytes {}",
                 required, bytes, limit);
  }
  return bytes;
}

// ---------------------------------------------------------------- ImageFiles

std::string ImageFiles::image(std::string_view volume_id) const {
  return fmt::format("{}/{}{}", dir_, volume_id, kImageSuffix);
}

std::string ImageFiles::grow_marker(std::string_view volume_id) const {
  return fmt::format("{}/{}.grow", dir_, volume_id);
}

std::string ImageFiles::freeze_marker(std::string_view volume_id) const {
  return fmt::format("{}/{}.frozen", dir_, volume_id);
}

std::string ImageFiles::volume_of_image(std::string_view path) const {
  if (!path.starts_with(dir_) || path.size() <= dir_.size() || path[dir_.size()] != '/' ||
      !path.ends_with(kImageSuffix)) {
    return "";
  }
  std::string_view name = path.substr(dir_.size() + 1);
  name.remove_suffix(kImageSuffix.size());
  if (name.empty() || name.find('/') != std::string_view::npos) return "";
  return std::string(name);
}

Status ImageFiles::ensure_dir() const {
  if (::mkdir(dir_.c_str(), 0700) == 0 || errno == EEXIST) return Status::ok();
  return errno_status(errno, fmt::format("cannot create the image directory \"{}\"", dir_));
}

Status ImageFiles::create(std::string_view volume_id, int64_t bytes) const {
  ROSETCTL_RETURN_IF_ERROR(ensure_dir());
  auto allocating = lock_allocations();
  if (!allocating) return allocating.status();
  ROSETCTL_RETURN_IF_ERROR(check_room(bytes, fmt::format("a {} image", format_size(bytes))));
  std::string path = image(volume_id);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot create image \"{}\"", path));
  Status sized = size_image(fd.get(), bytes, dir_, path);
  if (sized && ::fsync(fd.get()) != 0) {
    sized = errno_status(errno, fmt::format("cannot sync image \"{}\"", path));
  }
  if (!sized) {
    ::unlink(path.c_str());
    return sized;
  }
  return sync_directory(dir_);
}

std::string ImageFiles::reservation(std::string_view volume_id) const {
  return fmt::format("{}/{}{}", dir_, volume_id, kReservationSuffix);
}

void ImageFiles::Reservation::drop() {
  if (fd_.valid()) ::unlink(path_.c_str());
  fd_.reset();
}

Expected<ImageFiles::Reservation> ImageFiles::reserve(std::string_view volume_id,
                                                      int64_t bytes) const {
  // Locked before it has a name, so nobody can take it for the leftover of a dead create.
  UniqueFd fd(::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  std::string path = reservation(volume_id);
  std::string anonymous = fmt::format("/proc/self/fd/{}", fd.get());
  if (!fd.valid() || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 ||
      ::ftruncate(fd.get(), bytes) != 0 ||
      ::linkat(AT_FDCWD, anonymous.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    return errno_status(errno, fmt::format("cannot reserve room for image \"{}\"", path));
  }
  return Reservation(std::move(fd), std::move(path));
}

Status ImageFiles::create_filled(std::string_view volume_id, int64_t bytes, bool filesystem_follows,
                                 const std::function<Status(int fd)>& fill) const {
  ROSETCTL_RETURN_IF_ERROR(ensure_dir());
  // Dropped once the image is named (which then holds the promise) or the create failed.
  Reservation reserved;
  if (!overcommit_) {
    // The fill may take long: the allocation lock covers only the check and the reservation.
    auto allocating = lock_allocations();
    if (!allocating) return allocating.status();
    ROSETCTL_RETURN_IF_ERROR(check_room(bytes, fmt::format("a {} image", format_size(bytes))));
    auto made = reserve(volume_id, bytes);
    if (!made) return made.status();
    reserved = std::move(*made);
  }
  std::string path = image(volume_id);
  UniqueFd fd(::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return errno_status(errno, fmt::format("cannot create a file in \"{}\"", dir_));
  }
  ROSETCTL_RETURN_IF_ERROR(fill(fd.get()));
  crash_point("image-filled");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot finish image \"{}\"", path));
  }
  if (st.st_size < bytes) ROSETCTL_RETURN_IF_ERROR(size_image(fd.get(), bytes, dir_, path));
  if (::fsync(fd.get()) != 0) {
    return errno_status(errno, fmt::format("cannot finish image \"{}\"", path));
  }
  std::string anonymous = fmt::format("/proc/self/fd/{}", fd.get());
  if (::linkat(AT_FDCWD, anonymous.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) {
    return errno_status(errno, fmt::format("cannot create image \"{}\"", path));
  }
  reserved.drop();  // the image promises its unwritten part itself from here on
  // The volume is recorded only after this returns, so a crash from here on leaves an image no
  // record names (reported by reconcile), never a recorded volume without its marker.
  Status finished = filesystem_follows ? mark_grow_pending(volume_id) : sync_directory(dir_);
  if (!finished) (void)remove(volume_id);
  return finished;
}

Status ImageFiles::remove(std::string_view volume_id) const {
  for (const std::string& path :
       {grow_marker(volume_id), freeze_marker(volume_id), image(volume_id)}) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
    }
  }
  return Status::ok();
}

Status ImageFiles::grow(std::string_view volume_id, int64_t bytes, bool filesystem_follows) const {
  std::string path = image(volume_id);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot grow image \"{}\"", path));
  }
  if (bytes <= st.st_size) return Status::ok();
  auto allocating = lock_allocations();
  if (!allocating) return allocating.status();
  ROSETCTL_RETURN_IF_ERROR(
      check_room(bytes - st.st_size, fmt::format("growing to {}", format_size(bytes))));
  // The marker goes first (a crash after the image grew must still grow its filesystem), so a
  // grow that fails takes back a marker it wrote: nothing grew, and nothing is left to do.
  bool marked_here = filesystem_follows && !grow_pending(volume_id);
  if (filesystem_follows) ROSETCTL_RETURN_IF_ERROR(mark_grow_pending(volume_id));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  Status grown = fd.valid() ? size_image(fd.get(), bytes, dir_, path)
                            : errno_status(errno, fmt::format("cannot grow image \"{}\"", path));
  if (grown && ::fsync(fd.get()) != 0) {
    grown = errno_status(errno, fmt::format("cannot grow image \"{}\" to {} bytes", path, bytes));
  }
  if (!grown && marked_here) (void)clear_grow_pending(volume_id);
  return grown;
}

bool ImageFiles::grow_pending(std::string_view volume_id) const {
  return ::access(grow_marker(volume_id).c_str(), F_OK) == 0;
}

Status ImageFiles::mark_grow_pending(std::string_view volume_id) const {
  std::string marker = grow_marker(volume_id);
  UniqueFd fd(::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid() || ::fsync(fd.get()) != 0) {
    return errno_status(errno, fmt::format("cannot write grow marker \"{}\"", marker));
  }
  return sync_directory(dir_);
}

Status ImageFiles::clear_grow_pending(std::string_view volume_id) const {
  std::string marker = grow_marker(volume_id);
  if (::unlink(marker.c_str()) != 0 && errno != ENOENT) {
    return errno_status(errno, fmt::format("cannot remove grow marker \"{}\"", marker));
  }
  return Status::ok();
}

Expected<std::vector<std::string>> ImageFiles::entries() const {
  auto names = list_directory(dir_);
  if (!names && names.status().code() == Code::kNotFound) {
    return std::vector<std::string>();  // no image volume yet
  }
  if (!names) return names.status().with_context("the image directory");
  return names;
}

Expected<std::vector<std::string>> ImageFiles::volume_ids() const {
  auto names = entries();
  if (!names) return names.status();
  std::vector<std::string> ids;
  for (const std::string& name : *names) {
    std::string id = volume_of_image(fmt::format("{}/{}", dir_, name));
    if (!id.empty()) ids.push_back(std::move(id));
  }
  return ids;
}

Expected<int64_t> ImageFiles::unallocated_bytes() const {
  auto names = entries();
  if (!names) return names.status();
  std::vector<std::string> images, reservations;
  for (const std::string& name : *names) {
    std::string path = fmt::format("{}/{}", dir_, name);
    if (!volume_of_image(path).empty()) images.push_back(std::move(path));
    if (name.ends_with(kReservationSuffix)) reservations.push_back(std::move(path));
  }
  for (const std::string& path : reservations) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat opened, named;
    if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0 &&
        ::fstat(fd.get(), &opened) == 0 && ::lstat(path.c_str(), &named) == 0 &&
        opened.st_ino == named.st_ino) {
      // Its create died (a kill -9 mid-restore): the promise went with it. (The inode check:
      // only the file we found unlocked, never one that took its name since.)
      ::unlink(path.c_str());
      continue;
    }
    images.push_back(path);
  }
  int64_t total = 0;
  for (const std::string& path : images) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;  // deleted meanwhile
    total += std::max<int64_t>(0, st.st_size - static_cast<int64_t>(st.st_blocks) * 512);
  }
  return total;
}

Expected<int64_t> ImageFiles::available_bytes() const {
  ROSETCTL_RETURN_IF_ERROR(ensure_dir());
  struct statvfs fs;
  if (::statvfs(dir_.c_str(), &fs) != 0) {
    return errno_status(errno, fmt::format("cannot statfs \"{}\"", dir_));
  }
  int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  if (overcommit_) return free_bytes;
  auto promised = unallocated_bytes();
  if (!promised) return promised.status();
  return std::max<int64_t>(0, free_bytes - *promised);
}

Expected<ImageFiles::SpaceBalance> ImageFiles::space_balance() const {
  struct statvfs fs;
  if (::statvfs(dir_.c_str(), &fs) != 0) {
    return errno_status(errno, fmt::format("cannot statfs \"{}\"", dir_));
  }
  auto promised = unallocated_bytes();
  if (!promised) return promised.status();
  return SpaceBalance{static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize),
                      *promised};
}

Expected<UniqueFd> ImageFiles::lock_allocations() const {
  UniqueFd fd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno_status(errno, fmt::format("cannot open \"{}\"", dir_));
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return errno_status(errno, fmt::format("cannot lock \"{}\"", dir_));
  }
  return fd;
}

Status ImageFiles::check_room(int64_t more_bytes, std::string_view what) const {
  if (overcommit_) return Status::ok();
  auto available = available_bytes();
  if (!available) return available.status();
  if (more_bytes <= *available) return Status::ok();
  return error(Code::kResourceExhausted,
               "not enough space for {}: {} available in \"{}\" after what existing image volumes "
               "were promised (free space minus their unwritten part); free space, or allow "
               "overcommit with --capacity-overcommit",
               what, format_size(*available), dir_);
}

}  // namespace rosetctl
