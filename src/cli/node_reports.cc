// Asking the registered nodes, in parallel, each with a short deadline.
#include "cli/node_reports.h"

#include <chrono>
#include <future>
#include <set>

namespace rosetctl::cli {
namespace {

// Long enough for a node across a WAN; short enough that a node that is down does not hold up
// a `volume list` for long (all nodes are asked at once).
constexpr auto kNodeDeadline = std::chrono::seconds(5);

}  // namespace

Expected<NodeReports> ask_registered_nodes(Session& session, const std::string& asked,
                                           const std::vector<std::string>& volume_ids) {
  NodeReports reports;
  v1::ListNodesResponse nodes;
  ROSETCTL_RETURN_IF_ERROR(session.client().registry(&v1::Registry::Stub::ListNodes,
                                                     v1::ListNodesRequest(), &nodes,
                                                     /*patient=*/false));
  bool remote = !session.client().controller_address().empty();
  std::map<std::string, std::future<Expected<v1::GetNodeVolumesResponse>>> calls;
  for (const v1::Node& node : nodes.nodes()) {
    if (node.node_id() == asked) continue;
    if (!remote) {
      reports.unreachable[node.node_id()] =
          "not asked: only a CLI with --controller asks the registered nodes";
    } else if (node.address().empty()) {
      reports.unreachable[node.node_id()] =
          "registered no address (its serve runs without --listen)";
    } else {
      calls[node.node_id()] = std::async(std::launch::async, [&session, &volume_ids, node] {
        v1::GetNodeVolumesRequest request;
        request.set_node_id(node.node_id());
        for (const std::string& id : volume_ids)
          request.add_volume_ids(id);
        v1::GetNodeVolumesResponse response;
        Status status =
            session.client().node_state_of(node.node_id(), &v1::NodeState::Stub::GetNodeVolumes,
                                           request, &response, kNodeDeadline);
        if (status.is_ok() && response.volumes_size() != request.volume_ids_size()) {
          status = error(Code::kInternal, "answered {} volumes for {}", response.volumes_size(),
                         request.volume_ids_size());
        }
        if (!status) return Expected<v1::GetNodeVolumesResponse>(status);
        return Expected<v1::GetNodeVolumesResponse>(std::move(response));
      });
    }
  }
  for (auto& [node, call] : calls) {
    Expected<v1::GetNodeVolumesResponse> answer = call.get();
    if (!answer) {
      reports.unreachable[node] = answer.status().message();
      continue;
    }
    reports.answered[node].assign(answer->volumes().begin(), answer->volumes().end());
  }
  return reports;
}

nlohmann::json nodes_json(const std::vector<std::string>& published_nodes,
                          const std::map<std::string, const v1::NodeVolume*>& reported) {
  std::set<std::string> mapped(published_nodes.begin(), published_nodes.end());
  std::set<std::string> listed = mapped;
  for (const auto& [node, volume] : reported) {
    if (volume->publications_size() > 0 || volume->stagings_size() > 0) listed.insert(node);
  }
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& node : listed) {
    nlohmann::json entry = {{"node", node}, {"mapped", mapped.contains(node)}};
    auto found = reported.find(node);
    if (found == reported.end()) {
      // Mapped, but not asked or not answering: where it is connected is not known.
      entry["connections"] = nullptr;
      entry["staged"] = nullptr;
    } else {
      entry["connections"] = nlohmann::json::array();
      for (const v1::NodePublication& publication : found->second->publications())
        entry["connections"].push_back(publication.target_path());
      entry["staged"] = found->second->stagings_size() > 0;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

nlohmann::json unreachable_json(const std::map<std::string, std::string>& unreachable) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [node, reason] : unreachable)
    out.push_back({{"node", node}, {"reason", reason}});
  return out;
}

}  // namespace rosetctl::cli
