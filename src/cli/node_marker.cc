// The node record of a state directory: two "key=value" lines, written by serve, read by the CLI.
#include "cli/node_marker.h"

#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "core/log.h"
#include "core/private_file.h"
#include "core/validate.h"
#include "daemon/server.h"

namespace rosetctl::cli {
namespace {

constexpr size_t kMaxMarkerBytes = 1024;  // two short lines; anything larger is not ours

std::string marker_path(const std::string& state_dir) {
  return state_dir + "/node-of-controller";
}

Status parse_marker(const std::string& text, NodeMarker* marker) {
  std::istringstream lines(text);
  std::string line;
  bool id = false, controller = false;
  while (std::getline(lines, line)) {
    auto equals = line.find('=');
    std::string key = line.substr(0, equals);
    std::string value = equals == std::string::npos ? "" : line.substr(equals + 1);
    if (key == "node_id" && !id) {
      marker->node_id = value;
      id = true;
    } else if (key == "controller" && !controller) {
      marker->controller = value;
      controller = true;
    } else {
      return error(Code::kInvalidArgument, "unexpected or repeated line");
    }
  }
  if (!id || !controller) return error(Code::kInvalidArgument, "node_id or controller missing");
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(marker->node_id, "node_id"));
  return check_tcp_address(marker->controller, "controller", /*port_zero_ok=*/false);
}

}  // namespace

Status write_node_marker(const std::string& state_dir, const NodeMarker& marker) {
  return write_private_file(marker_path(state_dir), fmt::format("node_id={}\ncontroller={}\n",
                                                                marker.node_id, marker.controller));
}

Status remove_node_marker(const std::string& state_dir) {
  std::string path = marker_path(state_dir);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return errno_status(errno, fmt::format("cannot remove \"{}\"", path));
  return Status::ok();
}

std::optional<NodeMarker> read_node_marker(const std::string& state_dir) {
  std::string path = marker_path(state_dir);
  auto text = read_private_file(path, "the node record", kMaxMarkerBytes);
  if (!text) {
    if (text.status().code() != Code::kNotFound)
      spdlog::debug("ignoring \"{}\": {}", path, escape_text(text.status().message()));
    return std::nullopt;
  }
  NodeMarker marker;
  if (Status parsed = parse_marker(*text, &marker); !parsed) {
    spdlog::debug("ignoring \"{}\": {}", path, escape_text(parsed.message()));
    return std::nullopt;
  }
  return marker;
}

}  // namespace rosetctl::cli
