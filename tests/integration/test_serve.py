"""`rosetctl serve` driven by a real gRPC client over its unix socket, as kubelet would."""
from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import time

import grpc
import pytest

from csi_server import CALL_TIMEOUT, READY_DEADLINE, Server, expect_code, mount_capability, refused_second_serve
from rosetctl_cli import Rosetctl
from rosetctl_mounts import is_mount_point
from tgtd_lab import free_port

SECRET = "s3cr3t-value"


# ---------------------------------------------------------------- the kubelet flow

def test_grpc_client_drives_the_full_volume_lifecycle(csi, cli, workdir, server):
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    info = server.identity.GetPluginInfo(pb2.GetPluginInfoRequest(), timeout=timeout)
    assert info.name == "io.roset.csi" and info.vendor_version, f"expected io.roset.csi with a version, got {info}"
    capabilities = server.identity.GetPluginCapabilities(pb2.GetPluginCapabilitiesRequest(), timeout=timeout)
    services = {c.service.type for c in capabilities.capabilities if c.HasField("service")}
    assert pb2.PluginCapability.Service.CONTROLLER_SERVICE in services, f"expected CONTROLLER_SERVICE, got {capabilities}"
    probe = server.identity.Probe(pb2.ProbeRequest(), timeout=timeout)
    assert not probe.HasField("ready") or probe.ready.value, f"expected Probe to report ready, got {probe}"
    node_id = server.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=timeout).node_id
    assert node_id, "expected NodeGetInfo to name this node"

    capability = mount_capability(pb2)
    create = pb2.CreateVolumeRequest(
        name="grpcvol", capacity_range=pb2.CapacityRange(required_bytes=64 * 2**20),
        volume_capabilities=[capability], secrets={"token": SECRET})
    volume = server.controller.CreateVolume(create, timeout=timeout).volume
    again = server.controller.CreateVolume(create, timeout=timeout).volume
    assert volume.volume_id == again.volume_id, "expected a repeated CreateVolume to return the same volume"
    assert volume.capacity_bytes == 64 * 2**20, f"expected 64Mi, got {volume.capacity_bytes}"
    assert cli.volume("grpcvol")["id"] == volume.volume_id, "expected the CLI to see the volume created over gRPC"

    vid, context = volume.volume_id, dict(volume.volume_context)
    publish = pb2.ControllerPublishVolumeRequest(
        volume_id=vid, node_id=node_id, volume_capability=capability, volume_context=context)
    publish_context = dict(server.controller.ControllerPublishVolume(publish, timeout=timeout).publish_context)
    assert dict(server.controller.ControllerPublishVolume(publish, timeout=timeout).publish_context) == publish_context, (
        "expected a repeated ControllerPublishVolume to return the same publish context")

    staging, target = workdir / "kubelet-staging", workdir / "kubelet-target"
    stage = pb2.NodeStageVolumeRequest(
        volume_id=vid, publish_context=publish_context, staging_target_path=str(staging),
        volume_capability=capability, secrets={"token": SECRET}, volume_context=context)
    for _ in range(2):
        server.node.NodeStageVolume(stage, timeout=timeout)
    assert is_mount_point(str(staging)), f"expected {staging} to be mounted after NodeStageVolume"

    node_publish = pb2.NodePublishVolumeRequest(
        volume_id=vid, publish_context=publish_context, staging_target_path=str(staging),
        target_path=str(target), volume_capability=capability, readonly=False, volume_context=context)
    for _ in range(2):
        server.node.NodePublishVolume(node_publish, timeout=timeout)
    assert is_mount_point(str(target)), f"expected {target} to be mounted after NodePublishVolume"
    (target / "pod.txt").write_text("written by a pod")
    assert (staging / "pod.txt").read_text() == "written by a pod", "expected target and staging to share data"

    listed = server.controller.ListVolumes(pb2.ListVolumesRequest(), timeout=timeout)
    entries = [e for e in listed.entries if e.volume.volume_id == vid]
    assert len(entries) == 1 and list(entries[0].status.published_node_ids) == [node_id], (
        f"expected ListVolumes to show {vid} published to {node_id}, got {listed}")
    shown = cli.volume(vid)
    assert [c["target"] for c in shown["connections"]] == [str(target)], (
        f"expected the CLI to see the kubelet's mount at {target}, got {shown['connections']}")

    unpublish = pb2.NodeUnpublishVolumeRequest(volume_id=vid, target_path=str(target))
    for _ in range(2):
        server.node.NodeUnpublishVolume(unpublish, timeout=timeout)
    assert not is_mount_point(str(target)), f"expected {target} to be unmounted after NodeUnpublishVolume"
    unstage = pb2.NodeUnstageVolumeRequest(volume_id=vid, staging_target_path=str(staging))
    for _ in range(2):
        server.node.NodeUnstageVolume(unstage, timeout=timeout)
    assert not is_mount_point(str(staging)), f"expected {staging} to be unmounted after NodeUnstageVolume"
    controller_unpublish = pb2.ControllerUnpublishVolumeRequest(volume_id=vid, node_id=node_id)
    for _ in range(2):
        server.controller.ControllerUnpublishVolume(controller_unpublish, timeout=timeout)
    assert cli.volume(vid)["published_nodes"] == [], "expected no published nodes after ControllerUnpublishVolume"

    for _ in range(2):
        server.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vid), timeout=timeout)
    remaining = server.controller.ListVolumes(pb2.ListVolumesRequest(), timeout=timeout)
    assert all(e.volume.volume_id != vid for e in remaining.entries), "expected the volume gone from ListVolumes"
    assert cli.volumes() == [], "expected the CLI to see the deletion"

    log = server.log()
    for method in ("CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume",
                   "NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume", "DeleteVolume"):
        assert re.search(rf"{method} \S+=\S+ duration=[0-9.]+ms status=OK", log), (
            f"expected a one-line log of {method} with its subject and duration: {log}")
    assert SECRET not in log, "expected the secret value never to appear in serve's log"
    assert "<redacted>" in log, f"expected -v request logs to show secrets as <redacted>: {log}"


def stage_and_publish(pb2, server: Server, vid: str, staging, target):
    """Stages VID at STAGING and publishes it at TARGET (in a pod directory made for it), as
    kubelet does; (staging, target)."""
    capability = mount_capability(pb2)
    target.parent.mkdir()
    server.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
        volume_id=vid, staging_target_path=str(staging), volume_capability=capability), timeout=CALL_TIMEOUT)
    server.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
        volume_id=vid, staging_target_path=str(staging), target_path=str(target),
        volume_capability=capability), timeout=CALL_TIMEOUT)
    return staging, target


def test_a_publication_survives_a_kill_9_of_serve(csi, cli, workdir, start_serve):
    # NodePublishVolume records its bind mount without waiting for the disk (the mount does not
    # outlive the machine either), so a crash of serve itself must still find the record.
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    server = start_serve()
    capability = mount_capability(pb2)
    volume = server.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="crashvol", volume_capabilities=[capability]), timeout=timeout).volume
    vid = volume.volume_id
    staging, target = stage_and_publish(pb2, server, vid, workdir / "crash-staging",
                                        workdir / "pod" / "crash-target")
    assert server.stop(signal.SIGKILL) == -signal.SIGKILL, "expected serve to die of SIGKILL"

    again = start_serve(workdir / "after-crash.sock")
    assert [c["target"] for c in cli.volume(vid)["connections"]] == [str(target)], (
        f"expected the publication at {target} to be remembered after the crash: {cli.volume(vid)}")
    again.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(volume_id=vid, target_path=str(target)),
                                   timeout=timeout)
    assert not is_mount_point(str(target)), f"expected {target} unmounted after NodeUnpublishVolume"
    assert not target.exists(), f"expected the target serve created to be removed: {target}"
    again.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(volume_id=vid, staging_target_path=str(staging)),
                                 timeout=timeout)
    again.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vid), timeout=timeout)
    assert cli.volumes() == [], "expected the volume deleted"


def test_a_controller_that_cannot_see_the_nodes_mounts_forgets_none_of_its_stagings(csi, cli, workdir, start_serve):
    """Issue 33 finding 2: a `serve --role controller` runs no node-side clean-up at start. In
    Kubernetes it runs in a pod of its own, without kubelet's mounts; had it run the node's start-up
    clean-up on a database holding the node's records, it would have taken every staging for one a
    crash left behind, and kubelet's NodeUnpublish and NodeUnstage would fail for good. The
    controller here starts in a mount namespace of its own where the node's mounts are gone."""
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    node = start_serve()
    capability = mount_capability(pb2)
    vid = node.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="unseen", volume_capabilities=[capability]), timeout=timeout).volume.volume_id
    staging, target = stage_and_publish(pb2, node, vid, workdir / "unseen-staging",
                                        workdir / "pod" / "unseen-target")
    assert node.stop() == 0

    socket_path = workdir / "controller.sock"
    log_path = workdir / "controller.log"
    hide = 'umount -l "$1" && umount -l "$2" && shift 2 && exec "$@"'
    with open(log_path, "wb") as log:
        controller = cli.tracker.start(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", hide, "sh", str(target), str(staging),
             *cli.argv(["serve", "--role", "controller", "--endpoint", f"unix://{socket_path}", "-v"])],
            cwd=cli.cwd, env=cli.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + READY_DEADLINE
    while not socket_path.is_socket() and controller.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert socket_path.is_socket(), f"expected the controller to serve: {log_path.read_text()}"
    controller.send_signal(signal.SIGTERM)  # reconcile ran before the socket was made
    assert controller.wait(timeout=20) == 0, log_path.read_text()
    assert "forgot that staging" not in log_path.read_text()

    assert is_mount_point(str(target)) and is_mount_point(str(staging))
    again = start_serve(workdir / "node-again.sock")
    assert [c["target"] for c in cli.volume(vid)["connections"]] == [str(target)], cli.volume(vid)
    again.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(volume_id=vid, target_path=str(target)),
                                   timeout=timeout)
    again.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(volume_id=vid, staging_target_path=str(staging)),
                                 timeout=timeout)
    assert not is_mount_point(str(target)) and not is_mount_point(str(staging))
    again.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vid), timeout=timeout)


def test_volume_created_by_the_cli_is_visible_over_grpc(csi, cli, server):
    volume_id = cli.create("from-cli")["id"]
    listed = server.controller.ListVolumes(csi.pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT)
    assert volume_id in [e.volume.volume_id for e in listed.entries], (
        f"expected ListVolumes on the server to include {volume_id} created by the CLI")


# ---------------------------------------------------------------- errors over gRPC

def test_create_volume_without_name_is_invalid_argument(csi, server):
    request = csi.pb2.CreateVolumeRequest(volume_capabilities=[mount_capability(csi.pb2)])
    details = expect_code(lambda: server.controller.CreateVolume(request, timeout=CALL_TIMEOUT),
                          grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume without name")
    assert "name" in details, f"expected the message to mention the name: {details!r}"


def test_node_publish_of_an_unstaged_volume_is_failed_precondition(csi, server, workdir):
    pb2 = csi.pb2
    capability = mount_capability(pb2)
    vid = server.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="unstaged", volume_capabilities=[capability]), timeout=CALL_TIMEOUT).volume.volume_id
    request = pb2.NodePublishVolumeRequest(
        volume_id=vid, staging_target_path=str(workdir / "never-staged"), target_path=str(workdir / "t"),
        volume_capability=capability)
    expect_code(lambda: server.node.NodePublishVolume(request, timeout=CALL_TIMEOUT),
                grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume before NodeStageVolume")
    assert not is_mount_point(str(workdir / "t")), "expected nothing mounted by a refused publish"


def test_controller_publish_to_an_unknown_node_is_not_found(csi, server):
    pb2 = csi.pb2
    capability = mount_capability(pb2)
    vid = server.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="lonely", volume_capabilities=[capability]), timeout=CALL_TIMEOUT).volume.volume_id
    request = pb2.ControllerPublishVolumeRequest(volume_id=vid, node_id="no-such-node", volume_capability=capability)
    details = expect_code(lambda: server.controller.ControllerPublishVolume(request, timeout=CALL_TIMEOUT),
                          grpc.StatusCode.NOT_FOUND, "ControllerPublishVolume to an unknown node")
    assert "no-such-node" in details, f"expected the message to name the node: {details!r}"


def test_delete_of_a_published_volume_is_failed_precondition(csi, server):
    pb2 = csi.pb2
    capability = mount_capability(pb2)
    vid = server.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="in-use", volume_capabilities=[capability]), timeout=CALL_TIMEOUT).volume.volume_id
    node_id = server.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id
    server.controller.ControllerPublishVolume(
        pb2.ControllerPublishVolumeRequest(volume_id=vid, node_id=node_id, volume_capability=capability),
        timeout=CALL_TIMEOUT)
    expect_code(lambda: server.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vid), timeout=CALL_TIMEOUT),
                grpc.StatusCode.FAILED_PRECONDITION, "DeleteVolume of a published volume")


def test_unknown_volume_id_is_not_found(csi, server):
    expect_code(lambda: server.controller.ControllerGetVolume(
        csi.pb2.ControllerGetVolumeRequest(volume_id="local-0123456789abcdef"), timeout=CALL_TIMEOUT),
        grpc.StatusCode.NOT_FOUND, "ControllerGetVolume of an unknown id")


def test_modify_without_mutable_parameters_is_a_no_op_or_not_found(csi, cli, server):
    # The CSI sanity suite in its default configuration sends exactly this, against directory
    # volumes: the spec changes only what is named, so naming nothing changes nothing.
    pb2 = csi.pb2
    capability = mount_capability(pb2)
    directory = server.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="modify-dir", volume_capabilities=[capability]), timeout=CALL_TIMEOUT).volume
    image = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="modify-image", parameters={"type": "image"}, mutable_parameters={"directIO": "false"},
        capacity_range=pb2.CapacityRange(required_bytes=16 * 2**20), volume_capabilities=[capability]),
        timeout=CALL_TIMEOUT).volume
    for volume in (directory, image):
        before = cli.volume(volume.volume_id)
        server.controller.ControllerModifyVolume(
            pb2.ControllerModifyVolumeRequest(volume_id=volume.volume_id), timeout=CALL_TIMEOUT)
        after = cli.volume(volume.volume_id)
        assert after == before, f"expected an empty modify to change nothing, was {before}, is {after}"
    details = expect_code(lambda: server.controller.ControllerModifyVolume(
        pb2.ControllerModifyVolumeRequest(volume_id="local-0123456789abcdef"), timeout=CALL_TIMEOUT),
        grpc.StatusCode.NOT_FOUND, "ControllerModifyVolume without parameters of an unknown id")
    assert "local-0123456789abcdef" in details, f"expected the message to name the volume: {details!r}"


# ---------------------------------------------------------------- the socket and the process

def test_socket_is_created_with_mode_0660(server):
    mode = stat.S_IMODE(os.lstat(server.socket_path).st_mode)
    assert mode == 0o660, f"expected socket mode 0660, got {oct(mode)}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_serve_cleanly_and_removes_the_socket(server, sig):
    rc = server.stop(sig)
    assert rc == 0, f"expected serve to exit 0 on {sig.name}, got {rc}: {server.log()}"
    assert not os.path.lexists(server.socket_path), f"expected {server.socket_path} to be removed on {sig.name}"


def test_second_serve_on_a_live_socket_is_refused(csi, start_serve, server):
    second = start_serve(server.socket_path, wait=False)
    rc = second.proc.wait(timeout=READY_DEADLINE)
    assert rc != 0, "expected a second serve on a live socket to fail"
    assert "already listening" in second.log() and str(server.socket_path) in second.log(), (
        f"expected the message to say another server listens there: {second.log()}")
    probe = server.identity.Probe(csi.pb2.ProbeRequest(), timeout=CALL_TIMEOUT)
    assert not probe.HasField("ready") or probe.ready.value, "expected the first server to keep serving"
    assert server.socket_path.is_socket(), "expected the first server's socket to be left in place"


def test_second_serve_on_a_taken_listen_address_is_refused(csi, cli, start_serve, workdir, processes,
                                                           rosetctl_binary):
    """gRPC listens with SO_REUSEPORT (a SIGHUP reload binds beside the old listener), which would
    let a second serve on the same --listen start and take half of the first one's connections."""
    tls = workdir / "tls"
    cli.ok("tls", "init", "--dir", str(tls), "--ip", "127.0.0.1", with_state_dir=False)
    cli.ok("tls", "issue", "alice", "--admin", "--dir", str(tls), with_state_dir=False)
    address = f"127.0.0.1:{free_port()}"
    listen = ["--role", "controller", "--listen", address, "--tls-cert", str(tls / "controller.crt"),
              "--tls-key", str(tls / "controller.key"), "--tls-ca", str(tls / "ca.crt")]
    admin = ["--controller", address, "--tls-cert", str(tls / "alice.crt"), "--tls-key", str(tls / "alice.key"),
             "--tls-ca", str(tls / "ca.crt")]
    first = start_serve(extra=listen)
    cli.ok("volume", "create", "only-on-the-first", "--type", "dir")

    def names_over_tls() -> list[str]:
        deadline = time.monotonic() + READY_DEADLINE
        while (listed := cli.run_json(*admin, "volume", "list")).rc != 0 and time.monotonic() < deadline:
            time.sleep(0.2)  # the TLS listener comes up just after the socket
        assert listed.rc == 0, f"expected the first serve to answer on {address}: {listed.describe()}"
        return [volume["name"] for volume in listed.json()]

    assert names_over_tls() == ["only-on-the-first"]

    other = Rosetctl(state_dir=workdir / "other-state", cwd=workdir, tracker=processes, binary=rosetctl_binary)
    rc, log = refused_second_serve(csi, other, workdir / "other.sock", workdir / "serve-second.log", listen)
    assert rc is not None and rc != 0, f"expected a second serve on {address} to be refused: {log}"
    assert f"cannot listen on {address}" in log and "the port is taken" in log, (
        f"expected the message to name the address and say the port is taken: {log}")
    # Every connection still reaches the first (the second's state directory has no volume).
    for _ in range(5):
        assert names_over_tls() == ["only-on-the-first"]

    # The first still reloads its TLS files: its new listener shares the port with its old one.
    first.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + READY_DEADLINE
    while "TLS files reloaded" not in first.log():
        assert time.monotonic() < deadline and first.proc.poll() is None, f"expected a reload: {first.log()}"
        time.sleep(0.1)
    assert names_over_tls() == ["only-on-the-first"]


def test_stale_socket_file_is_replaced(csi, start_serve, workdir):
    stale = workdir / "stale.sock"
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(stale))
    leftover.close()  # the file stays, nobody listens: what a crashed server leaves behind
    assert stale.is_socket(), "test setup: expected a leftover socket file"
    server = start_serve(stale)
    info = server.identity.GetPluginInfo(csi.pb2.GetPluginInfoRequest(), timeout=CALL_TIMEOUT)
    assert info.name == "io.roset.csi", "expected the new server to answer on the replaced socket"
    assert "stale" in server.log(), f"expected serve to log that it replaced a stale socket: {server.log()}"


def test_endpoint_that_is_a_regular_file_is_refused(start_serve, workdir):
    path = workdir / "not-a-socket"
    path.write_text("keep me")
    refused = start_serve(path, wait=False)
    rc = refused.proc.wait(timeout=READY_DEADLINE)
    assert rc != 0, "expected serve to refuse an endpoint that is a regular file"
    assert "not a socket" in refused.log(), f"expected the message to say it is not a socket: {refused.log()}"
    assert path.read_text() == "keep me", "expected the file to be left untouched"


# ---------------------------------------------------------------- log forging

FORGED = "FORGED line"
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:?\d\d) \w+ ")


def test_caller_text_with_a_newline_cannot_forge_a_log_line_or_split_a_message(csi, server, workdir):
    """Every string field a caller sends may hold a newline: the refusal quotes it escaped, and serve's
    log stays one line per call (the text after the newline never starts a line of its own)."""
    pb2 = csi.pb2
    forged = f"x\n{FORGED}"

    def capability(fs_type="", flags=()):
        return pb2.VolumeCapability(
            mount=pb2.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(flags)),
            access_mode=pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))

    def create(name, **fields):
        fields.setdefault("volume_capabilities", [capability()])
        return lambda: server.controller.CreateVolume(pb2.CreateVolumeRequest(name=name, **fields),
                                                      timeout=CALL_TIMEOUT)

    node_id = server.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id
    image = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="forge-image", parameters={"type": "image"}, volume_capabilities=[capability("ext4")],
        capacity_range=pb2.CapacityRange(required_bytes=64 * 2**20)), timeout=CALL_TIMEOUT).volume
    staging = workdir / "forge-staging"
    server.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
        volume_id=image.volume_id, staging_target_path=str(staging), volume_capability=capability("ext4"),
        volume_context=image.volume_context), timeout=CALL_TIMEOUT)
    refused = {
        "parameter key": create("forge-a", parameters={f"type{forged}": "dir"}),
        "parameter value": create("forge-b", parameters={"type": f"dir{forged}"}),
        "fs_type": create("forge-c", parameters={"type": "image"}, volume_capabilities=[capability(f"ext4{forged}")],
                          capacity_range=pb2.CapacityRange(required_bytes=64 * 2**20)),
        "two fs_types": create("forge-d", parameters={"type": "image"},
                               volume_capabilities=[capability("ext4"), capability(f"xfs{forged}")],
                               capacity_range=pb2.CapacityRange(required_bytes=64 * 2**20)),
        "topology": create("forge-e", accessibility_requirements=pb2.TopologyRequirement(
            requisite=[pb2.Topology(segments={f"zone{forged}": f"a{forged}"})])),
        "mutable parameter": create("forge-f", mutable_parameters={f"directIO{forged}": "true"}),
        "name": create(f"forge{forged}"),
        "stage fs_type": lambda: server.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
            volume_id=image.volume_id, staging_target_path=str(staging), volume_capability=capability(f"xfs{forged}"),
            volume_context=image.volume_context), timeout=CALL_TIMEOUT),
        "mount flag": lambda: server.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
            volume_id=image.volume_id, staging_target_path=str(staging), target_path=str(workdir / "forge-target"),
            volume_capability=capability("ext4", [f"noatime{forged}"]), volume_context=image.volume_context),
            timeout=CALL_TIMEOUT),
        "target path": lambda: server.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
            volume_id=image.volume_id, staging_target_path=str(staging),
            target_path=str(workdir / f"t{forged}"), volume_capability=capability("ext4")), timeout=CALL_TIMEOUT),
        "node id": lambda: server.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
            volume_id=image.volume_id, node_id=f"{node_id}{forged}", volume_capability=capability("ext4")),
            timeout=CALL_TIMEOUT),
        "modify": lambda: server.controller.ControllerModifyVolume(pb2.ControllerModifyVolumeRequest(
            volume_id=image.volume_id, mutable_parameters={f"directIO{forged}": f"true{forged}"}), timeout=CALL_TIMEOUT),
        "snapshot parameter": lambda: server.controller.CreateSnapshot(pb2.CreateSnapshotRequest(
            source_volume_id=image.volume_id, name="forge-snap", parameters={f"message{forged}": "m"}),
            timeout=CALL_TIMEOUT),
        "starting token": lambda: server.controller.ListVolumes(pb2.ListVolumesRequest(starting_token=forged),
                                                                 timeout=CALL_TIMEOUT),
    }
    unescaped = {}
    for what, call in refused.items():
        with pytest.raises(grpc.RpcError) as failure:
            call()
        details = failure.value.details()
        # Some refusals do not quote the text at all; those that do must show it escaped.
        if "\n" in details or details.replace("\\x0a" + FORGED, "").find(FORGED) >= 0:
            unescaped[what] = details
    assert not unescaped, f"expected each refusal on one line, quoting the forged text with its newline as \\x0a: {unescaped}"
    server.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(volume_id=image.volume_id,
                                                                staging_target_path=str(staging)),
                                  timeout=CALL_TIMEOUT)

    lines = server.log().splitlines()
    strays = [line for line in lines if not LOG_LINE.match(line)]
    assert not strays, f"expected every line of serve's log to be a log line of its own: {strays}"
    ends = [line for line in lines if re.search(r" info \w+ .*duration=[0-9.]+ms status=", line)]
    assert len([line for line in ends if "status=OK" not in line]) == len(refused), (
        f"expected one log line per refused call: {ends}")
