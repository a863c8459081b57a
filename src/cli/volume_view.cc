// Building and laying out the volume model.
#include "cli/volume_view.h"

#include "cli/node_reports.h"
#include "cluster/replica_schedule.h"
#include "core/clock.h"
#include "core/map_lookup.h"
#include "core/size.h"
#include "daemon/convert.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {
namespace {

std::string join_targets(const nlohmann::json& connections) {
  std::string out;
  for (const auto& connection : connections) {
    if (!out.empty()) out += ", ";
    out += connection["target"].get<std::string>();
    if (connection["readonly"].get<bool>()) out += " (ro)";
  }
  return out.empty() ? "-" : out;
}

std::string join_stagings(const nlohmann::json& stagings) {
  std::string out;
  for (const auto& staging : stagings)
    out += (out.empty() ? "" : ", ") + staging["path"].get<std::string>();
  return out.empty() ? "-" : out;
}

// Not size_cell: snapshot_view.cc has one, and a unity batch that holds both files would make
// the name an overload set that a Column cannot take.
std::string capacity_cell(const nlohmann::json& volume) {
  int64_t bytes = volume["capacity_bytes"].get<int64_t>();
  if (bytes == 0) return "-";
  std::string size = format_size(bytes);
  return volume["size_enforced"].get<bool>() ? size : size + " (not enforced)";
}

// "dir", "image (ext4)", "image (block)".
std::string type_cell(const nlohmann::json& volume) {
  std::string type = text_of(volume["type"]);
  if (volume["access_type"] == "block") return type + " (block)";
  if (volume["fs"].is_string())
    return fmt::format("{} ({})", type, volume["fs"].get<std::string>());
  return type;
}

std::string condition_cell(const nlohmann::json& volume) {
  const auto& condition = volume["condition"];
  return condition["abnormal"].get<bool>() ? "abnormal: " + condition["message"].get<std::string>()
                                           : "ok";
}

// "directIO=false", or "-" when none is set.
std::string parameters_cell(const nlohmann::json& volume) {
  std::string out;
  for (const auto& [key, value] : volume["mutable_parameters"].items())
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", key, value.get<std::string>());
  return out.empty() ? "-" : out;
}

// `volume show`'s replica (volume replicate): "on node "b" every 10m; last 2026-...: n...
// (1.0 MiB sent); last error 2026-...: ...", "-" when it has none (or it was not asked).
std::string replica_cell(const nlohmann::json& volume) {
  if (!volume.contains("replica") || volume["replica"].is_null()) return "-";
  const auto& replica = volume["replica"];
  std::string out = fmt::format("on node \"{}\" every {}", replica["to_node"].get<std::string>(),
                                replica["every"].get<std::string>());
  if (replica["last_success"].is_null()) {
    out += "; no round done yet";
  } else {
    out += fmt::format("; last {}: {} ({} bytes sent)", replica["last_success"].get<std::string>(),
                       replica["snapshot_id"].get<std::string>(),
                       replica["last_bytes_sent"].get<int64_t>());
  }
  if (!replica["last_error_at"].is_null()) {
    out += fmt::format("; last error {}: {}", replica["last_error_at"].get<std::string>(),
                       replica["last_error"].get<std::string>());
  }
  return out;
}

// "consumer-b: /mnt/a, /mnt/b; consumer-c (staged)", "-" when connected nowhere asked.
std::string connected_on_cell(const nlohmann::json& volume) {
  std::string out;
  for (const auto& node : volume["nodes"]) {
    if (node["connections"].is_null() || (node["connections"].empty() && node["staged"] != true))
      continue;
    std::string targets;
    for (const auto& target : node["connections"])
      targets += (targets.empty() ? "" : ", ") + target.get<std::string>();
    out += fmt::format("{}{}{}", out.empty() ? "" : "; ", node["node"].get<std::string>(),
                       targets.empty() ? " (staged)" : ": " + targets);
  }
  return out.empty() ? "-" : out;
}

// The same, for the list's column: node names only.
std::string connected_nodes_cell(const nlohmann::json& volume) {
  std::string out;
  for (const auto& node : volume["nodes"]) {
    if (node["connections"].is_null() || node["connections"].empty()) continue;
    out += (out.empty() ? "" : ", ") + node["node"].get<std::string>();
  }
  return out.empty() ? "-" : out;
}

std::string unreachable_cell(const nlohmann::json& volume) {
  std::string out;
  for (const auto& node : volume["unreachable_nodes"])
    out += (out.empty() ? "" : "; ") + node["node"].get<std::string>() + " (" +
           node["reason"].get<std::string>() + ")";
  return out.empty() ? "-" : out;
}

}  // namespace

namespace {

nlohmann::json condition_json(const std::string& problem) {
  return {{"abnormal", !problem.empty()}, {"message", problem}};
}

nlohmann::json condition_json(const v1::MountCondition& condition) {
  return {{"abnormal", condition.abnormal()}, {"message", condition.message()}};
}

nlohmann::json volume_json(const VolumeInfo& info, const v1::NodeVolume& node,
                           const std::map<std::string, std::string>& mutable_parameters) {
  const csi::v1::Volume& volume = info.volume;
  std::string type = value_or_empty(volume.volume_context(), kContextType);
  nlohmann::json out = {
      {"id", volume.volume_id()},
      {"name", value_or_empty(volume.volume_context(), kContextName)},
      {"provider", value_or_empty(volume.volume_context(), kContextProvider)},
      {"type", type},
      {"access_type", is_block_volume(volume) ? "block" : "mount"},
      {"fs", value_or_empty(volume.volume_context(), kContextFilesystem).empty()
                 ? nlohmann::json(nullptr)
                 : nlohmann::json(value_or_empty(volume.volume_context(), kContextFilesystem))},
      {"capacity_bytes", volume.capacity_bytes()},
      {"size", volume.capacity_bytes() > 0 ? nlohmann::json(format_size(volume.capacity_bytes()))
                                           : nlohmann::json(nullptr)},
      // Directory volumes record the requested size but cannot enforce it.
      {"size_enforced", type != "dir" && !type.empty()},
      {"published_nodes", info.published_nodes},
      {"connections", nlohmann::json::array()},
      {"stagings", nlohmann::json::array()},
      {"condition", {{"abnormal", info.abnormal}, {"message", info.condition}}},
      {"context", nlohmann::json(std::map<std::string, std::string>(
                      volume.volume_context().begin(), volume.volume_context().end()))},
      {"mutable_parameters", nlohmann::json(mutable_parameters)},
  };
  // The volume's own condition first; else the first thing wrong with its mounts here.
  std::string first_problem;
  for (const v1::NodePublication& connection : node.publications()) {
    out["connections"].push_back({{"target", connection.target_path()},
                                  {"staging_path", connection.staging_path()},
                                  {"readonly", connection.readonly()},
                                  {"condition", condition_json(connection.condition())}});
    if (first_problem.empty()) first_problem = connection.condition().message();
  }
  for (const v1::NodeStaging& staging : node.stagings()) {
    out["stagings"].push_back(
        {{"path", staging.staging_path()}, {"condition", condition_json(staging.condition())}});
    if (first_problem.empty()) first_problem = staging.condition().message();
  }
  if (!info.abnormal && !first_problem.empty()) out["condition"] = condition_json(first_problem);
  return out;
}

}  // namespace

nlohmann::json volume_replica_json(const v1::VolumeReplica& replica) {
  auto time_or_null = [](int64_t unix) {
    return unix == 0 ? nlohmann::json(nullptr) : nlohmann::json(utc_time_text(unix));
  };
  return {{"to_node", replica.to_node()},
          {"every", replica::every_text(replica.every_seconds())},
          {"every_seconds", replica.every_seconds()},
          {"snapshot_id", replica.snapshot_id()},
          {"last_success", time_or_null(replica.last_success_unix())},
          {"last_bytes_sent", replica.last_bytes_sent()},
          {"rounds", replica.rounds()},
          {"last_error", replica.last_error()},
          {"last_error_at", time_or_null(replica.last_error_unix())},
          {"next_due", time_or_null(replica.next_due_unix())}};
}

Expected<VolumeParameters> fetch_volume_parameters(Session& session,
                                                   const std::vector<VolumeInfo>& infos) {
  // What the controller records beside CSI's Volume, in one call for all of them.
  v1::GetVolumeDetailsRequest request;
  for (const VolumeInfo& info : infos)
    request.add_volume_ids(info.volume.volume_id());
  v1::GetVolumeDetailsResponse response;
  if (!infos.empty()) {
    ROSETCTL_RETURN_IF_ERROR(
        session.client().catalog(&v1::Catalog::Stub::GetVolumeDetails, request, &response));
  }
  VolumeParameters parameters;
  for (const v1::VolumeDetails& details : response.volumes())
    parameters[details.volume_id()] = details;
  return parameters;
}

Expected<std::vector<nlohmann::json>> describe_volumes(Session& session,
                                                       const std::vector<VolumeInfo>& infos,
                                                       NodesAsked asked) {
  auto parameters = fetch_volume_parameters(session, infos);
  if (!parameters) return parameters.status();
  return describe_volumes(session, infos, *parameters, asked);
}

Expected<std::vector<nlohmann::json>> describe_volumes(Session& session,
                                                       const std::vector<VolumeInfo>& infos,
                                                       const VolumeParameters& parameters,
                                                       NodesAsked asked) {
  // Where the volumes are mounted on the node that node calls reach, asked of that node.
  std::vector<std::string> ids;
  for (const VolumeInfo& info : infos)
    ids.push_back(info.volume.volume_id());
  auto on_node = volumes_on_node(session, ids);
  if (!on_node) return on_node.status();
  // And on every other registered node (seed 001's combined list), each asked once.
  NodeReports reports;
  if (asked == NodesAsked::kEveryNode) {
    auto answers = ask_registered_nodes(session, session.node_id(), ids);
    if (!answers) return answers.status();
    reports = std::move(*answers);
  }
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < infos.size(); ++i) {
    const VolumeInfo& info = infos[i];
    auto found = parameters.find(info.volume.volume_id());
    bool recorded = found != parameters.end();
    out.push_back(volume_json(info, (*on_node)[i],
                              recorded ? to_map(found->second.mutable_parameters())
                                       : std::map<std::string, std::string>()));
    out.back()["replica"] = recorded && found->second.has_replica()
                                ? volume_replica_json(found->second.replica())
                                : nlohmann::json(nullptr);
    std::map<std::string, const v1::NodeVolume*> reported = {{session.node_id(), &(*on_node)[i]}};
    for (const auto& [node, volumes] : reports.answered)
      reported[node] = &volumes[i];
    // A node it is mapped to that was not asked is named too: its connections are not known.
    std::map<std::string, std::string> unreachable = reports.unreachable;
    for (const std::string& node : info.published_nodes) {
      if (reported.contains(node) || unreachable.contains(node)) continue;
      unreachable[node] = asked == NodesAsked::kEveryNode
                              ? "not registered with the controller (rosetctl node list)"
                              : "not asked: only `volume list` and `volume show` ask other nodes";
    }
    out.back()["nodes"] = nodes_json(info.published_nodes, reported);
    out.back()["unreachable_nodes"] = unreachable_json(unreachable);
  }
  return out;
}

Expected<nlohmann::json> describe_volume(Session& session, const VolumeInfo& info,
                                         const VolumeParameters& parameters) {
  auto described = describe_volumes(session, {info}, parameters);
  if (!described) return described.status();
  return std::move(described->front());
}

Expected<nlohmann::json> describe_volume(Session& session, const VolumeInfo& info,
                                         NodesAsked asked) {
  auto described = describe_volumes(session, {info}, asked);
  if (!described) return described.status();
  return std::move(described->front());
}

std::vector<Column> volume_fields() {
  return {
      {"ID", [](const nlohmann::json& v) { return text_of(v["id"]); }},
      {"Name", [](const nlohmann::json& v) { return text_of(v["name"]); }},
      {"Provider", [](const nlohmann::json& v) { return text_of(v["provider"]); }},
      {"Type", type_cell},
      {"Size", capacity_cell},
      {"Published to",
       [](const nlohmann::json& v) {
         std::string nodes;
         for (const auto& node : v["published_nodes"])
           nodes += (nodes.empty() ? "" : ", ") + node.get<std::string>();
         return nodes.empty() ? std::string("-") : nodes;
       }},
      {"Connected at", [](const nlohmann::json& v) { return join_targets(v["connections"]); }},
      {"Staged at", [](const nlohmann::json& v) { return join_stagings(v["stagings"]); }},
      {"Connected on", connected_on_cell},
      {"Not asked", unreachable_cell},
      {"Condition", condition_cell},
      {"Mutable parameters", parameters_cell},
      {"Replica", replica_cell},
  };
}

std::vector<Column> volume_columns() {
  return {
      {"NAME", [](const nlohmann::json& v) { return text_of(v["name"]); }},
      {"ID", [](const nlohmann::json& v) { return text_of(v["id"]); }},
      {"PROVIDER", [](const nlohmann::json& v) { return text_of(v["provider"]); }},
      {"SIZE", capacity_cell},
      {"CONNECTED AT", [](const nlohmann::json& v) { return join_targets(v["connections"]); }},
      {"CONNECTED ON", connected_nodes_cell},
      {"CONDITION", condition_cell},
  };
}

}  // namespace rosetctl::cli
