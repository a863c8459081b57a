// Finding a snapshot the way people name one: its full commit id, a unique prefix of it (at
// least 4 hex digits, like git), its snapshot id or its name. The controller answers this
// (rosetctl.v1.Catalog FindSnapshot) from its state store, wherever the CLI runs.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/state_store.h"

namespace rosetctl {

// A commit id prefix names a snapshot only from this many hex digits on.
inline constexpr std::size_t kMinimumCommitPrefix = 4;

// NOT_FOUND when nothing matches; INVALID_ARGUMENT listing the candidates when a prefix is
// ambiguous.
Expected<SnapshotRecord> find_snapshot_by_reference(StateStore& store, std::string_view reference);

}  // namespace rosetctl
