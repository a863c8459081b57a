"""Snapshots moved between nodes by content address (issue 22, items 3 and 4): a controller and two
nodes, each its own network namespace, state directory and mTLS certificate (controller_site.py).
Node B pulls a snapshot taken on node A, dialling A directly (or through the controller's proxy
when it cannot, or when the certificate there is not A's), several blobs in flight, fetching only
the objects it lacks, each verified on arrival; a restore on B equals the source in every byte and
attribute. A source killed mid-transfer fails the pull UNAVAILABLE and a retry resumes; a flipped
byte in an object on A is refused on B (DATA_LOSS naming it) and never stored there; the staged
parts of transfers abandoned long ago are collected by the next pull. The same holds for a
volume made on B from A's snapshot in one CreateVolume on the controller (CSI with B in its
topology, or `volume create --node B --from-snapshot ID`): B fetches the snapshot from A first,
or restores from its own copy without asking A once it holds it whole. A snapshot of the
controller host is fetched from the controller as from any node, and a volume placed on the
controller host from A's snapshot has the controller fetch it from A itself.
A clone on B of a volume on A goes by a snapshot the controller takes on A and removes afterwards.
"""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from controller_site import EXIT_PERMISSION, EXIT_UNAVAILABLE, Site, build_site
from rosetctl_cli import EXIT_CONFLICT
from host_lab import Host, HostProcess, HostRosetctl
from rosetctl_cli import binary_path
from snapshot_trees import as_from_another_host, describe_tree, differences, set_mtime
from test_placement import NODE_KEY, create_request, csi_call, local_id

EXIT_FAILED = 1


def differences_across_hosts(expected: dict, actual: dict) -> list[str]:
    """differences() of a restore on another host than its source's: without what such a restore
    leaves out (setuid bits, device nodes, privileged xattrs: snapshot_trees.as_from_another_host)."""
    return differences(as_from_another_host(expected), actual)
NODE_PORT = 9444


def start_node(site: Site, host: Host, env: dict) -> HostProcess:
    """HOST's `serve --role node --listen --controller`, registered (by its heartbeat) with its address."""
    serve = host.start([binary_path(), "serve", "--role", "node", "--listen", f"{host.address}:{NODE_PORT}",
                        "--endpoint", f"unix://{host.dir}/csi.sock", "--state-dir", host.state_dir,
                        "--grace-period", "2"], env=env)
    # Registered, and this serve listening: after a restart the registry still holds the
    # address the killed one registered, which alone said nothing of the new one.
    site.wait_until_registered(host.name, f"{host.address}:{NODE_PORT}", serve,
                               ready=lambda: f"listening on {host.address}:{NODE_PORT}" in serve.output())
    return serve


def local_cli(host: Host) -> HostRosetctl:
    """rosetctl on HOST against its own state directory, as that node (no --controller)."""
    cli = HostRosetctl(host)
    cli.env["ROSETCTL_NODE_ID"] = host.name
    return cli


class Nodes:
    def __init__(self, site: Site):
        self.site = site
        self.a_host, self.b_host = site.consumer_a, site.consumer_b
        self.a, self.b = local_cli(self.a_host), local_cli(self.b_host)
        self.serve_a = start_node(site, self.a_host, site.a.env)
        self.serve_b = start_node(site, self.b_host, site.b.env)

    def restart_a(self) -> None:
        self.serve_a = start_node(self.site, self.a_host, self.site.a.env)

    def volume_dir(self, cli: HostRosetctl, name: str) -> Path:
        path = cli.state_dir / "volumes" / cli.volume(name)["id"]
        path.mkdir(exist_ok=True)
        return path

    @contextlib.contextmanager
    def b_cannot_dial_a(self):
        """B's packets to A are refused at once (a firewall between the nodes) while inside; the
        controller still reaches both."""
        route = ["route", "prohibit", f"{self.a_host.address}/32"]
        added = self.b_host.run(["ip", route[0], "add", *route[1:]])
        assert added.rc == 0, added.describe()
        try:
            yield
        finally:
            self.b_host.run(["ip", route[0], "del", *route[1:]])

    def push(self, snapshot: str, *extra):
        """alice (an admin) has B pull SNAPSHOT from A; the CLI's result."""
        return self.site.alice.run("snapshot", "push", snapshot, "--from-node", "consumer-a",
                                   "--to-node", "consumer-b", "-o", "json", *extra, timeout=300)


@pytest.fixture
def nodes(host_lab, rosetctl_binary) -> Nodes:
    site = build_site(host_lab)
    yield Nodes(site)
    site.assert_no_secrets_printed()


def fill_varied(root: Path) -> None:
    """Files of several sizes (empty to 3 MiB, one spanning several chunks), a duplicate, symlinks,
    modes, owners, times and xattrs."""
    rng = random.Random(22)
    (root / "empty").write_bytes(b"")
    (root / "small.txt").write_text("small\n")
    os.setxattr(root / "small.txt", "user.origin", b"node-a")
    (root / "dir" / "deeper").mkdir(parents=True)
    for i, size in enumerate((1, 4095, 4096, 65537, 1_000_000)):
        (root / "dir" / f"f{i}.bin").write_bytes(rng.randbytes(size))
    (root / "dir" / "deeper" / "big.bin").write_bytes(rng.randbytes(3 * 2**20 + 5))
    (root / "dir" / "copy-of-f4.bin").write_bytes((root / "dir" / "f4.bin").read_bytes())
    os.symlink("small.txt", root / "link")
    os.symlink("/nowhere", root / "dangling")
    os.chmod(root / "dir" / "f1.bin", 0o4750)
    os.chown(root / "dir" / "f2.bin", 1234, 5678)
    os.chmod(root / "dir" / "deeper", 0o700)
    os.link(root / "small.txt", root / "hardlink")
    set_mtime(root / "small.txt", 1_600_000_000_123_456_789)
    set_mtime(root / "dir" / "deeper", 1_400_000_000_000_000_002)


def blobs(cli: HostRosetctl) -> set[str]:
    root = cli.state_dir / "store" / "blobs"
    return {p.name for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def received(cli: HostRosetctl) -> int:
    """Bytes of blobs on the node, stored or staged (store/incoming/*.part)."""
    store = cli.state_dir / "store"
    paths = list((store / "blobs").rglob("*")) + list((store / "incoming").glob("*.part"))
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size if path.is_file() else 0
        except FileNotFoundError:  # named or removed meanwhile
            pass
    return total


def kill_a_once_b_received(nodes, b, transfer, more_than: int, what: str) -> None:
    """SIGKILLs node A's serve once B holds more than `more_than` bytes of incoming objects,
    while `transfer` (the CLI run pulling them) is still going."""
    deadline = time.monotonic() + 120
    while received(b) <= more_than:
        assert transfer.poll() is None, f"the {what} ended before A was killed: {transfer.communicate()}"
        assert time.monotonic() < deadline, "no blob arrived on B"
        time.sleep(0.005)
    nodes.serve_a.send_signal(signal.SIGKILL)
    nodes.serve_a.wait(timeout=10)


def blob_path(cli: HostRosetctl, blob: str) -> Path:
    return cli.state_dir / "store" / "blobs" / blob[:2] / blob


def flip_byte(cli: HostRosetctl, blob: str, offset: int, mask: int = 0x01) -> None:
    """Damages BLOB in CLI's store: the bits of MASK flipped in its byte at OFFSET."""
    path = blob_path(cli, blob)
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    os.chmod(path, 0o644)
    path.write_bytes(bytes(data))


def test_a_snapshot_pulled_to_another_node_restores_there_exactly_and_a_change_sends_only_itself(nodes):
    a, b = nodes.a, nodes.b
    a.create("src")
    source = nodes.volume_dir(a, "src")
    fill_varied(source)
    expected = describe_tree(source)
    first = a.ok_json("snapshot", "commit", "src", "--name", "s1")

    pushed = nodes.push("s1")
    assert pushed.rc == 0, pushed.describe()
    result = pushed.json()
    assert result["snapshot_id"] == first["id"] and result["commit"] == first["commit"], result
    # B dialled A itself: A served the fetches to B's certificate, the controller forwarded none.
    assert result["route"] == f"directly at {nodes.a_host.address}:{NODE_PORT}", result
    fetches = fetch_lines(nodes.serve_a)
    assert fetches and all("peer=node:consumer-b" in line for line in fetches), fetches
    assert len(fetches) >= 3, f"expected the lookup and the blobs on several streams: {fetches}"
    assert "FetchObjects" not in nodes.site.serve_log(), "expected nothing forwarded by the controller"
    assert not result["already_present"], result
    # commit, tree and the 8 distinct contents (the copy shares f4's blob; the hard link small's)
    assert result["objects_sent"] == 10 and result["objects_skipped"] == 0, result
    content_bytes = sum(p.stat().st_size for p in source.rglob("*") if p.is_file() and not p.is_symlink()
                        and p.name not in ("copy-of-f4.bin", "hardlink"))
    assert content_bytes <= result["bytes_sent"] < content_bytes + 8192, result

    # B holds the snapshot now, under the same id and name: it restores there, byte for byte.
    held = b.ok_json("snapshot", "show", "s1")
    assert held["commit"] == first["commit"] and held["id"] == first["id"], held
    b.ok("snapshot", "restore", "s1", "--name", "copy")
    lines = differences_across_hosts(expected, describe_tree(nodes.volume_dir(b, "copy")))
    assert not lines, "expected the restore on B to equal A's volume exactly:\n" + "\n".join(lines)
    assert b.ok_json("snapshot", "verify")["problems"] == []

    # Again: B holds it, nothing travels.
    again = nodes.push("s1")
    assert again.rc == 0 and again.json()["already_present"] and again.json()["bytes_sent"] == 0, again.describe()
    assert "nothing sent" in nodes.site.alice.run("snapshot", "push", "s1", "--from-node", "consumer-a",
                                                  "--to-node", "consumer-b").stdout

    # One small file changes on A: only the commit, the tree and that file's blob travel.
    (source / "small.txt").write_text("small, changed\n")
    expected = describe_tree(source)
    a.ok_json("snapshot", "commit", "src", "--name", "s2")
    # The admin pulls into B's store this time, said from B's side (--on-node).
    pulled = nodes.site.alice.ok_json("--on-node", "consumer-b", "snapshot", "pull", "s2", "--from-node",
                                      "consumer-a")
    assert pulled["objects_sent"] == 3 and pulled["objects_skipped"] == 7, pulled
    assert pulled["bytes_sent"] < 8192, f"expected only the changed file, the tree and the commit to travel: {pulled}"
    b.ok("snapshot", "restore", "s2", "--name", "copy2")
    lines = differences_across_hosts(expected, describe_tree(nodes.volume_dir(b, "copy2")))
    assert not lines, "expected the second restore on B to equal A's volume:\n" + "\n".join(lines)


def test_a_file_appended_to_travels_as_its_new_bytes_and_one_rewritten_travels_whole(nodes):
    """B begins the blob of a file appended to since the version it holds (in the snapshot's
    parent) with that version; A sends the rest only when its own first bytes hash as B's do
    (FetchObjects' prefix_sha256), and the whole blob when the file was rewritten instead."""
    a, b = nodes.a, nodes.b
    MiB = 2**20
    a.create("log")
    source = nodes.volume_dir(a, "log")
    (source / "app.log").write_bytes(os.urandom(4 * MiB))
    a.ok("snapshot", "commit", "log", "--name", "l1")
    assert nodes.push("l1").rc == 0
    with open(source / "app.log", "ab") as log:
        log.write(os.urandom(MiB // 2))
    a.ok("snapshot", "commit", "log", "--name", "l2")
    appended = nodes.push("l2")
    assert appended.rc == 0, appended.describe()
    assert appended.json()["bytes_seeded"] == 4 * MiB, appended.stdout
    assert MiB // 2 <= appended.json()["bytes_sent"] < MiB, f"expected only the appended bytes: {appended.stdout}"
    expected_l2 = describe_tree(source)
    # Rewritten at its first byte, and longer: the first bytes differ, so the blob travels whole.
    data = bytearray((source / "app.log").read_bytes())
    data[0] ^= 0xFF
    (source / "app.log").write_bytes(bytes(data) + os.urandom(4096))
    a.ok("snapshot", "commit", "log", "--name", "l3")
    rewritten = nodes.push("l3")
    assert rewritten.rc == 0, rewritten.describe()
    assert rewritten.json()["bytes_seeded"] == 0, rewritten.stdout
    assert rewritten.json()["bytes_sent"] > 4 * MiB, rewritten.stdout
    for name, expected in (("l2", expected_l2), ("l3", describe_tree(source))):
        b.ok("snapshot", "restore", name, "--name", f"copy-{name}")
        lines = differences_across_hosts(expected, describe_tree(nodes.volume_dir(b, f"copy-{name}")))
        assert not lines, f"expected the restore of {name} on B to equal A's:\n" + "\n".join(lines)
    assert b.ok_json("snapshot", "verify")["problems"] == []


def fetch_lines(serve: HostProcess) -> list[str]:
    """The FetchObjects calls a node's serve has answered so far (its log lines)."""
    return [line for line in serve.output().splitlines() if "/rosetctl.v1.ObjectStore/FetchObjects" in line]


def commit_small(nodes: Nodes, name: str, snapshot: str) -> None:
    nodes.a.create(name)
    (nodes.volume_dir(nodes.a, name) / "f").write_text(name)
    nodes.a.ok("snapshot", "commit", name, "--name", snapshot)


FETCH_LOG = re.compile(r"^(\S+) info \S+FetchObjects .*duration=([\d.]+)ms status=OK")


def fetch_intervals(serve: HostProcess) -> list[tuple[float, float]]:
    """(start, end) in seconds of every FetchObjects call SERVE answered: its log line is written
    at the end, with the call's duration."""
    intervals = []
    for line in fetch_lines(serve):
        found = FETCH_LOG.match(line)
        assert found, f"a FetchObjects log line without a time and a duration: {line}"
        end = datetime.datetime.fromisoformat(found[1]).timestamp()
        intervals.append((end - float(found[2]) / 1000, end))
    return intervals


@contextlib.contextmanager
def sending_slowly(host: Host, rate: str = "8mbit"):
    """HOST's network sends at most RATE, so that moving a few MiB takes seconds, however loaded
    the machine: whether transfers overlap is then a matter of seconds, not of scheduling."""
    limit = ["qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "1s"]
    added = host.run(["tc", *limit])
    assert added.rc == 0, added.describe()
    try:
        yield
    finally:
        host.run(["tc", "qdisc", "del", "dev", "eth0", "root"])


def test_the_blobs_of_a_transfer_travel_on_two_streams_at_the_same_time(nodes):
    """The receiver's lanes fetch side by side: with the source's link at 1 MB/s, the two
    FetchObjects streams of 4 MiB of blobs (2 MiB each) must overlap by most of their length.
    Lanes run one after another would give two intervals that do not meet."""
    nodes.a.create("big")
    for index in range(4):
        (nodes.volume_dir(nodes.a, "big") / f"part{index}").write_bytes(os.urandom(1 << 20))
    nodes.a.ok("snapshot", "commit", "big", "--name", "s-big")
    before = len(fetch_lines(nodes.serve_a))
    with sending_slowly(nodes.a_host):
        pushed = nodes.push("s-big")
    assert pushed.rc == 0, pushed.describe()
    # The lookup's FetchObjects (commit and tree, bytes) first, then one stream per lane.
    streams = sorted(fetch_intervals(nodes.serve_a)[before:], key=lambda span: span[1] - span[0])[-2:]
    assert len(streams) == 2, fetch_lines(nodes.serve_a)
    (first_start, first_end), (second_start, second_end) = streams
    shorter = min(first_end - first_start, second_end - second_start)
    overlap = min(first_end, second_end) - max(first_start, second_start)
    assert shorter > 1.0, f"expected each lane to take seconds at 1 MB/s: {streams}"
    assert overlap > shorter / 2, f"expected the two lanes' streams to overlap: {streams}"


def test_a_node_that_cannot_be_dialled_directly_is_reached_through_the_controllers_proxy(nodes):
    commit_small(nodes, "src", "s1")
    with nodes.b_cannot_dial_a():
        pushed = nodes.push("s1")
    assert pushed.rc == 0, pushed.describe()
    assert pushed.json()["route"] == "through the controller's proxy", pushed.json()
    assert pushed.json()["objects_sent"] == 3, pushed.json()
    assert "FetchObjects node=\"consumer-a\"" in nodes.site.serve_log(), "expected the controller to forward"
    fetches = fetch_lines(nodes.serve_a)
    assert fetches and all("peer=controller:" in line for line in fetches), fetches
    assert "through the controller's proxy" in nodes.serve_b.output()


def test_a_certificate_that_is_not_the_nodes_is_not_trusted_on_any_route(nodes):
    commit_small(nodes, "src", "s1")
    a_address = f"{nodes.a_host.address}:{NODE_PORT}"
    # The registry gives an address to one node only: "ghost" cannot take consumer-a's.
    taken = nodes.site.alice.run("--node-id", "ghost", "node", "register", "--address", a_address)
    assert taken.rc == EXIT_CONFLICT and 'is registered by node "consumer-a"' in taken.stderr, taken.describe()
    # Once consumer-a is removed, the registry says node "ghost" listens where consumer-a still does:
    # dialled there, consumer-a's certificate answers, which is not ghost's. B does not take what it
    # says on the direct route, nor does the controller on its own: nothing comes from "ghost".
    for _ in range(3):  # consumer-a's heartbeat (every 30 s) may put it back in between
        nodes.site.alice.ok("node", "remove", "consumer-a")
        if nodes.site.alice.run("--node-id", "ghost", "node", "register", "--address", a_address).rc == 0:
            break
    else:
        raise AssertionError("ghost never got consumer-a's address after its removal")
    pushed = nodes.site.alice.run("snapshot", "push", "s1", "--from-node", "ghost", "--to-node", "consumer-b",
                                  "-o", "json", timeout=120)
    assert pushed.rc == EXIT_UNAVAILABLE, pushed.describe()
    assert ('node certificate \\"consumer-a\\" answered at '
            f'{a_address}, where node \\"ghost\\" was expected') in nodes.serve_b.output()
    assert "where node certificate" in pushed.stderr and "ghost" in pushed.stderr, pushed.describe()
    assert "FetchObjects" not in nodes.serve_a.output(), "expected consumer-a to be asked for nothing"
    assert nodes.b.ok_json("snapshot", "list") == []


def test_a_node_reads_another_node_only_for_a_transfer_the_controller_started_and_never_writes_into_it(nodes):
    nodes.a.create("src")
    (nodes.volume_dir(nodes.a, "src") / "f").write_text("x")
    nodes.a.ok("snapshot", "commit", "src", "--name", "s1")
    # consumer-a's certificate may not have B pull (PullSnapshot writes into B's store)...
    refused = nodes.site.a.run("snapshot", "push", "s1", "--to-node", "consumer-b")
    assert refused.rc == EXIT_PERMISSION and 'node certificate "consumer-a"' in refused.stderr, refused.describe()
    # ...nor may B read A's store on its own: not from its own CLI (dialling A), nor by having
    # its own serve pull through the controller. Each is told the route that works.
    for on_node in ([], ["--on-node", "consumer-b"]):
        refused = nodes.site.b.run(*on_node, "snapshot", "pull", "s1", "--from-node", "consumer-a")
        assert refused.rc == EXIT_PERMISSION, refused.describe()
        assert 'node certificate "consumer-b" may not call /rosetctl.v1.ObjectStore/LookupSnapshot' in refused.stderr
        assert "carries no transfer grant" in refused.stderr and "--on-node RECEIVER snapshot pull" in refused.stderr
    assert "FetchObjects" not in nodes.serve_a.output(), "expected A to send B nothing"
    assert nodes.b.ok_json("snapshot", "list") == []
    # The route it names: the admin's pull into B, a transfer the controller starts.
    pulled = nodes.site.alice.ok_json("--on-node", "consumer-b", "snapshot", "pull", "s1", "--from-node", "consumer-a")
    assert pulled["objects_sent"] == 3 and pulled["route"].startswith("directly at"), pulled


def test_a_source_killed_mid_transfer_fails_unavailable_and_a_retry_resumes(nodes):
    a, b = nodes.a, nodes.b
    a.create("big")
    source = nodes.volume_dir(a, "big")
    count, size = 32, 8 * 2**20
    for i in range(count):
        (source / f"part{i:02}").write_bytes(os.urandom(size))
    total = count * size
    a.ok_json("snapshot", "commit", "big", "--name", "big-1")
    before = blobs(b)

    pull = nodes.site.alice.start("snapshot", "push", "big-1", "--from-node", "consumer-a",
                                  "--to-node", "consumer-b", "-o", "json",
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Four blobs verified, however far the blob on its way in each of the (two) lanes has come.
    kill_a_once_b_received(nodes, b, pull, 6 * size, "pull")
    out, err = pull.communicate(timeout=120)
    assert pull.returncode == EXIT_UNAVAILABLE and "consumer-a" in err, (pull.returncode, out, err)
    arrived = blobs(b) - before  # what was verified is stored when the transfer breaks off
    assert 4 <= len(arrived) < count, arrived
    assert b.ok_json("snapshot", "list") == [], "expected nothing visible on B before the snapshot is whole"

    nodes.restart_a()
    resumed = nodes.push("big-1")
    assert resumed.rc == 0, resumed.describe()
    result = resumed.json()
    assert result["objects_skipped"] >= len(arrived) + 1, result  # the blobs and the tree kept
    assert result["bytes_skipped"] >= len(arrived) * size, result
    # What travelled the second time is only what had not arrived (and the small commit).
    assert result["bytes_sent"] + result["bytes_skipped"] + result["bytes_resumed"] < total + 4096, result
    assert result["bytes_sent"] <= total - len(arrived) * size + 4096, result
    b.ok("snapshot", "restore", "big-1", "--name", "big-copy")
    lines = differences_across_hosts(describe_tree(source), describe_tree(nodes.volume_dir(b, "big-copy")))
    assert not lines, "\n".join(lines)


def test_a_flipped_byte_on_the_source_is_refused_on_the_receiver_and_never_stored(nodes):
    a, b = nodes.a, nodes.b
    a.create("src")
    source = nodes.volume_dir(a, "src")
    (source / "good").write_bytes(b"fine" * 1000)
    (source / "victim").write_bytes(bytes(range(256)) * 4000)
    a.ok_json("snapshot", "commit", "src", "--name", "s1")
    victim = blobs(a) - {p for p in blobs(a) if blob_path(a, p).read_bytes() == b"fine" * 1000}
    (victim,) = victim
    flip_byte(a, victim, 123456)

    refused = nodes.push("s1")
    assert refused.rc == EXIT_FAILED and f"blob {victim}" in refused.stderr and "corrupt" in refused.stderr, (
        refused.describe())
    assert victim not in blobs(b), "expected the corrupt blob never stored on B"
    assert not list((b.state_dir / "store" / "incoming").glob(f"{victim}*")), "nor kept for a resume"
    assert b.ok_json("snapshot", "list") == [], "expected no snapshot on B"


def test_an_image_volume_snapshot_moves_the_same_way(nodes):
    a, b = nodes.a, nodes.b
    created = a.create("img", "--size", "32Mi", "--type", "image")
    image = a.state_dir / "images" / f"{created['id']}.img"
    with open(image, "r+b") as f:  # some content past the filesystem's own, at a known place
        f.seek(20 * 2**20)
        f.write(os.urandom(2**20))
    a.ok_json("snapshot", "commit", "img", "--name", "img-1")
    pushed = nodes.push("img-1")
    assert pushed.rc == 0, pushed.describe()
    restored = b.create("img-copy", "--from-snapshot", "img-1")
    assert restored["type"] == created["type"], (restored, created)
    copy = b.state_dir / "images" / f"{restored['id']}.img"
    assert copy.read_bytes() == image.read_bytes(), "expected the image restored on B to equal A's byte for byte"


# ---------------------------------------------------------------- volumes made from another node's snapshot
#
# CreateVolume on the controller with a snapshot of node A as its content source and node B in
# its topology (the CLI's `volume create NAME --node B --from-snapshot ID`): the controller sends
# it to B, and B fetches the snapshot from A (only what it lacks) before restoring it locally.

FETCHED = re.compile(r"snapshot (\S+) fetched from node \"consumer-a\" for a restore: objects_sent=(\d+) "
                     r"bytes_sent=(\d+) objects_skipped=(\d+) bytes_skipped=(\d+) bytes_resumed=(\d+)")


def fetches(serve: HostProcess) -> list[dict]:
    """B's log lines of snapshots fetched for a restore, as counts."""
    keys = ("objects_sent", "bytes_sent", "objects_skipped", "bytes_skipped", "bytes_resumed")
    return [{"snapshot": m[1], **dict(zip(keys, map(int, m.groups()[1:])))}
            for m in FETCHED.finditer(serve.output())]


def placed_volume(nodes: Nodes, name: str, node: str) -> tuple[str, Path]:
    """NAME made on NODE by the controller (`volume create --node`): its placed id and its directory."""
    volume_id = nodes.site.alice.ok_json("volume", "create", name, "--node", node)["id"]
    host = nodes.a_host if node == "consumer-a" else nodes.b_host
    path = host.state_dir / "volumes" / local_id(volume_id, node)
    path.mkdir(exist_ok=True)
    return volume_id, path


def snapshot_through_controller(nodes: Nodes, csi, name: str, volume_id: str) -> str:
    """CSI CreateSnapshot on the controller (taken on the volume's node), once ready: its placed id."""
    made = csi_call(nodes.site, csi, "CreateSnapshot", {"name": name, "source_volume_id": volume_id})
    assert made["code"] == "OK", made
    snapshot_id = made["response"]["snapshot"]["snapshot_id"]
    deadline = time.monotonic() + 120
    while True:
        listed = csi_call(nodes.site, csi, "ListSnapshots", {"snapshot_id": snapshot_id})
        entries = listed["response"].get("entries", [])
        if entries and entries[0]["snapshot"].get("ready_to_use"):
            return snapshot_id
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)


def restore_request(name: str, node: str, snapshot_id: str) -> dict:
    request = create_request(name, node)
    request["volume_content_source"] = {"snapshot": {"snapshot_id": snapshot_id}}
    return request


def b_directory(nodes: Nodes, volume_id: str) -> Path:
    return nodes.b_host.state_dir / "volumes" / local_id(volume_id, "consumer-b")


def snapshot_ids(nodes: Nodes, csi) -> list[str]:
    listed = csi_call(nodes.site, csi, "ListSnapshots", {})
    assert listed["code"] == "OK", listed
    return [e["snapshot"]["snapshot_id"] for e in listed["response"].get("entries", [])]


def test_a_volume_made_on_b_from_a_snapshot_on_a_equals_it_and_a_change_sends_only_itself(nodes, csi):
    site = nodes.site
    source_id, source = placed_volume(nodes, "src", "consumer-a")
    fill_varied(source)
    expected = describe_tree(source)
    s1 = snapshot_through_controller(nodes, csi, "s1", source_id)
    assert local_id(s1, "consumer-a")

    # CSI CreateVolume on the controller, B in its topology, A's snapshot its source.
    made = csi_call(site, csi, "CreateVolume", restore_request("copy", "consumer-b", s1))
    assert made["code"] == "OK", made
    volume = made["response"]["volume"]
    copy_id = volume["volume_id"]
    assert volume["accessible_topology"] == [{"segments": {NODE_KEY: "consumer-b"}}], volume
    assert volume["content_source"] == {"snapshot": {"snapshot_id": s1}}, volume
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, copy_id)))
    assert not lines, "expected the volume made on B to equal A's volume exactly:\n" + "\n".join(lines)
    (first,) = fetches(nodes.serve_b)
    assert first["snapshot"] == local_id(s1, "consumer-a"), first
    # commit, tree and the 8 distinct contents (the copy shares f4's blob; the hard link small's)
    assert first["objects_sent"] == 10 and first["objects_skipped"] == 0, first
    content_bytes = sum(p.stat().st_size for p in source.rglob("*") if p.is_file() and not p.is_symlink()
                        and p.name not in ("copy-of-f4.bin", "hardlink"))
    assert content_bytes <= first["bytes_sent"] < content_bytes + 8192, first

    # The same request again is the same volume, and nothing is fetched again.
    again = csi_call(site, csi, "CreateVolume", restore_request("copy", "consumer-b", s1))
    assert again["code"] == "OK" and again["response"]["volume"]["volume_id"] == copy_id, again
    assert len(fetches(nodes.serve_b)) == 1, fetches(nodes.serve_b)

    # B keeps the fetched snapshot as a snapshot of its own: listed under B's placed id, its
    # source volume still named on A.
    s1_on_b = f"n10.consumer-b.{local_id(s1, 'consumer-a')}"
    assert {s1, s1_on_b} <= set(snapshot_ids(nodes, csi))
    held = csi_call(site, csi, "ListSnapshots", {"snapshot_id": s1_on_b})["response"]["entries"][0]["snapshot"]
    assert held["source_volume_id"] == source_id, held

    # One small file changes on A: the CLI's --node/--from-snapshot form moves only that file's
    # blob, the tree and the commit.
    (source / "small.txt").write_text("small, changed\n")
    expected2 = describe_tree(source)
    s2 = snapshot_through_controller(nodes, csi, "s2", source_id)
    copy2 = site.alice.ok_json("volume", "create", "copy2", "--node", "consumer-b", "--from-snapshot", s2,
                               timeout=120)
    assert local_id(copy2["id"], "consumer-b"), copy2
    second = fetches(nodes.serve_b)[-1]
    assert second["snapshot"] == local_id(s2, "consumer-a"), second
    assert second["objects_sent"] == 3 and second["objects_skipped"] == 7, second
    assert second["bytes_sent"] < 8192, f"expected only the changed file, the tree and the commit to travel: {second}"
    lines = differences_across_hosts(expected2, describe_tree(b_directory(nodes, copy2["id"])))
    assert not lines, "expected the second volume on B to equal A's changed volume:\n" + "\n".join(lines)

    # The snapshots go on A (and B's copy of s1 on B): B's volumes stay as they were.
    for snapshot_id in (s1, s2, s1_on_b):
        assert csi_call(site, csi, "DeleteSnapshot", {"snapshot_id": snapshot_id})["code"] == "OK"
    assert s1_on_b not in snapshot_ids(nodes, csi) and s1 not in snapshot_ids(nodes, csi)
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, copy_id)))
    assert not lines, "expected B's volume intact after its source snapshot went:\n" + "\n".join(lines)
    lines = differences_across_hosts(expected2, describe_tree(b_directory(nodes, copy2["id"])))
    assert not lines, "\n".join(lines)


def clone_request(name: str, node: str, volume_id: str) -> dict:
    request = create_request(name, node)
    request["volume_content_source"] = {"volume": {"volume_id": volume_id}}
    return request


def test_a_clone_on_b_of_a_volume_on_a_goes_by_a_snapshot_that_is_removed_once_made(nodes, csi):
    site, a, b = nodes.site, nodes.a, nodes.b
    source_id, source = placed_volume(nodes, "src", "consumer-a")
    fill_varied(source)
    expected = describe_tree(source)

    # A down: the clone fails UNAVAILABLE naming it, and nothing is made on B.
    nodes.serve_a.send_signal(signal.SIGKILL)
    nodes.serve_a.wait(timeout=10)
    refused = csi_call(site, csi, "CreateVolume", clone_request("clone", "consumer-b", source_id))
    assert refused["code"] == "UNAVAILABLE" and 'node "consumer-a"' in refused["details"], refused
    assert b.ok_json("volume", "list") == [] and b.ok_json("snapshot", "list") == []
    nodes.restart_a()

    # CSI CreateVolume on the controller, B in its topology, a volume of A its source.
    made = csi_call(site, csi, "CreateVolume", clone_request("clone", "consumer-b", source_id))
    assert made["code"] == "OK", made
    volume = made["response"]["volume"]
    assert volume["content_source"] == {"volume": {"volume_id": source_id}}, volume
    assert volume["accessible_topology"] == [{"segments": {NODE_KEY: "consumer-b"}}], volume
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, volume["volume_id"])))
    assert not lines, "expected the clone on B to equal A's volume exactly:\n" + "\n".join(lines)
    (fetched,) = fetches(nodes.serve_b)
    assert fetched["objects_sent"] == 10, fetched
    # The snapshot it went by is gone again from both nodes.
    assert snapshot_ids(nodes, csi) == []
    assert a.ok_json("snapshot", "list") == [] and b.ok_json("snapshot", "list") == []

    # The same request again is the same volume; the same name from another source is not.
    again = csi_call(site, csi, "CreateVolume", clone_request("clone", "consumer-b", source_id))
    assert again["code"] == "OK" and again["response"]["volume"]["volume_id"] == volume["volume_id"], again
    other_id, _ = placed_volume(nodes, "other", "consumer-a")
    clash = csi_call(site, csi, "CreateVolume", clone_request("clone", "consumer-b", other_id))
    assert clash["code"] == "ALREADY_EXISTS" and source_id in clash["details"], clash
    assert snapshot_ids(nodes, csi) == []

    # The CLI's form, after a change on A: the clone has the change.
    (source / "small.txt").write_text("small, changed\n")
    clone2 = site.alice.ok_json("volume", "create", "clone2", "--node", "consumer-b", "--from-volume", source_id,
                                timeout=120)
    lines = differences_across_hosts(describe_tree(source), describe_tree(b_directory(nodes, clone2["id"])))
    assert not lines, "\n".join(lines)
    assert snapshot_ids(nodes, csi) == []


def test_a_second_clone_of_the_same_name_while_the_first_copies_is_turned_away_and_nothing_is_left(nodes, csi):
    site, b = nodes.site, nodes.b
    source_id, source = placed_volume(nodes, "big", "consumer-a")
    for i in range(16):
        (source / f"part{i:02}").write_bytes(os.urandom(8 * 2**20))
    create = ("volume", "create", "clone", "--node", "consumer-b", "--from-volume", source_id, "-o", "json")
    first = site.alice.start(*create, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while received(b) == 0:
        assert first.poll() is None, f"the clone ended before B received anything: {first.communicate()}"
        assert time.monotonic() < deadline, "nothing arrived on B"
        time.sleep(0.005)

    # A CO's retry while the first call copies: turned away before it touches the snapshot.
    second = csi_call(site, csi, "CreateVolume", clone_request("clone", "consumer-b", source_id))
    assert second["code"] == "ABORTED" and "being cloned onto node" in second["details"], second
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, (out, err)
    lines = differences_across_hosts(describe_tree(source), describe_tree(b_directory(nodes, json.loads(out)["id"])))
    assert not lines, "\n".join(lines)
    assert snapshot_ids(nodes, csi) == [], "expected the clone's snapshot gone from both nodes"


def test_a_create_on_b_whose_source_node_dies_fails_unavailable_and_a_retry_resumes(nodes):
    site, b = nodes.site, nodes.b
    source_id, source = placed_volume(nodes, "big", "consumer-a")
    count, size = 32, 8 * 2**20
    for i in range(count):
        (source / f"part{i:02}").write_bytes(os.urandom(size))
    total = count * size
    snapshot = a_snapshot_id(nodes, "big", "big-1")
    before = blobs(b)
    create = ("volume", "create", "big-copy", "--node", "consumer-b", "--from-snapshot", snapshot, "-o", "json")

    started = site.alice.start(*create, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Three blobs verified, however far the blob on its way in each of the (two) lanes has come.
    kill_a_once_b_received(nodes, b, started, 5 * size, "create")
    out, err = started.communicate(timeout=120)
    assert started.returncode == EXIT_UNAVAILABLE and 'node "consumer-a"' in err, (started.returncode, out, err)
    arrived = blobs(b) - before
    assert 3 <= len(arrived) < count, arrived
    assert b.ok_json("snapshot", "list") == [], "expected no snapshot on B before it is whole"
    assert b.ok_json("volume", "list") == [], "expected no volume on B"

    nodes.restart_a()
    made = site.alice.ok_json(*create[:-2], timeout=300)
    assert local_id(made["id"], "consumer-b"), made
    resumed = fetches(nodes.serve_b)[-1]
    assert resumed["objects_skipped"] >= len(arrived) + 1, resumed  # the blobs and the tree kept
    assert resumed["bytes_sent"] <= total - len(arrived) * size + 4096, resumed
    lines = differences_across_hosts(describe_tree(source), describe_tree(b_directory(nodes, made["id"])))
    assert not lines, "\n".join(lines)
    # Again: the same volume, nothing fetched.
    assert site.alice.ok_json(*create[:-2], timeout=300)["id"] == made["id"]


def test_b_restores_from_its_own_copy_of_a_snapshot_of_a_without_asking_a(nodes, csi):
    site = nodes.site
    source_id, source = placed_volume(nodes, "src", "consumer-a")
    fill_varied(source)
    expected = describe_tree(source)
    s1 = snapshot_through_controller(nodes, csi, "s1", source_id)
    made = csi_call(site, csi, "CreateVolume", restore_request("copy", "consumer-b", s1))
    assert made["code"] == "OK", made
    assert len(fetches(nodes.serve_b)) == 1, fetches(nodes.serve_b)

    # A is gone; B holds s1 whole (the first create fetched it): another volume from A's id
    # restores from B's copy, without asking A.
    nodes.serve_a.send_signal(signal.SIGKILL)
    nodes.serve_a.wait(timeout=10)
    again = csi_call(site, csi, "CreateVolume", restore_request("copy-2", "consumer-b", s1))
    assert again["code"] == "OK", again
    volume = again["response"]["volume"]
    assert volume["content_source"] == {"snapshot": {"snapshot_id": s1}}, volume
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, volume["volume_id"])))
    assert not lines, "expected the volume from B's copy to equal A's volume exactly:\n" + "\n".join(lines)
    assert len(fetches(nodes.serve_b)) == 1, "expected nothing fetched the second time"
    assert f'snapshot {local_id(s1, "consumer-a")} of node "consumer-a" is held whole on this node' in (
        nodes.serve_b.output())
    # The CLI's form too.
    made3 = site.alice.ok_json("volume", "create", "copy-3", "--node", "consumer-b", "--from-snapshot", s1,
                               timeout=120)
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, made3["id"])))
    assert not lines, "\n".join(lines)

    # A snapshot of A that B does not hold still needs A: UNAVAILABLE naming A, nothing made on B.
    nodes.restart_a()
    s2 = snapshot_through_controller(nodes, csi, "s2", source_id)
    nodes.serve_a.send_signal(signal.SIGKILL)
    nodes.serve_a.wait(timeout=10)
    refused = csi_call(site, csi, "CreateVolume", restore_request("copy-4", "consumer-b", s2))
    assert refused["code"] == "UNAVAILABLE" and 'node "consumer-a"' in refused["details"], refused
    assert "copy-4" not in {v["name"] for v in nodes.b.ok_json("volume", "list")}


def test_a_volume_made_on_b_from_a_snapshot_held_by_the_controller_host_fetches_it_from_there(nodes, csi):
    site = nodes.site
    # A volume and its snapshot on the controller host itself: ids that name no node.
    made = csi_call(site, csi, "CreateVolume", create_request("on-controller"))
    assert made["code"] == "OK", made
    source_id = made["response"]["volume"]["volume_id"]
    assert not source_id.startswith("n"), source_id
    source = site.controller.state_dir / "volumes" / source_id
    source.mkdir(exist_ok=True)
    fill_varied(source)
    expected = describe_tree(source)
    snapshot = snapshot_through_controller(nodes, csi, "ctl-s1", source_id)
    assert snapshot.startswith("snap-"), snapshot

    # B fetches it from the controller host as from any node, then restores it.
    copy = csi_call(site, csi, "CreateVolume", restore_request("copy", "consumer-b", snapshot))
    assert copy["code"] == "OK", copy
    volume = copy["response"]["volume"]
    assert volume["content_source"] == {"snapshot": {"snapshot_id": snapshot}}, volume
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, volume["volume_id"])))
    assert not lines, "expected the volume made on B to equal the controller's exactly:\n" + "\n".join(lines)
    assert f'snapshot {snapshot} fetched from node "controller" for a restore' in nodes.serve_b.output()
    # The same request again: the same volume, nothing fetched.
    again = csi_call(site, csi, "CreateVolume", restore_request("copy", "consumer-b", snapshot))
    assert again["code"] == "OK" and again["response"]["volume"]["volume_id"] == volume["volume_id"], again
    # The CLI's form, by the snapshot's name on the controller host: B holds it now, nothing travels.
    by_name = site.alice.ok_json("volume", "create", "copy-cli", "--node", "consumer-b", "--from-snapshot", "ctl-s1",
                                 timeout=120)
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, by_name["id"])))
    assert not lines, "\n".join(lines)
    assert nodes.serve_b.output().count(f'snapshot {snapshot} fetched from node "controller"') == 1

    # A snapshot the controller host does not hold: NOT_FOUND naming it and the controller host.
    missing = csi_call(site, csi, "CreateVolume", restore_request("copy-2", "consumer-b", "snap-" + "0" * 24))
    assert missing["code"] == "NOT_FOUND" and "snap-" + "0" * 24 in missing["details"], missing
    assert 'node "controller"' in missing["details"], missing

    # A clone on B of the controller host's volume: by a snapshot taken there, removed afterwards.
    before = set(snapshot_ids(nodes, csi))
    clone = csi_call(site, csi, "CreateVolume", clone_request("clone", "consumer-b", source_id))
    assert clone["code"] == "OK", clone
    volume = clone["response"]["volume"]
    assert volume["content_source"] == {"volume": {"volume_id": source_id}}, volume
    lines = differences_across_hosts(expected, describe_tree(b_directory(nodes, volume["volume_id"])))
    assert not lines, "expected the clone on B to equal the controller's volume exactly:\n" + "\n".join(lines)
    assert set(snapshot_ids(nodes, csi)) == before


def test_a_volume_placed_on_the_controller_host_from_a_snapshot_of_a_is_fetched_by_the_controller(nodes, csi):
    site = nodes.site
    source_id, source = placed_volume(nodes, "src", "consumer-a")
    fill_varied(source)
    expected = describe_tree(source)
    s1 = snapshot_through_controller(nodes, csi, "s1", source_id)

    # The controller host's own node id in the topology: the controller pulls s1 from A itself,
    # dialling A with its own certificate, then restores it locally.
    made = csi_call(site, csi, "CreateVolume", restore_request("copy", "controller", s1))
    assert made["code"] == "OK", made
    volume = made["response"]["volume"]
    assert not volume["volume_id"].startswith("n"), volume  # the controller host's own
    assert volume["content_source"] == {"snapshot": {"snapshot_id": s1}}, volume
    copy = site.controller.state_dir / "volumes" / volume["volume_id"]
    lines = differences_across_hosts(expected, describe_tree(copy))
    assert not lines, "expected the volume on the controller host to equal A's exactly:\n" + "\n".join(lines)
    assert f'snapshot {local_id(s1, "consumer-a")} fetched from node "consumer-a" for a restore' in site.serve_log()
    fetched = fetch_lines(nodes.serve_a)
    assert fetched and all("peer=controller:" in line for line in fetched), fetched

    # A clone on the controller host of A's volume: by a snapshot taken on A, removed afterwards.
    before = set(snapshot_ids(nodes, csi))
    clone = csi_call(site, csi, "CreateVolume", clone_request("clone", "controller", source_id))
    assert clone["code"] == "OK", clone
    volume = clone["response"]["volume"]
    assert volume["content_source"] == {"volume": {"volume_id": source_id}}, volume
    lines = differences_across_hosts(expected, describe_tree(site.controller.state_dir / "volumes" / volume["volume_id"]))
    assert not lines, "expected the clone on the controller host to equal A's volume:\n" + "\n".join(lines)
    assert set(snapshot_ids(nodes, csi)) == before

    # A snapshot A does not have: NOT_FOUND naming it and A.
    missing = csi_call(site, csi, "CreateVolume",
                       restore_request("copy-2", "controller", "n10.consumer-a.snap-" + "0" * 24))
    assert missing["code"] == "NOT_FOUND" and 'node "consumer-a"' in missing["details"], missing
    # A down: UNAVAILABLE naming A.
    nodes.serve_a.send_signal(signal.SIGKILL)
    nodes.serve_a.wait(timeout=10)
    s2_local = nodes.a.ok_json("snapshot", "commit", "src", "--name", "s2")["id"]
    down = csi_call(site, csi, "CreateVolume", restore_request("copy-3", "controller", f"n10.consumer-a.{s2_local}"))
    assert down["code"] == "UNAVAILABLE" and 'node "consumer-a"' in down["details"], down


def a_snapshot_id(nodes: Nodes, volume: str, name: str) -> str:
    """A snapshot taken on A by A's own CLI, as the controller names it (A's placed id)."""
    taken = nodes.a.ok_json("snapshot", "commit", volume, "--name", name)
    return f"n10.consumer-a.{taken['id']}"


def test_a_corrupt_object_fails_the_create_on_b_with_data_loss_and_leaves_nothing_there(nodes, csi):
    a, b = nodes.a, nodes.b
    _, source = placed_volume(nodes, "src", "consumer-a")
    (source / "good").write_bytes(b"fine" * 1000)
    (source / "victim").write_bytes(bytes(range(256)) * 4000)
    snapshot = a_snapshot_id(nodes, "src", "s1")
    (victim,) = {p for p in blobs(a) if blob_path(a, p).read_bytes() != b"fine" * 1000}
    flip_byte(a, victim, 123456)

    refused = csi_call(nodes.site, csi, "CreateVolume", restore_request("copy", "consumer-b", snapshot))
    assert refused["code"] == "DATA_LOSS", refused
    assert f"blob {victim}" in refused["details"] and 'node "consumer-a"' in refused["details"], refused
    assert victim not in blobs(b), "expected the corrupt blob never stored on B"
    assert b.ok_json("snapshot", "list") == [] and b.ok_json("volume", "list") == [], "expected nothing on B"


def test_one_corrupt_blob_among_many_in_flight_is_refused_and_nothing_becomes_visible(nodes):
    a, b = nodes.a, nodes.b
    a.create("src")
    source = nodes.volume_dir(a, "src")
    for i in range(24):
        (source / f"f{i:02}").write_bytes(os.urandom(700_000 + i * 1000))
    a.ok_json("snapshot", "commit", "src", "--name", "s1")
    victim = sorted(blobs(a))[11]
    flip_byte(a, victim, blob_path(a, victim).stat().st_size // 2, 0x80)

    refused = nodes.push("s1")
    assert refused.rc == EXIT_FAILED and f"blob {victim}" in refused.stderr and "corrupt" in refused.stderr, (
        refused.describe())
    assert victim not in blobs(b), "expected the corrupt blob never stored on B"
    assert not list((b.state_dir / "store" / "incoming").glob(f"{victim}*")), "nor kept for a resume"
    assert b.ok_json("snapshot", "list") == [], "expected no snapshot on B"
    assert not list((b.state_dir / "store" / "commits").iterdir()), "expected no commit on B"
    # What did arrive whole is kept (a retry after the source is repaired skips it); unnamed.
    assert blobs(b) < blobs(a), blobs(b)


def test_parts_of_transfers_abandoned_long_ago_are_collected_but_never_while_a_transfer_works(nodes):
    b = nodes.b
    commit_small(nodes, "one", "s1")
    commit_small(nodes, "two", "s2")
    incoming = b.state_dir / "store" / "incoming"
    incoming.mkdir(parents=True, exist_ok=True)
    old, fresh = incoming / f"{'ab' * 32}.part", incoming / f"{'cd' * 32}.part"
    old.write_bytes(b"o" * 4096)
    fresh.write_bytes(b"f" * 4096)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))

    # Another receiver is at work in the staging area (it holds the staging lock shared): the
    # pull collects nothing, as the old part may be the one that receiver is about to resume.
    held = os.open(incoming, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_SH)
        assert nodes.push("s1").rc == 0
        assert old.exists() and fresh.exists()
    finally:
        os.close(held)

    # Alone, the next pull removes the old part and keeps the recent one (an interrupted
    # transfer's, which a retry resumes).
    assert nodes.push("s2").rc == 0
    assert not old.exists(), "expected the part abandoned two days ago removed"
    assert fresh.exists(), "expected a recent part kept for a resume"
    assert f"{'ab' * 32}.part (4096 bytes): part of a transfer abandoned" in nodes.serve_b.output()
