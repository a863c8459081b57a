// `rosetctl node drain A [--to B]`: every volume of node A moved off it, one at a time, by the
// move of `volume move` (cli/volume_move.h), so that a drain is as resumable as a move: run it
// again after a kill and the volumes moved already are skipped (their old copies say where they
// went), a move a kill left half done is finished by the move's own resume, the rest are moved.
//
// Where each volume goes: --to B, else a registered node that shares A's topology (every
// segment but the node's own) with the most capacity left for the local provider, as its
// GetCapacity answers through the controller (the placement the controller routes by; the
// capacity this drain has given away already is counted). A volume the drain cannot move is
// refused with its reason, and the drain goes on: a roset volume (bound to no node) or an iscsi
// volume (it lives on the controller host) mapped to A, one in use without --wait-unpublished,
// one no node has room for.
//
// A drain cordons A first (Registry/CordonNode: the controller places no new volume there, so
// none lands on A behind the drain) and leaves it cordoned: the operator uncordons it after the
// maintenance. A cordoned node is no place for a volume (nor is it for --to). The exit code is
// non-zero while any volume is left on A.
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "cli/node_cmd.h"
#include "cli/render.h"
#include "cli/session.h"
#include "cli/volume_move.h"
#include "cluster/placed_id.h"
#include "cluster/routing.h"
#include "core/size.h"
#include "core/validate.h"
#include "daemon/convert.h"
#include "providers/volume_context.h"

namespace rosetctl::cli {
namespace {

struct DrainOptions {
  std::string node;
  std::string to;
  bool delete_source = false;
  int wait_unpublished = 0;
  int max_rounds = 4;
  std::string small = "16Mi";
};

// A node a volume may go to, and the room the drain has left it.
struct DrainTarget {
  std::string node;
  int64_t available = 0;
};

// The volumes the drain is about: placed on A, or of the controller host and mapped to A.
bool drained_volume(const VolumeInfo& info, const std::string& node) {
  if (auto placed = decode_placed_id(info.volume.volume_id())) return placed->node == node;
  return std::find(info.published_nodes.begin(), info.published_nodes.end(), node) !=
         info.published_nodes.end();
}

std::string provider_of(const VolumeInfo& info) {
  auto found = info.volume.volume_context().find(kContextProvider);
  return found == info.volume.volume_context().end() ? "" : found->second;
}

Expected<v1::Node> registered_node(Session& session, const std::string& node,
                                   const std::string& what) {
  v1::GetNodeRequest request;
  request.set_node_id(node);
  v1::GetNodeResponse response;
  Status known = session.client().registry(&v1::Registry::Stub::GetNode, request, &response);
  if (known.code() == Code::kNotFound) {
    return error(Code::kNotFound,
                 "{} \"{}\" is not a registered node (`rosetctl node list` lists "
                 "them)",
                 what, node);
  }
  if (!known) return known;
  return response.node();
}

// The registered nodes other than A that share A's topology, with their local capacity; a node
// that does not answer is left out, saying so.
Expected<std::vector<DrainTarget>> drain_targets(Session& session, const v1::Node& drained) {
  v1::ListNodesResponse nodes;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().registry(&v1::Registry::Stub::ListNodes, v1::ListNodesRequest(), &nodes));
  std::vector<DrainTarget> targets;
  for (const v1::Node& node : nodes.nodes()) {
    // Cordoned: the controller would refuse to place the volume there.
    if (node.node_id() == drained.node_id() || node.cordoned_at() != 0) continue;
    bool shares = std::all_of(
        drained.topology().begin(), drained.topology().end(), [&node](const auto& segment) {
          if (segment.first == kTopologyNodeKey) return true;
          auto theirs = node.topology().find(segment.first);
          return theirs != node.topology().end() && theirs->second == segment.second;
        });
    if (!shares) continue;
    csi::v1::GetCapacityRequest request;
    (*request.mutable_parameters())["provider"] = "local";
    (*request.mutable_accessible_topology()->mutable_segments())[kTopologyNodeKey] = node.node_id();
    csi::v1::GetCapacityResponse capacity;
    Status asked =
        session.client().controller(&csi::v1::Controller::Stub::GetCapacity, request, &capacity);
    if (!asked) {
      std::fprintf(stderr, "rosetctl: note: node \"%s\" is left out of the drain's places: %s\n",
                   node.node_id().c_str(), asked.message().c_str());
      continue;
    }
    targets.push_back({node.node_id(), capacity.available_capacity()});
  }
  return targets;
}

// The target with the most room left that holds `bytes`, its room taken; nullptr: none.
DrainTarget* place_drained(std::vector<DrainTarget>& targets, int64_t bytes) {
  DrainTarget* best = nullptr;
  for (DrainTarget& target : targets) {
    if (target.available < bytes) continue;
    if (best == nullptr || target.available > best->available) best = &target;
  }
  if (best != nullptr) best->available -= bytes;
  return best;
}

std::string no_room(const std::vector<DrainTarget>& targets, const VolumeInfo& info,
                    const std::string& drained) {
  std::vector<std::string> rooms;
  for (const DrainTarget& target : targets)
    rooms.push_back(fmt::format("\"{}\" {} left", target.node, approximate_size(target.available)));
  return fmt::format(
      "no other registered node that shares node \"{}\"'s topology has room for its {} ({}); "
      "give --to NODE",
      drained, approximate_size(info.volume.capacity_bytes()),
      rooms.empty() ? std::string("none answered") : fmt::format("{}", fmt::join(rooms, ", ")));
}

// Refused: what cannot move as it is; failed: what went wrong on the way (try again).
bool is_refusal(Code code) {
  return code == Code::kFailedPrecondition || code == Code::kUnimplemented ||
         code == Code::kResourceExhausted || code == Code::kInvalidArgument;
}

nlohmann::json drain_row(const VolumeInfo& info) {
  return {{"name", volume_name(info.volume)},
          {"volume_id", info.volume.volume_id()},
          {"provider", provider_of(info)},
          {"outcome", nullptr},
          {"node", nullptr},
          {"new_volume_id", nullptr},
          {"reason", nullptr}};
}

std::vector<Column> drain_columns() {
  return {{"NAME", [](const nlohmann::json& r) { return text_of(r["name"]); }},
          {"VOLUME ID", [](const nlohmann::json& r) { return text_of(r["volume_id"]); }},
          {"OUTCOME", [](const nlohmann::json& r) { return text_of(r["outcome"]); }},
          {"NODE", [](const nlohmann::json& r) { return text_of(r["node"]); }},
          {"NEW ID", [](const nlohmann::json& r) { return text_of(r["new_volume_id"]); }},
          {"REASON", [](const nlohmann::json& r) { return text_of(r["reason"]); }}};
}

Status run_drain(const GlobalOptions& globals, const DrainOptions& options) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.node, "node"));
  if (!options.to.empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(options.to, "--to"));
    if (options.to == options.node) {
      return error(Code::kInvalidArgument, "--to \"{}\" is the node drained", options.to);
    }
  }
  auto settings = move_settings(options.to, options.delete_source, options.wait_unpublished,
                                options.max_rounds, options.small);
  if (!settings) return settings.status();
  auto session = Session::open(globals);
  if (!session) return session.status();
  if ((*session)->sees_only_this_host()) {
    return error(Code::kFailedPrecondition, "node drain runs from the controller seat: {}",
                 kOnlyThisHostHint);
  }
  auto drained = registered_node(**session, options.node, "node");
  if (!drained) return drained.status();
  if (!options.to.empty()) {
    auto to = registered_node(**session, options.to, "--to");
    if (!to) return to.status();
    if (to->cordoned_at() != 0) return cordoned_error(options.to);
  }
  // First, so that no volume is placed on the node while it is drained (nor after).
  auto cordon = set_cordon(**session, options.node, true);
  if (!cordon)
    return cordon.status().with_context(fmt::format("cordoning node \"{}\"", options.node));
  nlohmann::json cordoned_at = node_json(cordon->node())["cordoned_at"];
  std::fprintf(
      stderr,
      "rosetctl: node \"%s\" %s: no new volume is placed on it; it stays cordoned "
      "after the drain (rosetctl node uncordon %s once its maintenance is over)\n",
      options.node.c_str(),
      cordon->changed()
          ? "cordoned"
          : fmt::format("cordoned already, since {}", cordoned_at.get<std::string>()).c_str(),
      options.node.c_str());
  std::vector<std::string> unreachable;
  auto volumes = list_all_volumes((*session)->client(), &unreachable);
  if (!volumes) return volumes.status();
  for (const std::string& why : unreachable) {
    if (why.find(fmt::format("\"{}\"", options.node)) != std::string::npos) {
      return error(Code::kUnavailable, "node \"{}\" must answer to be drained: {}", options.node,
                   why);
    }
  }
  std::erase_if(*volumes,
                [&](const VolumeInfo& info) { return !drained_volume(info, options.node); });
  std::sort(volumes->begin(), volumes->end(), [](const VolumeInfo& a, const VolumeInfo& b) {
    return volume_name(a.volume) < volume_name(b.volume);
  });
  std::optional<std::vector<DrainTarget>> targets;  // asked once a volume needs a place

  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, int> counts{
      {"moved", 0}, {"already_moved", 0}, {"refused", 0}, {"failed", 0}};
  std::optional<Status> first_left;
  size_t index = 0;
  for (const VolumeInfo& info : *volumes) {
    ++index;
    nlohmann::json row = drain_row(info);
    auto leave = [&](const Status& why) {
      row["outcome"] = is_refusal(why.code()) ? "refused" : "failed";
      row["reason"] = why.message();
      if (!first_left) first_left = why;
      std::fprintf(stderr, "rosetctl: volume \"%s\" stays on node \"%s\": %s\n",
                   volume_name(info.volume).c_str(), options.node.c_str(), why.message().c_str());
    };
    MoveSettings each = *settings;
    std::optional<MoveCondition> earlier = move_state_of(info);
    // A move an earlier run began goes on to the node it began with; one it finished is done.
    if (earlier && (earlier->moved || options.to.empty())) each.to_node = earlier->to_node;
    // Asked first: a roset or iscsi volume takes no room anywhere, and is in no one's way.
    Status movable = check_movable_kind(info);
    if (movable && each.to_node.empty()) {
      if (!targets) {
        auto found = drain_targets(**session, *drained);
        if (!found) return found.status();
        targets = std::move(*found);
      }
      DrainTarget* target = place_drained(*targets, info.volume.capacity_bytes());
      if (target == nullptr) {
        movable = error(Code::kResourceExhausted, "{}", no_room(*targets, info, options.node));
      } else {
        each.to_node = target->node;
      }
    }
    if (movable && !earlier && !info.published_nodes.empty() && each.wait_unpublished == 0) {
      // Refused now rather than after a pre-copy the pause would refuse anyway.
      movable = error(Code::kFailedPrecondition,
                      "volume \"{}\" is in use: it is published to node(s) {}; disconnect it "
                      "first, or give --wait-unpublished SECONDS",
                      volume_name(info.volume), fmt::join(info.published_nodes, ", "));
    }
    if (!movable) {
      leave(movable);
    } else {
      std::fprintf(stderr, "rosetctl: moving volume \"%s\" (%zu of %zu) to node \"%s\"\n",
                   volume_name(info.volume).c_str(), index, volumes->size(), each.to_node.c_str());
      auto moved = move_volume(**session, info, each);
      if (!moved) {
        leave(moved.status());
      } else {
        bool before = (*moved)["resumed"] == "moved";
        row["outcome"] = before ? "already_moved" : "moved";
        row["node"] = (*moved)["node"];
        row["new_volume_id"] = (*moved)["volume_id"];
        std::fprintf(stderr, "rosetctl: %s\n", move_summary(*moved).c_str());
      }
    }
    ++counts[row["outcome"].get<std::string>()];
    rows.push_back(row);
  }

  int left = counts["refused"] + counts["failed"];
  nlohmann::json summary = {{"volumes", rows.size()},
                            {"moved", counts["moved"]},
                            {"already_moved", counts["already_moved"]},
                            {"refused", counts["refused"]},
                            {"failed", counts["failed"]},
                            {"left", left}};
  std::string said = fmt::format(
      "node \"{}\": {} volume(s): {} moved, {} moved before, {} refused, {} failed", options.node,
      rows.size(), counts["moved"], counts["already_moved"], counts["refused"], counts["failed"]);
  if (globals.output == OutputFormat::kJson) {
    print_line_or_json(
        globals.output, said,
        {{"node", options.node},
         {"to", options.to.empty() ? nlohmann::json(nullptr) : nlohmann::json(options.to)},
         {"cordoned", true},
         {"cordoned_at", cordoned_at},
         {"cordoned_by_this_drain", cordon->changed()},
         {"volumes", rows},
         {"summary", summary}});
  } else {
    if (!rows.empty()) print_list(globals.output, rows, drain_columns());
    std::printf("%s; node \"%s\" stays cordoned (rosetctl node uncordon %s)\n", said.c_str(),
                options.node.c_str(), options.node.c_str());
  }
  if (left == 0) return Status::ok();
  Code code = first_left->code();
  return error(code,
               "{} of {} volume(s) stay on node \"{}\" (each row says why); run the "
               "drain again once that is dealt with",
               left, rows.size(), options.node);
}

}  // namespace

void setup_node_drain(CLI::App& node, const GlobalOptions& globals, Action& action) {
  auto options = std::make_shared<DrainOptions>();
  CLI::App* drain = node.add_subcommand(
      "drain", "Move every volume off a node, one at a time (from the controller seat)");
  drain->add_option("node", options->node, "The registered node to drain")->required();
  drain->add_option("--to", options->to,
                    "The node to move them all to (default: for each volume, the node sharing "
                    "its topology with the most room)");
  drain->add_flag("--delete-source", options->delete_source,
                  "Delete each old copy on the drained node once its move is done");
  drain->add_option("--wait-unpublished", options->wait_unpublished,
                    "Seconds to wait, for each volume in use, for it to be disconnected "
                    "(default 0: refuse a volume in use and go on with the next)");
  drain->add_option("--max-rounds", options->max_rounds,
                    "Pre-copy rounds at most per volume (default 4), as for `volume move`");
  drain->add_option("--small", options->small,
                    "A pre-copy round that sends at most this much ends it (default 16Mi)");
  drain->footer(
      "Each volume placed on the node is moved as `rosetctl volume move` moves one (see its\n"
      "--help), in name order, one at a time: to --to, else to the registered node that shares\n"
      "the drained node's topology (its segments other than the node's own) with the most\n"
      "room for the local provider (GetCapacity; what the drain placed already counts).\n"
      "Refused, with the reason on its row, and the drain goes on: a roset volume mapped to\n"
      "the node (bound to no node: nothing to move), an iscsi volume mapped to it (it lives on\n"
      "the controller host), a volume in use (unless --wait-unpublished), one no node has room\n"
      "for. Exit code non-zero (that of the first volume left) while any volume is left.\n\n"
      "Resumable: run it again after a kill or a failure. A volume moved already is skipped\n"
      "(its old copy says where it went: outcome already_moved), a move left half done goes on\n"
      "to the node it began with (the move's own resume), the rest are moved.\n\n"
      "The node is cordoned first (see `rosetctl node cordon --help`): the controller places\n"
      "no new volume on it during the drain or after, and a node cordoned is no place for\n"
      "the drain's volumes either (--to naming one is refused, exit code 8). The drain leaves\n"
      "it cordoned, also when the drain is run again: `rosetctl node uncordon NODE` once its\n"
      "maintenance is over. In Kubernetes, kubectl cordon the node too, for its pods.\n\n"
      "Examples:\n  rosetctl --controller ctl:9443 node drain node-a --to node-b -o json\n"
      "  rosetctl --controller ctl:9443 node drain node-a --wait-unpublished 120");
  drain->callback([&globals, &action, options] {
    action = [&globals, options] { return run_drain(globals, *options); };
  });
}

}  // namespace rosetctl::cli
