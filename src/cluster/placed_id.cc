// Encoding and decoding of placed ids and combined-list tokens (see placed_id.h).
#include "cluster/placed_id.h"

#include <fmt/format.h>

#include <charconv>

#include "core/validate.h"

namespace rosetctl {
namespace {

// "<len>.<node>.<rest>" -> {node, rest}; nullopt when `text` has not that shape.
std::optional<std::pair<std::string, std::string>> split_counted(std::string_view text) {
  size_t dot = text.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 3) return std::nullopt;
  size_t length = 0;
  auto [end, failure] = std::from_chars(text.data(), text.data() + dot, length);
  if (failure != std::errc() || end != text.data() + dot || text[0] == '0') return std::nullopt;
  std::string_view rest = text.substr(dot + 1);
  if (length == 0 || rest.size() < length + 1 || rest[length] != '.') return std::nullopt;
  return std::pair{std::string(rest.substr(0, length)), std::string(rest.substr(length + 1))};
}

}  // namespace

Expected<std::string> encode_placed_id(std::string_view node, std::string_view local_id) {
  std::string id = fmt::format("n{}.{}.{}", node.size(), node, local_id);
  if (id.size() > kMaxNameBytes) {
    size_t room = kMaxNameBytes - (id.size() - node.size());
    return error(Code::kInvalidArgument,
                 "node id {} is {} bytes: the id of {} on it would be {} bytes, over the {} CSI "
                 "recommends; give that node an id of at most {} bytes (serve --node-id)",
                 display_quoted(node, 200), node.size(), display_quoted(local_id, 128), id.size(),
                 kMaxNameBytes, room);
  }
  return id;
}

std::optional<PlacedId> decode_placed_id(std::string_view id) {
  if (id.size() < 2 || id[0] != 'n') return std::nullopt;
  auto parts = split_counted(id.substr(1));
  if (!parts || parts->second.empty()) return std::nullopt;
  if (!validate_node_id(parts->first, "node") || !validate_id(parts->second, "id"))
    return std::nullopt;
  return PlacedId{std::move(parts->first), std::move(parts->second)};
}

std::string encode_list_token(const ListPosition& position) {
  return fmt::format("{}.{}.{}", position.node.size(), position.node, position.token);
}

std::optional<ListPosition> decode_list_token(std::string_view token) {
  auto parts = split_counted(token);
  if (!parts || !validate_node_id(parts->first, "node")) return std::nullopt;
  return ListPosition{std::move(parts->first), std::move(parts->second)};
}

}  // namespace rosetctl
