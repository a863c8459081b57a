"""`rosetctl volume move VOL --to-node B` (issue 38, item 1, its first slice): a controller and two
nodes, each its own network namespace, state directory and mTLS certificate (controller_site.py).
alice, an admin through the controller, moves a directory volume placed on node A to node B: B
pulls snapshots of it while it stays connected and written on A (pre-copy), the move waits for
its last user to disconnect (--wait-unpublished), pauses it on A, sends the last delta and makes
the volume on B under its name. The data on B equals A's at the pause in every byte; the name
resolves to B; A keeps its old copy, which refuses every publication naming the new id, until it
is deleted (or --delete-source). A volume in use is refused without the wait and nothing changes;
so are an unknown node, the volume's own node, a roset volume and one of the controller host.
"""
from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from controller_site import build_site
from rosetctl_cli import EXIT_BUSY, EXIT_NOT_FOUND, EXIT_PRECONDITION, EXIT_USAGE, EXIT_UNIMPLEMENTED
from snapshot_trees import describe_tree
from test_placement import local_id
from test_readme_json import json_specs
from test_snapshot_streaming import Nodes, differences_across_hosts, fill_varied, placed_volume, start_node

MiB = 2**20


@pytest.fixture
def nodes(host_lab, rosetctl_binary) -> Nodes:
    site = build_site(host_lab)
    yield Nodes(site)
    site.assert_no_secrets_printed()


def directory_of(nodes: Nodes, volume_id: str, node: str) -> Path:
    host = nodes.a_host if node == "consumer-a" else nodes.b_host
    return host.state_dir / "volumes" / local_id(volume_id, node)


def move_snapshots(nodes: Nodes) -> list[str]:
    """The names of snapshots a move took that are still listed anywhere."""
    listed = nodes.site.alice.ok_json("snapshot", "list")
    return [s["name"] for s in listed if s["name"].startswith("move-")]


def start_move(nodes: Nodes, *args):
    """alice's `volume move` in the background on consumer-a's host: (process, stdout, stderr paths)."""
    out, err = nodes.a_host.dir / "move.out", nodes.a_host.dir / "move.err"
    argv = nodes.site.alice.argv(["volume", "move", *args, "-o", "json"])
    with out.open("w") as stdout, err.open("w") as stderr:
        process = nodes.a_host.start(argv, env=nodes.site.alice.env, stdout=stdout, stderr=stderr)
    return process, out, err


def wait_for_text(path: Path, text: str, process, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert process.poll() is None, f"the move ended before {text!r}: {path.read_text()}"
        assert time.monotonic() < deadline, f"no {text!r} in {path.read_text()}"
        time.sleep(0.1)


def test_a_volume_written_during_its_pre_copy_moves_to_b_byte_equal_under_its_name(nodes):
    site, alice = nodes.site, nodes.site.alice
    volume_id, source = placed_volume(nodes, "moving", "consumer-a")
    fill_varied(source)
    (source / "big.bin").write_bytes(os.urandom(24 * MiB))  # the first round sends more than --small
    target = nodes.a_host.dir / "moving"
    site.a.ok("volume", "connect", volume_id, "--target", target)

    move, out, err = start_move(nodes, "moving", "--to-node", "consumer-b", "--wait-unpublished", "120")
    # Written while the pre-copy runs: the volume stays connected and in use on A.
    (target / "during.txt").write_text("written during the pre-copy\n")
    wait_for_text(err, "to be disconnected", move)
    assert "is in use" in err.read_text() and "published at" in err.read_text(), err.read_text()
    # While it waits, only the last pre-copy rounds' snapshots are left (on A, and copies on B):
    # the earlier ones went before the pause, so the cleanup after the switch is short.
    waiting_with = set(move_snapshots(nodes))
    # More writes after the pre-copy, before the last user lets go: they travel in the last delta.
    (target / "during.txt").write_text("written after the pre-copy, before the pause\n")
    (target / "dir" / "f0.bin").write_bytes(b"changed")
    os.remove(target / "empty")
    site.a.ok("volume", "disconnect", volume_id)
    assert move.wait(timeout=300) == 0, err.read_text()
    expected = describe_tree(source)  # A's copy at the pause, untouched since

    result = json.loads(out.read_text())
    json_specs()["volume move"].check("volume move", result)
    new_id = result["volume_id"]
    assert local_id(new_id, "consumer-b") and result["node"] == "consumer-b", result
    assert result["old_volume_id"] == volume_id and result["from_node"] == "consumer-a", result
    assert result["source_deleted"] is False, result
    rounds = result["rounds"]
    assert rounds[0]["bytes_sent"] > 24 * MiB, result
    assert 2 <= len(rounds) and rounds[-1]["bytes_sent"] < 16 * MiB, result
    assert result["final_bytes_sent"] < 1 * MiB, f"expected only what changed to travel last: {result}"
    # (the last two: the one B restored ahead, and one more for what was written meanwhile)
    assert sorted(name.rsplit("-", 1)[1] for name in waiting_with) == [str(len(rounds) - 1), str(len(rounds))], \
        f"expected only rounds {len(rounds) - 1} and {len(rounds)}'s snapshots while the move waited, not {waiting_with}"
    # Each step the user waits through is said as it comes (the switch before the cleanup).
    said = err.read_text()
    assert 0 < said.index('"moving" is paused on node "consumer-a"') < said.index(
        f'"moving" is switched to node "consumer-b" as {new_id}'), said

    lines = differences_across_hosts(expected, describe_tree(directory_of(nodes, new_id, "consumer-b")))
    assert not lines, "expected the volume on B to equal A's at the pause:\n" + "\n".join(lines)
    assert (directory_of(nodes, new_id, "consumer-b") / "during.txt").read_text().startswith("written after")
    # B restored the last round before the pause; the restore in the pause moved the files that
    # did not change since (all but during.txt, f0.bin and the hard-linked file) instead of copying.
    ahead = re.findall(r"(\d+) of (\d+) files moved from the restore made ahead", nodes.serve_b.output())
    assert len(ahead) == 1, f"expected the volume on B made from its last round restored ahead: {ahead}"
    assert int(ahead[0][1]) - 3 <= int(ahead[0][0]) < int(ahead[0][1]), ahead
    assert not [p for p in directory_of(nodes, new_id, "consumer-b").parent.iterdir()
                if p.name.startswith((".prepared-", ".restore-"))], "expected nothing left of the restore ahead"

    # The name is B's now, from every seat; the move's snapshots are gone from both nodes.
    assert alice.volume("moving")["id"] == new_id
    assert site.b.volume("moving")["id"] == new_id
    assert move_snapshots(nodes) == []
    # A keeps its old copy: it says where the volume went and takes no publication.
    assert source.is_dir() and describe_tree(source) == expected
    old = alice.volume(volume_id)
    assert old["condition"]["abnormal"] is True and new_id in old["condition"]["message"], old
    # Listed too, by its id, saying where the volume went: the operator's to delete.
    listed = {v["id"]: v for v in alice.volumes()}
    assert set(listed) == {volume_id, new_id}, listed
    assert "moved to node \"consumer-b\"" in listed[volume_id]["condition"]["message"], listed
    assert listed[new_id]["condition"]["abnormal"] is False, listed
    refused = site.a.run("volume", "connect", volume_id, "--target", target)
    assert refused.rc == EXIT_PRECONDITION and new_id in refused.stderr, refused.describe()
    modified = alice.run("volume", "modify", volume_id, "--param", "directIO=false")
    assert modified.rc == EXIT_PRECONDITION and new_id in modified.stderr, modified.describe()
    # The volume works on B, by its name.
    on_b = nodes.b_host.dir / "moving"
    site.b.ok("volume", "connect", "moving", "--target", on_b)
    assert (on_b / "during.txt").read_text().startswith("written after")
    site.b.ok("volume", "disconnect", "moving")

    # Back to A: refused while A's old copy holds the name there, then with --delete-source.
    back = alice.run("volume", "move", "moving", "--to-node", "consumer-a")
    assert back.rc == EXIT_PRECONDITION and local_id(volume_id, "consumer-a") in back.stderr, back.describe()
    assert "stays on node \"consumer-b\", unpaused" in back.stderr, back.describe()
    assert alice.volume("moving")["id"] == new_id, "expected the failed move to leave the volume on B"
    assert move_snapshots(nodes) == []
    alice.ok("volume", "delete", volume_id)
    assert not source.exists()
    (directory_of(nodes, new_id, "consumer-b") / "on-b.txt").write_text("written on B\n")
    expected = describe_tree(directory_of(nodes, new_id, "consumer-b"))
    home = alice.ok_json("volume", "move", "moving", "--to-node", "consumer-a", "--delete-source", timeout=300)
    assert home["source_deleted"] is True and local_id(home["volume_id"], "consumer-a"), home
    assert not directory_of(nodes, new_id, "consumer-b").exists()
    lines = differences_across_hosts(expected, describe_tree(directory_of(nodes, home["volume_id"], "consumer-a")))
    assert not lines, "expected the volume back on A to equal B's:\n" + "\n".join(lines)
    assert alice.volume("moving")["id"] == home["volume_id"]
    assert [v["name"] for v in alice.volumes()] == ["moving"]


def test_a_file_appended_to_all_along_is_pre_copied_as_read_and_moves_whole(nodes, processes):
    """A pre-copy round keeps a file written to while it is read as read (snapshot parameter
    preCopy): a log that is never quiet once failed every round ("changed while being read, 3
    times in a row"). The final delta, taken paused, is consistent: B holds the file as A's at
    the pause, to its last byte."""
    site = nodes.site
    volume_id, source = placed_volume(nodes, "logging", "consumer-a")
    target = nodes.a_host.dir / "logging"
    site.a.ok("volume", "connect", volume_id, "--target", target)
    # Long enough to read that each read spans many appends, even on a loaded machine.
    (target / "app.log").write_bytes(os.urandom(32 * MiB))
    stop = nodes.a_host.dir / "stop-appending"
    writer = processes.start(["/usr/bin/python3", "-c", f"""
import os, time
with open({str(target / 'app.log')!r}, "ab", buffering=0) as log:
    n = 0
    while not os.path.exists({str(stop)!r}):
        n += 1
        log.write(b"%08d " % n + os.urandom(4083).hex().encode()[:4087] + b"\\n")
        time.sleep(0.001)
"""])
    time.sleep(0.3)
    assert writer.poll() is None, "the writer ended early"
    move, out, err = start_move(nodes, "logging", "--to-node", "consumer-b", "--wait-unpublished", "120",
                                "--max-rounds", "3")
    wait_for_text(err, "to be disconnected", move)
    assert writer.poll() is None, "expected the writer to append all through the pre-copy"
    stop.touch()
    assert writer.wait(timeout=30) == 0
    site.a.ok("volume", "disconnect", volume_id)
    assert move.wait(timeout=300) == 0, err.read_text()
    expected = describe_tree(source)  # A's copy at the pause, untouched since

    result = json.loads(out.read_text())
    assert len(result["rounds"]) >= 1 and result["rounds"][0]["bytes_sent"] > 32 * MiB, result
    # The log travels whole once: after that only what was appended since the round before (B
    # begins the blob with the version it holds), where the whole file used to go again.
    later = [r["bytes_sent"] for r in result["rounds"][1:]] + [result["final_bytes_sent"]]
    assert max(later) < 16 * MiB, f"expected only the appended bytes after the first round: {result}"
    new_id = result["volume_id"]
    moved = directory_of(nodes, new_id, "consumer-b")
    lines = differences_across_hosts(expected, describe_tree(moved))
    assert not lines, "expected the volume on B to equal A's at the pause:\n" + "\n".join(lines)
    assert (moved / "app.log").stat().st_size > 32 * MiB
    assert move_snapshots(nodes) == []


def test_a_volume_in_use_and_invalid_moves_are_refused_and_change_nothing(nodes):
    site, alice = nodes.site, nodes.site.alice
    volume_id, source = placed_volume(nodes, "busy", "consumer-a")
    (source / "data").write_text("stays on A\n")
    target = nodes.a_host.dir / "busy"
    site.a.ok("volume", "connect", volume_id, "--target", target)

    refused = alice.run("volume", "move", "busy", "--to-node", "consumer-b")
    assert refused.rc == EXIT_PRECONDITION, refused.describe()
    assert "is in use" in refused.stderr and "--wait-unpublished" in refused.stderr, refused.describe()
    assert "nothing was moved" in refused.stderr, refused.describe()
    assert alice.volume("busy")["id"] == volume_id
    assert [v["id"] for v in alice.volumes()] == [volume_id], "expected no volume made on B"
    assert move_snapshots(nodes) == []
    # Not paused: it is published again as before.
    site.a.ok("volume", "disconnect", volume_id)
    site.a.ok("volume", "connect", volume_id, "--target", target)
    site.a.ok("volume", "disconnect", volume_id)

    unknown = alice.run("volume", "move", "busy", "--to-node", "nobody")
    assert unknown.rc == EXIT_NOT_FOUND and '"nobody" is not a registered node' in unknown.stderr, unknown.describe()
    same = alice.run("volume", "move", "busy", "--to-node", "consumer-a")
    assert same.rc == EXIT_USAGE and 'on node "consumer-a" already' in same.stderr, same.describe()
    bad = alice.run("volume", "move", "busy", "--to-node", "../b")
    assert bad.rc == EXIT_USAGE and "--to-node" in bad.stderr, bad.describe()
    roset = alice.ok_json("volume", "create", "team", "--provider", "roset")
    shared = alice.run("volume", "move", "team", "--to-node", "consumer-b")
    assert shared.rc == EXIT_PRECONDITION and "roset volume" in shared.stderr, shared.describe()
    here = alice.ok_json("volume", "create", "here")
    controller_host = alice.run("volume", "move", "here", "--to-node", "consumer-b")
    assert controller_host.rc == EXIT_UNIMPLEMENTED and "controller host" in controller_host.stderr, \
        controller_host.describe()
    # A node's certificate may not pause a volume: an operator's.
    node_seat = site.a.run("volume", "move", "busy", "--to-node", "consumer-b")
    assert node_seat.rc != 0, node_seat.describe()

    assert sorted(v["id"] for v in alice.volumes()) == sorted([volume_id, roset["id"], here["id"]])
    assert move_snapshots(nodes) == []
    assert (source / "data").read_text() == "stays on A\n"
    site.a.ok("volume", "connect", volume_id, "--target", target)
    site.a.ok("volume", "disconnect", volume_id)


def test_a_move_killed_after_the_pause_or_the_create_leaves_no_writable_copy_and_a_rerun_finishes(nodes):
    site, alice = nodes.site, nodes.site.alice
    volume_id, source = placed_volume(nodes, "killed", "consumer-a")
    fill_varied(source)
    expected = describe_tree(source)
    target = nodes.a_host.dir / "killed"

    # Killed once paused: A refuses a new publication, saying it moves; the name is still A's.
    paused = alice.run("volume", "move", "killed", "--to-node", "consumer-b",
                       env={**alice.env, "ROSETCTL_CRASH_AT": "volume-move-paused"}, timeout=300)
    assert paused.rc != 0, paused.describe()
    refused = site.a.run("volume", "connect", volume_id, "--target", target)
    assert refused.rc == EXIT_PRECONDITION and "paused while it moves" in refused.stderr, refused.describe()
    assert alice.volume("killed")["id"] == volume_id
    grown = alice.run("volume", "expand", volume_id, "--size", "2Gi")
    assert grown.rc == EXIT_PRECONDITION and "paused while it moves" in grown.stderr, grown.describe()
    # Killed once made on B: A still paused, so neither copy takes writes; the name is on both.
    created = alice.run("volume", "move", volume_id, "--to-node", "consumer-b",
                        env={**alice.env, "ROSETCTL_CRASH_AT": "volume-move-created"}, timeout=300)
    assert created.rc != 0, created.describe()
    refused = site.a.run("volume", "connect", volume_id, "--target", target)
    assert refused.rc == EXIT_PRECONDITION and "paused while it moves" in refused.stderr, refused.describe()
    assert alice.run("volume", "show", "killed").rc == EXIT_NOT_FOUND  # ambiguous: named by id
    # Run again by the old id: finished, the same volume on B as the killed run made.
    done = alice.ok_json("volume", "move", volume_id, "--to-node", "consumer-b", timeout=300)
    assert alice.volume("killed")["id"] == done["volume_id"]
    lines = differences_across_hosts(expected, describe_tree(directory_of(nodes, done["volume_id"], "consumer-b")))
    assert not lines, "expected the volume on B to equal A's:\n" + "\n".join(lines)
    assert move_snapshots(nodes) == []


def test_an_image_volume_moves_the_same_way_once_disconnected(nodes):
    site, alice = nodes.site, nodes.site.alice
    volume_id = alice.ok_json("volume", "create", "disk", "--node", "consumer-a", "--type", "image",
                              "--size", "64Mi")["id"]
    target = nodes.a_host.dir / "disk"
    site.a.ok("volume", "connect", volume_id, "--target", target)
    (target / "inside.txt").write_text("in the image's filesystem\n")
    # In use: refused (keeping it in use under fsfreeze across the pause is not done yet).
    refused = alice.run("volume", "move", "disk", "--to-node", "consumer-b")
    assert refused.rc == EXIT_PRECONDITION and "is in use" in refused.stderr, refused.describe()
    site.a.ok("volume", "disconnect", volume_id)

    moved = alice.ok_json("volume", "move", "disk", "--to-node", "consumer-b", "--delete-source", timeout=300)
    assert moved["source_deleted"] is True and local_id(moved["volume_id"], "consumer-b"), moved
    shown = alice.volume("disk")
    assert shown["id"] == moved["volume_id"] and shown["fs"] == "ext4" and shown["size_enforced"] is True, shown
    on_b = nodes.b_host.dir / "disk"
    site.b.ok("volume", "connect", "disk", "--target", on_b)
    assert (on_b / "inside.txt").read_text() == "in the image's filesystem\n"
    site.b.ok("volume", "disconnect", "disk")
    assert [v["id"] for v in alice.volumes()] == [moved["volume_id"]]


# ---------------------------------------------------------------- every kill point, run again
#
# The steps of a move and where a kill leaves it (cli/volume_move.cc): pre-copy (the volume as
# it was, snapshots left), pause (paused), final snapshot and its pull (paused), create on B
# (paused, made on B), switch (moved, snapshots left), cleanup. Each kill point of the CLI is
# named by a crash point; one of the source's serve, the receiver's or the controller's is a
# serve killed while the volume is paused, the move run again while it is down, then once it
# is back. Killed after the pause and after the create: the test above.


def killed_move(nodes: Nodes, name: str, crash_at: str, *extra) -> None:
    alice = nodes.site.alice
    killed = alice.run("volume", "move", name, "--to-node", "consumer-b", *extra,
                       env={**alice.env, "ROSETCTL_CRASH_AT": crash_at}, timeout=300)
    assert killed.rc != 0 and "killed" not in killed.stdout, killed.describe()


@pytest.mark.parametrize("crash_at, resumed", [("volume-move-pre-copied", None),
                                               ("volume-move-final-taken", "paused"),
                                               ("volume-move-switched", "moved")])
def test_a_move_killed_at_each_step_finishes_when_run_again(nodes, crash_at, resumed):
    alice = nodes.site.alice
    volume_id, source = placed_volume(nodes, "step", "consumer-a")
    fill_varied(source)
    killed_move(nodes, volume_id, crash_at)
    if resumed is None:
        # Not paused: still A's, and written after the kill; the rerun must carry this too,
        # not stop its pre-copy on the killed run's snapshot.
        assert alice.volume("step")["condition"]["abnormal"] is False
        (source / "after-the-kill.txt").write_text("written between the two runs\n")
    expected = describe_tree(source)

    done = alice.run("volume", "move", volume_id, "--to-node", "consumer-b", "-o", "json", timeout=300)
    assert done.rc == 0, done.describe()
    result = json.loads(done.stdout)
    json_specs()["volume move"].check("volume move", result)
    assert result["resumed"] == resumed, result
    if resumed is None:
        assert "removing 1 snapshot(s) an earlier move" in done.stderr, done.describe()
    if resumed == "paused":
        assert result["rounds"] == [], "expected no pre-copy once paused"
    new_id = result["volume_id"]
    assert alice.volume("step")["id"] == new_id and local_id(new_id, "consumer-b"), result
    lines = differences_across_hosts(expected, describe_tree(directory_of(nodes, new_id, "consumer-b")))
    assert not lines, "expected the volume on B to equal A's:\n" + "\n".join(lines)
    assert move_snapshots(nodes) == []
    assert sorted(v["id"] for v in alice.volumes()) == sorted([volume_id, new_id])
    # Once more: nothing left to do, and it says so.
    again = alice.ok_json("volume", "move", volume_id, "--to-node", "consumer-b", "--delete-source")
    assert again["resumed"] == "moved" and again["volume_id"] == new_id and again["source_deleted"], again
    assert not source.exists()


@pytest.mark.parametrize("party", ["source", "receiver", "controller"])
def test_a_paused_move_whose_party_was_killed_finishes_once_it_is_back(nodes, party):
    site, alice = nodes.site, nodes.site.alice
    volume_id, source = placed_volume(nodes, "party", "consumer-a")
    fill_varied(source)
    expected = describe_tree(source)
    killed_move(nodes, "party", "volume-move-paused")
    serve = {"source": nodes.serve_a, "receiver": nodes.serve_b, "controller": site.serve}[party]
    serve.send_signal(signal.SIGKILL)
    serve.wait(timeout=10)

    down = alice.run("volume", "move", volume_id, "--to-node", "consumer-b", timeout=300)
    assert down.rc != 0, down.describe()
    if party == "receiver":
        # The last delta could not reach B: the volume is given back to A, unpaused.
        assert 'stays on node "consumer-a", unpaused' in down.stderr, down.describe()
        target = nodes.a_host.dir / "party"
        site.a.ok("volume", "connect", volume_id, "--target", target)
        site.a.ok("volume", "disconnect", volume_id)
        nodes.serve_b = start_node(site, nodes.b_host, site.b.env)
    elif party == "source":
        nodes.restart_a()
    else:
        site.start_serve()
    # Paused, or not (the receiver's case): a run finishes, from there. The first runs may find
    # a channel to the restarted serve still in gRPC's reconnect backoff (exit 6, try again).
    deadline = time.monotonic() + 90
    while True:
        done = alice.run("volume", "move", volume_id, "--to-node", "consumer-b", "-o", "json", timeout=300)
        if done.rc != EXIT_BUSY or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert done.rc == 0, done.describe()
    result = json.loads(done.stdout)
    # A run that failed on the way left it paused (the create on B may have happened) or gave it
    # back to A: the last one went on from there.
    assert result["resumed"] in (None, "paused"), result
    new_id = result["volume_id"]
    assert alice.volume("party")["id"] == new_id
    lines = differences_across_hosts(expected, describe_tree(directory_of(nodes, new_id, "consumer-b")))
    assert not lines, "expected the volume on B to equal A's:\n" + "\n".join(lines)
    assert move_snapshots(nodes) == [], "expected no snapshot left, B's copies included"
