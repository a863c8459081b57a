// `rosetctl node info`, `rosetctl plugin info`, `rosetctl probe`: what the plugin reports. The
// `node` command also holds the registry verbs (node_cmd.h).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

void setup_info(CLI::App& app, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
