// Committing an image volume: the whole image file becomes one blob (a reflink where the
// filesystem can share extents, else a sparse copy), held by a tree whose one file is
// kImageEntry, under a commit object that names the image's kind (commit_object.h). Restoring
// copies that blob into a new file the same way, hashing it as it goes.
//
// Taking the copy and storing it are two steps so that the caller can hold the image still
// (freeze the filesystem inside it) for exactly as long as the copy takes. Hashing, which reads
// the whole copy, comes after: the copy is a point-in-time image, so its hash names exactly
// what is stored, as for every blob.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/commit_store/commit_directory.h"
#include "core/commit_store/commit_store.h"
#include "core/progress.h"
#include "core/unique_fd.h"

namespace rosetctl {

// The path of the image in an image commit's tree (next to the root directory "").
inline constexpr std::string_view kImageEntry = "image";

// A copy of an image, taken but not stored yet: an anonymous file in the store.
struct ImageCopy {
  UniqueFd file;
  int64_t size = 0;
  bool cloned = false;  // shares its extents with the image (FICLONE)
};

// Copies the image open at `image_fd` (all of it, holes kept) into a new anonymous file.
Expected<ImageCopy> copy_image(const CommitStore& store, int image_fd, const std::string& shown);

struct ImageCommitRequest {
  std::string kind;  // "ext4", "xfs", "block"
  std::string volume_id;
  std::string volume_name;
  std::string parent;  // previous commit of the volume, or ""
  std::string message;
  int64_t time_ns = 0;
  ProgressSink* progress = nullptr;
};

// Hashes the copy, stores it as a blob (unless an equal one is stored already), writes the tree
// and the commit. new_bytes counts the disk blocks of a blob this commit added. The caller
// holds `lock` (shared) until the commit is recorded.
Expected<CommitOutcome> commit_image_copy(const CommitStore& store, ImageCopy copy,
                                          const ImageCommitRequest& request, const StoreLock& lock);

// What an image commit holds.
struct StoredImage {
  std::string kind;  // as in ImageCommitRequest
  int64_t size = 0;  // the image's size in bytes
  std::string blob;  // its content's id
};

// The image of commit `id`; nullopt for a directory's commit. NOT_FOUND for an unknown commit,
// DATA_LOSS for an image commit whose tree does not hold its image.
Expected<std::optional<StoredImage>> stored_image(const CommitStore& store, std::string_view id);

// Fills the empty file `dst_fd` with the stored image (a reflink, else a sparse copy) and gives
// it the image's size, checking the blob against its name on the way (blob_copy.h). The caller
// holds `lock` (shared). DATA_LOSS when the blob is missing, has another size than the image or
// is damaged.
Status restore_image(const CommitStore& store, const StoredImage& image, int dst_fd,
                     const StoreLock& lock);

}  // namespace rosetctl
