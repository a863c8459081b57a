// What this node takes from another node's answer about a snapshot (LookupSnapshot) before it
// records that snapshot as its own (snapshot_pull.h). A node's certificate proves which node
// answers, not that what it says is true: a node may lie about which snapshot it sends, and about
// every field of its record. The objects are checked against their ids as they arrive
// (core/commit_store/object_receiver.h); these checks are for the record: that it is the
// snapshot asked for, and that it holds nothing a local CreateSnapshot would have refused.
#pragma once

#include <string_view>

#include "core/state_store.h"

namespace rosetctl {

// How the snapshot to pull was named.
enum class PullReference {
  // A snapshot id: a restore from another node's placed id asks for the id it names
  // (content_source.cc). The answer's id must be that id.
  kSnapshotId,
  // Whatever LookupSnapshot resolves (`snapshot pull REF`, PullSnapshot): a commit id, a prefix
  // of one, a snapshot id or a name. The answer must be a snapshot that the reference names in
  // one of those ways.
  kAny,
};

// DATA_LOSS naming `node`, the reference and what it answered with, when `answer` is not a
// snapshot `reference` names (as `how` says). Nothing is stored then.
Status check_answer_is_the_one_asked(const SnapshotRecord& answer, std::string_view reference,
                                     PullReference how, std::string_view node);

// DATA_LOSS naming `node` and the field when `record` holds what a local CreateSnapshot would
// not have recorded: an id that is not a snapshot id, a name that is no valid name or looks like
// an id (names are [A-Za-z0-9._-], so no control character reaches a terminal or a log), a
// source volume id or name that is not one, a parent that is not a commit id, negative sizes, a
// failure, or a message, parameters or context over the 64 KiB a request's map may hold
// (daemon/request_limits.h). A message may hold any text, control characters included, as a
// local one may: the CLI shows it escaped (cli/snapshot_view.cc).
Status check_pulled_record(const SnapshotRecord& record, std::string_view node);

}  // namespace rosetctl
