// Image-backed local volumes, controller side: what a CreateVolume for one asks (block or a
// filesystem, and a size), the sparse files under <state>/images/, growing them, and the
// capacity policy that keeps promised space honest.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_store.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "providers/provider.h"
#include "providers/volume_context.h"

namespace rosetctl {

bool is_image_volume(const VolumeRecord& volume);
bool is_block_volume(const VolumeRecord& volume);
// The filesystem recorded for an image mount volume.
std::string filesystem_of(const VolumeRecord& volume);

// What an image volume is to be.
// The size of an image volume created without one (sparse: it costs nothing until written).
inline constexpr int64_t kDefaultImageBytes = int64_t{1} << 30;

struct ImagePlan {
  bool block = false;
  std::string filesystem;  // empty for block volumes
  int64_t bytes = 0;       // rounded up to whole 4 KiB blocks
};

// True when the request asks for an image volume: parameter type=image, or block access
// (block volumes are always image-backed).
bool wants_image(const CreateVolumeSpec& spec);

// The plan for an image volume: INVALID_ARGUMENT for an unsupported or contradictory
// filesystem; OUT_OF_RANGE below the filesystem's minimum or above limit_bytes.
Expected<ImagePlan> plan_image(const CreateVolumeSpec& spec);

StringMap image_context(const ImagePlan& plan);

// The image size for `required` bytes (whole 4 KiB blocks), OUT_OF_RANGE above `limit` (0:
// none).
Expected<int64_t> image_bytes(int64_t required, int64_t limit);

// The files of image volumes: <dir>/<id>.img, a sparse file holding the volume, and
// <dir>/<id>.grow, present while the filesystem on it has yet to grow to the file's size.
//
// Capacity policy: a sparse image takes disk space only as it is written, so the space a
// volume was promised but has not used yet is still free on disk. Unless overcommit is on,
// that unallocated remainder counts as taken: available = free bytes of the filesystem holding
// <dir> minus the unallocated part of every image, and a create or grow that does not fit is
// RESOURCE_EXHAUSTED. With overcommit, available is the plain free space, and images can
// promise more than the disk has (writes then fail with ENOSPC inside the volumes).
class ImageFiles {
 public:
  ImageFiles(std::string dir, bool overcommit) : dir_(std::move(dir)), overcommit_(overcommit) {}

  const std::string& dir() const { return dir_; }
  std::string image(std::string_view volume_id) const;
  std::string grow_marker(std::string_view volume_id) const;
  // <id>.frozen: a freeze of its filesystem may be left (providers/common/freeze_mark.h).
  std::string freeze_marker(std::string_view volume_id) const;
  // The volume id whose image `path` is, or "" when it is no image of ours.
  std::string volume_of_image(std::string_view path) const;
  // The volume ids of every image in the directory.
  Expected<std::vector<std::string>> volume_ids() const;

  // A new sparse image of `bytes` (durable before it returns); RESOURCE_EXHAUSTED when it
  // does not fit under the capacity policy.
  Status create(std::string_view volume_id, int64_t bytes) const;
  // A new image of `bytes` whose first bytes `fill(fd)` writes (a restore or a clone), under the
  // same capacity policy. It is filled as an anonymous file (O_TMPFILE) and named only once it
  // is complete and durable, so a crash never leaves a half-written image, nor a temporary file.
  // Its room is reserved before the fill starts (a sparse <id>.reserved of `bytes`, counted as
  // promised and locked while this runs), so concurrent creates cannot promise it again.
  // With `filesystem_follows`, the grow marker is set too: the filesystem inside is grown to
  // the image's size at its first stage (a no-op when it fills the image already).
  Status create_filled(std::string_view volume_id, int64_t bytes, bool filesystem_follows,
                       const std::function<Status(int fd)>& fill) const;
  // Removes the image and its markers; missing files are fine.
  Status remove(std::string_view volume_id) const;
  // Grows the image to `bytes`. With `filesystem_follows`, the grow marker is written first,
  // so the filesystem's growth is never forgotten, even across a crash.
  Status grow(std::string_view volume_id, int64_t bytes, bool filesystem_follows) const;
  bool grow_pending(std::string_view volume_id) const;
  Status mark_grow_pending(std::string_view volume_id) const;
  Status clear_grow_pending(std::string_view volume_id) const;

  // Bytes available for new volumes under the policy above.
  Expected<int64_t> available_bytes() const;
  // Free bytes of the directory's filesystem and the unwritten part of every image in it (what
  // the images were promised and may still write): `doctor` compares them.
  struct SpaceBalance {
    int64_t free_bytes = 0;
    int64_t promised_bytes = 0;
  };
  Expected<SpaceBalance> space_balance() const;

 private:
  Status ensure_dir() const;
  Status check_room(int64_t more_bytes, std::string_view what) const;
  // Serialises "is there room?" with the allocation that follows, between threads and between
  // processes (serve and a CLI run share the directory): an exclusive flock on the directory,
  // held while the returned descriptor is open.
  Expected<UniqueFd> lock_allocations() const;
  // Sum over images and live reservations of (apparent size - allocated bytes). Removes the
  // reservations of creates that died (their lock is gone).
  Expected<int64_t> unallocated_bytes() const;
  // The names in the directory (ENOENT: none yet).
  Expected<std::vector<std::string>> entries() const;

  // A locked, sparse <id>.reserved of the bytes an image will take, removed by drop() or the
  // destructor. The lock tells a live reservation from one whose process died.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
    Reservation(Reservation&&) noexcept = default;
    Reservation& operator=(Reservation&&) noexcept = default;
    ~Reservation() { drop(); }
    void drop();

   private:
    UniqueFd fd_;
    std::string path_;
  };
  std::string reservation(std::string_view volume_id) const;
  // Under lock_allocations().
  Expected<Reservation> reserve(std::string_view volume_id, int64_t bytes) const;

  std::string dir_;
  bool overcommit_;
};

}  // namespace rosetctl
