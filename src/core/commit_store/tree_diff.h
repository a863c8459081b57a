// What differs between two trees, path by path.
#pragma once

#include <string>
#include <vector>

#include "core/commit_store/tree.h"

namespace rosetctl {

struct TreeChange {
  enum class Kind { kAdded, kRemoved, kChanged };
  Kind kind = Kind::kChanged;
  std::string path;
  // For kChanged, what changed: "type", "content", "target", "mode", "owner", "mtime",
  // "xattrs", "device".
  std::vector<std::string> aspects;
};

// Changes that turn `from` into `to`, in path order. The root directory is compared too (its
// path is "").
std::vector<TreeChange> diff_trees(const Tree& from, const Tree& to);

}  // namespace rosetctl
