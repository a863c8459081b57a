// A tree: the manifest of one volume's content at commit time (paths, types, modes, owners,
// modification times, xattrs, link targets and content hashes), and its canonical text form.
// The SHA-256 of that text is the tree's id, so equal content gives equal trees.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rosetctl {

enum class EntryType : char {
  kDirectory = 'd',
  kRegular = 'f',
  kSymlink = 'l',
  kHardlink = 'h',  // another name of a regular file listed earlier (`target` is its path)
  kFifo = 'p',
  kSocket = 's',
  kCharDevice = 'c',
  kBlockDevice = 'b',
};

struct Xattr {
  std::string name;
  std::string value;
  bool operator==(const Xattr&) const = default;
};

struct TreeEntry {
  std::string path;  // relative to the volume root; "" is the root itself
  EntryType type = EntryType::kRegular;
  uint32_t mode = 0;  // permission bits with setuid, setgid and sticky (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  int64_t mtime_ns = 0;       // since the epoch
  int64_t size = 0;           // regular files
  std::string content;        // regular files: SHA-256 of the bytes (hex), the blob's name
  std::string target;         // symlinks: the link text; hardlinks: the path linked to
  uint64_t rdev = 0;          // device nodes
  std::vector<Xattr> xattrs;  // sorted by name

  bool operator==(const TreeEntry&) const = default;
};

// Entries sorted bytewise by path, so the root comes first and every directory precedes what
// it contains.
struct Tree {
  std::vector<TreeEntry> entries;
};

// Regular files (hard links not counted twice) and their bytes.
struct TreeTotals {
  int64_t files = 0;
  int64_t bytes = 0;
};

std::string serialize_tree(const Tree& tree);
// DATA_LOSS naming the line when the text is not a well-formed tree.
Expected<Tree> parse_tree(std::string_view text);
TreeTotals tree_totals(const Tree& tree);

// What a tree from another host must not bring into this one (docs/SECURITY.md): setuid and
// setgid bits of anything but a directory, device nodes (and hard links to them), and the
// `security.*` (file capabilities, SELinux labels) and `trusted.*` xattrs. Returns how many
// entries it changed or left out.
int64_t strip_privileged_metadata(Tree& tree);
void sort_tree(Tree& tree);

}  // namespace rosetctl
