// A volume's stat cache (like git's index): for each regular file of the last commit, the
// version (inode, size, mtime, ctime) whose content was hashed, and that hash. A re-commit reuses
// the hash of every file whose version still matches instead of reading it again.
//
// It is only a cache: a missing, stale or unreadable one costs time, never correctness, because
// the committer still checks that each reused blob exists (under the GC lock).
#pragma once

#include <string>
#include <unordered_map>

#include "core/commit_store/file_content.h"
#include "core/status.h"

namespace rosetctl {

struct CachedFile {
  FileVersion version;
  std::string content;  // blob id
};

class StatCache {
 public:
  // An empty cache when the file is missing or not a well-formed cache.
  static StatCache load(const std::string& path);

  const CachedFile* find(const std::string& path) const;
  void add(const std::string& path, const CachedFile& file) { files_[path] = file; }
  std::size_t size() const { return files_.size(); }

  // Replaces the file atomically (write to a temporary name, rename).
  Status save(const std::string& path) const;

 private:
  std::unordered_map<std::string, CachedFile> files_;
};

}  // namespace rosetctl
