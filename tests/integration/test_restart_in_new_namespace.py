"""`rosetctl serve` restarted in a new mount namespace, as a node plugin is by a DaemonSet rolling
update: its stagings and publications reach the new namespace by shared mount propagation with
new mount ids, and it must know them as its own (stats, unpublish, unstage) while still refusing
a foreign mount stacked on one of them. Real namespaces (unshare), real mounts, no podman."""
from __future__ import annotations

import subprocess

import grpc

from csi_server import CALL_TIMEOUT, Server, expect_code, mount_capability
from rosetctl_cli import Rosetctl
from rosetctl_mounts import is_mount_point, mount_at


def shared_subtree(path) -> None:
    """`path` as a shared mount: what serve mounts below it in one namespace shows in the others,
    as /var/lib/kubelet does with Bidirectional propagation."""
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    subprocess.run(["mount", "--make-shared", str(path)], check=True)


def serve_in_new_namespace(csi, cli, workdir, processes, name: str) -> Server:
    """serve in a mount namespace of its own, a copy of this one that keeps its propagation."""
    wrapper = workdir / f"{name}-in-new-mount-ns"
    wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/unshare --mount --propagation unchanged -- '
                       f'"{cli.binary}" "$@"\n')
    wrapper.chmod(0o755)
    in_ns = Rosetctl(state_dir=cli.state_dir, cwd=workdir, tracker=processes, binary=str(wrapper))
    return Server(csi, in_ns, workdir / "csi.sock", workdir / f"{name}.log").wait_ready()


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
