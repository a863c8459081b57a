// One CLI invocation's connection to the CSI services and our node registry: the plugin hosted
// in this process, reached over gRPC's in-process channel (the same code path `serve` exposes).
#pragma once

#include <memory>

#include "cli/csi_client.h"
#include "cli/global_options.h"
#include "cli/registry_client.h"
#include "cli/terminal_progress.h"
#include "daemon/plugin.h"

namespace rosetctl::cli {

// False when the state directory holds no database yet: read-only verbs then answer from an
// empty state instead of creating one as a side effect.
bool state_exists(const GlobalOptions& options);

class Session {
 public:
  static Expected<std::unique_ptr<Session>> open(const GlobalOptions& options);

  CsiClient& client() { return *client_; }
  // The controller's node registry (rosetctl.v1.Registry).
  RegistryClient& registry() { return *registry_; }
  // Node-local facts (where volumes are mounted on this host) come from this host's store.
  StateStore& store() { return plugin_->store(); }
  const StateLayout& layout() const { return plugin_->layout(); }
  const LockSpace& locks() const { return plugin_->locks(); }
  const std::string& node_id() const { return plugin_->options().node_id; }
  // Maintenance without a CSI RPC (snapshot diff, verify, gc) asks this host's providers.
  ProviderRegistry& providers() { return plugin_->providers(); }
  // The progress bar, or null when there is no terminal to draw on (or JSON output).
  ProgressSink* progress() { return progress_.get(); }

 private:
  std::unique_ptr<TerminalProgress> progress_;  // outlives the plugin that reports to it
  std::unique_ptr<Plugin> plugin_;
  std::unique_ptr<CsiClient> client_;
  std::unique_ptr<RegistryClient> registry_;
};

}  // namespace rosetctl::cli
