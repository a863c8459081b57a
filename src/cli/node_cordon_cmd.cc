// `rosetctl node cordon NODE` / `node uncordon NODE`: whether the controller places new volumes
// on a node (Registry/CordonNode), as `kubectl cordon` is for pods. A cordoned node keeps its
// volumes and serves them (publish, snapshot, move off); only placement passes it by.
#include <cstdio>
#include <memory>

#include "cli/node_cmd.h"
#include "cli/session.h"
#include "core/validate.h"

namespace rosetctl::cli {

Expected<v1::CordonNodeResponse> set_cordon(Session& session, const std::string& node,
                                            bool cordoned) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(node, "node"));
  v1::CordonNodeRequest request;
  request.set_node_id(node);
  request.set_cordoned(cordoned);
  v1::CordonNodeResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().registry(&v1::Registry::Stub::CordonNode, request, &response));
  return response;
}

namespace {

struct CordonOptions {
  std::string node;
};

Status run_cordon(const GlobalOptions& globals, const CordonOptions& options, bool cordoned) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.node, "node"));
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto response = set_cordon(**session, options.node, cordoned);
  if (!response) {
    return with_only_this_host_hint(**session, response.status(), kOnlyThisRegistryHint);
  }
  nlohmann::json node = node_json(response->node());
  std::string said;
  if (cordoned) {
    said = response->changed()
               ? fmt::format(
                     "cordoned node \"{}\": no new volume is placed on it; its volumes "
                     "stay and work (rosetctl node uncordon {} puts it back)",
                     options.node, options.node)
               : fmt::format("node \"{}\" was cordoned already, since {}", options.node,
                             node["cordoned_at"].get<std::string>());
  } else {
    said = response->changed()
               ? fmt::format("uncordoned node \"{}\": new volumes may be placed on it again",
                             options.node)
               : fmt::format("node \"{}\" was not cordoned; nothing to do", options.node);
  }
  print_line_or_json(globals.output, said,
                     {{"node_id", options.node},
                      {"cordoned", cordoned},
                      {"changed", response->changed()},
                      {"cordoned_at", node["cordoned_at"]},
                      {"node", node}});
  return Status::ok();
}

}  // namespace

void setup_node_cordon(CLI::App& node, const GlobalOptions& globals, Action& action) {
  auto cordon_options = std::make_shared<CordonOptions>();
  CLI::App* cordon = node.add_subcommand(
      "cordon", "Stop placing new volumes on a node (its volumes stay and work); admin only");
  cordon->add_option("node", cordon_options->node, "The registered node (as `node list` shows)")
      ->required();
  cordon->footer(
      "Like `kubectl cordon`: the controller places no new volume on a cordoned node. A\n"
      "CreateVolume whose topology allows other nodes goes to the next one it allows; one that\n"
      "allows only cordoned nodes (`volume create --node NODE`, a restore or move onto it, a\n"
      "restore from a snapshot held there without --node) fails with RESOURCE_EXHAUSTED (exit\n"
      "code 8) naming the node. Everything else goes on: the node's volumes publish, unpublish,\n"
      "snapshot, grow and move off. `node list` and `node show` say whether a node is cordoned\n"
      "and since when; a node's registration (its heartbeat) never clears it.\n\n"
      "`node drain` cordons the node first and leaves it cordoned: uncordon it once its\n"
      "maintenance is over. Cordoning a cordoned node is safe (it keeps the first time). An\n"
      "admin's: refused (PERMISSION_DENIED) with a node certificate. The controller's own node\n"
      "is never registered and cannot be cordoned.\n\n"
      "Examples:\n  rosetctl --controller ctl:9443 node cordon node-a\n"
      "  rosetctl node cordon node-a -o json");
  cordon->callback([&globals, &action, cordon_options] {
    action = [&globals, cordon_options] { return run_cordon(globals, *cordon_options, true); };
  });

  auto uncordon_options = std::make_shared<CordonOptions>();
  CLI::App* uncordon =
      node.add_subcommand("uncordon", "Place new volumes on a cordoned node again; admin only");
  uncordon->add_option("node", uncordon_options->node, "The registered node (as `node list` shows)")
      ->required();
  uncordon->footer(
      "Undoes `rosetctl node cordon` (and the cordon `node drain` leaves): the controller may\n"
      "place new volumes on the node again. Uncordoning a node that is not cordoned is safe.\n"
      "Exit code 3 when the node is not registered.\n\n"
      "Example:\n  rosetctl --controller ctl:9443 node uncordon node-a -o json");
  uncordon->callback([&globals, &action, uncordon_options] {
    action = [&globals, uncordon_options] { return run_cordon(globals, *uncordon_options, false); };
  });
}

}  // namespace rosetctl::cli
