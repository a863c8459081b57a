// A commit object: a tree plus who and when (source volume, parent commit, time, message), like
// git's commit over a tree. Its id is the SHA-256 of its text, so two volumes with equal content
// share the tree (and its blobs) but never a commit.
//
// A commit of an image volume (commit_image.h) names the image's kind in `image`; its tree then
// holds the whole image as one regular file. Commits of directories have no `image` line, so
// their text (and id) is what it always was.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

struct CommitObject {
  std::string tree;         // tree id
  std::string parent;       // previous commit of the same volume, "" for the first
  std::string volume_id;    // the source volume
  std::string volume_name;  // its name at commit time
  int64_t time_ns = 0;      // since the epoch
  int64_t files = 0;        // regular files in the tree
  int64_t bytes = 0;        // their total size
  std::string message;
  std::string image;  // "" for a directory; an image's kind: "ext4", "xfs" or "block"

  bool operator==(const CommitObject&) const = default;
};

std::string serialize_commit(const CommitObject& commit);
// DATA_LOSS when the text is not a well-formed commit object.
Expected<CommitObject> parse_commit(std::string_view text);

}  // namespace rosetctl
