// One CLI invocation's connection to the CSI services and rosetctl.v1's: the plugin hosted in
// this process, reached over gRPC's in-process channel (the same code path `serve` exposes),
// and with --controller, the controller's services on another host over mutual TLS (with
// --on-node, another node's through the controller's proxy). Everything the CLI learns goes
// through client(): nothing below the services' API.
#pragma once

#include <memory>

#include "cli/csi_client.h"
#include "cli/global_options.h"
#include "cli/terminal_progress.h"
#include "daemon/plugin.h"

namespace rosetctl::cli {

// False when the state directory holds no database yet (and no remote controller is named):
// read-only verbs then answer from an empty state instead of creating one as a side effect.
bool state_exists(const GlobalOptions& options);

// The plugin options the global flags decide (state dir, provider and its settings, node id,
// driver name, overcommit); each verb that opens a plugin adds its own.
PluginOptions plugin_options_of(const GlobalOptions& options);

class Session {
 public:
  static Expected<std::unique_ptr<Session>> open(const GlobalOptions& options);

  CsiClient& client() { return *client_; }
  // The node that node calls act on: the --on-node one, else this host's (its plugin's id).
  const std::string& node_id() const {
    return client_->proxy_node().empty() ? plugin_->options().node_id : client_->proxy_node();
  }
  // The progress bar, or null when there is no terminal to draw on (or JSON output).
  ProgressSink* progress() { return progress_.get(); }

 private:
  std::unique_ptr<TerminalProgress> progress_;  // outlives the plugin that reports to it
  std::unique_ptr<Plugin> plugin_;
  std::unique_ptr<CsiClient> client_;
};

}  // namespace rosetctl::cli
