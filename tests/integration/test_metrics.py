"""`rosetctl serve --metrics-listen`: Prometheus metrics over HTTP, checked with promtool."""
from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
import urllib.request

import grpc
import pytest

from csi_server import CALL_TIMEOUT, expect_code, mount_capability


def metrics_port(server, timeout: float = 10.0) -> int:
    """The port serve logged for its metrics endpoint (it was asked for port 0)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", server.log())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"expected serve to log its metrics address: {server.log()}")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200, f"expected 200 from /metrics, got {response.status}"
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4"), (
            f"expected the text exposition format, got {response.headers['Content-Type']}")
        return response.read().decode()


def sample(text: str, name: str, **labels) -> float | None:
    """The value of the series `name` whose labels include `labels`, or None."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        if not (series == name or series.startswith(name + "{")):
            continue
        if all(f'{key}="{want}"' in series for key, want in labels.items()):
            return float(value)
    return None


def promtool_check(text: str, workdir) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "expected promtool (Debian's prometheus; scripts/install-deps.sh installs it)"
    (workdir / "metrics.txt").write_text(text)
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"expected promtool to accept the metrics: {done.stdout}{done.stderr}\n{text}"


def test_metrics_count_calls_by_code_and_pass_promtool(csi, workdir, start_serve):
    pb2, timeout = csi.pb2, CALL_TIMEOUT
    server = start_serve(extra=("--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(server)

    for _ in range(3):
        server.node.NodeGetCapabilities(pb2.NodeGetCapabilitiesRequest(), timeout=timeout)
    expect_code(lambda: server.controller.CreateVolume(pb2.CreateVolumeRequest(name=""), timeout=timeout),
                grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume without a name")
    create = pb2.CreateVolumeRequest(name="metered", volume_capabilities=[mount_capability(pb2)],
                                     capacity_range=pb2.CapacityRange(required_bytes=2**20))
    server.controller.CreateVolume(create, timeout=timeout)

    text = scrape(port)
    promtool_check(text, workdir)
    assert sample(text, "rosetctl_calls_total", method="NodeGetCapabilities", code="OK") == 3, text
    assert sample(text, "rosetctl_calls_total", method="CreateVolume", code="INVALID_ARGUMENT") == 1, text
    assert sample(text, "rosetctl_calls_total", method="CreateVolume", code="OK") == 1, text
    assert sample(text, "rosetctl_call_duration_seconds_count", method="CreateVolume") == 2, text
    assert sample(text, "rosetctl_volumes", provider="local") == 1, text
    assert sample(text, "rosetctl_snapshots", provider="local") == 0, text
    assert sample(text, "rosetctl_staged_volumes", condition="mounted") == 0, text
    assert sample(text, "rosetctl_build_info") == 1, text
    # A second scrape sees the first one's effects only, not calls of its own.
    assert sample(scrape(port), "rosetctl_calls_total", method="NodeGetCapabilities", code="OK") == 3


def test_metrics_listen_is_off_by_default_and_checked(cli, workdir, start_serve):
    server = start_serve()
    assert "metrics on" not in server.log(), f"expected no metrics endpoint without the flag: {server.log()}"

    bad = cli.run("serve", "--endpoint", f"unix://{workdir}/other.sock", "--metrics-listen", "no-port")
    assert bad.rc != 0 and "--metrics-listen" in bad.stderr, f"expected a bad address to be refused: {bad.describe()}"

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = cli.run("serve", "--endpoint", f"unix://{workdir}/other.sock",
                       "--metrics-listen", f"127.0.0.1:{port}")
    assert busy.rc != 0 and f"127.0.0.1:{port}" in busy.stderr, (
        f"expected a taken port to be refused, naming it: {busy.describe()}")
