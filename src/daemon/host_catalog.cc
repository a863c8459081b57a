// The Catalog's answers from this host: lookups in the state store, and snapshot maintenance
// through the providers.
#include "daemon/host_catalog.h"

#include <algorithm>
#include <map>

#include "core/validate.h"
#include "daemon/catalog_convert.h"
#include "daemon/convert.h"
#include "daemon/snapshot_lookup.h"
#include "daemon/volume_moves.h"

namespace rosetctl {
namespace {

constexpr auto kMaxGcPatience = std::chrono::minutes(10);

}  // namespace

Status HostCatalog::find_volume_here(const std::string& name_or_id,
                                     v1::FindVolumeResponse* response) {
  auto named = context_.store.find_volume_by_name(name_or_id);
  if (!named) return named.status();
  // A volume moved to another node is that node's by its name now; this old copy answers to
  // its id alone (volume_moves.h).
  if (named->has_value()) {
    auto move = context_.store.find_volume_move((*named)->id);
    if (!move) return move.status();
    if (move->has_value() && (*move)->moved) named->reset();
  }
  if (named->has_value()) {
    response->set_volume_id((*named)->id);
    return Status::ok();
  }
  auto by_id = context_.store.find_volume(name_or_id);
  if (!by_id) return by_id.status();
  if (!by_id->has_value()) {
    return error(Code::kNotFound, "no volume is named {} or has that id",
                 display_quoted(name_or_id));
  }
  response->set_volume_id((*by_id)->id);
  return Status::ok();
}

Status HostCatalog::volume_details_here(const v1::GetVolumeDetailsRequest& request,
                                        v1::GetVolumeDetailsResponse* response) {
  for (const std::string& id : request.volume_ids()) {
    auto record = context_.store.find_volume(id);
    if (!record) return record.status();
    if (!record->has_value()) continue;
    v1::VolumeDetails* details = response->add_volumes();
    details->set_volume_id(id);
    fill_map((*record)->mutable_parameters, details->mutable_mutable_parameters());
  }
  return Status::ok();
}

Status HostCatalog::list_snapshots_here(const v1::ListSnapshotDetailsRequest& request,
                                        std::vector<v1::SnapshotDetails>* out) {
  std::vector<SnapshotRecord> records;
  if (request.snapshot_ids().empty()) {
    auto all = context_.store.list_snapshots("", 0, request.source_volume_id());
    if (!all) return all.status();
    records = std::move(*all);
  } else {
    for (const std::string& id : request.snapshot_ids()) {
      auto found = context_.store.find_snapshot(id);
      if (!found) return found.status();
      if (found->has_value()) records.push_back(std::move(**found));
    }
  }
  for (const SnapshotRecord& record : records)
    fill_snapshot_details(record, &out->emplace_back());
  return Status::ok();
}

Status HostCatalog::diff_here(const std::string& from_reference, const std::string& to_reference,
                              v1::DiffSnapshotsResponse* response) {
  auto from = find_snapshot_by_reference(context_.store, from_reference);
  if (!from) return from.status();
  auto to = find_snapshot_by_reference(context_.store, to_reference);
  if (!to) return to.status();
  if (from->provider != to->provider) {
    return error(Code::kInvalidArgument,
                 "snapshots of providers \"{}\" and \"{}\" cannot be compared", from->provider,
                 to->provider);
  }
  for (const SnapshotRecord* snapshot : {&*from, &*to}) {
    if (!snapshot->ready) {
      return error(Code::kFailedPrecondition, "snapshot {} ({}) is not ready: no commit yet",
                   snapshot->id, display_quoted(snapshot->name));
    }
  }
  auto provider = context_.providers.by_name(from->provider);
  if (!provider) return provider.status();
  auto snapshots = snapshot_side(**provider);
  if (!snapshots) return snapshots.status();
  auto changes = (*snapshots)->diff_snapshots(*from, *to);
  if (!changes) return changes.status();
  fill_snapshot_details(*from, response->mutable_from());
  fill_snapshot_details(*to, response->mutable_to());
  for (const TreeChange& change : *changes)
    fill_tree_change(change, response->add_changes());
  return Status::ok();
}

Status HostCatalog::verify_here(const v1::VerifySnapshotsRequest& request,
                                v1::VerifySnapshotsResponse* response) {
  std::vector<SnapshotRecord> records;
  if (request.references().empty()) {
    auto all = context_.store.list_snapshots("", 0);
    if (!all) return all.status();
    records = std::move(*all);
  }
  for (const std::string& reference : request.references()) {
    auto record = find_snapshot_by_reference(context_.store, reference);
    if (!record) return record.status();
    records.push_back(std::move(*record));
  }
  std::map<std::string, std::vector<SnapshotRecord>> by_provider;
  for (SnapshotRecord& record : records)
    by_provider[record.provider].push_back(std::move(record));
  if (by_provider.empty()) by_provider["local"];  // still report unrecorded leftovers
  SnapshotVerification total;
  for (const auto& [name, snapshots] : by_provider) {
    auto provider = context_.providers.by_name(name);
    if (!provider) return provider.status();
    auto side = snapshot_side(**provider);
    if (!side) return side.status();
    auto checked = (*side)->verify_snapshots(snapshots, context_.options.progress);
    // Verifying everything: a provider whose snapshots are kept elsewhere (a Roset commit) has
    // nothing here to re-hash. Saying so must not stop the check of the local store.
    if (!checked && checked.status().code() == Code::kUnimplemented &&
        request.references().empty()) {
      total.notes.push_back(fmt::format(
          "{} snapshot(s) of provider \"{}\" not verified: its provider keeps their data ({})",
          snapshots.size(), name, checked.status().message()));
      continue;
    }
    if (!checked) return checked.status();
    total.snapshots += checked->snapshots;
    total.objects += checked->objects;
    total.bytes += checked->bytes;
    total.problems.insert(total.problems.end(), checked->problems.begin(), checked->problems.end());
    total.notes.insert(total.notes.end(), checked->notes.begin(), checked->notes.end());
    total.damaged.insert(total.damaged.end(), checked->damaged.begin(), checked->damaged.end());
  }
  std::sort(total.damaged.begin(), total.damaged.end());
  fill_verification(total, response);
  return Status::ok();
}

Status HostCatalog::collect(const v1::CollectGarbageRequest& request,
                            v1::CollectGarbageResponse* response) {
  auto patience = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(std::max<int64_t>(request.patience_ms(), 0)), kMaxGcPatience);
  for (const std::string& name : context_.providers.names()) {
    auto provider = context_.providers.by_name(name);
    if (!provider) return provider.status();
    SnapshotSide* snapshots = (*provider)->snapshots();
    if (snapshots == nullptr) continue;  // nothing stored, nothing to collect
    auto collected = snapshots->collect_garbage(patience);
    if (!collected && collected.status().code() == Code::kUnimplemented) continue;
    if (!collected) return collected.status();
    if (!collected->ran) {
      return error(Code::kAborted,
                   "the {} snapshot storage stayed busy for {} ms (commits or restores are "
                   "running); retry later",
                   name, patience.count());
    }
    response->set_snapshots(response->snapshots() + collected->snapshots);
    response->set_unrecorded_removed(response->unrecorded_removed() +
                                     collected->unrecorded_removed);
    response->set_objects_removed(response->objects_removed() + collected->objects_removed);
    response->set_bytes_reclaimed(response->bytes_reclaimed() + collected->bytes_reclaimed);
  }
  return Status::ok();
}

}  // namespace rosetctl
