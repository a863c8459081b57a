"""The bounded random-fault soak (issue 24 item 1): tests/soak/soak.py with 40 kills of serve
(and CLI runs killed mid-call), in about two minutes on two cores. The seed is printed, and kept
with the run's figures in soak-seeds.log beside the build's `src/` (ROSETCTL_SOAK_SEED_LOG to
put it elsewhere); set ROSETCTL_SOAK_SEED to replay one, ROSETCTL_SOAK_KILLS to change the
count. The long run is bench/soak/run.sh (500 kills; figures in bench/README.md)."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soak"))

import soak  # noqa: E402
from soak import run_soak  # noqa: E402

# Every kind of call must have been answered OK at least once: a serve that refused all stagings
# (or all restores) would otherwise keep every invariant by never making anything to check.
CALLS_THAT_MUST_GO_THROUGH = ("create", "clone", "restore", "expand", "stage", "publish", "unpublish",
                              "unstage", "snapshot", "delete")


def seed_log(binary: str) -> Path:
    return Path(os.environ.get("ROSETCTL_SOAK_SEED_LOG") or Path(binary).resolve().parents[1] / "soak-seeds.log")


def test_serve_killed_at_random_keeps_every_invariant(workdir, rosetctl_binary, capsys):
    seed = int(os.environ.get("ROSETCTL_SOAK_SEED") or random.randrange(2**31))
    kills = int(os.environ.get("ROSETCTL_SOAK_KILLS") or 40)
    lines: list[str] = []
    kept = seed_log(rosetctl_binary)

    def keep(message: str):
        with open(kept, "a") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n")

    def log(message: str):
        lines.append(message)
        with capsys.disabled():
            print(message, flush=True)

    # Kept before the run, so that a run that hangs or crashes still leaves its seed behind.
    keep(f"soak seed {seed}: {kills} kills starting (replay with ROSETCTL_SOAK_SEED={seed})")
    log(f"soak seed {seed} (replay with ROSETCTL_SOAK_SEED={seed}; kept in {kept})")
    started = time.monotonic()
    stats = run_soak(kills, seed=seed, workdir=workdir / "soak-run", binary=rosetctl_binary, log=log)
    took = time.monotonic() - started
    keep(f"{lines[-1]} in {took:.0f} s")
    assert stats.kills == kills, f"expected {kills} kills (seed {seed}): {lines[-3:]}"
    assert stats.ok > kills, f"expected the clients to get calls through between kills (seed {seed})"
    assert not stats.violations, (
        f"seed {seed} (replay with ROSETCTL_SOAK_SEED={seed}): {len(stats.violations)} violations in "
        f"{took:.0f}s:\n" + "\n".join(stats.violations[:20]))
    never = [call for call in CALLS_THAT_MUST_GO_THROUGH if not stats.ok_by_call.get(call)]
    assert not never, f"expected every kind of call answered OK at least once, never {never} (seed {seed}): {lines[-1]}"
    assert stats.copies_checked > 0, f"expected restores and clones compared with their source (seed {seed})"


def test_the_soak_notices_what_no_record_knows(workdir, rosetctl_binary):
    """The checker itself: a mount under the work directory that no OK answer made, and a
    publication whose file is gone, are violations (so a clean soak means something)."""
    from soak import Soak, Volume  # noqa: E402

    run_dir = workdir / "check"
    run_dir.mkdir()
    soak = Soak(run_dir, rosetctl_binary, seed=1, kills=0, clients=1, log=lambda message: None)
    try:
        stray = run_dir / "c0" / "stray"
        stray.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "stray", str(stray)], check=True)
        soak.check_nothing_unknown([])
        assert any(str(stray) in v for v in soak.stats.violations), soak.stats.violations

        soak.serve.start()
        published = Volume("gone", "local-0123456789abcdef", "dir", 0, {}, target=stray, marker="written")
        soak.check_mounts_of(published)
        assert any("reads" in v and "gone" in v for v in soak.stats.violations), soak.stats.violations
    finally:
        soak.close()


def test_a_call_that_meets_a_killed_serve_is_retried_not_a_crash(workdir, rosetctl_binary):
    """A client still inside its call when serve is killed (the soak kills while calls are in
    flight) gets UNAVAILABLE, which the soak retries after the restart: it must never find the
    channel gone (a client once crashed on `ControllerStub(None)` when a kill fell between the
    two RPCs of a stage)."""
    import grpc  # noqa: E402
    from soak import Soak  # noqa: E402

    run_dir = workdir / "killed"
    run_dir.mkdir()
    soak = Soak(run_dir, rosetctl_binary, seed=1, kills=0, clients=1, log=lambda message: None)
    try:
        soak.serve.start()
        client = soak.clients[0]
        soak.serve.kill()
        soak.killing = True
        made = client.op_create()
        client.attempt(made)
        assert client.pending is made, "expected the call a kill interrupted to wait for its retry"
        assert not soak.stats.violations, soak.stats.violations
        soak.killing = False
        soak.serve.start()
        client.retry_pending()
        assert client.pending is None and not soak.stats.violations, soak.stats.violations
        assert [v.name for v in client.volumes.values()] == [made[3].name], client.volumes
    finally:
        soak.close()


def test_a_call_that_stays_aborted_is_retried_then_a_violation(workdir, rosetctl_binary, monkeypatch):
    """ABORTED is retried with backoff, as a CO retries it, and a call that answers nothing else
    is a violation once the patience runs out: a serve whose NodeStage always said ABORTED once
    passed the soak, which counted ABORTED as a refusal and dropped the call."""
    from soak import Soak  # noqa: E402

    monkeypatch.setattr(soak, "ABORTED_PATIENCE", 0.5)
    run_dir = workdir / "aborted"
    run_dir.mkdir()
    runner = Soak(run_dir, rosetctl_binary, seed=1, kills=0, clients=1, log=lambda message: None)
    try:
        runner.serve.start()
        client = runner.clients[0]
        pb2 = runner.csi.pb2
        # A starting token serve never issued: ABORTED on every try ("start the listing again").
        request = pb2.ListSnapshotsRequest(starting_token="not-a-token")
        client.attempt(("list snapshots", "controller", "ListSnapshots", request, lambda response: None))
        assert runner.stats.refused.get("ABORTED", 0) >= 3, f"expected ABORTED retried with backoff: {runner.stats}"
        assert len(runner.stats.violations) == 1 and "still ABORTED after" in runner.stats.violations[0], (
            runner.stats.violations)
    finally:
        runner.close()


def test_a_copy_that_does_not_hold_its_source_is_a_violation(workdir, rosetctl_binary):
    """The checker compares each restore and clone with its source: a copy answered OK that lacks
    what its source held (the model's content here says the source had a file the copy never
    got) is a violation; a faithful copy is not."""
    from soak import Soak  # noqa: E402

    run_dir = workdir / "copies"
    run_dir.mkdir()
    runner = Soak(run_dir, rosetctl_binary, seed=1, kills=0, clients=1, log=lambda message: None)
    try:
        runner.serve.start()
        client = runner.clients[0]
        for kind in ("dir", "image", "block"):
            client.attempt(client.op_create(kind))
            [source] = [v for v in client.volumes.values() if v.kind == kind and "copy" not in v.name]
            client.attempt(client.op_stage())
            client.attempt(client.op_publish())  # writes into the source
            client.attempt(client.op_snapshot())
            assert source.snapshots, runner.stats.violations
            client.attempt(client.op_copy(source, restore=True))
            client.attempt(client.op_copy(source, restore=False))
            assert not runner.stats.violations, f"{kind}: {runner.stats.violations}"
            client.attempt(client.op_unpublish())
            client.attempt(client.op_unstage())

            source.content["lost-in-the-copy"] = b"the source had this"
            client.attempt(client.op_copy(source, restore=False))
            assert len(runner.stats.violations) == 1 and "lost-in-the-copy" in runner.stats.violations[0], (
                f"{kind}: {runner.stats.violations}")
            runner.stats.violations.clear()
            [snapshot_id] = source.snapshots.values()
            client.snapshot_content[snapshot_id]["lost-in-the-copy"] = b"the snapshot had this"
            client.attempt(client.op_copy(source, restore=True))
            assert len(runner.stats.violations) == 1 and "lost-in-the-copy" in runner.stats.violations[0], (
                f"{kind}: {runner.stats.violations}")
            runner.stats.violations.clear()
            for _ in list(client.volumes):
                client.attempt(client.op_delete())
            client.volumes.clear()
    finally:
        runner.close()
