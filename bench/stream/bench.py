#!/usr/bin/python3
"""Snapshot streaming between nodes (issue 22) against rsync, in the same network namespaces and
the same run.

A controller (192.0.2.1) and two nodes A and B (host_lab.py: network namespaces on one bridge),
each `serve` with its own state directory and mTLS certificate; A holds a directory volume of
512 files of 1 MiB (random data) and a snapshot of it. Measured, alternating, ROUNDS times:

  rosetctl  B's `rosetctl --controller snapshot pull S --from-node A` (B dials A directly at its
            registered address; each round's `route` says so), from an empty store on B each round
  rsync     `rsync -a` of the same directory from A to an rsync daemon on B, into an empty
            directory each round

then, once each, the re-transfer after one file of the tree changed: A commits again and B pulls
the new snapshot (the commit's time is given apart), and rsync -a again. Prints one JSON object.

Run as root from the repository, with a release build: sudo /usr/bin/python3 bench/stream/bench.py
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from host_lab import HostLab, wait_for_port  # noqa: E402

BIN = os.environ.get("ROSETCTL_BIN", str(REPO / "build/release/src/rosetctl"))
FILES = int(os.environ.get("BENCH_FILES", "512"))
FILE_BYTES = int(os.environ.get("BENCH_FILE_BYTES", str(2**20)))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
PORT = 9443


def run(host, *argv, env=None) -> tuple[float, str]:
    start = time.monotonic()
    done = host.run([str(a) for a in argv], env=env, timeout=600)
    elapsed = time.monotonic() - start
    if done.rc != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} on {host.name} failed: {done.describe()}")
    return elapsed, done.stdout


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="rosetctl-streambench-", dir="/var/tmp"))
    try:
        with HostLab(workdir) as lab:
            bench(lab)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def bench(lab: HostLab) -> None:
    ctl, a, b = lab.add("controller"), lab.add("node-a"), lab.add("node-b")
    tls = ctl.config_dir / "tls"
    run(ctl, BIN, "tls", "init", "--dir", tls, "--ip", ctl.address)
    for host in (a, b):
        run(ctl, BIN, "tls", "issue", host.name, "--dir", tls, "--ip", host.address)
    serve = ctl.start([BIN, "serve", "--role", "controller", "--listen", f"{ctl.address}:{PORT}",
                       "--endpoint", f"unix://{ctl.dir}/csi.sock", "--state-dir", ctl.state_dir,
                       "--node-id", "controller", "--tls-cert", tls / "controller.crt",
                       "--tls-key", tls / "controller.key", "--tls-ca", tls / "ca.crt"])
    wait_for_port(a, ctl.address, PORT, timeout=15, process=serve)
    env = {}
    for host in (a, b):
        env[host.name] = {"ROSETCTL_CONTROLLER": f"{ctl.address}:{PORT}", "ROSETCTL_NODE_ID": host.name,
                          "ROSETCTL_TLS_CERT": str(tls / f"{host.name}.crt"),
                          "ROSETCTL_TLS_KEY": str(tls / f"{host.name}.key"),
                          "ROSETCTL_TLS_CA": str(tls / "ca.crt")}
    local_a = {"ROSETCTL_NODE_ID": "node-a"}
    serve_a = a.start([BIN, "serve", "--role", "node", "--listen", f"{a.address}:9444", "--endpoint",
                       f"unix://{a.dir}/csi.sock", "--state-dir", a.state_dir], env=env["node-a"])
    serve_b = b.start([BIN, "serve", "--role", "node", "--listen", f"{b.address}:9444", "--endpoint",
                       f"unix://{b.dir}/csi.sock", "--state-dir", b.state_dir], env=env["node-b"])
    for host, proc in ((a, serve_a), (b, serve_b)):
        wait_for_port(ctl, host.address, 9444, timeout=15, process=proc)
    time.sleep(2)  # the heartbeats register both nodes

    # A's volume: FILES files of FILE_BYTES random bytes.
    _, out = run(a, BIN, "--state-dir", a.state_dir, "volume", "create", "data", "-o", "json", env=local_a)
    source = a.state_dir / "volumes" / json.loads(out)["id"]
    source.mkdir(exist_ok=True)
    for i in range(FILES):
        (source / f"file{i:04}").write_bytes(os.urandom(FILE_BYTES))
    commit_s, _ = run(a, BIN, "--state-dir", a.state_dir, "snapshot", "commit", "data", "--name", "s1",
                      env=local_a)

    # rsync daemon on B.
    rsync_root = b.dir / "rsync"
    rsync_root.mkdir()
    conf = b.dir / "rsyncd.conf"
    conf.write_text(f"uid = root\ngid = root\nuse chroot = no\n[bench]\npath = {rsync_root}\nread only = no\n")
    rsyncd = b.start(["rsync", "--daemon", "--no-detach", f"--config={conf}", f"--address={b.address}",
                      "--port=8730"])
    wait_for_port(a, b.address, 8730, timeout=15, process=rsyncd)
    target = f"rsync://{b.address}:8730/bench/data/"

    def pull(snapshot: str) -> tuple[float, dict]:
        elapsed, out = run(b, BIN, "--state-dir", b.state_dir, "snapshot", "pull", snapshot, "--from-node",
                           "node-a", "-o", "json", env=env["node-b"])
        return elapsed, json.loads(out)

    def empty_b() -> None:
        """B forgets the snapshot: its record and its objects (so the next pull moves everything)."""
        run(b, BIN, "--state-dir", b.state_dir, "snapshot", "delete", "s1", env={"ROSETCTL_NODE_ID": "node-b"})
        run(b, BIN, "--state-dir", b.state_dir, "snapshot", "gc", env={"ROSETCTL_NODE_ID": "node-b"})

    rounds = []
    for round_number in range(ROUNDS):
        if round_number:
            empty_b()
        shutil.rmtree(rsync_root / "data", ignore_errors=True)
        # Each transfer starts with nothing dirty in the page cache (untimed): a pull makes its
        # blobs durable, so it would otherwise also wait for the writeback of what ran before it
        # (A's commit, rsync's 512 MiB of the round before), which rsync never waits for.
        os.sync()
        ours, result = pull("s1")
        os.sync()
        theirs, _ = run(a, "rsync", "-a", f"{source}/", target)
        rounds.append({"rosetctl_s": round(ours, 3), "rsync_s": round(theirs, 3),
                       "rosetctl_bytes_sent": result["bytes_sent"], "route": result.get("route")})

    # One file changes on A; both move the change.
    (source / "file0100").write_bytes(os.urandom(FILE_BYTES))
    commit2_s, _ = run(a, BIN, "--state-dir", a.state_dir, "snapshot", "commit", "data", "--name", "s2",
                       env=local_a)
    os.sync()
    again_s, again = pull("s2")
    rsync_again_s, _ = run(a, "rsync", "-a", "--stats", f"{source}/", target)

    total = FILES * FILE_BYTES
    print(json.dumps({
        "machine": f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}",
        "files": FILES, "bytes": total, "commit_on_a_s": round(commit_s, 3),
        "rounds": rounds,
        "rosetctl_MiB_per_s": [round(total / 2**20 / r["rosetctl_s"], 1) for r in rounds],
        "rsync_MiB_per_s": [round(total / 2**20 / r["rsync_s"], 1) for r in rounds],
        "ratio_rosetctl_time_over_rsync": [round(r["rosetctl_s"] / r["rsync_s"], 2) for r in rounds],
        "after_one_change": {"commit_on_a_s": round(commit2_s, 3), "rosetctl_pull_s": round(again_s, 3),
                             "rosetctl_bytes_sent": again["bytes_sent"], "rosetctl_objects_sent": again["objects_sent"],
                             "rsync_s": round(rsync_again_s, 3)},
    }, indent=1))


if __name__ == "__main__":
    main()
