// Mark and sweep.
#include "core/commit_store/store_gc.h"

#include <string>
#include <unordered_set>
#include <vector>

namespace rosetctl {

Expected<GcReport> collect_garbage(const CommitStore& store, const StoreLock& lock) {
  if (!lock.exclusive()) {
    return error(Code::kFailedPrecondition, "garbage collection needs the store lock exclusively");
  }
  GcReport report;
  std::unordered_set<std::string> live_trees;
  std::unordered_set<std::string> live_blobs;
  auto commits = store.commit_ids();
  if (!commits) return commits.status();
  for (const std::string& id : *commits) {
    auto commit = store.read_commit(id);
    if (!commit) return commit.status().with_context("garbage collection stopped, nothing removed");
    if (!live_trees.insert(commit->tree).second) continue;
    auto tree = store.read_tree(commit->tree);
    if (!tree) return tree.status().with_context("garbage collection stopped, nothing removed");
    for (const TreeEntry& entry : tree->entries) {
      if (entry.type == EntryType::kRegular) live_blobs.insert(entry.content);
    }
  }
  report.commits = static_cast<int64_t>(commits->size());

  std::vector<std::string> dead_trees;
  ROSETCTL_RETURN_IF_ERROR(store.for_each_tree([&](std::string_view id) {
    if (!live_trees.contains(std::string(id))) dead_trees.emplace_back(id);
  }));
  for (const std::string& id : dead_trees) {
    ROSETCTL_RETURN_IF_ERROR(store.remove_tree_object(id));
    ++report.trees_removed;
  }
  std::vector<std::pair<std::string, int64_t>> dead_blobs;
  ROSETCTL_RETURN_IF_ERROR(store.for_each_blob([&](std::string_view id, int64_t bytes) {
    if (!live_blobs.contains(std::string(id))) dead_blobs.emplace_back(id, bytes);
  }));
  for (const auto& [id, bytes] : dead_blobs) {
    ROSETCTL_RETURN_IF_ERROR(store.remove_blob(id));
    ++report.blobs_removed;
    report.bytes_reclaimed += bytes;
  }
  return report;
}

}  // namespace rosetctl
