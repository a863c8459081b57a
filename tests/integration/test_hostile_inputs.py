"""Hostile paths and inputs over CSI (issue 24 item 4): one table of attacks, each answered by a
clear error (the right gRPC code, a message naming the field) that changes nothing -- no volume,
snapshot, mount, loop device or file in the state directory appears or goes, and no mount lands
anywhere it was not asked to.

Covered elsewhere and not repeated here (the same checks through the CLI):
- test_bad_input.py: bad names, `..` in names, targets inside the state dir, a target that is a
  symlink, a regular file, a non-empty directory, a missing parent (`volume connect`).
- test_mount_safety.py: `volume connect` raced by a symlink swap; foreign and stacked mounts.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import grpc
import pytest

from csi_server import CALL_TIMEOUT, mount_capability
from rosetctl_loops import loop_devices_under
from rosetctl_mounts import is_mount_point, read_mounts, mounts_under
from symlink_swapper import start_swapper

MiB = 2**20
INVALID, EXHAUSTED, NOT_FOUND = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 grpc.StatusCode.NOT_FOUND)
# A hostile call must be answered, not hang or grow serve's memory until it is killed.
FAST = 10.0


class World:
    """What exists before an attack: a staged and published directory volume holding a file, an
    idle volume, a snapshot, and a directory outside everything (where no mount may ever land)."""

    def __init__(self, csi, server, workdir: Path, state_dir: Path):
        self.pb2, self.server, self.workdir, self.state_dir = csi.pb2, server, workdir, state_dir
        pb2 = self.pb2
        self.capability = mount_capability(pb2)
        self.node_id = server.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id
        self.volume = self.create("keep")
        self.idle = self.create("idle")
        self.staging, self.target = workdir / "staging", workdir / "target"
        self.stage(self.volume.volume_id, self.staging)
        self.publish(self.volume.volume_id, self.staging, self.target)
        (self.target / "precious.txt").write_text("do not touch")
        self.snapshot = server.controller.CreateSnapshot(pb2.CreateSnapshotRequest(
            source_volume_id=self.idle.volume_id, name="snap"), timeout=CALL_TIMEOUT).snapshot
        self.outside = workdir / "outside"
        self.outside.mkdir()
        (self.outside / "victim.txt").write_text("not a mount point")
        self.before = self.observe()

    def create(self, name: str, **fields):
        return self.server.controller.CreateVolume(self.pb2.CreateVolumeRequest(
            name=name, volume_capabilities=[self.capability], **fields), timeout=CALL_TIMEOUT).volume

    def stage(self, volume_id: str, staging: Path | str, **fields):
        self.server.controller.ControllerPublishVolume(self.pb2.ControllerPublishVolumeRequest(
            volume_id=volume_id, node_id=self.node_id, volume_capability=self.capability),
            timeout=CALL_TIMEOUT)
        return self.server.node.NodeStageVolume(self.pb2.NodeStageVolumeRequest(
            volume_id=volume_id, staging_target_path=str(staging), volume_capability=self.capability,
            **fields), timeout=FAST)

    def publish(self, volume_id: str, staging: Path | str, target: Path | str, **fields):
        return self.server.node.NodePublishVolume(self.pb2.NodePublishVolumeRequest(
            volume_id=volume_id, staging_target_path=str(staging), target_path=str(target),
            volume_capability=self.capability, **fields), timeout=FAST)

    def ours(self) -> list[str]:
        """Every mount in the machine's table that is ours: below the test directory, or showing
        one of our volumes' data (wherever it was mounted)."""
        ids = [v.volume_id for v in (self.volume, self.idle)]
        return sorted(f"{m.mount_point} <- {m.root}" for m in read_mounts()
                      if m.mount_point.startswith(str(self.workdir) + "/")
                      or any(i in m.root or i in m.source for i in ids))

    def observe(self) -> dict:
        pb2, controller = self.pb2, self.server.controller
        return {
            "volumes": sorted(e.volume.volume_id for e in controller.ListVolumes(
                pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT).entries),
            "snapshots": sorted(e.snapshot.snapshot_id for e in controller.ListSnapshots(
                pb2.ListSnapshotsRequest(), timeout=CALL_TIMEOUT).entries),
            "mounts": self.ours(),
            "loops": [loop.backing_file for loop in loop_devices_under(self.workdir)],
            "state files": sorted(str(p.relative_to(self.state_dir)) for p in self.state_dir.glob("*/*")
                                  if "locks" not in p.parts),
            "workdir": sorted(os.listdir(self.workdir)),
            "outside": sorted(os.listdir(self.outside)),
            "precious": (self.target / "precious.txt").read_text(),
        }

    def assert_unchanged(self, what: str) -> None:
        after = self.observe()
        for key, value in self.before.items():
            assert after[key] == value, f"expected {what} to change nothing, but {key} went from {value} to {after[key]}"
        assert not is_mount_point(str(self.outside)), f"{what} mounted something over {self.outside}"


@pytest.fixture
def world(csi, server, workdir, state_dir) -> World:
    return World(csi, server, workdir, state_dir)


def expect_refused(call: Callable[[], object], codes, *mentions: str) -> str:
    codes = codes if isinstance(codes, tuple) else (codes,)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as failure:
        call()
    took = time.monotonic() - started
    code, details = failure.value.code(), failure.value.details() or ""
    assert code in codes, f"expected {[c.name for c in codes]}, got {code.name}: {details[:300]}"
    for text in mentions:
        assert text in details, f"expected the message to name {text!r}: {details[:300]}"
    assert took < FAST, f"expected a fast refusal, took {took:.1f}s"
    return details


@dataclass(frozen=True)
class Attack:
    """One hostile call: `call(world)` must fail with one of `codes`, naming each of `mentions`;
    `codes` None: it must succeed as the no-op the spec asks for (deleting what does not exist)."""
    call: Callable[[World], object]
    codes: object
    mentions: tuple[str, ...]


def symlink_out(world: World, name: str) -> Path:
    link = world.workdir / name
    link.symlink_to(world.outside)
    return link


def long_path(world: World, total: int) -> str:
    part = "d" * 200
    path = str(world.workdir)
    while len(path) < total:
        path += "/" + part
    return path


def huge_map(entries: int, value_bytes: int = 1) -> dict[str, str]:
    return {f"k{i}": "v" * value_bytes for i in range(entries)}


ATTACKS = {
    # ---- paths
    "publish-target-symlink-to-outside": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, symlink_out(w, "lnk")),
        INVALID, ("target_path", "symbolic link")),
    "stage-path-symlink-to-outside": Attack(
        lambda w: w.stage(w.idle.volume_id, symlink_out(w, "slnk")),
        INVALID, ("staging_target_path", "symbolic link")),
    "publish-staging-path-symlink": Attack(
        lambda w: w.publish(w.volume.volume_id, symlink_out(w, "stlnk"), w.workdir / "t2"),
        (INVALID, grpc.StatusCode.FAILED_PRECONDITION), ("staging_target_path",)),
    "publish-target-dot-dot": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, f"{w.workdir}/x/../outside"),
        INVALID, ("target_path", '".."')),
    "stage-path-dot-dot": Attack(
        lambda w: w.stage(w.idle.volume_id, f"{w.workdir}/../{w.workdir.name}/outside"),
        INVALID, ("staging_target_path", '".."')),
    "publish-target-nul-byte": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, f"{w.workdir}/t\0/../../etc"),
        INVALID, ("target_path",)),
    "stage-path-nul-byte": Attack(
        lambda w: w.stage(w.idle.volume_id, f"{w.workdir}/s\0x"),
        INVALID, ("staging_target_path", "control character")),
    "publish-target-relative": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, "target2"),
        INVALID, ("target_path", "absolute")),
    "publish-target-component-over-255": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, f"{w.workdir}/{'c' * 256}"),
        INVALID, ("target_path", "256 bytes", "255")),
    "stage-path-inner-component-over-255": Attack(
        lambda w: w.stage(w.idle.volume_id, f"{w.workdir}/{'c' * 300}/staging"),
        INVALID, ("staging_target_path", "300 bytes", "255")),
    "publish-target-over-4096": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, long_path(w, 5000)),
        INVALID, ("target_path", "4095")),
    "publish-target-inside-state-dir": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, w.state_dir / "volumes" / w.idle.volume_id),
        INVALID, ("target_path", "state directory")),
    "stage-path-is-the-state-dir": Attack(
        lambda w: w.stage(w.idle.volume_id, w.state_dir),
        INVALID, ("staging_target_path", "state directory")),
    # ---- maps: far more entries, or far larger values, than anything rosetctl takes
    "parameters-100000-entries": Attack(
        lambda w: w.create("big-params", parameters=huge_map(100_000)),
        (INVALID, EXHAUSTED), ("parameters",)),
    "secrets-100000-entries": Attack(
        lambda w: w.create("big-secrets", secrets=huge_map(100_000)),
        (INVALID, EXHAUSTED), ("secrets",)),
    "parameter-value-1MiB": Attack(
        lambda w: w.create("big-value", parameters={"type": "x" * MiB}),
        (INVALID, EXHAUSTED), ("parameters",)),
    "secret-value-1MiB": Attack(
        lambda w: w.create("big-secret", secrets={"token": "x" * MiB}),
        (INVALID, EXHAUSTED), ("secrets",)),
    "stage-secrets-100000-entries": Attack(
        lambda w: w.stage(w.idle.volume_id, w.workdir / "s3", secrets=huge_map(100_000)),
        (INVALID, EXHAUSTED), ("secrets",)),
    "volume-context-1MiB": Attack(
        lambda w: w.publish(w.volume.volume_id, w.staging, w.workdir / "t3", volume_context={"x": "y" * MiB}),
        (INVALID, EXHAUSTED), ("volume_context",)),
    "message-over-grpc-limit": Attack(
        lambda w: w.create("huge", parameters=huge_map(8, MiB)),
        EXHAUSTED, ()),
    # ---- ids: forged, or another provider's
    "volume-id-with-slash": Attack(
        lambda w: w.publish(f"{w.volume.volume_id}/../{w.idle.volume_id}", w.staging, w.workdir / "t4"),
        INVALID, ("volume_id",)),
    "volume-id-dot-dot": Attack(
        lambda w: w.stage("local-../../etc", w.workdir / "s5"),
        INVALID, ("volume_id",)),
    "volume-id-of-an-unconfigured-provider": Attack(
        lambda w: w.stage("roset-0123456789abcdef", w.workdir / "s6"),
        (NOT_FOUND, INVALID), ("roset-0123456789abcdef",)),
    "volume-id-forged-in-our-format": Attack(
        lambda w: w.stage("local-0123456789abcdef", w.workdir / "s7"),
        NOT_FOUND, ("local-0123456789abcdef",)),
    # An id rosetctl never issued names nothing: deleting it is done already (CSI; csi-sanity
    # sends exactly this). It must touch nothing the id's text points at.
    "delete-volume-forged-id": Attack(
        lambda w: w.server.controller.DeleteVolume(w.pb2.DeleteVolumeRequest(volume_id="local-../state"),
                                                   timeout=FAST),
        None, ()),
    "delete-volume-id-with-a-path": Attack(
        lambda w: w.server.controller.DeleteVolume(w.pb2.DeleteVolumeRequest(
            volume_id=f"{w.volume.volume_id}/../{w.idle.volume_id}"), timeout=FAST),
        None, ()),
    "delete-snapshot-forged-id": Attack(
        lambda w: w.server.controller.DeleteSnapshot(w.pb2.DeleteSnapshotRequest(
            snapshot_id=f"{w.snapshot.snapshot_id}/../../state.db"), timeout=FAST),
        None, ()),
    "expand-forged-id": Attack(
        lambda w: w.server.controller.ControllerExpandVolume(w.pb2.ControllerExpandVolumeRequest(
            volume_id="../../etc", capacity_range=w.pb2.CapacityRange(required_bytes=MiB)), timeout=FAST),
        (INVALID, NOT_FOUND), ("volume_id",)),
    "snapshot-of-forged-id": Attack(
        lambda w: w.server.controller.CreateSnapshot(w.pb2.CreateSnapshotRequest(
            source_volume_id=f"{w.idle.volume_id}/..", name="s2"), timeout=FAST),
        INVALID, ("source_volume_id",)),
    "restore-name-into-the-state-dir": Attack(
        lambda w: w.create("../volumes/restored", volume_content_source=w.pb2.VolumeContentSource(
            snapshot=w.pb2.VolumeContentSource.SnapshotSource(snapshot_id=w.snapshot.snapshot_id))),
        INVALID, ("name",)),
    "restore-from-forged-snapshot-id": Attack(
        lambda w: w.create("restored", volume_content_source=w.pb2.VolumeContentSource(
            snapshot=w.pb2.VolumeContentSource.SnapshotSource(snapshot_id="../../state.db"))),
        (INVALID, NOT_FOUND), ("snapshot",)),
    "clone-from-another-providers-id": Attack(
        lambda w: w.create("cloned", volume_content_source=w.pb2.VolumeContentSource(
            volume=w.pb2.VolumeContentSource.VolumeSource(volume_id="iscsi-0123456789abcdef"))),
        (INVALID, NOT_FOUND), ("iscsi-0123456789abcdef",)),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_is_refused_clearly_and_changes_nothing(world, name):
    attack = ATTACKS[name]
    if attack.codes is None:
        attack.call(world)
    else:
        expect_refused(lambda: attack.call(world), attack.codes, *attack.mentions)
    for link in ("lnk", "slnk", "stlnk"):  # the attack's own symlinks are not a change
        if (world.workdir / link).is_symlink():
            (world.workdir / link).unlink()
    world.assert_unchanged(name)


# ---- invalid UTF-8: a Python client cannot put it in a string field, so the request is written
# by hand (field 1 of CreateVolumeRequest, `name`, as length-delimited bytes).

def raw_create_volume(name: bytes) -> bytes:
    assert len(name) < 128
    return bytes([0x0A, len(name)]) + name


def test_invalid_utf8_in_a_name_is_refused_and_creates_nothing(world):
    call = world.server.channel.unary_unary(
        "/csi.v1.Controller/CreateVolume", request_serializer=lambda raw: raw,
        response_deserializer=lambda raw: raw)
    # gRPC C++ parses the request before any of our code runs; protobuf refuses a proto3 string
    # that is not UTF-8 (logging the field's name to serve's stderr) and the callback server
    # answers UNIMPLEMENTED with no message. Nothing of ours can name the field; what matters is
    # that the call is refused, nothing is stored, and serve carries on.
    expect_refused(lambda: call(raw_create_volume(b"bad\xff\xfename"), timeout=FAST),
                   (INVALID, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNIMPLEMENTED))
    assert "invalid UTF-8" in world.server.log() and "CreateVolumeRequest.name" in world.server.log()
    world.assert_unchanged("a name with invalid UTF-8")
    assert world.server.proc.poll() is None, "expected serve to keep running"


# ---- a symlink swapped in while the call runs: the mount lands where asked, or nowhere.

@pytest.mark.parametrize("step", ["stage", "publish"])
def test_path_swapped_for_a_symlink_during_the_call_never_mounts_elsewhere(world, processes, step):
    race = world.workdir / "race"
    race.mkdir()
    path, link = race / "path", race / "lnk"
    path.mkdir()
    link.symlink_to(world.outside)
    swapper = start_swapper(processes, path, link)
    pb2, node = world.pb2, world.server.node
    mounted, attempts, deadline = 0, 0, time.monotonic() + 60
    while attempts < 100 and time.monotonic() < deadline:
        attempts += 1
        try:
            if step == "stage":
                world.stage(world.idle.volume_id, path)
            else:
                world.publish(world.volume.volume_id, world.staging, path)
        except grpc.RpcError as refused:
            assert refused.code() in (INVALID, grpc.StatusCode.FAILED_PRECONDITION, NOT_FOUND), (
                f"attempt {attempts}: expected a clean refusal, got {refused.code().name}: {refused.details()}")
        else:
            mounted += 1
        assert not is_mount_point(str(world.outside)), f"attempt {attempts}: mounted over {world.outside}"
        strays = [m for m in world.ours() if not m.startswith((str(world.staging) + " ", str(world.target) + " ",
                                                                str(race) + "/"))]
        assert not strays, f"attempt {attempts}: a mount landed outside where it was asked: {strays}"
        # Undo whatever went through. While the name is a symlink the undo is refused like the
        # call (INVALID_ARGUMENT); the swapper soon puts the real directory back.
        for _ in range(200):
            try:
                if step == "stage":
                    node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(
                        volume_id=world.idle.volume_id, staging_target_path=str(path)), timeout=CALL_TIMEOUT)
                else:
                    node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(
                        volume_id=world.volume.volume_id, target_path=str(path)), timeout=CALL_TIMEOUT)
                break
            except grpc.RpcError as refused:
                assert refused.code() == INVALID, f"expected the undo refused only for the symlink: {refused.details()}"
        left = mounts_under(str(race))
        assert not left, (f"attempt {attempts}: a mount stayed under {race} after the undo: {left}\n"
                          f"{[l for l in world.server.log().splitlines() if 'Unstage' not in l and 'debug' not in l][-6:]}")
    swapper.kill()
    swapper.wait()
    assert mounts_under(str(race)) == [], f"expected every raced mount undone: {mounts_under(str(race))}"
    assert sorted(os.listdir(world.outside)) == ["victim.txt"]
    assert mounted > 0, f"expected some of {attempts} calls to win the race and mount at {path}"
