// Controller-side volume verbs: create, list, show, expand, modify, delete, map, unmap.
#include "cli/volume_cmd.h"

#include <cstdio>
#include <optional>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_lookup.h"
#include "cli/volume_expand.h"
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

struct VolumeOptions {
  std::string volume;
  std::string size;
  std::string node;
  bool read_only = false;
  std::vector<std::string> parameters;  // modify: KEY=VALUE
};

csi::v1::VolumeCapability default_capability() {
  csi::v1::VolumeCapability capability;
  capability.mutable_mount();
  capability.mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  return capability;
}

// Table mode says on stderr which nodes the view lacks (JSON has `unreachable_nodes`): a partial
// view is marked, never silently short.
void note_unreachable(OutputFormat format, const nlohmann::json& volume) {
  if (format != OutputFormat::kTable) return;
  for (const auto& node : volume["unreachable_nodes"]) {
    std::fprintf(stderr, "rosetctl: note: node \"%s\" is left out of this view: %s\n",
                 node["node"].get<std::string>().c_str(),
                 node["reason"].get<std::string>().c_str());
  }
}

Status print_volume(Session& session, OutputFormat format, const VolumeInfo& info) {
  auto described = describe_volume(session, info);
  if (!described) return described.status();
  print_object(format, *described, volume_fields());
  return Status::ok();
}

Status parse_parameters(const std::vector<std::string>& items,
                        google::protobuf::Map<std::string, std::string>* out) {
  for (const std::string& item : items) {
    std::size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      return error(Code::kInvalidArgument, "--param {} must look like KEY=VALUE",
                   display_quoted(item, 200));
    }
    (*out)[item.substr(0, equals)] = item.substr(equals + 1);
  }
  return Status::ok();
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

Status run_list(const GlobalOptions& globals) {
  if (!state_exists(globals)) {
    print_list(globals.output, nlohmann::json::array(), volume_columns());
    return Status::ok();
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  std::vector<std::string> unreachable;
  auto volumes = list_all_volumes((*session)->client(), &unreachable);
  if (!volumes) return volumes.status();
  // The nodes whose volumes the list lacks; each volume's `unreachable_nodes` names them too
  // when they are still registered (the combined view asks every node).
  for (const std::string& why : unreachable)
    std::fprintf(stderr, "rosetctl: note: the list lacks the volumes of a node: %s\n", why.c_str());
  auto described = describe_volumes(**session, *volumes, NodesAsked::kEveryNode);
  if (!described) return described.status();
  nlohmann::json items = nlohmann::json::array();
  for (nlohmann::json& item : *described)
    items.push_back(std::move(item));
  print_list(globals.output, items, volume_columns());
  if (!items.empty()) note_unreachable(globals.output, items.front());
  note_only_this_host(**session);
  return Status::ok();
}

}  // namespace

Status no_state(const GlobalOptions& globals, std::string_view volume) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(volume, "volume name or id"));
  return error(Code::kNotFound, "no volume is named \"{}\" or has that id (no state in \"{}\" yet)",
               volume, globals.state_dir);
}

namespace {

Status run_show(const GlobalOptions& globals, const VolumeOptions& options) {
  if (!state_exists(globals)) return no_state(globals, options.volume);
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  auto described = describe_volume(**session, *info, NodesAsked::kEveryNode);
  if (!described) return described.status();
  print_object(globals.output, *described, volume_fields());
  note_unreachable(globals.output, *described);
  return Status::ok();
}

Status run_expand(const GlobalOptions& globals, const VolumeOptions& options) {
  auto bytes = parse_size(options.size);
  if (!bytes) return bytes.status();
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  if (*bytes < info->volume.capacity_bytes()) {
    return error(Code::kOutOfRange, "volume \"{}\" is already {}; volumes never shrink",
                 volume_name(info->volume), format_size(info->volume.capacity_bytes()));
  }

  csi::v1::ControllerExpandVolumeRequest request;
  request.set_volume_id(info->volume.volume_id());
  request.mutable_capacity_range()->set_required_bytes(*bytes);
  *request.mutable_volume_capability() = attach_capability(info->volume);
  csi::v1::ControllerExpandVolumeResponse response;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().controller(
      &csi::v1::Controller::Stub::ControllerExpandVolume, request, &response));
  auto expansion = expand_on_this_node(**session, *info, response.capacity_bytes(),
                                       response.node_expansion_required());
  if (!expansion) return expansion.status();
  auto updated = resolve_volume(**session, info->volume.volume_id());
  if (!updated) return updated.status();
  auto out = describe_volume(**session, *updated);
  if (!out) return out.status();
  (*out)["expansion"] = *expansion;
  print_object(globals.output, *out, volume_fields());
  if (globals.output == OutputFormat::kTable && (*expansion)["node"] == "pending") {
    std::fprintf(stderr, "rosetctl: warning: %s\n",
                 (*expansion)["message"].get<std::string>().c_str());
  }
  return Status::ok();
}

Status run_modify(const GlobalOptions& globals, const VolumeOptions& options) {
  csi::v1::ControllerModifyVolumeRequest request;
  ROSETCTL_RETURN_IF_ERROR(
      parse_parameters(options.parameters, request.mutable_mutable_parameters()));
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  request.set_volume_id(info->volume.volume_id());
  csi::v1::ControllerModifyVolumeResponse response;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().controller(
      &csi::v1::Controller::Stub::ControllerModifyVolume, request, &response));
  return print_volume(**session, globals.output, *info);
}

Status run_delete(const GlobalOptions& globals, const VolumeOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto info = resolve_volume(**session, options.volume);
  if (!info) {
    // Deleting what is not there is done already: the same answer CSI's DeleteVolume gives. A
    // name of several volumes is no such thing: the user names one by its id.
    if (info.status().code() != Code::kNotFound || is_ambiguous_name(info.status()))
      return info.status();
    print_line_or_json(globals.output, nothing_to_delete(**session, "volume", options.volume),
                       {{"id", nullptr}, {"name", options.volume}, {"deleted", false}});
    return Status::ok();
  }
  csi::v1::DeleteVolumeRequest request;
  request.set_volume_id(info->volume.volume_id());
  csi::v1::DeleteVolumeResponse response;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().controller(&csi::v1::Controller::Stub::DeleteVolume,
                                                           request, &response));
  std::string name = volume_name(info->volume);
  print_line_or_json(globals.output,
                     fmt::format("deleted volume \"{}\" ({})", name, info->volume.volume_id()),
                     {{"id", info->volume.volume_id()}, {"name", name}, {"deleted", true}});
  return Status::ok();
}

Status run_map(const GlobalOptions& globals, const VolumeOptions& options, bool map) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  std::string node = options.node.empty() ? (*session)->node_id() : options.node;
  nlohmann::json out = {
      {"id", info->volume.volume_id()}, {"name", volume_name(info->volume)}, {"node", node}};
  if (map) {
    csi::v1::ControllerPublishVolumeRequest request;
    request.set_volume_id(info->volume.volume_id());
    request.set_node_id(node);
    request.set_readonly(options.read_only);
    *request.mutable_volume_capability() = attach_capability(info->volume);
    *request.mutable_volume_context() = info->volume.volume_context();
    csi::v1::ControllerPublishVolumeResponse response;
    ROSETCTL_RETURN_IF_ERROR((*session)->client().controller(
        &csi::v1::Controller::Stub::ControllerPublishVolume, request, &response));
    out["publish_context"] = std::map<std::string, std::string>(response.publish_context().begin(),
                                                                response.publish_context().end());
    out["mapped"] = true;
  } else {
    csi::v1::ControllerUnpublishVolumeRequest request;
    request.set_volume_id(info->volume.volume_id());
    request.set_node_id(node);
    csi::v1::ControllerUnpublishVolumeResponse response;
    ROSETCTL_RETURN_IF_ERROR((*session)->client().controller(
        &csi::v1::Controller::Stub::ControllerUnpublishVolume, request, &response));
    out["mapped"] = false;
  }
  print_line_or_json(globals.output,
                     fmt::format("{} volume \"{}\" {} node \"{}\"", map ? "mapped" : "unmapped",
                                 out["name"].get<std::string>(), map ? "to" : "from", node),
                     out);
  return Status::ok();
}

void add_volume_argument(CLI::App* command, VolumeOptions* options) {
  command->add_option("volume", options->volume, "Volume name or id")->required();
}

}  // namespace

void setup_volume(CLI::App& app, const GlobalOptions& globals, Action& action) {
  CLI::App* volume = app.add_subcommand("volume", "Create, attach, inspect and delete volumes");
  volume->require_subcommand(1);

  auto create_options = std::make_shared<CreateOptions>();
  CLI::App* create = volume->add_subcommand("create", "Create a volume (idempotent by name)");
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
                     "with --controller, the controller has that node create it)");
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

  CLI::App* list = volume->add_subcommand("list", "List volumes with where they are connected");
  list->footer(
      "With --controller: every volume the controller's view holds (its host's and its nodes').\n"
      "Without: this host's own store. On a node host (one whose serve runs with --controller)\n"
      "a note on stderr, in JSON output too, says so and names its controller.");
  list->callback([&globals, &action] { action = [&globals] { return run_list(globals); }; });

  auto show_options = std::make_shared<VolumeOptions>();
  CLI::App* show = volume->add_subcommand("show", "Show one volume: size, nodes, mounts, health");
  add_volume_argument(show, show_options.get());
  show->callback([&globals, &action, show_options] {
    action = [&globals, show_options] { return run_show(globals, *show_options); };
  });

  auto expand_options = std::make_shared<VolumeOptions>();
  CLI::App* expand = volume->add_subcommand("expand", "Grow a volume (volumes never shrink)");
  add_volume_argument(expand, expand_options.get());
  expand->add_option("--size,-s", expand_options->size, "New size, e.g. 20Gi")->required();
  expand->footer(
      "An image volume connected here grows at once, filesystem included, while mounted. Where\n"
      "the filesystem cannot grow online (ext4 without CAP_SYS_RESOURCE) it grows at the next\n"
      "connect; JSON \"expansion\" says which happened.");
  expand->callback([&globals, &action, expand_options] {
    action = [&globals, expand_options] { return run_expand(globals, *expand_options); };
  });

  auto modify_options = std::make_shared<VolumeOptions>();
  CLI::App* modify =
      volume->add_subcommand("modify", "Change a volume's mutable parameters (ModifyVolume)");
  add_volume_argument(modify, modify_options.get());
  modify
      ->add_option("--param,-p", modify_options->parameters,
                   "Mutable parameter KEY=VALUE, repeatable (local image and block volumes: "
                   "directIO=true|false)")
      ->required();
  modify->footer(
      "Only the parameters given change. directIO=false makes the loop device of an image or\n"
      "block volume go through the host's page cache, directIO=true bypasses it; a volume\n"
      "connected here switches at once, while mounted. Parameters fixed at creation (type,\n"
      "filesystem) are refused with exit code 2. Repeating a modify changes nothing.\n\n"
      "Example:\n  rosetctl volume modify db --param directIO=false");
  modify->callback([&globals, &action, modify_options] {
    action = [&globals, modify_options] { return run_modify(globals, *modify_options); };
  });

  auto delete_options = std::make_shared<VolumeOptions>();
  CLI::App* remove = volume->add_subcommand("delete", "Delete a volume and its data");
  add_volume_argument(remove, delete_options.get());
  remove->footer(
      "Refused (exit code 5) while the volume is connected or mapped anywhere.\n"
      "Deleting a volume that does not exist succeeds and says so.");
  remove->callback([&globals, &action, delete_options] {
    action = [&globals, delete_options] { return run_delete(globals, *delete_options); };
  });

  auto map_options = std::make_shared<VolumeOptions>();
  CLI::App* map =
      volume->add_subcommand("map", "Allow a node to attach the volume (ControllerPublish)");
  add_volume_argument(map, map_options.get());
  map->add_option("--node", map_options->node, "Node id (default: this node)");
  map->add_flag("--read-only", map_options->read_only, "The node may only attach it read-only");
  map->callback([&globals, &action, map_options] {
    action = [&globals, map_options] { return run_map(globals, *map_options, true); };
  });

  auto unmap_options = std::make_shared<VolumeOptions>();
  CLI::App* unmap =
      volume->add_subcommand("unmap", "Withdraw a node's access (ControllerUnpublish)");
  add_volume_argument(unmap, unmap_options.get());
  unmap->add_option("--node", unmap_options->node, "Node id (default: this node)");
  unmap->callback([&globals, &action, unmap_options] {
    action = [&globals, unmap_options] { return run_map(globals, *unmap_options, false); };
  });

  setup_volume_attach(*volume, globals, action);
}

}  // namespace rosetctl::cli
