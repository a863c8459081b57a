// CreateSnapshot's parameters, shared by the controller that reads them and the CLI that sends
// them (`volume move`'s rounds).
#pragma once

#include <string_view>

namespace rosetctl {

// Free text kept with the snapshot.
inline constexpr std::string_view kSnapshotMessageParameter = "message";
// "true": a move's pre-copy round. A file written to while it is read keeps the bytes read
// instead of failing the snapshot (core/commit_store/commit_directory.h), so such a snapshot is
// no consistent copy of each file: only a consistent snapshot taken after it (the move's final
// delta) is one. "false" or absent: every file is one whole version of itself.
inline constexpr std::string_view kSnapshotPreCopyParameter = "preCopy";

}  // namespace rosetctl
