// NodeGetInfo, GetPluginInfo + capabilities, and Probe, rendered.
#include "cli/info_cmd.h"

#include "cli/render.h"
#include "cli/session.h"

namespace rosetctl::cli {
namespace {

Status run_node_info(const GlobalOptions& globals) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  csi::v1::NodeGetInfoResponse info;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().node(&csi::v1::Node::Stub::NodeGetInfo,
                                                     csi::v1::NodeGetInfoRequest(), &info));
  nlohmann::json out = {{"node_id", info.node_id()},
                        {"max_volumes_per_node", info.max_volumes_per_node()},
                        {"topology", std::map<std::string, std::string>(
                                         info.accessible_topology().segments().begin(),
                                         info.accessible_topology().segments().end())}};
  print_object(
      globals.output, out,
      {{"Node id", [](const nlohmann::json& v) { return text_of(v["node_id"]); }},
       {"Max volumes", [](const nlohmann::json& v) { return text_of(v["max_volumes_per_node"]); }},
       {"Topology", [](const nlohmann::json& v) { return v["topology"].dump(); }}});
  return Status::ok();
}

Status run_plugin_info(const GlobalOptions& globals) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  CsiClient& client = (*session)->client();
  csi::v1::GetPluginInfoResponse info;
  ROSETCTL_RETURN_IF_ERROR(client.identity(&csi::v1::Identity::Stub::GetPluginInfo,
                                           csi::v1::GetPluginInfoRequest(), &info));
  csi::v1::GetPluginCapabilitiesResponse plugin_caps;
  ROSETCTL_RETURN_IF_ERROR(client.identity(&csi::v1::Identity::Stub::GetPluginCapabilities,
                                           csi::v1::GetPluginCapabilitiesRequest(), &plugin_caps));
  csi::v1::ControllerGetCapabilitiesResponse controller_caps;
  ROSETCTL_RETURN_IF_ERROR(client.controller(&csi::v1::Controller::Stub::ControllerGetCapabilities,
                                             csi::v1::ControllerGetCapabilitiesRequest(),
                                             &controller_caps));
  csi::v1::NodeGetCapabilitiesResponse node_caps;
  ROSETCTL_RETURN_IF_ERROR(client.node(&csi::v1::Node::Stub::NodeGetCapabilities,
                                       csi::v1::NodeGetCapabilitiesRequest(), &node_caps));

  nlohmann::json out = {{"name", info.name()},
                        {"version", info.vendor_version()},
                        {"manifest", std::map<std::string, std::string>(info.manifest().begin(),
                                                                        info.manifest().end())},
                        {"plugin_capabilities", nlohmann::json::array()},
                        {"controller_capabilities", nlohmann::json::array()},
                        {"node_capabilities", nlohmann::json::array()}};
  for (const auto& capability : plugin_caps.capabilities()) {
    out["plugin_capabilities"].push_back(
        capability.has_service()
            ? csi::v1::PluginCapability::Service::Type_Name(capability.service().type())
            : "VOLUME_EXPANSION_" + csi::v1::PluginCapability::VolumeExpansion::Type_Name(
                                        capability.volume_expansion().type()));
  }
  for (const auto& capability : controller_caps.capabilities()) {
    out["controller_capabilities"].push_back(
        csi::v1::ControllerServiceCapability::RPC::Type_Name(capability.rpc().type()));
  }
  for (const auto& capability : node_caps.capabilities()) {
    out["node_capabilities"].push_back(
        csi::v1::NodeServiceCapability::RPC::Type_Name(capability.rpc().type()));
  }
  auto joined = [](const char* key) {
    return [key](const nlohmann::json& v) {
      std::string text;
      for (const auto& item : v[key])
        text += (text.empty() ? "" : " ") + item.get<std::string>();
      return text;
    };
  };
  print_object(
      globals.output, out,
      {{"Name", [](const nlohmann::json& v) { return text_of(v["name"]); }},
       {"Version", [](const nlohmann::json& v) { return text_of(v["version"]); }},
       {"Git commit", [](const nlohmann::json& v) { return text_of(v["manifest"]["git_commit"]); }},
       {"Plugin", joined("plugin_capabilities")},
       {"Controller", joined("controller_capabilities")},
       {"Node", joined("node_capabilities")}});
  return Status::ok();
}

Status run_probe(const GlobalOptions& globals) {
  // A check must not build what it checks: a mistyped --state-dir is reported, not created.
  if (!state_exists(globals)) {
    print_line_or_json(globals.output, "not ready", {{"ready", false}});
    return error(Code::kUnavailable,
                 "no state in \"{}\" yet (the first `volume create`, or `serve`, makes it); is "
                 "--state-dir right?",
                 globals.state_dir);
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  csi::v1::ProbeResponse probe;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().identity(&csi::v1::Identity::Stub::Probe,
                                                         csi::v1::ProbeRequest(), &probe));
  bool ready = probe.has_ready() ? probe.ready().value() : true;
  print_line_or_json(globals.output, ready ? "ready" : "not ready", {{"ready", ready}});
  return ready ? Status::ok() : error(Code::kUnavailable, "the plugin is not ready yet");
}

}  // namespace

void setup_info(CLI::App& app, const GlobalOptions& globals, Action& action) {
  CLI::App* node = app.add_subcommand("node", "This node as the CSI Node service sees it");
  node->require_subcommand(1);
  node->add_subcommand("info", "Node id, volume limit and topology (NodeGetInfo)")
      ->callback([&globals, &action] { action = [&globals] { return run_node_info(globals); }; });

  CLI::App* plugin = app.add_subcommand("plugin", "The plugin's identity and capabilities");
  plugin->require_subcommand(1);
  plugin->add_subcommand("info", "Name, version and every advertised capability")
      ->callback([&globals, &action] { action = [&globals] { return run_plugin_info(globals); }; });

  app.add_subcommand("probe", "Check that the state store and providers are ready (Probe)")
      ->callback([&globals, &action] { action = [&globals] { return run_probe(globals); }; });
}

}  // namespace rosetctl::cli
