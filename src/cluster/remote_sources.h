// The cluster's side of daemon/remote_sources.h: a content source whose placed id
// (placed_id.h) names another node. A snapshot is pulled from that node into this node's store
// (snapshot_pull.h) unless it is held here whole already; a volume is cloned by way of the
// snapshot of it the controller took there (cross_node_clone.cc). The assembly sets it in the
// ServiceContext (plugin.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "daemon/remote_sources.h"

namespace rosetctl {

class PlacedSources final : public RemoteSources {
 public:
  bool names_a_host(std::string_view id) const override;
  Expected<std::string> snapshot_here(const ServiceContext& context,
                                      const std::string& id) const override;
  Expected<std::optional<std::string>> clone_by_snapshot(
      const ServiceContext& context, const std::string& id,
      const std::string& clone_by) const override;
};

}  // namespace rosetctl
