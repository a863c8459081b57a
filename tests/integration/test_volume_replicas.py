"""Replicas (issue 38, item 3): `rosetctl volume replicate VOL --to-node B --every N`. A controller
and two nodes, each its own network namespace, state directory and mTLS certificate
(controller_site.py). alice, an admin through the controller, keeps the latest snapshot of a
directory volume placed on node A on node B; the controller's replica loop takes each round (a
snapshot on A, B pulls only what it lacks) and removes the previous round's snapshot from both
nodes. A round while B is down fails, is shown by `volume show` and changes nothing; the next one
succeeds. Then A is lost for good (its serve killed, its state directory removed) and the volume
is restored on B from the last replica, byte-equal to A's data at that round. Bad settings are
refused and change nothing; a node's certificate may not set one.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest

from controller_site import build_site, copy_identity, tls_ok
from rosetctl_cli import EXIT_NOT_FOUND, EXIT_PRECONDITION, EXIT_USAGE, EXIT_UNIMPLEMENTED
from snapshot_trees import describe_tree
from test_placement import local_id
from test_readme_json import json_specs
from test_snapshot_streaming import Nodes, differences_across_hosts, fill_varied, placed_volume, start_node

MiB = 2**20
EXIT_BUSY = 6  # ABORTED, UNAVAILABLE (cli/exit_codes.h)
EXIT_DENIED = 7  # PERMISSION_DENIED


@pytest.fixture
def nodes(host_lab, rosetctl_binary) -> Nodes:
    site = build_site(host_lab)
    yield Nodes(site)
    site.assert_no_secrets_printed()


def replica_snapshots(nodes: Nodes) -> list[tuple[str, str]]:
    """(node, snapshot id) of every replica snapshot listed anywhere."""
    listed = nodes.site.alice.ok_json("snapshot", "list")
    return sorted((s["node"], s["id"]) for s in listed if s["name"].startswith("replica-"))


def wait_until_listed(nodes: Nodes, timeout: float = 30) -> None:
    """Until the controller reaches every node again (a restarted node's channel reconnects)."""
    deadline = time.monotonic() + timeout
    while (listed := nodes.site.alice.run("snapshot", "list")).rc != 0:
        assert time.monotonic() < deadline, listed.describe()
        time.sleep(0.5)


def replica_of(nodes: Nodes, volume: str):
    shown = nodes.site.alice.ok_json("volume", "show", volume)
    json_specs()["volume"].check("volume show", shown)
    return shown["replica"]


def test_a_replica_follows_the_changes_and_restores_on_b_once_a_is_gone(nodes):
    site, alice = nodes.site, nodes.site.alice
    volume_id, source = placed_volume(nodes, "precious", "consumer-a")
    fill_varied(source)
    (source / "big.bin").write_bytes(os.urandom(8 * MiB))

    # The first round, at once: everything travels to B.
    first = alice.ok_json("volume", "replicate", "precious", "--to-node", "consumer-b", "--every", "1h",
                          "--now", timeout=300)
    json_specs()["volume replicate"].check("volume replicate", first)
    replica = first["replica"]
    assert first["volume_id"] == volume_id and replica["to_node"] == "consumer-b", first
    assert replica["every"] == "1h" and replica["every_seconds"] == 3600 and replica["rounds"] == 1, first
    assert replica["last_bytes_sent"] > 8 * MiB, first
    assert local_id(replica["snapshot_id"], "consumer-b"), first
    shown = replica_of(nodes, "precious")
    assert shown["snapshot_id"] == replica["snapshot_id"] and shown["last_success"] is not None, shown
    assert shown["last_error"] == "" and shown["last_error_at"] is None, shown
    text = alice.ok("volume", "show", "precious").stdout
    assert f'on node "consumer-b" every 1h; last {shown["last_success"]}: {replica["snapshot_id"]}' in text, text
    assert len(replica_snapshots(nodes)) == 2, "expected the round's snapshot on A and its copy on B"

    # A one-file change: the next round sends that, not the volume again; the previous round's
    # snapshot is gone from both nodes once the new one is on B.
    (source / "changed.txt").write_text("written after the first round\n")
    second = alice.ok_json("volume", "replicate", "precious", "--now", timeout=300)["replica"]
    assert second["rounds"] == 2 and second["snapshot_id"] != replica["snapshot_id"], second
    assert 0 < second["last_bytes_sent"] < 1 * MiB, f"expected only the change to travel: {second}"
    listed = replica_snapshots(nodes)
    assert [node for node, _ in listed] == ["consumer-a", "consumer-b"], listed
    assert second["snapshot_id"] in [id for _, id in listed], listed
    assert replica["snapshot_id"] not in [id for _, id in listed], listed

    # B down: the round fails, says why, is shown by volume show, and leaves nothing behind; the
    # last good replica stays the one recorded.
    nodes.serve_b.send_signal(signal.SIGKILL)
    nodes.serve_b.wait(timeout=10)
    failed = alice.run("volume", "replicate", "precious", "--now", timeout=300)
    assert failed.rc == EXIT_BUSY and "the replica round failed" in failed.stderr, failed.describe()
    shown = replica_of(nodes, "precious")
    assert shown["last_error"] and shown["last_error_at"] is not None, shown
    assert shown["snapshot_id"] == second["snapshot_id"] and shown["rounds"] == 2, shown
    assert "; last error " in alice.ok("volume", "show", "precious").stdout
    assert "replica: volume" in site.serve_log(), "expected the failed round in the controller's log"
    nodes.serve_b = start_node(site, nodes.b_host, site.b.env)
    wait_until_listed(nodes)
    assert [id for _, id in replica_snapshots(nodes)].count(second["snapshot_id"]) == 1
    assert len(replica_snapshots(nodes)) == 2, "expected the failed round's snapshot removed from A"

    # One more change, replicated: this is what a restore must give back.
    (source / "dir" / "f0.bin").write_bytes(b"changed again")
    os.remove(source / "empty")
    third = alice.ok_json("volume", "replicate", "precious", "--now", timeout=300)["replica"]
    assert third["rounds"] == 3 and third["last_bytes_sent"] < 1 * MiB, third
    expected = describe_tree(source)
    # Written after the last round: lost with A, as a replica every N loses at most N.
    (source / "lost.txt").write_text("after the last round\n")

    # A is lost for good: its serve and its state directory are gone.
    nodes.serve_a.send_signal(signal.SIGKILL)
    nodes.serve_a.wait(timeout=10)
    shutil.rmtree(nodes.a_host.state_dir)
    restored = alice.ok_json("volume", "create", "restored", "--from-snapshot", third["snapshot_id"],
                             "--node", "consumer-b", timeout=300)
    assert local_id(restored["id"], "consumer-b"), restored
    on_b = nodes.b_host.state_dir / "volumes" / local_id(restored["id"], "consumer-b")
    lines = differences_across_hosts(expected, describe_tree(on_b))
    assert not lines, "expected the restore on B to equal A's data at the last round:\n" + "\n".join(lines)
    assert not (on_b / "lost.txt").exists()
    # It works on B.
    target = nodes.b_host.dir / "restored"
    site.b.ok("volume", "connect", "restored", "--target", target)
    assert (target / "changed.txt").read_text() == "written after the first round\n"
    site.b.ok("volume", "disconnect", "restored")


def test_the_loop_runs_rounds_by_itself_and_off_keeps_the_last_replica(nodes):
    alice = nodes.site.alice
    volume_id, source = placed_volume(nodes, "ticking", "consumer-a")
    (source / "data").write_text("round one\n")
    alice.ok_json("volume", "replicate", "ticking", "--to-node", "consumer-b", "--every", "2s")
    deadline = time.monotonic() + 120
    while (replica_of(nodes, "ticking") or {}).get("rounds", 0) < 3:
        assert time.monotonic() < deadline, replica_of(nodes, "ticking")
        time.sleep(0.5)
    # Each round replaced the one before: one snapshot on each node (the one of a round in
    # progress aside).
    off = alice.ok_json("volume", "replicate", "ticking", "--off")
    assert off["replica"] is None and replica_of(nodes, "ticking") is None, off
    time.sleep(3)  # a round in progress ends; no other starts
    kept = replica_snapshots(nodes)
    assert [node for node, _ in kept] == ["consumer-a", "consumer-b"], kept
    time.sleep(3)
    assert replica_snapshots(nodes) == kept, "expected no round after --off"

    # On again, then the volume deleted: its setting goes at the next round; the last replica
    # stays on B, which is what it was kept for.
    again = alice.ok_json("volume", "replicate", "ticking", "--to-node", "consumer-b", "--every", "2s", "--now")
    alice.ok("volume", "delete", "ticking")
    deadline = time.monotonic() + 60
    while "its replica setting is removed" not in nodes.site.serve_log():
        assert time.monotonic() < deadline, nodes.site.serve_log()
        time.sleep(0.5)
    assert again["replica"]["snapshot_id"] in [id for node, id in replica_snapshots(nodes) if node == "consumer-b"]


def test_bad_replica_settings_are_refused_and_change_nothing(nodes):
    site, alice = nodes.site, nodes.site.alice
    volume_id, source = placed_volume(nodes, "kept", "consumer-a")

    def refused(rc: int, text: str, *args, cli=alice):
        result = cli.run("volume", "replicate", *args)
        assert result.rc == rc and text in result.stderr, result.describe()

    refused(EXIT_USAGE, "out of range", "kept", "--to-node", "consumer-b", "--every", "1s")
    refused(EXIT_USAGE, "out of range", "kept", "--to-node", "consumer-b", "--every", "8d")
    refused(EXIT_USAGE, "is no interval", "kept", "--to-node", "consumer-b", "--every", "10x")
    refused(EXIT_USAGE, "--to-node", "kept", "--to-node", "../b", "--every", "10m")
    refused(EXIT_USAGE, "go together", "kept", "--to-node", "consumer-b")
    refused(EXIT_USAGE, "--off takes no", "kept", "--off", "--now")
    refused(EXIT_USAGE, "say what to do", "kept")
    refused(EXIT_NOT_FOUND, '"nobody" is not a registered node', "kept", "--to-node", "nobody", "--every", "10m")
    refused(EXIT_USAGE, "must be on another node", "kept", "--to-node", "consumer-a", "--every", "10m")
    refused(EXIT_NOT_FOUND, "has no replica", "kept", "--now")
    alice.ok_json("volume", "create", "team", "--provider", "roset")
    refused(EXIT_PRECONDITION, "roset volume", "team", "--to-node", "consumer-b", "--every", "10m")
    alice.ok_json("volume", "create", "here")
    refused(EXIT_UNIMPLEMENTED, "controller host", "here", "--to-node", "consumer-b", "--every", "10m")
    # A node's certificate may not set one: an operator's.
    refused(EXIT_DENIED, "", "kept", "--to-node", "consumer-b", "--every", "10m", cli=site.a)
    # consumer-b's may not even ask about consumer-a's volume.
    refused(EXIT_DENIED, "a node acts only for itself", volume_id, "--to-node", "consumer-b", "--every", "10m",
            cli=site.b)

    assert replica_of(nodes, "kept") is None
    assert replica_snapshots(nodes) == []


def test_create_parameters_give_a_volume_its_replica_from_the_start(nodes):
    """replicaToNode and replicaEvery, a StorageClass's parameters, on CreateVolume: the replica is
    recorded with the volume and its rounds follow; a bad one is refused before anything is made."""
    alice = nodes.site.alice
    made = alice.ok_json("volume", "create", "classy", "--node", "consumer-a", "-p", "replicaToNode=consumer-b",
                         "-p", "replicaEvery=2s")
    assert made["replica"]["to_node"] == "consumer-b" and made["replica"]["every"] == "2s", made
    assert "replicaToNode" not in json.dumps(made["context"]), "expected the provider never to see it"
    deadline = time.monotonic() + 60
    while not (replica_of(nodes, "classy") or {}).get("rounds"):
        assert time.monotonic() < deadline, replica_of(nodes, "classy")
        time.sleep(0.5)
    assert [node for node, _ in replica_snapshots(nodes)].count("consumer-b") >= 1

    def refused(rc: int, text: str, name: str, *args):
        result = alice.run("volume", "create", name, *args)
        assert result.rc == rc and text in result.stderr, result.describe()

    refused(EXIT_USAGE, "go together", "lonely", "--node", "consumer-a", "-p", "replicaToNode=consumer-b")
    refused(EXIT_USAGE, "must be on another node", "self", "--node", "consumer-a", "-p", "replicaToNode=consumer-a",
            "-p", "replicaEvery=10m")
    refused(EXIT_USAGE, "is not a registered node", "nowhere", "--node", "consumer-a", "-p", "replicaToNode=nobody",
            "-p", "replicaEvery=10m")
    refused(EXIT_USAGE, "out of range", "hasty", "--node", "consumer-a", "-p", "replicaToNode=consumer-b",
            "-p", "replicaEvery=1s")
    refused(EXIT_UNIMPLEMENTED, "only a local volume placed on a node", "central", "-p", "replicaToNode=consumer-b",
            "-p", "replicaEvery=10m")
    assert [v["name"] for v in alice.volumes()] == ["classy"], "expected no volume made by a refused create"


def add_node(nodes: Nodes, host_lab, name: str):
    """A third node host beside consumer-a and consumer-b, as build_site makes them: its own
    certificate (OU=node, CN=name) and `serve --role node --listen`, registered."""
    site = nodes.site
    host = host_lab.add(name)
    tls_ok(site.controller, site.printed, "issue", name, "--dir", site.tls_dir, "--ip", host.address)
    site.secret_files.append(site.tls_dir / f"{name}.key")
    cert, key, ca = copy_identity(site.tls_dir, name, host.config_dir / "tls")
    env = {"ROSETCTL_CONTROLLER": site.address, "ROSETCTL_NODE_ID": name, "ROSETCTL_TLS_CERT": str(cert),
           "ROSETCTL_TLS_KEY": str(key), "ROSETCTL_TLS_CA": str(ca)}
    return start_node(site, host, env)


def test_a_replica_setting_follows_its_volume_when_it_moves(nodes, host_lab):
    """The setting is keyed by the volume's id, which a move changes: at the move's switch the
    controller gives it to the new id (A's retired copy, which no longer changes, has none), and
    drops it, saying so, when the volume moved onto its replica's node."""
    site, alice = nodes.site, nodes.site.alice
    add_node(nodes, host_lab, "consumer-c")
    old_id, source = placed_volume(nodes, "carried", "consumer-a")
    fill_varied(source)
    (source / "big.bin").write_bytes(os.urandom(4 * MiB))
    alice.ok_json("volume", "replicate", "carried", "--to-node", "consumer-c", "--every", "1h", "--now",
                  timeout=300)

    moved = alice.ok_json("volume", "move", "carried", "--to-node", "consumer-b", timeout=300)
    new_id = moved["volume_id"]
    assert alice.ok_json("volume", "show", old_id)["replica"] is None, "expected A's retired copy to have none"
    carried = replica_of(nodes, "carried")
    assert carried is not None and carried["to_node"] == "consumer-c" and carried["every_seconds"] == 3600, carried
    # Its first round from B sends only what C lacks: the moved data is what C holds already.
    again = alice.ok_json("volume", "replicate", new_id, "--now", timeout=300)["replica"]
    assert again["rounds"] >= 1 and again["last_bytes_sent"] < 1 * MiB, again
    assert again["last_error"] == "", again

    # Onto its replica's node: the setting goes, and the controller says why.
    alice.ok("volume", "delete", old_id)
    onto = alice.ok_json("volume", "move", "carried", "--to-node", "consumer-c", "--delete-source", timeout=300)
    assert replica_of(nodes, "carried") is None
    assert f'volume {onto["volume_id"]} moved to node "consumer-c", which held its replica' in site.serve_log()
