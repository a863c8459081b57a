// Statements and rows shared by the record families (queries.h).
#include "core/state_store/queries.h"

#include <nlohmann/json.hpp>

namespace rosetctl::state_sql {

Status run(Expected<sqlite::Statement> statement) {
  return statement ? statement->run() : statement.status();
}

std::string to_json(const StringMap& map) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [key, value] : map)
    object[key] = value;
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Expected<StringMap> from_json(const std::string& text, std::string_view column) {
  const nlohmann::json object = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  StringMap map;
  if (object.is_object()) {
    for (auto it = object.begin(); it != object.end(); ++it) {
      if (!it.value().is_string()) break;
      map.emplace(it.key(), it.value().get_ref<const std::string&>());
    }
    if (map.size() == object.size()) return map;
  }
  return error(Code::kDataLoss, "state database column {} is not a JSON object of strings: {}",
               column, text);
}

Expected<std::string> read_text(const sqlite::Statement& row) {
  return row.column_text(0);
}
Expected<int64_t> read_int64(const sqlite::Statement& row) {
  return row.column_int64(0);
}

RecordedMount read_recorded_mount(const sqlite::Statement& row, int first) {
  return RecordedMount{static_cast<uint64_t>(row.column_int64(first)),
                       static_cast<uint64_t>(row.column_int64(first + 1)),
                       MountFingerprint::from_text(row.column_text(first + 2))};
}

Expected<std::map<std::string, int64_t>> count_by_provider(sqlite::Connection& connection,
                                                           const char* sql) {
  using Row = std::pair<std::string, int64_t>;
  auto rows = select_all<Row>(prepare(connection, sql), [](const sqlite::Statement& row) {
    return Expected<Row>(Row{row.column_text(0), row.column_int64(1)});
  });
  if (!rows) return rows.status();
  return std::map<std::string, int64_t>(rows->begin(), rows->end());
}

// What still holds a volume, as phrases: `published to node "n1"`, `staged at "/p"`, ...
Expected<std::vector<std::string>> volume_users(sqlite::Connection& connection,
                                                std::string_view id) {
  return select_all<std::string>(
      prepare(connection,
              "SELECT 'published to node \"' || node_id || '\"' FROM controller_publications "
              "WHERE volume_id = ?1 "
              "UNION ALL SELECT 'staged at \"' || staging_path || '\"' FROM stagings "
              "WHERE volume_id = ?1 "
              "UNION ALL SELECT 'published at \"' || target_path || '\"' FROM node_publications "
              "WHERE volume_id = ?1",
              id),
      read_text);
}

}  // namespace rosetctl::state_sql
