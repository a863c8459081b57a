// Controller RPCs: validation, locking and idempotency around the provider's create/delete.
#include "daemon/controller_service.h"

#include <fmt/ranges.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#include "core/validate.h"
#include "daemon/call_log.h"
#include "daemon/content_source.h"
#include "daemon/convert.h"
#include "daemon/csi_secrets.h"
#include "daemon/node_mapping.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"

namespace rosetctl {
namespace {

constexpr std::string_view kProviderParameter = "provider";

struct CapacityRange {
  int64_t required = 0;
  int64_t limit = 0;  // 0: none
};

Expected<CapacityRange> capacity_from_proto(const csi::v1::CapacityRange& range) {
  if (range.required_bytes() < 0 || range.limit_bytes() < 0) {
    return error(Code::kInvalidArgument, "capacity_range must not be negative");
  }
  if (range.limit_bytes() > 0 && range.limit_bytes() < range.required_bytes()) {
    return error(Code::kInvalidArgument,
                 "capacity_range.limit_bytes ({}) is less than required_bytes ({})",
                 range.limit_bytes(), range.required_bytes());
  }
  return CapacityRange{range.required_bytes(), range.limit_bytes()};
}

// Parameters that decide what a volume is: everything but the provisioner's PVC/PV metadata
// and the provider choice (compared on its own, as it may come from a default).
StringMap defining_parameters(const StringMap& parameters) {
  StringMap out;
  for (const auto& [key, value] : parameters) {
    if (!key.starts_with(kKubernetesParameterPrefix) && key != kProviderParameter)
      out.emplace(key, value);
  }
  return out;
}

// Parameters meant for the provider: without the daemon's own `provider` key.
StringMap provider_parameters(const StringMap& parameters) {
  StringMap out = parameters;
  out.erase(std::string(kProviderParameter));
  return out;
}

// "snapshot <id>" or "volume \"<id>\"" for a VolumeRecord::content_source.
std::string describe_source(std::string_view key) {
  if (key.starts_with(kContentSourceVolume)) {
    return fmt::format("volume \"{}\"", key.substr(kContentSourceVolume.size()));
  }
  return fmt::format("snapshot {}", key.substr(kContentSourceSnapshot.size()));
}

// The first of `wanted` that the volume's mutable parameters do not have, as a phrase; "" when
// they all match (keys not given say nothing, as in ControllerModifyVolume).
std::string mutable_mismatch(const StringMap& existing, const StringMap& wanted) {
  for (const auto& [key, value] : wanted) {
    auto it = existing.find(key);
    if (it == existing.end() || it->second != value) {
      return fmt::format("its mutable parameter {} is {}, not {}", display_quoted(key),
                         it == existing.end() ? "unset" : display_quoted(it->second),
                         display_quoted(value));
    }
  }
  return "";
}

// Empty when an existing volume satisfies a repeated CreateVolume, else what differs.
std::string incompatibility(const VolumeRecord& existing, std::string_view provider,
                            const StringMap& parameters, const CapacityRange& range,
                            AccessType access_type, std::string_view content_source) {
  if (existing.provider != provider) {
    return fmt::format("it uses provider \"{}\", not \"{}\"", existing.provider, provider);
  }
  if (existing.content_source != content_source) {
    return existing.content_source.empty()
               ? "it was created empty, not from a snapshot or volume"
               : fmt::format("it was created from {}", describe_source(existing.content_source));
  }
  if (defining_parameters(existing.parameters) != defining_parameters(parameters)) {
    return "it was created with different parameters";
  }
  if (existing.capacity_bytes < range.required ||
      (range.limit > 0 && existing.capacity_bytes > range.limit)) {
    return fmt::format("its capacity {} bytes is outside the requested range",
                       existing.capacity_bytes);
  }
  std::string_view wanted = access_type == AccessType::kBlock ? "block" : "mount";
  if (existing.access_type != wanted) {
    return fmt::format("it is a {} volume, not {}", existing.access_type, wanted);
  }
  return "";
}

Expected<std::vector<Capability>> capabilities_from_proto(
    const google::protobuf::RepeatedPtrField<csi::v1::VolumeCapability>& protos) {
  if (protos.empty()) return error(Code::kInvalidArgument, "volume_capabilities is required");
  std::vector<Capability> out;
  for (int i = 0; i < protos.size(); ++i) {
    auto capability = capability_from_proto(protos[i], fmt::format("volume_capabilities[{}]", i));
    if (!capability) return capability.status();
    out.push_back(std::move(*capability));
  }
  return out;
}

// One access type per volume: mixing block and mount in one request is contradictory.
Expected<AccessType> single_access_type(const std::vector<Capability>& capabilities) {
  AccessType type = capabilities.front().access_type;
  for (const Capability& capability : capabilities) {
    if (capability.access_type != type) {
      return error(Code::kInvalidArgument,
                   "volume_capabilities mix block and mount access; a volume is one or the other");
    }
  }
  return type;
}

// Where the volume a request clones lives, when its id names a node.
std::optional<PlacedId> volume_source_node(const csi::v1::CreateVolumeRequest& request) {
  if (!request.volume_content_source().has_volume()) return std::nullopt;
  return decode_placed_id(request.volume_content_source().volume().volume_id());
}

bool topology_allows_node(const csi::v1::TopologyRequirement& requirement,
                          std::string_view node_id) {
  if (requirement.requisite().empty()) return true;
  for (const auto& topology : requirement.requisite()) {
    auto it = topology.segments().find(kTopologyNodeKey);
    if (it != topology.segments().end() && it->second == node_id) return true;
  }
  return false;
}

// The most specific reason first: a mount on this node, then a staging, then a mapping.
Status check_not_in_use(StateStore& store, const VolumeRecord& volume) {
  auto mounts = store.node_publications(volume.id);
  if (!mounts) return mounts.status();
  if (!mounts->empty()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is still connected at \"{}\"; disconnect it first", volume.name,
                 mounts->front().target_path);
  }
  auto stagings = store.stagings(volume.id);
  if (!stagings) return stagings.status();
  if (!stagings->empty()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is still staged at \"{}\"; unstage it first (NodeUnstageVolume; "
                 "from a shell: rosetctl volume disconnect {} --staging)",
                 volume.name, stagings->front().staging_path, volume.name);
  }
  auto publications = store.controller_publications(volume.id);
  if (!publications) return publications.status();
  if (!publications->empty()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is still mapped to node \"{}\"; disconnect or unmap it first",
                 volume.name, publications->front().node_id);
  }
  return Status::ok();
}

// ControllerPublishVolume's target: this plugin's own node, or one registered with it
// (rosetctl.v1.Registry). NOT_FOUND is the spec's code for a node that does not exist.
Status check_node_registered(ServiceContext& context, std::string_view node_id) {
  if (node_id == context.options.node_id) return Status::ok();
  auto node = context.store.find_node(node_id);
  if (!node) return node.status();
  if (node->has_value()) return Status::ok();
  return error(Code::kNotFound,
               "node \"{}\" is not registered with this controller (rosetctl node list shows the "
               "registered nodes; a node registers with `rosetctl node register`, `rosetctl serve "
               "--role node --controller ...` or its first CLI call)",
               node_id);
}

// The registry's record of a node; for this plugin's own node when it never registered, a
// record with only its id.
Expected<NodeRecord> node_record(ServiceContext& context, std::string_view node_id) {
  auto node = context.store.find_node(node_id);
  if (!node) return node.status();
  if (node->has_value()) return std::move(**node);
  NodeRecord own;
  own.node_id = std::string(node_id);
  return own;
}

int64_t unix_now() {
  return static_cast<int64_t>(::time(nullptr));
}

// How long a copy of a volume waits for a NodeStage, NodeUnstage or NodePublish of it.
constexpr std::chrono::seconds kStagingPatience{30};

}  // namespace

Expected<StringMap> ControllerService::map_to_node(
    const LoadedVolume& volume, const csi::v1::ControllerPublishVolumeRequest& request) {
  auto node = node_record(context_, request.node_id());
  if (!node) return node.status();
  return map_volume_to_node(volume, *node, csi_secrets(request.secrets()));
}

StagingLocker ControllerService::staging_locker() const {
  return [&locks = context_.locks](std::string_view volume_id) {
    return locks.wait_lock(stage_lock_key(volume_id), LockMode::kExclusive,
                           busy_message(fmt::format("volume \"{}\" on this node", volume_id)),
                           kStagingPatience);
  };
}

// ---------------------------------------------------------------- CreateVolume / DeleteVolume

Expected<Provider*> ControllerService::create_provider(
    const StringMap& parameters, const csi::v1::CreateVolumeRequest& request) {
  auto named = parameters.find(std::string(kProviderParameter));
  if (named != parameters.end()) return context_.providers.by_name(named->second);
  // A restore or clone is made by its source's provider: only it can (README's roset restore
  // names none). A source of another node is that node's (local) and found there.
  const auto& source = request.volume_content_source();
  std::string provider;
  if (source.has_snapshot() && !decode_placed_id(source.snapshot().snapshot_id())) {
    auto snapshot = context_.store.find_snapshot(source.snapshot().snapshot_id());
    if (!snapshot) return snapshot.status();
    if (snapshot->has_value()) provider = (*snapshot)->provider;
  } else if (source.has_volume() && !decode_placed_id(source.volume().volume_id())) {
    auto volume = context_.store.find_volume(source.volume().volume_id());
    if (!volume) return volume.status();
    if (volume->has_value()) provider = (*volume)->provider;
  }
  if (provider.empty()) return &context_.providers.default_provider();
  return context_.providers.by_name(provider);
}

Status ControllerService::create_volume(const csi::v1::CreateVolumeRequest& request,
                                        csi::v1::CreateVolumeResponse* response,
                                        const std::string& clone_by) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(request.name(), "name"));
  auto capabilities = capabilities_from_proto(request.volume_capabilities());
  if (!capabilities) return capabilities.status();
  auto access_type = single_access_type(*capabilities);
  if (!access_type) return access_type.status();
  auto range = capacity_from_proto(request.capacity_range());
  if (!range) return range.status();
  auto source_key = content_source_key(request);
  if (!source_key) return source_key.status();

  StringMap parameters = to_map(request.parameters());
  auto provider = create_provider(parameters, request);
  if (!provider) return provider.status();
  auto controller = controller_side(**provider);
  if (!controller) return controller.status();
  if ((*provider)->volumes_are_node_local()) {
    if (auto node = placement_of(request)) return create_on_node(*node, request, response);
    // Here, a clone of a node's volume: by way of a snapshot of it there, as on any node.
    if (auto source = volume_source_node(request); source && clone_by.empty() &&
                                                   context_.options.role != PluginRole::kNode &&
                                                   source->node != context_.options.node_id) {
      return clone_on_node(context_.options.node_id, *source, request, response);
    }
  }
  if ((*provider)->volumes_are_node_local() &&
      !topology_allows_node(request.accessibility_requirements(), context_.options.node_id)) {
    return error(Code::kResourceExhausted,
                 "accessibility_requirements.requisite does not include this node ({}={}); "
                 "{} volumes live on the node that creates them",
                 kTopologyNodeKey, context_.options.node_id, (*provider)->name());
  }

  CreateVolumeSpec spec{request.name(), range->required,
                        range->limit,   provider_parameters(parameters),
                        *capabilities,  csi_secrets(request.secrets())};
  spec.mutable_parameters = to_map(request.mutable_parameters());
  // Only the kind for now (the source is resolved below): a restore or clone is the kind of
  // volume its source is, which the provider checks once it knows.
  if (request.has_volume_content_source()) {
    spec.source.kind = request.volume_content_source().has_snapshot()
                           ? VolumeSource::Kind::kSnapshot
                           : VolumeSource::Kind::kVolume;
  }
  ROSETCTL_RETURN_IF_ERROR((*controller)->validate_create(spec));
  ROSETCTL_RETURN_IF_ERROR((*controller)->validate_mutable(spec));

  auto lock =
      context_.locks.try_lock(name_lock_key(request.name()), LockMode::kExclusive,
                              busy_message(fmt::format("volume name \"{}\"", request.name())));
  if (!lock) return lock.status();

  // Ids and names share one namespace on the command line, so a name may not be another
  // volume's id.
  auto clash = context_.store.find_volume(request.name());
  if (!clash) return clash.status();
  if (clash->has_value()) {
    return error(Code::kAlreadyExists, "name \"{}\" is the id of an existing volume",
                 request.name());
  }

  auto existing = context_.store.find_volume_by_name(request.name());
  if (!existing) return existing.status();
  VolumeRecord record;
  if (existing->has_value()) {
    record = std::move(**existing);
    std::string why =
        incompatibility(record, (*provider)->name(), parameters, *range, *access_type, *source_key);
    if (why.empty()) why = mutable_mismatch(record.mutable_parameters, spec.mutable_parameters);
    if (why.empty()) why = (*controller)->incompatibility(record, spec);
    if (!why.empty()) {
      return error(Code::kAlreadyExists, "volume \"{}\" already exists and {}", request.name(),
                   why);
    }
  } else {
    // Held until the volume is recorded, so the source cannot be deleted while it is copied.
    auto source = resolve_content_source(context_, request, **provider, range->required,
                                         range->limit, clone_by);
    if (!source) return source.status();
    spec.source = source->source;
    spec.required_bytes = std::max(spec.required_bytes, source->capacity_bytes);
    spec.progress = context_.options.progress;
    spec.hold_stagings = staging_locker();
    auto provisioned = (*controller)->create_volume(spec);
    if (!provisioned)
      return provisioned.status().with_context(fmt::format("volume \"{}\"", request.name()));
    record.id = provisioned->id;
    record.name = request.name();
    record.provider = std::string((*provider)->name());
    record.capacity_bytes = provisioned->capacity_bytes;
    record.parameters = parameters;
    record.context = provisioned->context;
    record.access_type = *access_type == AccessType::kBlock ? "block" : "mount";
    record.content_source = *source_key;
    record.created_at = unix_now();
    record.mutable_parameters = provisioned->mutable_parameters;
    if (Status inserted = context_.store.insert_volume(record); !inserted) {
      // Unrecorded, what the provider made would never be found again: take it back.
      (void)(*controller)->delete_volume_with(record, spec.secrets);
      return inserted;
    }
  }
  fill_volume(record, **provider, context_.options.node_id, response->mutable_volume());
  return Status::ok();
}

Status ControllerService::delete_volume(const csi::v1::DeleteVolumeRequest& request) {
  if (request.volume_id().empty()) return error(Code::kInvalidArgument, "volume_id is required");
  // An id we could never have issued names no volume: deleting it is already done.
  if (!check_volume_id(request.volume_id())) return Status::ok();
  auto lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kExclusive);
  if (!lock) return lock.status();

  auto volume = load_volume(context_, request.volume_id());
  if (!volume) return volume.status().code() == Code::kNotFound ? Status::ok() : volume.status();

  // Refuse while anything uses it, before any data is touched (the store re-checks atomically).
  ROSETCTL_RETURN_IF_ERROR(check_not_in_use(context_.store, volume->record));
  auto controller = controller_side(*volume->provider);
  if (!controller) return controller.status();
  ROSETCTL_RETURN_IF_ERROR(
      (*controller)->delete_volume_with(volume->record, csi_secrets(request.secrets())));
  return context_.store.delete_volume(volume->record.id);
}

// ---------------------------------------------------------------- publish / unpublish

Status ControllerService::publish_volume(const csi::v1::ControllerPublishVolumeRequest& request,
                                         csi::v1::ControllerPublishVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  if (!request.has_volume_capability()) {
    return error(Code::kInvalidArgument, "volume_capability is required");
  }
  auto capability = capability_from_proto(request.volume_capability(), "volume_capability");
  if (!capability) return capability.status();

  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();
  auto publish_lock = context_.locks.try_lock(
      node_publish_lock_key(request.volume_id(), request.node_id()), LockMode::kExclusive,
      busy_message(
          fmt::format("volume \"{}\" on node \"{}\"", request.volume_id(), request.node_id())));
  if (!publish_lock) return publish_lock.status();

  auto volume = load_volume(context_, request.volume_id());
  if (!volume) return volume.status();
  // Held until the publication is recorded, so the node cannot be removed in between.
  auto node_lock =
      context_.locks.try_lock(node_lock_key(request.node_id()), LockMode::kShared,
                              busy_message(fmt::format("node \"{}\"", request.node_id())));
  if (!node_lock) return node_lock.status();
  // A node's own registry is not the controller's (it holds no other node): for a volume placed
  // on it, the controller checked the target is registered before it forwarded the call.
  if (volume->provider->publish_needs_registered_node() &&
      context_.options.role != PluginRole::kNode) {
    ROSETCTL_RETURN_IF_ERROR(check_node_registered(context_, request.node_id()));
  }
  if (volume->provider->volumes_are_node_local() && request.node_id() != context_.options.node_id) {
    // The node exists (registered), but this volume cannot reach it: the spec's "volume
    // incompatible with the node" (FAILED_PRECONDITION), not an unknown node (NOT_FOUND).
    return error(Code::kFailedPrecondition,
                 "node \"{}\" cannot reach volume \"{}\": {} volumes live on the node that "
                 "created them and can only be published to node \"{}\"; to use one on node "
                 "\"{}\", make it there (volume create --node {}; in CSI, its topology), and "
                 "for volumes that other hosts attach, use --provider roset or --provider iscsi",
                 request.node_id(), volume->record.name, volume->provider->name(),
                 context_.options.node_id, request.node_id(), request.node_id());
  }
  std::string wanted_type = capability->access_type == AccessType::kBlock ? "block" : "mount";
  if (volume->record.access_type != wanted_type) {
    return error(Code::kInvalidArgument,
                 "volume \"{}\" is a {} volume; it cannot be published for {} access",
                 volume->record.name, volume->record.access_type, wanted_type);
  }

  std::string key = capability_key(*capability);
  auto existing =
      context_.store.find_controller_publication(request.volume_id(), request.node_id());
  if (!existing) return existing.status();
  if (existing->has_value()) {
    const ControllerPublication& publication = **existing;
    if (publication.readonly != request.readonly() || publication.capability != key) {
      return error(Code::kAlreadyExists,
                   "volume \"{}\" is already published to node \"{}\" with a different capability "
                   "or read-only flag",
                   volume->record.name, request.node_id());
    }
    // Mapped again: a target daemon may have lost what it had (mapping is idempotent).
    auto mapped = map_to_node(*volume, request);
    if (!mapped) return mapped.status();
    // What this mapping says wins over what the last one said (the CHAP account of new
    // secrets), and is recorded; what it does not say (no secrets this time) stays.
    ControllerPublication updated = publication;
    for (const auto& [key, value] : *mapped)
      updated.publish_context[key] = value;
    if (updated.publish_context != publication.publish_context) {
      ROSETCTL_RETURN_IF_ERROR(context_.store.upsert_controller_publication(updated));
    }
    fill_map(updated.publish_context, response->mutable_publish_context());
    return Status::ok();
  }

  auto others = context_.store.controller_publications(request.volume_id());
  if (!others) return others.status();
  AccessMode mode = capability->access_mode;
  bool single_node =
      mode == AccessMode::kSingleNodeWriter || mode == AccessMode::kSingleNodeReaderOnly ||
      mode == AccessMode::kSingleNodeSingleWriter || mode == AccessMode::kSingleNodeMultiWriter;
  if (single_node && !others->empty()) {
    return error(Code::kFailedPrecondition,
                 "volume \"{}\" is already published to node \"{}\" and its access mode {} allows "
                 "one node",
                 volume->record.name, others->front().node_id, access_mode_name(mode));
  }
  if (context_.options.max_volumes_per_node > 0) {
    auto count = context_.store.count_controller_publications_on_node(request.node_id());
    if (!count) return count.status();
    if (*count >= context_.options.max_volumes_per_node) {
      return error(Code::kResourceExhausted,
                   "node \"{}\" already has {} volumes published (the limit)", request.node_id(),
                   *count);
    }
  }

  // The node can reach the volume before the publication is recorded: a crash in between
  // leaves a mapping the retry makes again, never a record of a mapping that does not exist.
  auto mapped = map_to_node(*volume, request);
  if (!mapped) return mapped.status();
  ControllerPublication publication{request.volume_id(),
                                    request.node_id(),
                                    request.readonly(),
                                    key,
                                    {{"readonly", request.readonly() ? "true" : "false"}}};
  publication.publish_context.insert(mapped->begin(), mapped->end());
  ROSETCTL_RETURN_IF_ERROR(context_.store.upsert_controller_publication(publication));
  fill_map(publication.publish_context, response->mutable_publish_context());
  return Status::ok();
}

Status ControllerService::unpublish_volume(
    const csi::v1::ControllerUnpublishVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (!request.node_id().empty()) {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.node_id(), "node_id"));
  }
  auto volume_lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kShared);
  if (!volume_lock) return volume_lock.status();

  auto publications = context_.store.controller_publications(request.volume_id());
  if (!publications) return publications.status();
  // A volume or node we do not know is, by definition, not published there: OK (spec).
  for (const auto& publication : *publications) {
    if (!request.node_id().empty() && publication.node_id != request.node_id()) continue;
    auto lock = context_.locks.try_lock(
        node_publish_lock_key(request.volume_id(), publication.node_id), LockMode::kExclusive,
        busy_message(
            fmt::format("volume \"{}\" on node \"{}\"", request.volume_id(), publication.node_id)));
    if (!lock) return lock.status();
    auto volume = load_volume(context_, request.volume_id());
    if (!volume) return volume.status();
    auto node = node_record(context_, publication.node_id);
    if (!node) return node.status();
    // Unmapped first: a crash before the record goes leaves a record the retry unmaps again.
    ROSETCTL_RETURN_IF_ERROR(unmap_volume_from_node(*volume, *node));
    ROSETCTL_RETURN_IF_ERROR(
        context_.store.delete_controller_publication(request.volume_id(), publication.node_id));
  }
  return Status::ok();
}

// ---------------------------------------------------------------- queries

Status ControllerService::validate_capabilities(
    const csi::v1::ValidateVolumeCapabilitiesRequest& request,
    csi::v1::ValidateVolumeCapabilitiesResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  auto capabilities = capabilities_from_proto(request.volume_capabilities());
  if (!capabilities) return capabilities.status();
  auto volume = load_volume(context_, request.volume_id());
  if (!volume) return volume.status();

  CreateVolumeSpec spec;
  spec.name = volume->record.name;
  spec.parameters = provider_parameters(to_map(request.parameters()));
  spec.capabilities = *capabilities;
  auto controller = controller_side(*volume->provider);
  if (!controller) return controller.status();
  Status supported = (*controller)->validate_create(spec);
  if (supported) {
    // Judged against the volume as it is, whatever parameters this request repeats.
    supported = (*controller)->check_mutable(volume->record, to_map(request.mutable_parameters()));
  }
  if (!supported) {
    response->set_message(supported.message());
    return Status::ok();
  }
  for (const Capability& capability : *capabilities) {
    std::string type = capability.access_type == AccessType::kBlock ? "block" : "mount";
    if (type != volume->record.access_type) {
      response->set_message(fmt::format("volume \"{}\" is a {} volume", volume->record.name,
                                        volume->record.access_type));
      return Status::ok();
    }
    if (std::string why = (*controller)->capability_mismatch(volume->record, capability);
        !why.empty()) {
      response->set_message(fmt::format("volume \"{}\": {}", volume->record.name, why));
      return Status::ok();
    }
  }
  auto* confirmed = response->mutable_confirmed();
  *confirmed->mutable_volume_context() = request.volume_context();
  *confirmed->mutable_volume_capabilities() = request.volume_capabilities();
  *confirmed->mutable_parameters() = request.parameters();
  *confirmed->mutable_mutable_parameters() = request.mutable_parameters();
  return Status::ok();
}

Status ControllerService::list_volumes(const csi::v1::ListVolumesRequest& request,
                                       csi::v1::ListVolumesResponse* response) {
  if (request.max_entries() < 0) {
    return error(Code::kInvalidArgument, "max_entries must not be negative");
  }
  // The token is the id of the last volume returned; any id a provider could have issued is a
  // valid resume point, even if that volume has been deleted since.
  const std::string& token = request.starting_token();
  if (!token.empty() && (!check_volume_id(token) || !context_.providers.for_volume(token))) {
    return error(Code::kAborted,
                 "starting_token {} is not a token this plugin issued; start the listing again",
                 display_quoted(token, 128));
  }
  int limit = request.max_entries();
  auto records = context_.store.list_volumes(token, limit > 0 ? limit + 1 : 0);
  if (!records) return records.status();
  bool more = limit > 0 && static_cast<int>(records->size()) > limit;
  if (more) records->pop_back();

  for (VolumeRecord& record : *records) {
    auto provider = context_.providers.for_volume(record.id);
    if (!provider) return provider.status();
    auto* entry = response->add_entries();
    LoadedVolume volume{std::move(record), *provider};
    fill_volume(volume.record, *volume.provider, context_.options.node_id, entry->mutable_volume());
    ROSETCTL_RETURN_IF_ERROR(fill_volume_status(context_, volume, entry->mutable_status()));
  }
  if (more) response->set_next_token(response->entries().rbegin()->volume().volume_id());
  return Status::ok();
}

Status ControllerService::get_capacity(const csi::v1::GetCapacityRequest& request,
                                       csi::v1::GetCapacityResponse* response) {
  StringMap parameters = to_map(request.parameters());
  auto provider = parameters.contains(std::string(kProviderParameter))
                      ? context_.providers.by_name(parameters.at(std::string(kProviderParameter)))
                      : Expected<Provider*>(&context_.providers.default_provider());
  if (!provider) return provider.status();
  if ((*provider)->volumes_are_node_local() && request.has_accessible_topology()) {
    auto it = request.accessible_topology().segments().find(kTopologyNodeKey);
    if (it == request.accessible_topology().segments().end()) {
      response->set_available_capacity(0);  // nothing can be provisioned in that segment
      return Status::ok();
    }
    // Another node's capacity is that node's answer.
    if (it->second != context_.options.node_id)
      return capacity_on_node(it->second, request, response);
  }
  auto controller = controller_side(**provider);
  if (!controller) return controller.status();
  auto available = (*controller)->available_capacity();
  if (!available) return available.status();
  response->set_available_capacity(*available);
  return Status::ok();
}

Status ControllerService::get_volume(const csi::v1::ControllerGetVolumeRequest& request,
                                     csi::v1::ControllerGetVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  auto volume = load_volume(context_, request.volume_id());
  if (!volume) return volume.status();
  fill_volume(volume->record, *volume->provider, context_.options.node_id,
              response->mutable_volume());
  return fill_volume_status(context_, *volume, response->mutable_status());
}

Status ControllerService::expand_volume(const csi::v1::ControllerExpandVolumeRequest& request,
                                        csi::v1::ControllerExpandVolumeResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(check_volume_id(request.volume_id()));
  if (!request.has_capacity_range())
    return error(Code::kInvalidArgument, "capacity_range is required");
  auto range = capacity_from_proto(request.capacity_range());
  if (!range) return range.status();
  int64_t wanted = range->required > 0 ? range->required : range->limit;
  if (wanted == 0) {
    return error(Code::kInvalidArgument,
                 "capacity_range needs required_bytes or limit_bytes: the size to grow to");
  }
  auto lock = try_lock_volume(context_.locks, request.volume_id(), LockMode::kExclusive);
  if (!lock) return lock.status();
  auto volume = load_volume(context_, request.volume_id());
  if (!volume) return volume.status();
  if (request.has_volume_capability()) {
    auto capability = capability_from_proto(request.volume_capability(), "volume_capability");
    if (!capability) return capability.status();
    std::string_view type = capability->access_type == AccessType::kBlock ? "block" : "mount";
    if (type != volume->record.access_type) {
      return error(Code::kInvalidArgument, "volume \"{}\" is a {} volume, not {}",
                   volume->record.name, volume->record.access_type, type);
    }
  }

  int64_t current = volume->record.capacity_bytes;
  if (range->limit > 0 && current > range->limit) {
    return error(Code::kOutOfRange,
                 "volume \"{}\" is already {} bytes, above capacity_range.limit_bytes {}; volumes "
                 "never shrink",
                 volume->record.name, current, range->limit);
  }
  // A smaller required size is already satisfied; the provider answers as for a retry.
  auto controller = controller_side(*volume->provider);
  if (!controller) return controller.status();
  auto expanded = (*controller)->expand_volume(volume->record, wanted, range->limit);
  if (!expanded) {
    return expanded.status().with_context(fmt::format("volume \"{}\"", volume->record.name));
  }
  if (expanded->capacity_bytes != current) {
    ROSETCTL_RETURN_IF_ERROR(
        context_.store.update_volume_capacity(volume->record.id, expanded->capacity_bytes));
  }
  response->set_capacity_bytes(expanded->capacity_bytes);
  response->set_node_expansion_required(expanded->node_expansion_required);
  return Status::ok();
}

// ---------------------------------------------------------------- gRPC entry points

grpc::ServerUnaryReactor* ControllerService::CreateVolume(
    Request* call, const csi::v1::CreateVolumeRequest* request,
    csi::v1::CreateVolumeResponse* response) {
  return serve(call, "CreateVolume", request, response,
               [=, this] { return create_volume(*request, response, clone_by_snapshot(*call)); });
}

grpc::ServerUnaryReactor* ControllerService::DeleteVolume(
    Request* call, const csi::v1::DeleteVolumeRequest* request,
    csi::v1::DeleteVolumeResponse* response) {
  return serve(call, "DeleteVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::DeleteVolume, *request,
                           response, Code::kUnavailable, [&] { return delete_volume(*request); });
  });
}

grpc::ServerUnaryReactor* ControllerService::ControllerPublishVolume(
    Request* call, const csi::v1::ControllerPublishVolumeRequest* request,
    csi::v1::ControllerPublishVolumeResponse* response) {
  return serve(call, "ControllerPublishVolume", request, response, [=, this] {
    // To an unknown node: NOT_FOUND here, from the controller's registry, before a volume placed
    // on a node is asked there (where only its own node is known).
    auto placed = decode_placed_id(request->volume_id());
    if (placed && placed->node != context_.options.node_id)
      ROSETCTL_RETURN_IF_ERROR(check_node_registered(context_, request->node_id()));
    return here_or_on_node(request->volume_id(),
                           &csi::v1::Controller::Stub::ControllerPublishVolume, *request, response,
                           Code::kNotFound, [&] { return publish_volume(*request, response); });
  });
}

grpc::ServerUnaryReactor* ControllerService::ControllerUnpublishVolume(
    Request* call, const csi::v1::ControllerUnpublishVolumeRequest* request,
    csi::v1::ControllerUnpublishVolumeResponse* response) {
  return serve(call, "ControllerUnpublishVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(),
                           &csi::v1::Controller::Stub::ControllerUnpublishVolume, *request,
                           response, Code::kNotFound, [&] { return unpublish_volume(*request); });
  });
}

grpc::ServerUnaryReactor* ControllerService::ValidateVolumeCapabilities(
    Request* call, const csi::v1::ValidateVolumeCapabilitiesRequest* request,
    csi::v1::ValidateVolumeCapabilitiesResponse* response) {
  return serve(call, "ValidateVolumeCapabilities", request, response, [=, this] {
    return here_or_on_node(
        request->volume_id(), &csi::v1::Controller::Stub::ValidateVolumeCapabilities, *request,
        response, Code::kNotFound, [&] { return validate_capabilities(*request, response); });
  });
}

grpc::ServerUnaryReactor* ControllerService::ListVolumes(Request* call,
                                                         const csi::v1::ListVolumesRequest* request,
                                                         csi::v1::ListVolumesResponse* response) {
  return serve(call, "ListVolumes", request, response,
               [=, this] { return list_volumes_everywhere(*call, *request, response); });
}

grpc::ServerUnaryReactor* ControllerService::GetCapacity(Request* call,
                                                         const csi::v1::GetCapacityRequest* request,
                                                         csi::v1::GetCapacityResponse* response) {
  return serve(call, "GetCapacity", request, response,
               [=, this] { return get_capacity(*request, response); });
}

grpc::ServerUnaryReactor* ControllerService::ControllerGetCapabilities(
    Request* call, const csi::v1::ControllerGetCapabilitiesRequest* request,
    csi::v1::ControllerGetCapabilitiesResponse* response) {
  return answer_now(call, "ControllerGetCapabilities", request, response, [&] {
    using Rpc = csi::v1::ControllerServiceCapability::RPC;
    for (auto type : {Rpc::CREATE_DELETE_VOLUME, Rpc::PUBLISH_UNPUBLISH_VOLUME, Rpc::LIST_VOLUMES,
                      Rpc::GET_CAPACITY, Rpc::PUBLISH_READONLY, Rpc::EXPAND_VOLUME,
                      Rpc::LIST_VOLUMES_PUBLISHED_NODES, Rpc::VOLUME_CONDITION, Rpc::GET_VOLUME,
                      Rpc::CREATE_DELETE_SNAPSHOT, Rpc::LIST_SNAPSHOTS, Rpc::CLONE_VOLUME,
                      Rpc::MODIFY_VOLUME}) {
      response->add_capabilities()->mutable_rpc()->set_type(type);
    }
    return Status::ok();
  });
}

grpc::ServerUnaryReactor* ControllerService::ControllerGetVolume(
    Request* call, const csi::v1::ControllerGetVolumeRequest* request,
    csi::v1::ControllerGetVolumeResponse* response) {
  return serve(call, "ControllerGetVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::ControllerGetVolume,
                           *request, response, Code::kNotFound,
                           [&] { return get_volume(*request, response); });
  });
}

grpc::ServerUnaryReactor* ControllerService::ControllerExpandVolume(
    Request* call, const csi::v1::ControllerExpandVolumeRequest* request,
    csi::v1::ControllerExpandVolumeResponse* response) {
  return serve(call, "ControllerExpandVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::ControllerExpandVolume,
                           *request, response, Code::kNotFound,
                           [&] { return expand_volume(*request, response); });
  });
}

grpc::ServerUnaryReactor* ControllerService::CreateSnapshot(
    Request* call, const csi::v1::CreateSnapshotRequest* request,
    csi::v1::CreateSnapshotResponse* response) {
  return serve(call, "CreateSnapshot", request, response, [=, this] {
    return here_or_on_node(request->source_volume_id(), &csi::v1::Controller::Stub::CreateSnapshot,
                           *request, response, Code::kNotFound,
                           [&] { return create_snapshot(*request, response); });
  });
}

grpc::ServerUnaryReactor* ControllerService::DeleteSnapshot(
    Request* call, const csi::v1::DeleteSnapshotRequest* request,
    csi::v1::DeleteSnapshotResponse* response) {
  return serve(call, "DeleteSnapshot", request, response, [=, this] {
    return here_or_on_node(request->snapshot_id(), &csi::v1::Controller::Stub::DeleteSnapshot,
                           *request, response, Code::kUnavailable,
                           [&] { return delete_snapshot(*request); });
  });
}

grpc::ServerUnaryReactor* ControllerService::ListSnapshots(
    Request* call, const csi::v1::ListSnapshotsRequest* request,
    csi::v1::ListSnapshotsResponse* response) {
  return serve(call, "ListSnapshots", request, response,
               [=, this] { return list_snapshots_everywhere(*call, *request, response); });
}

grpc::ServerUnaryReactor* ControllerService::ControllerModifyVolume(
    Request* call, const csi::v1::ControllerModifyVolumeRequest* request,
    csi::v1::ControllerModifyVolumeResponse* response) {
  return serve(call, "ControllerModifyVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::ControllerModifyVolume,
                           *request, response, Code::kNotFound,
                           [&] { return modify_volume(*request); });
  });
}

}  // namespace rosetctl
