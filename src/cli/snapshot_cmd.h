// `rosetctl snapshot ...`: declared so --help shows the plan; not implemented yet.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

void setup_snapshot(CLI::App& app, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
