// Catalog/SetVolumeReplica (routing_catalog.h): a placed volume's replica set, removed or made
// due in the controller's own store; the replica loop (replica_loop.h) does the rounds. Every
// check comes before the one write, so a refused request changes nothing.
#include "cluster/placed_id.h"
#include "cluster/replica_parameters.h"
#include "cluster/replica_schedule.h"
#include "cluster/routing_catalog.h"
#include "core/clock.h"
#include "core/validate.h"
#include "daemon/call_log.h"

namespace rosetctl {
namespace {

void fill_replica(const VolumeReplicaRecord& record, v1::VolumeReplica* replica) {
  replica->set_to_node(record.to_node);
  replica->set_every_seconds(record.every_seconds);
  replica->set_snapshot_id(record.snapshot_id);
  replica->set_last_success_unix(record.last_success_unix);
  replica->set_last_bytes_sent(record.last_bytes_sent);
  replica->set_rounds(record.rounds);
  replica->set_last_error(record.last_error);
  replica->set_last_error_unix(record.last_error_unix);
  replica->set_next_due_unix(record.next_due_unix);
}

}  // namespace

grpc::ServerUnaryReactor* RoutingCatalog::SetVolumeReplica(
    Request* call, const v1::SetVolumeReplicaRequest* request,
    v1::SetVolumeReplicaResponse* response) {
  return answer(handlers_, call, "SetVolumeReplica", request, response,
                [=, this] { return set_volume_replica(*request, response); });
}

Status RoutingCatalog::set_volume_replica(const v1::SetVolumeReplicaRequest& request,
                                          v1::SetVolumeReplicaResponse* response) {
  ROSETCTL_RETURN_IF_ERROR(validate_id(request.volume_id(), "volume_id"));
  if (context_.options.role == PluginRole::kNode) {
    return error(Code::kFailedPrecondition,
                 "replicas are kept by the controller: ask it (--controller)");
  }
  const std::string& id = request.volume_id();
  // When the replica is due now: answered as such even once the loop has taken the round up, so
  // that `--now` can tell its round (which moves it on) from one already running.
  const int64_t due = unix_now_seconds();
  if (request.off()) {
    ROSETCTL_RETURN_IF_ERROR(context_.store.remove_volume_replica(id));
    return Status::ok();
  }
  if (request.now()) {
    ROSETCTL_RETURN_IF_ERROR(context_.store.set_volume_replica_due(id, due));
  } else {
    ROSETCTL_RETURN_IF_ERROR(validate_node_id(request.to_node(), "to_node"));
    ROSETCTL_RETURN_IF_ERROR(replica::check_every(request.every_seconds(), "every_seconds"));
    auto placed = decode_placed_id(id);
    if (!placed || placed->node == context_.options.node_id) {
      return error(Code::kUnimplemented,
                   "volume {} lives on the controller host: replicas of its volumes are not done "
                   "yet; only a volume placed on a node has one",
                   id);
    }
    if (placed->node == request.to_node()) {
      return error(Code::kInvalidArgument,
                   "volume {} is on node \"{}\": its replica must be on another node", id,
                   request.to_node());
    }
    auto node = context_.store.find_node(request.to_node());
    if (!node) return node.status();
    if (!*node) {
      return error(Code::kNotFound,
                   "node \"{}\" is not a registered node (`rosetctl node list` lists them)",
                   request.to_node());
    }
    // The volume must be there: a replica of nothing would only fail every round.
    v1::GetVolumeDetailsRequest asked;
    asked.add_volume_ids(id);
    v1::GetVolumeDetailsResponse there;
    ROSETCTL_RETURN_IF_ERROR(nodes_.call(placed->node, &v1::Catalog::Stub::GetVolumeDetails, asked,
                                         &there, Code::kNotFound));
    if (there.volumes().empty()) {
      return error(Code::kNotFound, "volume {} does not exist on node \"{}\"", id, placed->node);
    }
    ROSETCTL_RETURN_IF_ERROR(
        context_.store.put_volume_replica(id, request.to_node(), request.every_seconds(), due));
  }
  auto record = context_.store.find_volume_replica(id);
  if (!record) return record.status();
  if (*record) {
    fill_replica(**record, response->mutable_replica());
    response->mutable_replica()->set_next_due_unix(due);
  }
  return Status::ok();
}

Status RoutingCatalog::add_replicas(v1::GetVolumeDetailsResponse* response) {
  for (v1::VolumeDetails& details : *response->mutable_volumes()) {
    auto record = context_.store.find_volume_replica(details.volume_id());
    if (!record) return record.status();
    if (*record) fill_replica(**record, details.mutable_replica());
  }
  return Status::ok();
}

bool asks_for_replica(const csi::v1::CreateVolumeRequest& request) {
  return request.parameters().contains(kReplicaToNodeParameter) ||
         request.parameters().contains(kReplicaEveryParameter);
}

Expected<ReplicaAsked> take_replica_parameters(csi::v1::CreateVolumeRequest* request) {
  auto& parameters = *request->mutable_parameters();
  auto to = parameters.find(kReplicaToNodeParameter);
  auto every = parameters.find(kReplicaEveryParameter);
  if (to == parameters.end() || every == parameters.end()) {
    return error(Code::kInvalidArgument, "parameters {} and {} go together",
                 kReplicaToNodeParameter, kReplicaEveryParameter);
  }
  ReplicaAsked asked;
  asked.to_node = to->second;
  ROSETCTL_RETURN_IF_ERROR(validate_node_id(asked.to_node, kReplicaToNodeParameter));
  auto seconds = replica::parse_every(every->second, kReplicaEveryParameter);
  if (!seconds) return seconds.status();
  asked.every_seconds = *seconds;
  parameters.erase(kReplicaToNodeParameter);
  parameters.erase(kReplicaEveryParameter);
  return asked;
}

}  // namespace rosetctl
