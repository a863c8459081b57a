// Settings of the roset provider (flags, environment, config file) and the credentials one call
// uses: the request's CSI secrets first, then what this host is configured with.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "core/status.h"

namespace rosetctl {

inline constexpr const char* kDefaultRosetApiUrl = "https://api.roset.dev";
inline constexpr const char* kDefaultRosetBasePath = "/volumes";

// How roset-fuse receives the API key: a 0600 file named by ROSET_CREDENTIALS_FILE (the seed's
// contract), or ROSET_API_KEY in its environment for builds that only read that.
enum class FuseCredentials { kFile, kEnv };

struct RosetConfig {
  std::string api_url;       // "": kDefaultRosetApiUrl
  std::string api_key_file;  // must not be readable by group or others
  std::string api_key;       // from ROSET_API_KEY; never logged
  std::string mount_id;      // default for volumes whose StorageClass names none
  std::string ca_bundle;     // "": the system's CA store
  std::string fuse_binary;   // "": roset-fuse on PATH
  FuseCredentials fuse_credentials = FuseCredentials::kFile;
  std::chrono::seconds fuse_ready_timeout{120};
  bool is_default_provider = false;  // --provider roset
  bool node_role = true;             // roset-fuse must be present (Probe)
};

// Where a call reaches Roset and as whom.
struct RosetEndpoint {
  std::string api_url;
  std::string api_key;
  std::string mount_id;
};

// "http(s)://host[:port][/prefix]" without a trailing slash; INVALID_ARGUMENT naming `what`
// for anything else (other schemes, user info, query strings).
Expected<std::string> normalize_api_url(std::string_view url, std::string_view what);

// Who needs the key, for the message when there is none: the controller side calls the API
// (on the controller host), a node mounts with roset-fuse (on the host that connects).
enum class KeyUse { kApi, kFuse };

// The endpoint for one call. The API key comes from `secrets` ("api-key", or "apiKey" as the
// published driver reads it), else from the key file, else from ROSET_API_KEY; the URL from
// `secrets` ("api-url"), else `context_url` (where the volume was created), else the config.
// UNAUTHENTICATED, naming every place looked at, when there is no key.
Expected<RosetEndpoint> resolve_endpoint(const RosetConfig& config,
                                         const std::map<std::string, std::string>& secrets,
                                         std::string_view context_url, std::string_view mount_id,
                                         KeyUse use = KeyUse::kApi);

// Reads an API key file: it must be a regular file, not readable by group or others (else
// PERMISSION_DENIED saying so), and holds the key on its first line.
Expected<std::string> read_api_key_file(const std::string& path);

}  // namespace rosetctl
