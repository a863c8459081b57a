// `rosetctl volume create`: its flags, and the CreateVolume request they make (a kind, a size,
// a content source, the provider's parameters).
#include <optional>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_lookup.h"
#include "cli/volume_cmd.h"
#include "cli/volume_lookup.h"
#include "cli/volume_view.h"
#include "core/size.h"
#include "core/validate.h"
#include "daemon/convert.h"
#include "providers/provider_registration.h"

namespace rosetctl::cli {
namespace {

struct CreateOptions {
  std::string name;
  std::optional<std::string> size;  // given but empty ("--size \"$UNSET\"") is an error
  std::vector<std::string> parameters;
  std::string from_snapshot;
  std::string from_volume;
  std::string type;        // "", dir or image: the `type` parameter
  std::string filesystem;  // "", ext4 or xfs: the mount capability's fs_type
  bool block = false;      // a raw block volume (always an image)
  std::string node;        // the node to make it on (its topology), "" for the controller's
};

csi::v1::VolumeCapability default_capability() {
  csi::v1::VolumeCapability capability;
  capability.mutable_mount();
  capability.mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  return capability;
}

// --from-snapshot (id, id prefix or name) or --from-volume (name or id). Returns whether the
// source is a raw block volume (or a snapshot of one), which the new volume must be too.
Expected<bool> set_content_source(Session& session, const CreateOptions& options,
                                  csi::v1::CreateVolumeRequest* request) {
  if (!options.from_snapshot.empty()) {
    auto snapshot = resolve_snapshot_to_restore(session, options.from_snapshot, options.node);
    if (!snapshot) return snapshot.status();
    request->mutable_volume_content_source()->mutable_snapshot()->set_snapshot_id(snapshot->id);
    return is_block_snapshot(*snapshot);
  }
  if (!options.from_volume.empty()) {
    auto volume = resolve_volume(session, options.from_volume);
    if (!volume) return volume.status();
    request->mutable_volume_content_source()->mutable_volume()->set_volume_id(
        volume->volume.volume_id());
    return is_block_volume(volume->volume);
  }
  return false;
}

// --type, --fs and --block: the `type` parameter and the capability, checked for sense. A
// restore or clone is the kind of volume its source is unless told otherwise.
Status apply_kind(const CreateOptions& options, bool block_source,
                  csi::v1::CreateVolumeRequest* request) {
  auto& parameters = *request->mutable_parameters();
  std::string type = options.type;
  if (!type.empty() && parameters.contains("type") && parameters.at("type") != type) {
    return error(Code::kInvalidArgument, "--type {} contradicts --param type={}", type,
                 parameters.at("type"));
  }
  if (type.empty() && parameters.contains("type")) type = parameters.at("type");
  if (options.block) {
    if (type == "dir") {
      return error(Code::kInvalidArgument,
                   "--block volumes are images; drop --type dir (a directory has no device)");
    }
    if (!options.filesystem.empty()) {
      return error(Code::kInvalidArgument,
                   "--fs does not apply to --block volumes: the user of the device formats it");
    }
    type = "image";
  }
  if (!options.filesystem.empty() && type != "image") {
    return error(Code::kInvalidArgument,
                 "--fs needs --type image: a directory volume has no filesystem of its own");
  }
  bool has_source = !options.from_snapshot.empty() || !options.from_volume.empty();
  if (type == "image" && !options.size && !has_source) {
    return error(Code::kInvalidArgument,
                 "image volumes need --size: the volume is a file of exactly that size");
  }
  if (!type.empty()) parameters["type"] = type;
  csi::v1::VolumeCapability capability = default_capability();
  bool follow_source = block_source && type.empty() && options.filesystem.empty();
  if (options.block || follow_source) {
    capability.mutable_block();
  } else {
    capability.mutable_mount()->set_fs_type(options.filesystem);
  }
  *request->add_volume_capabilities() = capability;
  return Status::ok();
}

// On a consumer host the controller's default provider would decide; --provider given there is
// sent as the `provider` parameter. At home the plugin's default provider is --provider already.
Status ask_for_provider(const GlobalOptions& globals,
                        google::protobuf::Map<std::string, std::string>* parameters) {
  if (globals.controller.empty() || !globals.provider_given) return Status::ok();
  auto it = parameters->find("provider");
  if (it == parameters->end()) {
    (*parameters)["provider"] = globals.provider;
  } else if (it->second != globals.provider) {
    return error(Code::kInvalidArgument, "--provider {} contradicts --param provider={}",
                 globals.provider, it->second);
  }
  return Status::ok();
}

// A provider may make its volumes on one host (iscsi: the one whose tgtd exports them, the
// controller host). A CLI that sees only this node host's store (its own, without --controller)
// makes them here: a provider that does not answer is most often on another host, so the
// message says which (ProviderRegistration::only_this_host_hint).
Status with_target_host_hint(const Session& session, const GlobalOptions& globals,
                             const csi::v1::CreateVolumeRequest& request, Status status) {
  if (status.code() != Code::kUnavailable || !session.sees_only_this_host()) return status;
  auto named = request.parameters().find("provider");
  const ProviderRegistration* provider =
      find_registration(named != request.parameters().end() ? named->second : globals.provider);
  if (provider == nullptr || provider->only_this_host_hint.empty()) return status;
  return error(Code::kUnavailable, "{}; {}", status.message(), provider->only_this_host_hint);
}

Status run_create(const GlobalOptions& globals, const CreateOptions& options) {
  csi::v1::CreateVolumeRequest request;
  request.set_name(options.name);
  if (options.size) {
    auto bytes = parse_size(*options.size);
    if (!bytes) return bytes.status();
    // CSI reads required_bytes 0 as "no size given" (an image then gets the plugin's default),
    // so a 0 the user typed must be refused here, like any other size below the minimum.
    if (*bytes == 0) {
      return error(Code::kOutOfRange,
                   "--size {} is no size: a volume needs at least 1 byte (an image volume 1Mi, "
                   "an xfs one 300Mi)",
                   *options.size);
    }
    request.mutable_capacity_range()->set_required_bytes(*bytes);
  }
  ROSETCTL_RETURN_IF_ERROR(parse_parameters(options.parameters, request.mutable_parameters()));
  ROSETCTL_RETURN_IF_ERROR(ask_for_provider(globals, request.mutable_parameters()));
  if (!options.node.empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.node, "--node"));
    auto* requirement = request.mutable_accessibility_requirements();
    (*requirement->add_requisite()->mutable_segments())[kTopologyNodeKey] = options.node;
    *requirement->add_preferred() = requirement->requisite(0);
  }
  {  // usage errors first, before the state directory is touched
    csi::v1::CreateVolumeRequest checked = request;
    ROSETCTL_RETURN_IF_ERROR(apply_kind(options, false, &checked));
  }

  auto session = Session::open(globals);
  if (!session) return session.status();
  auto block_source = set_content_source(**session, options, &request);
  if (!block_source) return block_source.status();
  ROSETCTL_RETURN_IF_ERROR(apply_kind(options, *block_source, &request));
  csi::v1::CreateVolumeResponse response;
  ROSETCTL_RETURN_IF_ERROR(with_target_host_hint(
      **session, globals, request,
      (*session)->client().controller(&csi::v1::Controller::Stub::CreateVolume, request, &response,
                                      request.has_volume_content_source()
                                          ? CsiClient::kDataCallDeadline
                                          : CsiClient::kCallDeadline)));
  auto info = resolve_volume(**session, response.volume().volume_id());
  if (!info) return info.status();
  return print_volume(**session, globals.output, *info);
}

}  // namespace

void setup_volume_create(CLI::App& volume, const GlobalOptions& globals, Action& action) {
  auto create_options = std::make_shared<CreateOptions>();
  CLI::App* create = volume.add_subcommand("create", "Create a volume (idempotent by name)");
  create
      ->add_option("name", create_options->name,
                   "Volume name: 1-128 letters, digits, '.', '_' or '-'")
      ->required();
  create->add_option("--size,-s", create_options->size,
                     "Requested size: bytes or 64Mi, 10Gi, 1.5Ti, 500M (dir volumes record it; "
                     "they do not enforce it)");
  create->add_option("--param,-p", create_options->parameters,
                     "Provider parameter KEY=VALUE, repeatable (local: type=dir|image, "
                     "directIO=true|false)");
  create
      ->add_option("--type", create_options->type,
                   "dir: a directory (size not enforced); image: a sparse file of exactly --size "
                   "on a loop device")
      ->check(CLI::IsMember({"dir", "image"}));
  create
      ->add_option("--fs", create_options->filesystem,
                   "Filesystem of an image volume (default ext4), made on first connect")
      ->check(CLI::IsMember({"ext4", "xfs"}));
  create->add_flag("--block", create_options->block,
                   "A raw block volume: connect puts the device at the target (an image)");
  auto* from_snapshot = create->add_option(
      "--from-snapshot", create_options->from_snapshot,
      "Start with a snapshot's content (commit id, id prefix or name); an image or block "
      "volume's snapshot makes the same kind of volume. Another node's snapshot by its id "
      "(n<len>.<node>.<id>, as the controller lists it): the node the volume is made on "
      "fetches what it lacks of it first");
  create
      ->add_option("--from-volume", create_options->from_volume,
                   "Start as a copy of another volume (name or id), of the same kind and at "
                   "least its size. With --node another node than the volume's (through "
                   "--controller): the controller snapshots it there, the node fetches what it "
                   "lacks of that snapshot and restores it, and the snapshot is removed")
      ->excludes(from_snapshot);
  create->add_option("--node", create_options->node,
                     "Make the volume on this registered node (a local volume lives there; "
                     "with --controller, the controller has that node create it; refused, "
                     "exit code 8, while the node is cordoned: `rosetctl node cordon`)");
  create->footer(
      "Creating a name that exists returns the existing volume when it was made with the same\n"
      "parameters and is at least --size (CSI's rule: the size is the least it must have; it\n"
      "never shrinks), and fails with exit code 4 when it is smaller or was made otherwise\n"
      "(another type, filesystem, provider or source). Image volumes take their space from the\n"
      "state directory's filesystem up front (see --capacity-overcommit). A volume made from a\n"
      "snapshot or another volume is of the same kind (dir, image with its filesystem, or block)\n"
      "and at least as big; asking for another kind is refused (exit 2).\n\n"
      "Across nodes (with --controller): --node B --from-snapshot ID, where ID is a snapshot of\n"
      "node A (its id names A), makes the volume on B; B fetches from A only the file contents\n"
      "it lacks, keeps the snapshot as one of its own (listed under B's id) and restores it.\n"
      "If A goes away meanwhile the create fails (exit 6); run it again and it resumes.\n\n"
      "Examples:\n  rosetctl volume create demo\n  rosetctl volume create data --size 10Gi -o "
      "json\n  rosetctl volume create db --size 10Gi --type image --fs xfs\n  rosetctl volume "
      "create raw --size 1Gi --block\n  rosetctl volume create copy --from-volume demo\n  rosetctl "
      "--controller ctl:9443 volume create copy --node node-b --from-snapshot "
      "n6.node-a.snap-0123abcd");
  create->callback([&globals, &action, create_options] {
    action = [&globals, create_options] { return run_create(globals, *create_options); };
  });
}

}  // namespace rosetctl::cli
