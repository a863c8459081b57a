"""The iscsi overlay's pods run as rendered (issue 33 item 5), and driven as a cluster drives them.

As test_overlays_in_podman.py does for the local overlay (k8s_pods.py), with what an iscsi node
needs that the host kernel lacks: the node plugin pod runs inside a QEMU guest of the
consumer-host lab (guest_lab.py, k8s_guest_pods.py: podman in the guest, the image this run built
taken from the host's image store), where iscsid runs and the kernel's initiator logs in.

The cluster:
- "controller", a lab host (host_lab.py: a network namespace of its own) with the address the
  rendered `--iscsi-portal` names (192.0.2.10): its tgtd (listening on 3260, control port 0 as
  rendered, run in a mount namespace where the host's /run/tgtd and
  /var/lib/rosetctl/controller are the lab host's, the hostPaths the controller pod mounts), the
  controller pod (the Deployment's container, its Secret rosetctl-tls laid out as kubelet does)
  and a fake Kubernetes API server for its TokenReviews (tests/fakes/fake_kube_api.py);
- "node-1", a guest whose qemu runs in that namespace, so the guest reaches the controller host's
  addresses (the portal, the controller's 9443 and 9444) as a node reaches another host; its
  /etc/hosts gives the controller's Service name that address, as the cluster's DNS would.

The flow, in the sidecars' and kubelet's order: the node plugin enrolls (its projected token
for its own node, the CA from the ConfigMap) and registers its initiator name by itself (finding
1: nobody runs `node register`); the registrar's GetPluginInfo and NodeGetInfo, Probe;
CreateVolume with the StorageClass's parameters and the provisioner's extra metadata and
topology; ControllerPublish to node-1 with the CHAP Secret (controller-publish secret: its
password as `--from-file` delivers it, ending in a newline, finding 8); NodeStage with it
(node-stage secret: the guest's kernel logs in with the password without its newline) and
NodePublish at kubelet's paths in the guest; a write; a restart of the node plugin pod while the
volume is mounted (a DaemonSet rolling update), a read back; a snapshot of the mounted volume;
a restart of the controller pod while the volume is published (on another host than the node:
the node's records are its own, and the detach after the restart still works); a volume
restored from the snapshot, attached, staged and published on node-1 beside the first, read
there and taken down again; an expansion
(ControllerExpand, then NodeExpand grows the mounted ext4 in the guest); NodeUnpublish,
NodeUnstage (the iSCSI sessions gone from the guest), ControllerUnpublish, DeleteSnapshot,
DeleteVolume (each volume's file gone from the controller's state directory). Unavailable
answers are tried again, as kubelet and the sidecars do (`retried`). Then the
node plugin's metrics answer on the overlay's host port 9855 and nothing listens on the 9810
other drivers take (finding 9), and no pod's log holds the CHAP password or a token.

Rendered fields this test cannot honour, and how each is checked instead (besides those
test_overlays_in_podman.py lists: sidecars, probes, resources, scheduling):
- no rendered argument is replaced;
- the Service rosetctl-controller and `dnsPolicy: ClusterFirstWithHostNet`: the guest's
  /etc/hosts names the controller host's address (its pod is in that host's network namespace
  rather than on a pod network of its own); test_deploy_enrollment.py checks the Service against
  the flags;
- the ServiceAccount token volumes: the controller's kube-api-access (token and CA of the fake
  API server, KUBERNETES_SERVICE_HOST and _PORT, as kubelet injects them) and the node's
  projected token are files the test writes from tokens the fake API issued;
- the sidecars' CSI calls are made by the test through the plugin's socket: in the guest a
  forwarder (tests/integration/bin/stream-forward) joins the socket to a port qemu forwards, and
  on the controller host another joins that port to a unix socket the test opens;
- the node's hostPaths are the guest's own directories (/var/lib/kubelet a tmpfs made rshared,
  as a node's / is shared), its /dev and /etc/iscsi the guest's (iscsid and the initiator name
  the guest's init set up).
"""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import grpc
import pytest

import guest_lab
import k8s_enrollment
import k8s_manifests as k8s
from csi_server import CALL_TIMEOUT
from enrollment_site import AUDIENCE, CONTROLLER_USER, NAMESPACE, NODE_SA, FakeKubeApi, make_serving_certificate
from k8s_guest_pods import FORWARDER, GuestPod, prepare_node
from k8s_pods import Csi, LabHost, Pod, provisioner_parameters, snapshot_when_ready
from podman_lab import built_images, podman_command, remove_podman_cgroups, run
from rosetctl_fixtures import skip_or_fail
from rosetctl_mounts import is_mount_point
from tgtd_lab import tool_path

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
MiB = 1024 * 1024
NODE = "node-1"
CSI_PORT = 10000  # in the guest, and on the controller host's loopback (qemu forwards it)
# podman, the node plugin and the forwarder beside the guest's tmpfs root: 512 MiB is too tight.
GUEST_MEMORY_MIB = 1024
CHAP_PASSWORD = "k8s-chap-" + uuid.uuid4().hex[:12]
# The Secret rosetctl-chap as the overlay's kustomization.yaml makes it: the user
# --from-literal, the password --from-file, with the newline its file ends in (finding 8).
CHAP = {"chap-user": "rosetctl-k8s", "chap-password": CHAP_PASSWORD + "\n"}


@pytest.fixture(scope="module")
def image():
    """The image this run built (scripts/build-image.sh), under a name of its own."""
    with built_images(SOURCE) as images:
        yield images["rosetctl"]
    remove_podman_cgroups()


def graph_root() -> str:
    done = run([*podman_command(), "info", "--format", "{{.Store.GraphRoot}}"])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def start_tgtd(host, lab: LabHost) -> subprocess.Popen:
    """The controller host's tgtd, seeing the lab host's /run/tgtd and controller state directory
    at their real paths (tgtd opens each volume's file by the path the controller pod names)."""
    tgtd = tool_path("tgtd")
    if tgtd is None:
        skip_or_fail("tgtd is missing: install Debian's tgt (scripts/install-deps.sh)")
    state = lab.path("/var/lib/rosetctl/controller")
    state.mkdir(parents=True, exist_ok=True)
    lab.path("/run/tgtd").mkdir(parents=True, exist_ok=True)
    script = f"""set -e
mount -t tmpfs tmpfs /run
mkdir /run/tgtd
mount --bind {shlex.quote(str(lab.path('/run/tgtd')))} /run/tgtd
mount -t tmpfs tmpfs /var/lib
mkdir -p /var/lib/rosetctl/controller
mount --bind {shlex.quote(str(state))} /var/lib/rosetctl/controller
exec {tgtd} -f -C 0
"""
    proc = host.start(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    deadline = time.monotonic() + 30
    while not lab.path("/run/tgtd/socket.0").exists():
        assert proc.poll() is None, f"tgtd exited: {proc.output()}"
        assert time.monotonic() < deadline, f"tgtd never made its control socket: {proc.output()}"
        time.sleep(0.1)
    return proc


def wait_for_log(pod, text: str, timeout: float = 120) -> None:
    """Until the pod's running container logs `text` (a guest pod keeps every start's log)."""
    logs = getattr(pod, "latest_log", pod.logs)
    deadline = time.monotonic() + timeout
    while text not in logs():
        assert time.monotonic() < deadline, f"expected {pod.name} to log {text!r}:\n{pod.logs()}"
        time.sleep(0.5)


def in_guest(guest, script: str, timeout: float = 120) -> str:
    done = guest.run(script, timeout=timeout)
    assert done.rc == 0, f"expected in {guest.name}: {script}\n{done.stdout}{done.stderr}"
    return done.stdout


def retried(call, request, timeout: float, patience: float = 90):
    """A CSI call as kubelet and the sidecars make it: an UNAVAILABLE answer is tried again with
    backoff (kubelet retries a failed NodeStage until it works). Each retry is printed: after a
    controller restart the node's first call to it (NodeStage fetching the volume's CHAP) may
    fail so while its channel connects again, slower still in a TCG guest."""
    deadline, pause = time.monotonic() + patience, 1.0
    while True:
        try:
            return call(request, timeout=timeout)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() + pause > deadline:
                raise
            print(f"retrying {type(request).__name__} after UNAVAILABLE: {e.details()}")
            time.sleep(pause)
            pause = min(pause * 2, 10)


def test_the_iscsi_overlay_as_a_cluster_runs_it(image, host_lab, guest_boot_files, csi):
    kubectl = k8s.kubectl_binary()
    if kubectl is None:
        skip_or_fail("kubectl is missing: install Debian's kubernetes-client (scripts/install-deps.sh)")
    started = time.monotonic()
    objects = k8s.render(kubectl, k8s.deploy_dir(SOURCE) / "overlays" / "iscsi")
    by_kind = {o["kind"]: o for o in objects if o["kind"] in ("Deployment", "DaemonSet")}
    driver = next(o for o in objects if o["kind"] == "CSIDriver")["metadata"]["name"]
    storage_class = next(o for o in objects if o["kind"] == "StorageClass" and o["metadata"]["name"] == "rosetctl-iscsi")
    service = next(o for o in objects if o["kind"] == "Service")
    service_name = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    c_args = k8s.container(by_kind["Deployment"], "rosetctl")["args"]
    portal_address = k8s.flag_value(c_args, "--iscsi-portal").rsplit(":", 1)[0]
    default_fs_type = k8s.flag_value(k8s.container(by_kind["Deployment"], "csi-provisioner")["args"], "--default-fstype")
    pb2 = csi.pb2

    controller_host = host_lab.add("controller")
    done = run(["ip", "-n", controller_host.namespace, "addr", "add", f"{portal_address}/32", "dev", "lo"])
    assert done.returncode == 0, done.stderr
    root = Path(tempfile.mkdtemp(prefix="k8s-", dir="/tmp"))  # short: unix socket paths fit in 108 bytes
    guest = guest_lab.Guest(guest_boot_files, root / "guest", NODE, memory_mib=GUEST_MEMORY_MIB,
                            forwards=((CSI_PORT, CSI_PORT),), prefix=tuple(controller_host.command([])))
    (root / "guest").mkdir()
    lab, kube, tgtd, pods = None, None, None, []
    try:
        guest.start_booting()  # boots while the controller starts
        lab = LabHost(root / "controller", "controller")
        tgtd = start_tgtd(controller_host, lab)

        # The API server the controller reviews node tokens with, and what kubelet gives its pod.
        cluster_ca, cert, key = make_serving_certificate(root / "cluster-tls", "127.0.0.1")
        with controller_host.network():
            kube = FakeKubeApi(cert, key, host="127.0.0.1")
        kube.start()
        access = root / "kube-api-access"
        access.mkdir()
        (access / "token").write_text(kube.add_caller(CONTROLLER_USER))
        shutil.copyfile(cluster_ca, access / "ca.crt")
        # The guide's `tls init`, and the Secret and ConfigMap made from it.
        tls = k8s_enrollment.rosetctl_tls(root)
        secret = k8s_enrollment.secret_layout(
            {name: tls / name for name in ("ca.crt", "ca.key", "controller.crt", "controller.key")}, root / "secret-tls")
        controller_pod = Pod(by_kind["Deployment"], lab, image, root / "pods", network=f"ns:/run/netns/{controller_host.namespace}",
                             volume_files={"tls": secret},
                             kubelet_options=(f"--volume={access}:/var/run/secrets/kubernetes.io/serviceaccount:ro,rprivate",
                                              "--env=KUBERNETES_SERVICE_HOST=127.0.0.1",
                                              f"--env=KUBERNETES_SERVICE_PORT={kube.port}"))
        pods.append(controller_pod)
        controller = Csi(csi, controller_pod)
        wait_for_log(controller_pod, "issuing node certificates on")

        # The node: podman in the guest; the node plugin pod's projected token and ConfigMap.
        guest.wait_until_ready(180)
        node_socket = root / "node-csi.sock"
        controller_host.start(["/usr/bin/python3", FORWARDER, f"unix:{node_socket}", f"tcp:127.0.0.1:{CSI_PORT}"])
        prepare_node(guest, graph_root(), {service_name: portal_address},
                     "/var/lib/kubelet/plugins/io.roset.csi/csi.sock", CSI_PORT)
        token_file = root / "token"
        token_file.write_text(kube.issue(NAMESPACE, NODE_SA, [AUDIENCE], node=NODE, pod=f"rosetctl-node-{NODE}",
                                         lifetime=3600))
        volume_files = {
            "enroll-token": k8s_enrollment.secret_layout({"token": token_file}, guest.dir / "vol-enroll-token"),
            "rosetctl-ca": k8s_enrollment.secret_layout({"ca.crt": tls / "ca.crt"}, guest.dir / "vol-rosetctl-ca"),
        }
        node_pod = GuestPod(by_kind["DaemonSet"], guest, image, volume_files, node_socket)
        pods.append(node_pod)
        node = Csi(csi, node_pod)
        wait_for_log(node_pod, "registered node")
        print(f"cluster up after {time.monotonic() - started:.0f}s")

        # node-driver-registrar and the livenessprobe
        assert node.identity.GetPluginInfo(pb2.GetPluginInfoRequest(), timeout=CALL_TIMEOUT).name == driver
        assert node.identity.Probe(pb2.ProbeRequest(), timeout=CALL_TIMEOUT).ready.value
        assert controller.identity.Probe(pb2.ProbeRequest(), timeout=CALL_TIMEOUT).ready.value
        info = node.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT)
        assert info.node_id == NODE, info

        # csi-provisioner (volumeBindingMode Immediate: the node's topology is requisite)
        capability = pb2.VolumeCapability(
            mount=pb2.VolumeCapability.MountVolume(fs_type=default_fs_type),
            access_mode=pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
        topology = pb2.Topology(segments=dict(info.accessible_topology.segments))

        def create(pvc: str, **request) -> tuple:
            """CreateVolume with the class's parameters, extra metadata and the node's topology."""
            pv = f"pvc-{uuid.uuid4()}"
            made = controller.controller.CreateVolume(pb2.CreateVolumeRequest(
                name=pv, capacity_range=pb2.CapacityRange(required_bytes=64 * MiB), volume_capabilities=[capability],
                parameters=provisioner_parameters(storage_class, pvc, pv),
                accessibility_requirements=pb2.TopologyRequirement(requisite=[topology], preferred=[topology]),
                **request), timeout=CALL_TIMEOUT).volume
            assert any(images.rglob(f"*{made.volume_id}*")), f"expected the volume's file in {images}"
            return made, pv

        def attach_and_mount(vol, pv: str) -> tuple[str, str]:
            """csi-attacher's ControllerPublish with the controller-publish secret (node-1
            registered itself), then kubelet's NodeStage (node-stage secret) and NodePublish at
            its own paths in the guest."""
            published = retried(controller.controller.ControllerPublishVolume, pb2.ControllerPublishVolumeRequest(
                volume_id=vol.volume_id, node_id=NODE, volume_capability=capability,
                volume_context=vol.volume_context, secrets=CHAP), timeout=CALL_TIMEOUT)
            staging = (f"/var/lib/kubelet/plugins/kubernetes.io/csi/{driver}/"
                       f"{hashlib.sha256(vol.volume_id.encode()).hexdigest()}/globalmount")
            target = f"/var/lib/kubelet/pods/{uuid.uuid4()}/volumes/kubernetes.io~csi/{pv}/mount"
            in_guest(guest, f"mkdir -p {os.path.dirname(staging)} {os.path.dirname(target)}")
            retried(node.node.NodeStageVolume, pb2.NodeStageVolumeRequest(
                volume_id=vol.volume_id, staging_target_path=staging, volume_capability=capability,
                publish_context=published.publish_context, volume_context=vol.volume_context, secrets=CHAP),
                timeout=120)
            retried(node.node.NodePublishVolume, pb2.NodePublishVolumeRequest(
                volume_id=vol.volume_id, staging_target_path=staging, target_path=target,
                volume_capability=capability, publish_context=published.publish_context,
                volume_context=vol.volume_context), timeout=CALL_TIMEOUT)
            source = in_guest(guest, f"findmnt -n -o SOURCE {target}").strip()
            assert source.startswith("/dev/sd"), f"expected the LUN's disk mounted at {target} in the guest: {source}"
            return staging, target

        def unmount_and_detach(vol, staging: str, target: str) -> None:
            """The pod goes: kubelet unmounts and unstages, the attacher detaches."""
            retried(node.node.NodeUnpublishVolume, pb2.NodeUnpublishVolumeRequest(
                volume_id=vol.volume_id, target_path=target), timeout=CALL_TIMEOUT)
            retried(node.node.NodeUnstageVolume, pb2.NodeUnstageVolumeRequest(
                volume_id=vol.volume_id, staging_target_path=staging), timeout=120)
            left = in_guest(guest, f"grep -c ' {target} \\| {staging} ' /proc/self/mountinfo || true").strip()
            assert left == "0", f"expected {target} and {staging} unmounted in the guest"
            retried(controller.controller.ControllerUnpublishVolume, pb2.ControllerUnpublishVolumeRequest(
                volume_id=vol.volume_id, node_id=NODE, secrets=CHAP), timeout=CALL_TIMEOUT)

        images = lab.path("/var/lib/rosetctl/controller")
        volume, pv = create("data")
        staging, target = attach_and_mount(volume, pv)
        in_guest(guest, f"echo 'written in a pod on {NODE}' > {target}/data && sync")
        print(f"mounted and written after {time.monotonic() - started:.0f}s")

        # A rolling update of the node plugin while the pod uses the volume
        node.restart()
        wait_for_log(node_pod, "registered node")
        assert in_guest(guest, f"cat {target}/data") == f"written in a pod on {NODE}\n"
        stats = node.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
            volume_id=volume.volume_id, volume_path=target, staging_target_path=staging), timeout=CALL_TIMEOUT)
        assert not stats.volume_condition.abnormal, stats

        # csi-snapshotter while the volume is mounted (its data synced)
        snapshot = snapshot_when_ready(controller, pb2, volume.volume_id)

        # The controller restarts while the volume is published: the detach after it still works
        controller.restart()
        wait_for_log(controller_pod, "issuing node certificates on")

        # A claim restored from the snapshot, mounted beside the first on node-1
        restored, restored_pv = create("restored", volume_content_source=pb2.VolumeContentSource(
            snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=snapshot.snapshot_id)))
        restored_staging, restored_target = attach_and_mount(restored, restored_pv)
        assert in_guest(guest, f"cat {restored_target}/data") == f"written in a pod on {NODE}\n"
        unmount_and_detach(restored, restored_staging, restored_target)

        # csi-resizer, then kubelet's NodeExpand of the mounted filesystem
        expanded = controller.controller.ControllerExpandVolume(pb2.ControllerExpandVolumeRequest(
            volume_id=volume.volume_id, capacity_range=pb2.CapacityRange(required_bytes=128 * MiB),
            volume_capability=capability), timeout=CALL_TIMEOUT)
        assert expanded.capacity_bytes >= 128 * MiB, expanded
        if expanded.node_expansion_required:
            node.node.NodeExpandVolume(pb2.NodeExpandVolumeRequest(
                volume_id=volume.volume_id, volume_path=target, staging_target_path=staging,
                capacity_range=pb2.CapacityRange(required_bytes=128 * MiB), volume_capability=capability),
                timeout=120)
        size = int(in_guest(guest, f"df -k {target} | tail -1 | awk '{{print $2}}'").strip())
        assert size * 1024 > 100 * MiB, f"expected the mounted filesystem grown to about 128 MiB: {size} KiB"

        # The pods go: kubelet unmounts, the attacher detaches, the provisioner deletes.
        unmount_and_detach(volume, staging, target)
        sessions = guest.run("iscsiadm -m session")
        assert sessions.rc == 21, f"expected no iSCSI session left in the guest: {sessions}"
        controller.controller.DeleteSnapshot(pb2.DeleteSnapshotRequest(snapshot_id=snapshot.snapshot_id),
                                             timeout=CALL_TIMEOUT)
        for vol in (restored, volume):
            controller.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vol.volume_id), timeout=CALL_TIMEOUT)
            assert not any(images.rglob(f"*{vol.volume_id}*")), f"expected the volume's file gone from {images}"

        # finding 9: in the host's network the node plugin's metrics are on 9855, not on 9810
        metrics = guest.run("busybox wget -q -O - http://127.0.0.1:9855/metrics")
        assert metrics.rc == 0 and "rosetctl" in metrics.stdout, metrics
        assert guest.run("busybox wget -q -O - http://127.0.0.1:9810/metrics").rc != 0

        logs = "".join(p.logs() for p in pods)
        for secret_text in (CHAP_PASSWORD, token_file.read_text(), (access / "token").read_text()):
            assert secret_text not in logs, "a secret appeared in a pod's log"
        print(f"flow done after {time.monotonic() - started:.0f}s")
    except BaseException:
        print(f"failed after {time.monotonic() - started:.0f}s; what each pod logged:")
        for pod in pods:
            print(f"--- {pod.name}\n{pod.logs()}")
        raise
    finally:
        for pod in pods:
            if not isinstance(pod, GuestPod):  # a guest's pods end with the guest
                pod.close()
        guest.stop()  # logs out of every session, powers off; qemu killed by PID if it hangs
        if tgtd is not None and tgtd.poll() is None:
            os.kill(tgtd.pid, signal.SIGKILL)  # tgtd ignores SIGTERM
            tgtd.wait(timeout=30)
        if kube is not None:
            kube.stop()
        if lab is not None:
            lab.close()
        if lab is None or not is_mount_point(str(lab.root)):
            shutil.rmtree(root, ignore_errors=True)
