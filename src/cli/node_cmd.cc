// Registering this node with the controller, and listing, showing and removing registered nodes.
#include "cli/node_cmd.h"

#include <fmt/ranges.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "cli/initiator_name.h"
#include "cli/node_announce.h"
#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_view.h"
#include "core/clock.h"
#include "core/validate.h"
#include "core/version.h"

namespace rosetctl::cli {
namespace {

nlohmann::json null_if_empty(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}

std::string topology_text(const nlohmann::json& node) {
  std::string text;
  for (const auto& [key, value] : node["topology"].items())
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", key, value.get<std::string>());
  return text.empty() ? "-" : text;
}

// kubectl's "SchedulingDisabled": whether new volumes are placed on the node, and since when.
std::string cordon_text(const nlohmann::json& node) {
  if (!node["cordoned"].get<bool>()) return "no";
  return fmt::format("yes, since {} (no new volume is placed on it)",
                     node["cordoned_at"].get<std::string>());
}

}  // namespace

// The JSON model of a registered node (docs/reference/json.md): add fields, never rename them.
nlohmann::json node_json(const v1::Node& node) {
  return {
      {"node_id", node.node_id()},
      {"address", null_if_empty(node.address())},
      {"iscsi_initiator", null_if_empty(node.iscsi_initiator())},
      {"topology",
       std::map<std::string, std::string>(node.topology().begin(), node.topology().end())},
      {"version", node.version()},
      {"registered_at", format_time_ns(node.registered_at())},
      {"registered_at_ns", node.registered_at()},
      {"last_seen", format_time_ns(node.last_seen())},
      {"last_seen_ns", node.last_seen()},
      {"cordoned", node.cordoned_at() != 0},
      {"cordoned_at", node.cordoned_at() != 0 ? nlohmann::json(format_time_ns(node.cordoned_at()))
                                              : nlohmann::json(nullptr)},
      {"cordoned_at_ns",
       node.cordoned_at() != 0 ? nlohmann::json(node.cordoned_at()) : nlohmann::json(nullptr)}};
}

std::vector<Column> node_fields() {
  return {
      {"Node id", [](const nlohmann::json& n) { return text_of(n["node_id"]); }},
      {"Address", [](const nlohmann::json& n) { return text_of(n["address"]); }},
      {"iSCSI initiator", [](const nlohmann::json& n) { return text_of(n["iscsi_initiator"]); }},
      {"Topology", topology_text},
      {"Version", [](const nlohmann::json& n) { return text_of(n["version"]); }},
      {"Registered", [](const nlohmann::json& n) { return text_of(n["registered_at"]); }},
      {"Last seen", [](const nlohmann::json& n) { return text_of(n["last_seen"]); }},
      {"Cordoned", cordon_text}};
}

std::vector<Column> node_columns() {
  return {
      {"NODE ID", [](const nlohmann::json& n) { return text_of(n["node_id"]); }},
      {"ADDRESS", [](const nlohmann::json& n) { return text_of(n["address"]); }},
      {"ISCSI INITIATOR", [](const nlohmann::json& n) { return text_of(n["iscsi_initiator"]); }},
      {"VERSION", [](const nlohmann::json& n) { return text_of(n["version"]); }},
      {"LAST SEEN", [](const nlohmann::json& n) { return text_of(n["last_seen"]); }},
      {"CORDONED", [](const nlohmann::json& n) {
         return std::string(n["cordoned"].get<bool>() ? "yes" : "no");
       }}};
}

namespace {

struct NodeOptions {
  std::string node_id;
  std::string address;
  std::optional<std::string> iscsi_initiator;  // given (even empty) beats the initiator file
  bool force = false;
  bool revoke = false;
};

Status run_node_register(const GlobalOptions& globals, const NodeOptions& options) {
  // What a registration says (the initiator name, the address) is this host's: through another
  // node's proxy it would give that node this host's initiator name.
  if (!globals.on_node.empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(globals.on_node, "--on-node"));
    return error(Code::kInvalidArgument,
                 "node register registers the host it runs on, with this host's iSCSI initiator "
                 "name, so it takes no --on-node: node {} registers itself (its `serve --role "
                 "node --controller ADDRESS` does at start, or run `rosetctl --controller ADDRESS "
                 "node register` on that host)",
                 display_quoted(globals.on_node));
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  // Who this node is, as the CSI Node service says: what a CO would see.
  csi::v1::NodeGetInfoResponse info;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().node(&csi::v1::Node::Stub::NodeGetInfo,
                                                     csi::v1::NodeGetInfoRequest(), &info));
  auto registration = node_registration(info.node_id(), options.address, options.iscsi_initiator);
  if (!registration) return registration.status();
  v1::RegisterNodeRequest& request = *registration;
  *request.mutable_topology() = info.accessible_topology().segments();
  v1::RegisterNodeResponse response;
  Status registered =
      (*session)->client().registry(&v1::Registry::Stub::RegisterNode, request, &response);
  if (!registered && !options.iscsi_initiator && !request.iscsi_initiator().empty()) {
    // Say where a bad initiator name came from: the user gave none.
    return registered.with_context(
        fmt::format("with the initiator name from {}", initiator_name_file()));
  }
  ROSETCTL_RETURN_IF_ERROR(registered);
  print_object(globals.output, node_json(response.node()), node_fields());
  note_only_this_host(**session, kOnlyThisRegistryHint);
  return Status::ok();
}

Status run_node_list(const GlobalOptions& globals) {
  if (!state_exists(globals)) {
    print_list(globals.output, nlohmann::json::array(), node_columns());
    return Status::ok();
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  v1::ListNodesResponse response;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().registry(&v1::Registry::Stub::ListNodes,
                                                         v1::ListNodesRequest(), &response));
  nlohmann::json items = nlohmann::json::array();
  for (const v1::Node& node : response.nodes())
    items.push_back(node_json(node));
  print_list(globals.output, items, node_columns());
  note_only_this_host(**session, kOnlyThisRegistryHint);
  return Status::ok();
}

Status run_node_show(const GlobalOptions& globals, const NodeOptions& options) {
  if (!state_exists(globals)) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.node_id, "node id"));
    return error(Code::kNotFound, "node \"{}\" is not registered (no state in \"{}\" yet)",
                 options.node_id, globals.state_dir);
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  v1::GetNodeRequest request;
  request.set_node_id(options.node_id);
  v1::GetNodeResponse response;
  ROSETCTL_RETURN_IF_ERROR(with_only_this_host_hint(
      **session, (*session)->client().registry(&v1::Registry::Stub::GetNode, request, &response),
      kOnlyThisRegistryHint));
  print_object(globals.output, node_json(response.node()), node_fields());
  note_only_this_host(**session, kOnlyThisRegistryHint);
  return Status::ok();
}

Status run_node_remove(const GlobalOptions& globals, const NodeOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  v1::RemoveNodeRequest request;
  request.set_node_id(options.node_id);
  request.set_force(options.force);
  request.set_revoke(options.revoke);
  v1::RemoveNodeResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      (*session)->client().registry(&v1::Registry::Stub::RemoveNode, request, &response));
  std::vector<std::string> published(response.published_volume_ids().begin(),
                                     response.published_volume_ids().end());
  if (!published.empty() && globals.output != OutputFormat::kJson) {
    std::fprintf(stderr,
                 "rosetctl: note: volumes %s stay published to node \"%s\" until unmapped "
                 "(rosetctl volume unmap VOLUME --node %s)\n",
                 fmt::format("{}", fmt::join(published, ", ")).c_str(), options.node_id.c_str(),
                 options.node_id.c_str());
  }
  if (!response.removed()) note_only_this_host(**session, kOnlyThisRegistryHint);
  std::string said =
      response.removed()
          ? fmt::format("removed node \"{}\"", options.node_id)
          : fmt::format("node \"{}\" is not registered; nothing to remove", options.node_id);
  nlohmann::json revoked_at = nullptr;
  if (options.revoke) {
    revoked_at = utc_time_text(response.revoked_at_unix());
    said += fmt::format("; its certificates issued until {} are refused from now on",
                        revoked_at.get<std::string>());
  }
  print_line_or_json(globals.output, said,
                     {{"node_id", options.node_id},
                      {"removed", response.removed()},
                      {"published_volume_ids", published},
                      {"revoked_at", revoked_at}});
  return Status::ok();
}

void add_node_argument(CLI::App* command, NodeOptions* options) {
  command->add_option("node", options->node_id, "Node id (as `rosetctl node list` shows it)")
      ->required();
}

}  // namespace

void setup_node_registry(CLI::App& node, const GlobalOptions& globals, Action& action) {
  auto register_options = std::make_shared<NodeOptions>();
  CLI::App* registration = node.add_subcommand(
      "register", "Register this node with the controller, so volumes can be mapped to it");
  registration->add_option("--address", register_options->address,
                           "HOST:PORT or [IPv6]:PORT where this node's `serve --role node` "
                           "listens (default: the one registered, if any)");
  registration->add_option("--iscsi-initiator", register_options->iscsi_initiator,
                           "This node's iSCSI initiator name (default: InitiatorName= in " +
                               std::string(kInitiatorNameFile) + ", if any)");
  registration->footer(
      "Registers this host's node id (--node-id, default the host name) with its topology as\n"
      "NodeGetInfo reports it and this rosetctl's version. Registering again is safe: it\n"
      "updates the entry and its last-seen time, and keeps when the node first registered\n"
      "and, without --address, the address registered (serve --role node --listen registers\n"
      "it). It registers the host it runs on: it takes no --on-node.\n"
      "Volume map (ControllerPublish) to a node id is refused with exit code 3 until that node\n"
      "is registered; the controller's own node id never needs it.\n\n"
      "Examples:\n  rosetctl node register\n  rosetctl node register --address "
      "node1.example.com:9443 --iscsi-initiator iqn.1993-08.org.debian:01:node1\n  rosetctl "
      "--node-id worker-2 node register -o json");
  registration->callback([&globals, &action, register_options] {
    action = [&globals, register_options] { return run_node_register(globals, *register_options); };
  });

  CLI::App* list = node.add_subcommand("list", "List the nodes registered with the controller");
  list->footer(
      "Without --controller: this host's own registry. On a node host (one whose serve runs\n"
      "with --controller) a note on stderr, in JSON output too, names its controller.\n\n"
      "Example:\n  rosetctl node list -o json");
  list->callback([&globals, &action] { action = [&globals] { return run_node_list(globals); }; });

  auto show_options = std::make_shared<NodeOptions>();
  CLI::App* show = node.add_subcommand("show", "Show one registered node");
  add_node_argument(show, show_options.get());
  show->footer(
      "Exit code 3 when the node is not registered.\n\nExample:\n  rosetctl node show worker-2");
  show->callback([&globals, &action, show_options] {
    action = [&globals, show_options] { return run_node_show(globals, *show_options); };
  });

  auto remove_options = std::make_shared<NodeOptions>();
  CLI::App* remove = node.add_subcommand("remove", "Remove a node from the controller's registry");
  add_node_argument(remove, remove_options.get());
  remove->add_flag("--force", remove_options->force,
                   "Remove it although volumes are mapped to it (they stay mapped)");
  remove->add_flag("--revoke", remove_options->revoke,
                   "Also refuse, from now on, every certificate of the node issued until now");
  remove->footer(
      "Refused (exit code 5) while volumes are mapped to the node, naming them: unmap them\n"
      "first (rosetctl volume unmap VOLUME --node ID) or pass --force. Removing a node that is\n"
      "not registered succeeds and says so. A removed node can register again with its\n"
      "certificate, unless --revoke: then the controller refuses every call made with a\n"
      "certificate of that node issued until now (a stolen key, a retired host), and the node\n"
      "needs a new certificate, issued at least 5 minutes later (rosetctl backdates\n"
      "certificates by 5 minutes against clock skew; `rosetctl tls issue ID --force`, or its\n"
      "next enrollment). Revoking a node that is not registered works too.\n\n"
      "Examples:\n  rosetctl node remove worker-2\n  rosetctl node remove worker-2 --force\n"
      "  rosetctl node remove worker-2 --revoke");
  remove->callback([&globals, &action, remove_options] {
    action = [&globals, remove_options] { return run_node_remove(globals, *remove_options); };
  });

  setup_node_cordon(node, globals, action);
  setup_node_drain(node, globals, action);
}

}  // namespace rosetctl::cli
