"""Issue 31 row 14: a clone across nodes whose controller and caller are both killed midway, never
retried, left its snapshot on the source node (and nothing collected it). The controller records
each clone's snapshot before anything can leave it behind (<state-dir>/clones/) and takes up what
is recorded when it starts serving again: the snapshot goes from both nodes, the record with it.
"""
from __future__ import annotations

import signal
import time

from rosetctl_cli import binary_path
from test_snapshot_streaming import Nodes, nodes, placed_volume  # noqa: F401  (the fixture)


def snapshot_names(cli) -> list[str]:
    return sorted(s["name"] for s in cli.ok_json("snapshot", "list"))


def test_the_snapshot_of_a_clone_killed_midway_is_removed_when_the_controller_starts_again(nodes: Nodes):
    site = nodes.site
    source_id, source = placed_volume(nodes, "src", "consumer-a")
    (source / "f").write_text("data")

    # The controller dies (SIGKILL) right after the snapshot for the clone exists on A.
    site.serve.send_signal(signal.SIGTERM)
    site.serve.wait(timeout=20)
    site.serve = site.controller.start(site.serve_argv(), env={**site.roset_env,
                                                               "ROSETCTL_CRASH_AT": "clone-snapshot-taken"})
    site.serves.append(site.serve)
    caller = site.consumer_a.start([binary_path(), "volume", "create", "copy", "--node", "consumer-b",
                                    "--from-volume", source_id], env=site.alice.env)
    assert site.serve.wait(timeout=60) == -signal.SIGKILL, site.serve.output()
    caller.send_signal(signal.SIGKILL)  # and the caller: nobody retries
    caller.wait(timeout=10)
    left = snapshot_names(nodes.a)
    assert len(left) == 1 and left[0].startswith("clone-"), left
    intents = list((site.controller.state_dir / "clones").glob("*.clone"))
    assert len(intents) == 1, intents

    # Serving again, the controller removes it from A (and B's copy, had it one) and forgets it.
    site.start_serve()
    deadline = time.monotonic() + 30
    while snapshot_names(nodes.a) or list((site.controller.state_dir / "clones").glob("*.clone")):
        assert time.monotonic() < deadline, (snapshot_names(nodes.a), site.serve.output())
        time.sleep(0.3)
    assert "of an interrupted clone of \"copy\" onto node \"consumer-b\"" in site.serve.output()
    assert snapshot_names(nodes.b) == []
    assert [v["name"] for v in nodes.b.ok_json("volume", "list")] == []
