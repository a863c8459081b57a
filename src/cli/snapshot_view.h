// The JSON model of a snapshot that `snapshot commit|list|show` print, and how tables show it.
// Field names are a documented interface (docs/reference/json.md): add fields, never rename them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/render.h"
#include "core/state_store.h"

namespace rosetctl::cli {

nlohmann::json snapshot_json(const SnapshotRecord& record);

std::vector<Column> snapshot_fields();   // `snapshot show`
std::vector<Column> snapshot_columns();  // `snapshot list`

// "2025-01-02T03:04:05Z" (UTC).
std::string format_time_ns(int64_t ns);

// A path inside a snapshot for a terminal: the root as ".", and in double quotes with C-style
// escapes when it holds spaces, quotes, backslashes or control characters (as git quotes them).
std::string display_path(std::string_view path);

}  // namespace rosetctl::cli
