// `rosetctl volume ...`: the verb tree and what each verb asks of the CSI services.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

// NOT_FOUND for `volume` when this host has no state yet (after validating the name).
Status no_state(const GlobalOptions& globals, std::string_view volume);

void setup_volume(CLI::App& app, const GlobalOptions& globals, Action& action);

// connect / disconnect / stats (volume_attach_cmd.cc): the node-side verbs.
void setup_volume_attach(CLI::App& volume, const GlobalOptions& globals, Action& action);

// move (volume_move_cmd.cc): a local volume to another node, under its name.
void setup_volume_move(CLI::App& volume, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
