// `snapshot push` and `snapshot pull`: a snapshot of one node's local provider made present on
// another node, by content address, sending only the objects the receiver lacks. Either way the
// receiving node does the work (rosetctl.v1.ObjectStore PullSnapshot): it fetches from the
// source (directly, or through the controller's proxy: cluster/source_node.h) and verifies every
// object, so no node ever writes into another's store.
#include "cli/render.h"
#include "cli/session.h"
#include "cli/snapshot_cmd.h"
#include "cli/snapshot_move.h"
#include "cli/terminal_progress.h"
#include "core/validate.h"

namespace rosetctl::cli {
namespace {

struct MoveOptions {
  std::string snapshot;
  std::string to_node;    // push: the receiver
  std::string from_node;  // pull: the source; push: the source, default this host's node
};

}  // namespace

Expected<v1::PullSnapshotProgress> pull_into(Session& session, const std::string& receiver,
                                             const v1::PullSnapshotRequest& request) {
  auto stub = session.client().object_store(receiver);
  if (!stub) return stub.status();
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + CsiClient::kDataCallDeadline);
  if (!receiver.empty()) call.AddMetadata(kProxyNodeKey, receiver);
  std::unique_ptr<grpc::ClientReader<v1::PullSnapshotProgress>> reader =
      (*stub)->PullSnapshot(&call, request);
  Progress progress(session.progress());
  bool started = false;
  v1::PullSnapshotProgress message;
  v1::PullSnapshotProgress last;
  while (reader->Read(&message)) {
    if (!started && !message.done() && message.files_total() > 0) {
      progress.start(fmt::format("pulling from {}", request.from_node_id()), message.files_total(),
                     message.bytes_total());
      started = true;
    }
    progress.advance(message.files_done() - last.files_done(),
                     message.bytes_done() - last.bytes_done());
    last = message;
  }
  if (started) progress.finish();
  Status finished = from_grpc(reader->Finish());
  if (!finished.is_ok()) return finished;
  if (!last.done()) {
    return error(Code::kUnavailable, "node \"{}\" ended the pull without its result; retry",
                 request.node_id());
  }
  return last;
}

namespace {

Status report(const GlobalOptions& globals, const v1::PullSnapshotProgress& done,
              const std::string& from, const std::string& to) {
  std::string text =
      done.already_present()
          ? fmt::format("node \"{}\" holds snapshot {} already: nothing sent", to,
                        done.snapshot_name())
          : fmt::format(
                "snapshot {} ({}) is on node \"{}\": {} objects ({}) sent from \"{}\"{}, "
                "{} objects ({}) were there already",
                done.snapshot_name(), done.commit_id().substr(0, 12), to, done.objects_sent(),
                approximate_size(done.bytes_sent()), from,
                done.route().empty() ? "" : " " + done.route(), done.objects_skipped(),
                approximate_size(done.bytes_skipped()));
  print_line_or_json(globals.output, text,
                     {{"snapshot_id", done.snapshot_id()},
                      {"name", done.snapshot_name()},
                      {"commit", done.commit_id()},
                      {"from_node", from},
                      {"to_node", to},
                      {"already_present", done.already_present()},
                      {"objects_sent", done.objects_sent()},
                      {"bytes_sent", done.bytes_sent()},
                      {"objects_skipped", done.objects_skipped()},
                      {"bytes_skipped", done.bytes_skipped()},
                      {"bytes_resumed", done.bytes_resumed()},
                      {"bytes_seeded", done.bytes_seeded()},
                      {"route", done.route()}});
  return Status::ok();
}

Status move(const GlobalOptions& globals, Session& session, const std::string& reference,
            const std::string& from, const std::string& to, const std::string& via_proxy) {
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(from, "--from-node"));
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(to, "--to-node"));
  v1::PullSnapshotRequest request;
  request.set_node_id(to);
  request.set_from_node_id(from);
  request.set_reference(reference);
  auto done = pull_into(session, via_proxy, request);
  if (!done) return done.status();
  return report(globals, *done, from, to);
}

// Into the node node calls reach: this host's, or --on-node's.
Status run_pull(const GlobalOptions& globals, const MoveOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  return move(globals, **session, options.snapshot, options.from_node, (*session)->node_id(),
              globals.on_node);
}

Status run_push(const GlobalOptions& globals, const MoveOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  std::string from = options.from_node.empty() ? (*session)->node_id() : options.from_node;
  return move(globals, **session, options.snapshot, from, options.to_node, options.to_node);
}

}  // namespace

void setup_snapshot_move(CLI::App& snapshot, const GlobalOptions& globals, Action& action) {
  const char* footer =
      "The receiving node fetches the snapshot's commit and tree, then only the file contents\n"
      "it does not hold, from the source node over mutual TLS: directly at the address the\n"
      "controller's registry records for it (its certificate must name that node), or through\n"
      "the controller's proxy when it cannot be dialled. Every object is checked against its\n"
      "SHA-256 as it arrives: a corrupt one is refused (exit 1, DATA_LOSS, naming it) and not\n"
      "stored. Nothing appears on the receiver until the whole snapshot is there; an interrupted\n"
      "transfer (exit 6) resumes where it stopped when run again. A snapshot the receiver holds\n"
      "already is not sent again. Only the local provider's snapshots (directories and images)\n"
      "move this way. A node's certificate reads another node's store only for a transfer the\n"
      "controller starts: move snapshots with an admin's certificate through the controller\n"
      "(rosetctl --controller ADDRESS --on-node RECEIVER snapshot pull SNAPSHOT --from-node\n"
      "SOURCE, or snapshot push).";

  auto pull_options = std::make_shared<MoveOptions>();
  CLI::App* pull = snapshot.add_subcommand(
      "pull", "Fetch a snapshot from another node into this one (or --on-node's)");
  pull->add_option("snapshot", pull_options->snapshot,
                   "Snapshot on the source node (commit id, prefix, snapshot id or name)")
      ->required();
  pull->add_option("--from-node", pull_options->from_node, "The node that holds it")->required();
  pull->footer(footer);
  pull->callback([&globals, &action, pull_options] {
    action = [&globals, pull_options] { return run_pull(globals, *pull_options); };
  });

  auto push_options = std::make_shared<MoveOptions>();
  CLI::App* push =
      snapshot.add_subcommand("push", "Send a snapshot of this node (or --from-node's) to another");
  push->add_option("snapshot", push_options->snapshot,
                   "Snapshot on the source node (commit id, prefix, snapshot id or name)")
      ->required();
  push->add_option("--to-node", push_options->to_node, "The node to have it")->required();
  push->add_option("--from-node", push_options->from_node,
                   "The node that holds it (default: this host's node)");
  push->footer(footer);
  push->callback([&globals, &action, push_options] {
    action = [&globals, push_options] { return run_push(globals, *push_options); };
  });
}

}  // namespace rosetctl::cli
