// Flags every verb understands, before or after the verb.
#pragma once

#include <string>

#include "core/state_layout.h"
#include "daemon/tls_files.h"
#include "providers/roset/roset_config.h"

namespace rosetctl::cli {

enum class OutputFormat { kTable, kJson };

struct GlobalOptions {
  OutputFormat output = OutputFormat::kTable;
  std::string state_dir = kDefaultStateDir;
  std::string provider = "local";
  std::string node_id;      // empty: host name
  std::string driver_name;  // empty: io.roset.csi
  // Image volumes may promise more space than the disk has free (README: capacity policy).
  bool capacity_overcommit = false;
  bool verbose = false;
  // JSON file of CSI secrets sent with the calls that take them (cli/secrets_file.h).
  std::string secrets_file;
  // The roset provider (README: the roset provider). The API key itself never is a flag.
  std::string roset_api_url;
  std::string roset_api_key_file;
  std::string roset_mount_id;
  std::string roset_ca_bundle;
  std::string roset_fuse;
  std::string fuse_credentials = "file";
  int roset_fuse_timeout_seconds = 120;
  // Across hosts (README: rosetctl across hosts): the controller this host sends controller
  // calls to, and this host's mutual-TLS files (serve --listen uses them too).
  std::string controller;  // "HOST:PORT"; empty: this host is its own controller
  std::string on_node;     // node calls go to this node through the controller's proxy
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

// The roset provider's settings from the flags, plus ROSET_API_KEY from the environment.
RosetConfig roset_config(const GlobalOptions& options);

TlsFiles tls_files(const GlobalOptions& options);

}  // namespace rosetctl::cli
