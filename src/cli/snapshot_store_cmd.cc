// Snapshot maintenance, which CSI has no RPC for: diff (what changed between two commits),
// verify (re-hash everything) and gc (reclaim what no commit needs), asked of the controller's
// catalog (rosetctl.v1.Catalog) like every other controller call.
#include <algorithm>
#include <map>

#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_cmd.h"
#include "cli/snapshot_lookup.h"
#include "cli/snapshot_view.h"
#include "cli/terminal_progress.h"
#include "daemon/catalog_convert.h"

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
  v1::DiffSnapshotsRequest request;
  request.set_from(options.from);
  request.set_to(options.to);
  v1::DiffSnapshotsResponse response;
  ROSETCTL_RETURN_IF_ERROR(with_only_this_host_hint(
      **session, (*session)->client().catalog(&v1::Catalog::Stub::DiffSnapshots, request, &response,
                                              CsiClient::kDataCallDeadline)));
  std::vector<TreeChange> changes;
  for (const v1::TreeChange& change : response.changes())
    changes.push_back(tree_change_of(change));
  print_line_or_json(
      globals.output, diff_text(changes),
      diff_json(snapshot_record_of(response.from()), snapshot_record_of(response.to()), changes));
  return Status::ok();
}

Expected<SnapshotVerification> verify_snapshots(Session& session, const VerifyOptions& options) {
  v1::VerifySnapshotsRequest request;
  for (const std::string& reference : options.snapshots)
    request.add_references(reference);
  v1::VerifySnapshotsResponse response;
  ROSETCTL_RETURN_IF_ERROR(with_only_this_host_hint(
      session, session.client().catalog(&v1::Catalog::Stub::VerifySnapshots, request, &response,
                                        CsiClient::kDataCallDeadline)));
  return verification_of(response);
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
  v1::CollectGarbageRequest request;
  request.set_patience_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(kGcPatience).count());
  v1::CollectGarbageResponse response;
  ROSETCTL_RETURN_IF_ERROR((*session)->client().catalog(&v1::Catalog::Stub::CollectGarbage, request,
                                                        &response, CsiClient::kDataCallDeadline));
  StorageCollection total;
  total.snapshots = response.snapshots();
  total.unrecorded_removed = response.unrecorded_removed();
  total.objects_removed = response.objects_removed();
  total.bytes_reclaimed = response.bytes_reclaimed();
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
  verify->footer(
      "Exits 1 when a problem is found; notes (harmless leftovers) do not fail it.\n"
      "A snapshot named is verified where it is stored: one on a node by that node (the\n"
      "controller forwards the call; problems found there name the node). With none named:\n"
      "every snapshot of the store of the host that answers (with --controller, the controller\n"
      "host's). An admin's or a controller's certificate may verify; a node's may not.");
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
