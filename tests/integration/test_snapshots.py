"""Snapshots through the real CLI: commits and restores that keep every byte and attribute,
incremental re-commits, consistency while a file is written, crashes (kill -9) in the middle of
commit and delete, and restores that share extents on xfs with reflink."""
from __future__ import annotations

import fcntl
import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from rosetctl_cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_PRECONDITION, EXIT_USAGE, Rosetctl
from rosetctl_fixtures import skip_or_fail
from snapshot_trees import describe_tree, differences, fill_everything

COMMIT_ID_LENGTH = 64
EXIT_FAILED = 1


def volume_id(cli: Rosetctl, name: str) -> str:
    return cli.volume(name)["id"]


def data_dir(cli: Rosetctl, name: str) -> Path:
    """A volume's files as the local provider keeps them (see providers/common/local_storage.cc)."""
    return cli.state_dir / "volumes" / volume_id(cli, name)


def commit(cli: Rosetctl, volume: str, *extra) -> dict:
    return cli.ok_json("snapshot", "commit", volume, *extra)


def blob_names(cli: Rosetctl) -> set[str]:
    root = cli.state_dir / "store" / "blobs"
    return {p.name for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def assert_store_consistent(cli: Rosetctl) -> None:
    """verify passes, gc leaves only what live commits need, and verify still passes."""
    verified = cli.run_json("snapshot", "verify")
    assert verified.rc == EXIT_OK and verified.json()["problems"] == [], (
        f"expected snapshot verify to find no problem: {verified.describe()}")
    cli.ok("snapshot", "gc")
    after = cli.ok_json("snapshot", "verify")
    assert after["problems"] == [] and after["notes"] == [], f"expected a clean store after gc, got {after}"
    assert len(blob_names(cli)) == after["objects"], (
        f"expected exactly the {after['objects']} blobs live commits use, found {len(blob_names(cli))}")


# ---------------------------------------------------------------- round trips

def test_restore_and_clone_keep_every_byte_mode_owner_time_link_and_xattr(cli, workdir):
    cli.create("src", "--size", "1Gi")
    mount = Path(cli.connect("src", workdir / "src")["path"])
    fill_everything(mount)
    expected = describe_tree(mount)
    snapshot = commit(cli, "src", "-m", "everything")
    assert len(snapshot["commit"]) == COMMIT_ID_LENGTH and snapshot["ready"], f"expected a ready commit: {snapshot}"
    assert snapshot["id"].startswith("snap-"), f"expected a snapshot id apart from the commit id: {snapshot}"
    assert snapshot["files"] == 7, f"expected 7 regular files (hard link counted once): {snapshot}"

    cli.ok("snapshot", "restore", snapshot["commit"][:10], "--name", "restored")
    cli.ok("volume", "create", "cloned", "--from-volume", "src")
    for name in ("restored", "cloned"):
        target = Path(cli.connect(name, workdir / name)["path"])
        lines = differences(expected, describe_tree(target))
        assert not lines, f"expected {name} to equal the source exactly:\n" + "\n".join(lines)
        sparse = os.stat(target / "sparse.img")
        assert sparse.st_blocks * 512 < 2**20, f"expected {name}/sparse.img to stay sparse, it has {sparse.st_blocks} blocks"
        assert os.stat(target / "plain.txt").st_ino == os.stat(target / "hardlink").st_ino, (
            f"expected the hard link inside {name} to be kept")
        (target / "plain.txt").write_text("changed in the copy")
    assert (mount / "plain.txt").read_text() == "hello\n", "expected writes to copies not to reach the source"
    again = cli.ok_json("snapshot", "restore", snapshot["id"], "--name", "restored")
    assert again["name"] == "restored", "expected a repeated restore to return the same volume"


def test_ten_thousand_small_files_commit_recommit_and_restore(cli, workdir):
    cli.create("many")
    mount = Path(cli.connect("many", workdir / "many")["path"])
    for d in range(100):
        (mount / f"d{d:02}").mkdir()
        for f in range(100):
            (mount / f"d{d:02}" / f"f{f:02}").write_text(f"file {d} {f}\n")
    first = commit(cli, "many")
    assert first["files"] == 10_000, f"expected 10000 files committed: {first}"
    time.sleep(0.2)  # let the newest files leave the racy window of the stat cache
    second = commit(cli, "many")
    assert second["new_bytes"] == 0 and second["parent"] == first["commit"], (
        f"expected an unchanged re-commit to store nothing and name its parent: {second}")
    restored = cli.ok_json("snapshot", "restore", second["id"], "--name", "many-copy")
    target = Path(cli.connect("many-copy", workdir / "copy")["path"])
    assert describe_tree(target) == describe_tree(mount), f"expected {restored['name']} to equal the source"


def test_recommit_stores_only_what_changed_and_diff_names_it(cli, workdir):
    cli.create("inc")
    mount = Path(cli.connect("inc", workdir / "inc")["path"])
    for i in range(20):
        (mount / f"f{i}").write_bytes(random.Random(i).randbytes(50_000))
    first = commit(cli, "inc", "-m", "one")
    (mount / "f3").write_bytes(b"x" * 1000)
    (mount / "new").write_text("added")
    (mount / "f7").unlink()
    second = commit(cli, "inc", "-m", "two")
    assert second["new_bytes"] == 1005, f"expected only the 1005 new bytes stored: {second}"
    diff = cli.ok_json("snapshot", "diff", first["id"], second["id"])
    assert diff["added"] == ["new"] and diff["removed"] == ["f7"], f"expected new added and f7 removed: {diff}"
    assert [c["path"] for c in diff["changed"]] == ["", "f3"], f"expected the root and f3 changed: {diff}"
    assert "content" in diff["changed"][1]["aspects"], f"expected f3's content to differ: {diff}"
    text = cli.ok("snapshot", "diff", first["name"], second["commit"][:8]).stdout
    assert "A  new" in text and "D  f7" in text and "M  f3  (content, mtime)" in text, (
        f"expected git-like diff lines, got {text!r}")
    listed = cli.ok_json("snapshot", "list", "--volume", "inc")
    assert [s["message"] for s in listed] == ["one", "two"], f"expected both commits oldest first: {listed}"


def test_snapshots_outlive_their_volume_and_restore_after_it_is_gone(cli, workdir):
    cli.create("gone")
    mount = Path(cli.connect("gone", workdir / "gone")["path"])
    (mount / "model.bin").write_bytes(b"weights" * 1000)
    snapshot = commit(cli, "gone", "-m", "before delete")
    cli.ok("volume", "disconnect", "gone")
    cli.ok("volume", "delete", "gone")
    listed = cli.ok_json("snapshot", "list", "--volume", "gone")
    assert [s["id"] for s in listed] == [snapshot["id"]], f"expected the snapshot to outlive its volume: {listed}"
    cli.ok("volume", "create", "back", "--from-snapshot", snapshot["name"])
    target = Path(cli.connect("back", workdir / "back")["path"])
    assert (target / "model.bin").read_bytes() == b"weights" * 1000, "expected the data restored after the volume was deleted"


def test_snapshot_lookup_errors_and_idempotent_delete(cli):
    cli.create("v")
    one = commit(cli, "v", "--name", "named")
    again = commit(cli, "v", "--name", "named")
    assert again["id"] == one["id"], "expected a repeated commit with the same --name to return the same snapshot"
    missing = cli.run("snapshot", "show", "deadbeef")
    assert missing.rc == EXIT_NOT_FOUND and "deadbeef" in missing.stderr, f"expected exit 3 naming it: {missing.describe()}"
    both = cli.run("volume", "create", "x", "--from-snapshot", "named", "--from-volume", "v")
    assert both.rc == EXIT_USAGE, f"expected --from-snapshot and --from-volume to exclude each other: {both.describe()}"
    shown = cli.ok_json("snapshot", "show", "named")
    assert shown["id"] == one["id"] and shown["volume_name"] == "v", f"expected show by name to work: {shown}"
    deleted = cli.ok_json("snapshot", "delete", one["commit"][:6])
    assert deleted == {"id": one["id"], "name": "named", "deleted": True}, f"unexpected delete output {deleted}"
    twice = cli.ok_json("snapshot", "delete", one["id"])
    assert twice["deleted"] is False, f"expected a second delete to say there was nothing to delete: {twice}"


def test_restore_without_a_size_gets_the_source_volumes_size(cli, workdir):
    cli.create("sized", "--size", "64Mi")
    mount = Path(cli.connect("sized", workdir / "sized")["path"])
    (mount / "data").write_bytes(b"\2" * 1000)
    snapshot = commit(cli, "sized")
    cli.ok("volume", "disconnect", "sized")
    cli.ok("volume", "expand", "sized", "--size", "128Mi")  # later growth is not the snapshot's
    restored = cli.ok_json("snapshot", "restore", snapshot["id"], "--name", "sized-copy")
    assert restored["capacity_bytes"] == 64 * 2**20 and restored["size"] == "64Mi", (
        f"expected the restore to get the size the volume had when committed: {restored}")
    bigger = cli.ok_json("snapshot", "restore", snapshot["id"], "--name", "bigger-copy", "--size", "96Mi")
    assert bigger["capacity_bytes"] == 96 * 2**20, f"expected --size to be honoured: {bigger}"
    small = cli.run("snapshot", "restore", snapshot["id"], "--name", "small-copy", "--size", "32Mi")
    assert small.rc == EXIT_USAGE and str(64 * 2**20) in small.stderr, (
        f"expected OUT_OF_RANGE (exit 2) naming the source's size for a smaller restore: {small.describe()}")


def test_restore_smaller_than_the_snapshot_is_out_of_range(cli, workdir):
    cli.create("big")
    mount = Path(cli.connect("big", workdir / "big")["path"])
    (mount / "data").write_bytes(b"\1" * 100_000)
    snapshot = commit(cli, "big")
    small = cli.run("snapshot", "restore", snapshot["id"], "--name", "small", "--size", "4Ki")
    assert small.rc == EXIT_USAGE and "smaller than snapshot" in small.stderr, (
        f"expected OUT_OF_RANGE (exit 2) for a restore smaller than the snapshot: {small.describe()}")


# ---------------------------------------------------------------- consistency and crashes

def test_a_file_written_during_the_commit_is_captured_as_one_whole_version(cli, workdir, processes):
    cli.create("busy")
    mount = Path(cli.connect("busy", workdir / "busy")["path"])
    size = 16 * 2**20
    (mount / "hot.bin").write_bytes(b"\0" * size)
    stop = workdir / "stop-rewriting"
    # Rewrites until told to stop (at most 60 s): whether the commit gave up while the writer
    # still ran is then a matter of order, not of how loaded the machine is.
    writer = processes.start(["/usr/bin/python3", "-c", f"""
import os, time
fd = os.open({str(mount / 'hot.bin')!r}, os.O_WRONLY)
end = time.monotonic() + 60
version = 0
while time.monotonic() < end and not os.path.exists({str(stop)!r}):
    version = version % 250 + 1
    for offset in range(0, {size}, 2**20):
        os.pwrite(fd, bytes([version]) * 2**20, offset)
"""])
    time.sleep(0.2)  # the writer is rewriting the file when the commit starts
    started = time.monotonic()
    during = cli.run_json("snapshot", "commit", "busy")
    if during.rc == 0:  # caught between two rewrites
        stop.touch()
        snapshot = during.json()
    else:
        # Rewritten all along: a retry cannot help while it goes on, so the commit says so at
        # once (it used to retry for 30 s, warning each time) and succeeds once it is quiet.
        assert during.rc == EXIT_PRECONDITION and "hot.bin" in during.stderr, during.describe()
        assert "changed while being read" in during.stderr, during.describe()
        assert during.stderr.count("warning:") <= 1 and "waiting" not in during.stderr, during.describe()
        assert writer.poll() is None, "expected the failure while the writer still ran, not after it"
        stop.touch()
        writer.wait(timeout=30)
        snapshot = commit(cli, "busy")
    stop.touch()
    writer.wait(timeout=30)
    cli.ok("snapshot", "restore", snapshot["id"], "--name", "busy-copy")
    copy = Path(cli.connect("busy-copy", workdir / "copy")["path"]) / "hot.bin"
    data = copy.read_bytes()
    assert len(set(data)) == 1, (
        f"expected one whole version of the file (a single byte value), got {len(set(data))} mixed values "
        f"after {time.monotonic() - started:.1f}s")


def hold_lock(cli: Rosetctl, key: str) -> int:
    """Holds rosetctl's lock `key` as another call would: one byte of <state>/locks at
    FNV-1a(key) >> 2 (core/lock_space.cc). Returns the descriptor; closing it releases the lock."""
    h = 1469598103934665603
    for c in key.encode():
        h = ((h ^ c) * 1099511628211) % 2**64
    fd = os.open(cli.state_dir / "locks", os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, h >> 2)
    return fd


def test_a_call_in_flight_is_waited_for_with_one_line_saying_so(cli, processes):
    """A lock held by another call goes away by itself: that (ABORTED) is the one thing retried."""
    cli.create("shared")
    held = hold_lock(cli, f"volume:{volume_id(cli, 'shared')}")
    try:
        waiting = cli.start("snapshot", "commit", "shared", "-o", "json",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        assert waiting.poll() is None, "expected the commit to wait for the lock"
    finally:
        os.close(held)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert err.count("waiting up to 30 s") == 1 and "already in progress" in err, err
    assert len(err.strip().splitlines()) == 1, f"expected one line for the whole wait: {err}"


def test_kill_during_commit_leaves_no_snapshot_and_gc_cleans_up(cli, workdir):
    cli.create("crash")
    mount = Path(cli.connect("crash", workdir / "crash")["path"])
    kept = commit(cli, "crash", "-m", "kept")
    rng = random.Random(7)
    for i in range(96):
        (mount / f"chunk{i:03}").write_bytes(rng.randbytes(2**20))
    proc = cli.start("snapshot", "commit", "crash", "-m", "killed", stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    before = blob_names(cli)
    while len(blob_names(cli)) < len(before) + 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, "expected to kill the commit halfway; it had already ended"
    listed = cli.ok_json("snapshot", "list")
    assert [s["id"] for s in listed] == [kept["id"]], f"expected the killed commit to leave no snapshot: {listed}"
    assert len(blob_names(cli)) > len(before), "expected the killed commit to have left blobs behind"
    assert_store_consistent(cli)
    again = commit(cli, "crash", "-m", "after the crash")
    assert again["files"] == 96, f"expected a commit after the crash to work: {again}"


def test_kill_during_delete_then_verify_and_gc_leave_a_consistent_store(cli, workdir):
    cli.create("del")
    mount = Path(cli.connect("del", workdir / "del")["path"])
    (mount / "shared").write_text("in both commits")
    keep = commit(cli, "del", "-m", "keep")
    for i in range(3000):
        (mount / f"unique{i}").write_text(f"only in the doomed commit {i}")
    doomed = commit(cli, "del", "-m", "doomed")
    database = sqlite3.connect(cli.state_dir / "state.db", timeout=10)
    proc = cli.start("snapshot", "delete", doomed["id"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        row = database.execute("SELECT 1 FROM snapshots WHERE id = ?", (doomed["id"],)).fetchone()
        if row is None:  # the record is gone: the commit file and the sweep come next
            break
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    database.close()
    assert proc.returncode == -signal.SIGKILL, "expected to kill the delete halfway; it had already ended"
    listed = cli.ok_json("snapshot", "list")
    assert keep["id"] in [s["id"] for s in listed], f"expected the other snapshot untouched: {listed}"
    assert_store_consistent(cli)
    cli.ok("snapshot", "restore", keep["id"], "--name", "kept-copy")
    copy = Path(cli.connect("kept-copy", workdir / "copy")["path"])
    assert (copy / "shared").read_text() == "in both commits", "expected the kept snapshot to restore after the crash"


def test_unrecorded_commit_is_noted_by_verify_and_removed_by_gc(cli):
    """The state a crash between DeleteSnapshot's two steps leaves: the record gone, the commit
    file still there."""
    cli.create("orphan")
    snapshot = commit(cli, "orphan")
    with sqlite3.connect(cli.state_dir / "state.db") as database:
        database.execute("DELETE FROM snapshots WHERE id = ?", (snapshot["id"],))
    verified = cli.ok_json("snapshot", "verify")
    assert verified["problems"] == [] and any(snapshot["commit"] in n for n in verified["notes"]), (
        f"expected a note about the unrecorded commit: {verified}")
    collected = cli.ok_json("snapshot", "gc")
    assert collected["unrecorded_removed"] == 1, f"expected gc to remove the unrecorded commit: {collected}"
    assert not (cli.state_dir / "store" / "commits" / snapshot["commit"]).exists()


def test_verify_fails_on_a_corrupted_blob(cli, workdir):
    cli.create("rot")
    mount = Path(cli.connect("rot", workdir / "rot")["path"])
    (mount / "data").write_text("original content")
    commit(cli, "rot")
    digest = hashlib.sha256(b"original content").hexdigest()
    blob = cli.state_dir / "store" / "blobs" / digest[:2] / digest
    os.chmod(blob, 0o644)
    blob.write_text("bit rot happened")
    verified = cli.run_json("snapshot", "verify")
    assert verified.rc == EXIT_FAILED, f"expected verify to exit 1 on corruption: {verified.describe()}"
    assert "corrupt" in verified.json()["problems"][0] and "data" in verified.json()["problems"][0], (
        f"expected the problem to name the file: {verified.json()}")


# ---------------------------------------------------------------- damaged blobs

def damage_blob(cli: Rosetctl, digest: str) -> None:
    """Overwrites a few bytes in the middle of a stored blob, keeping its size (a stray write, bit rot)."""
    blob = cli.state_dir / "store" / "blobs" / digest[:2] / digest
    size = blob.stat().st_size
    with open(blob, "r+b") as f:  # root writes the 0444 file
        f.seek(size // 2)
        f.write(b"\xde\xad\xbe\xef")


def partial_restores(cli: Rosetctl) -> list[str]:
    return [p.name for p in (cli.state_dir / "volumes").iterdir() if p.name.startswith(".restore-")]


def assert_restore_refused_as_data_loss(cli: Rosetctl, snapshot: str, name: str, path: str, digest: str) -> None:
    restored = cli.run("snapshot", "restore", snapshot, "--name", name)
    assert restored.rc == EXIT_FAILED, f"expected the restore of a damaged blob to fail (DATA_LOSS): {restored.describe()}"
    assert f'"{path}"' in restored.stderr and digest in restored.stderr and "corrupt" in restored.stderr, (
        f"expected the error to name the file and the blob: {restored.describe()}")
    assert name not in [v["name"] for v in cli.volumes()], "expected no volume from a failed restore"
    assert partial_restores(cli) == [], f"expected nothing left of the restore: {partial_restores(cli)}"


def test_a_damaged_blob_fails_the_restore_and_the_good_content_committed_again_repairs_it(cli, workdir):
    cli.create("src")
    mount = Path(cli.connect("src", workdir / "src")["path"])
    rng = random.Random(18)
    files = {f"f{i:03}": rng.randbytes(2**20) for i in range(40)}
    for name, data in files.items():
        (mount / name).write_bytes(data)
    first = commit(cli, "src")
    digest = hashlib.sha256(files["f017"]).hexdigest()
    damage_blob(cli, digest)

    verified = cli.run_json("snapshot", "verify")
    assert verified.rc == EXIT_FAILED and digest in "".join(verified.json()["problems"]), verified.describe()
    assert_restore_refused_as_data_loss(cli, first["id"], "back", "f017", digest)

    # The good content from another volume (no stat cache) is not deduplicated against the
    # damaged blob: it is stored over it, which repairs every snapshot holding that blob.
    cli.create("again")
    again = Path(cli.connect("again", workdir / "again")["path"])
    (again / "copy").write_bytes(files["f017"])
    second = commit(cli, "again")
    cli.ok("snapshot", "restore", second["id"], "--name", "second-back")
    assert (data_dir(cli, "second-back") / "copy").read_bytes() == files["f017"], (
        "expected the new commit to restore the good content")
    cli.ok("snapshot", "restore", first["id"], "--name", "first-back")
    assert (data_dir(cli, "first-back") / "f017").read_bytes() == files["f017"], (
        "expected the first snapshot repaired by the second commit")
    assert_store_consistent(cli)


def test_verify_names_every_snapshot_holding_a_damaged_blob_and_the_next_commit_repairs_it(cli, workdir):
    payload = random.Random(5).randbytes(2**20)
    digest = hashlib.sha256(payload).hexdigest()
    for volume in ("a", "b"):
        cli.create(volume)
        mount = Path(cli.connect(volume, workdir / volume)["path"])
        (mount / "shared.bin").write_bytes(payload)
        (mount / f"only-{volume}").write_text(volume)
    commits = [commit(cli, "a", "--name", "a1"), commit(cli, "a", "--name", "a2"), commit(cli, "b", "--name", "b1")]
    assert commits[1]["new_bytes"] == 0 and commits[2]["new_bytes"] == 1, f"expected the payload stored once: {commits}"
    damage_blob(cli, digest)

    verified = cli.run_json("snapshot", "verify")
    assert verified.rc == EXIT_FAILED, verified.describe()
    report = verified.json()
    problems = "\n".join(report["problems"])
    for snapshot in commits:
        assert snapshot["commit"] in problems, f"expected {snapshot['name']} among the problems: {report}"
    assert sorted(report["damaged"]) == ["a1", "a2", "b1"], f"expected every snapshot holding the blob: {report}"

    # Finding the damage made the stat caches unreliable, so the next commit of the unchanged
    # volume reads shared.bin again and stores the good content over the damaged blob.
    commit(cli, "a", "--name", "a3")
    assert cli.ok_json("snapshot", "verify")["problems"] == [], "expected the blob repaired"
    cli.ok("snapshot", "restore", "a1", "--name", "a1-back")
    assert (data_dir(cli, "a1-back") / "shared.bin").read_bytes() == payload


# ---------------------------------------------------------------- xfs with reflink

@pytest.fixture
def xfs_state_dir(workdir):
    """A 512 MiB xfs with reflink on a loop device, mounted at workdir/xfs; always torn down."""
    for tool in ("mkfs.xfs", "losetup"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            skip_or_fail(f"{tool} is not installed (scripts/install-deps.sh installs xfsprogs)")
    image = workdir / "xfs.img"
    with open(image, "wb") as f:
        f.truncate(512 * 2**20)
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], check=True, capture_output=True)
    device = subprocess.run(["losetup", "--find", "--show", str(image)], check=True, capture_output=True,
                            text=True).stdout.strip()
    mount_point = workdir / "xfs"
    mount_point.mkdir()
    try:
        subprocess.run(["mount", "-t", "xfs", device, str(mount_point)], check=True, capture_output=True)
        try:
            yield mount_point / "state"
        finally:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)


def shared_extents(path: Path) -> bool:
    report = subprocess.run(["filefrag", "-v", str(path)], capture_output=True, text=True, check=True).stdout
    return "shared" in report


def test_restore_on_xfs_with_reflink_shares_extents(workdir, xfs_state_dir, processes, rosetctl_binary):
    cli = Rosetctl(state_dir=xfs_state_dir, cwd=workdir, tracker=processes, binary=rosetctl_binary)
    cli.create("x")
    mount = Path(cli.connect("x", workdir / "x")["path"])
    payload = random.Random(3).randbytes(64 * 2**20)
    (mount / "weights.bin").write_bytes(payload)
    snapshot = commit(cli, "x")
    free_before = os.statvfs(xfs_state_dir).f_bfree
    cli.ok("snapshot", "restore", snapshot["id"], "--name", "x-copy")
    used = (free_before - os.statvfs(xfs_state_dir).f_bfree) * os.statvfs(xfs_state_dir).f_frsize
    restored = data_dir(cli, "x-copy") / "weights.bin"
    assert restored.read_bytes() == payload, "expected the restored file to hold the committed bytes"
    assert shared_extents(restored), "expected the restored file to share extents with the store (FICLONE)"
    assert used < 8 * 2**20, f"expected a reflinked restore to use almost no space, it used {used} bytes"
    verified = cli.ok_json("snapshot", "verify")
    assert verified["problems"] == [], f"expected the blobs committed by reflink to hash to their names: {verified}"
    cli.ok("volume", "disconnect", "x")


def test_restore_by_reflink_still_checks_every_blob(workdir, xfs_state_dir, processes, rosetctl_binary):
    cli = Rosetctl(state_dir=xfs_state_dir, cwd=workdir, tracker=processes, binary=rosetctl_binary)
    cli.create("x")
    mount = Path(cli.connect("x", workdir / "x")["path"])
    payload = random.Random(4).randbytes(8 * 2**20)
    (mount / "weights.bin").write_bytes(payload)
    snapshot = commit(cli, "x")
    digest = hashlib.sha256(payload).hexdigest()
    damage_blob(cli, digest)
    assert_restore_refused_as_data_loss(cli, snapshot["id"], "x-copy", "weights.bin", digest)
    cli.ok("volume", "disconnect", "x")


# ---------------------------------------------------------------- progress

def run_on_a_terminal(cli: Rosetctl, *args, while_running=None) -> tuple[int, str]:
    """Runs rosetctl with stderr on a pseudo-terminal; returns the exit code and what it drew.
    `while_running(proc)`, if given, runs in a thread beside it."""
    import pty
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(cli.argv(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=terminal, env=cli.env, cwd=cli.cwd)
    os.close(terminal)
    if while_running is not None:
        threading.Thread(target=while_running, args=(proc,), daemon=True).start()
    drawn = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    proc.wait(timeout=120)
    os.close(controller)
    return proc.returncode, drawn.decode(errors="replace")


def pause_once_reading(proc: subprocess.Popen, opened: str, paused: threading.Event, seconds: float = 0.5):
    """Stops PROC (SIGSTOP) for SECONDS once it holds a file whose path contains OPENED: a commit
    reading its files then outlasts the progress bar's first draw (300 ms) on any machine, where
    a fast disk once finished it first and the test had to skip."""
    fds = f"/proc/{proc.pid}/fd"
    while proc.returncode is None:
        try:
            names = os.listdir(fds)
        except OSError:  # it ended
            return
        for name in names:
            try:
                target = os.readlink(f"{fds}/{name}")
            except OSError:
                continue
            if opened in target:
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(seconds)
                os.kill(proc.pid, signal.SIGCONT)
                paused.set()
                return


def test_progress_is_drawn_on_a_terminal_and_never_with_json(cli, workdir):
    volume_id = cli.create("slow")["id"]
    mount = Path(cli.connect("slow", workdir / "slow")["path"])
    rng = random.Random(11)
    for i in range(256):
        (mount / f"part{i:03}").write_bytes(rng.randbytes(2**20))
    rc, drawn = run_on_a_terminal(cli, "snapshot", "commit", "slow", "-o", "json")
    assert rc == 0 and drawn == "", f"expected nothing on the terminal in JSON mode, got {drawn!r}"
    for snapshot in cli.ok_json("snapshot", "list"):  # so the next commit reads everything again
        cli.ok("snapshot", "delete", snapshot["id"])
    os.sync()
    for path in mount.iterdir():  # and from the disk, which takes longer than the bar's 300 ms
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    paused = threading.Event()
    rc, drawn = run_on_a_terminal(cli, "snapshot", "commit", "slow",
                                  while_running=lambda proc: pause_once_reading(proc, f"/{volume_id}/part", paused))
    assert rc == 0, f"expected the commit to succeed, got {rc}: {drawn!r}"
    assert paused.is_set(), "expected the commit paused while it read the volume's files"
    assert "committing slow:" in drawn and "/256 files" in drawn and "/s" in drawn, (
        f"expected a progress line with files, bytes and rate, got {drawn!r}")
    assert drawn.endswith("\r\x1b[K"), f"expected the bar erased at the end, got {drawn[-40:]!r}"
