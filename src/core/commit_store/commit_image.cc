// Image commits: copy, hash and store an image; find and copy it back (see commit_image.h).
#include "core/commit_store/commit_image.h"

#include <sys/stat.h>
#include <unistd.h>

#include "core/commit_store/blob_copy.h"
#include "core/commit_store/file_content.h"

namespace rosetctl {
namespace {

Tree image_tree(const std::string& blob, int64_t size) {
  // No times and no owners: two commits of the same content share their tree as well.
  TreeEntry root;
  root.path = "";
  root.type = EntryType::kDirectory;
  root.mode = 0700;
  TreeEntry image;
  image.path = std::string(kImageEntry);
  image.type = EntryType::kRegular;
  image.mode = 0600;
  image.size = size;
  image.content = blob;
  return Tree{{std::move(root), std::move(image)}};
}

}  // namespace

Expected<ImageCopy> copy_image(const CommitStore& store, int image_fd, const std::string& shown) {
  struct stat st;
  if (::fstat(image_fd, &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect image \"{}\"", shown));
  }
  auto file = store.new_blob_file();
  if (!file) return file.status();
  ImageCopy copy;
  copy.size = st.st_size;
  auto cloned = clone_or_copy(image_fd, file->get(), copy.size, shown);
  if (!cloned) return cloned.status();
  copy.cloned = *cloned;
  copy.file = std::move(*file);
  return copy;
}

Expected<CommitOutcome> commit_image_copy(const CommitStore& store, ImageCopy copy,
                                          const ImageCommitRequest& request,
                                          const StoreLock& /*lock: held by the caller*/) {
  std::string shown = fmt::format("the copy of volume \"{}\"", request.volume_name);
  Progress progress(request.progress);
  progress.start(fmt::format("committing {}", request.volume_name), 1, copy.size);
  ContentBuffer buffer;
  auto hashed = hash_content(copy.file.get(), copy.size, -1, buffer, shown);
  if (hashed) progress.advance(1, copy.size);
  progress.finish();
  if (!hashed) return hashed.status();
  if (hashed->short_read) {
    return error(Code::kInternal, "{} shrank while it was hashed", shown);
  }
  // The data (or, for a clone, the shared extents) must be on disk before a commit names it.
  if (::fsync(copy.file.get()) != 0) {
    return errno_status(errno, fmt::format("cannot write out {}", shown));
  }
  struct stat st;
  if (::fstat(copy.file.get(), &st) != 0) {
    return errno_status(errno, fmt::format("cannot inspect {}", shown));
  }
  auto added = store.add_blob(copy.file.get(), hashed->sha256);
  if (!added) return added.status();
  ROSETCTL_RETURN_IF_ERROR(store.sync_blob_names({hashed->sha256}, 1));

  CommitOutcome outcome;
  if (*added) outcome.new_bytes = static_cast<int64_t>(st.st_blocks) * 512;
  auto tree_id = store.put_tree(image_tree(hashed->sha256, copy.size));
  if (!tree_id) return tree_id.status();
  outcome.commit = CommitObject{
      *tree_id, request.parent, request.volume_id, request.volume_name, request.time_ns,
      1,        copy.size,      request.message,   request.kind};
  auto id = store.put_commit(outcome.commit);
  if (!id) return id.status();
  outcome.id = *id;
  return outcome;
}

Expected<std::optional<StoredImage>> stored_image(const CommitStore& store, std::string_view id) {
  auto commit = store.read_commit(id);
  if (!commit) return commit.status();
  if (commit->image.empty()) return std::optional<StoredImage>();
  auto tree = store.read_tree(commit->tree);
  if (!tree) return tree.status();
  for (const TreeEntry& entry : tree->entries) {
    if (entry.path == kImageEntry && entry.type == EntryType::kRegular) {
      return std::optional(StoredImage{commit->image, entry.size, entry.content});
    }
  }
  return error(Code::kDataLoss, "commit {} is of an {} image, but its tree holds no image", id,
               commit->image);
}

Status restore_image(const CommitStore& store, const StoredImage& image, int dst_fd,
                     const StoreLock& /*lock: held by the caller*/) {
  BlobCopier copier;
  ContentBuffer buffer;
  Status copied = copier.copy(store, image.blob, image.size, dst_fd, buffer,
                              fmt::format("the {} image", image.kind));
  if (copied.code() == Code::kDataLoss) store.distrust_stat_caches();
  return copied;
}

}  // namespace rosetctl
