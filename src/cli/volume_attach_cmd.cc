// Node-side volume verbs: connect (ControllerPublish + NodeStage + NodePublish), disconnect
// (the reverse, each step only when nothing else still needs it) and stats.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cli/attach_turn.h"
#include "cli/render.h"
#include "cli/session.h"
#include "cli/volume_cmd.h"
#include "cli/volume_lookup.h"
#include "cli/volume_view.h"

namespace rosetctl::cli {
namespace {

struct AttachOptions {
  std::string volume;
  std::string target;
  bool read_only = false;
  bool other_stagings = false;  // disconnect --staging
};

// A target as a shell user means it, relative to the current directory: the node resolves it
// further ("." and ".." the way the kernel does, through symlinks) and checks it exactly as
// NodePublishVolume will. "" asks for the volume's default target on the node.
Expected<v1::ResolveTargetRequest> target_request(const Session& session,
                                                  std::string_view volume_id,
                                                  const std::string& target) {
  v1::ResolveTargetRequest request;
  request.set_node_id(session.node_id());
  request.set_volume_id(std::string(volume_id));
  request.set_shown_as(target);
  std::filesystem::path path(target);
  if (!target.empty() && path.is_relative()) {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) {
      return errno_status(errno, "cannot read the current directory");
    }
    path = std::filesystem::path(cwd) / path;
  }
  request.set_path(path.string());
  return request;
}

Expected<v1::ResolveTargetResponse> resolve_target(Session& session,
                                                   const v1::ResolveTargetRequest& request) {
  v1::ResolveTargetResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      session.client().node_state(&v1::NodeState::Stub::ResolveTarget, request, &response));
  return response;
}

// Connect and disconnect are several CSI calls each; two CLI runs on one volume take turns on
// the node they act on (its attach lock, held while the returned turn lives).
Expected<AttachTurn> lock_attachments(Session& session, std::string_view volume_id) {
  v1::HoldAttachLockRequest request;
  request.set_node_id(session.node_id());
  request.set_volume_id(std::string(volume_id));
  return session.client().hold_attach_lock(request);
}

// Steps to take back if a later step of `connect` fails, newest first.
class Rollback {
 public:
  void add(std::function<void()> undo) { steps_.push_back(std::move(undo)); }
  void commit() { steps_.clear(); }
  ~Rollback() {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it)
      (*it)();
  }

 private:
  std::vector<std::function<void()>> steps_;
};

Status run_connect(const GlobalOptions& globals, const AttachOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  CsiClient& client = (*session)->client();
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  const std::string& id = info->volume.volume_id();
  std::string name = volume_name(info->volume);
  bool block = is_block_volume(info->volume);
  auto wanted = target_request(**session, id, options.target);
  if (!wanted) return wanted.status();
  wanted->set_volume_name(name);
  wanted->set_block(block);
  csi::v1::VolumeCapability capability = attach_capability(info->volume);
  // A restored read-only volume mounts read-only without being told.
  bool read_only = options.read_only || is_read_only_volume(info->volume);
  // Everything the report needs from the controller is asked for before anything changes: once
  // NodePublish has mounted the volume the connect is done, and a controller lost after its
  // ControllerPublish answered must not turn a finished connect into a failure. Only the JSON
  // report shows the parameters; the table's is the path alone (one controller call less).
  bool report_volume = globals.output == OutputFormat::kJson;
  VolumeParameters parameters;
  if (report_volume) {
    auto fetched = fetch_volume_parameters(**session, {*info});
    if (!fetched) return fetched.status();
    parameters = std::move(*fetched);
  }
  auto turn = lock_attachments(**session, id);
  if (!turn) return turn.status();
  // Refuse a bad target before mapping and staging anything, unless it is this very volume's
  // mount already (connecting again is a no-op). Resolved once, now that it is our turn: what
  // it names cannot change under another rosetctl run's connect or disconnect.
  wanted->set_check(true);
  auto target = resolve_target(**session, *wanted);
  if (!target) return target.status();
  bool already_connected = target->already_published();
  auto on_node = volume_on_node(**session, id);
  if (!on_node) return on_node.status();
  const std::string& staging = on_node->own_staging_path();
  const std::string& node = (*session)->node_id();
  Rollback rollback;

  bool mapped = std::find(info->published_nodes.begin(), info->published_nodes.end(), node) !=
                info->published_nodes.end();
  csi::v1::ControllerPublishVolumeRequest publish;
  publish.set_volume_id(id);
  publish.set_node_id(node);
  publish.set_readonly(is_read_only_volume(info->volume));
  *publish.mutable_volume_capability() = capability;
  *publish.mutable_volume_context() = info->volume.volume_context();
  csi::v1::ControllerPublishVolumeResponse published;
  ROSETCTL_RETURN_IF_ERROR(
      client.controller(&csi::v1::Controller::Stub::ControllerPublishVolume, publish, &published));
  if (!mapped) {
    rollback.add([&] {
      csi::v1::ControllerUnpublishVolumeRequest undo;
      undo.set_volume_id(id);
      undo.set_node_id(node);
      csi::v1::ControllerUnpublishVolumeResponse ignored;
      (void)client.controller(&csi::v1::Controller::Stub::ControllerUnpublishVolume, undo,
                              &ignored);
    });
  }

  bool staged_before =
      std::any_of(on_node->stagings().begin(), on_node->stagings().end(),
                  [&](const v1::NodeStaging& staged) { return staged.staging_path() == staging; });
  csi::v1::NodeStageVolumeRequest stage;
  stage.set_volume_id(id);
  stage.set_staging_target_path(staging);
  *stage.mutable_volume_capability() = capability;
  *stage.mutable_publish_context() = published.publish_context();
  *stage.mutable_volume_context() = info->volume.volume_context();
  csi::v1::NodeStageVolumeResponse stage_response;
  ROSETCTL_RETURN_IF_ERROR(
      client.node(&csi::v1::Node::Stub::NodeStageVolume, stage, &stage_response));
  if (!staged_before) {
    rollback.add([&] {
      csi::v1::NodeUnstageVolumeRequest undo;
      undo.set_volume_id(id);
      undo.set_staging_target_path(staging);
      csi::v1::NodeUnstageVolumeResponse ignored;
      (void)client.node(&csi::v1::Node::Stub::NodeUnstageVolume, undo, &ignored);
    });
  }

  csi::v1::NodePublishVolumeRequest mount;
  mount.set_volume_id(id);
  mount.set_staging_target_path(staging);
  mount.set_target_path(target->path());
  mount.set_readonly(read_only);
  *mount.mutable_volume_capability() = capability;
  *mount.mutable_publish_context() = published.publish_context();
  *mount.mutable_volume_context() = info->volume.volume_context();
  csi::v1::NodePublishVolumeResponse mount_response;
  ROSETCTL_RETURN_IF_ERROR(
      client.node(&csi::v1::Node::Stub::NodePublishVolume, mount, &mount_response));
  rollback.commit();

  const std::string& path = target->path();
  // Idempotent verbs say when there was nothing to do; stdout stays the path for scripts.
  if (already_connected && globals.output == OutputFormat::kTable) {
    std::fprintf(stderr, "rosetctl: volume \"%s\" was already connected at %s; nothing to do\n",
                 volume_name(info->volume).c_str(), path.c_str());
  }
  if (!report_volume) {
    print_line_or_json(globals.output, path, nullptr);
    return Status::ok();
  }
  // ControllerPublish answered OK, so the controller now lists this node (in node id order).
  VolumeInfo connected = *info;
  if (!mapped) {
    auto& nodes = connected.published_nodes;
    nodes.insert(std::upper_bound(nodes.begin(), nodes.end(), node), node);
  }
  auto out = describe_volume(**session, connected, parameters);
  if (!out) return out.status();
  (*out)["path"] = path;
  (*out)["readonly"] = read_only;
  (*out)["already_connected"] = already_connected;
  print_line_or_json(globals.output, path, *out);
  return Status::ok();
}

// Unmounts the chosen targets, then unstages and unmaps when no mount of the volume is left.
Status run_disconnect(const GlobalOptions& globals, const AttachOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  CsiClient& client = (*session)->client();
  // The id and the name are all a disconnect needs of the controller before its unmap.
  auto volume = resolve_volume_ref(**session, options.volume);
  if (!volume) return volume.status();
  const std::string& id = volume->id;
  const std::string& name = volume->name;

  auto turn = lock_attachments(**session, id);
  if (!turn) return turn.status();
  auto on_node = volume_on_node(**session, id);
  if (!on_node) return on_node.status();
  std::vector<std::string> targets;
  if (options.target.empty()) {
    for (const auto& connection : on_node->publications())
      targets.push_back(connection.target_path());
  } else {
    auto wanted = target_request(**session, id, options.target);
    if (!wanted) return wanted.status();
    auto canonical = resolve_target(**session, *wanted);
    if (!canonical) return canonical.status();
    for (const auto& connection : on_node->publications()) {
      if (connection.target_path() == canonical->path())
        targets.push_back(connection.target_path());
    }
  }

  nlohmann::json removed = nlohmann::json::array();
  for (const std::string& target : targets) {
    csi::v1::NodeUnpublishVolumeRequest request;
    request.set_volume_id(id);
    request.set_target_path(target);
    csi::v1::NodeUnpublishVolumeResponse response;
    ROSETCTL_RETURN_IF_ERROR(
        client.node(&csi::v1::Node::Stub::NodeUnpublishVolume, request, &response));
    removed.push_back(target);
  }

  auto remaining = volume_on_node(**session, id);
  if (!remaining) return remaining.status();
  bool still_connected = !remaining->publications().empty();
  nlohmann::json unstaged = nlohmann::json::array();
  std::vector<std::string> left_staged;
  if (!still_connected) {
    // Our own staging; a kubelet staging on that node belongs to kubelet, unless --staging
    // says its client is gone.
    const std::string& own = remaining->own_staging_path();
    for (const v1::NodeStaging& staging : remaining->stagings()) {
      const std::string& path = staging.staging_path();
      if (path != own && !options.other_stagings) {
        left_staged.push_back(path);
        continue;
      }
      csi::v1::NodeUnstageVolumeRequest unstage;
      unstage.set_volume_id(id);
      unstage.set_staging_target_path(path);
      csi::v1::NodeUnstageVolumeResponse response;
      ROSETCTL_RETURN_IF_ERROR(
          client.node(&csi::v1::Node::Stub::NodeUnstageVolume, unstage, &response));
      if (path != own) unstaged.push_back(path);
    }
    if (left_staged.empty()) {
      csi::v1::ControllerUnpublishVolumeRequest unpublish;
      unpublish.set_volume_id(id);
      unpublish.set_node_id((*session)->node_id());
      csi::v1::ControllerUnpublishVolumeResponse unpublished;
      ROSETCTL_RETURN_IF_ERROR(client.controller(
          &csi::v1::Controller::Stub::ControllerUnpublishVolume, unpublish, &unpublished));
    }
  }

  std::vector<std::string> lines;
  if (!removed.empty()) {
    lines.push_back(fmt::format("disconnected volume \"{}\" from {}", name,
                                fmt::join(removed.get<std::vector<std::string>>(), ", ")));
  }
  for (const auto& path : unstaged)
    lines.push_back(fmt::format("unstaged volume \"{}\" at \"{}\"", name, path.get<std::string>()));
  if (lines.empty()) {
    lines.push_back(fmt::format("volume \"{}\" was not connected{}", name,
                                options.target.empty() ? "" : " at " + options.target));
  }
  for (const std::string& path : left_staged) {
    lines.push_back(fmt::format(
        "volume \"{}\" stays staged at \"{}\" by another client (kubelet?); if that client is "
        "gone, `rosetctl volume disconnect {} --staging` releases it",
        name, path, name));
  }
  print_line_or_json(globals.output, fmt::format("{}", fmt::join(lines, "\n")),
                     {{"id", id},
                      {"name", name},
                      {"disconnected", removed},
                      {"unstaged", unstaged},
                      {"connected", still_connected},
                      {"staged", !left_staged.empty()}});
  return Status::ok();
}

Status run_stats(const GlobalOptions& globals, const AttachOptions& options) {
  if (!state_exists(globals)) return no_state(globals, options.volume);
  auto session = Session::open(globals);
  if (!session) return session.status();
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  const std::string& id = info->volume.volume_id();
  std::string path = options.target;
  if (path.empty()) {
    auto on_node = volume_on_node(**session, id);
    if (!on_node) return on_node.status();
    if (on_node->publications().empty()) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" is not connected on this node; connect it to see its usage",
                   volume_name(info->volume));
    }
    path = on_node->publications(0).target_path();
  }
  csi::v1::NodeGetVolumeStatsRequest request;
  request.set_volume_id(id);
  request.set_volume_path(path);
  csi::v1::NodeGetVolumeStatsResponse response;
  ROSETCTL_RETURN_IF_ERROR(
      (*session)->client().node(&csi::v1::Node::Stub::NodeGetVolumeStats, request, &response));

  nlohmann::json out = {{"id", id}, {"name", volume_name(info->volume)}, {"path", path}};
  bool block = attach_capability(info->volume).has_block();
  for (const auto& usage : response.usage()) {
    std::string unit = usage.unit() == csi::v1::VolumeUsage::INODES ? "inodes" : "bytes";
    out[unit] = {{"total", usage.total()}};
    // A raw device has a size but no notion of used or free: 0 would read as "full".
    if (block) continue;
    out[unit]["used"] = usage.used();
    out[unit]["available"] = usage.available();
  }
  out["condition"] = {{"abnormal", response.volume_condition().abnormal()},
                      {"message", response.volume_condition().message()}};
  auto number = [](const char* unit, const char* field) {
    return Column{fmt::format("{} {}", unit, field), [unit, field](const nlohmann::json& v) {
                    return v.contains(unit) && v[unit].contains(field) ? text_of(v[unit][field])
                                                                       : std::string("-");
                  }};
  };
  print_object(globals.output, out,
               {{"Name", [](const nlohmann::json& v) { return text_of(v["name"]); }},
                {"Path", [](const nlohmann::json& v) { return text_of(v["path"]); }},
                number("bytes", "total"),
                number("bytes", "used"),
                number("bytes", "available"),
                number("inodes", "total"),
                number("inodes", "used"),
                number("inodes", "available"),
                {"Condition", [](const nlohmann::json& v) {
                   return v["condition"]["abnormal"].get<bool>()
                              ? "abnormal: " + v["condition"]["message"].get<std::string>()
                              : std::string("ok");
                 }}});
  return Status::ok();
}

}  // namespace

void setup_volume_attach(CLI::App& volume, const GlobalOptions& globals, Action& action) {
  auto connect_options = std::make_shared<AttachOptions>();
  CLI::App* connect = volume.add_subcommand("connect", "Attach a volume to this host and mount it");
  connect->add_option("volume", connect_options->volume, "Volume name or id")->required();
  connect->add_option("--target,-t", connect_options->target,
                      "Mount point to create (its parent must exist); default "
                      "<state-dir>/mnt/<name>. Block volumes: the device file to create; "
                      "default /dev/rosetctl/<name>");
  connect->add_flag("--read-only", connect_options->read_only, "Mount it read-only");
  connect->footer(
      "Prints the mount path, or for a block volume the device file (JSON: the volume with\n"
      "\"path\"). Connecting again to the same target is a no-op; a volume may be connected at\n"
      "several targets at once.\n\n"
      "Examples:\n  rosetctl volume connect demo --target /mnt/demo\n  rosetctl volume connect "
      "raw --target /dev/rosetctl/raw");
  connect->callback([&globals, &action, connect_options] {
    action = [&globals, connect_options] { return run_connect(globals, *connect_options); };
  });

  auto disconnect_options = std::make_shared<AttachOptions>();
  CLI::App* disconnect =
      volume.add_subcommand("disconnect", "Unmount a volume from this host (data is kept)");
  disconnect->add_option("volume", disconnect_options->volume, "Volume name or id")->required();
  disconnect->add_option("--target,-t", disconnect_options->target,
                         "Only this mount point (default: every mount of the volume here)");
  disconnect->add_flag("--staging", disconnect_options->other_stagings,
                       "Also unstage what another client (a CO such as kubelet) staged on this "
                       "host and left behind; without it only rosetctl's own staging is released");
  disconnect->footer(
      "Disconnecting a volume that is not connected succeeds and says so. A mount at a target\n"
      "that rosetctl did not make (mounted by hand in place of the volume, or stacked on top\n"
      "of it) is never unmounted: disconnect refuses (exit 5) and names it.");
  disconnect->callback([&globals, &action, disconnect_options] {
    action = [&globals, disconnect_options] {
      return run_disconnect(globals, *disconnect_options);
    };
  });

  auto stats_options = std::make_shared<AttachOptions>();
  CLI::App* stats =
      volume.add_subcommand("stats", "Used and free bytes and inodes of a connected volume");
  stats->add_option("volume", stats_options->volume, "Volume name or id")->required();
  stats->add_option("--target,-t", stats_options->target,
                    "Mount point to measure (default: the first)");
  stats->callback([&globals, &action, stats_options] {
    action = [&globals, stats_options] { return run_stats(globals, *stats_options); };
  });
}

}  // namespace rosetctl::cli
