// The keys of the CSI volume context (and of a snapshot's context, which uses the same words)
// that providers write and the daemon and CLI read back: one vocabulary, so that a key a
// provider writes is the key the CLI looks for. Keys only one provider reads are that
// provider's, in its folder (providers/roset/roset_context.h, providers/iscsi/iscsi_context.h).
// Keys of the publish context (what ControllerPublish hands to NodeStage) belong here too when a
// provider sets some.
//
// The values are stored in every volume record and PV: never rename one.
#pragma once

#include <string_view>

namespace rosetctl {

// --- set by the daemon for every volume, so that any caller can show it by name ---
inline constexpr const char* kContextName = "rosetctl.io/name";
inline constexpr const char* kContextProvider = "rosetctl.io/provider";

// --- what the volume is; providers set those that apply ---
inline constexpr const char* kContextType = "type";      // local: "dir", "image"; roset: "folder"
inline constexpr const char* kContextFilesystem = "fs";  // image mount volumes: ext4, xfs
inline constexpr const char* kContextAccess = "access";  // image volumes: "mount", "block"
inline constexpr const char* kContextReadOnly = "readOnly";  // "true": only readers may attach

inline constexpr std::string_view kTypeDir = "dir";
inline constexpr std::string_view kTypeImage = "image";
inline constexpr std::string_view kTypeFolder = "folder";
inline constexpr std::string_view kAccessMount = "mount";
inline constexpr std::string_view kAccessBlock = "block";

// --- the publish context ---
// Present ("controller"): the controller keeps secrets for this node's publication
// (ControllerSide::publish_secrets) that NodeStage must fetch from it over mutual TLS
// (Catalog/GetPublishSecrets) and hand to the provider beside the request's own secrets. The
// secrets themselves never travel in a publish context, which COs keep in plain sight.
inline constexpr const char* kPublishSecretsFromController = "rosetctl.io/secrets";

}  // namespace rosetctl
