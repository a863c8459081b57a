// What the three CSI services share: options, the state store, providers and the lock space.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/lock_space.h"
#include "core/progress.h"
#include "core/state_layout.h"
#include "core/state_store.h"
#include "daemon/checked_stagings.h"
#include "daemon/remote_sources.h"
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
  // through its proxy, as when a snapshot is pulled from one (cluster/snapshot_pull.h). Null:
  // none.
  std::shared_ptr<grpc::Channel> controller_channel;
  // This host's certificates (--tls-cert, --tls-key, --tls-ca), shown when it dials another
  // node directly to pull a snapshot from it (cluster/source_node.h). Null: only through the
  // proxy.
  std::shared_ptr<grpc::ChannelCredentials> node_credentials;
};

struct ServiceContext {
  PluginOptions options;
  StateLayout layout;
  StateStore& store;
  ProviderRegistry& providers;
  LockSpace locks;
  // Content sources another host holds (remote_sources.h); set by the assembly. Null: every
  // id is this host's.
  std::shared_ptr<const RemoteSources> remote_sources;
  // Stagings whose publications all answered at their current mount (NodePublish's repair
  // check, daemon/node_repair.h).
  CheckedStagings checked_stagings;
};

}  // namespace rosetctl
