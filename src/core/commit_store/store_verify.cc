// Commit, tree and blob checks.
#include "core/commit_store/store_verify.h"

#include <sys/stat.h>

#include <map>
#include <mutex>

#include "core/commit_store/file_content.h"
#include "core/parallel_for.h"

namespace rosetctl {
namespace {

struct BlobUse {
  int64_t size = 0;
  std::string first_user;  // `commit <id> file "<path>"`, for messages
};

std::string check_blob(const CommitStore& store, const std::string& id, const BlobUse& use,
                       ContentBuffer& buffer) {
  auto fd = store.open_blob(id);
  if (!fd) return fmt::format("{}: blob {} {}", use.first_user, id, fd.status().message());
  struct stat st;
  if (::fstat(fd->get(), &st) != 0)
    return fmt::format("{}: blob {} cannot be inspected", use.first_user, id);
  if (st.st_size != use.size) {
    return fmt::format("{}: blob {} has {} bytes instead of {}", use.first_user, id, st.st_size,
                       use.size);
  }
  auto hashed = hash_content(fd->get(), use.size, -1, buffer, "blob " + id);
  if (!hashed) return fmt::format("{}: {}", use.first_user, hashed.status().message());
  if (hashed->sha256 != id) {
    return fmt::format("{}: blob {} is corrupt (its content hashes to {})", use.first_user, id,
                       hashed->sha256);
  }
  return "";
}

}  // namespace

Expected<VerifyReport> verify_commits(const CommitStore& store, const std::vector<std::string>& ids,
                                      int workers, ProgressSink* progress_sink,
                                      const StoreLock& /*lock: held by the caller*/) {
  VerifyReport report;
  std::map<std::string, BlobUse> blobs;
  for (const std::string& id : ids) {
    ++report.commits;
    auto commit = store.read_commit(id);
    if (!commit) {
      report.problems.push_back(commit.status().message());
      continue;
    }
    auto tree = store.read_tree(commit->tree);
    if (!tree) {
      report.problems.push_back(fmt::format("commit {}: {}", id, tree.status().message()));
      continue;
    }
    TreeTotals totals = tree_totals(*tree);
    if (totals.files != commit->files || totals.bytes != commit->bytes) {
      report.problems.push_back(
          fmt::format("commit {} says {} files and {} bytes, its tree has {} and {}", id,
                      commit->files, commit->bytes, totals.files, totals.bytes));
    }
    for (const TreeEntry& entry : tree->entries) {
      if (entry.type != EntryType::kRegular) continue;
      blobs.try_emplace(entry.content,
                        BlobUse{entry.size, fmt::format("commit {} file \"{}\"", id, entry.path)});
    }
  }
  std::vector<const std::pair<const std::string, BlobUse>*> work;
  for (const auto& blob : blobs) {
    work.push_back(&blob);
    report.bytes += blob.second.size;
  }
  report.blobs = static_cast<int64_t>(work.size());
  Progress progress(progress_sink);
  progress.start("verifying", report.blobs, report.bytes);
  std::vector<ContentBuffer> buffers(std::max(workers, 1));
  std::mutex problems_mutex;  // guards report.problems while workers run
  Status checked = parallel_for(work.size(), workers, [&](std::size_t i, int worker) {
    std::string problem = check_blob(store, work[i]->first, work[i]->second, buffers[worker]);
    if (!problem.empty()) {
      std::lock_guard lock(problems_mutex);
      report.problems.push_back(std::move(problem));
    }
    progress.advance(1, work[i]->second.size);
    return Status::ok();
  });
  progress.finish();
  ROSETCTL_RETURN_IF_ERROR(checked);
  return report;
}

}  // namespace rosetctl
