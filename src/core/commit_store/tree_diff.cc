// A merge walk over two path-sorted entry lists.
#include "core/commit_store/tree_diff.h"

namespace rosetctl {
namespace {

std::vector<std::string> changed_aspects(const TreeEntry& a, const TreeEntry& b) {
  std::vector<std::string> aspects;
  if (a.type != b.type) aspects.emplace_back("type");
  if (a.content != b.content || a.size != b.size) aspects.emplace_back("content");
  if (a.target != b.target) aspects.emplace_back("target");
  if (a.mode != b.mode) aspects.emplace_back("mode");
  if (a.uid != b.uid || a.gid != b.gid) aspects.emplace_back("owner");
  if (a.mtime_ns != b.mtime_ns) aspects.emplace_back("mtime");
  if (a.xattrs != b.xattrs) aspects.emplace_back("xattrs");
  if (a.rdev != b.rdev) aspects.emplace_back("device");
  return aspects;
}

}  // namespace

std::vector<TreeChange> diff_trees(const Tree& from, const Tree& to) {
  std::vector<TreeChange> changes;
  auto a = from.entries.begin();
  auto b = to.entries.begin();
  while (a != from.entries.end() || b != to.entries.end()) {
    if (b == to.entries.end() || (a != from.entries.end() && a->path < b->path)) {
      changes.push_back({TreeChange::Kind::kRemoved, a->path, {}});
      ++a;
    } else if (a == from.entries.end() || b->path < a->path) {
      changes.push_back({TreeChange::Kind::kAdded, b->path, {}});
      ++b;
    } else {
      std::vector<std::string> aspects = changed_aspects(*a, *b);
      if (!aspects.empty()) {
        changes.push_back({TreeChange::Kind::kChanged, a->path, std::move(aspects)});
      }
      ++a;
      ++b;
    }
  }
  return changes;
}

}  // namespace rosetctl
