// What a volume's condition says while it moves (`volume move`): the source node writes it
// (daemon/volume_moves.cc) and the CLI reads it back (cli/volume_move.cc), so that a move run
// again, or a `node drain`, knows where an earlier run left the volume without another RPC. One
// place for the wording, so the writer and the reader never drift apart.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>

namespace rosetctl {

struct MoveCondition {
  bool moved = false;  // false: paused
  std::string to_node;
  std::string new_volume_id;  // once moved
};

inline std::string paused_move_condition(std::string_view to_node) {
  return fmt::format("paused while it moves to node \"{}\"", to_node);
}

inline std::string moved_condition(std::string_view to_node, std::string_view new_volume_id) {
  return fmt::format("moved to node \"{}\" as {}; this is the old copy, kept until deleted",
                     to_node, new_volume_id);
}

// The move a condition message states, nullopt for any other message. Node and volume ids never
// hold a quote, a space or a semicolon (core/validate.h), so the fields end where they seem to.
inline std::optional<MoveCondition> parse_move_condition(std::string_view message) {
  constexpr std::string_view kPaused = "paused while it moves to node \"";
  constexpr std::string_view kMoved = "moved to node \"";
  MoveCondition found;
  std::string_view rest;
  if (message.starts_with(kPaused)) {
    rest = message.substr(kPaused.size());
  } else if (message.starts_with(kMoved)) {
    found.moved = true;
    rest = message.substr(kMoved.size());
  } else {
    return std::nullopt;
  }
  size_t quote = rest.find('"');
  if (quote == std::string_view::npos || quote == 0) return std::nullopt;
  found.to_node = std::string(rest.substr(0, quote));
  rest = rest.substr(quote + 1);
  if (!found.moved) return rest.empty() ? std::optional(found) : std::nullopt;
  constexpr std::string_view kAs = " as ";
  if (!rest.starts_with(kAs)) return std::nullopt;
  rest = rest.substr(kAs.size());
  size_t end = rest.find(';');
  if (end == std::string_view::npos || end == 0) return std::nullopt;
  found.new_volume_id = std::string(rest.substr(0, end));
  return found;
}

}  // namespace rosetctl
