// A volume's content source that another host holds. This host restores and clones only what
// is in its own store; an id naming another host's snapshot or volume is the cluster's to
// resolve (cluster/remote_sources.h implements this, and the assembly sets it in the
// ServiceContext): the snapshot is copied into this host's store first, and then restored as any
// of its own. Without one (ServiceContext::remote_sources null) every id is this host's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rosetctl {

struct ServiceContext;

class RemoteSources {
 public:
  virtual ~RemoteSources() = default;

  // Whether `id` is of the form that names the host holding it (then its provider is that
  // host's to know, not a lookup in this host's store).
  virtual bool names_a_host(std::string_view id) const = 0;

  // The id under which snapshot `id` is in this host's store: `id` itself when it is this
  // host's; a snapshot another host holds is copied here first (or found copied already).
  virtual Expected<std::string> snapshot_here(const ServiceContext& context,
                                              const std::string& id) const = 0;

  // When volume `id` lives on another host: the snapshot of it there to clone it by
  // (`clone_by`, which the request names; FAILED_PRECONDITION without one, INVALID_ARGUMENT
  // when it is of another host than the volume). nullopt: a volume of this host.
  virtual Expected<std::optional<std::string>> clone_by_snapshot(
      const ServiceContext& context, const std::string& id, const std::string& clone_by) const = 0;
};

}  // namespace rosetctl
