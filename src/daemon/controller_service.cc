// This host's Controller (controller_service.h): validation, locking and idempotency around the
// provider's create/delete, and the queries. Publication is controller_publish.cc's, snapshots
// controller_snapshots.cc's.
#include "daemon/controller_service.h"

#include <fmt/ranges.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#include "core/validate.h"
#include "daemon/content_source.h"
#include "daemon/controller_checks.h"
#include "daemon/convert.h"
#include "daemon/csi_secrets.h"
#include "daemon/volume_locks.h"
#include "daemon/volume_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {
namespace {

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

int64_t unix_now() {
  return static_cast<int64_t>(::time(nullptr));
}

// How long a copy of a volume waits for a NodeStage, NodeUnstage or NodePublish of it.
constexpr std::chrono::seconds kStagingPatience{30};

}  // namespace

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
  // names none). A source of another node is that node's (local) and found there
  // (remote_sources.h).
  const auto& source = request.volume_content_source();
  auto here = [this](const std::string& id) {
    return !context_.remote_sources || !context_.remote_sources->names_a_host(id);
  };
  std::string provider;
  if (source.has_snapshot() && here(source.snapshot().snapshot_id())) {
    auto snapshot = context_.store.find_snapshot(source.snapshot().snapshot_id());
    if (!snapshot) return snapshot.status();
    if (snapshot->has_value()) provider = (*snapshot)->provider;
  } else if (source.has_volume() && here(source.volume().volume_id())) {
    auto volume = context_.store.find_volume(source.volume().volume_id());
    if (!volume) return volume.status();
    if (volume->has_value()) provider = (*volume)->provider;
  }
  if (provider.empty()) return &context_.providers.default_provider();
  return context_.providers.by_name(provider);
}

Expected<CreateChecks> ControllerService::create_checks(
    const csi::v1::CreateVolumeRequest& request) {
  ROSETCTL_RETURN_IF_ERROR(validate_name(request.name(), "name"));
  CreateChecks checked;
  auto capabilities = capabilities_from_proto(request.volume_capabilities());
  if (!capabilities) return capabilities.status();
  checked.capabilities = std::move(*capabilities);
  auto access_type = single_access_type(checked.capabilities);
  if (!access_type) return access_type.status();
  checked.access_type = *access_type;
  auto range = capacity_from_proto(request.capacity_range());
  if (!range) return range.status();
  checked.range = *range;
  auto source_key = content_source_key(request);
  if (!source_key) return source_key.status();
  checked.source_key = std::move(*source_key);
  checked.parameters = to_map(request.parameters());
  auto provider = create_provider(checked.parameters, request);
  if (!provider) return provider.status();
  checked.provider = *provider;
  auto controller = controller_side(**provider);
  if (!controller) return controller.status();
  checked.controller = *controller;
  return checked;
}

Status ControllerService::create_volume(const csi::v1::CreateVolumeRequest& request,
                                        const CreateChecks& checked,
                                        csi::v1::CreateVolumeResponse* response,
                                        const std::string& clone_by) {
  Provider* const provider = checked.provider;
  ControllerSide* const controller = checked.controller;
  const CapacityRange& range = checked.range;
  const StringMap& parameters = checked.parameters;
  if (provider->volumes_are_node_local() &&
      !topology_allows_node(request.accessibility_requirements(), context_.options.node_id)) {
    return error(Code::kResourceExhausted,
                 "accessibility_requirements.requisite does not include this node ({}={}); "
                 "{} volumes live on the node that creates them",
                 kTopologyNodeKey, context_.options.node_id, provider->name());
  }

  CreateVolumeSpec spec{request.name(),       range.required,
                        range.limit,          provider_parameters(parameters),
                        checked.capabilities, csi_secrets(request.secrets())};
  spec.mutable_parameters = to_map(request.mutable_parameters());
  // Only the kind for now (the source is resolved below): a restore or clone is the kind of
  // volume its source is, which the provider checks once it knows.
  if (request.has_volume_content_source()) {
    spec.source.kind = request.volume_content_source().has_snapshot()
                           ? VolumeSource::Kind::kSnapshot
                           : VolumeSource::Kind::kVolume;
  }
  ROSETCTL_RETURN_IF_ERROR(controller->validate_create(spec));
  ROSETCTL_RETURN_IF_ERROR(controller->validate_mutable(spec));

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
    // The old copy of a volume moved away keeps its name here until deleted: it is not the
    // volume asked for (a move back would otherwise be answered with the stale copy).
    ROSETCTL_RETURN_IF_ERROR(
        refuse_moving_volume(context_, (**existing).id, false)
            .with_context(fmt::format("volume name \"{}\" here", request.name())));
    record = std::move(**existing);
    std::string why = incompatibility(record, provider->name(), parameters, range,
                                      checked.access_type, checked.source_key);
    if (why.empty()) why = mutable_mismatch(record.mutable_parameters, spec.mutable_parameters);
    if (why.empty()) why = controller->incompatibility(record, spec);
    if (!why.empty()) {
      return error(Code::kAlreadyExists, "volume \"{}\" already exists and {}", request.name(),
                   why);
    }
  } else {
    // Held until the volume is recorded, so the source cannot be deleted while it is copied.
    auto source =
        resolve_content_source(context_, request, *provider, range.required, range.limit, clone_by);
    if (!source) return source.status();
    spec.source = source->source;
    spec.required_bytes = std::max(spec.required_bytes, source->capacity_bytes);
    spec.progress = context_.options.progress;
    spec.hold_stagings = staging_locker();
    auto provisioned = controller->create_volume(spec);
    if (!provisioned)
      return provisioned.status().with_context(fmt::format("volume \"{}\"", request.name()));
    record.id = provisioned->id;
    record.name = request.name();
    record.provider = std::string(provider->name());
    record.capacity_bytes = provisioned->capacity_bytes;
    record.parameters = parameters;
    record.context = provisioned->context;
    record.access_type = checked.access_type == AccessType::kBlock ? "block" : "mount";
    record.content_source = checked.source_key;
    record.created_at = unix_now();
    record.mutable_parameters = provisioned->mutable_parameters;
    if (Status inserted = context_.store.insert_volume(record); !inserted) {
      // Unrecorded, what the provider made would never be found again: take it back.
      (void)controller->delete_volume_with(record, spec.secrets);
      return inserted;
    }
  }
  fill_volume(record, *provider, context_.options.node_id, response->mutable_volume());
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

Expected<Provider*> ControllerService::capacity_provider(
    const csi::v1::GetCapacityRequest& request) {
  StringMap parameters = to_map(request.parameters());
  return parameters.contains(std::string(kProviderParameter))
             ? context_.providers.by_name(parameters.at(std::string(kProviderParameter)))
             : Expected<Provider*>(&context_.providers.default_provider());
}

Status ControllerService::get_capacity(const csi::v1::GetCapacityRequest& request,
                                       csi::v1::GetCapacityResponse* response) {
  auto provider = capacity_provider(request);
  if (!provider) return provider.status();
  if ((*provider)->volumes_are_node_local() && request.has_accessible_topology()) {
    auto it = request.accessible_topology().segments().find(kTopologyNodeKey);
    // Nothing can be provisioned in a segment without this node. (Another node's capacity is
    // that node's answer: the routing controller asks it, cluster/routing_controller.h.)
    if (it == request.accessible_topology().segments().end() ||
        it->second != context_.options.node_id) {
      response->set_available_capacity(0);
      return Status::ok();
    }
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
  // A growth of a copy that is moving away (or has) would not travel with it.
  ROSETCTL_RETURN_IF_ERROR(refuse_moving_volume(context_, request.volume_id()));
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

}  // namespace rosetctl
