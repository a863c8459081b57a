"""Mounts go where the records say and only ours come off: a target swapped for a symlink while
`connect` runs, a mount someone else put at (or on top of) a connected target, and a staging a
vanished CO left behind. Real bind mounts, tmpfs mounts and a racing process."""
from __future__ import annotations

import os
import subprocess
import time

from csi_server import CALL_TIMEOUT, mount_capability
from rosetctl_mounts import is_mount_point, mount_at
from symlink_swapper import start_swapper

def tmpfs(path) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "foreign", str(path)], check=True)


def umount(path) -> None:
    subprocess.run(["umount", str(path)], check=True)


def test_connect_raced_by_a_symlink_swap_never_mounts_elsewhere(cli, workdir, processes):
    cli.create("raced")
    race = workdir / "race"
    race.mkdir()
    target, link = race / "tgt", race / "lnk"
    target.mkdir()
    victim = workdir / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    os.symlink(victim, link)
    # In bursts: without the pauses a busy 2-core machine can lose every one of the connects to
    # the swapper, and the test would prove nothing about the winners.
    swapper = start_swapper(processes, target, link, burst=400)

    connected = 0
    deadline = time.monotonic() + 60
    attempts = 0
    while attempts < 150 and time.monotonic() < deadline:
        attempts += 1
        result = cli.run("volume", "connect", "raced", "--target", str(target), "-o", "json")
        assert not is_mount_point(str(victim)), (
            f"attempt {attempts}: the volume was mounted over the symlink's destination {victim}: "
            f"{result.describe()}")
        if result.rc != 0:
            assert result.rc in (2, 3, 4, 5), f"expected a clean refusal, got {result.describe()}"
            continue
        connected += 1
        # While mounted, the name cannot be renamed away: the record and the mount agree.
        shown = cli.volume("raced")
        assert [c["target"] for c in shown["connections"]] == [str(target)], shown
        assert is_mount_point(str(target)), f"expected {target} to be the mount the record names"
        assert shown["condition"]["abnormal"] is False, shown["condition"]
        cli.ok("volume", "disconnect", "raced")
        assert not is_mount_point(str(target)), "expected disconnect to take the mount away"
    swapper.kill()
    swapper.wait()
    assert (victim / "precious").read_text() == "keep me"
    assert not is_mount_point(str(victim))
    assert connected > 0, f"expected some of {attempts} connects to win the race and mount at {target}"
    cli.ok("volume", "delete", "raced")


def test_disconnect_leaves_a_mount_put_in_place_of_the_volume_alone(cli, workdir):
    cli.create("replaced")
    target = workdir / "a"
    cli.connect("replaced", target)
    umount(target)  # by hand, behind rosetctl's back
    tmpfs(target)
    (target / "theirs").write_text("someone else's data")

    shown = cli.volume("replaced")
    assert shown["condition"]["abnormal"] is True, f"expected the foreign mount reported: {shown}"
    assert "foreign" in shown["condition"]["message"] and "tmpfs" in shown["condition"]["message"], (
        shown["condition"])
    assert shown["connections"][0]["condition"]["abnormal"] is True

    refused = cli.run("volume", "disconnect", "replaced")
    assert refused.rc == 5, f"expected FAILED_PRECONDITION (exit 5): {refused.describe()}"
    assert "tmpfs" in refused.stderr and str(target) in refused.stderr, refused.describe()
    assert mount_at(str(target)).fs_type == "tmpfs", "expected the foreign tmpfs left mounted"
    assert (target / "theirs").read_text() == "someone else's data"
    delete = cli.run("volume", "delete", "replaced")
    assert delete.rc == 5, f"expected delete refused while the record stands: {delete.describe()}"

    umount(target)
    (target / "written-later").write_text("into the bare directory")
    cli.ok("volume", "disconnect", "replaced")
    assert (target / "written-later").read_text() == "into the bare directory", (
        "expected the target rosetctl created kept while it holds something")
    cli.ok("volume", "delete", "replaced")


def test_disconnect_refuses_while_a_foreign_mount_is_stacked_on_the_volume(cli, workdir):
    cli.create("covered")
    target = workdir / "b"
    cli.connect("covered", target)
    (target / "mine").write_text("volume data")
    tmpfs(target)  # on top of the volume's mount
    (target / "theirs").write_text("stacked data")

    shown = cli.volume("covered")
    assert shown["condition"]["abnormal"] is True and "stacked" in shown["condition"]["message"], (
        shown["condition"])
    refused = cli.run("volume", "disconnect", "covered")
    assert refused.rc == 5 and "stacked" in refused.stderr, refused.describe()
    assert mount_at(str(target)).fs_type == "tmpfs", "expected the stacked tmpfs still on top"
    assert (target / "theirs").read_text() == "stacked data"

    umount(target)
    assert (target / "mine").read_text() == "volume data", "expected the volume's mount under it"
    cli.ok("volume", "disconnect", "covered")
    assert not is_mount_point(str(target))
    assert not target.exists(), "expected the (empty) target rosetctl created removed"
    cli.ok("volume", "delete", "covered")


def test_a_staging_left_by_a_vanished_client_shows_and_can_be_released(csi, cli, workdir,
                                                                       start_serve):
    pb2 = csi.pb2
    server = start_serve()
    capability = mount_capability(pb2)
    volume = server.controller.CreateVolume(
        pb2.CreateVolumeRequest(name="orphaned", volume_capabilities=[capability]),
        timeout=CALL_TIMEOUT).volume
    node_id = server.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id
    server.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
        volume_id=volume.volume_id, node_id=node_id, volume_capability=capability,
        volume_context=dict(volume.volume_context)), timeout=CALL_TIMEOUT)
    staging = workdir / "kubelet-staging"
    server.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
        volume_id=volume.volume_id, staging_target_path=str(staging), volume_capability=capability,
        volume_context=dict(volume.volume_context)), timeout=CALL_TIMEOUT)
    # The CO goes away for good; serve restarts (its reconcile keeps a staging that is mounted).
    server.stop()
    start_serve().stop()

    shown = cli.volume("orphaned")
    assert [s["path"] for s in shown["stagings"]] == [str(staging)], f"expected the staging shown: {shown}"
    table = cli.ok("volume", "show", "orphaned").stdout
    assert str(staging) in table, f"expected `volume show` to list the staging: {table}"
    delete = cli.run("volume", "delete", "orphaned")
    assert delete.rc == 5 and "disconnect orphaned --staging" in delete.stderr, delete.describe()

    plain = cli.run("volume", "disconnect", "orphaned")
    assert plain.rc == 0 and "--staging" in plain.stdout, (
        f"expected a plain disconnect to leave kubelet's staging and say how to release it: "
        f"{plain.describe()}")
    assert is_mount_point(str(staging))
    released = cli.ok_json("volume", "disconnect", "orphaned", "--staging")
    assert released["unstaged"] == [str(staging)], released
    assert not is_mount_point(str(staging))
    assert cli.volume("orphaned")["stagings"] == []
    cli.ok("volume", "delete", "orphaned")
