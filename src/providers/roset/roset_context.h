// The keys of a roset volume's context that only the roset provider reads (the published
// driver's names, so PVs read the same). The keys every layer reads are
// providers/volume_context.h's.
//
// The values are stored in every volume record and PV: never rename one.
#pragma once

namespace rosetctl {

inline constexpr const char* kRosetMountId = "mountId";
inline constexpr const char* kRosetNodeId = "nodeId";
inline constexpr const char* kRosetRootPath = "rootPath";
inline constexpr const char* kRosetApiUrl = "apiUrl";
inline constexpr const char* kRosetCommitId = "commitId";
inline constexpr const char* kRosetRef = "ref";
inline constexpr const char* kRosetSubPath = "subPath";

}  // namespace rosetctl
