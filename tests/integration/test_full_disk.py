"""A full disk and a damaged state database (issue 24): the state directory on a small ext4 of the
test's own, filled by the product's own calls (commits, restores, clones, image volumes) until they
fail. Every failure must be RESOURCE_EXHAUSTED (exit 8) naming where, nothing stored before may be
damaged, nothing half made may stay, and freeing space must make everything work again. A state
database with a damaged page must be refused at start, never rebuilt."""
from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import grpc
import pytest

from rosetctl_cli import Rosetctl
from rosetctl_loops import detach_everything_under
from rosetctl_mounts import unmount_everything_under
from test_image_snapshots import checksums, write_random
from test_serve_snapshots import create_until_settled, create_volume, snapshot_request

MiB = 2**20
FS_MIB = 64
EXIT_FAILED = 1
EXIT_EXHAUSTED = 8
PAGE = 4096


@pytest.fixture
def small_fs(workdir) -> Path:
    """An ext4 of FS_MIB mounted at workdir/small, gone after the test, pass or fail."""
    backing, mount_point = workdir / "small.img", workdir / "small"
    with open(backing, "wb") as out:
        out.truncate(FS_MIB * MiB)
    # -m 0: no blocks reserved for root, so "full" means full for us too.
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(backing)], check=True, capture_output=True)
    mount_point.mkdir()
    subprocess.run(["mount", "-o", "loop", str(backing), str(mount_point)], check=True)
    yield mount_point
    # The connections and the image volumes' loop devices first, which keep the filesystem
    # busy, then its own loop device, which goes (autoclear) once the filesystem is released.
    # The workdir fixture would do the same, with less patience for this chain of releases.
    left = unmount_everything_under(str(workdir))
    assert not left, f"could not unmount {left}"
    assert not detach_everything_under(mount_point, patience=30), "image loop devices stayed attached"
    assert not detach_everything_under(workdir, patience=30), f"the loop device of {backing} stayed attached"


def integrity(db: Path) -> str:
    try:
        # closing(): sqlite3's own context manager ends a transaction, not the connection, which
        # would keep the file (and the filesystem holding it) open.
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
            return "; ".join(row[0] for row in connection.execute("PRAGMA integrity_check"))
    except sqlite3.DatabaseError as error:  # a damaged header or schema page
        return str(error)


def fill_with_calls(cli: Rosetctl, snapshot: str, round_: int) -> list[tuple[tuple, object]]:
    """One round of calls that each need space; returns (call, result) of every call."""
    calls = [
        ("snapshot", "restore", snapshot, "--name", f"restored-{round_}"),
        ("volume", "create", f"clone-{round_}", "--from-volume", "d"),
        ("volume", "create", f"image-{round_}", "--size", "8Mi", "--type", "image"),
        ("--capacity-overcommit", "volume", "create", f"iclone-{round_}", "--from-volume", "i"),
        ("snapshot", "commit", "d"),
        ("snapshot", "commit", "i"),
    ]
    return [(call, cli.run(*call)) for call in calls]


def stray_files(cli: Rosetctl) -> list[str]:
    """Volume directories and images that no volume record knows: the leftovers of a failed call."""
    ids = {v["id"] for v in cli.volumes()}
    found = []
    for kind in ("volumes", "images"):
        root = cli.state_dir / kind
        if root.exists():
            # An image, or its markers (providers/common/image_volume.cc), is named by its volume id.
            found += [str(p) for p in root.iterdir() if p.name.split(".")[0] not in ids]
    return found


STORE_LAYOUT = {"blobs", "trees", "commits", "index", "lock"}  # core/commit_store/commit_store.h


def store_leftovers(cli: Rosetctl) -> list[str]:
    """What a failed call left in the commit store: a commit no snapshot records (a snapshot that
    failed after its commit was written), a stat cache of no volume or half written (*.tmp), or
    anything outside the store's layout. Objects no commit reaches are garbage by design (the
    next collection takes them), not leftovers."""
    store = cli.state_dir / "store"
    if not store.exists():
        return []
    recorded = {s["commit"] for s in cli.ok_json("snapshot", "list")}
    ids = {v["id"] for v in cli.volumes()}
    found = [str(p) for p in store.iterdir() if p.name not in STORE_LAYOUT]
    found += [str(p) for p in (store / "commits").iterdir() if p.name not in recorded]
    index = store / "index"
    if index.exists():
        found += [str(p) for p in index.iterdir() if p.name.endswith(".tmp") or p.name not in ids]
    return found


def test_a_full_state_filesystem_fails_calls_with_exit_8_and_damages_nothing(cli, workdir, small_fs):
    cli.state_dir = small_fs / "state"
    cli.create("d")
    d = workdir / "d"
    cli.connect("d", d)
    write_random(d / "first", 3)
    first = cli.ok_json("snapshot", "commit", "d")["commit"]
    first_content = checksums(d)
    cli.create("i", "--size", "12Mi", "--type", "image")
    i = workdir / "i"
    cli.connect("i", i)
    write_random(i / "data", 2)
    image_content = checksums(i)
    cli.ok("snapshot", "commit", "i")

    exhausted, round_ = [], 0
    while round_ < 30 and len(exhausted) < 12:
        # New content each round, so commits store new blobs; the writes themselves may fail.
        try:
            write_random(d / f"more-{round_}", 1)
        except OSError:
            pass
        for call, result in fill_with_calls(cli, first, round_):
            assert result.rc in (0, EXIT_EXHAUSTED), (
                f"expected `rosetctl {' '.join(call)}` on a full filesystem to succeed or exit 8: "
                f"{result.describe()}")
            if result.rc == EXIT_EXHAUSTED:
                assert str(small_fs) in result.stderr, (
                    f"expected the error of `{' '.join(call)}` to name where space ran out: {result.describe()}")
                exhausted.append(call)
        round_ += 1
    assert len(exhausted) >= 12, f"expected the filesystem to fill within 30 rounds, {len(exhausted)} calls failed"
    assert {call[1] if call[0] != "--capacity-overcommit" else call[2] for call in exhausted} >= {"restore", "create"}

    # Nothing already stored is damaged, and nothing half made stays.
    verified = cli.run("snapshot", "verify")
    assert verified.rc == 0, f"expected snapshot verify to be clean on the full filesystem: {verified.describe()}"
    assert integrity(cli.state_dir / "state.db") == "ok"
    assert checksums(i) == image_content, "expected the connected image volume's files unchanged"
    assert stray_files(cli) == [], "expected no volume directory or image left by a failed call"
    assert store_leftovers(cli) == [], "expected no commit or stat cache left in store/ by a failed call"
    collected = cli.ok_json("snapshot", "gc")
    assert collected["unrecorded_removed"] == 0, f"expected no unrecorded commit for gc to remove: {collected}"

    # Freeing space makes everything work again.
    for volume in cli.volumes():
        if volume["name"] not in ("d", "i"):
            cli.ok("volume", "delete", volume["name"])
    for path in d.glob("more-*"):
        path.unlink()
    for snapshot in cli.ok_json("snapshot", "list")[2:]:
        cli.ok("snapshot", "delete", snapshot["commit"])
    cli.ok("snapshot", "commit", "d")
    cli.ok("snapshot", "restore", first, "--name", "again")
    cli.connect("again", workdir / "again")
    assert checksums(workdir / "again") == first_content, "expected the first snapshot restored intact"
    cli.ok("volume", "create", "clone-again", "--from-volume", "i")
    cli.ok("volume", "create", "image-again", "--size", "4Mi", "--type", "image")
    verified = cli.run("snapshot", "verify")
    assert verified.rc == 0, f"expected snapshot verify clean after freeing space: {verified.describe()}"
    assert integrity(cli.state_dir / "state.db") == "ok"


def flip_page(db: Path, page: int) -> None:
    with open(db, "r+b") as f:
        f.seek((page - 1) * PAGE)
        data = f.read(PAGE)
        f.seek((page - 1) * PAGE)
        f.write(bytes(b ^ 0xFF for b in data))


def test_a_damaged_state_database_is_refused_at_start_and_never_rebuilt(cli, workdir, csi):
    for name in ("a", "b", "c"):
        cli.create(name)
    cli.ok("snapshot", "commit", "a")
    db = cli.state_dir / "state.db"
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pristine = db.read_bytes()
    assert len(pristine) % PAGE == 0, "expected 4 KiB pages"

    damaged_pages = 0
    for page in range(1, len(pristine) // PAGE + 1):
        db.write_bytes(pristine)
        for extra in ("-wal", "-shm"):
            Path(f"{db}{extra}").unlink(missing_ok=True)
        flip_page(db, page)
        if page > 1 and integrity(db) == "ok":
            continue  # a free page: nothing there to damage
        damaged = db.read_bytes()
        damaged_pages += 1
        # A call that reads none of the damaged page (the nodes table) must refuse too.
        for call in (("volume", "list"), ("node", "list")):
            result = cli.run(*call)
            assert result.rc == EXIT_FAILED, (
                f"expected `rosetctl {' '.join(call)}` to exit 1 with page {page} damaged: {result.describe()}")
            assert str(db) in result.stderr and "damaged" in result.stderr, (
                f"expected a clear message naming the database: {result.describe()}")
        assert db.read_bytes() == damaged, f"expected the damaged database (page {page}) left as it was"
    assert damaged_pages >= 4, f"expected several pages whose damage SQLite sees, found {damaged_pages}"

    serve = cli.run("serve", "--endpoint", f"unix://{workdir / 'csi.sock'}", timeout=30)
    assert serve.rc == EXIT_FAILED and "damaged" in serve.stderr, f"expected serve to refuse: {serve.describe()}"
    assert db.read_bytes() == damaged, "expected serve to leave the damaged database as it was"


def test_a_full_state_filesystem_fails_csi_calls_with_resource_exhausted_naming_it(
        cli, workdir, small_fs, csi, start_serve):
    """The same through `serve`, as a CO sees it: the gRPC status is RESOURCE_EXHAUSTED and its
    message names the filesystem to free space on, not only the file a write failed on."""
    pb2 = csi.pb2
    cli.state_dir = small_fs / "state"
    server = start_serve()
    try:
        check_csi_calls_on_full_filesystem(cli, workdir, small_fs, pb2, server)
    finally:
        # serve holds the state database open: stopped here, before small_fs unmounts.
        server.stop()


def check_csi_calls_on_full_filesystem(cli, workdir, small_fs, pb2, server) -> None:
    source = create_volume(server, pb2, "source")
    mount = Path(cli.connect("source", workdir / "source")["path"])
    write_random(mount / "data", 4)
    snapshot = create_until_settled(server, snapshot_request(pb2, "first", source.volume_id))
    assert snapshot.ready_to_use, f"expected the first snapshot to be taken: {snapshot}"
    from_snapshot = pb2.VolumeContentSource(
        snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=snapshot.snapshot_id))

    failures = []
    for round_ in range(40):
        try:
            create_volume(server, pb2, f"restored-{round_}", from_snapshot)
        except grpc.RpcError as failure:
            failures.append(failure)
            break
    assert failures, "expected the filesystem to fill within 40 restores of 4 MiB"
    failure = failures[0]
    assert failure.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (
        f"expected RESOURCE_EXHAUSTED from a restore on a full filesystem: {failure.code()}: {failure.details()}")
    assert f"mounted at {small_fs}" in failure.details(), (
        f"expected the message to name the full filesystem: {failure.details()}")

    # Nothing stored is damaged, and the failed restore left nothing behind.
    verified = cli.run("snapshot", "verify")
    assert verified.rc == 0, f"expected snapshot verify clean on the full filesystem: {verified.describe()}"
    assert integrity(cli.state_dir / "state.db") == "ok"
    assert stray_files(cli) == [], "expected no volume directory left by the failed CreateVolume"
