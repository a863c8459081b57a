// Building and laying out the snapshot model.
#include "cli/snapshot_view.h"

#include <time.h>

#include "cli/terminal_progress.h"
#include "cluster/placed_id.h"
#include "core/clock.h"
#include "core/map_lookup.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {
namespace {

constexpr std::size_t kShortId = 12;
constexpr std::size_t kMessageColumn = 40;

// One line of printable text: control characters become spaces.
std::string one_line(std::string text, std::size_t limit) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (limit > 0 && text.size() > limit) text = text.substr(0, limit - 3) + "...";
  return text;
}

std::string size_cell(const nlohmann::json& snapshot, const char* field) {
  return approximate_size(snapshot[field].get<int64_t>());
}

}  // namespace

std::string format_time_ns(int64_t ns) {
  return utc_time_text(ns / 1'000'000'000);
}

std::string display_path(std::string_view path) {
  if (path.empty()) return ".";
  std::string out;
  bool quote = false;
  for (char ch : path) {
    auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '\n':
        out += "\\n";
        quote = true;
        continue;
      case '\t':
        out += "\\t";
        quote = true;
        continue;
      case '"':
      case '\\':
        out += '\\';
        out += ch;
        quote = true;
        continue;
      case ' ':
        quote = true;
        break;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
      quote = true;
    } else {
      out += ch;
    }
  }
  return quote ? "\"" + out + "\"" : out;
}

namespace {

std::string node_cell(const nlohmann::json& snapshot) {
  return snapshot["node"].is_null() ? std::string("(controller host)") : text_of(snapshot["node"]);
}

}  // namespace

nlohmann::json snapshot_json(const SnapshotRecord& record) {
  auto or_null = [](const std::string& text) {
    return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
  };
  // Where this copy is: the node its placed id names; null for the controller host's own (this
  // host's, without --controller). A snapshot pulled to another node is a copy there.
  auto placed = decode_placed_id(record.id);
  return {
      {"id", record.id},
      {"node", placed ? nlohmann::json(placed->node) : nlohmann::json(nullptr)},
      {"commit", or_null(record.commit_id)},
      {"name", record.name},
      {"volume_id", record.source_volume_id},
      {"volume_name", record.source_volume_name},
      {"provider", record.provider},
      {"parent",
       record.parent_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(record.parent_id)},
      {"message", record.message},
      {"created_at", format_time_ns(record.created_at_ns)},
      {"created_at_ns", record.created_at_ns},
      {"ready", record.ready},
      {"failure", or_null(record.failure)},
      {"type", or_null(value_or_empty(record.context, kContextType))},
      {"access_type", or_null(value_or_empty(record.context, kContextAccess))},
      {"fs", or_null(value_or_empty(record.context, kContextFilesystem))},
      {"files", record.file_count},
      {"bytes", record.size_bytes},
      {"new_bytes", record.new_bytes},
  };
}

std::vector<Column> snapshot_fields() {
  return {
      {"ID", [](const nlohmann::json& s) { return text_of(s["id"]); }},
      {"Node", [](const nlohmann::json& s) { return node_cell(s); }},
      {"Commit", [](const nlohmann::json& s) { return text_of(s["commit"]); }},
      {"Name", [](const nlohmann::json& s) { return text_of(s["name"]); }},
      {"Volume",
       [](const nlohmann::json& s) {
         return fmt::format("{} ({})", text_of(s["volume_name"]), text_of(s["volume_id"]));
       }},
      {"Kind",
       [](const nlohmann::json& s) {
         if (s["type"].is_null()) return std::string("-");
         std::string kind = text_of(s["type"]);
         if (!s["access_type"].is_null() && text_of(s["access_type"]) == "block")
           kind += " (block)";
         if (!s["fs"].is_null()) kind += " (" + text_of(s["fs"]) + ")";
         return kind;
       }},
      {"Parent", [](const nlohmann::json& s) { return text_of(s["parent"]); }},
      {"Message", [](const nlohmann::json& s) { return one_line(text_of(s["message"]), 0); }},
      {"Created", [](const nlohmann::json& s) { return text_of(s["created_at"]); }},
      {"Ready",
       [](const nlohmann::json& s) {
         if (s["ready"].get<bool>()) return std::string("yes");
         return s["failure"].is_null() ? std::string("no (being taken)")
                                       : "no: failed: " + text_of(s["failure"]);
       }},
      {"Files", [](const nlohmann::json& s) { return text_of(s["files"]); }},
      {"Size",
       [](const nlohmann::json& s) {
         return fmt::format("{} ({} bytes)", size_cell(s, "bytes"), text_of(s["bytes"]));
       }},
      {"New data stored", [](const nlohmann::json& s) { return size_cell(s, "new_bytes"); }},
  };
}

std::vector<Column> snapshot_columns() {
  return {
      {"COMMIT",
       [](const nlohmann::json& s) {
         if (!s["ready"].get<bool>())
           return std::string(s["failure"].is_null() ? "(pending)" : "(failed)");
         return text_of(s["commit"]).substr(0, kShortId);
       }},
      {"ID", [](const nlohmann::json& s) { return text_of(s["id"]); }},
      {"NODE", [](const nlohmann::json& s) { return node_cell(s); }},
      {"VOLUME", [](const nlohmann::json& s) { return text_of(s["volume_name"]); }},
      {"MESSAGE",
       [](const nlohmann::json& s) { return one_line(text_of(s["message"]), kMessageColumn); }},
      {"CREATED", [](const nlohmann::json& s) { return text_of(s["created_at"]); }},
      {"FILES", [](const nlohmann::json& s) { return text_of(s["files"]); }},
      {"SIZE", [](const nlohmann::json& s) { return size_cell(s, "bytes"); }},
      {"NEW", [](const nlohmann::json& s) { return size_cell(s, "new_bytes"); }},
  };
}

}  // namespace rosetctl::cli
