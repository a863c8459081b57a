// The routing controller's gRPC entry points (routing_controller.h): each call is answered here
// (daemon/controller_service.h) or by the node its id names.
#include "cluster/routing_controller.h"

#include "cluster/replica_parameters.h"
#include "core/clock.h"

namespace rosetctl {
namespace {

// A replica's target for a volume to be made on `node`: a registered node, another one.
Status check_replica_target(StateStore& store, const ReplicaAsked& replica,
                            const std::string& node) {
  if (replica.to_node == node) {
    return error(Code::kInvalidArgument,
                 "parameter {}: the volume is placed on node \"{}\"; its replica must be on "
                 "another node",
                 kReplicaToNodeParameter, node);
  }
  auto registered = store.find_node(replica.to_node);
  if (!registered) return registered.status();
  if (!*registered) {
    return error(Code::kInvalidArgument, "parameter {}: node \"{}\" is not a registered node",
                 kReplicaToNodeParameter, replica.to_node);
  }
  return Status::ok();
}

}  // namespace

Status RoutingController::create_volume(const csi::v1::CreateVolumeRequest& given,
                                        csi::v1::CreateVolumeResponse* response,
                                        const std::string& clone_by) {
  // A replica asked for at creation (replicaToNode, replicaEvery): taken out first, as no
  // provider knows them, and recorded once the volume is made on its node.
  std::optional<ReplicaAsked> replica;
  csi::v1::CreateVolumeRequest without;
  if (asks_for_replica(given)) {
    without = given;
    auto asked = take_replica_parameters(&without);
    if (!asked) return asked.status();
    replica = std::move(*asked);
  }
  const csi::v1::CreateVolumeRequest& request = replica ? without : given;
  // The request's own checks come first, wherever the volume is to be made.
  auto checked = here_.create_checks(request);
  if (!checked) return checked.status();
  const std::string& own = context_.options.node_id;
  if (checked->provider->volumes_are_node_local()) {
    auto node = placement_of(request, own);
    if (node) {
      auto placed = uncordoned_placement(*node, request);
      if (!placed) return placed.status();
      // Past a cordoned node: the request made again with only the node chosen in its topology,
      // which the node (or this host) then takes for its own.
      if (*placed != node) {
        return create_volume(narrowed_to_node(given, placed->value_or(own)), response, clone_by);
      }
    }
    if (node) {
      if (replica) ROSETCTL_RETURN_IF_ERROR(check_replica_target(context_.store, *replica, *node));
      ROSETCTL_RETURN_IF_ERROR(create_on_node(*node, request, response));
      if (!replica) return Status::ok();
      return context_.store.put_volume_replica(response->volume().volume_id(), replica->to_node,
                                               replica->every_seconds, unix_now_seconds());
    }
    // Here, a clone of a node's volume: by way of a snapshot of it there, as on any node.
    if (auto source = volume_source_node(request); source && !replica && clone_by.empty() &&
                                                   context_.options.role != PluginRole::kNode &&
                                                   source->node != own) {
      return clone_on_node(own, *source, request, &*checked, response);
    }
  }
  if (replica) {
    return error(Code::kUnimplemented,
                 "parameter {}: only a local volume placed on a node has a replica (not one of "
                 "the controller host, nor of another provider)",
                 kReplicaToNodeParameter);
  }
  return here_.create_volume(request, *checked, response, clone_by);
}

Status RoutingController::get_capacity(const csi::v1::GetCapacityRequest& request,
                                       csi::v1::GetCapacityResponse* response) {
  auto provider = here_.capacity_provider(request);
  if (!provider) return provider.status();
  // Another node's capacity is that node's answer.
  if ((*provider)->volumes_are_node_local()) {
    if (auto node = capacity_node(request, context_.options.node_id))
      return capacity_on_node(*node, request, response);
  }
  return here_.get_capacity(request, response);
}

grpc::ServerUnaryReactor* RoutingController::CreateVolume(
    Request* call, const csi::v1::CreateVolumeRequest* request,
    csi::v1::CreateVolumeResponse* response) {
  return serve(call, "CreateVolume", request, response,
               [=, this] { return create_volume(*request, response, clone_by_snapshot(*call)); });
}

grpc::ServerUnaryReactor* RoutingController::DeleteVolume(
    Request* call, const csi::v1::DeleteVolumeRequest* request,
    csi::v1::DeleteVolumeResponse* response) {
  return serve(call, "DeleteVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::DeleteVolume, *request,
                           response, Code::kUnavailable,
                           [&] { return here_.delete_volume(*request); });
  });
}

grpc::ServerUnaryReactor* RoutingController::ControllerPublishVolume(
    Request* call, const csi::v1::ControllerPublishVolumeRequest* request,
    csi::v1::ControllerPublishVolumeResponse* response) {
  return serve(call, "ControllerPublishVolume", request, response, [=, this] {
    // To an unknown node: NOT_FOUND here, from the controller's registry, before a volume placed
    // on a node is asked there (where only its own node is known).
    if (node_of_id(request->volume_id(), context_.options.node_id))
      ROSETCTL_RETURN_IF_ERROR(here_.check_node_registered(request->node_id()));
    return here_or_on_node(
        request->volume_id(), &csi::v1::Controller::Stub::ControllerPublishVolume, *request,
        response, Code::kNotFound, [&] { return here_.publish_volume(*request, response); });
  });
}

grpc::ServerUnaryReactor* RoutingController::ControllerUnpublishVolume(
    Request* call, const csi::v1::ControllerUnpublishVolumeRequest* request,
    csi::v1::ControllerUnpublishVolumeResponse* response) {
  return serve(call, "ControllerUnpublishVolume", request, response, [=, this] {
    return here_or_on_node(
        request->volume_id(), &csi::v1::Controller::Stub::ControllerUnpublishVolume, *request,
        response, Code::kNotFound, [&] { return here_.unpublish_volume(*request); });
  });
}

grpc::ServerUnaryReactor* RoutingController::ValidateVolumeCapabilities(
    Request* call, const csi::v1::ValidateVolumeCapabilitiesRequest* request,
    csi::v1::ValidateVolumeCapabilitiesResponse* response) {
  return serve(call, "ValidateVolumeCapabilities", request, response, [=, this] {
    return here_or_on_node(
        request->volume_id(), &csi::v1::Controller::Stub::ValidateVolumeCapabilities, *request,
        response, Code::kNotFound, [&] { return here_.validate_capabilities(*request, response); });
  });
}

grpc::ServerUnaryReactor* RoutingController::ListVolumes(Request* call,
                                                         const csi::v1::ListVolumesRequest* request,
                                                         csi::v1::ListVolumesResponse* response) {
  return serve(call, "ListVolumes", request, response,
               [=, this] { return list_volumes_everywhere(*call, *request, response); });
}

grpc::ServerUnaryReactor* RoutingController::GetCapacity(Request* call,
                                                         const csi::v1::GetCapacityRequest* request,
                                                         csi::v1::GetCapacityResponse* response) {
  return serve(call, "GetCapacity", request, response,
               [=, this] { return get_capacity(*request, response); });
}

grpc::ServerUnaryReactor* RoutingController::ControllerGetCapabilities(
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

grpc::ServerUnaryReactor* RoutingController::ControllerGetVolume(
    Request* call, const csi::v1::ControllerGetVolumeRequest* request,
    csi::v1::ControllerGetVolumeResponse* response) {
  return serve(call, "ControllerGetVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::ControllerGetVolume,
                           *request, response, Code::kNotFound,
                           [&] { return here_.get_volume(*request, response); });
  });
}

grpc::ServerUnaryReactor* RoutingController::ControllerExpandVolume(
    Request* call, const csi::v1::ControllerExpandVolumeRequest* request,
    csi::v1::ControllerExpandVolumeResponse* response) {
  return serve(call, "ControllerExpandVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::ControllerExpandVolume,
                           *request, response, Code::kNotFound,
                           [&] { return here_.expand_volume(*request, response); });
  });
}

grpc::ServerUnaryReactor* RoutingController::CreateSnapshot(
    Request* call, const csi::v1::CreateSnapshotRequest* request,
    csi::v1::CreateSnapshotResponse* response) {
  return serve(call, "CreateSnapshot", request, response, [=, this] {
    return here_or_on_node(request->source_volume_id(), &csi::v1::Controller::Stub::CreateSnapshot,
                           *request, response, Code::kNotFound,
                           [&] { return here_.create_snapshot(*request, response); });
  });
}

grpc::ServerUnaryReactor* RoutingController::DeleteSnapshot(
    Request* call, const csi::v1::DeleteSnapshotRequest* request,
    csi::v1::DeleteSnapshotResponse* response) {
  return serve(call, "DeleteSnapshot", request, response, [=, this] {
    return here_or_on_node(request->snapshot_id(), &csi::v1::Controller::Stub::DeleteSnapshot,
                           *request, response, Code::kUnavailable,
                           [&] { return here_.delete_snapshot(*request); });
  });
}

grpc::ServerUnaryReactor* RoutingController::ListSnapshots(
    Request* call, const csi::v1::ListSnapshotsRequest* request,
    csi::v1::ListSnapshotsResponse* response) {
  return serve(call, "ListSnapshots", request, response,
               [=, this] { return list_snapshots_everywhere(*call, *request, response); });
}

grpc::ServerUnaryReactor* RoutingController::ControllerModifyVolume(
    Request* call, const csi::v1::ControllerModifyVolumeRequest* request,
    csi::v1::ControllerModifyVolumeResponse* response) {
  return serve(call, "ControllerModifyVolume", request, response, [=, this] {
    return here_or_on_node(request->volume_id(), &csi::v1::Controller::Stub::ControllerModifyVolume,
                           *request, response, Code::kNotFound,
                           [&] { return here_.modify_volume(*request); });
  });
}

}  // namespace rosetctl
