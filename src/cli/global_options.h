// Flags every verb understands, before or after the verb.
#pragma once

#include <map>
#include <string>

#include "cluster/tls_files.h"
#include "core/state_layout.h"
#include "providers/provider_registration.h"

namespace rosetctl::cli {

enum class OutputFormat { kTable, kJson };

struct GlobalOptions {
  OutputFormat output = OutputFormat::kTable;
  std::string state_dir = kDefaultStateDir;
  std::string provider = "local";
  // --provider (or ROSETCTL_PROVIDER, or the config file) was given: a consumer host then asks
  // its controller for that provider (the `provider` parameter) instead of the controller's own
  // default.
  bool provider_given = false;
  std::string node_id;      // empty: host name
  std::string driver_name;  // empty: io.roset.csi
  // Image volumes may promise more space than the disk has free (docs/guides/providers/local.md:
  // capacity policy).
  bool capacity_overcommit = false;
  bool verbose = false;
  // JSON file of CSI secrets sent with the calls that take them (cli/secrets_file.h).
  std::string secrets_file;
  // Each provider's own flags (--roset-api-url, ...) by provider name, as its folder declares
  // them (providers/provider_registration.h). Env-only settings are not here: see
  // provider_settings().
  std::map<std::string, ProviderSettings> provider_options;
  // Across hosts (docs/guides/across-hosts.md): the controller this host sends controller
  // calls to, and this host's mutual-TLS files (serve --listen uses them too).
  // The configuration file looked at (--config, ROSETCTL_CONFIG or /etc/rosetctl/config.toml),
  // and whether it was there to read: `serve` logs it and `doctor` shows it.
  std::string config_file;
  bool config_file_read = false;
  std::string controller;  // "HOST:PORT"; empty: this host is its own controller
  std::string on_node;     // node calls go to this node through the controller's proxy
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

// Each provider's settings: its flags, plus its env-only settings (secrets such as
// ROSET_API_KEY) read from the environment now.
std::map<std::string, ProviderSettings> provider_settings(const GlobalOptions& options);

TlsFiles tls_files(const GlobalOptions& options);

}  // namespace rosetctl::cli
