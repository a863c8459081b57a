// One CLI invocation's connection to the CSI services and rosetctl.v1's: the plugin hosted in
// this process, reached over gRPC's in-process channel (the same code path `serve` exposes),
// and with --controller, the controller's services on another host over mutual TLS (with
// --on-node, another node's through the controller's proxy). Everything the CLI learns goes
// through client(): nothing below the services' API.
#pragma once

#include <memory>
#include <optional>

#include "cli/csi_client.h"
#include "cli/global_options.h"
#include "cli/node_marker.h"
#include "cli/terminal_progress.h"
#include "cluster/plugin.h"

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
  // Whether this CLI sees a node host's own store alone: no --controller (nor `controller` in
  // the configuration), no controller certificate to reach registered nodes with, and this state
  // directory served as a node of a controller (node_marker.h). What it does not find may then
  // be the controller's: its lists and not-found answers say so. A one-host user's CLI (no
  // controller anywhere) sees everything there is: nothing to say.
  bool sees_only_this_host() const { return node_of_.has_value(); }
  // The node and controller this state directory is served for, when sees_only_this_host().
  const std::optional<NodeMarker>& node_of() const { return node_of_; }
  // The progress bar, or null when there is no terminal to draw on (or JSON output).
  ProgressSink* progress() { return progress_.get(); }

 private:
  std::unique_ptr<TerminalProgress> progress_;  // outlives the plugin that reports to it
  std::unique_ptr<Plugin> plugin_;
  std::unique_ptr<CsiClient> client_;
  std::optional<NodeMarker> node_of_;
};

// What a not-found answer or a note adds when the CLI sees only a node host's store, after
// naming the node and its controller (only_this_host_text).
inline constexpr const char* kOnlyThisHostHint =
    "without --controller this CLI sees only this host's own volumes and snapshots; "
    "--controller ADDRESS (or `controller` in the configuration file) reaches the controller's";

// The same for the node registry: without --controller, `node list` and `node show` read this
// host's own (a node's: what its own CLI registered), never the controller's.
inline constexpr const char* kOnlyThisRegistryHint =
    "without --controller this CLI reads this host's own node registry, not the controller's; "
    "--controller ADDRESS (or `controller` in the configuration file) reaches the controller's";

// `this host is node "ID" of controller HOST:PORT; HINT`: what every note and hint says on a
// node host ("" when `session` does not see only this host).
std::string only_this_host_text(const Session& session, const char* hint);

// NOT_FOUND `status` with `hint` added when `session` sees only this host; any other status as
// it is.
Status with_only_this_host_hint(const Session& session, Status status,
                                const char* hint = kOnlyThisHostHint);

// A whole list (`volume list`, `snapshot list`, `node list`) or an entry read from this host's
// own store while `session` sees only a node host's: says so on stderr, naming the controller, in
// JSON output too (stdout stays the list), so that nobody takes this host's part for the cluster's.
void note_only_this_host(const Session& session, const char* hint = kOnlyThisHostHint);

// What `volume delete` and `snapshot delete` say of a `what` ("volume", "snapshot") that is not
// found: done already (exit 0, as CSI's DeleteVolume of an unknown id), but where the CLI sees
// only this host, that it looked only here (and a note on stderr naming --controller, in JSON
// output too: the controller may hold it).
std::string nothing_to_delete(const Session& session, std::string_view what, std::string_view name);

}  // namespace rosetctl::cli
