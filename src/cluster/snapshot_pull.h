// Pulling a snapshot from another node into this node's commit store and state: the receiving
// side of rosetctl.v1.ObjectStore (object_store_service.h). The source node is dialled directly
// at its registered address, or reached through the controller's proxy when it cannot be
// (source_node.h), over the same mutual TLS as every other call, and only read: it answers
// LookupSnapshot and FetchObjects, nothing more.
//
// Order of work, so that nothing is visible here before it is complete: the commit and its tree
// (each verified against its id), then only the blobs this store lacks (several streams at once,
// each blob verified as it completes, a partly received one resumed; the first failure of any
// stream stops them all), then the commit object, then the snapshot record
// (one state-store transaction). An interrupted pull leaves verified objects and staged parts
// that the next pull of the same snapshot does not fetch again.
#pragma once

#include <functional>
#include <string>

#include "cluster/pulled_snapshot.h"
#include "daemon/service_context.h"
#include "rosetctl.pb.h"

namespace rosetctl {

// Sees how the pull goes (the last report has `done` set); an error stops the pull.
using PullReport = std::function<Status(const v1::PullSnapshotProgress&)>;

// Makes snapshot `reference` (commit id, prefix, snapshot id or name on that node, as `how`
// says) of node `from_node` present here, under the same snapshot id, name and commit id, its
// record saying it came from `from_node` (SnapshotRecord::pulled_from). Returns the final
// counts. UNAVAILABLE when the source cannot be reached or goes away (a retry resumes);
// DATA_LOSS naming the source and what was wrong when it answers with a snapshot that is not
// the one asked for or a record a local CreateSnapshot would refuse (pulled_snapshot.h), or
// sends an object that is corrupt, was not asked for, or is bigger than said (nothing of it is
// stored); ALREADY_EXISTS when this node records another snapshot under that id or name.
Expected<v1::PullSnapshotProgress> pull_snapshot(const ServiceContext& context,
                                                 const std::string& from_node,
                                                 const std::string& reference, PullReference how,
                                                 const PullReport& report);

// Restores commit `commit_id` (pulled from another node) ahead on this node's local provider
// (PullSnapshotRequest.prepare_restore); a failure is logged: it only makes a later restore copy.
void prepare_restore_here(const ServiceContext& context, const std::string& commit_id);

// For a restore or clone whose source snapshot `snapshot_id` is held by node `node_id`: makes
// it present in this node's store (reporting to options.progress), so the local restore can
// proceed; the final counts (`already_present` when it was here already). Errors as
// pull_snapshot's.
Expected<v1::PullSnapshotProgress> fetch_snapshot_from_node(const ServiceContext& context,
                                                            const std::string& node_id,
                                                            const std::string& snapshot_id);

}  // namespace rosetctl
