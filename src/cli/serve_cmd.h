// `rosetctl serve`: run the CSI plugin on a unix socket for kubelet and the CSI sidecars.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

void setup_serve(CLI::App& app, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
