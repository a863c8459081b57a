"""`local` volumes on many nodes (issue 22 items 1 and 2): the controller places a volume on the
node its topology names (CSI CreateVolume with accessibility_requirements, `volume create --node`),
that node's own `serve --role node` makes it with the same CSI Controller call, the placed id
routes every later call to it, and ListVolumes/ListSnapshots/`volume list` on the controller
combine this host's and every node's answers.

Three lab hosts, each with its own state directory: the controller (controller_site.py) and its
two consumers as node A (consumer-a) and node B (consumer-b), each running `serve --role node
--listen` registered with the controller by its heartbeat.
"""
from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from controller_site import GRPC_CALL, Site, build_site
from host_lab import Host, HostProcess
from rosetctl_cli import binary_path

NODE_KEY = "topology.rosetctl.io/node"
NODE_PORT = 9444


@pytest.fixture
def site(host_lab, rosetctl_binary) -> Site:
    built = build_site(host_lab)
    yield built
    built.assert_no_secrets_printed()


def start_node(site: Site, host: Host, cli) -> HostProcess:
    """HOST's `serve --role node --listen`, once the controller lists it with its address."""
    serve = host.start([binary_path(), "serve", "--role", "node", "--listen", f"{host.address}:{NODE_PORT}",
                        "--endpoint", f"unix://{host.dir}/csi.sock", "--state-dir", host.state_dir,
                        "--grace-period", "2"], env=cli.env)
    site.wait_until_registered(host.name, f"{host.address}:{NODE_PORT}", serve)
    return serve


def csi_call(site: Site, csi, method: str, request: dict, target: str | None = None,
             identity: str = "alice") -> dict:
    """One CSI Controller call as `identity` (alice: an admin) to the controller (or `target`)."""
    cert, key, ca = site.identity(identity)
    spec = {"stubs": str(Path(csi.pb2.__file__).parent), "proto": "csi", "service": "Controller",
            "method": method, "request": request, "target": target or site.address, "security": "mtls",
            "cert": str(cert), "key": str(key), "ca": str(ca), "metadata": []}
    done = site.consumer_a.run([sys.executable, "-c", GRPC_CALL, json.dumps(spec)], timeout=60)
    site.printed += [done.stdout, done.stderr]
    assert done.rc == 0, done.describe()
    return json.loads(done.stdout)


def create_request(name: str, node: str | None = None) -> dict:
    request = {"name": name, "volume_capabilities": [
        {"mount": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}]}
    if node is not None:
        request["accessibility_requirements"] = {"preferred": [{"segments": {NODE_KEY: node}}]}
    return request


def local_id(placed: str, node: str) -> str:
    prefix = f"n{len(node)}.{node}."
    assert placed.startswith(prefix), f"expected an id naming node {node}: {placed}"
    return placed[len(prefix):]


def stored_volumes(host: Host) -> set[str]:
    """The volume ids in HOST's own state database: where a volume lives."""
    with sqlite3.connect(f"file:{host.state_dir / 'state.db'}?mode=ro", uri=True) as db:
        return {row[0] for row in db.execute("SELECT id FROM volumes")}


def stored_snapshots(host: Host) -> set[str]:
    """The snapshot ids in HOST's own state database."""
    with sqlite3.connect(f"file:{host.state_dir / 'state.db'}?mode=ro", uri=True) as db:
        return {row[0] for row in db.execute("SELECT id FROM snapshots")}


def own_image_filesystem(host: Host) -> Path:
    """Gives HOST's image directory (whose free space GetCapacity answers) a small filesystem of
    its own: the lab's hosts share one filesystem, so any host's answer would match any other's."""
    images = host.state_dir / "images"
    images.mkdir(parents=True, mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m,mode=0700", "rosetctl-capacity", str(images)],
                   check=True)
    return images


def free_bytes(path: Path) -> int:
    fs = os.statvfs(path)
    return fs.f_bavail * fs.f_frsize


def walk_volumes(site: Site, csi) -> list[str]:
    """Every volume id of the controller's ListVolumes, one entry per page."""
    ids, token = [], ""
    for _ in range(20):
        answer = csi_call(site, csi, "ListVolumes", {"max_entries": 1, "starting_token": token})
        assert answer["code"] == "OK", answer
        entries = answer["response"].get("entries", [])
        assert len(entries) <= 1, answer
        ids += [e["volume"]["volume_id"] for e in entries]
        token = answer["response"].get("next_token", "")
        if not token:
            return ids
    raise AssertionError(f"the listing never ended: {ids}")


def test_volumes_are_placed_on_nodes_routed_by_id_and_listed_as_one(site, csi):
    images_a = own_image_filesystem(site.consumer_a)
    serve_a = start_node(site, site.consumer_a, site.a)
    serve_b = start_node(site, site.consumer_b, site.b)

    # CSI CreateVolume with node A in its topology: A's serve makes it, in A's state directory.
    made = csi_call(site, csi, "CreateVolume", create_request("on-a", "consumer-a"))
    assert made["code"] == "OK", made
    volume = made["response"]["volume"]
    id_a = volume["volume_id"]
    on_a = local_id(id_a, "consumer-a")
    assert volume["accessible_topology"] == [{"segments": {NODE_KEY: "consumer-a"}}], volume
    assert on_a in stored_volumes(site.consumer_a)
    assert on_a not in stored_volumes(site.controller) and on_a not in stored_volumes(site.consumer_b)
    assert re.search(r'CreateVolume name="on-a" peer=controller:\S+ .*status=OK', serve_a.output()), serve_a.output()
    # The same request again is the same volume (node A's own idempotency by name).
    again = csi_call(site, csi, "CreateVolume", create_request("on-a", "consumer-a"))
    assert again["code"] == "OK" and again["response"]["volume"]["volume_id"] == id_a, again

    # The CLI's --node does the same; a volume without a node stays on the controller host.
    id_b = site.alice.ok_json("volume", "create", "on-b", "--node", "consumer-b")["id"]
    assert local_id(id_b, "consumer-b") in stored_volumes(site.consumer_b)
    id_here = site.alice.ok_json("volume", "create", "here")["id"]
    assert id_here in stored_volumes(site.controller)

    # One list, walked one entry per page: this host's volume, then A's, then B's.
    assert walk_volumes(site, csi) == [id_here, id_a, id_b]
    assert {v["id"] for v in site.alice.volumes()} == {id_here, id_a, id_b}

    # Connected on A by its placed id: node A's CLI, its own Node service, A's files.
    target = site.consumer_a.dir / "on-a"
    site.a.ok("volume", "connect", id_a, "--target", target)
    (target / "hello").write_text("from a\n")
    assert [p.name for p in (site.consumer_a.state_dir / "volumes" / on_a).rglob("hello")] == ["hello"]
    site.a.ok("volume", "disconnect", id_a)

    # A snapshot of A's volume is taken on A and named by A's placed id; listed and deleted there.
    snap = csi_call(site, csi, "CreateSnapshot", {"name": "snap-a", "source_volume_id": id_a})
    assert snap["code"] == "OK", snap
    snap_id = snap["response"]["snapshot"]["snapshot_id"]
    assert local_id(snap_id, "consumer-a") and snap["response"]["snapshot"]["source_volume_id"] == id_a
    listed = csi_call(site, csi, "ListSnapshots", {"source_volume_id": id_a})
    assert [e["snapshot"]["snapshot_id"] for e in listed["response"]["entries"]] == [snap_id], listed
    everything = csi_call(site, csi, "ListSnapshots", {})
    assert snap_id in [e["snapshot"]["snapshot_id"] for e in everything["response"]["entries"]], everything
    # Deleted on A: A's serve answered it and A's database no longer has it (the controller
    # answers OK for an id it does not know, so OK alone proves nothing).
    on_a_snap = local_id(snap_id, "consumer-a")
    assert on_a_snap in stored_snapshots(site.consumer_a)
    assert csi_call(site, csi, "DeleteSnapshot", {"snapshot_id": snap_id})["code"] == "OK"
    assert on_a_snap not in stored_snapshots(site.consumer_a), "expected the snapshot deleted on node A"
    assert re.search(rf'DeleteSnapshot snapshot_id="{on_a_snap}" peer=controller:\S+ .*status=OK',
                     serve_a.output()), serve_a.output()

    # GetCapacity for A's topology is A's answer: the free space of A's own image filesystem,
    # which no other host has (the controller's own answer is its disk's).
    capacity = csi_call(site, csi, "GetCapacity", {"accessible_topology": {"segments": {NODE_KEY: "consumer-a"}}})
    assert capacity["code"] == "OK", capacity
    answered, on_a_fs = int(capacity["response"]["available_capacity"]), free_bytes(images_a)
    assert answered == on_a_fs, f"expected A's free space {on_a_fs} (its own filesystem), got {answered}"
    here = csi_call(site, csi, "GetCapacity", {})
    assert here["code"] == "OK" and int(here["response"]["available_capacity"]) != on_a_fs, here

    # Delete is routed to A.
    assert csi_call(site, csi, "DeleteVolume", {"volume_id": id_a})["code"] == "OK"
    assert on_a not in stored_volumes(site.consumer_a)
    assert not (site.consumer_a.state_dir / "volumes" / on_a).exists()

    # B goes down: CSI's ListVolumes fails naming it (a CO must not take B's volumes for gone);
    # the CLI lists the rest and says which node is missing.
    serve_b.send_signal(signal.SIGKILL)
    serve_b.wait(timeout=10)
    failed = csi_call(site, csi, "ListVolumes", {})
    assert failed["code"] == "UNAVAILABLE" and 'node "consumer-b"' in failed["details"], failed
    listed = site.alice.ok("volume", "list", "-o", "json")
    assert [v["id"] for v in json.loads(listed.stdout)] == [id_here], listed.describe()
    assert 'node "consumer-b" did not answer' in listed.stderr, listed.describe()
    down = csi_call(site, csi, "CreateVolume", create_request("on-b-2", "consumer-b"))
    assert down["code"] == "UNAVAILABLE" and 'node "consumer-b"' in down["details"], down
    site.alice.ok("volume", "delete", id_here)


def test_unknown_nodes_and_who_may_call_a_node(site, csi):
    start_node(site, site.consumer_a, site.a)
    # A node that is not registered: RESOURCE_EXHAUSTED for a create (the spec's "cannot
    # provision in accessible_topology"); a placed id naming it cannot be found or reached.
    unknown = csi_call(site, csi, "CreateVolume", create_request("lost", "nobody"))
    assert unknown["code"] == "RESOURCE_EXHAUSTED" and 'node "nobody"' in unknown["details"], unknown
    cli = site.alice.run("volume", "create", "lost", "--node", "nobody")
    assert cli.rc != 0 and 'node "nobody" is not registered' in cli.stderr, cli.describe()
    ghost = "n6.nobody.local-0123456789abcdef"
    got = csi_call(site, csi, "ControllerGetVolume", {"volume_id": ghost})
    assert got["code"] == "NOT_FOUND" and 'node "nobody"' in got["details"], got
    deleted = csi_call(site, csi, "DeleteVolume", {"volume_id": ghost})
    assert deleted["code"] == "UNAVAILABLE" and 'node "nobody"' in deleted["details"], deleted

    # Only the controller's certificate makes Controller calls on a node; an admin's is refused.
    direct = csi_call(site, csi, "CreateVolume", create_request("direct"),
                      target=f"{site.consumer_a.address}:{NODE_PORT}")
    assert direct["code"] == "PERMISSION_DENIED" and "consumer-a" in direct["details"], direct
    assert stored_volumes(site.consumer_a) == set()
