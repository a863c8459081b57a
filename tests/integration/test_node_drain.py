"""`rosetctl node drain A [--to B]` (issue 38, item 2) in the network-namespace lab of
test_volume_move.py: a controller and two nodes, each its own namespace, state and certificate.
alice, an admin through the controller, drains node A: every volume placed there is moved, one at
a time, by the same move as `volume move`, to B (the one node that shares A's topology and has
room, or --to). Each moved volume's data on B equals A's in every byte and its name resolves to B;
what cannot move stays with its reason on its row (a roset volume mapped to A, a volume in use) and
the exit code says something was left. A drain killed midway, even in the middle of a move, is run
again and finishes: the volumes moved are skipped, the half-done move goes on from its pause.
"""
from __future__ import annotations

import json
import signal
import time

import pytest

from controller_site import build_site
from rosetctl_cli import EXIT_NOT_FOUND, EXIT_PRECONDITION, EXIT_USAGE
from snapshot_trees import describe_tree
from test_placement import local_id
from test_readme_json import json_specs
from test_snapshot_streaming import Nodes, differences_across_hosts, placed_volume
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


def assert_on_b(nodes: Nodes, made: dict[str, tuple[str, dict]]) -> None:
    """Every volume of MADE lives on B by its name, byte-equal to what it was on A."""
    alice = nodes.site.alice
    for name, (old_id, tree) in made.items():
        new_id = alice.volume(name)["id"]
        assert new_id != old_id and local_id(new_id, "consumer-b"), (name, new_id)
        lines = differences_across_hosts(tree, describe_tree(directory_of(nodes, new_id, "consumer-b")))
        assert not lines, f"expected {name} on B to equal A's:\n" + "\n".join(lines)


def test_a_node_with_20_volumes_drains_to_the_node_with_room_and_what_cannot_move_says_why(nodes):
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

    result = drain(nodes)
    assert result.rc == EXIT_PRECONDITION, result.describe()
    assert "2 of 22 volume(s) stay on node \"consumer-a\"" in result.stderr, result.describe()
    report = json.loads(result.stdout)
    json_specs()["node drain"].check("node drain", report)
    assert report["node"] == "consumer-a" and report["to"] is None, report
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

    # Once busy is let go, the drain run again moves it and skips the 20 (their old copies stay
    # on A, saying where they went); the roset volume is still refused.
    site.a.ok("volume", "disconnect", busy_id)
    again = drain(nodes, "--to", "consumer-b")
    assert again.rc == EXIT_PRECONDITION, again.describe()
    report = json.loads(again.stdout)
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
