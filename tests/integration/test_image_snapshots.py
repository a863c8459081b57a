"""Snapshots, restores and clones of image and block volumes (providers/common/image_snapshots.cc):
real loop devices and filesystems, a writer running during the commit, FIFREEZE, reflinks on a
reflink-capable xfs, and the space a deleted snapshot gives back."""
from __future__ import annotations

import hashlib
import os
import shutil
import struct
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from csi_server import CALL_TIMEOUT, expect_code
from rosetctl_cli import EXIT_PRECONDITION, EXIT_USAGE
from rosetctl_fixtures import skip_or_fail
from rosetctl_loops import loop_devices_of
from rosetctl_mounts import mount_at

MiB = 2**20
RECORD = 4096


def image_of(cli, volume: dict) -> Path:
    return cli.state_dir / "images" / f"{volume['id']}.img"


def loop_dio(loop) -> str:
    """"1" when the loop device does direct I/O on its backing file, as sysfs shows it."""
    return Path(f"/sys/block/{Path(loop.device).name}/loop/dio").read_text().strip()


def blobs_dir(cli) -> Path:
    return cli.state_dir / "store" / "blobs"


def blob_files(cli) -> list[Path]:
    return sorted(p for p in blobs_dir(cli).glob("*/*"))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MiB):
            digest.update(chunk)
    return digest.hexdigest()


def checksums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha256_of(p) for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "lost+found"}


def write_random(path: Path, mib: int) -> None:
    with open(path, "wb") as out:
        for _ in range(mib):
            out.write(os.urandom(MiB))
        out.flush()
        os.fsync(out.fileno())


# A writer appending numbered 4 KiB records with an fsync after each, until killed; it prints
# how many records it has written every 16 records, so the test knows a lower bound.
WRITER = r"""
import os, struct, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
n = 0
while True:
    os.write(fd, struct.pack("<Q", n) * 512)
    os.fsync(fd)
    n += 1
    if n % 16 == 0:
        print(n, flush=True)
"""


def start_writer(processes, path: Path):
    return processes.start([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)


def records_written(writer, at_least: int) -> int:
    while True:
        line = writer.stdout.readline()
        assert line, "expected the writer to keep writing"
        if int(line) >= at_least:
            return int(line)


def check_records(path: Path, at_least: int) -> int:
    """The file holds records 0..n-1, each complete, n >= at_least: one point in time of the writer."""
    data = path.read_bytes()
    assert len(data) % RECORD == 0, f"expected whole records, the file has {len(data)} bytes"
    count = len(data) // RECORD
    assert count >= at_least, f"expected at least {at_least} records in the snapshot, found {count}"
    for n in range(count):
        assert data[n * RECORD:(n + 1) * RECORD] == struct.pack("<Q", n) * 512, f"record {n} is torn or out of order"
    return count


def fsck_clean(image: Path) -> None:
    checked = subprocess.run(["e2fsck", "-fn", str(image)], capture_output=True, text=True)
    assert checked.returncode == 0, f"expected a clean filesystem in {image}: {checked.stdout}{checked.stderr}"


# ---------------------------------------------------------------- mount volumes

def test_commit_of_a_connected_ext4_volume_with_a_writer_restores_exactly_that_moment(cli, workdir, processes):
    cli.create("db", "--size", "64Mi", "--type", "image")
    source = workdir / "db"
    cli.connect("db", source)
    write_random(source / "table", 8)
    (source / "dir").mkdir()
    (source / "dir" / "small").write_text("kept")
    before = checksums(source)

    writer = start_writer(processes, source / "log")
    floor = records_written(writer, 32)
    snapshot = cli.ok_json("snapshot", "commit", "db", "-m", "under load")
    writer.kill()
    writer.wait()
    assert snapshot["ready"] and len(snapshot["commit"]) == 64, f"expected a ready commit: {snapshot}"
    assert snapshot["type"] == "image" and snapshot["fs"] == "ext4" and snapshot["access_type"] == "mount", snapshot
    assert snapshot["files"] == 1 and snapshot["bytes"] == 64 * MiB, f"expected the whole image as one file: {snapshot}"
    assert 8 * MiB < snapshot["new_bytes"] < 64 * MiB, f"expected the data stored, the holes not: {snapshot}"
    (source / "table").write_text("changed after the commit")

    restored = cli.ok_json("snapshot", "restore", snapshot["commit"][:10], "--name", "db-copy")
    assert restored["type"] == "image" and restored["fs"] == "ext4" and restored["capacity_bytes"] == 64 * MiB, (
        f"expected the source's kind and size: {restored}")
    assert restored["access_type"] == "mount"
    fsck_clean(image_of(cli, restored))  # frozen while copied: nothing to recover
    target = workdir / "db-copy"
    cli.connect("db-copy", target)
    assert mount_at(str(target)).fs_type == "ext4"
    after = checksums(target)
    after.pop("log")
    assert after == before, "expected exactly the files as they were at the commit"
    check_records(target / "log", floor)
    shown = cli.ok_json("snapshot", "show", snapshot["id"])
    assert shown["commit"] == snapshot["commit"] and shown["type"] == "image", shown


def test_clone_of_a_connected_image_volume_is_an_independent_copy(cli, workdir):
    cli.create("src", "--size", "64Mi", "--type", "image")
    source = workdir / "src"
    cli.connect("src", source)
    write_random(source / "data", 4)
    expected = checksums(source)

    clone = cli.create("copy", "--from-volume", "src")
    assert clone["type"] == "image" and clone["fs"] == "ext4" and clone["capacity_bytes"] == 64 * MiB, clone
    assert (cli.state_dir / "images").is_dir() and not list((cli.state_dir / "images").glob(".*")), (
        "expected no temporary file left in the image directory")
    target = workdir / "copy"
    cli.connect("copy", target)
    assert checksums(target) == expected, "expected the clone to hold the source's files"
    (target / "data").write_text("only in the clone")
    assert checksums(source) == expected, "expected the source untouched by writes to the clone"
    again = cli.create("copy", "--from-volume", "src")
    assert again["id"] == clone["id"], "expected a repeated clone to return the same volume"


def test_clones_and_restores_take_mutable_parameters_of_their_source_kind(cli):
    """A clone or restore names no type (its source decides), so directIO is judged by the source."""
    cli.create("img", "--size", "16Mi", "--type", "image")
    clone = cli.create("img-copy", "--from-volume", "img", "--param", "directIO=false")
    assert clone["mutable_parameters"] == {"directIO": "false"}, clone
    commit = cli.ok_json("snapshot", "commit", "img")["commit"]
    restored = cli.create("img-back", "--from-snapshot", commit, "--param", "directIO=false")
    assert restored["mutable_parameters"] == {"directIO": "false"}, restored
    cli.create("dir")
    refused = cli.run("volume", "create", "dir-copy", "--from-volume", "dir", "--param", "directIO=false")
    assert refused.rc == EXIT_USAGE and "directIO" in refused.stderr, refused.describe()
    assert "dir-copy" not in [v["name"] for v in cli.volumes()]


def test_restore_keeps_kind_size_and_grows_when_asked_and_refuses_other_kinds(cli, workdir, csi, start_serve):
    cli.create("e4", "--size", "64Mi", "--type", "image")
    target = workdir / "e4"
    cli.connect("e4", target)
    (target / "x").write_text("x")
    commit = cli.ok_json("snapshot", "commit", "e4")["commit"]
    cli.create("plain")
    dir_commit = cli.ok_json("snapshot", "commit", "plain")["commit"]

    bigger = cli.ok_json("snapshot", "restore", commit, "--name", "big", "--size", "96Mi")
    assert bigger["capacity_bytes"] == 96 * MiB and bigger["fs"] == "ext4", bigger
    cli.connect("big", workdir / "big")
    assert os.statvfs(workdir / "big").f_blocks * os.statvfs(workdir / "big").f_frsize > 80 * MiB, (
        "expected the restored filesystem grown to the bigger image at its first connect")
    assert (workdir / "big" / "x").read_text() == "x"

    refusals = {
        "an image snapshot into a dir volume": ("volume", "create", "d", "--from-snapshot", commit, "--type", "dir"),
        "an ext4 snapshot as block": ("volume", "create", "b", "--from-snapshot", commit, "--block"),
        "an ext4 snapshot as xfs": ("volume", "create", "x", "--from-snapshot", commit, "--type", "image",
                                    "--fs", "xfs"),
        "a dir snapshot into an image": ("volume", "create", "i", "--from-snapshot", dir_commit, "--type", "image"),
        "a smaller size": ("snapshot", "restore", commit, "--name", "s", "--size", "32Mi"),
    }
    for what, args in refusals.items():
        refused = cli.run(*args)
        assert refused.rc == EXIT_USAGE, f"expected {what} refused with exit 2: {refused.describe()}"
    assert sorted(v["name"] for v in cli.volumes()) == ["big", "e4", "plain"], "expected no half-made volume"
    assert len(list((cli.state_dir / "images").glob("*.img"))) == 2, "expected no image file left by a refusal"

    pb2 = csi.pb2
    server = start_serve()
    snapshot_id = cli.ok_json("snapshot", "show", commit)["id"]
    access = pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    xfs = pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(fs_type="xfs"), access_mode=access)
    source = pb2.VolumeContentSource(snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=snapshot_id))
    details = expect_code(lambda: server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="pvc-xfs", volume_capabilities=[xfs], volume_content_source=source), timeout=CALL_TIMEOUT),
        grpc.StatusCode.INVALID_ARGUMENT, "restoring ext4 as xfs")
    assert "ext4" in details and "xfs" in details, details
    ext4 = pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(fs_type="ext4"), access_mode=access)
    made = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="pvc-e4", volume_capabilities=[ext4], volume_content_source=source), timeout=CALL_TIMEOUT).volume
    assert made.capacity_bytes == 64 * MiB and made.volume_context["fs"] == "ext4", made
    assert made.content_source.snapshot.snapshot_id == snapshot_id, made


# ---------------------------------------------------------------- block volumes

def test_snapshot_of_a_connected_block_volume_restores_as_a_block_volume(cli, workdir):
    cli.create("raw", "--size", "8Mi", "--block")
    (workdir / "dev").mkdir()
    device = workdir / "dev" / "raw"
    cli.connect("raw", device)
    pattern = os.urandom(3 * MiB)
    fd = os.open(device, os.O_WRONLY)
    try:
        os.pwrite(fd, pattern, MiB)  # buffered in the device's page cache until flushed
    finally:
        os.close(fd)
    snapshot = cli.ok_json("snapshot", "commit", "raw")
    assert snapshot["access_type"] == "block" and snapshot["fs"] is None, snapshot

    restored = cli.ok_json("snapshot", "restore", snapshot["commit"], "--name", "raw2")
    assert restored["access_type"] == "block" and restored["capacity_bytes"] == 8 * MiB, restored
    copy = workdir / "dev" / "raw2"
    cli.connect("raw2", copy)
    fd = os.open(copy, os.O_RDONLY)
    try:
        assert os.pread(fd, len(pattern), MiB) == pattern, "expected the block data in the restored volume"
        assert os.pread(fd, MiB, 0) == b"\0" * MiB, "expected the untouched start still zero"
    finally:
        os.close(fd)
    clone = cli.create("raw3", "--from-volume", "raw")
    assert clone["access_type"] == "block" and clone["capacity_bytes"] == 8 * MiB, clone


# ---------------------------------------------------------------- storage

def test_delete_frees_the_image_unless_another_snapshot_needs_it(cli, workdir):
    cli.create("big", "--size", "64Mi", "--type", "image")
    target = workdir / "big"
    cli.connect("big", target)
    write_random(target / "data", 16)
    cli.ok("volume", "disconnect", "big")  # unchanged between the two commits below
    first = cli.ok_json("snapshot", "commit", "big", "--name", "first")
    second = cli.ok_json("snapshot", "commit", "big", "--name", "second")
    assert first["commit"] != second["commit"] and second["parent"] == first["commit"], (first, second)
    assert second["new_bytes"] == 0, f"expected an unchanged image stored once: {second}"
    blobs = blob_files(cli)
    assert len(blobs) == 1 and blobs[0].stat().st_blocks * 512 >= 16 * MiB, blobs

    diff = cli.ok_json("snapshot", "diff", "first", "second")
    assert diff["changed"] == [] and diff["added"] == [] and diff["removed"] == [], diff
    verified = cli.ok_json("snapshot", "verify")
    assert verified["ok"] and verified["snapshots"] == 2, verified

    cli.ok("snapshot", "delete", "first")
    assert blob_files(cli) == blobs, "expected the image kept: the second snapshot needs it"
    cli.ok_json("snapshot", "restore", "second", "--name", "back")
    cli.connect("back", workdir / "back")
    assert (workdir / "back" / "data").stat().st_size == 16 * MiB

    cli.connect("big", target)
    (target / "more").write_text("changed")
    cli.ok("volume", "disconnect", "big")
    cli.ok_json("snapshot", "commit", "big", "--name", "third")
    changed = cli.ok_json("snapshot", "diff", "second", "third")
    assert changed["changed"] == [{"path": "image", "aspects": ["content"]}], changed
    cli.create("plain")
    dir_commit = cli.ok_json("snapshot", "commit", "plain")["commit"]
    mixed = cli.run("snapshot", "diff", "third", dir_commit)
    assert mixed.rc == EXIT_USAGE and "same kind" in mixed.stderr, mixed.describe()

    used = sum(p.stat().st_blocks for p in blob_files(cli)) * 512
    cli.ok("snapshot", "delete", "second")
    cli.ok("snapshot", "delete", "third")
    left = sum(p.stat().st_blocks for p in blob_files(cli)) * 512
    assert used - left >= 32 * MiB, f"expected both images' space given back: {used} -> {left}"
    assert (workdir / "back" / "data").stat().st_size == 16 * MiB, "expected restores independent of snapshots"


# ---------------------------------------------------------------- crashes

def test_a_freeze_left_by_a_killed_commit_is_thawed_by_serve_startup(cli, workdir, start_serve):
    cli.create("frozen", "--size", "64Mi", "--type", "image")
    target = workdir / "frozen"
    cli.connect("frozen", target)
    (target / "before").write_text("1")
    try:
        crashed = cli.run("snapshot", "commit", "frozen",
                          env={**cli.env, "ROSETCTL_CRASH_AT": "image-copy-frozen"})
        assert crashed.rc == -9, f"expected the commit to die by SIGKILL: {crashed.describe()}"
        server = start_serve()
        assert "thawed the filesystem of volume" in server.log(), server.log()
        (target / "after").write_text("2")  # would block if still frozen
    finally:
        subprocess.run(["fsfreeze", "-u", str(target)], capture_output=True)
    assert cli.ok_json("snapshot", "list") == [], "expected no snapshot left by the killed commit"
    commit = cli.ok_json("snapshot", "commit", "frozen")
    assert commit["ready"], commit


@pytest.mark.parametrize("signal_name", ["INT", "TERM"])
def test_ctrl_c_or_sigterm_while_frozen_thaws_before_dying(cli, workdir, signal_name):
    cli.create("frozen", "--size", "64Mi", "--type", "image")
    target = workdir / "frozen"
    cli.connect("frozen", target)
    try:
        stopped = cli.run("snapshot", "commit", "frozen",
                          env={**cli.env, "ROSETCTL_CRASH_AT": "image-copy-frozen",
                               "ROSETCTL_CRASH_SIGNAL": signal_name})
        expected = -getattr(signal, f"SIG{signal_name}")
        assert stopped.rc == expected, f"expected the commit to die by SIG{signal_name}: {stopped.describe()}"
        # No serve ran to reconcile: the dying CLI itself must have thawed the filesystem.
        writer = subprocess.run(["sh", "-c", f"echo 2 > {target}/after && sync {target}/after"],
                                timeout=20, capture_output=True)
        assert writer.returncode == 0 and (target / "after").read_text() == "2\n"
        unfrozen = subprocess.run(["fsfreeze", "-u", str(target)], capture_output=True, text=True)
        assert unfrozen.returncode != 0, "expected the filesystem to be thawed already"
    finally:
        subprocess.run(["fsfreeze", "-u", str(target)], capture_output=True)


def test_a_health_check_never_freezes_a_volume_without_a_freeze_mark(cli, workdir):
    """Asking the kernel whether a filesystem is frozen means freezing it; `volume show` (and
    kubelet's periodic NodeGetVolumeStats) must not do that to a healthy volume. A freeze made by
    hand is unseen until a snapshot meets it: had the check probed, it would have reported it."""
    cli.create("quiet", "--size", "64Mi", "--type", "image")
    target = workdir / "quiet"
    cli.connect("quiet", target)
    subprocess.run(["fsfreeze", "-f", str(target)], check=True)
    try:
        assert cli.volume("quiet")["condition"]["abnormal"] is False
        assert not list((cli.state_dir / "images").glob("*.frozen"))
        assert cli.run("snapshot", "commit", "quiet").rc == EXIT_PRECONDITION
        assert list((cli.state_dir / "images").glob("*.frozen")), "expected the freeze marked"
        assert cli.volume("quiet")["condition"]["abnormal"] is True
    finally:
        subprocess.run(["fsfreeze", "-u", str(target)], capture_output=True)
    assert cli.volume("quiet")["condition"]["abnormal"] is False
    assert not list((cli.state_dir / "images").glob("*.frozen")), "expected the mark gone once thawed"


def test_a_frozen_filesystem_fails_a_commit_at_once_and_shows_in_the_condition(cli, workdir):
    """A freeze lasts until someone thaws it: no retry loop (it printed ~65 warnings and gave up
    after 31 s), one volume prefix, and `volume show` says it is frozen and how to thaw it."""
    cli.create("frozen", "--size", "64Mi", "--type", "image")
    target = workdir / "frozen"
    cli.connect("frozen", target)
    assert cli.volume("frozen")["condition"]["abnormal"] is False
    subprocess.run(["fsfreeze", "-f", str(target)], check=True)
    try:
        started = time.monotonic()
        result = cli.run("snapshot", "commit", "frozen")
        took = time.monotonic() - started
        assert result.rc == EXIT_PRECONDITION, result.describe()
        assert took < 10, f"expected no retry loop, took {took:.1f} s"
        assert "frozen already" in result.stderr and "fsfreeze -u" in result.stderr, result.describe()
        assert result.stderr.count("warning:") <= 1 and "waiting" not in result.stderr, result.describe()
        assert 'volume "frozen": volume "frozen"' not in result.stderr, result.describe()
        condition = cli.volume("frozen")["condition"]
        assert condition["abnormal"] and "frozen" in condition["message"], condition
        assert "fsfreeze -u" in condition["message"], condition
    finally:
        subprocess.run(["fsfreeze", "-u", str(target)], capture_output=True)
    assert cli.volume("frozen")["condition"]["abnormal"] is False, "expected ok once thawed"
    (target / "after").write_text("2")  # the health check left it thawed
    assert cli.ok_json("snapshot", "commit", "frozen")["ready"]


def test_a_restore_killed_before_its_image_is_named_leaves_nothing(cli, workdir):
    cli.create("src", "--size", "16Mi", "--block")
    commit = cli.ok_json("snapshot", "commit", "src")["commit"]
    crashed = cli.run("snapshot", "restore", commit, "--name", "half",
                      env={**cli.env, "ROSETCTL_CRASH_AT": "image-filled"})
    assert crashed.rc == -9, f"expected the restore to die by SIGKILL: {crashed.describe()}"
    images = sorted(p.name for p in (cli.state_dir / "images").iterdir())
    assert [name for name in images if name.endswith(".img")] == [f"{cli.volume('src')['id']}.img"], (
        f"expected only the source's image (the copy was anonymous): {images}")
    assert [v["name"] for v in cli.volumes()] == ["src"]
    # Its room stays reserved only until the next capacity check finds nobody holding it.
    cli.create("next", "--size", "16Mi", "--block")
    left = sorted(p.name for p in (cli.state_dir / "images").iterdir() if p.name.endswith(".reserved"))
    assert left == [], f"expected the dead restore's reservation dropped: {left}"


def test_a_damaged_image_blob_fails_the_restore_and_leaves_nothing(cli):
    source = cli.create("src", "--size", "16Mi", "--block")
    with open(image_of(cli, source), "r+b") as image:  # not connected: written as a plain file
        image.write(os.urandom(4 * MiB))
    commit = cli.ok_json("snapshot", "commit", "src")["commit"]
    [blob] = blob_files(cli)
    with open(blob, "r+b") as f:  # root writes the 0444 blob; its size stays
        f.seek(2 * MiB)
        f.write(b"\xde\xad\xbe\xef")
    restored = cli.run("snapshot", "restore", commit, "--name", "bad")
    assert restored.rc == 1, f"expected the restore of a damaged image to fail (DATA_LOSS): {restored.describe()}"
    assert blob.name in restored.stderr and "corrupt" in restored.stderr, (
        f"expected the error to name the blob: {restored.describe()}")
    assert [v["name"] for v in cli.volumes()] == ["src"], "expected no volume from a failed restore"
    images = sorted(p.name for p in (cli.state_dir / "images").iterdir() if p.name.endswith(".img"))
    assert images == [f"{source['id']}.img"], f"expected no image left by the failed restore: {images}"


# ---------------------------------------------------------------- reflinks

@pytest.fixture
def reflink_xfs(workdir):
    """A 1 GiB sparse xfs with reflink=1 mounted at workdir/xfs (teardown unmounts and detaches it)."""
    if shutil.which("mkfs.xfs") is None:
        skip_or_fail("mkfs.xfs is not installed (scripts/install-deps.sh installs xfsprogs)")
    backing, mount_point = workdir / "xfs.img", workdir / "xfs"
    with open(backing, "wb") as out:
        out.truncate(1024 * MiB)
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(backing)], check=True)
    mount_point.mkdir()
    subprocess.run(["mount", "-o", "loop", str(backing), str(mount_point)], check=True)
    return mount_point


def used_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def test_xfs_volume_on_a_reflink_filesystem_is_committed_and_restored_by_reflink(cli, workdir, reflink_xfs):
    cli.state_dir = reflink_xfs / "state"
    cli.create("x", "--size", "320Mi", "--type", "image", "--fs", "xfs")
    target = workdir / "x"
    cli.connect("x", target)
    assert mount_at(str(target)).fs_type == "xfs"
    cli.ok("volume", "modify", "x", "--param", "directIO=true")  # possible until extents are shared
    write_random(target / "data", 48)
    expected = checksums(target)

    before = used_bytes(reflink_xfs)
    snapshot = cli.ok_json("snapshot", "commit", "x")
    assert snapshot["fs"] == "xfs", snapshot
    assert used_bytes(reflink_xfs) - before < 16 * MiB, (
        f"expected the commit to share the image's extents, it took {used_bytes(reflink_xfs) - before} bytes")
    before = used_bytes(reflink_xfs)
    restored = cli.ok_json("--capacity-overcommit", "snapshot", "restore", snapshot["commit"], "--name", "x2")
    assert restored["fs"] == "xfs" and restored["capacity_bytes"] == 320 * MiB, restored
    assert used_bytes(reflink_xfs) - before < 16 * MiB, "expected the restore to share extents too"
    cli.connect("x2", workdir / "x2")
    assert checksums(workdir / "x2") == expected
    # Restored again by name with type=image and no filesystem named: the same xfs volume.
    args = ("--capacity-overcommit", "volume", "create", "x3", "--from-snapshot", snapshot["commit"],
            "--type", "image")
    assert cli.ok_json(*args)["fs"] == "xfs"
    assert cli.ok_json(*args)["id"] == cli.volume("x3")["id"], "expected a repeated restore to be idempotent"
    assert loop_devices_of(image_of(cli, restored)), "expected the restored image attached"
    # The image now shares extents with the snapshot, which makes xfs ask for 4 KiB-aligned
    # direct I/O on it: its loop device must still show the 512-byte sectors it was made with.
    # directIO=true no longer fits either: the volume still connects, buffered, and says why.
    cli.ok("volume", "disconnect", "x")
    connected = cli.run("volume", "connect", "x", "--target", str(target))
    assert connected.rc == 0, connected.describe()
    assert "4096-byte aligned direct I/O" in connected.stderr, connected.describe()
    assert checksums(target) == expected, "expected the source to reconnect after a reflink snapshot"
    assert [loop_dio(loop) for loop in loop_devices_of(image_of(cli, cli.volume("x")))] == ["0"]
    again = cli.run("volume", "modify", "x", "--param", "directIO=true")
    assert again.rc == 0, f"expected asking again for what is recorded to change nothing: {again.describe()}"
    assert cli.volume("x")["mutable_parameters"] == {"directIO": "true"}, "expected the setting kept"
    cli.ok("volume", "modify", "x", "--param", "directIO=false")
    refused = cli.run("volume", "modify", "x", "--param", "directIO=true")
    assert refused.rc == EXIT_USAGE and "4096-byte aligned direct I/O" in refused.stderr, refused.describe()
    assert cli.volume("x")["mutable_parameters"] == {"directIO": "false"}, "expected the refused change not recorded"
    # A restore shares extents with the snapshot from the start: directIO=true is recorded anyway.
    restored = cli.ok_json("--capacity-overcommit", "volume", "create", "x4", "--from-snapshot",
                           snapshot["commit"], "--param", "directIO=true")
    assert restored["mutable_parameters"] == {"directIO": "true"}, restored
