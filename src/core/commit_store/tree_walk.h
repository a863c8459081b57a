// Reading a directory tree into tree entries: lstat-level metadata, symlink targets, xattrs and
// the file versions that tell later whether a file changed. Never follows symlinks and never
// descends into another filesystem mounted inside the tree.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/commit_store/file_content.h"
#include "core/commit_store/tree.h"
#include "core/status.h"

namespace rosetctl {

struct WalkedEntry {
  TreeEntry entry;      // `content` still empty for regular files
  FileVersion version;  // regular files: the version seen by the walk
};

// The xattrs of the regular file at `path` (relative to the walked root) when it still is
// exactly `version`, or null to read them from the file.
using KnownXattrs =
    std::function<const std::vector<Xattr>*(const std::string& path, const FileVersion& version)>;

// Every entry below (and including) the directory open at `root_fd`, sorted like a Tree, with
// second and later names of a hard-linked file turned into kHardlink entries. Entries that
// vanish during the walk are left out. `shown_root` names the tree in errors. `known` spares
// reading the xattrs of files that did not change since they were last read.
Expected<std::vector<WalkedEntry>> walk_tree(int root_fd, const std::string& shown_root,
                                             const KnownXattrs& known = {});

// The xattrs of `name` in the directory open at `dir_fd` (the directory itself when `name` is
// empty), sorted by name, without following a symlink.
Expected<std::vector<Xattr>> read_xattrs(int dir_fd, const std::string& name,
                                         const std::string& shown);

}  // namespace rosetctl
