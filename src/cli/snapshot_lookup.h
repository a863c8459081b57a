// Finding a snapshot the way people name one: its full commit id, a unique prefix of it (at
// least 4 hex digits, like git), its snapshot id or its name, as the controller's catalog answers
// (daemon/snapshot_lookup.h), wherever the controller runs.
#pragma once

#include <string_view>

#include "cli/global_options.h"
#include "cli/session.h"
#include "core/state_store.h"

namespace rosetctl::cli {

// NOT_FOUND when nothing matches; INVALID_ARGUMENT listing the candidates when a prefix is
// ambiguous.
Expected<SnapshotRecord> resolve_snapshot(Session& session, std::string_view reference);

// A snapshot to restore: a placed id naming another node (`n<len>.<node>.<id>`, as the
// controller lists snapshots of its nodes) is looked up on that node, through the controller's
// proxy, and keeps its placed id (the node the volume is made on fetches it from there); any
// other reference as resolve_snapshot. Only ready snapshots of the local provider move
// between nodes. `target_node` (the node the volume is to be made on, "" for the controller
// host) is asked first: when it holds the snapshot whole, the node the id names is not asked,
// and a name or commit is its copy there (so `--node` picks one of several copies).
Expected<SnapshotRecord> resolve_snapshot_to_restore(Session& session, std::string_view reference,
                                                     std::string_view target_node = "");

// NOT_FOUND for `reference` when this host has no state yet (after validating it): read-only
// snapshot verbs answer so instead of creating the state directory (as `volume show` does).
Status no_snapshot_state(const GlobalOptions& globals, std::string_view reference);

// Whether the snapshot holds a raw block volume (restores of it need block access).
bool is_block_snapshot(const SnapshotRecord& snapshot);

}  // namespace rosetctl::cli
