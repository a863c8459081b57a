"""Image volumes: sparse files on real loop devices with real ext4/xfs filesystems, raw block
volumes, online and offline growth, health, and the startup reconcile of leaked devices."""
from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat
import struct
import subprocess
import time
import uuid
from pathlib import Path

import grpc
import pytest

from rosetctl_cli import EXIT_CONFLICT, EXIT_PRECONDITION, EXIT_USAGE
from rosetctl_loops import loop_devices_of, wait_until_detached
from rosetctl_mounts import detach as unmount_lazily
from rosetctl_mounts import mount_at
from csi_server import CALL_TIMEOUT, expect_code

MiB = 2**20
EXIT_RESOURCE_EXHAUSTED = 8
BLKGETSIZE64 = 0x80081272
CAP_SYS_RESOURCE = 24


def image_of(cli, volume: dict) -> Path:
    """Where the local provider keeps an image volume (see providers/common/image_volume.h)."""
    return cli.state_dir / "images" / f"{volume['id']}.img"


def fs_size(path) -> int:
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


def device_size(path) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return struct.unpack("Q", fcntl.ioctl(fd, BLKGETSIZE64, b"\0" * 8))[0]
    finally:
        os.close(fd)


def can_grow_ext4_online() -> bool:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def write_mib(path: Path, count: int, fill: bytes = b"x") -> None:
    with open(path, "wb") as out:
        for _ in range(count):
            out.write(fill * MiB)
        out.flush()
        os.fsync(out.fileno())


# ---------------------------------------------------------------- mount volumes

def test_image_volume_keeps_data_across_disconnect_and_reconnect(cli, workdir):
    created = cli.create("db", "--size", "64Mi", "--type", "image")
    assert created["type"] == "image" and created["fs"] == "ext4" and created["size_enforced"], (
        f"expected an enforced ext4 image volume, got {created}")
    image = image_of(cli, created)
    assert image.stat().st_size == 64 * MiB, f"expected a 64Mi image file, got {image.stat().st_size}"
    assert image.stat().st_blocks == 0, "expected a fresh image to be fully sparse"

    target = workdir / "db"
    assert cli.connect("db", target)["path"] == str(target)
    mount = mount_at(str(target))
    assert mount is not None and mount.fs_type == "ext4", f"expected ext4 mounted at {target}, got {mount}"
    assert 48 * MiB < fs_size(target) <= 64 * MiB, f"expected df to show about 64Mi, got {fs_size(target)}"
    loops = loop_devices_of(image)
    assert len(loops) == 1 and loops[0].autoclear, f"expected one autoclear loop device, got {loops}"
    (target / "hello").write_text("kept")

    cli.ok("volume", "disconnect", "db")
    assert mount_at(str(target)) is None, "expected the target unmounted after disconnect"
    assert wait_until_detached(image) == [], "expected the loop device to be gone after disconnect"

    cli.connect("db", target)
    assert (target / "hello").read_text() == "kept", "expected the data to survive a reconnect"
    cli.ok("volume", "disconnect", "db")
    cli.ok("volume", "delete", "db")
    assert not image.exists(), "expected delete to remove the image file"


def test_ext4_volume_of_64mib_refuses_the_65th_mib_with_enospc(cli, workdir):
    cli.create("small", "--size", "64Mi", "--type", "image", "--fs", "ext4")
    target = workdir / "small"
    cli.connect("small", target)
    written = 0
    with pytest.raises(OSError) as full:
        with open(target / "fill", "wb") as out:
            for _ in range(65):
                out.write(b"\xab" * MiB)
                out.flush()
                os.fsync(out.fileno())
                written += 1
    assert full.value.errno == errno.ENOSPC, f"expected ENOSPC, got {full.value!r}"
    assert 40 <= written < 65, f"expected ENOSPC after 40-64 MiB, it took {written} MiB"


def test_format_happens_once_and_data_survives_restaging(cli, workdir):
    cli.create("keep", "--size", "64Mi", "--type", "image")
    target = workdir / "keep"
    cli.connect("keep", target)
    write_mib(target / "data", 4, b"k")
    for _ in range(2):
        cli.ok("volume", "disconnect", "keep")
        cli.connect("keep", target)
        assert (target / "data").read_bytes() == b"k" * 4 * MiB, "expected a restage to keep the data"


def test_a_device_with_data_is_never_formatted(cli, workdir):
    volume = cli.create("foreign", "--size", "8Mi", "--type", "image")
    image = image_of(cli, volume)
    # A DOS partition table (one Linux partition and the 0x55AA mark): data that is not ext4.
    sector = bytearray(512)
    sector[446 + 4] = 0x83
    sector[446 + 9] = 0x08
    sector[446 + 13] = 0x20
    sector[510:512] = b"\x55\xaa"
    with open(image, "r+b") as out:
        out.write(sector)
    before = image.read_bytes()

    refused = cli.run("volume", "connect", "foreign", "--target", workdir / "foreign")
    assert refused.rc == EXIT_PRECONDITION, f"expected exit 5 for a device with data: {refused.describe()}"
    assert "partition table dos" in refused.stderr and "never formats" in refused.stderr, (
        f"expected the message to name what is there: {refused.stderr!r}")
    assert image.read_bytes() == before, "expected the image to be untouched"
    assert wait_until_detached(image) == [], "expected the failed connect to release its loop device"
    assert mount_at(str(workdir / "foreign")) is None, "expected nothing mounted after the refusal"


def test_xfs_volume_grows_while_mounted_and_statfs_sees_it_without_remount(cli, workdir):
    volume = cli.create("xdb", "--size", "320Mi", "--type", "image", "--fs", "xfs")
    image = image_of(cli, volume)
    target = workdir / "xdb"
    cli.connect("xdb", target)
    assert mount_at(str(target)).fs_type == "xfs", "expected xfs mounted"
    # Only metadata and xfs's 64 MiB log are written: the rest of the image stays a hole.
    assert image.stat().st_blocks * 512 < 100 * MiB, "expected the 320Mi image to stay sparse"
    before, mount_id = fs_size(target), mount_at(str(target)).mount_id
    (target / "kept").write_text("across growth")

    grown = cli.ok_json("volume", "expand", "xdb", "--size", "480Mi")
    assert grown["capacity_bytes"] == 480 * MiB, f"expected 480Mi recorded, got {grown}"
    assert grown["expansion"]["node"] == "done", f"expected the filesystem grown online: {grown['expansion']}"
    after = fs_size(target)
    assert after >= before + 150 * MiB, f"expected statfs to grow by about 160Mi: {before} -> {after}"
    assert mount_at(str(target)).mount_id == mount_id, "expected the same mount (no remount)"
    assert (target / "kept").read_text() == "across growth"
    assert image.stat().st_size == 480 * MiB, "expected the image file grown"
    assert not (image.parent / f"{volume['id']}.grow").exists(), "expected no grow left pending"


def test_xfs_minimum_size_is_checked_up_front(cli):
    small = cli.run("volume", "create", "tiny", "--size", "200Mi", "--type", "image", "--fs", "xfs")
    assert small.rc == EXIT_USAGE, f"expected exit 2 (OUT_OF_RANGE) below xfs's minimum: {small.describe()}"
    assert "at least 300Mi" in small.stderr, f"expected the minimum in the message: {small.stderr!r}"
    assert cli.volumes() == [], "expected nothing created"
    assert not list((cli.state_dir / "images").glob("*.img")), "expected no image file left"


def test_ext4_volume_grows_at_the_next_connect_when_online_growth_is_refused(cli, workdir):
    volume = cli.create("e4", "--size", "64Mi", "--type", "image")
    target = workdir / "e4"
    cli.connect("e4", target)
    (target / "kept").write_text("before growth")
    before = fs_size(target)

    grown = cli.run_json("volume", "expand", "e4", "--size", "128Mi")
    assert grown.rc == 0, f"expected expand to be accepted: {grown.describe()}"
    expansion = grown.json()["expansion"]
    assert grown.json()["capacity_bytes"] == 128 * MiB, f"expected 128Mi recorded: {grown.json()}"
    if can_grow_ext4_online():
        assert expansion["node"] == "done", f"expected online growth with CAP_SYS_RESOURCE: {expansion}"
        assert fs_size(target) > before + 48 * MiB
        return
    assert expansion["node"] == "pending", f"expected growth left for the next connect: {expansion}"
    assert "CAP_SYS_RESOURCE" in expansion["message"] and "next connect" in expansion["message"], (
        f"expected the message to say why and when: {expansion['message']!r}")
    assert fs_size(target) == before, "expected the mounted filesystem untouched (not half-grown)"
    table = cli.run("volume", "expand", "e4", "--size", "128Mi")
    assert table.rc == 0 and "warning" in table.stderr and "next connect" in table.stderr, (
        f"expected a warning on stderr in table mode: {table.describe()}")

    cli.ok("volume", "disconnect", "e4")
    cli.connect("e4", target)
    assert fs_size(target) > before + 48 * MiB, f"expected ~128Mi after reconnect, got {fs_size(target)}"
    assert (target / "kept").read_text() == "before growth", "expected the data to survive the offline grow"
    assert not (image_of(cli, volume).parent / f"{volume['id']}.grow").exists()


def test_expand_never_shrinks(cli):
    cli.create("big", "--size", "64Mi", "--type", "image")
    shrink = cli.run("volume", "expand", "big", "--size", "32Mi")
    assert shrink.rc == EXIT_USAGE and "never shrink" in shrink.stderr, f"expected a refusal: {shrink.describe()}"
    assert cli.volume("big")["capacity_bytes"] == 64 * MiB


def test_create_again_with_another_filesystem_is_refused(cli):
    first = cli.create("same", "--size", "320Mi", "--type", "image", "--fs", "xfs")
    assert cli.create("same", "--size", "320Mi", "--type", "image", "--fs", "xfs")["id"] == first["id"]
    other = cli.run("volume", "create", "same", "--size", "320Mi", "--type", "image", "--fs", "ext4")
    assert other.rc == EXIT_CONFLICT and "xfs" in other.stderr, f"expected exit 4 naming xfs: {other.describe()}"


# ---------------------------------------------------------------- raw block volumes

def test_block_volume_reads_and_writes_through_its_target(cli, workdir):
    volume = cli.create("raw", "--size", "4Mi", "--block")
    assert volume["access_type"] == "block" and volume["type"] == "image", f"expected a block image: {volume}"
    (workdir / "dev").mkdir()
    target = workdir / "dev" / "raw"
    assert cli.connect("raw", target)["path"] == str(target)
    assert stat.S_ISBLK(os.stat(target).st_mode), "expected a block device at the target"
    assert device_size(target) == 4 * MiB, f"expected a 4Mi device, got {device_size(target)}"
    pattern = os.urandom(8192)
    fd = os.open(target, os.O_RDWR)
    try:
        os.pwrite(fd, pattern, MiB)
        os.fsync(fd)
    finally:
        os.close(fd)
    stats = cli.ok_json("volume", "stats", "raw")
    assert stats["bytes"]["total"] == 4 * MiB and not stats["condition"]["abnormal"], f"got {stats}"

    cli.ok("volume", "disconnect", "raw")
    assert not target.exists(), "expected disconnect to remove the device file it created"
    assert wait_until_detached(image_of(cli, volume)) == [], "expected the loop device detached"
    cli.connect("raw", target)
    fd = os.open(target, os.O_RDONLY)
    try:
        assert os.pread(fd, 8192, MiB) == pattern, "expected the block data to survive a reconnect"
    finally:
        os.close(fd)


def test_read_only_block_connect_refuses_writes(cli, workdir):
    cli.create("rob", "--size", "4Mi", "--block")
    writable, readonly = workdir / "rw", workdir / "ro"
    cli.connect("rob", writable)
    fd = os.open(writable, os.O_WRONLY)
    os.pwrite(fd, b"shared", 0)
    os.fsync(fd)
    os.close(fd)
    cli.connect("rob", readonly, "--read-only")
    with pytest.raises(OSError) as refused:  # older kernels refuse the open, 6.x the write
        fd = os.open(readonly, os.O_WRONLY)
        try:
            os.pwrite(fd, b"overwrite", 0)
        finally:
            os.close(fd)
    assert refused.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM), f"got {refused.value!r}"
    fd = os.open(readonly, os.O_RDONLY)
    assert os.pread(fd, 6, 0) == b"shared", "expected the read-only device to show the data"
    os.close(fd)
    cli.ok("volume", "disconnect", "rob")
    assert wait_until_detached(image_of(cli, cli.volume("rob"))) == [], "expected both devices detached"


def loop_dio(cli, volume: dict) -> list[str]:
    return [Path(f"/sys/block/{Path(loop.device).name}/loop/dio").read_text().strip()
            for loop in loop_devices_of(image_of(cli, volume))]


def test_volume_modify_switches_direct_io_of_every_device_live(cli, workdir):
    volume = cli.create("dio", "--size", "4Mi", "--block", "--param", "directIO=false")
    assert volume["mutable_parameters"] == {"directIO": "false"}, f"expected the create parameter kept: {volume}"
    cli.connect("dio", workdir / "rw")
    cli.connect("dio", workdir / "ro", "--read-only")  # a second, read-only loop device
    assert loop_dio(cli, volume) == ["0", "0"], "expected both devices buffered"
    modified = cli.ok_json("volume", "modify", "dio", "--param", "directIO=true")
    assert modified["mutable_parameters"] == {"directIO": "true"}, f"unexpected modify output {modified}"
    assert loop_dio(cli, volume) == ["1", "1"], "expected both devices switched to direct I/O at once"
    again = cli.ok_json("volume", "modify", volume["id"], "-p", "directIO=true")
    assert again["mutable_parameters"] == {"directIO": "true"}, "expected a repeated modify to succeed"
    shown = cli.ok("volume", "show", "dio").stdout
    assert "directIO=true" in shown, f"expected the table to show the setting: {shown}"
    fixed = cli.run("volume", "modify", "dio", "--param", "type=dir")
    assert fixed.rc == EXIT_USAGE and "fixed at creation" in fixed.stderr, fixed.describe()
    missing = cli.run("volume", "modify", "nope", "--param", "directIO=true")
    assert missing.rc == 3, missing.describe()
    cli.ok("volume", "disconnect", "dio")
    assert wait_until_detached(image_of(cli, volume)) == [], "expected both devices detached"


@pytest.fixture
def dev_rosetctl_name():
    """A unique volume name whose default block target /dev/rosetctl/<name> is cleaned up."""
    name = f"it-{uuid.uuid4().hex[:8]}"
    yield name
    path = f"/dev/rosetctl/{name}"
    while mount_at(path) is not None and unmount_lazily(path) == 0:
        pass
    if os.path.lexists(path):
        os.unlink(path)


def test_block_connect_defaults_to_dev_rosetctl(cli, dev_rosetctl_name):
    cli.create(dev_rosetctl_name, "--size", "1Mi", "--block")
    path = cli.connect(dev_rosetctl_name)["path"]
    assert path == f"/dev/rosetctl/{dev_rosetctl_name}", f"expected the default device path, got {path}"
    assert stat.S_ISBLK(os.stat(path).st_mode), "expected a block device there"
    cli.ok("volume", "disconnect", dev_rosetctl_name)
    assert not os.path.lexists(path), "expected the device file removed on disconnect"


def test_dir_type_and_block_contradict(cli):
    both = cli.run("volume", "create", "x", "--size", "1Mi", "--block", "--type", "dir")
    assert both.rc == EXIT_USAGE and "--block" in both.stderr, f"expected a usage error: {both.describe()}"
    fs_on_dir = cli.run("volume", "create", "y", "--size", "1Mi", "--fs", "xfs")
    assert fs_on_dir.rc == EXIT_USAGE and "--type image" in fs_on_dir.stderr, f"got {fs_on_dir.describe()}"


# ---------------------------------------------------------------- crashes and health

def test_loop_device_leaked_by_kill_9_is_reclaimed_by_serve_startup(cli, workdir, start_serve):
    volume = cli.create("leak", "--size", "4Mi", "--block")
    image = image_of(cli, volume)
    crashed = cli.run("volume", "connect", "leak", "--target", workdir / "leak",
                      env={**cli.env, "ROSETCTL_CRASH_AT": "image-stage-attached"})
    assert crashed.rc == -9, f"expected the connect to die by SIGKILL: {crashed.describe()}"
    leaked = loop_devices_of(image)
    assert len(leaked) == 1, f"expected the kill -9 to leave one loop device behind, got {leaked}"

    server = start_serve()
    assert wait_until_detached(image) == [], "expected serve's startup reconcile to detach it"
    log = server.log()
    assert "reconcile: detached " + leaked[0].device in log, f"expected the reconcile logged: {log}"
    assert "forgot that staging" in log, f"expected the stale staging record dropped: {log}"

    target = workdir / "leak"
    cli.connect("leak", target)
    assert stat.S_ISBLK(os.stat(target).st_mode), "expected the volume usable after reconcile"
    cli.ok("volume", "disconnect", "leak")
    cli.ok("volume", "delete", "leak")


def test_serve_startup_removes_orphan_images_that_were_never_written(cli, start_serve):
    cli.create("recorded", "--size", "4Mi", "--block")
    images = cli.state_dir / "images"
    # What a crash between making an image and recording its volume leaves, made long ago.
    empty, written = images / "local-00000000000000aa.img", images / "local-00000000000000bb.img"
    for orphan in (empty, written):
        with open(orphan, "wb") as out:
            out.truncate(64 * MiB)
    with open(written, "r+b") as out:
        out.write(b"data" * 1024)
        os.fsync(out.fileno())
    old = os.stat(empty).st_mtime - 3600
    for orphan in (empty, written):
        os.utime(orphan, (old, old))

    server = start_serve()
    assert not empty.exists(), f"expected the never-written orphan removed: {server.log()}"
    assert written.exists(), "expected an orphan holding data left in place"
    assert "belongs to no volume but holds data" in server.log(), server.log()
    assert len(list(images.glob("*.img"))) == 2, "expected the recorded volume's image untouched"


def test_disconnect_after_a_crash_releases_the_leaked_device_without_serve(cli, workdir):
    volume = cli.create("leak2", "--size", "4Mi", "--block")
    crashed = cli.run("volume", "connect", "leak2", "--target", workdir / "leak2",
                      env={**cli.env, "ROSETCTL_CRASH_AT": "image-stage-attached"})
    assert crashed.rc == -9, f"expected the connect to die by SIGKILL: {crashed.describe()}"
    assert len(loop_devices_of(image_of(cli, volume))) == 1, "expected a leaked loop device"
    cli.ok("volume", "disconnect", "leak2")
    assert wait_until_detached(image_of(cli, volume)) == [], "expected disconnect to release it"
    assert cli.volume("leak2")["published_nodes"] == [], "expected the mapping undone too"


def test_mount_volume_killed_mid_connect_leaks_no_loop_device(cli, workdir):
    volume = cli.create("autoclear", "--size", "64Mi", "--type", "image")
    crashed = cli.run("volume", "connect", "autoclear", "--target", workdir / "ac",
                      env={**cli.env, "ROSETCTL_CRASH_AT": "image-stage-attached"})
    assert crashed.rc == -9, f"expected the connect to die by SIGKILL: {crashed.describe()}"
    assert wait_until_detached(image_of(cli, volume)) == [], (
        "expected the kernel to clear the autoclear device when the killed process let go")
    cli.connect("autoclear", workdir / "ac")  # and the next connect just works
    assert mount_at(str(workdir / "ac")).fs_type == "ext4"


def test_stats_and_condition_when_the_image_is_deleted_under_a_mounted_volume(cli, workdir):
    volume = cli.create("gone", "--size", "64Mi", "--type", "image")
    target = workdir / "gone"
    cli.connect("gone", target)
    healthy = cli.ok_json("volume", "stats", "gone")
    assert not healthy["condition"]["abnormal"], f"expected healthy at first: {healthy}"
    assert 48 * MiB < healthy["bytes"]["total"] <= 64 * MiB and healthy["inodes"]["total"] > 0, healthy

    image_of(cli, volume).unlink()
    stats = cli.ok_json("volume", "stats", "gone")
    assert stats["condition"]["abnormal"] and "missing" in stats["condition"]["message"], (
        f"expected an abnormal condition naming the missing image: {stats}")
    assert stats["bytes"]["total"] == healthy["bytes"]["total"], "expected usage still reported"
    shown = cli.volume("gone")
    assert shown["condition"]["abnormal"] and "missing" in shown["condition"]["message"], (
        f"expected ControllerGetVolume to report it too: {shown}")
    listed = [v for v in cli.volumes() if v["name"] == "gone"][0]
    assert listed["condition"]["abnormal"], f"expected ListVolumes to report it too: {listed}"
    cli.ok("volume", "disconnect", "gone")
    cli.ok("volume", "delete", "gone")


def test_condition_reports_a_dead_or_missing_mount_at_the_staging_path(cli, workdir, processes):
    """A loop-backed ext4 mount cannot die the way a FUSE mount does (its device stays while it is
    mounted, even after LOOP_CLR_FD). What can happen at a staging path is reproduced instead: a
    FUSE mount stacked on it whose server was killed (stat says ENOTCONN), and the mount removed
    behind rosetctl's back."""
    volume = cli.create("dead", "--size", "64Mi", "--type", "image")
    cli.connect("dead", workdir / "dead")
    staging = cli.state_dir / "staging" / volume["id"]
    assert mount_at(str(staging)) is not None, f"expected the volume staged at {staging}"
    (workdir / "empty").mkdir()
    fuse = processes.start(["bindfs", "-f", "-o", "nonempty", str(workdir / "empty"), str(staging)])
    deadline = time.monotonic() + 10
    while not mount_at(str(staging)).fs_type.startswith("fuse") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mount_at(str(staging)).fs_type.startswith("fuse"), "expected bindfs mounted over the staging"
    fuse.send_signal(signal.SIGKILL)
    fuse.wait()
    with pytest.raises(OSError) as dead:
        os.stat(staging)
    assert dead.value.errno == errno.ENOTCONN, f"expected a dead mount, got {dead.value!r}"
    shown = cli.volume("dead")
    assert shown["condition"]["abnormal"] and "dead" in shown["condition"]["message"], shown
    stats = cli.run_json("volume", "stats", "dead")
    assert "dead" in stats.stdout + stats.stderr, f"expected stats to say the mount is dead: {stats.describe()}"

    while mount_at(str(staging)) is not None:  # the dead FUSE mount, then the volume's own
        assert unmount_lazily(str(staging)) == 0
    shown = cli.volume("dead")
    assert shown["condition"]["abnormal"] and "nothing is mounted" in shown["condition"]["message"], shown


def test_condition_reports_a_detached_block_device(cli, workdir):
    volume = cli.create("det", "--size", "4Mi", "--block")
    cli.connect("det", workdir / "det")
    for loop in loop_devices_of(image_of(cli, volume)):
        fd = os.open(loop.device, os.O_RDONLY)
        fcntl.ioctl(fd, 0x4C01)  # LOOP_CLR_FD behind rosetctl's back
        os.close(fd)
    shown = cli.volume("det")
    assert shown["condition"]["abnormal"] and "no longer attached" in shown["condition"]["message"], shown


# ---------------------------------------------------------------- CSI details

def capability(pb2, fs_type: str = "", block: bool = False):
    access = pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    if block:
        return pb2.VolumeCapability(block=pb2.VolumeCapability.BlockVolume(), access_mode=access)
    return pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(fs_type=fs_type), access_mode=access)


def test_validate_volume_capabilities_confirms_only_the_filesystem_the_volume_holds(csi, start_serve):
    pb2 = csi.pb2
    server = start_serve()
    volume = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="xv", parameters={"type": "image"}, capacity_range=pb2.CapacityRange(required_bytes=320 * MiB),
        volume_capabilities=[capability(pb2, "xfs")]), timeout=CALL_TIMEOUT).volume
    for fs_type, confirmed in (("xfs", True), ("", True), ("ext4", False)):
        answer = server.controller.ValidateVolumeCapabilities(pb2.ValidateVolumeCapabilitiesRequest(
            volume_id=volume.volume_id, volume_capabilities=[capability(pb2, fs_type)]), timeout=CALL_TIMEOUT)
        assert answer.HasField("confirmed") == confirmed, f"fs_type {fs_type!r}: {answer}"
        if not confirmed:
            assert "xfs" in answer.message and "ext4" in answer.message, answer.message
    block = server.controller.ValidateVolumeCapabilities(pb2.ValidateVolumeCapabilitiesRequest(
        volume_id=volume.volume_id, volume_capabilities=[capability(pb2, block=True)]), timeout=CALL_TIMEOUT)
    assert not block.HasField("confirmed"), block


def stage_request(pb2, volume, staging: Path):
    return pb2.NodeStageVolumeRequest(volume_id=volume.volume_id, staging_target_path=str(staging),
                                      volume_capability=capability(pb2), volume_context=volume.volume_context)


@pytest.mark.parametrize("fs_type,size_mib,grown_mib", [("xfs", 320, 480), ("ext4", 64, 128)])
def test_pending_growth_is_applied_when_staged_at_a_second_staging_path(csi, cli, workdir, start_serve,
                                                                         fs_type, size_mib, grown_mib):
    pb2 = csi.pb2
    server = start_serve()
    volume = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="grow2", parameters={"type": "image"}, capacity_range=pb2.CapacityRange(required_bytes=size_mib * MiB),
        volume_capabilities=[capability(pb2, fs_type)]), timeout=CALL_TIMEOUT).volume
    node_id = server.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id
    server.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
        volume_id=volume.volume_id, node_id=node_id, volume_capability=capability(pb2)), timeout=CALL_TIMEOUT)
    first, second = workdir / "stage-a", workdir / "stage-b"
    server.node.NodeStageVolume(stage_request(pb2, volume, first), timeout=CALL_TIMEOUT)
    before = fs_size(first)
    # The CO grew the volume but has not called NodeExpandVolume yet: the growth is pending.
    expanded = server.controller.ControllerExpandVolume(pb2.ControllerExpandVolumeRequest(
        volume_id=volume.volume_id, capacity_range=pb2.CapacityRange(required_bytes=grown_mib * MiB),
        volume_capability=capability(pb2)), timeout=CALL_TIMEOUT)
    assert expanded.node_expansion_required
    marker = cli.state_dir / "images" / f"{volume.volume_id}.grow"
    assert marker.exists(), "expected the growth recorded as pending"

    server.node.NodeStageVolume(stage_request(pb2, volume, second), timeout=CALL_TIMEOUT)
    if fs_type == "xfs" or can_grow_ext4_online():
        assert fs_size(second) >= before + (grown_mib - size_mib - 16) * MiB, (
            f"expected the second stage to grow the filesystem: {before} -> {fs_size(second)}")
        assert fs_size(first) == fs_size(second), "expected one filesystem behind both stagings"
        assert not marker.exists(), "expected the pending growth done"
        return
    # ext4 without CAP_SYS_RESOURCE cannot grow while mounted: the stage works, the growth waits.
    assert fs_size(second) == before and marker.exists(), "expected ext4 untouched and the growth still pending"
    for staging in (first, second):
        server.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(
            volume_id=volume.volume_id, staging_target_path=str(staging)), timeout=CALL_TIMEOUT)
    server.node.NodeStageVolume(stage_request(pb2, volume, second), timeout=CALL_TIMEOUT)
    assert fs_size(second) >= before + (grown_mib - size_mib - 16) * MiB and not marker.exists(), (
        "expected the growth done at the next stage where it was not mounted")


# ---------------------------------------------------------------- capacity

def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_image_volumes_bigger_than_the_free_space_are_refused_unless_overcommit(cli):
    cli.create("first", "--size", "1Mi")  # makes the state dir
    # Far beyond the free space, whatever other processes on the machine write meanwhile.
    too_big = 2 * free_bytes(cli.state_dir) + 1024 * MiB
    refused = cli.run("volume", "create", "huge", "--size", str(too_big), "--type", "image")
    assert refused.rc == EXIT_RESOURCE_EXHAUSTED and "overcommit" in refused.stderr, refused.describe()
    assert not list((cli.state_dir / "images").glob("*.img")), "expected no image left by the refusal"
    allowed = cli.ok_json("--capacity-overcommit", "volume", "create", "huge", "--size", str(too_big),
                          "--type", "image")
    assert allowed["capacity_bytes"] >= too_big


@pytest.fixture
def ext4_state_dir(cli, workdir) -> Path:
    """The state directory on an ext4 of the test's own (a loop device under workdir, which the
    workdir fixture unmounts and detaches), whatever filesystem holds the test directory."""
    backing, mount_point = workdir / "ext4.img", workdir / "ext4"
    with open(backing, "wb") as out:
        out.truncate(128 * 2**20)
    # 4 KiB blocks, as a real disk gets: a filesystem this small would get 1 KiB blocks, whose
    # largest file is 4 TiB.
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", str(backing)], check=True, capture_output=True)
    mount_point.mkdir()
    subprocess.run(["mount", "-o", "loop", str(backing), str(mount_point)], check=True)
    cli.state_dir = mount_point / "state"
    return cli.state_dir


def test_images_beyond_the_filesystems_largest_file_are_out_of_range_and_leave_nothing(cli, ext4_state_dir):
    """ext4 stores files up to just under 16 TiB: asking for more is a capacity the plugin cannot
    provide (OUT_OF_RANGE, exit 2) naming that limit, not "File too large"."""
    assert _fs_type(ext4_state_dir.parent) == "ext4"
    cli.create("img", "--size", "64Mi", "--type", "image")
    for args in (["volume", "create", "big", "--type", "image", "--size", "17Ti"],
                 ["volume", "expand", "img", "--size", "17Ti"]):
        result = cli.run("--capacity-overcommit", *args)
        assert result.rc == EXIT_USAGE, result.describe()
        assert "largest file is 17592186040320 bytes (under 16Ti)" in result.stderr, result.describe()
    images = sorted(p.name for p in (cli.state_dir / "images").iterdir())
    img = cli.volume("img")
    assert images == [f"{img['id']}.img"], f"expected no .grow marker or other leftover: {images}"
    assert img["capacity_bytes"] == 64 * MiB and [v["name"] for v in cli.volumes()] == ["img"]


def _fs_type(path) -> str:
    best, kind = "", ""
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if str(path).startswith(fields[1]) and len(fields[1]) >= len(best):
                best, kind = fields[1], fields[2]
    return kind


def test_get_capacity_subtracts_what_images_promised(csi, cli, start_serve):
    pb2 = csi.pb2
    server = start_serve()
    capacity = lambda s: s.controller.GetCapacity(pb2.GetCapacityRequest(), timeout=CALL_TIMEOUT).available_capacity
    before = capacity(server)
    # Big enough to stand out from what other processes on the machine write meanwhile.
    promised, slack = 4096 * MiB, 1024 * MiB
    assert before > 2 * promised, f"this test needs more than {2 * promised} bytes free, has {before}"
    access = pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    block = pb2.VolumeCapability(block=pb2.VolumeCapability.BlockVolume(), access_mode=access)
    created = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="promised", capacity_range=pb2.CapacityRange(required_bytes=promised),
        volume_capabilities=[block]), timeout=CALL_TIMEOUT).volume
    assert created.volume_context["type"] == "image", "expected block access to imply an image volume"
    after = capacity(server)
    assert before - promised - slack <= after <= before - promised + slack, (
        f"expected GetCapacity to drop by the {promised} bytes promised: {before} -> {after}")

    server.stop()
    relaxed = start_serve(extra=["--capacity-overcommit"])
    assert capacity(relaxed) >= before - slack, (
        f"expected overcommit to report the plain free space: {capacity(relaxed)} vs {before}")


def test_csi_rejects_unsupported_filesystems_and_advertises_node_expansion(csi, start_serve):
    pb2 = csi.pb2
    server = start_serve()
    access = pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    btrfs = pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(fs_type="btrfs"), access_mode=access)
    details = expect_code(lambda: server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="fs", parameters={"type": "image"}, capacity_range=pb2.CapacityRange(required_bytes=64 * MiB),
        volume_capabilities=[btrfs]), timeout=CALL_TIMEOUT), grpc.StatusCode.INVALID_ARGUMENT, "btrfs")
    assert "ext4, xfs" in details, f"expected the supported filesystems listed: {details!r}"
    capabilities = server.node.NodeGetCapabilities(pb2.NodeGetCapabilitiesRequest(), timeout=CALL_TIMEOUT)
    rpcs = {c.rpc.type for c in capabilities.capabilities}
    assert pb2.NodeServiceCapability.RPC.EXPAND_VOLUME in rpcs, f"expected EXPAND_VOLUME, got {capabilities}"


def test_kubelet_flow_for_a_block_volume_over_grpc(csi, cli, workdir, start_serve):
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    server = start_serve()
    access = pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    capability = pb2.VolumeCapability(block=pb2.VolumeCapability.BlockVolume(), access_mode=access)
    volume = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="pvc-block", capacity_range=pb2.CapacityRange(required_bytes=4 * MiB),
        volume_capabilities=[capability]), timeout=timeout).volume
    vid, context = volume.volume_id, dict(volume.volume_context)
    node_id = server.node.NodeGetInfo(pb2.NodeGetInfoRequest(), timeout=timeout).node_id
    server.controller.ControllerPublishVolume(pb2.ControllerPublishVolumeRequest(
        volume_id=vid, node_id=node_id, volume_capability=capability, volume_context=context), timeout=timeout)

    staging, target = workdir / "staging", workdir / "pods" / "pod1"
    target.parent.mkdir()
    stage = pb2.NodeStageVolumeRequest(volume_id=vid, staging_target_path=str(staging),
                                       volume_capability=capability, volume_context=context)
    publish = pb2.NodePublishVolumeRequest(volume_id=vid, staging_target_path=str(staging), target_path=str(target),
                                           volume_capability=capability, volume_context=context)
    for _ in range(2):  # both calls are idempotent
        server.node.NodeStageVolume(stage, timeout=timeout)
        server.node.NodePublishVolume(publish, timeout=timeout)
    assert stat.S_ISBLK(os.stat(target).st_mode) and device_size(target) == 4 * MiB

    stats = server.node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
        volume_id=vid, volume_path=str(target)), timeout=timeout)
    assert [u.total for u in stats.usage] == [4 * MiB] and not stats.volume_condition.abnormal, f"got {stats}"

    expanded = server.controller.ControllerExpandVolume(pb2.ControllerExpandVolumeRequest(
        volume_id=vid, capacity_range=pb2.CapacityRange(required_bytes=8 * MiB),
        volume_capability=capability), timeout=timeout)
    assert expanded.capacity_bytes == 8 * MiB and expanded.node_expansion_required, f"got {expanded}"
    grown = server.node.NodeExpandVolume(pb2.NodeExpandVolumeRequest(
        volume_id=vid, volume_path=str(target), staging_target_path=str(staging),
        capacity_range=pb2.CapacityRange(required_bytes=8 * MiB), volume_capability=capability), timeout=timeout)
    assert grown.capacity_bytes == 8 * MiB and device_size(target) == 8 * MiB, "expected the device grown in place"

    server.node.NodeUnpublishVolume(pb2.NodeUnpublishVolumeRequest(volume_id=vid, target_path=str(target)),
                                    timeout=timeout)
    assert not target.exists(), "expected the target file the plugin created to be removed"
    server.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(volume_id=vid, staging_target_path=str(staging)),
                                  timeout=timeout)
    image = cli.state_dir / "images" / f"{vid}.img"
    assert wait_until_detached(image) == [], "expected NodeUnstageVolume to detach the loop device"
    server.controller.ControllerUnpublishVolume(pb2.ControllerUnpublishVolumeRequest(volume_id=vid, node_id=node_id),
                                                timeout=timeout)
    server.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=vid), timeout=timeout)
    assert not image.exists(), "expected DeleteVolume to remove the image"
