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

#include "cli/render.h"
#include "cli/session.h"
#include "cli/volume_cmd.h"
#include "cli/volume_lookup.h"
#include "cli/volume_view.h"
#include "daemon/node_paths.h"

namespace rosetctl::cli {
namespace {

struct AttachOptions {
  std::string volume;
  std::string target;
  bool read_only = false;
  bool other_stagings = false;  // disconnect --staging
};

// Where block devices go by default, as udev puts disks under /dev/disk. The one parent
// directory `connect` makes itself: /dev is no place for a user to pre-create directories.
constexpr const char* kBlockDeviceDir = "/dev/rosetctl";

// How long a CLI run waits for another CLI run's connect/disconnect of the same volume.
constexpr auto kAttachPatience = std::chrono::seconds(60);

// A target as a shell user means it: relative to the current directory, with "." and ".."
// resolved the way the kernel resolves them (through symlinks, so never lexically); then
// canonical and checked exactly as NodePublishVolume will check it.
Expected<std::string> resolve_target(const Session& session, const std::string& target) {
  std::string trimmed = target;
  while (trimmed.size() > 1 && trimmed.back() == '/')
    trimmed.pop_back();
  std::filesystem::path path(trimmed);
  if (path.is_relative()) {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) {
      return errno_status(errno, "cannot read the current directory");
    }
    path = std::filesystem::path(cwd) / path;
  }
  std::string leaf = path.filename().string();
  std::filesystem::path parent =
      leaf.empty() || leaf == "." || leaf == ".." ? path : path.parent_path();
  if (leaf == "." || leaf == "..") leaf.clear();
  char resolved[PATH_MAX];
  if (::realpath(parent.c_str(), resolved) == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return error(Code::kInvalidArgument, "--target \"{}\": directory \"{}\" does not exist",
                   target, parent.string());
    }
    return errno_status(
        errno, fmt::format("--target \"{}\": cannot resolve \"{}\"", target, parent.string()));
  }
  std::string joined = leaf.empty() ? resolved : fmt::format("{}/{}", resolved, leaf);
  return checked_mount_path(session.layout(), joined, "--target", session.layout().mounts_dir());
}

// Where `connect` stages a volume on this host; other stagings are a CO's (kubelet's).
std::string own_staging(const Session& session, std::string_view volume_id) {
  return fmt::format("{}/{}", session.layout().staging_dir(), volume_id);
}

// Connect and disconnect are several CSI calls each; two CLI runs on one volume take turns so
// their sequences never interleave ("am I the last user?" must stay true until acted on).
Expected<HeldLock> lock_attachments(const Session& session, std::string_view volume_id) {
  return session.locks().wait_lock(
      fmt::format("attach:{}", volume_id), LockMode::kExclusive,
      fmt::format("another rosetctl run is connecting or disconnecting volume \"{}\"", volume_id),
      kAttachPatience);
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
  std::string wanted = options.target;
  if (wanted.empty()) {
    wanted = block ? fmt::format("{}/{}", kBlockDeviceDir, name)
                   : fmt::format("{}/{}", (*session)->layout().mounts_dir(), name);
  }
  if (block && std::filesystem::path(wanted).parent_path() == kBlockDeviceDir &&
      ::mkdir(kBlockDeviceDir, 0755) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create \"{}\"", kBlockDeviceDir));
  }
  auto target = resolve_target(**session, wanted);
  if (!target) return target.status();
  csi::v1::VolumeCapability capability = attach_capability(info->volume);
  // A restored read-only volume mounts read-only without being told.
  bool read_only = options.read_only || is_read_only_volume(info->volume);
  // Everything the report needs from the controller is asked for before anything changes: once
  // NodePublish has mounted the volume the connect is done, and a controller lost after its
  // ControllerPublish answered must not turn a finished connect into a failure.
  auto parameters = fetch_volume_parameters(**session, {*info});
  if (!parameters) return parameters.status();
  auto turn = lock_attachments(**session, id);
  if (!turn) return turn.status();
  // Refuse a bad target before mapping and staging anything, unless it is this very volume's
  // mount already (connecting again is a no-op).
  auto existing = (*session)->store().find_node_publication(*target);
  if (!existing) return existing.status();
  bool already_connected = existing->has_value() && (*existing)->volume_id == id;
  if (!already_connected) {
    ROSETCTL_RETURN_IF_ERROR(block ? check_block_target(*target) : check_publish_target(*target));
  }
  std::string staging = own_staging(**session, id);
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

  auto staged_before = (*session)->store().find_staging(id, staging);
  if (!staged_before) return staged_before.status();
  csi::v1::NodeStageVolumeRequest stage;
  stage.set_volume_id(id);
  stage.set_staging_target_path(staging);
  *stage.mutable_volume_capability() = capability;
  *stage.mutable_publish_context() = published.publish_context();
  *stage.mutable_volume_context() = info->volume.volume_context();
  csi::v1::NodeStageVolumeResponse stage_response;
  ROSETCTL_RETURN_IF_ERROR(
      client.node(&csi::v1::Node::Stub::NodeStageVolume, stage, &stage_response));
  if (!staged_before->has_value()) {
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
  mount.set_target_path(*target);
  mount.set_readonly(read_only);
  *mount.mutable_volume_capability() = capability;
  *mount.mutable_publish_context() = published.publish_context();
  *mount.mutable_volume_context() = info->volume.volume_context();
  csi::v1::NodePublishVolumeResponse mount_response;
  ROSETCTL_RETURN_IF_ERROR(
      client.node(&csi::v1::Node::Stub::NodePublishVolume, mount, &mount_response));
  rollback.commit();

  const std::string& path = *target;
  // ControllerPublish answered OK, so the controller now lists this node (in node id order).
  VolumeInfo connected = *info;
  if (!mapped) {
    auto& nodes = connected.published_nodes;
    nodes.insert(std::upper_bound(nodes.begin(), nodes.end(), node), node);
  }
  auto out = describe_volume(**session, connected, *parameters);
  if (!out) return out.status();
  (*out)["path"] = path;
  (*out)["readonly"] = read_only;
  (*out)["already_connected"] = already_connected;
  // Idempotent verbs say when there was nothing to do; stdout stays the path for scripts.
  if (already_connected && globals.output == OutputFormat::kTable) {
    std::fprintf(stderr, "rosetctl: volume \"%s\" was already connected at %s; nothing to do\n",
                 volume_name(info->volume).c_str(), path.c_str());
  }
  print_line_or_json(globals.output, path, *out);
  return Status::ok();
}

// Unmounts the chosen targets, then unstages and unmaps when no mount of the volume is left.
Status run_disconnect(const GlobalOptions& globals, const AttachOptions& options) {
  auto session = Session::open(globals);
  if (!session) return session.status();
  CsiClient& client = (*session)->client();
  StateStore& store = (*session)->store();
  auto info = resolve_volume(**session, options.volume);
  if (!info) return info.status();
  const std::string& id = info->volume.volume_id();
  std::string name = volume_name(info->volume);

  auto turn = lock_attachments(**session, id);
  if (!turn) return turn.status();
  auto connections = store.node_publications(id);
  if (!connections) return connections.status();
  std::vector<std::string> targets;
  if (options.target.empty()) {
    for (const auto& connection : *connections)
      targets.push_back(connection.target_path);
  } else {
    auto canonical = resolve_target(**session, options.target);
    if (!canonical) return canonical.status();
    for (const auto& connection : *connections) {
      if (connection.target_path == *canonical) targets.push_back(connection.target_path);
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

  auto remaining = store.node_publications(id);
  if (!remaining) return remaining.status();
  bool still_connected = !remaining->empty();
  nlohmann::json unstaged = nlohmann::json::array();
  std::vector<std::string> left_staged;
  if (!still_connected) {
    // Our own staging; a kubelet staging on this host belongs to kubelet, unless --staging
    // says its client is gone.
    std::string own = own_staging(**session, id);
    auto stagings = store.stagings(id);
    if (!stagings) return stagings.status();
    for (const Staging& staging : *stagings) {
      if (staging.staging_path != own && !options.other_stagings) {
        left_staged.push_back(staging.staging_path);
        continue;
      }
      csi::v1::NodeUnstageVolumeRequest unstage;
      unstage.set_volume_id(id);
      unstage.set_staging_target_path(staging.staging_path);
      csi::v1::NodeUnstageVolumeResponse response;
      ROSETCTL_RETURN_IF_ERROR(
          client.node(&csi::v1::Node::Stub::NodeUnstageVolume, unstage, &response));
      if (staging.staging_path != own) unstaged.push_back(staging.staging_path);
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
    auto connections = (*session)->store().node_publications(id);
    if (!connections) return connections.status();
    if (connections->empty()) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" is not connected on this node; connect it to see its usage",
                   volume_name(info->volume));
    }
    path = connections->front().target_path;
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
