#!/usr/bin/python3
"""What `serve --metrics-listen` costs a call: two `rosetctl serve` processes side by side, one
with the metrics endpoint and one without, each on its own fresh state dir, take the same calls
over their unix sockets in alternating rounds; serve's CPU (utime + stime from /proc/PID/stat)
per call is compared. A round is N NodeGetCapabilities calls (the cheapest call: what counting
adds shows most) and N/10 CreateVolume + DeleteVolume pairs (directory volumes). The metrics
endpoint is scraped 50 times after each round, and a scrape's CPU is reported on its own.
Run as root from the repository: sudo /usr/bin/python3 bench/metrics/bench.py.
Results: bench/README.md, "Metrics"."""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))
import csi_stubs  # noqa: E402

import grpc  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


class Serve:
    def __init__(self, binary: str, work: Path, name: str, metrics: bool):
        self.socket = work / f"{name}.sock"
        extra = ["--metrics-listen", "127.0.0.1:0"] if metrics else []
        self.log = open(work / f"{name}.log", "w+")
        self.proc = subprocess.Popen(
            [binary, "serve", "--state-dir", str(work / name), "--endpoint", f"unix://{self.socket}", *extra],
            stdout=subprocess.DEVNULL, stderr=self.log)
        for _ in range(200):
            if self.socket.is_socket():
                break
            time.sleep(0.05)
        self.channel = grpc.insecure_channel(f"unix://{self.socket}")
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.port = None
        if metrics:
            for _ in range(100):
                self.log.seek(0)
                for line in self.log.read().splitlines():
                    if "metrics on http://" in line:
                        self.port = int(line.rsplit(":", 1)[1].split("/")[0])
                if self.port:
                    break
                time.sleep(0.05)

    def stop(self):
        self.channel.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()


def run_round(serve: Serve, csi, calls: int, round_no: int) -> float:
    pb2 = csi.pb2
    node, controller = csi.grpc.NodeStub(serve.channel), csi.grpc.ControllerStub(serve.channel)
    capability = pb2.VolumeCapability(
        mount=pb2.VolumeCapability.MountVolume(),
        access_mode=pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
    before = cpu_seconds(serve.proc.pid)
    for _ in range(calls):
        node.NodeGetCapabilities(pb2.NodeGetCapabilitiesRequest(), timeout=30)
    for i in range(calls // 10):
        volume = controller.CreateVolume(pb2.CreateVolumeRequest(
            name=f"b{round_no}-{i}", volume_capabilities=[capability]), timeout=30).volume
        controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=volume.volume_id), timeout=30)
    return cpu_seconds(serve.proc.pid) - before


def scrape_cpu(serve: Serve, scrapes: int = 50) -> float:
    """CPU of one scrape, averaged over `scrapes` in a row (/proc counts in clock ticks)."""
    before = cpu_seconds(serve.proc.pid)
    for _ in range(scrapes):
        with urllib.request.urlopen(f"http://127.0.0.1:{serve.port}/metrics", timeout=10) as response:
            response.read()
    return (cpu_seconds(serve.proc.pid) - before) / scrapes


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", default="build/release/src/rosetctl")
    parser.add_argument("--calls", type=int, default=2000, help="NodeGetCapabilities calls per round")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    binary = str(Path(args.binary).resolve())
    with tempfile.TemporaryDirectory(prefix="rosetctl-metrics-bench-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        csi = csi_stubs.generate(work)
        on, off = Serve(binary, work, "on", True), Serve(binary, work, "off", False)
        try:
            per_call = {"on": [], "off": []}
            scrapes = []
            calls = args.calls + 2 * (args.calls // 10)
            for r in range(args.rounds):
                # Alternate which goes first, so neither always meets the quieter moment.
                order = [("on", on), ("off", off)] if r % 2 == 0 else [("off", off), ("on", on)]
                for name, serve in order:
                    per_call[name].append(run_round(serve, csi, args.calls, r) / calls * 1e6)
                scrapes.append(scrape_cpu(on) * 1e3)
            with urllib.request.urlopen(f"http://127.0.0.1:{on.port}/metrics", timeout=10) as response:
                size = len(response.read())
        finally:
            on.stop()
            off.stop()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"{args.rounds} rounds of {args.calls} NodeGetCapabilities + {args.calls // 10} CreateVolume/DeleteVolume")
    for name in ("off", "on"):
        values = per_call[name]
        print(f"metrics {name:3}: serve CPU per call median {statistics.median(values):.1f} us "
              f"(min {min(values):.1f}, max {max(values):.1f})")
    print(f"one scrape: median {statistics.median(scrapes):.2f} ms CPU, {size} bytes")


if __name__ == "__main__":
    main()
