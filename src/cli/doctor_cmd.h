// `rosetctl doctor`: checks this host and says what to fix (daemon/host_checks.h).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

void setup_doctor(CLI::App& app, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
