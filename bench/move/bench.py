#!/usr/bin/python3
"""The write pause of `rosetctl volume move` (issue 38, "Measure") against the by-hand recipe users
describe (rsync while in use, stop the writer, rsync the rest, switch), in the same lab and run.

The lab of tests/integration/test_volume_move.py: a controller and two nodes A and B
(host_lab.py: network namespaces on one bridge), each `serve` with its own state directory and
mTLS certificate. For each case (volume size, writer rate), a directory volume placed on A is
filled with random files of 16 MiB, connected on A, and a writer appends to a file in it at the
rate given. Then:

  rosetctl  `volume move VOL --to-node B --wait-unpublished 600` runs; once it waits for the
            disconnect (its pre-copy done), the writer stops and the volume is disconnected; the
            write pause is from the writer's last write until the volume is connected on B
            (the move's own `pause_ms` is from its pause to the switch, given apart)
  by hand   `rsync -a --delete` of A's directory to an rsync daemon on B while the writer runs
            (as many rounds as the move's pre-copy made), the writer stopped, one more rsync
            (the final delta): the write pause is that rsync's time, without any switch

The write pause is also given in parts (`write_pause_parts`, seconds): until the disconnect on A
has returned (from the last write), the move's run after that (its notice of the disconnect, the
last delta and switch, and the cleanup after the switch, timed by the steps it says on stderr as
they arrive, where the build says them), and `volume connect` on B. `move_lines` are the move's
stderr lines from the last write on, with their times; `cli_s` every `volume connect` and
`disconnect` run on its own (BENCH_BARE_RUNS more of each after the case, 5 by default).

Prints one JSON object. The binary is ROSETCTL_BIN's (every serve of the lab and every CLI run),
else the repository's build/release/src/rosetctl. Run as root from the repository:
  sudo /usr/bin/python3 bench/move/bench.py                # 1 GiB at 10 and 1 MB/s
  BENCH_CASES=4096:10 sudo /usr/bin/python3 bench/move/bench.py
"""
from __future__ import annotations

import json
import subprocess
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
os.environ.setdefault("ROSETCTL_BIN", str(REPO / "build/release/src/rosetctl"))

from controller_site import build_site  # noqa: E402
from host_lab import HostLab, wait_for_port  # noqa: E402
from test_snapshot_streaming import Nodes, placed_volume  # noqa: E402

MiB = 2**20
FILE = 16 * MiB
CASES = [tuple(int(x) for x in case.split(":"))
         for case in os.environ.get("BENCH_CASES", "1024:10,1024:1").split(",")]


WRITER = os.environ.get("BENCH_WRITER", "files")


class Writer(threading.Thread):
    """Writes 1 MiB pieces at RATE MB/s until stopped, each to a new file beside PATH
    (BENCH_WRITER=files, a log rotated every MiB) or all appended to PATH (append); `last` is its
    last write's end."""

    def __init__(self, path: Path, rate_mb: int):
        super().__init__(daemon=True)
        self.path = path
        self.interval = MiB / (rate_mb * 1e6)
        self.stopping, self.last, self.written = threading.Event(), 0.0, 0

    def run(self) -> None:
        next_at = time.monotonic()
        while not self.stopping.is_set():
            piece = os.urandom(MiB)  # fresh data: identical pieces would be stored once
            name = self.path if WRITER == "append" else self.path.with_name(f"{self.path.name}.{self.written // MiB}")
            with open(name, "ab") as out:
                out.write(piece)
            self.last = time.monotonic()
            self.written += MiB
            next_at += self.interval
            time.sleep(max(0.0, next_at - time.monotonic()))

    def bytes_at(self, directory: Path) -> int:
        return sum(p.stat().st_size for p in directory.glob(f"{self.path.name}*"))

    def stop(self) -> float:
        self.stopping.set()
        self.join()
        return self.last


def fill(path: Path, size_mib: int) -> None:
    for i in range(size_mib * MiB // FILE):
        (path / f"f{i:04d}.bin").write_bytes(os.urandom(FILE))


def move_case(nodes: Nodes, name: str, size_mib: int, rate_mb: int) -> dict:
    site = nodes.site
    volume_id, source = placed_volume(nodes, name, "consumer-a")
    fill(source, size_mib)
    target = nodes.a_host.dir / name
    site.a.ok("volume", "connect", volume_id, "--target", target)
    writer = Writer(target / "writer.log", rate_mb)
    writer.start()
    time.sleep(2)
    argv = site.alice.argv(["volume", "move", name, "--to-node", "consumer-b", "--wait-unpublished", "600",
                            "-o", "json"])
    started = time.monotonic()
    move = nodes.a_host.start(argv, env=site.alice.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    steps = StepLines(move.stderr)
    steps.wait_for("to be disconnected", move)
    pre_copy_s = time.monotonic() - started
    last_write = writer.stop()
    timed_run(site.a, "disconnect", volume_id)
    disconnected = time.monotonic()
    stdout = move.stdout.read()
    assert move.wait(timeout=1200) == 0, steps.text()
    steps.join()
    move_done = time.monotonic()
    moved = json.loads(stdout)
    on_b = nodes.b_host.dir / name
    began = time.monotonic()
    timed_run(site.b, "connect", name, "--target", on_b)
    usable = time.monotonic()
    assert writer.bytes_at(on_b) == writer.written, "expected every write on B"
    timed_run(site.b, "disconnect", name)
    for _ in range(BARE_RUNS):  # the CLI runs alone, with nothing else going on
        timed_run(site.b, "connect", name, "--target", on_b)
        timed_run(site.b, "disconnect", name)
    # Where the write pause goes, in seconds from the writer's last write: the steps the move
    # printed (since it waits for the disconnect) are timed as they arrive.
    paused, switched = steps.at(" is paused on node"), steps.at(" is switched to node")
    breakdown = {"until_disconnected_s": round(disconnected - last_write, 3),
                 "move_after_disconnect_s": round(move_done - disconnected, 3),
                 "connect_cli_s": round(usable - began, 3)}
    if paused and switched:  # since the move says so (older builds do not)
        breakdown.update({"noticed_s": round(paused - disconnected, 3),
                          "delta_and_switch_s": round(switched - paused, 3),
                          "after_switch_s": round(move_done - switched, 3)})
    return {"size_MiB": size_mib, "writer_MB_per_s": rate_mb, "pre_copy_s": round(pre_copy_s, 2),
            "rounds_MiB": [round(r["bytes_sent"] / MiB, 1) for r in moved["rounds"]],
            "final_MiB": round(moved["final_bytes_sent"] / MiB, 2), "move_pause_ms": moved["pause_ms"],
            "write_pause_s": round(usable - last_write, 3), "write_pause_parts": breakdown,
            "move_lines": [[round(when - last_write, 3), line.strip()[:90]] for when, line in steps.lines
                           if when >= last_write],
            "rounds": len(moved["rounds"])}


class StepLines(threading.Thread):
    """The move's stderr lines, each with the time it arrived."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.lines, self.arrived = stream, [], threading.Condition()
        self.start()

    def run(self) -> None:
        for line in self.stream:
            with self.arrived:
                self.lines.append((time.monotonic(), line))
                self.arrived.notify_all()

    def text(self) -> str:
        return "".join(line for _, line in self.lines)

    def at(self, words: str) -> float | None:
        return next((when for when, line in self.lines if words in line), None)

    def wait_for(self, words: str, process) -> None:
        with self.arrived:
            while not any(words in line for _, line in self.lines):
                assert process.poll() is None, self.text()
                self.arrived.wait(0.02)


def timed_run(cli, verb: str, *args) -> None:
    began = time.monotonic()
    cli.ok("volume", verb, *args)
    TIMES.setdefault(verb, []).append(round(time.monotonic() - began, 3))


TIMES: dict[str, list[float]] = {}  # every `volume connect` and `disconnect`, in seconds
BARE_RUNS = int(os.environ.get("BENCH_BARE_RUNS", "5"))


def by_hand_case(nodes: Nodes, name: str, size_mib: int, rate_mb: int, rounds: int, rsync_root: Path) -> dict:
    source = nodes.a_host.dir / f"{name}-by-hand"
    source.mkdir()
    fill(source, size_mib)
    writer = Writer(source / "writer.log", rate_mb)
    writer.start()
    time.sleep(2)
    destination = f"rsync://{nodes.b_host.address}:8730/bench/{name}/"
    pre = []
    for _ in range(max(1, rounds)):
        began = time.monotonic()
        done = nodes.a_host.run(["rsync", "-a", "--delete", f"{source}/", destination], timeout=1200)
        assert done.rc == 0, done.describe()
        pre.append(round(time.monotonic() - began, 2))
    last_write = writer.stop()
    done = nodes.a_host.run(["rsync", "-a", "--delete", f"{source}/", destination], timeout=1200)
    assert done.rc == 0, done.describe()
    finished = time.monotonic()
    assert writer.bytes_at(rsync_root / name) == writer.written
    return {"size_MiB": size_mib, "writer_MB_per_s": rate_mb, "pre_copy_rsync_s": pre,
            "write_pause_s": round(finished - last_write, 3)}


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("bench/move/bench.py: run as root (network namespaces, mounts)")
    with tempfile.TemporaryDirectory(prefix="rosetctl-bench-move-", dir="/var/tmp") as work:
        try:
            with HostLab(Path(work)) as lab:
                site = build_site(lab)
                nodes = Nodes(site)
                rsync_root = nodes.b_host.dir / "rsync"
                rsync_root.mkdir()
                conf = nodes.b_host.dir / "rsyncd.conf"
                conf.write_text(f"uid = root\ngid = root\nuse chroot = no\n[bench]\npath = {rsync_root}\n"
                                "read only = no\n")
                rsyncd = nodes.b_host.start(["rsync", "--daemon", "--no-detach", f"--config={conf}",
                                             f"--address={nodes.b_host.address}", "--port=8730"])
                wait_for_port(nodes.a_host, nodes.b_host.address, 8730, timeout=15, process=rsyncd)
                results = []
                for i, (size_mib, rate_mb) in enumerate(CASES):
                    ours = move_case(nodes, f"v{i}", size_mib, rate_mb)
                    theirs = by_hand_case(nodes, f"v{i}", size_mib, rate_mb, ours["rounds"], rsync_root)
                    results.append({"rosetctl": ours, "by_hand": theirs,
                                    "pause_ratio": round(ours["write_pause_s"] / theirs["write_pause_s"], 2)})
                    site.alice.ok("volume", "delete", site.alice.volume(f"v{i}")["id"])
                print(json.dumps({"load_average": os.getloadavg(), "writer": WRITER, "binary": os.environ["ROSETCTL_BIN"],
                                  "cases": results, "cli_s": TIMES}, indent=1))
        finally:
            # A failed case leaves its volume connected: the lab's mounts go before its directory.
            mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                      if line.split()[4].startswith(work)]
            for mount in sorted(mounts, key=len, reverse=True):
                subprocess.run(["umount", "-l", mount], check=False)


if __name__ == "__main__":
    main()
