// `rosetctl node register|list|show|remove|drain`: the controller's node registry
// (rosetctl.v1.Registry), beside `node info` under the same `node` command.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/global_options.h"
#include "cli/render.h"
#include "core/status.h"
#include "rosetctl.grpc.pb.h"

namespace rosetctl::cli {

// A registered node as `node list` and `node show` print it (docs/reference/json.md).
nlohmann::json node_json(const v1::Node& node);
std::vector<Column> node_fields();   // node show's rows
std::vector<Column> node_columns();  // node list's columns

void setup_node_registry(CLI::App& node, const GlobalOptions& globals, Action& action);
class Session;

// cordon and uncordon (node_cordon_cmd.cc): whether new volumes are placed on a node.
// Cordons `node` (or uncordons it); `node drain` cordons through it.
Expected<v1::CordonNodeResponse> set_cordon(Session& session, const std::string& node,
                                            bool cordoned);
void setup_node_cordon(CLI::App& node, const GlobalOptions& globals, Action& action);
// drain (node_drain_cmd.cc): every volume moved off a node.
void setup_node_drain(CLI::App& node, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
