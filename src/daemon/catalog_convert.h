// rosetctl.v1.Catalog's messages ↔ the domain's records, for both ends of the call.
#pragma once

#include <vector>

#include "core/commit_store/tree_diff.h"
#include "core/state_store.h"
#include "providers/provider.h"
#include "rosetctl.pb.h"

namespace rosetctl {

void fill_snapshot_details(const SnapshotRecord& record, v1::SnapshotDetails* details);
SnapshotRecord snapshot_record_of(const v1::SnapshotDetails& details);

void fill_tree_change(const TreeChange& change, v1::TreeChange* proto);
TreeChange tree_change_of(const v1::TreeChange& proto);

void fill_verification(const SnapshotVerification& verification,
                       v1::VerifySnapshotsResponse* proto);
SnapshotVerification verification_of(const v1::VerifySnapshotsResponse& proto);

}  // namespace rosetctl
