// Snapshot ids: `snap-` followed by 16 hex digits of the creation time in unix nanoseconds and 8
// random ones, so they sort by age. Snapshots recorded before ids became ours (schema 2) keep
// their commit ids (64 hex digits) as ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rosetctl {

std::string new_snapshot_id(int64_t created_at_ns);

// Either form above: what a snapshot id or a ListSnapshots token can be.
bool is_snapshot_id(std::string_view text);

}  // namespace rosetctl
