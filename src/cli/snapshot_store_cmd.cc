// Snapshot maintenance on this host, which CSI has no RPC for: diff (what changed between two
// commits), verify (re-hash everything) and gc (reclaim what no commit needs). They ask this
// host's providers directly.
#include <algorithm>
#include <map>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_cmd.h"
#include "cli/snapshot_lookup.h"
#include "cli/snapshot_view.h"
#include "cli/terminal_progress.h"

namespace rosetctl::cli {
namespace {

// How long `snapshot gc` waits for running commits and restores.
constexpr std::chrono::seconds kGcPatience{30};

struct DiffOptions {
  std::string from;
  std::string to;
};

struct VerifyOptions {
  std::vector<std::string> snapshots;
};

nlohmann::json diff_json(const SnapshotRecord& from, const SnapshotRecord& to,
                         const std::vector<TreeChange>& changes) {
  nlohmann::json out = {{"from", from.commit_id},
                        {"to", to.commit_id},
                        {"added", nlohmann::json::array()},
                        {"removed", nlohmann::json::array()},
                        {"changed", nlohmann::json::array()}};
  for (const TreeChange& change : changes) {
    switch (change.kind) {
      case TreeChange::Kind::kAdded:
        out["added"].push_back(change.path);
        break;
      case TreeChange::Kind::kRemoved:
        out["removed"].push_back(change.path);
        break;
      case TreeChange::Kind::kChanged:
        out["changed"].push_back({{"path", change.path}, {"aspects", change.aspects}});
        break;
    }
  }
  return out;
}

std::string diff_text(const std::vector<TreeChange>& changes) {
  if (changes.empty()) return "no differences";
  std::string text;
  for (const TreeChange& change : changes) {
    if (!text.empty()) text += '\n';
    switch (change.kind) {
      case TreeChange::Kind::kAdded:
        text += "A  " + display_path(change.path);
        break;
      case TreeChange::Kind::kRemoved:
        text += "D  " + display_path(change.path);
        break;
      case TreeChange::Kind::kChanged:
        text +=
            fmt::format("M  {}  ({})", display_path(change.path), fmt::join(change.aspects, ", "));
        break;
    }
  }
  return text;
}

Status run_diff(const GlobalOptions& globals, const DiffOptions& options) {
  if (!state_exists(globals)) return no_snapshot_state(globals, options.from);
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto from = resolve_snapshot((*session)->store(), options.from);
  if (!from) return from.status();
  auto to = resolve_snapshot((*session)->store(), options.to);
  if (!to) return to.status();
  if (from->provider != to->provider) {
    return error(Code::kInvalidArgument,
                 "snapshots of providers \"{}\" and \"{}\" cannot be compared", from->provider,
                 to->provider);
  }
  for (const SnapshotRecord* snapshot : {&*from, &*to}) {
    if (!snapshot->ready) {
      return error(Code::kFailedPrecondition, "snapshot {} (\"{}\") is not ready: no commit yet",
                   snapshot->id, snapshot->name);
    }
  }
  auto provider = (*session)->providers().by_name(from->provider);
  if (!provider) return provider.status();
  auto changes = (*provider)->diff_snapshots(*from, *to);
  if (!changes) return changes.status();
  print_line_or_json(globals.output, diff_text(*changes), diff_json(*from, *to, *changes));
  return Status::ok();
}

Expected<std::vector<SnapshotRecord>> snapshots_to_verify(StateStore& store,
                                                          const VerifyOptions& options) {
  if (options.snapshots.empty()) return store.list_snapshots("", 0);
  std::vector<SnapshotRecord> records;
  for (const std::string& reference : options.snapshots) {
    auto record = resolve_snapshot(store, reference);
    if (!record) return record.status();
    records.push_back(std::move(*record));
  }
  return records;
}

Expected<SnapshotVerification> verify_snapshots(Session& session, const VerifyOptions& options) {
  auto records = snapshots_to_verify(session.store(), options);
  if (!records) return records.status();
  std::map<std::string, std::vector<SnapshotRecord>> by_provider;
  for (SnapshotRecord& record : *records)
    by_provider[record.provider].push_back(std::move(record));
  if (by_provider.empty()) by_provider["local"];  // still report unrecorded leftovers
  SnapshotVerification total;
  for (const auto& [name, snapshots] : by_provider) {
    auto provider = session.providers().by_name(name);
    if (!provider) return provider.status();
    auto checked = (*provider)->verify_snapshots(snapshots, session.progress());
    if (!checked) return checked.status();
    total.snapshots += checked->snapshots;
    total.objects += checked->objects;
    total.bytes += checked->bytes;
    total.problems.insert(total.problems.end(), checked->problems.begin(), checked->problems.end());
    total.notes.insert(total.notes.end(), checked->notes.begin(), checked->notes.end());
    total.damaged.insert(total.damaged.end(), checked->damaged.begin(), checked->damaged.end());
  }
  std::sort(total.damaged.begin(), total.damaged.end());
  return total;
}

Status report_verification(const GlobalOptions& globals, const SnapshotVerification& total) {
  std::string text = fmt::format("verified {} snapshots: {} objects, {} read and hashed",
                                 total.snapshots, total.objects, approximate_size(total.bytes));
  for (const std::string& problem : total.problems)
    text += "\nproblem: " + problem;
  for (const std::string& note : total.notes)
    text += "\nnote: " + note;
  for (const std::string& name : total.damaged)
    text += "\ndamaged: " + name;
  print_line_or_json(globals.output, text,
                     {{"snapshots", total.snapshots},
                      {"objects", total.objects},
                      {"bytes", total.bytes},
                      {"ok", total.problems.empty()},
                      {"problems", total.problems},
                      {"notes", total.notes},
                      {"damaged", total.damaged}});
  if (!total.problems.empty()) {
    return error(Code::kDataLoss,
                 "{} problem(s) found (listed above); snapshots with missing or corrupt data "
                 "cannot be restored until it is stored again: the next commit of a volume that "
                 "still holds a damaged file's content does that",
                 total.problems.size());
  }
  return Status::ok();
}

Status run_verify(const GlobalOptions& globals, const VerifyOptions& options) {
  if (!state_exists(globals)) {  // read-only: nothing to verify, and nothing is created
    if (!options.snapshots.empty()) return no_snapshot_state(globals, options.snapshots.front());
    return report_verification(globals, SnapshotVerification());
  }
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto total = verify_snapshots(**session, options);
  if (!total) return total.status();
  return report_verification(globals, *total);
}

Status run_gc(const GlobalOptions& globals) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  StorageCollection total;
  for (const std::string& name : (*session)->providers().names()) {
    auto provider = (*session)->providers().by_name(name);
    if (!provider) return provider.status();
    auto collected = (*provider)->collect_garbage(kGcPatience);
    if (!collected && collected.status().code() == Code::kUnimplemented) continue;
    if (!collected) return collected.status();
    if (!collected->ran) {
      return error(Code::kAborted,
                   "the {} snapshot storage stayed busy for {} s (commits or restores are "
                   "running); retry later",
                   name, kGcPatience.count());
    }
    total.snapshots += collected->snapshots;
    total.unrecorded_removed += collected->unrecorded_removed;
    total.objects_removed += collected->objects_removed;
    total.bytes_reclaimed += collected->bytes_reclaimed;
  }
  print_line_or_json(
      globals.output,
      fmt::format("removed {} objects ({} reclaimed) and {} unrecorded commits; {} snapshots kept",
                  total.objects_removed, approximate_size(total.bytes_reclaimed),
                  total.unrecorded_removed, total.snapshots),
      {{"snapshots", total.snapshots},
       {"objects_removed", total.objects_removed},
       {"bytes_reclaimed", total.bytes_reclaimed},
       {"unrecorded_removed", total.unrecorded_removed}});
  return Status::ok();
}

}  // namespace

void setup_snapshot_store(CLI::App& snapshot, const GlobalOptions& globals, Action& action) {
  auto diff_options = std::make_shared<DiffOptions>();
  CLI::App* diff = snapshot.add_subcommand("diff", "Show what changed between two snapshots");
  diff->add_option("from", diff_options->from,
                   "Older snapshot (commit id, prefix, snapshot id or name)")
      ->required();
  diff->add_option("to", diff_options->to,
                   "Newer snapshot (commit id, prefix, snapshot id or name)")
      ->required();
  diff->footer(
      "One line per path: A added, D removed, M changed (with what: content, mode, owner,\n"
      "mtime, xattrs, type, target). \".\" is the volume's root directory. A snapshot of an\n"
      "image or block volume holds the whole image as one file, \"image\": its diff says whether\n"
      "the image changed, not which files inside it did.");
  diff->callback([&globals, &action, diff_options] {
    action = [&globals, diff_options] { return run_diff(globals, *diff_options); };
  });

  auto verify_options = std::make_shared<VerifyOptions>();
  CLI::App* verify = snapshot.add_subcommand(
      "verify", "Re-hash snapshots' stored data and report anything missing or corrupt");
  verify->add_option("snapshot", verify_options->snapshots, "Snapshots to check (default: all)");
  verify->footer("Exits 1 when a problem is found; notes (harmless leftovers) do not fail it.");
  verify->callback([&globals, &action, verify_options] {
    action = [&globals, verify_options] { return run_verify(globals, *verify_options); };
  });

  CLI::App* gc = snapshot.add_subcommand(
      "gc", "Reclaim storage no snapshot needs (also runs after every snapshot delete)");
  gc->footer(
      "Removes data left by interrupted commits and deletes. It waits up to 30 s for running\n"
      "commits and restores, which it never disturbs.");
  gc->callback([&globals, &action] { action = [&globals] { return run_gc(globals); }; });
}

}  // namespace rosetctl::cli
