// `rosetctl node register|list|show|remove|drain`: the controller's node registry
// (rosetctl.v1.Registry), beside `node info` under the same `node` command.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

void setup_node_registry(CLI::App& node, const GlobalOptions& globals, Action& action);
// drain (node_drain_cmd.cc): every volume moved off a node.
void setup_node_drain(CLI::App& node, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
