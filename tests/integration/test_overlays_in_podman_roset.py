"""The roset overlay's pods run as rendered (issue 33 item 5), and driven as a cluster drives them.

As test_overlays_in_podman.py does for the local overlay (k8s_pods.py: lab hosts, pods run by
podman from the rendered YAML), with the roset overlay's image and the network a roset node
needs: each pod has a network namespace of its own, as a pod does, on the switch of a host lab
(host_lab.py: one flat network, as a cluster's pod network is), and the fake Roset API runs on a
lab host of its own ("cloud"), reached from the controller and from each node's roset-fuse. A
controller and a node plugin on node-a (the labelled node), a node plugin on node-b; a pod keeps
its network namespace when its container restarts, as a pod's sandbox does.

The image: the roset overlay's (scripts/build-image.sh --roset-fuse), built with the tests'
stand-in roset-fuse, which replaces Roset's client (we cannot ship it) at the path the rendered
node plugin runs it from; a test image FROM it adds what the stand-in needs (bindfs;
tests/integration/containers/Containerfile.roset-standin).

The flow, in the sidecars' and kubelet's order at kubelet's paths: the registrar's calls and
Probe, CreateVolume with the StorageClass's parameters, the provisioner's extra metadata, its
default fstype, the nodes' topology and the provisioner secret, ControllerPublish to node-b (not
the controller's node: finding 1), NodeStage with the node-stage secret and NodePublish, a write
seen from the host and in Roset's storage, a restart of node-b's plugin while the volume is
mounted (its roset-fuse dies with the container; the new one repairs the mounts), a snapshot, a
restart of the controller, a restore (read-only, ReadOnlyMany: a Roset commit cannot be cloned)
published on node-a and read there, a restart of node-a's plugin, an expansion, then NodeUnpublish, NodeUnstage, ControllerUnpublish, DeleteSnapshot,
DeleteVolume; the API key never in a pod's log.

Rendered fields this test cannot honour, and how each is checked instead (besides those
test_overlays_in_podman.py lists: sidecars, probes, resources, scheduling, /dev):
- `--roset-api-url=https://api.roset.dev` is replaced by the fake API's http:// URL on the lab
  (the real API cannot be reached; test_deploy_kubernetes.py checks the rendered flag);
- the fake's storage directory (Roset's side of roset-fuse's connection) is bind-mounted into
  each node plugin at its own path: the stand-in mounts it with bindfs where the real client
  would fetch over the network;
- the CSI secrets come from the calls themselves, as the sidecars and kubelet pass them from the
  Secret `roset-api` the StorageClass names (test_deploy_kubernetes.py checks the names).
"""
from __future__ import annotations

import errno
import os
import secrets
import uuid
from pathlib import Path

import pytest

import k8s_manifests as k8s
from controller_site import start_fake_roset
from csi_server import CALL_TIMEOUT
from k8s_pods import Csi, Pod, kubelet_paths, lab_hosts, provisioner_parameters, snapshot_when_ready
from podman_lab import built_images, podman_command, remove_images, remove_podman_cgroups, run, standin_image
from rosetctl_fixtures import skip_or_fail
from rosetctl_mounts import is_mount_point

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
MiB = 1024 * 1024
RENDERED_API_URL = "--roset-api-url=https://api.roset.dev"


@pytest.fixture(scope="module")
def image():
    """The roset overlay's image, built by this run, and the stand-in's test image FROM it."""
    with built_images(SOURCE) as images:
        name = images["roset"].replace("-roset:", "-roset-standin:")
        try:
            yield standin_image(images["roset"], name, SOURCE / "build" / "container" / "standin-debs")
        finally:
            errors = remove_images([name])
            assert not errors, f"expected the stand-in's image removed: {errors}"
    remove_podman_cgroups()


@pytest.fixture
def roset_lab(host_lab):
    """({host name: LabHost}, pods, root, fake API url, key, storage, the host lab for the pods'
    networks): the fake Roset API on the lab's "cloud" host, node-a and node-b with a root
    directory each; every pod and mount gone at the end (before the host lab ends what is left
    in its namespaces)."""
    cloud = host_lab.add("cloud")
    key_file = cloud.config_dir / "roset.key"
    key = "rsk_live_" + secrets.token_hex(20)
    key_file.write_text(key + "\n")
    os.chmod(key_file, 0o600)
    url = start_fake_roset(cloud, key_file)
    storage = cloud.dir / "roset-storage"
    with lab_hosts() as (hosts, pods, root):
        yield hosts, pods, root, url, key, storage, host_lab


def read_in_pod(path: Path, pod: Csi) -> str:
    """What a pod reads at `path` through its mount; when it cannot, the node plugin's log and the
    mounts its container and the host see."""
    try:
        return path.read_text()
    except OSError as e:
        inside = run([*podman_command(), "exec", pod.pod.name, "grep", "-E", "kubelet|rosetctl", "/proc/self/mountinfo"])
        host = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(pod.pod.host.root) in line]
        raise AssertionError(f"expected to read {path}: {e}\n{pod.pod.name}'s log:\n{pod.pod.logs()}\n"
                             f"its mounts:\n{inside.stdout}{inside.stderr}\nthe host's:\n" + "\n".join(host)) from e


def test_the_roset_overlay_as_a_cluster_runs_it(image, roset_lab, csi):
    kubectl = k8s.kubectl_binary()
    if kubectl is None:
        skip_or_fail("kubectl is missing: install Debian's kubernetes-client (scripts/install-deps.sh)")
    objects = k8s.render(kubectl, k8s.deploy_dir(SOURCE) / "overlays" / "roset")
    hosts, pods, root, url, key, storage, pod_network = roset_lab
    by_kind = {o["kind"]: o for o in objects if o["kind"] in ("Deployment", "DaemonSet")}
    driver = next(o for o in objects if o["kind"] == "CSIDriver")["metadata"]["name"]
    storage_class = next(o for o in objects if o["kind"] == "StorageClass" and o["metadata"]["name"] == "rosetctl-roset")
    provisioner = k8s.container(by_kind["Deployment"], "csi-provisioner")
    default_fs_type = k8s.flag_value(provisioner["args"], "--default-fstype")
    assert k8s.pod_spec(by_kind["Deployment"])["nodeSelector"] == {"rosetctl.io/controller": "true"}
    api_key = {"api-key": key}  # the Secret roset-api, as each sidecar and kubelet pass it

    def pod(kind: str, host: str) -> Csi:
        node = kind == "DaemonSet"
        network = pod_network.add(f"{'node' if node else 'controller'}-{host}")
        started = Pod(by_kind[kind], hosts[host], image, root / "pods", network=f"ns:/run/netns/{network.namespace}",
                      test_volumes=(storage,) if node else (), replace_args={RENDERED_API_URL: f"--roset-api-url={url}"})
        pods.append(started)
        return Csi(csi, started)

    node_a, node_b = pod("DaemonSet", "node-a"), pod("DaemonSet", "node-b")
    controller = pod("Deployment", "node-a")
    pb2 = csi.pb2

    # node-driver-registrar and the livenessprobe on each node: ready, with roset-fuse in the image
    topologies = {}
    for name, node in (("node-a", node_a), ("node-b", node_b)):
        assert node.identity.GetPluginInfo(pb2.GetPluginInfoRequest(), timeout=CALL_TIMEOUT).name == driver
        assert node.identity.Probe(pb2.ProbeRequest(), timeout=CALL_TIMEOUT).ready.value, name
        info = node.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT)
        assert info.node_id == name, info
        topologies[name] = dict(info.accessible_topology.segments)

    # csi-provisioner: volumeBindingMode Immediate, so every node's topology is requisite.
    capability = pb2.VolumeCapability(
        mount=pb2.VolumeCapability.MountVolume(fs_type=default_fs_type),
        access_mode=pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.MULTI_NODE_MULTI_WRITER))
    everywhere = pb2.TopologyRequirement(requisite=[pb2.Topology(segments=t) for t in topologies.values()],
                                         preferred=[pb2.Topology(segments=t) for t in topologies.values()])
    pv = f"pvc-{uuid.uuid4()}"
    volume = controller.controller.CreateVolume(pb2.CreateVolumeRequest(
        name=pv, capacity_range=pb2.CapacityRange(required_bytes=64 * MiB), volume_capabilities=[capability],
        parameters=provisioner_parameters(storage_class, "shared", pv), accessibility_requirements=everywhere,
        secrets=api_key), timeout=CALL_TIMEOUT).volume

    def attach_and_mount(vol, pv_name: str, node_name: str, node: Csi, cap=capability) -> tuple[str, str]:
        readonly = cap.access_mode.mode == pb2.VolumeCapability.AccessMode.MULTI_NODE_READER_ONLY
        published = controller.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
            volume_id=vol.volume_id, node_id=node_name, volume_capability=cap, readonly=readonly,
            volume_context=vol.volume_context), timeout=CALL_TIMEOUT)
        staging, target = kubelet_paths(hosts[node_name], driver, vol.volume_id, pv_name)
        node.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
            volume_id=vol.volume_id, staging_target_path=staging, volume_capability=cap,
            publish_context=published.publish_context, volume_context=vol.volume_context, secrets=api_key),
            timeout=CALL_TIMEOUT)
        node.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
            volume_id=vol.volume_id, staging_target_path=staging, target_path=target, volume_capability=cap,
            readonly=readonly, publish_context=published.publish_context, volume_context=vol.volume_context),
            timeout=CALL_TIMEOUT)
        assert is_mount_point(str(hosts[node_name].path(target))), f"expected the mount at {target} on {node_name}'s host"
        return staging, target

    # node-b is not the controller's node: the attach works without a registered node (finding 1).
    staging, target = attach_and_mount(volume, pv, "node-b", node_b)
    host_target = hosts["node-b"].path(target)
    (host_target / "data").write_text("written in a pod on node-b")
    in_roset = [p for p in storage.rglob("data") if p.read_text() == "written in a pod on node-b"]
    assert len(in_roset) == 1, f"expected the file in Roset's storage: {list(storage.rglob('*'))}"

    # A rolling update of node-b's plugin while the pod uses the volume: its roset-fuse dies with
    # the container; the new plugin starts one again and binds the staging and the target again.
    node_b.restart()
    assert read_in_pod(host_target / "data", node_b) == "written in a pod on node-b"
    (host_target / "after-restart").write_text("written after the restart")
    stats = node_b.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
        volume_id=volume.volume_id, volume_path=target, staging_target_path=staging), timeout=CALL_TIMEOUT)
    assert not stats.volume_condition.abnormal, stats

    # csi-snapshotter, with the VolumeSnapshotClass's snapshotter secret
    snapshot = snapshot_when_ready(controller, pb2, volume.volume_id, secrets=api_key)

    controller.restart()
    # A Roset commit restores read-only (the API has no clone of a commit): a ReadOnlyMany claim.
    read_only = pb2.VolumeCapability(
        mount=pb2.VolumeCapability.MountVolume(fs_type=default_fs_type),
        access_mode=pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.MULTI_NODE_READER_ONLY))
    restored_pv = f"pvc-{uuid.uuid4()}"
    restored = controller.controller.CreateVolume(pb2.CreateVolumeRequest(
        name=restored_pv, capacity_range=pb2.CapacityRange(required_bytes=64 * MiB), volume_capabilities=[read_only],
        parameters=provisioner_parameters(storage_class, "restored", restored_pv), accessibility_requirements=everywhere,
        secrets=api_key, volume_content_source=pb2.VolumeContentSource(
            snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=snapshot.snapshot_id))),
        timeout=CALL_TIMEOUT).volume
    restored_staging, restored_target = attach_and_mount(restored, restored_pv, "node-a", node_a, read_only)
    restored_host_target = hosts["node-a"].path(restored_target)
    assert read_in_pod(restored_host_target / "data", node_a) == "written in a pod on node-b"
    assert read_in_pod(restored_host_target / "after-restart", node_a) == "written after the restart"
    node_a.restart()
    assert read_in_pod(restored_host_target / "data", node_a) == "written in a pod on node-b"
    try:
        (restored_host_target / "written").write_text("no")
        raise AssertionError("expected the restored volume read-only after the restart too")
    except OSError as e:
        assert e.errno == errno.EROFS, e

    # csi-resizer, with the controller-expand secret
    expanded = controller.controller.ControllerExpandVolume(pb2.ControllerExpandVolumeRequest(
        volume_id=volume.volume_id, capacity_range=pb2.CapacityRange(required_bytes=128 * MiB),
        volume_capability=capability, secrets=api_key), timeout=CALL_TIMEOUT)
    assert expanded.capacity_bytes >= 128 * MiB, expanded
    if expanded.node_expansion_required:
        node_b.node.NodeExpandVolume(pb2.NodeExpandVolumeRequest(
            volume_id=volume.volume_id, volume_path=target, staging_target_path=staging,
            capacity_range=pb2.CapacityRange(required_bytes=128 * MiB), volume_capability=capability),
            timeout=CALL_TIMEOUT)

    # The pods go: kubelet unmounts, the attacher detaches, the provisioner deletes.
    for vol, node_name, node, stage, tgt in ((volume, "node-b", node_b, staging, target),
                                             (restored, "node-a", node_a, restored_staging, restored_target)):
        node.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(volume_id=vol.volume_id, target_path=tgt),
                                      timeout=CALL_TIMEOUT)
        node.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(volume_id=vol.volume_id, staging_target_path=stage),
                                    timeout=CALL_TIMEOUT)
        host = hosts[node_name]
        assert not is_mount_point(str(host.path(tgt))) and not is_mount_point(str(host.path(stage)))
        controller.controller.ControllerUnpublishVolume(pb2.ControllerUnpublishVolumeRequest(
            volume_id=vol.volume_id, node_id=node_name), timeout=CALL_TIMEOUT)
    controller.controller.DeleteSnapshot(pb2.DeleteSnapshotRequest(snapshot_id=snapshot.snapshot_id, secrets=api_key),
                                         timeout=CALL_TIMEOUT)
    for vol in (restored, volume):
        controller.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vol.volume_id, secrets=api_key),
                                           timeout=CALL_TIMEOUT)
    # deletePolicy: delete moves the volume's folder to Roset's trash (a soft delete).
    live = [p for p in storage.rglob("data") if ".trash" not in p.relative_to(storage).parts]
    assert not live, f"expected the volume's folder deleted (deletePolicy: delete): {live}"
    # Every roset mount gone from the hosts (the shared roset-fuse mounts stop with their last staging).
    left = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    assert [m for m in left if m.startswith(str(root)) and m not in (str(h.root) for h in hosts.values())] == []
    logs = "".join(p.logs() for p in pods)
    assert key not in logs, "the API key appeared in a pod's log"
