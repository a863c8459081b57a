// What the three CSI services share: options, the state store, providers and the lock space.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/server_context.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cluster/transfer_grants.h"
#include "core/lock_space.h"
#include "core/progress.h"
#include "core/state_layout.h"
#include "core/state_store.h"
#include "daemon/checked_stagings.h"
#include "providers/registry.h"

namespace rosetctl {

inline constexpr const char* kDefaultDriverName = "io.roset.csi";

enum class PluginRole { kAll, kController, kNode };

struct PluginOptions {
  std::string state_dir = kDefaultStateDir;
  std::string driver_name = kDefaultDriverName;
  std::string node_id;  // empty: the host name
  std::string default_provider = "local";
  int64_t max_volumes_per_node = 0;  // 0: no limit
  bool capacity_overcommit = false;  // providers may promise more space than they have
  PluginRole role = PluginRole::kAll;
  // How long CreateSnapshot waits for the provider before answering ready_to_use=false.
  std::chrono::milliseconds snapshot_wait{2000};
  // Long operations (snapshot commits, restores) report here: the CLI's progress bar on a
  // terminal. Null under `serve` and in JSON mode. Owned by whoever built these options.
  ProgressSink* progress = nullptr;
  // A CLI run: the plugin lives for one command (StateStore::Lifetime).
  bool one_command = false;
  // Each provider's own settings by provider name (providers/provider_registration.h); an
  // option not given takes its default.
  std::map<std::string, ProviderSettings> provider_settings;
  // The controller (serve --controller, the CLI's --controller): other nodes are reached
  // through its proxy, as when a snapshot is pulled from one (snapshot_pull.h). Null: none.
  std::shared_ptr<grpc::Channel> controller_channel;
  // This host's certificates (--tls-cert, --tls-key, --tls-ca), shown when it dials another
  // node directly to pull a snapshot from it (source_node.h). Null: only through the proxy.
  std::shared_ptr<grpc::ChannelCredentials> node_credentials;
};

struct ServiceContext {
  PluginOptions options;
  StateLayout layout;
  StateStore& store;
  ProviderRegistry& providers;
  LockSpace locks;
  // The channel to registered node `node` for a call naming it that reached one of this
  // server's own services (cluster/node_forward.h); it authorizes the caller as the proxy does
  // (cluster/node_proxy.h). Set by Plugin::start; empty: no calls are forwarded.
  std::function<Expected<std::shared_ptr<grpc::Channel>>(
      const grpc::ServerContextBase& call, const std::string& method, const std::string& node)>
      route_to_node;
  // The transfer grants this host issued (a controller) or was told of by its controller (a
  // node a grant names as the source): cluster/transfer_grants.h.
  TransferGrants transfer_grants;
  // Stagings whose publications all answered at their current mount (NodePublish's repair
  // check, daemon/node_repair.h).
  CheckedStagings checked_stagings;
};

}  // namespace rosetctl
