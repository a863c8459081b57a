// The state database's schema: the migrations that build it, step by step, up to
// StateStore::kSchemaVersion.
#pragma once

#include <string>

#include "core/sqlite.h"
#include "core/status.h"

namespace rosetctl::state_sql {

// Applies the migrations `path`'s database lacks, each in its own transaction. A database from
// a newer rosetctl is FAILED_PRECONDITION.
Status migrate(sqlite::Connection& connection, const std::string& path);

}  // namespace rosetctl::state_sql
