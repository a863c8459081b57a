"""`rosetctl serve` restarted in a new mount namespace, as a node plugin is by a DaemonSet rolling
update: its stagings and publications reach the new namespace by shared mount propagation with
new mount ids, and it must know them as its own (stats, unpublish, unstage) while still refusing
a foreign mount stacked on one of them. Real namespaces (unshare), real mounts, no podman."""
from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from csi_server import CALL_TIMEOUT, Server, expect_code, mount_capability
from rosetctl_cli import Rosetctl
from roset_fixtures import process_alive
from rosetctl_loops import detach
from rosetctl_mounts import is_mount_point, mount_at

MiB = 1024 * 1024


def shared_subtree(path) -> None:
    """`path` as a shared mount: what serve mounts below it in one namespace shows in the others,
    as /var/lib/kubelet does with Bidirectional propagation."""
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    subprocess.run(["mount", "--make-shared", str(path)], check=True)


def serve_in_new_namespace(csi, cli, workdir, processes, name: str, extra=()) -> Server:
    """serve in a mount namespace of its own, a copy of this one that keeps its propagation."""
    wrapper = workdir / f"{name}-in-new-mount-ns"
    wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/unshare --mount --propagation unchanged -- '
                       f'"{cli.binary}" "$@"\n')
    wrapper.chmod(0o755)
    in_ns = Rosetctl(state_dir=cli.state_dir, cwd=workdir, tracker=processes, binary=str(wrapper))
    in_ns.env = dict(cli.env)
    return Server(csi, in_ns, workdir / "csi.sock", workdir / f"{name}.log", extra).wait_ready()


def test_serve_restarted_in_a_new_mount_namespace_releases_its_mounts(csi, cli, workdir,
                                                                     processes):
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    shared_subtree(workdir)
    first = serve_in_new_namespace(csi, cli, workdir, processes, "first")
    capability = mount_capability(pb2)
    volume = first.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="rolled", volume_capabilities=[capability]),
        timeout=timeout).volume
    context = dict(volume.volume_context)
    node_id = first.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=timeout).node_id
    first.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
        volume_id=volume.volume_id, node_id=node_id, volume_capability=capability,
        volume_context=context), timeout=timeout)
    staging, plain, covered = workdir / "staging", workdir / "pod-a", workdir / "pod-b"
    first.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
        volume_id=volume.volume_id, staging_target_path=str(staging),
        volume_capability=capability, volume_context=context), timeout=timeout)
    for target in (plain, covered):
        first.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
            volume_id=volume.volume_id, staging_target_path=str(staging), target_path=str(target),
            volume_capability=capability, volume_context=context), timeout=timeout)
    (plain / "data").write_text("written by the pod")
    first.stop()
    for path in (staging, plain, covered):
        assert is_mount_point(str(path)), f"expected {path} to stay mounted after serve stopped"

    second = serve_in_new_namespace(csi, cli, workdir, processes, "second")
    stats = second.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
        volume_id=volume.volume_id, volume_path=str(plain)), timeout=timeout)
    assert not stats.volume_condition.abnormal, (
        f"expected the publication known as ours in the new namespace: {stats.volume_condition}")

    # Someone else's mount on top of one of ours is still not ours.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "foreign", str(covered)], check=True)
    stats = second.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
        volume_id=volume.volume_id, volume_path=str(covered)), timeout=timeout)
    assert stats.volume_condition.abnormal and "stacked" in stats.volume_condition.message, (
        stats.volume_condition)
    unpublish_covered = pb2.NodeUnpublishVolumeRequest(volume_id=volume.volume_id,
                                                       target_path=str(covered))
    details = expect_code(lambda: second.node.NodeUnpublishVolume(unpublish_covered, timeout=timeout),
                          grpc.StatusCode.FAILED_PRECONDITION, "unpublishing under a foreign tmpfs")
    assert "stacked" in details and "tmpfs" in details, details
    assert mount_at(str(covered)).fs_type == "tmpfs", "expected the foreign tmpfs left on top"
    subprocess.run(["umount", str(covered)], check=True)

    for target in (plain, covered):
        second.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(
            volume_id=volume.volume_id, target_path=str(target)), timeout=timeout)
        assert not is_mount_point(str(target)), f"expected {target} unmounted everywhere"
    second.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(
        volume_id=volume.volume_id, staging_target_path=str(staging)), timeout=timeout)
    assert not is_mount_point(str(staging)), "expected the staging unmounted everywhere"
    assert "in the mount namespace that made it" in second.log(), (
        f"expected serve to say it took over its mounts: {second.log()}")
    second.controller.ControllerUnpublishVolume(pb2.ControllerUnpublishVolumeRequest(
        volume_id=volume.volume_id, node_id=node_id), timeout=timeout)
    second.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=volume.volume_id),
                                   timeout=timeout)


def loop_device_of(node: Path) -> str:
    """The /dev/loopN a device node (or a mount's source device) stands for."""
    st = os.stat(node)
    number = st.st_rdev if node.is_block_device() else st.st_dev
    name = Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}").resolve().name
    assert name.startswith("loop"), f"expected {node} on a loop device, got {name}"
    return f"/dev/{name}"


def can_grow_ext4_online() -> bool:
    """A mounted ext4 grows only with CAP_SYS_RESOURCE (24), which serve has where we have it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> 24 & 1)
    return False


def backing_file(device: str) -> str:
    """sysfs's backing_file of a loop device, "" once it is detached."""
    try:
        return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().strip()
    except OSError:
        return ""


def test_image_volumes_staged_before_a_restart_in_a_new_mount_namespace_keep_their_loop_devices(
        csi, cli, workdir, processes):
    """Once the namespace that attached an image's loop device is gone, sysfs names its backing
    file relative to a detached mount ("/state/images/<id>.img", workdir being a mount of its
    own here as /var/lib/rosetctl is in a container). The restarted serve must still find the
    device by the file's device and inode: the mounted volume is healthy and grows, and the
    block volume's device (no autoclear: nothing else detaches it) goes at NodeUnstage."""
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    shared_subtree(workdir)
    first = serve_in_new_namespace(csi, cli, workdir, processes, "first")
    access = pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    as_mount = pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(), access_mode=access)
    as_block = pb2.VolumeCapability(block=pb2.VolumeCapability.BlockVolume(), access_mode=access)
    node_id = first.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=timeout).node_id
    volumes = {}
    for name, capability in (("mounted", as_mount), ("block", as_block)):
        volume = first.controller.CreateVolume(pb2.CreateVolumeRequest(
            name=name, parameters={"type": "image"}, volume_capabilities=[capability],
            capacity_range=pb2.CapacityRange(required_bytes=64 * MiB)), timeout=timeout).volume
        first.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
            volume_id=volume.volume_id, node_id=node_id, volume_capability=capability,
            volume_context=volume.volume_context), timeout=timeout)
        staging = workdir / f"staging-{name}"
        first.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
            volume_id=volume.volume_id, staging_target_path=str(staging),
            volume_capability=capability, volume_context=volume.volume_context), timeout=timeout)
        volumes[name] = (volume, staging, capability)
    devices = {"mounted": loop_device_of(volumes["mounted"][1]),
               "block": loop_device_of(volumes["block"][1] / "device")}
    first.stop()
    try:
        for name, device in devices.items():
            shown = backing_file(device)
            assert shown and not shown.startswith(str(workdir)), (
                f"expected sysfs to name {name}'s image apart from {workdir} once the namespace "
                f"that attached {device} is gone (else this test shows nothing): {shown!r}")

        second = serve_in_new_namespace(csi, cli, workdir, processes, "second")
        volume, staging, capability = volumes["mounted"]
        stats = second.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
            volume_id=volume.volume_id, volume_path=str(staging)), timeout=timeout)
        assert not stats.volume_condition.abnormal, (
            f"expected the staged image healthy after the restart: {stats.volume_condition}")
        second.controller.ControllerExpandVolume(pb2.ControllerExpandVolumeRequest(
            volume_id=volume.volume_id, capacity_range=pb2.CapacityRange(required_bytes=96 * MiB),
            volume_capability=capability), timeout=timeout)
        expand = pb2.NodeExpandVolumeRequest(
            volume_id=volume.volume_id, volume_path=str(staging), staging_target_path=str(staging),
            capacity_range=pb2.CapacityRange(required_bytes=96 * MiB), volume_capability=capability)
        if can_grow_ext4_online():
            second.node.NodeExpandVolume(expand, timeout=timeout)
        else:  # resize2fs ran on the staged device (else: "it is not staged on this node")
            details = expect_code(lambda: second.node.NodeExpandVolume(expand, timeout=timeout),
                                  grpc.StatusCode.FAILED_PRECONDITION, "growing ext4 without CAP_SYS_RESOURCE")
            assert "cannot grow ext4 online" in details, details

        for name, (volume, staging, _) in volumes.items():
            second.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(
                volume_id=volume.volume_id, staging_target_path=str(staging)), timeout=timeout)
            assert not is_mount_point(str(staging)), f"expected {name}'s staging unmounted"
        assert backing_file(devices["block"]) == "", (
            f"expected NodeUnstage to detach the block volume's {devices['block']}: "
            f"{backing_file(devices['block'])!r}; serve's log: {second.log()}")
        for volume, _, _ in volumes.values():
            second.controller.ControllerUnpublishVolume(pb2.ControllerUnpublishVolumeRequest(
                volume_id=volume.volume_id, node_id=node_id), timeout=timeout)
            second.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=volume.volume_id),
                                           timeout=timeout)
    finally:
        # The fixtures find leftover devices by their path under workdir, which these no longer show.
        for staging in (volumes["mounted"][1], volumes["block"][1]):
            subprocess.run(["umount", "--lazy", str(staging)], capture_output=True)
        if backing_file(devices["block"]):
            detach(devices["block"])


def answers(path: Path) -> bool:
    """Whether a mount answers: a dead FUSE mount fails stat with ENOTCONN."""
    try:
        os.stat(path)
        return True
    except OSError as e:
        assert e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO), e
        return False


def kill_container(serve: Server, fuse_pid: int) -> None:
    """What a container restart does to the node plugin: every process in it is killed at once,
    serve, its roset-fuse and roset-fuse's own helper (fusermount3 auto_unmount), which would
    otherwise unmount the client's mountpoint when it dies."""
    helpers = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
               and _parent_of(int(p.name)) == fuse_pid]
    serve.stop(signal.SIGKILL)
    for pid in (fuse_pid, *helpers):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while any(process_alive(pid) for pid in (fuse_pid, *helpers)) and time.monotonic() < deadline:
        time.sleep(0.05)


def _parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


@pytest.mark.parametrize("volumes_kept_by", ["this serve", "a controller"])
def test_roset_mounts_are_repaired_when_serve_restarts_in_a_new_namespace_after_its_fuse_died(
        csi, cli, roset, workdir, processes, volumes_kept_by):
    """Issue 33 finding 6: a node plugin's container restart kills roset-fuse with serve; the
    FUSE mount, the staging bound from it and the pod's target bound from that answer ENOTCONN,
    and kubelet never calls NodePublish again (requiresRepublish: false). The restarted serve,
    in a new mount namespace, starts roset-fuse again and binds the staging and the pod's target
    again at start-up, so the pod reads its data without being restarted. Also when the volume's
    record is a controller's, as a Kubernetes node plugin's state never holds it (the pod's
    target was left dead then: its volume_context came from that record)."""
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    shared_subtree(workdir)
    node_role = ("--role", "node") if volumes_kept_by == "a controller" else ()
    first = serve_in_new_namespace(csi, cli, workdir, processes, "first", extra=node_role)
    capability = pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(), access_mode=pb2.VolumeCapability.AccessMode(
        mode=pb2.VolumeCapability.AccessMode.MULTI_NODE_MULTI_WRITER))
    if node_role:
        controller = Rosetctl(state_dir=workdir / "controller-state", cwd=workdir, tracker=processes, binary=cli.binary)
        controller.env = dict(cli.env)
        created = controller.ok_json("volume", "create", "pvc-roset")
        volume = pb2.Volume(volume_id=created["id"], volume_context=created["context"])
    else:
        volume = first.controller.CreateVolume(pb2.CreateVolumeRequest(
            name="pvc-roset", volume_capabilities=[capability]), timeout=timeout).volume
    staging, target = workdir / "kubelet" / "globalmount", workdir / "kubelet" / "pod" / "mount"
    target.parent.mkdir(parents=True)
    first.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
        volume_id=volume.volume_id, staging_target_path=str(staging), volume_capability=capability,
        volume_context=volume.volume_context), timeout=timeout)
    first.node.NodePublishVolume(pb2.NodePublishVolumeRequest(
        volume_id=volume.volume_id, staging_target_path=str(staging), target_path=str(target),
        volume_capability=capability, volume_context=volume.volume_context), timeout=timeout)
    (target / "data").write_text("written by the pod")
    [fuse_pid] = roset.fuse_pids()

    kill_container(first, fuse_pid)
    assert not answers(target), "expected the pod's target dead with its roset-fuse (else this shows nothing)"

    second = serve_in_new_namespace(csi, cli, workdir, processes, "second",
                                    extra=("--metrics-listen", "127.0.0.1:0", *node_role))
    [new_pid] = roset.fuse_pids()
    assert new_pid != fuse_pid and process_alive(new_pid), "expected roset-fuse started again"
    assert answers(target), f"expected the pod's target bound again at start-up: {second.log()}"
    assert (target / "data").read_text() == "written by the pod"
    (target / "after").write_text("written after the restart")
    assert (staging / "after").read_text() == "written after the restart"
    stats = second.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
        volume_id=volume.volume_id, volume_path=str(target)), timeout=timeout)
    assert not stats.volume_condition.abnormal, stats.volume_condition
    port = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", second.log()).group(1)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'rosetctl_mount_repairs_total{kind="publication"} 1' in metrics, metrics

    second.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(
        volume_id=volume.volume_id, target_path=str(target)), timeout=timeout)
    assert not is_mount_point(str(target))
    second.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(
        volume_id=volume.volume_id, staging_target_path=str(staging)), timeout=timeout)
    assert not is_mount_point(str(staging))
    deadline = time.monotonic() + 15
    while process_alive(new_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(new_pid), "expected roset-fuse stopped after the last unstage"
    assert roset.records() == []
