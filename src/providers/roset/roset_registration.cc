// The roset provider's settings (flags, environment, config file keys) and how they become a
// RosetConfig. The API key has no flag on purpose (a command line is visible to every user): it
// comes from ROSET_API_KEY, a key file or CSI secrets.
#include "providers/roset/roset_registration.h"

#include <charconv>

#include "core/map_lookup.h"
#include "core/validate.h"
#include "providers/roset/roset_provider.h"

namespace rosetctl {
namespace {

constexpr const char* kApiUrl = "roset-api-url";
constexpr const char* kApiKeyFile = "roset-api-key-file";
constexpr const char* kApiKeyEnv = "ROSET_API_KEY";
constexpr const char* kMountId = "roset-mount-id";
constexpr const char* kCaBundle = "roset-ca-bundle";
constexpr const char* kFuse = "roset-fuse";
constexpr const char* kFuseCredentials = "fuse-credentials";
constexpr const char* kFuseTimeout = "roset-fuse-timeout";
constexpr int kMaxFuseTimeoutSeconds = 3600;

std::vector<ProviderOption> roset_options() {
  return {
      {.name = kApiUrl,
       .env = "ROSET_API_URL",
       .help = "Roset API base URL (default https://api.roset.dev; http:// for on-premise)"},
      {.name = kApiKeyFile,
       .env = "ROSET_API_KEY_FILE",
       .help = "File holding the Roset API key (mode 0600); or set ROSET_API_KEY"},
      {.name = "", .env = kApiKeyEnv, .help = "The Roset API key itself"},
      {.name = kMountId,
       .env = "ROSET_MOUNT_ID",
       .help = "Roset mount for new volumes when the StorageClass names none (default: the "
               "account's default mount)"},
      {.name = kCaBundle,
       .env = "ROSET_CA_BUNDLE",
       .help = "PEM CA bundle to verify the API's TLS certificate (default: the system store)"},
      {.name = kFuse,
       .env = "ROSET_FUSE_BINARY",
       .help = "The roset-fuse client to run on nodes (default: roset-fuse on PATH)"},
      {.name = kFuseCredentials,
       .env = "ROSET_FUSE_CREDENTIALS",
       .help = "How roset-fuse gets the key: file (0600 file named by "
               "ROSET_CREDENTIALS_FILE) or env (ROSET_API_KEY in its environment)",
       .default_value = "file",
       .choices = {"file", "env"}},
      {.name = kFuseTimeout,
       .env = "ROSET_FUSE_TIMEOUT",
       .help = "Seconds to wait for a roset-fuse mount to appear before giving up",
       .default_value = "120",
       .type_name = "INT",
       .min = 1,
       .max = kMaxFuseTimeoutSeconds},
  };
}

Expected<RosetConfig> roset_config(const ProviderContext& context) {
  const ProviderSettings& settings = context.settings;
  RosetConfig config;
  config.api_url = value_or_empty(settings, kApiUrl);
  config.api_key_file = value_or_empty(settings, kApiKeyFile);
  config.api_key = value_or_empty(settings, kApiKeyEnv);
  config.mount_id = value_or_empty(settings, kMountId);
  config.ca_bundle = value_or_empty(settings, kCaBundle);
  config.fuse_binary = value_or_empty(settings, kFuse);
  std::string credentials = value_or_empty(settings, kFuseCredentials);
  if (credentials != "file" && credentials != "env") {
    return error(Code::kInvalidArgument, "--{} must be file or env, not {}", kFuseCredentials,
                 display_quoted(credentials));
  }
  config.fuse_credentials = credentials == "env" ? FuseCredentials::kEnv : FuseCredentials::kFile;
  std::string timeout = value_or_empty(settings, kFuseTimeout);
  int seconds = 0;
  auto [end, parsed] = std::from_chars(timeout.data(), timeout.data() + timeout.size(), seconds);
  if (parsed != std::errc() || end != timeout.data() + timeout.size() || seconds < 1 ||
      seconds > kMaxFuseTimeoutSeconds) {
    return error(Code::kInvalidArgument, "--{} must be a number of seconds from 1 to {}, not {}",
                 kFuseTimeout, kMaxFuseTimeoutSeconds, display_quoted(timeout));
  }
  config.fuse_ready_timeout = std::chrono::seconds(seconds);
  config.is_default_provider = context.is_default;
  config.node_role = context.node_role;
  return config;
}

}  // namespace

ProviderRegistration roset_registration() {
  return {.name = "roset",
          .option_group = "Roset provider (--provider roset)",
          .options = roset_options(),
          .create = [](const ProviderContext& context) -> Expected<std::unique_ptr<Provider>> {
            auto config = roset_config(context);
            if (!config) return config.status();
            return std::unique_ptr<Provider>(
                std::make_unique<RosetProvider>(std::move(*config), context.layout, context.store));
          },
          // A shared filesystem: every host that connects a volume writes to it.
          .shared_by_nodes = true,
          .not_moved_because =
              "it is not bound to a node, so there is nothing to move (connect "
              "it on the node that needs it)"};
}

}  // namespace rosetctl
