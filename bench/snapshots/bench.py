#!/usr/bin/python3
"""Snapshot benchmark: the real rosetctl binary against baselines on the same data in the same run.

Data: 512 MiB of random bytes in 512 files of 1 MiB (the issue's workload), written into a
connected volume. Measured as the wall time of the whole CLI command (process start, state
database and all), and for the short operations also as the latency of the CSI call to a running
`rosetctl serve` (what the external-snapshotter sees; no process start):

  - baseline: SHA-256 of all the data with OpenSSL (Python's hashlib is OpenSSL's EVP), one
    thread, data in the page cache; and `cp -a` of the same tree;
  - first commit; re-commit with nothing changed; re-commit after changing one 1 MiB file;
  - restore into a new volume;
  - 10 commits where 1% of the files change before each: store bytes vs one copy;
  - on xfs with reflink (a loop device the script makes and removes): first commit and restore.

Run as root (it mounts): /usr/bin/python3 bench/snapshots/bench.py [--binary PATH] [--dir DIR]
[--skip-xfs]. Prints a Markdown table; nothing here is part of the test suite.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = 512
FILE_BYTES = 2**20
REPEATS = 5


SOURCE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE_DIR / "tests" / "integration"))


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(map(str, args)), check=True, capture_output=True, text=True, **kwargs)


class Rosetctl:
    def __init__(self, binary: str, state_dir: Path):
        self.binary, self.state_dir = binary, state_dir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ROSETCTL_")}
        self.env["ROSETCTL_CONFIG"] = "/dev/null"

    def __call__(self, *args) -> str:
        return run(self.binary, "--state-dir", self.state_dir, *args, env=self.env).stdout

    def json(self, *args):
        return json.loads(self(*args, "-o", "json"))

    def timed(self, *args) -> tuple[float, str]:
        started = time.perf_counter()
        out = self(*args)
        return time.perf_counter() - started, out


def write_data(root: Path, seed: int = 1) -> None:
    rng = random.Random(seed)
    for i in range(FILES):
        (root / f"file{i:03}.bin").write_bytes(rng.randbytes(FILE_BYTES))


def hash_baseline(root: Path) -> float:
    files = sorted(root.iterdir())
    started = time.perf_counter()
    for path in files:
        hashlib.sha256(path.read_bytes()).hexdigest()
    return time.perf_counter() - started


def cp_baseline(source: Path, scratch: Path) -> float:
    target = scratch / "cp-a-copy"
    started = time.perf_counter()
    run("cp", "-a", source, target)
    elapsed = time.perf_counter() - started
    shutil.rmtree(target)
    return elapsed


def store_bytes(state_dir: Path) -> int:
    total = 0
    for path in (state_dir / "store" / "blobs").rglob("*"):
        if path.is_file():
            total += os.stat(path).st_blocks * 512
    return total


def filesystem_of(path: Path) -> str:
    return run("findmnt", "-n", "-o", "FSTYPE", "--target", path).stdout.strip()


class Serve:
    """`rosetctl serve` on a socket in the scratch dir, with CSI stubs to call it."""

    def __init__(self, cli: Rosetctl, socket_path: Path):
        import csi_stubs
        import grpc
        stubs = socket_path.parent / f"stubs-{socket_path.stem}"
        stubs.mkdir(exist_ok=True)
        self.csi = csi_stubs.generate(stubs)
        self.proc = subprocess.Popen([cli.binary, "--state-dir", str(cli.state_dir), "serve", "--endpoint",
                                      f"unix://{socket_path}"], env=cli.env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.channel = grpc.insecure_channel(f"unix://{socket_path}")
        grpc.channel_ready_future(self.channel).result(timeout=15)
        self.controller = self.csi.grpc.ControllerStub(self.channel)

    def timed(self, method: str, request) -> tuple[float, object]:
        started = time.perf_counter()
        response = getattr(self.controller, method)(request, timeout=600)
        return time.perf_counter() - started, response

    def close(self) -> None:
        self.channel.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def bench_over_serve(cli: Rosetctl, scratch: Path, mount: Path, volume_id: str, label: str) -> dict:
    serve = Serve(cli, scratch / f"csi-{label}.sock")
    pb2 = serve.csi.pb2
    results = {}
    try:
        name = iter(range(10**6))
        snapshot = lambda: serve.timed("CreateSnapshot", pb2.CreateSnapshotRequest(
            name=f"serve-{label}-{next(name)}", source_volume_id=volume_id))
        _, first = snapshot()
        time.sleep(0.2)
        results["serve_recommit_unchanged_s"] = statistics.median(snapshot()[0] for _ in range(REPEATS))
        changed = []
        for i in range(REPEATS):
            (mount / f"file{100 + i:03}.bin").write_bytes(random.Random(2000 + i).randbytes(FILE_BYTES))
            changed.append(snapshot()[0])
        results["serve_recommit_one_changed_s"] = statistics.median(changed)
        capability = pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(),
                                          access_mode=pb2.VolumeCapability.AccessMode(mode=1))
        source = pb2.VolumeContentSource(snapshot=pb2.VolumeContentSource.SnapshotSource(
            snapshot_id=first.snapshot.snapshot_id))
        restores, copies = [], []
        for i in range(3):
            os.sync()
            copies.append(cp_baseline(mount, scratch))
            os.sync()
            restores.append(serve.timed("CreateVolume", pb2.CreateVolumeRequest(
                name=f"serve-restored-{label}-{i}", volume_capabilities=[capability],
                volume_content_source=source))[0])
        results["serve_restore_s"] = statistics.median(restores)
        results["cp_a_beside_serve_restore_s"] = statistics.median(copies)
    finally:
        serve.close()
    return results


def bench_filesystem(binary: str, state_dir: Path, scratch: Path, label: str, full: bool) -> dict:
    cli = Rosetctl(binary, state_dir)
    cli("volume", "create", "bench")
    mount = Path(cli("volume", "connect", "bench", "--target", scratch / f"mnt-{label}").strip())
    results: dict = {"filesystem": filesystem_of(state_dir)}
    try:
        write_data(mount)
        os.sync()
        results["hash_baseline_s"] = hash_baseline(mount)
        results["cp_a_s"] = cp_baseline(mount, scratch)
        os.sync()  # the copy's writeback must not compete with the commit
        results["first_commit_s"], first = cli.timed("snapshot", "commit", "bench", "-m", "first")
        # What any verb costs before doing anything: process start, state database, gRPC.
        results["cli_floor_s"] = statistics.median(cli.timed("volume", "list")[0] for _ in range(REPEATS))
        time.sleep(0.2)  # past the stat cache's racy window for the newest files
        results["recommit_unchanged_s"] = statistics.median(
            cli.timed("snapshot", "commit", "bench")[0] for _ in range(REPEATS))
        changed = []
        for i in range(REPEATS):
            (mount / f"file{i:03}.bin").write_bytes(random.Random(1000 + i).randbytes(FILE_BYTES))
            changed.append(cli.timed("snapshot", "commit", "bench")[0])
        results["recommit_one_changed_s"] = statistics.median(changed)
        # Restores alternate with `cp -a` runs, so both meet the same load on this shared machine.
        restores, copies = [], []
        for i in range(REPEATS if full else 3):
            os.sync()
            copies.append(cp_baseline(mount, scratch))
            os.sync()
            restores.append(cli.timed("snapshot", "restore", first.strip(), "--name", f"restored{i}")[0])
        results["restore_s"] = statistics.median(restores)
        results["cp_a_beside_restore_s"] = statistics.median(copies)
        results.update(bench_over_serve(cli, scratch, mount, cli.json("volume", "show", "bench")["id"], label))
        if full:
            results.update(space_test(cli, mount))
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            cli("volume", "disconnect", "bench")
    return results


def space_test(cli: Rosetctl, mount: Path) -> dict:
    """10 commits with 1% of the files (5 of 512) rewritten before each, from a fresh store."""
    for snapshot in cli.json("snapshot", "list"):
        cli("snapshot", "delete", snapshot["id"])
    cli("snapshot", "gc")
    rng = random.Random(99)
    for round_number in range(10):
        if round_number > 0:
            for i in rng.sample(range(FILES), FILES // 100):
                (mount / f"file{i:03}.bin").write_bytes(rng.randbytes(FILE_BYTES))
        cli("snapshot", "commit", "bench", "-m", f"round {round_number}")
    used = store_bytes(cli.state_dir)
    return {"ten_commits_store_bytes": used, "ten_commits_ratio": used / (FILES * FILE_BYTES)}


@contextlib.contextmanager
def xfs_with_reflink(scratch: Path):
    image = scratch / "xfs.img"
    with open(image, "wb") as f:
        f.truncate(2 * 2**30)
    run("mkfs.xfs", "-q", "-m", "reflink=1", image)
    device = run("losetup", "--find", "--show", image).stdout.strip()
    mount_point = scratch / "xfs"
    mount_point.mkdir()
    try:
        run("mount", "-t", "xfs", device, mount_point)
        try:
            yield mount_point
        finally:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), platform.processor())
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "load_average": os.getloadavg()}


def report(machine_info: dict, ext4: dict, xfs: dict | None) -> str:
    rows = [
        ("SHA-256 of the data (OpenSSL, 1 thread)", ext4["hash_baseline_s"], "baseline"),
        ("`cp -a` of the tree", ext4["cp_a_s"], "baseline"),
        ("first commit", ext4["first_commit_s"],
         f"≤ 1.0 s and ≤ 2× hash = {2 * ext4['hash_baseline_s']:.3f} s"),
        ("`rosetctl volume list`: any CLI verb's fixed cost (median of 5)", ext4["cli_floor_s"], "-"),
        ("re-commit, nothing changed (median of 5)", ext4["recommit_unchanged_s"], "≤ 0.050 s"),
        ("re-commit, one 1 MiB file changed (median of 5)", ext4["recommit_one_changed_s"], "≤ 0.100 s"),
        ("restore into a new volume (median of 5)", ext4["restore_s"],
         f"≤ 1.5× cp -a run alternately = {1.5 * ext4['cp_a_beside_restore_s']:.3f} s"),
        ("over serve: CreateSnapshot, nothing changed", ext4["serve_recommit_unchanged_s"], "≤ 0.050 s"),
        ("over serve: CreateSnapshot, one 1 MiB file changed", ext4["serve_recommit_one_changed_s"], "≤ 0.100 s"),
        ("over serve: CreateVolume from the snapshot (median of 3)", ext4["serve_restore_s"],
         f"≤ 1.5× cp -a run alternately = {1.5 * ext4['cp_a_beside_serve_restore_s']:.3f} s"),
    ]
    lines = [f"machine: {machine_info}", "", f"### {ext4['filesystem']} (the state dir's filesystem)", "",
             "| measurement | seconds | target |", "|---|---|---|"]
    lines += [f"| {name} | {value:.3f} | {target} |" for name, value, target in rows]
    lines.append(f"| 10 commits, 1% of files changed each: store bytes / one copy | "
                 f"{ext4['ten_commits_ratio']:.3f} ({ext4['ten_commits_store_bytes']} bytes) | ≤ 1.15 |")
    if xfs:
        lines += ["", "### xfs with reflink (loop device)", "", "| measurement | seconds | target |",
                  "|---|---|---|",
                  f"| `cp -a` of the tree (run alternately with the restores) | {xfs['cp_a_beside_restore_s']:.3f} | baseline |",
                  f"| first commit | {xfs['first_commit_s']:.3f} | - |",
                  f"| re-commit, nothing changed | {xfs['recommit_unchanged_s']:.3f} | - |",
                  f"| re-commit, one 1 MiB file changed | {xfs['recommit_one_changed_s']:.3f} | - |",
                  f"| restore into a new volume (median of 3) | {xfs['restore_s']:.3f} | ≤ 0.100 s |",
                  f"| over serve: CreateVolume from the snapshot | {xfs['serve_restore_s']:.3f} | ≤ 0.100 s |"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=str(Path(__file__).resolve().parents[2] / "build/release/src/rosetctl"))
    parser.add_argument("--dir", default="/var/tmp", help="where the ext4 scratch directory goes")
    parser.add_argument("--skip-xfs", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench.py mounts volumes and loop devices: run it as root", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="rosetctl-bench-", dir=args.dir))
    try:
        ext4 = bench_filesystem(args.binary, scratch / "state", scratch, "ext4", full=True)
        xfs = None
        if not args.skip_xfs:
            with xfs_with_reflink(scratch) as mount_point:
                try:
                    xfs = bench_filesystem(args.binary, mount_point / "state", scratch, "xfs", full=False)
                finally:
                    for target in mount_point.glob("state/staging/*"):
                        subprocess.run(["umount", "-l", str(target)], capture_output=True)
        print(report(machine(), ext4, xfs))
        print("\n```json\n" + json.dumps({"ext4": ext4, "xfs": xfs}, indent=1) + "\n```")
    finally:
        for target in sorted(scratch.glob("mnt-*")):
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
        for target in sorted(scratch.glob("state/staging/*")):
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
