// Commit, tree and blob checks. Blobs are hashed once each, in parallel; only when some are
// damaged are the trees read again to name every commit and file that holds them (commits of
// an unchanged volume share one tree, which is read once).
#include "core/commit_store/store_verify.h"

#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "core/commit_store/file_content.h"
#include "core/parallel_for.h"
#include "core/validate.h"

namespace rosetctl {
namespace {

// What is wrong with a blob, without who holds it: "" when it is intact.
std::string check_blob(const CommitStore& store, const std::string& id, int64_t size,
                       ContentBuffer& buffer) {
  auto fd = store.open_blob(id);
  if (!fd) return fd.status().message();  // names the blob
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return fmt::format("blob {} cannot be inspected", id);
  if (st.st_size != size) {
    return fmt::format("blob {} has {} bytes instead of {}", id, st.st_size, size);
  }
  auto hashed = hash_content(fd->get(), size, -1, buffer, "blob " + id);
  if (!hashed) return hashed.status().message();
  if (hashed->sha256 != id) {
    return fmt::format("blob {} is corrupt (its content hashes to {})", id, hashed->sha256);
  }
  return "";
}

// Commits whose commit object and tree are intact, with their tree ids.
struct ReadableCommit {
  std::string id;
  std::string tree;
};

class Verification {
 public:
  Verification(const CommitStore& store, VerifyReport& report) : store_(store), report_(report) {}

  // Checks a commit object and its tree, and notes the blobs it needs.
  void read_commit(const std::string& id);
  Status check_blobs(int workers, ProgressSink* progress_sink);
  // One problem per commit and damaged blob, naming the first file of the commit that holds it.
  void name_holders_of_damaged_blobs();
  void finish();

 private:
  void add_problem(const std::string& commit, std::string problem) {
    report_.problems.push_back(std::move(problem));
    damaged_.insert(commit);
  }

  const CommitStore& store_;
  VerifyReport& report_;
  std::vector<ReadableCommit> readable_;
  std::map<std::string, int64_t> blob_sizes_;         // every blob needed, with its recorded size
  std::map<std::string, std::string> damaged_blobs_;  // blob -> what is wrong with it
  std::set<std::string> damaged_;
};

void Verification::read_commit(const std::string& id) {
  ++report_.commits;
  auto commit = store_.read_commit(id);
  if (!commit) {
    add_problem(id, commit.status().message());
    return;
  }
  auto tree = store_.read_tree(commit->tree);
  if (!tree) {
    add_problem(id, fmt::format("commit {}: {}", id, tree.status().message()));
    return;
  }
  TreeTotals totals = tree_totals(*tree);
  if (totals.files != commit->files || totals.bytes != commit->bytes) {
    add_problem(id, fmt::format("commit {} says {} files and {} bytes, its tree has {} and {}", id,
                                commit->files, commit->bytes, totals.files, totals.bytes));
  }
  for (const TreeEntry& entry : tree->entries) {
    if (entry.type == EntryType::kRegular) blob_sizes_.try_emplace(entry.content, entry.size);
  }
  readable_.push_back({id, commit->tree});
}

Status Verification::check_blobs(int workers, ProgressSink* progress_sink) {
  std::vector<const std::pair<const std::string, int64_t>*> work;
  for (const auto& blob : blob_sizes_) {
    work.push_back(&blob);
    // Each tree's sizes add up in 64 bits (parse_tree), but many trees' need not: the report
    // says "at least" rather than wrapping around.
    if (__builtin_add_overflow(report_.bytes, blob.second, &report_.bytes)) {
      report_.bytes = std::numeric_limits<int64_t>::max();
    }
  }
  report_.blobs = static_cast<int64_t>(work.size());
  Progress progress(progress_sink);
  progress.start("verifying", report_.blobs, report_.bytes);
  std::vector<ContentBuffer> buffers(std::max(workers, 1));
  std::mutex damaged_mutex;  // guards damaged_blobs_ while workers run
  Status checked = parallel_for(work.size(), workers, [&](std::size_t i, int worker) {
    std::string problem = check_blob(store_, work[i]->first, work[i]->second, buffers[worker]);
    if (!problem.empty()) {
      std::lock_guard lock(damaged_mutex);
      damaged_blobs_.emplace(work[i]->first, std::move(problem));
    }
    progress.advance(1, work[i]->second);
    return Status::ok();
  });
  progress.finish();
  return checked;
}

void Verification::name_holders_of_damaged_blobs() {
  if (damaged_blobs_.empty()) return;
  struct Holding {
    std::string unreadable;  // the tree's own problem, if it was damaged meanwhile
    std::vector<std::pair<std::string, std::string>> files;  // (first path, damaged blob)
  };
  std::map<std::string, Holding> by_tree;
  for (const ReadableCommit& commit : readable_) {
    auto [holding, inserted] = by_tree.try_emplace(commit.tree);
    if (inserted) {
      auto tree = store_.read_tree(commit.tree);
      if (!tree) {
        holding->second.unreadable = tree.status().message();
      } else {
        std::set<std::string> seen;
        for (const TreeEntry& entry : tree->entries) {
          if (entry.type == EntryType::kRegular && damaged_blobs_.contains(entry.content) &&
              seen.insert(entry.content).second) {
            holding->second.files.emplace_back(entry.path, entry.content);
          }
        }
      }
    }
    if (!holding->second.unreadable.empty()) {
      add_problem(commit.id, fmt::format("commit {}: {}", commit.id, holding->second.unreadable));
    }
    for (const auto& [path, blob] : holding->second.files) {
      // The path is a file name from inside a volume: shown by the one rule for outside text.
      add_problem(commit.id, fmt::format("commit {} file {}: {}", commit.id,
                                         display_quoted(path, 4096), damaged_blobs_.at(blob)));
    }
  }
}

void Verification::finish() {
  report_.damaged_commits.assign(damaged_.begin(), damaged_.end());
}

}  // namespace

Expected<VerifyReport> verify_commits(const CommitStore& store, const std::vector<std::string>& ids,
                                      int workers, ProgressSink* progress,
                                      const StoreLock& /*lock: held by the caller*/) {
  VerifyReport report;
  Verification verification(store, report);
  for (const std::string& id : ids)
    verification.read_commit(id);
  ROSETCTL_RETURN_IF_ERROR(verification.check_blobs(workers, progress));
  verification.name_holders_of_damaged_blobs();
  verification.finish();
  if (!report.problems.empty()) store.distrust_stat_caches();
  return report;
}

}  // namespace rosetctl
