// Snapshot verbs: every one answers UNIMPLEMENTED (exit code 9) until commits land.
#include "cli/snapshot_cmd.h"

namespace rosetctl::cli {

void setup_snapshot(CLI::App& app, const GlobalOptions& /*globals*/, Action& action) {
  CLI::App* snapshot = app.add_subcommand(
      "snapshot", "Commit, list, restore and delete snapshots (NOT IMPLEMENTED YET)");
  snapshot->require_subcommand(1);
  snapshot->footer(
      "Snapshots are not implemented in this release: every snapshot verb exits with\n"
      "code 9 (UNIMPLEMENTED) and changes nothing.");
  const std::pair<const char*, const char*> verbs[] = {
      {"commit", "Record a volume's content as a snapshot"},
      {"list", "List snapshots"},
      {"show", "Show one snapshot"},
      {"restore", "Create a volume from a snapshot"},
      {"delete", "Delete a snapshot"},
  };
  for (const auto& [verb, help] : verbs) {
    CLI::App* command =
        snapshot->add_subcommand(verb, std::string(help) + " (not implemented yet)");
    command->allow_extras();
    command->callback([&action, name = std::string(verb)] {
      action = [name] {
        return error(Code::kUnimplemented, "snapshot {} is not implemented yet in this release",
                     name);
      };
    });
  }
}

}  // namespace rosetctl::cli
