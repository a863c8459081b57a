// The node service's side of mount ownership: refusing to touch a mount at a recorded path that
// is not the recorded one, and saying what is wrong there for a volume's condition.
#pragma once

#include <string>
#include <string_view>

#include "core/mount_ownership.h"
#include "core/state_store.h"
#include "core/status.h"

namespace rosetctl {

// OK when the mount at `path` is the recorded one or nothing is there. Otherwise
// FAILED_PRECONDITION naming what is there (a mount stacked on top of the volume's, or one in
// its place): rosetctl leaves it alone and says how to go on. `role` is "staging" or
// "publication".
Status refuse_foreign_mount(const MountAtPath& judged, std::string_view volume_id,
                            std::string_view role, const std::string& path);

// What is wrong with the recorded mount at `path`, as a volume condition message, or "" when
// it is there and on top: "... is no longer mounted", "... holds a tmpfs mount ... instead",
// "... a tmpfs mount is stacked on top of it".
std::string recorded_mount_problem(const std::string& path, const RecordedMount& recorded);

// judge_mount of a staging's or publication's path against its record (nullptr: none), which
// records ours again under its id here when it was recognised from another mount namespace
// (a node plugin restarted in a new container), so that later judgements go by that id.
Expected<MountAtPath> judge_staging(StateStore& store, const std::string& path,
                                    const Staging* record);
Expected<MountAtPath> judge_publication(StateStore& store, const std::string& path,
                                        const NodePublication* record);

}  // namespace rosetctl
