// `rosetctl snapshot ...`: commits of a volume's content, and volumes restored from them.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/global_options.h"

namespace rosetctl::cli {

// commit / list / show / restore / delete (snapshot_cmd.cc): the verbs that are CSI calls.
void setup_snapshot(CLI::App& app, const GlobalOptions& globals, Action& action);

// diff / verify / gc (snapshot_store_cmd.cc): maintenance of this host's snapshot storage,
// which has no CSI RPC.
void setup_snapshot_store(CLI::App& snapshot, const GlobalOptions& globals, Action& action);

// push / pull (snapshot_move_cmd.cc): a snapshot moved from one node's store to another's.
void setup_snapshot_move(CLI::App& snapshot, const GlobalOptions& globals, Action& action);

}  // namespace rosetctl::cli
