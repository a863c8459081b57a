// NodeGetInfo, GetPluginInfo + capabilities, and Probe, rendered.
#include "cli/info_cmd.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "cli/node_cmd.h"
#include "cli/render.h"
#include "cli/session.h"
#include "core/remove_tree.h"

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

// A state directory that lives only as long as one probe: the providers can then be asked
// without building a tree at a --state-dir that has none (most likely a mistyped one).
class ScratchState {
 public:
  static Expected<ScratchState> make() {
    std::string path = std::filesystem::temp_directory_path() / "rosetctl-probe-XXXXXX";
    if (::mkdtemp(path.data()) == nullptr) {
      return errno_status(errno, "cannot make a scratch state directory for the probe");
    }
    return ScratchState(std::move(path));
  }
  ScratchState(ScratchState&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ScratchState& operator=(ScratchState&&) = delete;
  ~ScratchState() {
    if (!path_.empty()) (void)remove_tree(path_);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchState(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

Status run_probe(const GlobalOptions& globals) {
  // Declared before the session, so it goes after the plugin using it is closed.
  std::optional<ScratchState> scratch;
  GlobalOptions options = globals;
  if (!state_exists(globals)) {
    auto made = ScratchState::make();
    if (!made) return made.status();
    scratch.emplace(std::move(*made));
    options.state_dir = scratch->path();
  }
  auto session = Session::open(options);
  if (!session) return session.status();
  csi::v1::ProbeResponse probe;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().identity(&csi::v1::Identity::Stub::Probe,
                                                         csi::v1::ProbeRequest(), &probe));
  bool ready = probe.has_ready() ? probe.ready().value() : true;
  if (scratch) {
    std::fprintf(stderr,
                 "rosetctl: note: no state in \"%s\" yet (the first `volume create`, or `serve`, "
                 "makes it); the providers were checked without it\n",
                 globals.state_dir.c_str());
  }
  print_line_or_json(globals.output, ready ? "ready" : "not ready", {{"ready", ready}});
  return ready ? Status::ok() : error(Code::kUnavailable, "the plugin is not ready yet");
}

}  // namespace

void setup_info(CLI::App& app, const GlobalOptions& globals, Action& action) {
  CLI::App* node = app.add_subcommand(
      "node", "This node (NodeGetInfo) and the nodes registered with the controller");
  node->require_subcommand(1);
  node->add_subcommand("info", "Node id, volume limit and topology (NodeGetInfo)")
      ->callback([&globals, &action] { action = [&globals] { return run_node_info(globals); }; });
  setup_node_registry(*node, globals, action);

  CLI::App* plugin = app.add_subcommand("plugin", "The plugin's identity and capabilities");
  plugin->require_subcommand(1);
  plugin->add_subcommand("info", "Name, version and every advertised capability")
      ->callback([&globals, &action] { action = [&globals] { return run_plugin_info(globals); }; });

  app.add_subcommand("probe", "Check that the state store and providers are ready (Probe)")
      ->callback([&globals, &action] { action = [&globals] { return run_probe(globals); }; });
}

}  // namespace rosetctl::cli
