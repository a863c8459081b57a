// Roset volumes: folders made and removed through the API, staged through shared roset-fuse.
#include "providers/roset/roset_provider.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <limits>

#include "core/commit_store/open_beneath.h"
#include "core/commit_store/sha256.h"
#include "core/map_lookup.h"
#include "core/mount_point.h"
#include "core/random_id.h"
#include "core/recorded_mount.h"
#include "core/unique_fd.h"
#include "core/validate.h"
#include "providers/roset/roset_api.h"
#include "providers/roset/roset_context.h"

namespace rosetctl {
namespace {

constexpr const char* kParamBasePath = "basePath";
constexpr const char* kParamDeletePolicy = "deletePolicy";
// The doctor's row for roset-fuse processes no record knows.
constexpr const char* kFuseClientsRow = "fuse-clients";

std::string digest_hex(std::string_view data, size_t chars) {
  return sha256_hex(data).substr(0, chars);
}

// "/a/b" → {"a", "b"}; INVALID_ARGUMENT for relative paths, "." or ".." and empty segments
// (normalize_absolute_path's rules).
Expected<std::vector<std::string>> path_segments(std::string_view path, std::string_view what) {
  auto normal = normalize_absolute_path(path, what);
  if (!normal) return normal.status();
  std::vector<std::string> out;
  std::string_view rest = *normal;
  while (!rest.empty()) {
    rest.remove_prefix(1);
    size_t slash = rest.find('/');
    std::string segment(rest.substr(0, slash));
    if (!segment.empty()) out.push_back(segment);
    rest = slash == std::string_view::npos ? "" : rest.substr(slash);
  }
  return out;
}

std::string join_path(const std::vector<std::string>& segments) {
  std::string out;
  for (const std::string& segment : segments)
    out += "/" + segment;
  return out.empty() ? "/" : out;
}

Status validate_sub_path(std::string_view sub_path) {
  if (sub_path.empty()) return Status::ok();
  if (sub_path.starts_with('/')) {
    return error(Code::kInvalidArgument, "subPath {} must be relative to the volume",
                 display_quoted(sub_path, 200));
  }
  return normalize_absolute_path(fmt::format("/{}", sub_path), "subPath").status();
}

bool reader_only(AccessMode mode) {
  return mode == AccessMode::kSingleNodeReaderOnly || mode == AccessMode::kMultiNodeReaderOnly;
}

}  // namespace

RosetProvider::RosetProvider(RosetConfig config, const StateLayout& layout, StateStore& store)
    : config_(std::move(config)),
      store_(store),
      http_(std::make_unique<HttpClient>(HttpSettings{config_.ca_bundle})),
      fuse_(
          FuseSettings{
              layout.root + "/roset", config_.fuse_binary, config_.fuse_credentials,
              std::chrono::duration_cast<std::chrono::milliseconds>(config_.fuse_ready_timeout)},
          [this](const RosetEndpoint& endpoint) {
            return RosetApi(*http_, endpoint).check_access();
          },
          [this](const FuseUser& user) {
            Status recorded = store_.set_staging_mount(user.volume_id, user.staging_path,
                                                       record_mount_at(user.staging_path));
            if (!recorded) {
              spdlog::warn("roset: cannot record the new mount at \"{}\": {}", user.staging_path,
                           recorded.message());
            }
          }) {}

bool RosetProvider::configured() const {
  return config_.is_default_provider || !config_.api_key_file.empty() || !config_.api_key.empty();
}

Expected<RosetEndpoint> RosetProvider::endpoint_for(const StringMap& context,
                                                    const StringMap& secrets, KeyUse use) const {
  return resolve_endpoint(config_, secrets, value_or_empty(context, kRosetApiUrl),
                          value_or_empty(context, kRosetMountId), use);
}

std::vector<ProviderGauge> RosetProvider::gauges() {
  return {{"rosetctl_roset_fuse_clients", "roset-fuse processes running for this node's stagings",
           static_cast<double>(fuse_.running_clients())}};
}

std::vector<DoctorRow> RosetProvider::doctor_rows() const {
  return {{kFuseClientsRow, "every roset-fuse client is recorded"}};
}

std::vector<HostFinding> RosetProvider::inspect_host() {
  std::vector<HostFinding> found;
  for (const ProcessIdentity& process : fuse_.unrecorded_clients()) {
    found.push_back({kFuseClientsRow, true,
                     fmt::format("roset-fuse pid {} serves a mount under the state directory that "
                                 "no record knows; `rosetctl doctor --fix` stops it",
                                 process.pid)});
  }
  return found;
}

Status RosetProvider::check_health() const {
  if (!configured()) return Status::ok();
  if (config_.node_role) {
    auto binary = fuse_.fuse_binary();
    if (!binary) return binary.status();
  }
  auto endpoint = resolve_endpoint(config_, {}, "", "");
  // Keys may come only with each call's secrets; then there is nothing to check up front.
  if (!endpoint)
    return endpoint.status().code() == Code::kUnauthenticated ? Status::ok() : endpoint.status();
  return RosetApi(*http_, *endpoint).check_access();
}

Status RosetProvider::validate_create(const CreateVolumeSpec& spec) const {
  for (const Capability& capability : spec.capabilities) {
    if (capability.access_type == AccessType::kBlock) {
      return error(Code::kInvalidArgument,
                   "Roset volumes are shared folders: raw block access is not possible; ask for "
                   "mount access");
    }
  }
  for (const auto& [key, value] : spec.parameters) {
    if (key.starts_with(kKubernetesParameterPrefix)) continue;
    if (key == kRosetMountId || key == kRosetApiUrl) continue;
    if (key == kParamBasePath) {
      ROSETCTL_RETURN_IF_ERROR(path_segments(value, "parameter basePath").status());
      continue;
    }
    if (key == kRosetSubPath) {
      ROSETCTL_RETURN_IF_ERROR(validate_sub_path(value));
      continue;
    }
    if (key == kParamDeletePolicy) {
      if (value == "delete" || value == "permanent" || value == "retain") continue;
      return error(Code::kInvalidArgument,
                   "parameter deletePolicy={} is not one of delete (to the Roset trash, the "
                   "default), permanent, retain",
                   display_quoted(value));
    }
    return error(Code::kInvalidArgument,
                 "unknown parameter {} for the roset provider (known: mountId, basePath, "
                 "deletePolicy, apiUrl, subPath)",
                 display_quoted(key));
  }
  if (auto url = spec.parameters.find(kRosetApiUrl); url != spec.parameters.end()) {
    ROSETCTL_RETURN_IF_ERROR(normalize_api_url(url->second, "parameter apiUrl").status());
  }
  return Status::ok();
}

Status RosetProvider::make_base_path(RosetApi& api, const std::string& base_path) {
  auto segments = path_segments(base_path, "parameter basePath");
  if (!segments) return segments.status();
  std::vector<std::string> done;
  for (const std::string& segment : *segments) {
    // A fresh key per call: retries within this call are deduplicated, while a later call
    // (after the folder went to the trash, say) is not answered from a stale replay.
    auto made = api.create_folder(segment, join_path(done), "rosetctl-mkdir-" + random_hex(12));
    if (!made && made.status().code() != Code::kAlreadyExists) return made.status();
    done.push_back(segment);
  }
  return Status::ok();
}

Expected<ProvisionedVolume> RosetProvider::create_volume(const CreateVolumeSpec& spec) {
  if (spec.source.kind == VolumeSource::Kind::kVolume) {
    return error(Code::kInvalidArgument,
                 "Roset volumes cannot be cloned: the Roset API has no server-side copy of a "
                 "folder's content");
  }
  if (spec.source.kind == VolumeSource::Kind::kSnapshot) return create_restored_volume(spec);
  std::string mount_id = value_or_empty(spec.parameters, kRosetMountId);
  if (mount_id.empty()) mount_id = config_.mount_id;
  std::string base = value_or_empty(spec.parameters, kParamBasePath);
  if (base.empty()) base = kDefaultRosetBasePath;
  auto endpoint = resolve_endpoint(config_, spec.secrets,
                                   value_or_empty(spec.parameters, kRosetApiUrl), mount_id);
  if (!endpoint) return endpoint.status();
  RosetApi api(*http_, *endpoint);
  auto base_segments = path_segments(base, "parameter basePath");
  if (!base_segments) return base_segments.status();
  std::string base_path = join_path(*base_segments);
  ROSETCTL_RETURN_IF_ERROR(make_base_path(api, base_path));

  std::string path = base_path == "/" ? "/" + spec.name : base_path + "/" + spec.name;
  // Derived from the CSI name (and where it goes): a retried CreateVolume is the same request.
  std::string key = "rosetctl-volume-" +
                    digest_hex(fmt::format("{}\n{}\n{}", endpoint->api_url, mount_id, path), 32);
  auto node = api.create_folder(spec.name, base_path, key);
  if (node) {
    // A key the server saw before may replay a folder that has since gone to the trash.
    auto fresh = api.get_node(node->id);
    if (!fresh || fresh->deleted) {
      node = api.create_folder(spec.name, base_path, key + "-" + random_hex(4));
    }
  }
  if (!node && node.status().code() == Code::kAlreadyExists) {
    auto existing = api.resolve(path);
    if (!existing) return existing.status();
    if (!existing->has_value()) {
      return error(Code::kUnavailable,
                   "Roset API: folder \"{}\" was reported to exist but cannot be resolved; retry",
                   path);
    }
    if (!(*existing)->type.empty() && (*existing)->type != "folder") {
      return error(Code::kAlreadyExists,
                   "\"{}\" exists in the Roset mount and is a {}, not a folder", path,
                   display_quoted((*existing)->type));
    }
    node = **existing;
  }
  if (!node) return node.status();
  ProvisionedVolume volume;
  volume.id = "roset-" + node->id;
  if (Status valid = validate_id(volume.id, "volume id"); !valid) {
    return error(Code::kInternal, "Roset API returned node id {}, which cannot be a volume id",
                 display_quoted(node->id));
  }
  volume.capacity_bytes = spec.required_bytes;  // a folder has no size of its own
  volume.context = {{kContextType, std::string(kTypeFolder)},
                    {kRosetNodeId, node->id},
                    {kRosetRootPath, path},
                    {kRosetApiUrl, endpoint->api_url}};
  if (!mount_id.empty()) volume.context[kRosetMountId] = mount_id;
  std::string sub_path = value_or_empty(spec.parameters, kRosetSubPath);
  if (!sub_path.empty()) volume.context[kRosetSubPath] = sub_path;
  return volume;
}

Status RosetProvider::check_no_restores_of(const VolumeRecord& volume) {
  auto volumes = store_.list_volumes("", 0);
  if (!volumes) return volumes.status();
  std::string node_id = value_or_empty(volume.context, kRosetNodeId);
  for (const VolumeRecord& other : *volumes) {
    if (other.id == volume.id || other.provider != "roset") continue;
    if (value_or_empty(other.context, kContextReadOnly) == "true" &&
        value_or_empty(other.context, kRosetNodeId) == node_id) {
      return error(Code::kFailedPrecondition,
                   "volume \"{}\" was restored from a snapshot of this one and shows its folder; "
                   "delete \"{}\" first",
                   other.name, other.name);
    }
  }
  return Status::ok();
}

Status RosetProvider::delete_volume(const VolumeRecord& volume) {
  return delete_volume_with(volume, {});
}

Status RosetProvider::delete_volume_with(const VolumeRecord& volume, const StringMap& secrets) {
  auto endpoint = endpoint_for(volume.context, secrets);
  if (!endpoint) return endpoint.status();
  RosetApi api(*http_, *endpoint);
  if (value_or_empty(volume.context, kContextReadOnly) == "true") {
    // A restored volume owns only its pin on the commit, never the folder it shows.
    std::string ref = value_or_empty(volume.context, kRosetRef);
    return ref.empty() ? Status::ok() : api.delete_ref(ref);
  }
  ROSETCTL_RETURN_IF_ERROR(check_no_restores_of(volume));
  std::string policy = value_or_empty(volume.parameters, kParamDeletePolicy);
  std::string node_id = value_or_empty(volume.context, kRosetNodeId);
  if (policy == "retain" || node_id.empty()) {
    spdlog::info("roset: volume \"{}\" deleted; its folder \"{}\" is retained", volume.name,
                 value_or_empty(volume.context, kRosetRootPath));
    return Status::ok();
  }
  return api.delete_node(node_id, policy == "permanent");
}

Expected<int64_t> RosetProvider::available_capacity() const {
  // Roset reports no quota; folders are limited only by the mount's bucket.
  return std::numeric_limits<int64_t>::max();
}

VolumeCondition RosetProvider::volume_condition(const VolumeRecord& volume) const {
  return fuse_.condition(volume.id);
}

Status RosetProvider::check_volume_on_node(std::string_view /*volume_id*/) const {
  return Status::ok();  // every node reaches Roset; the folder is checked when staged
}

Status RosetProvider::stage_volume(const StageSpec& spec) {
  if (spec.capability.access_type == AccessType::kBlock) {
    return error(Code::kInvalidArgument, "Roset volumes are folders: stage them for mount access");
  }
  StringMap context = spec.volume_context;
  if (context.empty()) {
    // The CO did not send the context back; the record has it when the controller is here.
    auto record = store_.find_volume(spec.volume_id);
    if (record && record->has_value()) context = (*record)->context;
  }
  std::string folder = value_or_empty(context, kRosetRootPath);
  if (folder.empty()) {
    return error(Code::kInvalidArgument,
                 "volume_context of volume \"{}\" has no rootPath: pass the context CreateVolume "
                 "returned",
                 spec.volume_id);
  }
  ROSETCTL_RETURN_IF_ERROR(normalize_absolute_path(folder, "volume_context rootPath").status());
  auto endpoint = endpoint_for(context, spec.secrets, KeyUse::kFuse);
  if (!endpoint) return endpoint.status();
  bool read_only = value_or_empty(context, kContextReadOnly) == "true" ||
                   reader_only(spec.capability.access_mode);
  return fuse_.stage(*endpoint, FuseUser{spec.volume_id, spec.staging_path, folder, read_only});
}

Status RosetProvider::unstage_volume(std::string_view volume_id, const std::string& staging_path) {
  return fuse_.unstage(volume_id, staging_path);
}

Status RosetProvider::publish_volume(const PublishSpec& spec) {
  PublishSpec bound = spec;
  bound.readonly = spec.readonly ||
                   value_or_empty(spec.volume_context, kContextReadOnly) == "true" ||
                   fuse_.staged_read_only(spec.volume_id, spec.staging_path);
  std::string sub_path = value_or_empty(spec.volume_context, kRosetSubPath);
  if (sub_path.empty()) return NodeSide::publish_volume(bound);
  ROSETCTL_RETURN_IF_ERROR(validate_sub_path(sub_path));
  // The folder is opened without following symlinks or leaving the volume, and bound through
  // that descriptor: a symlink planted in the volume cannot aim the mount anywhere else on the
  // host (the subPath escape Kubernetes once had).
  UniqueFd staging(::open(spec.staging_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!staging.valid()) {
    return errno_status(errno,
                        fmt::format("cannot open the staging path \"{}\"", spec.staging_path));
  }
  UniqueFd inside(open_beneath(staging.get(), sub_path, O_PATH | O_DIRECTORY));
  if (!inside.valid()) {
    int failure = errno;
    struct stat last;
    if (failure == ENOTDIR &&
        ::fstatat(staging.get(), sub_path.c_str(), &last, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(last.st_mode)) {
      failure = ELOOP;  // the subPath itself is a symlink
    }
    if (failure == ENOENT || failure == ENOTDIR) {
      return error(Code::kFailedPrecondition,
                   "subPath \"{}\" is not a folder in volume \"{}\"; create it first", sub_path,
                   spec.volume_id);
    }
    if (failure == ELOOP || failure == EXDEV) {
      return error(Code::kInvalidArgument,
                   "subPath \"{}\" of volume \"{}\" passes through a symlink or another mount; "
                   "refused, as it could lead outside the volume",
                   sub_path, spec.volume_id);
    }
    return errno_status(failure, fmt::format("cannot open subPath \"{}\"", sub_path));
  }
  bound.staging_path = fmt::format("/proc/self/fd/{}", inside.get());
  return NodeSide::publish_volume(bound);
}

VolumeCondition RosetProvider::node_condition(std::string_view volume_id) const {
  return fuse_.condition(volume_id);
}

Status RosetProvider::reconcile_node(const VolumeLocker& /*lock*/) {
  return fuse_.reconcile([this](const FuseUser& user) {
    auto staging = store_.find_staging(user.volume_id, user.staging_path);
    return !staging || staging->has_value();  // on a read error, keep it
  });
}

Status RosetProvider::revive_staging(std::string_view volume_id, const std::string& staging_path) {
  return fuse_.revive(volume_id, staging_path);
}

}  // namespace rosetctl
