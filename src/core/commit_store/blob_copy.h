// Copying a blob out of the store, checked against its name in the same pass. Every restore
// reads blobs through this (restore.h for directories, commit_image.h for images), so a blob
// damaged after it was stored is never handed out as a volume's data.
//
// A copy through the buffer hashes the bytes on their way to the destination: one read, no
// second pass. A reflink (FICLONE) shares the blob's extents without reading them, so the
// clone is then read back and hashed (a read, no write): the bytes checked are exactly the bytes
// the new volume holds.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/commit_store/commit_store.h"
#include "core/commit_store/file_content.h"
#include "core/status.h"

namespace rosetctl {

// One per restore, shared by its workers: it remembers a failed FICLONE, so a filesystem without
// reflinks costs one failed ioctl per restore, not one per file.
class BlobCopier {
 public:
  // Fills the empty file `dst_fd` (open read-write) with blob `id`, which must hold `size`
  // bytes. DATA_LOSS naming `user` (what the blob is restored as: `file "a/b"`) and the blob when
  // the blob is missing, has another size or does not hash to `id`; `dst_fd` then holds partial
  // content, which the caller drops (restores fill files that get a name only when complete).
  Status copy(const CommitStore& store, std::string_view id, int64_t size, int dst_fd,
              ContentBuffer& buffer, const std::string& user);

 private:
  std::atomic<bool> reflink_works_{true};
};

}  // namespace rosetctl
