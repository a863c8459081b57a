"""Snapshots moved between nodes by content address (issue 22, items 3 and 4): a controller and two
nodes, each its own network namespace, state directory and mTLS certificate (controller_site.py).
Node B pulls a snapshot taken on node A through the controller's proxy, fetching only the objects
it lacks, each verified on arrival; a restore on B equals the source in every byte and attribute.
A source killed mid-transfer fails the pull UNAVAILABLE and a retry resumes; a flipped byte in an
object on A is refused on B (DATA_LOSS naming it) and never stored there.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from controller_site import EXIT_PERMISSION, EXIT_UNAVAILABLE, Site, build_site
from host_lab import Host, HostProcess, HostRosetctl
from rosetctl_cli import binary_path
from snapshot_trees import describe_tree, differences, set_mtime

EXIT_FAILED = 1
NODE_PORT = 9444


def start_node(site: Site, host: Host, env: dict) -> HostProcess:
    """HOST's `serve --role node --listen --controller`, registered (by its heartbeat) with its address."""
    serve = host.start([binary_path(), "serve", "--role", "node", "--listen", f"{host.address}:{NODE_PORT}",
                        "--endpoint", f"unix://{host.dir}/csi.sock", "--state-dir", host.state_dir,
                        "--grace-period", "2"], env=env)
    deadline = time.monotonic() + 20
    while True:
        nodes = {n["node_id"]: n for n in site.ctl.ok_json("node", "list")}
        if nodes.get(host.name, {}).get("address") == f"{host.address}:{NODE_PORT}":
            return serve
        assert time.monotonic() < deadline and serve.poll() is None, (nodes, serve.output())
        time.sleep(0.2)


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


def blob_path(cli: HostRosetctl, blob: str) -> Path:
    return cli.state_dir / "store" / "blobs" / blob[:2] / blob


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
    lines = differences(expected, describe_tree(nodes.volume_dir(b, "copy")))
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
    # B's own CLI (its node certificate, --controller) pulls into B's store this time.
    pulled = nodes.site.b.ok_json("snapshot", "pull", "s2", "--from-node", "consumer-a")
    assert pulled["objects_sent"] == 3 and pulled["objects_skipped"] == 7, pulled
    assert pulled["bytes_sent"] < 8192, f"expected only the changed file, the tree and the commit to travel: {pulled}"
    b.ok("snapshot", "restore", "s2", "--name", "copy2")
    lines = differences(expected, describe_tree(nodes.volume_dir(b, "copy2")))
    assert not lines, "expected the second restore on B to equal A's volume:\n" + "\n".join(lines)


def test_a_node_may_read_other_nodes_but_never_write_into_them(nodes):
    nodes.a.create("src")
    (nodes.volume_dir(nodes.a, "src") / "f").write_text("x")
    nodes.a.ok("snapshot", "commit", "src", "--name", "s1")
    # consumer-a's certificate may not have B pull (PullSnapshot writes into B's store)...
    refused = nodes.site.a.run("snapshot", "push", "s1", "--to-node", "consumer-b")
    assert refused.rc == EXIT_PERMISSION and 'node certificate "consumer-a"' in refused.stderr, refused.describe()
    assert nodes.b.ok_json("snapshot", "list") == []
    # ...while B itself may read A's store to pull into its own.
    assert nodes.site.b.ok_json("snapshot", "pull", "s1", "--from-node", "consumer-a")["objects_sent"] == 3


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
    deadline = time.monotonic() + 120
    while received(b) <= 4 * size:  # four blobs verified and a fifth on its way
        assert pull.poll() is None, f"the pull ended before A was killed: {pull.communicate()}"
        assert time.monotonic() < deadline, "no blob arrived on B"
        time.sleep(0.005)
    nodes.serve_a.send_signal(signal.SIGKILL)
    nodes.serve_a.wait(timeout=10)
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
    lines = differences(describe_tree(source), describe_tree(nodes.volume_dir(b, "big-copy")))
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
    path = blob_path(a, victim)
    data = bytearray(path.read_bytes())
    data[123456] ^= 0x01
    os.chmod(path, 0o644)
    path.write_bytes(bytes(data))

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
