#!/usr/bin/python3
"""What a `rosetctl` process costs: median wall time of --version, `volume list` and an
unchanged re-commit of a one-file directory volume, in a fresh state dir. Needs root (the
volume is connected to write its file). Results: bench/README.md, "CLI start-up"."""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def median_ms(argv: list[str], env: dict, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", default="build/release/src/rosetctl")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    binary = str(Path(args.binary).resolve())
    with tempfile.TemporaryDirectory(prefix="rosetctl-startup-", dir="/var/tmp") as work:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "ROSETCTL_STATE_DIR": f"{work}/state"}
        target = Path(work) / "mnt"
        run = lambda *a: subprocess.run([binary, *a], env=env, stdout=subprocess.DEVNULL, check=True)
        run("volume", "create", "d")
        run("volume", "connect", "d", "--target", str(target))
        try:
            (target / "file").write_bytes(os.urandom(4096))
            run("snapshot", "commit", "d", "-m", "first")
            for verb in (["--version"], ["volume", "list"], ["snapshot", "commit", "d", "-m", "again"]):
                print(f"{' '.join(verb):32} {median_ms([binary, *verb], env, args.runs):6.1f} ms")
        finally:
            run("volume", "disconnect", "d")


if __name__ == "__main__":
    main()
