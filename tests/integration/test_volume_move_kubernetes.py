"""Moving a Kubernetes volume to another node (issue 38, item 4; docs/KUBERNETES.md, "Moving a
volume to another node"). A PersistentVolume's node affinity cannot change, so the procedure binds
the claim to a new PersistentVolume naming the moved volume: this test makes, over the plugins' own
unix sockets, the CSI calls a CO makes along that procedure (external-provisioner's CreateVolume,
external-attacher's ControllerPublish, kubelet's NodeStage and NodePublish, the old
PersistentVolume's DeleteVolume), with the operator's `rosetctl volume move` between them.

The lab of test_volume_move.py: a controller and two nodes (consumer-a, consumer-b), each its own
network namespace, state directory and mTLS certificate. The sockets are files, so the test
reaches each plugin's as kubelet on that host would."""
from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest

from controller_site import build_site
from snapshot_trees import describe_tree
from test_placement import local_id
from test_snapshot_streaming import Nodes, differences_across_hosts, fill_varied

CLAIM_VOLUME = "pvc-6c1b2a7e-0d41-4f7e-9c55-2f3e8a9b1c00"  # the name external-provisioner gives


@pytest.fixture
def nodes(host_lab, rosetctl_binary) -> Nodes:
    site = build_site(host_lab)
    yield Nodes(site)
    site.assert_no_secrets_printed()


class Plugin:
    """One plugin's CSI socket, called as a CO calls it."""

    def __init__(self, csi, socket: Path):
        self.pb2 = csi.pb2
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.controller = csi.grpc.ControllerStub(self.channel)
        self.node = csi.grpc.NodeStub(self.channel)

    def refused(self, call, request) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as failure:
            call(request, timeout=60)
        return failure.value


def mount_capability(pb2):
    return pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(),
                                access_mode=pb2.VolumeCapability.AccessMode(
                                    mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))


class Kubelet:
    """kubelet's side on one node: its paths for one pod, stage and publish, and back."""

    def __init__(self, plugin: Plugin, host_dir: Path, pod: str):
        self.plugin, self.pb2 = plugin, plugin.pb2
        root = host_dir / "kubelet"
        self.staging = root / "plugins/kubernetes.io/csi/rosetctl.io" / pod / "globalmount"
        self.target = root / "pods" / pod / "volumes/kubernetes.io~csi/data/mount"
        self.staging.parent.mkdir(parents=True, exist_ok=True)
        self.target.parent.mkdir(parents=True, exist_ok=True)

    def start_pod(self, volume_id: str, publish_context, volume_context) -> Path:
        node, capability = self.plugin.node, mount_capability(self.pb2)
        node.NodeStageVolume(self.pb2.NodeStageVolumeRequest(
            volume_id=volume_id, publish_context=publish_context, volume_context=volume_context,
            staging_target_path=str(self.staging), volume_capability=capability), timeout=60)
        node.NodePublishVolume(self.pb2.NodePublishVolumeRequest(
            volume_id=volume_id, publish_context=publish_context, volume_context=volume_context,
            staging_target_path=str(self.staging), target_path=str(self.target),
            volume_capability=capability), timeout=60)
        return self.target

    def stop_pod(self, volume_id: str) -> None:
        node = self.plugin.node
        node.NodeUnpublishVolume(self.pb2.NodeUnpublishVolumeRequest(
            volume_id=volume_id, target_path=str(self.target)), timeout=60)
        node.NodeUnstageVolume(self.pb2.NodeUnstageVolumeRequest(
            volume_id=volume_id, staging_target_path=str(self.staging)), timeout=60)


def test_a_claim_is_rebound_to_its_volume_moved_to_another_node_with_the_calls_a_co_makes(nodes, csi):
    site, alice, pb2 = nodes.site, nodes.site.alice, csi.pb2
    controller = Plugin(csi, site.controller.dir / "csi.sock")
    on_a, on_b = Plugin(csi, nodes.a_host.dir / "csi.sock"), Plugin(csi, nodes.b_host.dir / "csi.sock")
    info_a = on_a.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=60)
    info_b = on_b.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=60)
    topology_a, topology_b = dict(info_a.accessible_topology.segments), dict(info_b.accessible_topology.segments)
    assert topology_a != topology_b, (topology_a, topology_b)

    # The claim's volume, provisioned for a pod scheduled on A (WaitForFirstConsumer).
    made = controller.controller.CreateVolume(pb2.CreateVolumeRequest(
        name=CLAIM_VOLUME, volume_capabilities=[mount_capability(pb2)],
        accessibility_requirements=pb2.TopologyRequirement(
            requisite=[pb2.Topology(segments=topology_a)], preferred=[pb2.Topology(segments=topology_a)])),
        timeout=120).volume
    old_id, old_attributes = made.volume_id, dict(made.volume_context)  # the old PV's spec.csi
    assert [dict(t.segments) for t in made.accessible_topology] == [topology_a]
    assert local_id(old_id, "consumer-a")

    # The pod on A writes, then the workload is scaled to zero (kubelet and the attacher undo).
    published = controller.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
        volume_id=old_id, node_id=info_a.node_id, volume_capability=mount_capability(pb2),
        volume_context=old_attributes), timeout=60)
    kubelet_a = Kubelet(on_a, nodes.a_host.dir, "pod-on-a")
    mounted = kubelet_a.start_pod(old_id, published.publish_context, old_attributes)
    fill_varied(mounted)
    (mounted / "big.bin").write_bytes(os.urandom(3 * 2**20))
    expected = describe_tree(mounted)
    kubelet_a.stop_pod(old_id)
    controller.controller.ControllerUnpublishVolume(pb2.ControllerUnpublishVolumeRequest(
        volume_id=old_id, node_id=info_a.node_id), timeout=60)

    # The operator moves it (by the claim's volume name, as `kubectl get pv` shows it).
    moved = alice.ok_json("volume", "move", CLAIM_VOLUME, "--to-node", "consumer-b", timeout=300)
    new_id = moved["volume_id"]
    assert moved["old_volume_id"] == old_id and local_id(new_id, "consumer-b"), moved

    # The new PersistentVolume: volumeHandle the new id, the old volumeAttributes as they were,
    # node affinity B's topology, which the controller now reports for the volume.
    listed = {e.volume.volume_id: e for e in controller.controller.ListVolumes(
        pb2.ListVolumesRequest(), timeout=60).entries}
    assert [dict(t.segments) for t in listed[new_id].volume.accessible_topology] == [topology_b], listed[new_id]

    # A pod still holding the old PersistentVolume is refused, saying where the volume went.
    stale = controller.refused(controller.controller.ControllerPublishVolume, pb2.ControllerPublishVolumeRequest(
        volume_id=old_id, node_id=info_a.node_id, volume_capability=mount_capability(pb2),
        volume_context=old_attributes))
    assert stale.code() == grpc.StatusCode.FAILED_PRECONDITION and new_id in stale.details(), stale
    stale_stage = on_a.refused(on_a.node.NodeStageVolume, pb2.NodeStageVolumeRequest(
        volume_id=old_id, staging_target_path=str(kubelet_a.staging),
        volume_capability=mount_capability(pb2), volume_context=old_attributes))
    assert stale_stage.code() == grpc.StatusCode.FAILED_PRECONDITION and new_id in stale_stage.details(), stale_stage

    # The workload scaled up again, its claim bound to the new PersistentVolume: scheduled on B.
    published = controller.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
        volume_id=new_id, node_id=info_b.node_id, volume_capability=mount_capability(pb2),
        volume_context=old_attributes), timeout=60)
    kubelet_b = Kubelet(on_b, nodes.b_host.dir, "pod-on-b")
    mounted = kubelet_b.start_pod(new_id, published.publish_context, old_attributes)
    lines = differences_across_hosts(expected, describe_tree(mounted))
    assert not lines, "expected the pod on B to see what the pod on A wrote:\n" + "\n".join(lines)
    (mounted / "after-the-move.txt").write_text("written on B\n")

    # The old PersistentVolume deleted with reclaimPolicy Delete: A's copy goes, B's stays.
    source = nodes.a_host.state_dir / "volumes" / local_id(old_id, "consumer-a")
    assert source.is_dir()
    controller.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=old_id), timeout=120)
    controller.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=old_id), timeout=120)  # retried
    assert not source.exists()
    assert (mounted / "after-the-move.txt").read_text() == "written on B\n"
    assert [v["id"] for v in alice.volumes()] == [new_id]

    kubelet_b.stop_pod(new_id)
    controller.controller.ControllerUnpublishVolume(pb2.ControllerUnpublishVolumeRequest(
        volume_id=new_id, node_id=info_b.node_id), timeout=60)
    controller.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=new_id), timeout=120)
    assert alice.volumes() == []
    for plugin in (controller, on_a, on_b):
        plugin.channel.close()
