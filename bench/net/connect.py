#!/usr/bin/python3
"""`volume connect` and `volume disconnect` of a roset volume on a consumer host, p50 and p99 of
the CLI's wall time (process start to exit), over mutual TLS to a controller in another network
namespace (issue 19), against the same verbs on the controller host without --controller in the
same run, alternating cycle by cycle. Results in bench/README.md.

The hosts are the across-hosts tests' lab (tests/integration/host_lab.py, controller_site.py):
network namespaces on one bridge, certificates from `rosetctl tls`, the fake Roset API on the
controller host and the stand-in roset-fuse (bindfs) on each host that connects.

Run as root from the repository, after a release build:
    sudo /usr/bin/python3 bench/net/connect.py [--cycles N]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
os.environ.setdefault("ROSETCTL_BIN", str(ROOT / "build" / "release" / "src" / "rosetctl"))

from controller_site import build_site  # noqa: E402
from host_lab import HostLab  # noqa: E402

STANDIN_FUSE = ROOT / "tests" / "integration" / "bin" / "roset-fuse"


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def timed(cli, *args) -> float:
    started = time.perf_counter()
    result = cli.run(*args)
    took = time.perf_counter() - started
    if result.rc != 0:
        raise SystemExit(f"rosetctl {' '.join(map(str, args))} failed: {result.describe()}")
    return took * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200, help="connect+disconnect cycles per side")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rosetctl-connectbench-", dir="/var/tmp"))
    try:
        with HostLab(work) as lab:
            site = build_site(lab)
            api_key = site.controller.config_dir / "roset.key"
            for cli in (site.a, site.ctl):  # each connecting host has its own copy of the key
                own_key = cli.host.config_dir / "connect-bench.key"
                shutil.copyfile(api_key, own_key)
                os.chmod(own_key, 0o600)
                cli.env.update({"ROSET_API_URL": site.roset_env["ROSET_API_URL"],
                                "ROSET_API_KEY_FILE": str(own_key), "ROSET_FUSE_BINARY": str(STANDIN_FUSE)})
            sides = {"consumer (--controller, mutual TLS)": (site.a, "remote"),
                     "controller host (no --controller)": (site.ctl, "local")}
            volumes = {}
            for name, (cli, vol) in sides.items():
                volumes[name] = cli.ok_json("volume", "create", f"bench-{vol}", "-p", "provider=roset")["id"]
                # One untimed cycle: the shared roset-fuse and the directories exist from then on.
                target = cli.host.dir / f"bench-{vol}"
                cli.ok("volume", "connect", volumes[name], "--target", target)
                cli.ok("volume", "disconnect", volumes[name])
            samples = {name: {"connect": [], "disconnect": []} for name in sides}
            for _ in range(options.cycles):
                for name, (cli, vol) in sides.items():
                    target = cli.host.dir / f"bench-{vol}"
                    samples[name]["connect"].append(timed(cli, "volume", "connect", volumes[name], "--target", target))
                    samples[name]["disconnect"].append(timed(cli, "volume", "disconnect", volumes[name]))
            for name, (cli, _) in sides.items():
                cli.ok("volume", "delete", volumes[name])

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                      if line.startswith("model name")), "?")
        print(f"machine: {os.cpu_count()} CPUs ({model}), load {os.getloadavg()[0]:.1f}, commit {commit}, "
              f"{options.cycles} cycles each, alternating")
        print("| where | connect p50 | connect p99 | disconnect p50 | disconnect p99 |")
        print("|---|---|---|---|---|")
        for name in sides:
            c, d = samples[name]["connect"], samples[name]["disconnect"]
            print(f"| {name} | {statistics.median(c):.1f} ms | {percentile(c, 99):.1f} ms | "
                  f"{statistics.median(d):.1f} ms | {percentile(d, 99):.1f} ms |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
