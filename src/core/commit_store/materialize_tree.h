// Recreating a tree's entries in an empty directory: directories, files, symlinks, hard links,
// device nodes and FIFOs with their owners, modes, xattrs and modification times. Where file
// content comes from is the caller's choice (blobs for a restore, a live volume for a clone).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "core/commit_store/file_content.h"
#include "core/commit_store/tree.h"
#include "core/progress.h"
#include "core/status.h"

namespace rosetctl {

// Fills the empty regular file open (read-write) at `dest_fd` with `entry`'s content. It may
// update the entry's metadata to match the content it actually wrote (a clone of a live file).
using ContentWriter = std::function<Status(TreeEntry& entry, int dest_fd, ContentBuffer& buffer)>;

struct MaterializeOptions {
  std::string shown_destination;  // for messages
  std::string title;              // progress phase title
  int workers = 1;
  ProgressSink* progress = nullptr;
  // Files to take instead of writing them: `reuse_fd` is a directory that holds `reuse_tree` as
  // materialised earlier (a restore made ahead, before a move's pause), private to the caller. A
  // regular file there at an entry's path, with the entry's content and still the size and
  // mtime it was given, not hard-linked, is renamed into place (then given the entry's metadata);
  // anything else is written. `reused_files` counts the files taken.
  int reuse_fd = -1;
  const Tree* reuse_tree = nullptr;
  std::atomic<int64_t>* reused_files = nullptr;
};

// `dest_fd` is an empty directory that becomes the tree's root (its owner, mode, xattrs and
// times are set last). Paths are opened beneath it only (open_beneath.h).
Status materialize_tree(Tree& tree, int dest_fd, const ContentWriter& write_content,
                        const MaterializeOptions& options);

}  // namespace rosetctl
