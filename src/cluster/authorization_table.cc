// The entries of authorization_table.h, and their printed form.
#include "cluster/authorization_table.h"

#include <fmt/format.h>

#include <string>
#include <unordered_map>

namespace rosetctl {
namespace {

using enum NodeBinding;

// On a node, the Controller service takes only its controller's calls: the controller places
// volumes there, and nobody makes them behind its back (an admin goes through the controller).
constexpr Callers kPlacing = kControllers;

const std::vector<MethodAccess> kTable = {
    // CSI Identity: what the plugin is, whether it is ready.
    {"/csi.v1.Identity/GetPluginInfo", kEveryRole, kEveryRole, kAnyNode, "the plugin's name"},
    {"/csi.v1.Identity/GetPluginCapabilities", kEveryRole, kEveryRole, kAnyNode,
     "what the plugin offers"},
    {"/csi.v1.Identity/Probe", kEveryRole, kEveryRole, kAnyNode, "readiness"},

    // CSI Controller: a consumer (a node certificate) manages the controller host's volumes
    // and its own node's; the controller places volumes on nodes with its own certificate.
    {"/csi.v1.Controller/CreateVolume", kEveryRole, kPlacing, kOwnNodes,
     "placed by topology and content source"},
    {"/csi.v1.Controller/DeleteVolume", kEveryRole, kPlacing, kOwnNodes, "by volume id"},
    {"/csi.v1.Controller/ControllerPublishVolume", kEveryRole, kPlacing, kOwnNodes,
     "to the node named"},
    {"/csi.v1.Controller/ControllerUnpublishVolume", kEveryRole, kPlacing, kOwnNodes,
     "from the node named"},
    {"/csi.v1.Controller/ValidateVolumeCapabilities", kEveryRole, kPlacing, kOwnNodes,
     "by volume id"},
    {"/csi.v1.Controller/ListVolumes", kEveryRole, kPlacing, kOwnNodes, "the combined list"},
    {"/csi.v1.Controller/GetCapacity", kEveryRole, kPlacing, kOwnNodes, "of the topology named"},
    {"/csi.v1.Controller/ControllerGetCapabilities", kEveryRole, kPlacing, kAnyNode,
     "what the controller offers"},
    {"/csi.v1.Controller/CreateSnapshot", kEveryRole, kPlacing, kOwnNodes, "of the volume named"},
    {"/csi.v1.Controller/DeleteSnapshot", kEveryRole, kPlacing, kOwnNodes, "by snapshot id"},
    {"/csi.v1.Controller/ListSnapshots", kEveryRole, kPlacing, kOwnNodes, "the combined list"},
    {"/csi.v1.Controller/ControllerExpandVolume", kEveryRole, kPlacing, kOwnNodes, "by volume id"},
    {"/csi.v1.Controller/ControllerGetVolume", kEveryRole, kPlacing, kOwnNodes, "by volume id"},
    {"/csi.v1.Controller/ControllerModifyVolume", kEveryRole, kPlacing, kOwnNodes, "by volume id"},

    // CSI Node: mounts on a node, made for that node alone.
    {"/csi.v1.Node/NodeStageVolume", kNobody, kEveryRole, kOwnNode, "mounts on the node"},
    {"/csi.v1.Node/NodeUnstageVolume", kNobody, kEveryRole, kOwnNode, "unmounts on the node"},
    {"/csi.v1.Node/NodePublishVolume", kNobody, kEveryRole, kOwnNode, "mounts on the node"},
    {"/csi.v1.Node/NodeUnpublishVolume", kNobody, kEveryRole, kOwnNode, "unmounts on the node"},
    {"/csi.v1.Node/NodeGetVolumeStats", kNobody, kEveryRole, kOwnNode, "a mount's usage"},
    {"/csi.v1.Node/NodeExpandVolume", kNobody, kEveryRole, kOwnNode, "grows a staged volume"},
    {"/csi.v1.Node/NodeGetCapabilities", kNobody, kEveryRole, kOwnNode, "what the node offers"},
    {"/csi.v1.Node/NodeGetInfo", kNobody, kEveryRole, kOwnNode, "the node's id and topology"},

    // rosetctl.v1.Registry: a node registers, refreshes and removes itself alone.
    {"/rosetctl.v1.Registry/RegisterNode", kEveryRole, kNobody, kOwnNodes,
     "the node being registered"},
    {"/rosetctl.v1.Registry/GetNode", kEveryRole, kNobody, kOwnNodes, "a node's entry"},
    {"/rosetctl.v1.Registry/TouchNode", kEveryRole, kNobody, kOwnNodes, "the node's heartbeat"},
    {"/rosetctl.v1.Registry/ListNodes", kEveryRole, kNobody, kAnyNode,
     "addresses, for direct pulls"},
    {"/rosetctl.v1.Registry/RemoveNode", kEveryRole, kNobody, kOwnNodes, "the node removed"},
    // Whether new volumes may be placed on a node: an operator's (a node certificate would
    // cordon others' nodes, or uncordon its own against the operator's drain).
    {"/rosetctl.v1.Registry/CordonNode", kAdmins, kNobody, kOwnNodes,
     "takes a node out of placement or back: an operator's"},
    // Asked by the source of a transfer about a grant a reader showed it: of its own store only.
    {"/rosetctl.v1.Registry/CheckTransferGrant", kNodes, kNobody, kOwnNodes,
     "a transfer grant of the node's own store"},

    // rosetctl.v1.Catalog: what the CLI asks a controller beside CSI. On a node, only its
    // controller asks, about the node's volumes and snapshots (names and placed ids a node
    // certificate gives are bound to its own nodes by the handler, catalog_everywhere.cc).
    {"/rosetctl.v1.Catalog/FindVolume", kEveryRole, kPlacing, kOwnNodes, "a volume by name"},
    {"/rosetctl.v1.Catalog/GetVolumeDetails", kEveryRole, kPlacing, kOwnNodes, "by volume id"},
    {"/rosetctl.v1.Catalog/FindSnapshot", kEveryRole, kPlacing, kOwnNodes, "a snapshot by name"},
    {"/rosetctl.v1.Catalog/ListSnapshotDetails", kEveryRole, kPlacing, kOwnNodes, "by volume id"},
    {"/rosetctl.v1.Catalog/DiffSnapshots", kEveryRole, kPlacing, kOwnNodes, "by snapshot id"},
    // Re-reading stored data is an operator's; a node re-reads its snapshots for its controller,
    // which forwards an operator's call there (catalog_everywhere.cc), as it does diffs.
    {"/rosetctl.v1.Catalog/VerifySnapshots", kAdminsAndControllers, kPlacing, kOwnNodes,
     "re-reads the snapshots' stored data: an operator's"},
    {"/rosetctl.v1.Catalog/CollectGarbage", kAdminsAndControllers, kNobody, kOwnNodes,
     "the controller host's store: an operator's"},
    // A node's CHAP secrets: only its own (the request's node_id is the caller), and only of a
    // volume published to it (publish_secrets_here checks).
    {"/rosetctl.v1.Catalog/GetPublishSecrets", kEveryRole, kNobody, kOwnNodes,
     "the node's secrets of a volume published to it"},
    // A step of `volume move` (pause, finish, cancel): an operator's, through the controller,
    // which sends it to the node holding the volume; no node moves a volume on its own.
    {"/rosetctl.v1.Catalog/SetVolumeMove", kAdminsAndControllers, kPlacing, kOwnNodes,
     "pauses or retires a volume moving away: an operator's"},
    // A volume's replica on another node (`volume replicate`): an operator's, answered by the
    // controller from its own store; its loop does the rounds in process. No node sets one.
    {"/rosetctl.v1.Catalog/SetVolumeReplica", kAdmins, kNobody, kOwnNodes,
     "keeps a volume's latest snapshot on another node: an operator's"},

    // rosetctl.v1.NodeState: a node's own mounts and the attach lock of its CLI runs.
    {"/rosetctl.v1.NodeState/GetNodeVolumes", kNobody, kEveryRole, kOwnNode,
     "the node's stagings and mounts"},
    {"/rosetctl.v1.NodeState/ResolveTarget", kNobody, kEveryRole, kOwnNode, "a target on the node"},
    {"/rosetctl.v1.NodeState/HoldAttachLock", kNobody, kEveryRole, kOwnNode,
     "a connect's turn on the node"},

    // rosetctl.v1.ObjectStore: snapshots moving between nodes; the receiver does the work, and
    // reads another node's store only with the controller's grant for that transfer.
    {"/rosetctl.v1.ObjectStore/LookupSnapshot", kNobody, kEveryRole, kGrantedReceiver,
     "reads the node's store"},
    {"/rosetctl.v1.ObjectStore/FetchObjects", kNobody, kEveryRole, kGrantedReceiver,
     "reads the node's store"},
    {"/rosetctl.v1.ObjectStore/PullSnapshot", kNobody, kEveryRole, kOwnNode,
     "writes into the node's store"},

    // rosetctl.v1.Enrollment: a node plugin without a certificate yet shows a Kubernetes token
    // that proves its node (cluster/enrollment_service.h). The one call such a peer may make.
    {"/rosetctl.v1.Enrollment/IssueNodeCertificate", kUnauthenticated, kNobody, kAnyNode,
     "a node certificate for the node a TokenReview names"},
};

std::string callers_text(Callers callers, NodeBinding binding) {
  if (callers == kNobody) return "-";
  std::string out;
  auto add = [&out](std::string_view role) {
    if (!out.empty()) out += ", ";
    out += role;
  };
  if (callers & kUnauthenticated) add("a peer without a certificate (enrollment listener)");
  if (callers & kAdmins) add("admin");
  if (callers & kControllers) add("controller");
  if (callers & kNodes) {
    switch (binding) {
      case kAnyNode:
        add("any node");
        break;
      case kOwnNodes:
        add("node (its own nodes)");
        break;
      case kOwnNode:
        add("node (itself)");
        break;
      case kGrantedReceiver:
        add("node (itself or granted)");
        break;
    }
  }
  return out;
}

}  // namespace

const std::vector<MethodAccess>& authorization_table() {
  return kTable;
}

const MethodAccess* find_method_access(std::string_view method) {
  static const auto* const kByName = [] {
    auto* map = new std::unordered_map<std::string_view, const MethodAccess*>();
    for (const MethodAccess& entry : kTable)
      (*map)[entry.method] = &entry;
    return map;
  }();
  auto it = kByName->find(method);
  return it == kByName->end() ? nullptr : it->second;
}

bool node_side_service(std::string_view method) {
  return method.starts_with("/csi.v1.Node/") || method.starts_with("/rosetctl.v1.NodeState/") ||
         method.starts_with("/rosetctl.v1.ObjectStore/");
}

bool reads_a_commit_store(std::string_view method) {
  const MethodAccess* access = find_method_access(method);
  return access != nullptr && access->node_binding == kGrantedReceiver;
}

std::string authorization_table_markdown() {
  std::string out =
      "| method | on a controller | on a node | what the call touches |\n"
      "|---|---|---|---|\n";
  for (const MethodAccess& entry : kTable) {
    out += fmt::format("| `{}` | {} | {} | {} |\n", entry.method,
                       callers_text(entry.on_controller, entry.node_binding),
                       callers_text(entry.on_node, entry.node_binding), entry.why);
  }
  return out;
}

}  // namespace rosetctl
