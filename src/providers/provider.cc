// Default node-side publish/unpublish shared by providers: bind mounts from the staging path.
#include "providers/provider.h"

#include "core/mount_ops.h"

namespace rosetctl {

Status Provider::publish_volume(const PublishSpec& spec) {
  auto options = parse_mount_flags(spec.capability.mount_flags);
  if (!options) return options.status();
  options->read_only = options->read_only || spec.readonly;
  return bind_mount(spec.staging_path, spec.target_path, *options);
}

Status Provider::unpublish_volume(std::string_view /*volume_id*/, const std::string& target_path) {
  return unmount_all(target_path);
}

}  // namespace rosetctl
