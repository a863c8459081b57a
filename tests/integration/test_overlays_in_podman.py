"""An overlay's pods run as rendered (issue 33 item 5), and driven as a cluster drives them.

`kubectl kustomize` renders the overlay; each pod's rosetctl container then runs with podman from
the image scripts/build-image.sh builds (the one test_container_image.py checks), with what the
YAML says: its args, its env (fieldRef spec.nodeName: the lab host's name), its securityContext
(privileged, readOnlyRootFilesystem), and its volumes as bind mounts (hostPath under the lab
host's own root directory, a bind mount of itself with shared propagation as a host's / is;
emptyDir a directory of the pod's), each with the propagation it declares (Bidirectional rshared,
HostToContainer rslave, none rprivate). Lab hosts are directories: a controller pod and a node
pod on node-a (the labelled node), a node pod on node-b; each host its own /var/lib/kubelet and
/var/lib/rosetctl.

The test then makes the calls the sidecars and kubelet make, in their order, at kubelet's own
paths: the registrar's GetPluginInfo and NodeGetInfo, the provisioner's CreateVolume with the
StorageClass's parameters, its extra metadata and the node's topology, the attacher's
ControllerPublish, kubelet's NodeStage (plugins/kubernetes.io/csi/<driver>/<sha256>/globalmount)
and NodePublish (pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount), a write seen from the host,
a snapshot and a restore from it, an expansion, a restart of each pod in the middle, then
NodeUnpublish, NodeUnstage, ControllerUnpublish, DeleteVolume.

Rendered fields this test cannot honour, and how each is checked instead:
- the sidecar containers: their images (registry.k8s.io) cannot be pulled here, so the test
  makes their CSI calls itself; their flags and sockets are checked by test_deploy_kubernetes.py;
- livenessProbe: the test asks Probe, as the livenessprobe sidecar does;
- resources, priorityClassName, tolerations, nodeSelector, serviceAccount and RBAC: API-server
  and scheduler matters; the test places the pods as the nodeSelector says (the controller on
  the labelled node) and test_deploy_kubernetes.py checks the objects;
- hostPath /dev is the machine's: the lab hosts share its devices (loop devices are the
  kernel's anyway);
- ports and the pod network: local pods talk only through unix sockets; each runs in a network
  namespace of its own (`--network=none`), so serve's metrics listener binds there.
"""
from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import grpc
import pytest

import k8s_manifests as k8s
from csi_server import CALL_TIMEOUT
from k8s_pods import Csi, Pod, kubelet_paths, lab_hosts, provisioner_parameters, snapshot_when_ready
from podman_lab import built_images, remove_podman_cgroups
from rosetctl_fixtures import skip_or_fail
from rosetctl_mounts import is_mount_point

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
MiB = 1024 * 1024
CAP_SYS_RESOURCE = 24


def can_grow_ext4_online() -> bool:
    """A mounted ext4 grows only with CAP_SYS_RESOURCE, which a privileged container has only
    where this process has it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


@pytest.fixture(scope="module")
def image():
    with built_images(SOURCE) as images:
        yield images["rosetctl"]
    remove_podman_cgroups()


@pytest.fixture
def lab():
    """({host name: LabHost}, pods, root); every pod and mount gone at the end (k8s_pods.lab_hosts)."""
    with lab_hosts() as lab:
        yield lab


def test_the_local_overlay_as_a_cluster_runs_it(image, lab, csi):
    """The whole flow, with a restart of the node plugin before it has mounts and of the
    controller in the middle."""
    local_overlay_flow(image, lab, csi, restart_node_with_mounts=False)


def test_the_local_overlay_with_the_node_plugin_restarted_while_volumes_are_mounted(image, lab, csi):
    """A rolling update of the DaemonSet while pods use volumes: the new container's mount
    namespace holds copies of the plugin's mounts with new ids, which it must know as its own,
    and the image volume's loop device, which sysfs now names relative to a detached mount (the
    old container's), by its backing file's device and inode."""
    local_overlay_flow(image, lab, csi, restart_node_with_mounts=True)


def local_overlay_flow(image, lab, csi, restart_node_with_mounts: bool):
    kubectl = k8s.kubectl_binary()
    if kubectl is None:
        skip_or_fail("kubectl is missing: install Debian's kubernetes-client (scripts/install-deps.sh)")
    objects = k8s.render(kubectl, k8s.deploy_dir(SOURCE) / "overlays" / "local")
    hosts, pods, root = lab
    by_kind = {o["kind"]: o for o in objects if o["kind"] in ("Deployment", "DaemonSet")}
    driver = next(o for o in objects if o["kind"] == "CSIDriver")["metadata"]["name"]
    storage_class = next(o for o in objects if o["kind"] == "StorageClass" and o["metadata"]["name"] == "rosetctl-local")
    assert k8s.pod_spec(by_kind["Deployment"])["nodeSelector"] == {"rosetctl.io/controller": "true"}

    def pod(kind: str, host: str) -> Csi:
        started = Pod(by_kind[kind], hosts[host], image, root / "pods")
        pods.append(started)
        return Csi(csi, started)

    node_a, node_b = pod("DaemonSet", "node-a"), pod("DaemonSet", "node-b")
    controller = pod("Deployment", "node-a")  # node-a is the labelled node
    pb2 = csi.pb2
    if not restart_node_with_mounts:
        node_a.restart()  # a rolling update before any volume is mounted

    # node-driver-registrar on each node
    topologies = {}
    for name, node in (("node-a", node_a), ("node-b", node_b)):
        assert node.identity.GetPluginInfo(pb2.GetPluginInfoRequest(), timeout=CALL_TIMEOUT).name == driver
        info = node.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT)
        assert info.node_id == name, info
        topologies[name] = dict(info.accessible_topology.segments)
    # csi-provisioner --enable-capacity: node-b can hold no local volume of node-a's controller.
    capacity = {name: controller.controller.GetCapacity(pb2.GetCapacityRequest(
        accessible_topology=pb2.Topology(segments=segments)), timeout=CALL_TIMEOUT).available_capacity
        for name, segments in topologies.items()}
    assert capacity["node-a"] > 0 and capacity["node-b"] == 0, capacity

    fs_type = storage_class["parameters"]["csi.storage.k8s.io/fstype"]
    capability = pb2.VolumeCapability(
        mount=pb2.VolumeCapability.MountVolume(fs_type=fs_type),
        access_mode=pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
    here = pb2.TopologyRequirement(requisite=[pb2.Topology(segments=topologies["node-a"])],
                                   preferred=[pb2.Topology(segments=topologies["node-a"])])
    pv = f"pvc-{uuid.uuid4()}"
    volume = controller.controller.CreateVolume(pb2.CreateVolumeRequest(
        name=pv, capacity_range=pb2.CapacityRange(required_bytes=64 * MiB), volume_capabilities=[capability],
        parameters=provisioner_parameters(storage_class, "data", pv), accessibility_requirements=here),
        timeout=CALL_TIMEOUT).volume
    assert dict(volume.accessible_topology[0].segments) == topologies["node-a"]

    def attach_and_mount(vol, pv_name: str) -> tuple[str, str]:
        published = controller.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
            volume_id=vol.volume_id, node_id="node-a", volume_capability=capability,
            volume_context=vol.volume_context), timeout=CALL_TIMEOUT)
        staging, target = kubelet_paths(hosts["node-a"], driver, vol.volume_id, pv_name)
        node_a.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
            volume_id=vol.volume_id, staging_target_path=staging, volume_capability=capability,
            publish_context=published.publish_context, volume_context=vol.volume_context), timeout=CALL_TIMEOUT)
        node_a.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
            volume_id=vol.volume_id, staging_target_path=staging, target_path=target, volume_capability=capability,
            publish_context=published.publish_context, volume_context=vol.volume_context), timeout=CALL_TIMEOUT)
        return staging, target

    staging, target = attach_and_mount(volume, pv)
    # Bidirectional propagation: the plugin's mount is the host's, where the pod would see it.
    host_target = hosts["node-a"].path(target)
    assert is_mount_point(str(host_target)), f"expected the mount at {target} to reach the host"
    (host_target / "data").write_text("written in a pod")

    stats = node_a.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
        volume_id=volume.volume_id, volume_path=target, staging_target_path=staging), timeout=CALL_TIMEOUT)
    assert stats.usage and not stats.volume_condition.abnormal, stats
    if restart_node_with_mounts:
        node_a.restart()  # the node plugin restarts: its mounts stay (the host's), its records too
        assert (host_target / "data").read_text() == "written in a pod"
        stats = node_a.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
            volume_id=volume.volume_id, volume_path=target, staging_target_path=staging), timeout=CALL_TIMEOUT)
        assert "foreign" not in stats.volume_condition.message, stats
        assert stats.usage and not stats.volume_condition.abnormal, stats

    # csi-snapshotter (VolumeSnapshotClass parameters: none for local)
    snapshot = snapshot_when_ready(controller, pb2, volume.volume_id)

    controller.restart()  # the controller restarts: the node keeps every staging
    restored_pv = f"pvc-{uuid.uuid4()}"
    restored = controller.controller.CreateVolume(pb2.CreateVolumeRequest(
        name=restored_pv, capacity_range=pb2.CapacityRange(required_bytes=64 * MiB),
        volume_capabilities=[capability], parameters=provisioner_parameters(storage_class, "restored", restored_pv),
        accessibility_requirements=here,
        volume_content_source=pb2.VolumeContentSource(
            snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=snapshot.snapshot_id))),
        timeout=CALL_TIMEOUT).volume
    restored_staging, restored_target = attach_and_mount(restored, restored_pv)
    assert (hosts["node-a"].path(restored_target) / "data").read_text() == "written in a pod"

    # csi-resizer, then kubelet's NodeExpandVolume on the published volume
    expanded = controller.controller.ControllerExpandVolume(pb2.ControllerExpandVolumeRequest(
        volume_id=volume.volume_id, capacity_range=pb2.CapacityRange(required_bytes=128 * MiB),
        volume_capability=capability), timeout=CALL_TIMEOUT)
    assert expanded.capacity_bytes >= 128 * MiB
    assert expanded.node_expansion_required
    grow = pb2.NodeExpandVolumeRequest(
        volume_id=volume.volume_id, volume_path=target, staging_target_path=staging,
        capacity_range=pb2.CapacityRange(required_bytes=128 * MiB), volume_capability=capability)
    if can_grow_ext4_online():
        node_a.node.NodeExpandVolume(grow, timeout=CALL_TIMEOUT)
    else:
        # This machine's root lacks CAP_SYS_RESOURCE, so a privileged container has none either:
        # a mounted ext4 cannot grow; kubelet retries, and the pod's next stage grows it.
        with pytest.raises(grpc.RpcError) as refused:
            node_a.node.NodeExpandVolume(grow, timeout=CALL_TIMEOUT)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "CAP_SYS_RESOURCE" in refused.value.details(), refused.value.details()
        node_a.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(
            volume_id=volume.volume_id, target_path=target), timeout=CALL_TIMEOUT)
        node_a.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(
            volume_id=volume.volume_id, staging_target_path=staging), timeout=CALL_TIMEOUT)
        node_a.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
            volume_id=volume.volume_id, staging_target_path=staging, volume_capability=capability,
            volume_context=volume.volume_context), timeout=CALL_TIMEOUT)
        node_a.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
            volume_id=volume.volume_id, staging_target_path=staging, target_path=target,
            volume_capability=capability, volume_context=volume.volume_context), timeout=CALL_TIMEOUT)
        assert (host_target / "data").read_text() == "written in a pod"
    size = os.statvfs(host_target)
    assert size.f_blocks * size.f_frsize > 100 * MiB, "expected the filesystem grown past 100 MiB"

    # The pods go: kubelet unmounts, the attacher detaches, the provisioner deletes.
    for vol, stage, tgt in ((volume, staging, target), (restored, restored_staging, restored_target)):
        node_a.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=tgt),
                                        timeout=CALL_TIMEOUT)
        node_a.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=stage),
                                      timeout=CALL_TIMEOUT)
        assert not is_mount_point(str(hosts["node-a"].path(tgt))) and not is_mount_point(str(hosts["node-a"].path(stage)))
        controller.controller.ControllerUnpublishVolume(pb2.ControllerUnpublishVolumeRequest(
            volume_id=vol.volume_id, node_id="node-a"), timeout=CALL_TIMEOUT)
    controller.controller.DeleteSnapshot(pb2.DeleteSnapshotRequest(snapshot_id=snapshot.snapshot_id),
                                         timeout=CALL_TIMEOUT)
    for vol in (restored, volume):
        controller.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vol.volume_id), timeout=CALL_TIMEOUT)
    assert not controller.controller.ListVolumes(pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT).entries
    left = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout.split()
    assert [m for m in left if m.startswith(str(root)) and m not in (str(h.root) for h in hosts.values())] == []
