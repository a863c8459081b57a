"""`rosetctl node drain A [--to B]` (issue 38, item 2) in the network-namespace lab of
test_volume_move.py: a controller and two nodes, each its own namespace, state and certificate.
alice, an admin through the controller, drains node A: every volume placed there is moved, one at
a time, by the same move as `volume move`, to B (the one node that shares A's topology and has
room, or --to). Each moved volume's data on B equals A's in every byte and its name resolves to B;
what cannot move stays with its reason on its row (a roset volume mapped to A, a volume in use) and
the exit code says something was left. A drain killed midway, even in the middle of a move, is run
again and finishes: the volumes moved are skipped, the half-done move goes on from its pause.
A drain cordons A first and leaves it cordoned: no volume is placed on A during the drain or
after (a create naming only A is RESOURCE_EXHAUSTED and makes nothing; one that allows B too goes
to B), until alice, and no node certificate, uncordons it.
"""
from __future__ import annotations

import json
import signal
import time

import pytest

from controller_site import build_site
from rosetctl_cli import EXIT_NOT_FOUND, EXIT_PRECONDITION, EXIT_USAGE

from test_placement import NODE_KEY, create_request, csi_call, stored_volumes
from snapshot_trees import describe_tree
from test_placement import local_id
from test_readme_json import json_specs
from test_snapshot_streaming import Nodes, differences_across_hosts, placed_volume, snapshot_through_controller
from test_volume_move import directory_of, move_snapshots


@pytest.fixture
def nodes(host_lab, rosetctl_binary) -> Nodes:
    site = build_site(host_lab)
    yield Nodes(site)
    site.assert_no_secrets_printed()


def small_volumes(nodes: Nodes, count: int, prefix: str = "v") -> dict[str, tuple[str, dict]]:
    """COUNT volumes on consumer-a, each with a few files of its own: name -> (id, its tree)."""
    made = {}
    for i in range(count):
        name = f"{prefix}{i:02d}"
        volume_id, path = placed_volume(nodes, name, "consumer-a")
        (path / "name.txt").write_text(f"I am {name}\n")
        (path / "sub").mkdir()
        (path / "sub" / "data.bin").write_bytes(bytes([i]) * (4096 * (i + 1)))
        made[name] = (volume_id, describe_tree(path))
    return made


def drain(nodes: Nodes, *args, **kwargs):
    return nodes.site.alice.run("node", "drain", "consumer-a", *args, "-o", "json", timeout=600, **kwargs)


EXIT_DENIED, EXIT_EXHAUSTED = 7, 8


def assert_refused_on_cordoned_a(result) -> None:
    assert result.rc == EXIT_EXHAUSTED, result.describe()
    assert 'node "consumer-a" is cordoned' in result.stderr, result.describe()
    assert "rosetctl node uncordon consumer-a" in result.stderr, result.describe()


def cordoned(nodes: Nodes, node: str = "consumer-a") -> bool:
    shown = nodes.site.alice.ok_json("node", "show", node)
    listed = {n["node_id"]: n for n in nodes.site.alice.ok_json("node", "list")}
    assert listed[node]["cordoned"] == shown["cordoned"], (listed[node], shown)
    assert (shown["cordoned_at"] is None) == (not shown["cordoned"]), shown
    return shown["cordoned"]


def assert_on_b(nodes: Nodes, made: dict[str, tuple[str, dict]]) -> None:
    """Every volume of MADE lives on B by its name, byte-equal to what it was on A."""
    alice = nodes.site.alice
    for name, (old_id, tree) in made.items():
        new_id = alice.volume(name)["id"]
        assert new_id != old_id and local_id(new_id, "consumer-b"), (name, new_id)
        lines = differences_across_hosts(tree, describe_tree(directory_of(nodes, new_id, "consumer-b")))
        assert not lines, f"expected {name} on B to equal A's:\n" + "\n".join(lines)


def test_a_node_with_20_volumes_drains_to_the_node_with_room_and_what_cannot_move_says_why(nodes, csi):
    site, alice = nodes.site, nodes.site.alice
    made = small_volumes(nodes, 20)
    busy_id, busy_path = placed_volume(nodes, "busy", "consumer-a")
    (busy_path / "data").write_text("in use on A\n")
    target = nodes.a_host.dir / "busy"
    site.a.ok("volume", "connect", busy_id, "--target", target)
    roset = alice.ok_json("volume", "create", "team", "--provider", "roset")
    alice.ok("volume", "map", "team", "--node", "consumer-a")
    elsewhere_id, _ = placed_volume(nodes, "on-b", "consumer-b")

    # Refused before anything moves: an unknown node either side, the drained node as --to.
    unknown = alice.run("node", "drain", "nobody")
    assert unknown.rc == EXIT_NOT_FOUND and '"nobody" is not a registered node' in unknown.stderr, unknown.describe()
    nowhere = drain(nodes, "--to", "nobody")
    assert nowhere.rc == EXIT_NOT_FOUND and '--to "nobody"' in nowhere.stderr, nowhere.describe()
    itself = drain(nodes, "--to", "consumer-a")
    assert itself.rc == EXIT_USAGE and "is the node drained" in itself.stderr, itself.describe()
    assert alice.volume("v00")["id"] == made["v00"][0]
    assert not cordoned(nodes), "expected a refused drain to leave A uncordoned"

    result = drain(nodes)
    assert result.rc == EXIT_PRECONDITION, result.describe()
    assert "2 of 22 volume(s) stay on node \"consumer-a\"" in result.stderr, result.describe()
    report = json.loads(result.stdout)
    json_specs()["node drain"].check("node drain", report)
    assert report["node"] == "consumer-a" and report["to"] is None, report
    assert report["cordoned"] and report["cordoned_by_this_drain"], report
    assert 'node "consumer-a" cordoned: no new volume is placed on it' in result.stderr, result.describe()
    assert cordoned(nodes) and alice.ok_json("node", "show", "consumer-a")["cordoned_at"] == report["cordoned_at"]
    rows = {row["name"]: row for row in report["volumes"]}
    assert sorted(rows) == sorted([*made, "busy", "team"]), "expected A's volumes and the one mapped to A"
    assert report["summary"] == {"volumes": 22, "moved": 20, "already_moved": 0, "refused": 2,
                                 "failed": 0, "left": 2}, report["summary"]
    for name in made:
        row = rows[name]
        assert row["outcome"] == "moved" and row["node"] == "consumer-b" and row["reason"] is None, row
        assert row["new_volume_id"] == alice.volume(name)["id"], row
    assert rows["team"]["outcome"] == "refused" and "roset volume" in rows["team"]["reason"], rows["team"]
    assert "nothing to move" in rows["team"]["reason"], rows["team"]
    assert rows["busy"]["outcome"] == "refused" and "in use" in rows["busy"]["reason"], rows["busy"]
    assert "--wait-unpublished" in rows["busy"]["reason"], rows["busy"]
    assert 'volume "busy" stays on node "consumer-a"' in result.stderr, result.describe()
    assert_on_b(nodes, made)
    # The refused ones are as they were: busy still A's and connected, team untouched.
    assert alice.volume("busy")["id"] == busy_id
    assert (target / "data").read_text() == "in use on A\n"
    assert alice.volume("team")["id"] == roset["id"]
    assert alice.volume("on-b")["id"] == elsewhere_id
    assert move_snapshots(nodes) == []

    # A stays cordoned after the drain: a volume named onto it is refused and nothing is made;
    # one whose topology allows B too goes to B; a restore from a snapshot on A, or a move onto A,
    # is refused too. What A holds still works: busy, in use there, is snapshotted.
    before = stored_volumes(nodes.a_host)
    assert_refused_on_cordoned_a(alice.run("volume", "create", "late", "--node", "consumer-a"))
    only_a = csi_call(nodes.site, csi, "CreateVolume", create_request("late-csi", "consumer-a"))
    assert only_a["code"] == "RESOURCE_EXHAUSTED" and "is cordoned" in only_a["details"], only_a
    either = create_request("late-either")
    either["accessibility_requirements"] = {
        "requisite": [{"segments": {NODE_KEY: "consumer-a"}}, {"segments": {NODE_KEY: "consumer-b"}}],
        "preferred": [{"segments": {NODE_KEY: "consumer-a"}}, {"segments": {NODE_KEY: "consumer-b"}}]}
    placed = csi_call(nodes.site, csi, "CreateVolume", either)
    assert placed["code"] == "OK" and local_id(placed["response"]["volume"]["volume_id"], "consumer-b"), placed
    snapshot_id = snapshot_through_controller(nodes, csi, "busy-on-a", busy_id)
    assert_refused_on_cordoned_a(alice.run("volume", "create", "late-restore", "--from-snapshot", snapshot_id))
    onto_a = alice.run("volume", "move", "on-b", "--to-node", "consumer-a")
    assert_refused_on_cordoned_a(onto_a)
    assert alice.volume("on-b")["id"] == elsewhere_id
    assert stored_volumes(nodes.a_host) == before, "expected nothing made on cordoned A"
    assert alice.run("volume", "show", "late").rc == EXIT_NOT_FOUND
    csi_call(nodes.site, csi, "DeleteSnapshot", {"snapshot_id": snapshot_id})

    # Once busy is let go, the drain run again moves it and skips the 20 (their old copies stay
    # on A, saying where they went); the roset volume is still refused.
    site.a.ok("volume", "disconnect", busy_id)
    again = drain(nodes, "--to", "consumer-b")
    assert again.rc == EXIT_PRECONDITION, again.describe()
    report = json.loads(again.stdout)
    assert report["cordoned"] and not report["cordoned_by_this_drain"], "expected A cordoned already"
    assert report["summary"] == {"volumes": 22, "moved": 1, "already_moved": 20, "refused": 1,
                                 "failed": 0, "left": 1}, report["summary"]
    rows = {row["name"]: row for row in report["volumes"]}
    assert rows["busy"]["outcome"] == "moved" and rows["busy"]["node"] == "consumer-b", rows["busy"]
    assert all(rows[name]["outcome"] == "already_moved" for name in made), rows
    assert (directory_of(nodes, alice.volume("busy")["id"], "consumer-b") / "data").read_text() == "in use on A\n"

    # With the roset volume unmapped and --delete-source, nothing is left on A: exit 0.
    alice.ok("volume", "unmap", "team", "--node", "consumer-a")
    last = drain(nodes, "--delete-source")
    assert last.rc == 0, last.describe()
    report = json.loads(last.stdout)
    assert report["summary"]["left"] == 0 and report["summary"]["already_moved"] == 21, report["summary"]
    on_a = [v for v in alice.volumes() if v["id"].startswith("n10.consumer-a.")]
    assert on_a == [], f"expected no volume left on A: {on_a}"
    assert_on_b(nodes, made)

    # The cordon is an admin's: a node's certificate may neither lift it nor set it.
    for verb in ("uncordon", "cordon"):
        denied = nodes.site.a.run("node", verb, "consumer-a")
        assert denied.rc == EXIT_DENIED, denied.describe()
        denied = nodes.site.b.run("node", verb, "consumer-b")
        assert denied.rc == EXIT_DENIED, denied.describe()
    assert cordoned(nodes) and not cordoned(nodes, "consumer-b")
    # alice lifts it once the maintenance is over: A takes new volumes again.
    lifted = alice.ok_json("node", "uncordon", "consumer-a")
    json_specs()["node uncordon"].check("node uncordon", lifted)
    assert lifted["changed"] and not lifted["cordoned"] and lifted["cordoned_at"] is None, lifted
    assert not alice.ok_json("node", "uncordon", "consumer-a")["changed"]
    assert not cordoned(nodes)
    assert local_id(alice.ok_json("volume", "create", "late", "--node", "consumer-a")["id"], "consumer-a")
    cordon = alice.ok_json("node", "cordon", "consumer-b")
    json_specs()["node cordon"].check("node cordon", cordon)
    assert cordon["changed"] and cordon["cordoned"] and cordon["node"]["cordoned"], cordon
    again = alice.ok_json("node", "cordon", "consumer-b")
    assert not again["changed"] and again["cordoned_at"] == cordon["cordoned_at"], again
    assert "CORDONED" in alice.ok("node", "list").stdout
    unknown = alice.run("node", "cordon", "nobody")
    assert unknown.rc == EXIT_NOT_FOUND and '"nobody" is not registered' in unknown.stderr, unknown.describe()


def test_a_drain_killed_midway_and_inside_a_move_finishes_when_run_again(nodes):
    alice = nodes.site.alice
    made = small_volumes(nodes, 6, prefix="k")

    # Killed (SIGKILL) while it moves the third volume: two are moved, the third may be anywhere.
    out, err = nodes.a_host.dir / "drain.out", nodes.a_host.dir / "drain.err"
    argv = alice.argv(["node", "drain", "consumer-a", "--to", "consumer-b", "-o", "json"])
    with out.open("w") as stdout, err.open("w") as stderr:
        process = nodes.a_host.start(argv, env=alice.env, stdout=stdout, stderr=stderr)
    deadline = time.monotonic() + 300
    while "(3 of 6)" not in err.read_text():
        assert process.poll() is None, f"the drain ended before its third volume: {err.read_text()}"
        assert time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    # While the drain runs, no new volume lands on A: it was cordoned first.
    assert_refused_on_cordoned_a(alice.run("volume", "create", "during", "--node", "consumer-a"))
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    moved_first = [name for name in made if alice.run("volume", "show", made[name][0]).rc == 0
                   and "moved to node" in alice.volume(made[name][0])["condition"]["message"]]
    assert moved_first[:2] == ["k00", "k01"] and len(moved_first) < 6, moved_first

    # Killed again inside the next move, once it made the volume on B and before the switch:
    # A's copy is paused (no writes), B's is made, the name is on both.
    crashed = alice.run("node", "drain", "consumer-a", "--to", "consumer-b",
                        env={**alice.env, "ROSETCTL_CRASH_AT": "volume-move-created"}, timeout=600)
    assert crashed.rc != 0, crashed.describe()
    half = next(name for name in made if name not in moved_first)
    shown = alice.volume(made[half][0])
    assert "paused while it moves" in shown["condition"]["message"], shown

    done = drain(nodes, "--to", "consumer-b")
    assert done.rc == 0, done.describe()
    report = json.loads(done.stdout)
    rows = {row["name"]: row for row in report["volumes"]}
    assert rows[half]["outcome"] == "moved", rows[half]
    assert "by an earlier run: going on" in done.stderr, done.describe()
    for name in moved_first:
        assert rows[name]["outcome"] == "already_moved", rows[name]
    assert report["summary"]["left"] == 0 and report["summary"]["volumes"] == 6, report["summary"]
    assert_on_b(nodes, made)
    assert move_snapshots(nodes) == [], "expected no snapshot of a killed move left behind"
