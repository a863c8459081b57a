// Building and laying out the volume model.
#include "cli/volume_view.h"

#include "core/map_lookup.h"
#include "core/size.h"
#include "daemon/convert.h"

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

std::string size_cell(const nlohmann::json& volume) {
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

}  // namespace

nlohmann::json volume_json(const VolumeInfo& info, const std::vector<NodePublication>& connections,
                           const std::map<std::string, std::string>& mutable_parameters) {
  const csi::v1::Volume& volume = info.volume;
  std::string type = value_or_empty(volume.volume_context(), "type");
  nlohmann::json out = {
      {"id", volume.volume_id()},
      {"name", value_or_empty(volume.volume_context(), kContextName)},
      {"provider", value_or_empty(volume.volume_context(), kContextProvider)},
      {"type", type},
      {"access_type", is_block_volume(volume) ? "block" : "mount"},
      {"fs", value_or_empty(volume.volume_context(), "fs").empty()
                 ? nlohmann::json(nullptr)
                 : nlohmann::json(value_or_empty(volume.volume_context(), "fs"))},
      {"capacity_bytes", volume.capacity_bytes()},
      {"size", volume.capacity_bytes() > 0 ? nlohmann::json(format_size(volume.capacity_bytes()))
                                           : nlohmann::json(nullptr)},
      // Directory volumes record the requested size but cannot enforce it.
      {"size_enforced", type != "dir" && !type.empty()},
      {"published_nodes", info.published_nodes},
      {"connections", nlohmann::json::array()},
      {"condition", {{"abnormal", info.abnormal}, {"message", info.condition}}},
      {"context", nlohmann::json(std::map<std::string, std::string>(
                      volume.volume_context().begin(), volume.volume_context().end()))},
      {"mutable_parameters", nlohmann::json(mutable_parameters)},
  };
  for (const NodePublication& connection : connections) {
    out["connections"].push_back({{"target", connection.target_path},
                                  {"staging_path", connection.staging_path},
                                  {"readonly", connection.readonly}});
  }
  return out;
}

Expected<nlohmann::json> describe_volume(StateStore& store, const VolumeInfo& info) {
  const std::string& id = info.volume.volume_id();
  auto connections = store.node_publications(id);
  if (!connections) return connections.status();
  auto record = store.find_volume(id);
  if (!record) return record.status();
  return volume_json(
      info, *connections,
      record->has_value() ? (*record)->mutable_parameters : std::map<std::string, std::string>());
}

std::vector<Column> volume_fields() {
  return {
      {"ID", [](const nlohmann::json& v) { return text_of(v["id"]); }},
      {"Name", [](const nlohmann::json& v) { return text_of(v["name"]); }},
      {"Provider", [](const nlohmann::json& v) { return text_of(v["provider"]); }},
      {"Type", type_cell},
      {"Size", size_cell},
      {"Published to",
       [](const nlohmann::json& v) {
         std::string nodes;
         for (const auto& node : v["published_nodes"])
           nodes += (nodes.empty() ? "" : ", ") + node.get<std::string>();
         return nodes.empty() ? std::string("-") : nodes;
       }},
      {"Connected at", [](const nlohmann::json& v) { return join_targets(v["connections"]); }},
      {"Condition", condition_cell},
      {"Mutable parameters", parameters_cell},
  };
}

std::vector<Column> volume_columns() {
  return {
      {"NAME", [](const nlohmann::json& v) { return text_of(v["name"]); }},
      {"ID", [](const nlohmann::json& v) { return text_of(v["id"]); }},
      {"PROVIDER", [](const nlohmann::json& v) { return text_of(v["provider"]); }},
      {"SIZE", size_cell},
      {"CONNECTED AT", [](const nlohmann::json& v) { return join_targets(v["connections"]); }},
      {"CONDITION", condition_cell},
  };
}

}  // namespace rosetctl::cli
