// One tree's or commit's text as it arrives from another store (object_receiver.h): in chunks,
// in order, and never more than its size or a bound. It is written to an unnamed file (O_TMPFILE)
// in the staging directory and hashed as it arrives, so a source that never stops sending costs
// this node at most the bound in disk and nothing in memory, and nothing is left behind when the
// transfer fails (or the process dies): the file has no name. The text is read into memory only
// once it is whole and hashes to its name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/commit_store/sha256.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace rosetctl {

class ReceivedText {
 public:
  // An empty text to be received into directory `dir` (a descriptor, borrowed). `what` names it
  // in messages ("tree <id> from node \"a\""); `limit` is the most bytes it may have.
  static Expected<ReceivedText> open(int dir, std::string what, int64_t limit);

  // The next chunk: `offset` must be where the last one ended, `size` is the whole text's size
  // as the source says it (the same in every chunk, at most the limit), and no chunk may reach
  // past it. DATA_LOSS naming what was wrong otherwise.
  Status append(int64_t offset, std::string_view data, int64_t size);

  // The whole text, once it hashes to `id`: DATA_LOSS when it does not; UNAVAILABLE when the
  // source ended the transfer before it was whole.
  Expected<std::string> finish(std::string_view id);

 private:
  ReceivedText(UniqueFd fd, std::string what, int64_t limit)
      : fd_(std::move(fd)), what_(std::move(what)), limit_(limit) {}

  UniqueFd fd_;  // unnamed: it goes when this does
  std::string what_;
  int64_t limit_;
  int64_t size_ = -1;  // as the first chunk said; -1 before it
  int64_t received_ = 0;
  Sha256 hash_;
};

}  // namespace rosetctl
