// Controller-side volume verbs: list, show, expand, modify, delete, map, unmap; create is
// volume_create_cmd.cc's.
#include "cli/volume_cmd.h"

#include <cstdio>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/volume_expand.h"
#include "cli/volume_lookup.h"
#include "cli/volume_view.h"
#include "core/size.h"
#include "core/validate.h"
#include "daemon/convert.h"

namespace rosetctl::cli {
namespace {

struct VolumeOptions {
  std::string volume;
  std::string size;
  std::string node;
  bool read_only = false;
  std::vector<std::string> parameters;  // modify: KEY=VALUE
};

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

}  // namespace

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

namespace {

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
  setup_volume_create(*volume, globals, action);

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
  setup_volume_move(*volume, globals, action);
  setup_volume_replicate(*volume, globals, action);
}

}  // namespace rosetctl::cli
