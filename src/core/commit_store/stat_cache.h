// A volume's stat cache (like git's index): for each regular file of the last commit, the
// version (inode, size, mtime, ctime) that was captured, its content hash and its xattrs. A
// re-commit reuses the hash and xattrs of every file whose version still matches instead of
// reading the file again: any write, chmod, chown or xattr change moves the ctime.
//
// It is only a cache: a missing, stale or unreadable one costs time, never correctness. Each
// cache names the commit it was saved with (its anchor). While that commit exists, garbage
// collection keeps every blob the cache names (they are all in its tree); when it is gone, the
// committer checks each reused blob instead (under the GC lock either way).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/commit_store/file_content.h"
#include "core/commit_store/tree.h"
#include "core/status.h"

namespace rosetctl {

struct CachedFile {
  FileVersion version;
  std::string content;  // blob id
  std::vector<Xattr> xattrs;
};

class StatCache {
 public:
  // An empty cache when the file is missing or not a well-formed cache of this format.
  static StatCache load(const std::string& path);

  const CachedFile* find(const std::string& path) const;
  // The entry for `path` only if the file is still exactly at the cached `version`.
  const CachedFile* find_unchanged(const std::string& path, const FileVersion& version) const;
  void add(const std::string& path, const CachedFile& file) { files_[path] = file; }
  std::size_t size() const { return files_.size(); }

  // The commit whose tree holds every blob of this cache; empty for a new cache.
  const std::string& anchor() const { return anchor_; }
  void set_anchor(std::string commit_id) { anchor_ = std::move(commit_id); }

  // Replaces the file atomically (write to a temporary name, rename).
  Status save(const std::string& path) const;

 private:
  std::string anchor_;
  std::unordered_map<std::string, CachedFile> files_;
};

}  // namespace rosetctl
