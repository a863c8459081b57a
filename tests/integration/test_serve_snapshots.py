"""Snapshots through `rosetctl serve` over its unix socket, as the CSI external-snapshotter and
external-provisioner drive them: CreateSnapshot, ListSnapshots, DeleteSnapshot and CreateVolume
with a snapshot or volume content source."""
from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import grpc

from snapshot_trees import describe_tree, differences, fill_everything
from csi_server import CALL_TIMEOUT, expect_code, mount_capability


def create_until_settled(server, request, deadline: float = 120.0):
    """CreateSnapshot again with the same name until the snapshot is ready (or the call fails)."""
    end = time.monotonic() + deadline
    while True:
        snapshot = server.controller.CreateSnapshot(request, timeout=CALL_TIMEOUT).snapshot
        if snapshot.ready_to_use or time.monotonic() > end:
            return snapshot
        time.sleep(0.1)


def create_volume(server, pb2, name: str, source=None) -> str:
    request = pb2.CreateVolumeRequest(name=name, volume_capabilities=[mount_capability(pb2)],
                                      volume_content_source=source)
    return server.controller.CreateVolume(request, timeout=CALL_TIMEOUT).volume


def snapshot_request(pb2, name: str, volume_id: str, message: str = ""):
    return pb2.CreateSnapshotRequest(name=name, source_volume_id=volume_id,
                                     parameters={"message": message} if message else {})


def test_snapshot_lifecycle_over_grpc(csi, cli, workdir, server):
    pb2 = csi.pb2
    capabilities = server.controller.ControllerGetCapabilities(pb2.ControllerGetCapabilitiesRequest(),
                                                               timeout=CALL_TIMEOUT)
    advertised = {c.rpc.type for c in capabilities.capabilities}
    rpc = pb2.ControllerServiceCapability.RPC
    assert {rpc.CREATE_DELETE_SNAPSHOT, rpc.LIST_SNAPSHOTS, rpc.CLONE_VOLUME} <= advertised, (
        f"expected snapshot and clone capabilities, got {capabilities}")

    source = create_volume(server, pb2, "source")
    mount = Path(cli.connect("source", workdir / "source")["path"])
    fill_everything(mount)
    expected = describe_tree(mount)

    request = snapshot_request(pb2, "snap-a", source.volume_id, "first")
    snapshot = server.controller.CreateSnapshot(request, timeout=CALL_TIMEOUT).snapshot
    assert snapshot.snapshot_id.startswith("snap-") and snapshot.ready_to_use, f"expected a ready snapshot, got {snapshot}"
    assert snapshot.source_volume_id == source.volume_id and snapshot.size_bytes > 32 * 2**20, (
        f"expected the source and the logical size (the sparse file counts whole): {snapshot}")
    again = server.controller.CreateSnapshot(request, timeout=CALL_TIMEOUT).snapshot
    assert again.snapshot_id == snapshot.snapshot_id, "expected a repeated CreateSnapshot to return the same snapshot"
    other = create_volume(server, pb2, "other")
    expect_code(lambda: server.controller.CreateSnapshot(snapshot_request(pb2, "snap-a", other.volume_id),
                                                         timeout=CALL_TIMEOUT),
                grpc.StatusCode.ALREADY_EXISTS, "CreateSnapshot of the same name from another volume")
    expect_code(lambda: server.controller.CreateSnapshot(snapshot_request(pb2, "s", "local-0000000000000000"),
                                                         timeout=CALL_TIMEOUT),
                grpc.StatusCode.NOT_FOUND, "CreateSnapshot of a volume that does not exist")
    shown = cli.ok_json("snapshot", "show", "snap-a")
    assert shown["id"] == snapshot.snapshot_id and shown["message"] == "first", f"expected the CLI to see it: {shown}"

    restored = create_volume(server, pb2, "restored",
                             pb2.VolumeContentSource(snapshot=pb2.VolumeContentSource.SnapshotSource(
                                 snapshot_id=snapshot.snapshot_id)))
    assert restored.content_source.snapshot.snapshot_id == snapshot.snapshot_id, (
        f"expected CreateVolume to echo its content source, got {restored}")
    cloned = create_volume(server, pb2, "cloned",
                           pb2.VolumeContentSource(volume=pb2.VolumeContentSource.VolumeSource(
                               volume_id=source.volume_id)))
    assert cloned.content_source.volume.volume_id == source.volume_id, f"expected the clone's source, got {cloned}"
    for name in ("restored", "cloned"):
        lines = differences(expected, describe_tree(Path(cli.connect(name, workdir / name)["path"])))
        assert not lines, f"expected {name} to equal the source:\n" + "\n".join(lines)
    missing = pb2.VolumeContentSource(snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id="f" * 64))
    expect_code(lambda: create_volume(server, pb2, "nothing", missing), grpc.StatusCode.NOT_FOUND,
                "CreateVolume from a snapshot that does not exist")

    for _ in range(2):
        server.controller.DeleteSnapshot(pb2.DeleteSnapshotRequest(snapshot_id=snapshot.snapshot_id),
                                         timeout=CALL_TIMEOUT)
    listed = server.controller.ListSnapshots(pb2.ListSnapshotsRequest(snapshot_id=snapshot.snapshot_id),
                                             timeout=CALL_TIMEOUT)
    assert len(listed.entries) == 0, f"expected the deleted snapshot gone from ListSnapshots, got {listed}"
    assert (workdir / "restored" / "plain.txt").read_text() == "hello\n", (
        "expected a restored volume to keep its data after its snapshot is deleted")
    log = server.log()
    for method in ("CreateSnapshot", "ListSnapshots", "DeleteSnapshot", "CreateVolume"):
        assert f"{method} " in log, f"expected serve to log {method}: {log}"
    assert " files, " not in log, "expected no progress bar under serve"


def test_list_snapshots_pages_filters_and_rejects_foreign_tokens(csi, cli, server):
    pb2 = csi.pb2
    a = create_volume(server, pb2, "a")
    b = create_volume(server, pb2, "b")
    ids = {server.controller.CreateSnapshot(snapshot_request(pb2, f"a-{i}", a.volume_id),
                                            timeout=CALL_TIMEOUT).snapshot.snapshot_id for i in range(3)}
    of_b = server.controller.CreateSnapshot(snapshot_request(pb2, "b-0", b.volume_id),
                                            timeout=CALL_TIMEOUT).snapshot.snapshot_id
    seen, token, pages = [], "", 0
    while True:
        page = server.controller.ListSnapshots(pb2.ListSnapshotsRequest(max_entries=1, starting_token=token),
                                               timeout=CALL_TIMEOUT)
        seen += [e.snapshot.snapshot_id for e in page.entries]
        pages += 1
        token = page.next_token
        if not token:
            break
    assert sorted(seen) == sorted(ids | {of_b}) and pages == 4, f"expected 4 pages of one, got {pages}: {seen}"
    of_a = server.controller.ListSnapshots(pb2.ListSnapshotsRequest(source_volume_id=a.volume_id),
                                           timeout=CALL_TIMEOUT)
    assert {e.snapshot.snapshot_id for e in of_a.entries} == ids, f"expected only a's snapshots, got {of_a}"
    expect_code(lambda: server.controller.ListSnapshots(pb2.ListSnapshotsRequest(starting_token="bogus"),
                                                        timeout=CALL_TIMEOUT),
                grpc.StatusCode.ABORTED, "ListSnapshots with a token the plugin never issued")


def test_create_snapshot_of_a_file_that_never_stops_changing_fails_its_precondition(csi, cli, workdir, server,
                                                                                    processes):
    """Not ABORTED: that is CSI's "another call is in flight", which callers retry at once."""
    pb2 = csi.pb2
    volume = create_volume(server, pb2, "hot")
    mount = Path(cli.connect("hot", workdir / "hot")["path"])
    # Large enough that each read spans many writes and several timestamp ticks, even on a
    # loaded machine where the writer may be off the CPU for milliseconds.
    (mount / "hot.bin").write_bytes(b"\0" * 2**26)
    stop = workdir / "stop-writing"
    processes.start(["/usr/bin/python3", "-c", f"""
import os
import re
fd = os.open({str(mount / 'hot.bin')!r}, os.O_WRONLY)
n = 0
while not os.path.exists({str(stop)!r}):
    n = n % 250 + 1
    os.pwrite(fd, bytes([n]) * 65536, (n * 65536) % 2**22)
"""])
    time.sleep(0.2)
    request = snapshot_request(pb2, "hot-snap", volume.volume_id)
    details = expect_code(lambda: create_until_settled(server, request),
                          grpc.StatusCode.FAILED_PRECONDITION, "CreateSnapshot while a file is rewritten non-stop")
    assert "hot.bin" in details and "changed while being read" in details, f"expected the file named: {details}"
    # A move's pre-copy round keeps what it read instead: it needs most of the bytes early, not a
    # consistent file (the paused final delta is that).
    bad = pb2.CreateSnapshotRequest(name="hot-pre", source_volume_id=volume.volume_id, parameters={"preCopy": "yes"})
    details = expect_code(lambda: server.controller.CreateSnapshot(bad, timeout=CALL_TIMEOUT),
                          grpc.StatusCode.INVALID_ARGUMENT, "CreateSnapshot with preCopy=yes")
    assert "preCopy" in details and "true or false" in details, details
    pre = pb2.CreateSnapshotRequest(name="hot-pre", source_volume_id=volume.volume_id, parameters={"preCopy": "true"})
    assert create_until_settled(server, pre).ready_to_use, "expected a pre-copy snapshot while the writer runs"
    stop.touch()
    time.sleep(0.3)
    snapshot = create_until_settled(server, request)
    assert snapshot.ready_to_use, "expected the same request to succeed once the writer stopped"
    # The consistent snapshot after it holds the file as it is now, not as the pre-copy read it.
    cli.ok("snapshot", "restore", snapshot.snapshot_id, "--name", "hot-copy")
    copy = Path(cli.connect("hot-copy", workdir / "hot-copy")["path"])
    assert (copy / "hot.bin").read_bytes() == (mount / "hot.bin").read_bytes()


def test_concurrent_create_snapshot_of_one_name_makes_one_snapshot(csi, cli, workdir, server):
    pb2 = csi.pb2
    volume = create_volume(server, pb2, "race")
    mount = Path(cli.connect("race", workdir / "race")["path"])
    (mount / "data.bin").write_bytes(b"r" * 2**24)
    request = snapshot_request(pb2, "race-snap", volume.volume_id)
    results: list = [None] * 4

    def create(i: int) -> None:
        try:
            results[i] = server.controller.CreateSnapshot(request, timeout=CALL_TIMEOUT).snapshot.snapshot_id
        except grpc.RpcError as e:
            results[i] = e.code()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = {r for r in results if isinstance(r, str)}
    others = [r for r in results if not isinstance(r, str)]
    assert len(ids) == 1 and all(code == grpc.StatusCode.ABORTED for code in others), (
        f"expected one snapshot id, other calls ABORTED while it was being taken: {results}")
    assert len(cli.ok_json("snapshot", "list")) == 1, "expected exactly one snapshot recorded"


def test_create_snapshot_answers_before_a_long_commit_ends_and_lists_it_ready_later(csi, cli, workdir, start_serve):
    pb2 = csi.pb2
    server = start_serve(extra=("--snapshot-wait", "0"))
    volume = create_volume(server, pb2, "big")
    mount = Path(cli.connect("big", workdir / "big")["path"])
    (mount / "data.bin").write_bytes(os.urandom(96 * 2**20))
    request = snapshot_request(pb2, "big-snap", volume.volume_id)
    first = server.controller.CreateSnapshot(request, timeout=CALL_TIMEOUT).snapshot
    assert not first.ready_to_use and first.snapshot_id.startswith("snap-"), (
        f"expected an id at once and ready_to_use=false while 96 MiB are committed: {first}")
    expect_code(lambda: server.controller.DeleteSnapshot(pb2.DeleteSnapshotRequest(snapshot_id=first.snapshot_id),
                                                         timeout=CALL_TIMEOUT),
                grpc.StatusCode.ABORTED, "DeleteSnapshot while the snapshot is being taken")
    source = pb2.VolumeContentSource(snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=first.snapshot_id))
    expect_code(lambda: create_volume(server, pb2, "too-early", source), grpc.StatusCode.FAILED_PRECONDITION,
                "CreateVolume from a snapshot that is not ready")
    deadline = time.monotonic() + 120
    while True:
        listed = server.controller.ListSnapshots(pb2.ListSnapshotsRequest(snapshot_id=first.snapshot_id),
                                                 timeout=CALL_TIMEOUT).entries
        assert len(listed) == 1, f"expected the pending snapshot listed: {listed}"
        if listed[0].snapshot.ready_to_use or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    ready = listed[0].snapshot
    assert ready.ready_to_use and ready.snapshot_id == first.snapshot_id and ready.size_bytes == 96 * 2**20, (
        f"expected the same snapshot ready with its size: {ready}")
    again = server.controller.CreateSnapshot(request, timeout=CALL_TIMEOUT).snapshot
    assert again.snapshot_id == first.snapshot_id and again.ready_to_use, f"expected the retry to return it: {again}"
    restored = create_volume(server, pb2, "restored", source)
    target = Path(cli.connect(restored.volume_id, workdir / "restored")["path"])
    assert (target / "data.bin").read_bytes() == (mount / "data.bin").read_bytes(), "expected the restore to match"


def test_commit_interrupted_by_a_serve_crash_leaves_no_snapshot_and_a_retry_makes_one(csi, cli, workdir, start_serve):
    pb2 = csi.pb2
    server = start_serve(extra=("--snapshot-wait", "0"))
    volume = create_volume(server, pb2, "crashy")
    mount = Path(cli.connect("crashy", workdir / "crashy")["path"])
    (mount / "data.bin").write_bytes(os.urandom(96 * 2**20))
    request = snapshot_request(pb2, "crashy-snap", volume.volume_id)
    pending = server.controller.CreateSnapshot(request, timeout=CALL_TIMEOUT).snapshot
    assert not pending.ready_to_use, f"expected the commit still running: {pending}"
    server.stop(signal.SIGKILL)
    server = start_serve()
    listed = server.controller.ListSnapshots(pb2.ListSnapshotsRequest(), timeout=CALL_TIMEOUT).entries
    assert [e.snapshot.snapshot_id for e in listed] == [], f"expected the interrupted snapshot gone: {listed}"
    retried = create_until_settled(server, request)
    assert retried.ready_to_use and retried.snapshot_id != pending.snapshot_id, (
        f"expected the retry to take a new, complete snapshot: {retried}")
    verified = cli.ok_json("snapshot", "verify")
    assert verified["ok"], f"expected a consistent store after the crash: {verified}"


def test_a_restore_whose_deadline_passes_stops_leaves_nothing_and_a_retry_succeeds(csi, cli, workdir, server):
    """Handlers work for their call: a CreateVolume from a large snapshot whose client's deadline
    passes stops within moments (not after copying everything), undoes what it had made, and says
    DEADLINE_EXCEEDED in serve's log; one whose client cancels, CANCELLED; the same call with time
    enough then succeeds."""
    pb2 = csi.pb2
    source = create_volume(server, pb2, "large")
    mount = Path(cli.connect("large", workdir / "large")["path"])
    chunk = os.urandom(4 * 2**20)
    for i in range(8):  # 8 files of 96 MiB: several workers, and many buffers each
        with open(mount / f"part-{i}.bin", "wb") as f:
            for _ in range(24):
                f.write(chunk[i:] + chunk[:i])
    snapshot = create_until_settled(server, snapshot_request(pb2, "large-snap", source.volume_id))
    assert snapshot.ready_to_use, snapshot
    volumes_dir = Path(cli.state_dir) / "volumes"
    before = sorted(p.name for p in volumes_dir.iterdir())
    request = pb2.CreateVolumeRequest(
        name="restored", volume_capabilities=[mount_capability(pb2)],
        volume_content_source=pb2.VolumeContentSource(
            snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=snapshot.snapshot_id)))

    expect_code(lambda: server.controller.CreateVolume(request, timeout=0.2), grpc.StatusCode.DEADLINE_EXCEEDED,
                "CreateVolume from a 768 MiB snapshot within 0.2 s")
    pattern = re.compile(r'CreateVolume name="restored" .*duration=([0-9.]+)ms status=(\w+)')
    deadline = time.monotonic() + 60
    while not pattern.search(server.log()):
        assert time.monotonic() < deadline, f"expected serve to log the call's end: {server.log()}"
        time.sleep(0.05)
    stopped = pattern.search(server.log())
    assert stopped.group(2) == "DEADLINE_EXCEEDED", stopped.group(0)
    listed = server.controller.ListVolumes(pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT).entries
    assert [e.volume.volume_id for e in listed] == [source.volume_id], f"expected no restored volume: {listed}"
    assert sorted(p.name for p in volumes_dir.iterdir()) == before, "expected nothing left in the volumes directory"
    assert [v["name"] for v in cli.volumes()] == ["large"]

    # A client that cancels (no deadline of its own) is noticed the same way.
    pending = server.controller.CreateVolume.future(request)
    time.sleep(0.2)
    assert pending.cancel(), "expected the restore still running after 0.2 s"
    deadline = time.monotonic() + 60
    while len(pattern.findall(server.log())) < 2:
        assert time.monotonic() < deadline, f"expected serve to log the cancelled call's end: {server.log()}"
        time.sleep(0.05)
    cancelled = list(pattern.finditer(server.log()))[1]
    assert cancelled.group(2) == "CANCELLED", cancelled.group(0)
    assert float(cancelled.group(1)) < 1000, cancelled.group(0)
    assert sorted(p.name for p in volumes_dir.iterdir()) == before, "expected nothing left in the volumes directory"

    restored = server.controller.CreateVolume(request, timeout=CALL_TIMEOUT).volume
    full = [m for m in pattern.finditer(server.log()) if m.group(2) == "OK"]
    assert len(full) == 1, server.log()
    # Not a timing goal (those live in bench/): only that it stopped before doing the whole job.
    assert float(stopped.group(1)) < float(full[0].group(1)), (
        f"expected the stopped restore to end before a whole one: {stopped.group(0)} / {full[0].group(0)}")
    target = Path(cli.connect(restored.volume_id, workdir / "restored")["path"])
    for i in range(8):
        assert (target / f"part-{i}.bin").stat().st_size == 96 * 2**20
    assert (target / "part-3.bin").read_bytes() == (mount / "part-3.bin").read_bytes()
