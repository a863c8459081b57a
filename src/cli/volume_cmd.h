// `rosetctl volume ...`: the verb tree and what each verb asks of the CSI services.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "cli/global_options.h"
#include "cli/render.h"
#include "cli/session.h"
#include "cli/volume_lookup.h"

namespace rosetctl::cli {

// Shown after create and modify: the volume as `volume show` shows it.
Status print_volume(Session& session, OutputFormat format, const VolumeInfo& info);
// --param KEY=VALUE items into `out` (INVALID_ARGUMENT naming one without "=").
Status parse_parameters(const std::vector<std::string>& items,
                        google::protobuf::Map<std::string, std::string>* out);

// NOT_FOUND for `volume` when this host has no state yet (after validating the name).
Status no_state(const GlobalOptions& globals, std::string_view volume);

void setup_volume(CLI::App& app, const GlobalOptions& globals, Action& action);
// create (volume_create_cmd.cc).
void setup_volume_create(CLI::App& volume, const GlobalOptions& globals, Action& action);

// connect / disconnect / stats (volume_attach_cmd.cc): the node-side verbs.
void setup_volume_attach(CLI::App& volume, const GlobalOptions& globals, Action& action);

// move (volume_move_cmd.cc): a local volume to another node, under its name.
void setup_volume_move(CLI::App& volume, const GlobalOptions& globals, Action& action);

// replicate (volume_replicate_cmd.cc): a local volume's latest snapshot kept on another node.
void setup_volume_replicate(CLI::App& volume, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
