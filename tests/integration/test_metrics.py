"""`rosetctl serve --metrics-listen`: Prometheus metrics over HTTP, checked with promtool."""
from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import grpc

from csi_server import CALL_TIMEOUT, expect_code, mount_capability, refused_second_serve
from rosetctl_cli import Rosetctl


def metrics_port(server, timeout: float = 10.0) -> int:
    """The port serve logged for its metrics endpoint (it was asked for port 0)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", server.log())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"expected serve to log its metrics address: {server.log()}")


def scrape(port: int, timeout: float = 10) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as response:
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


def test_second_serve_on_a_taken_metrics_address_is_refused(csi, workdir, start_serve, processes, rosetctl_binary):
    """cpp-httplib binds with SO_REUSEPORT by default, which let a second serve on the same
    --metrics-listen start and answer half of the scrapes with its own numbers."""
    first = start_serve(extra=("--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(first)
    for _ in range(3):
        first.node.NodeGetCapabilities(csi.pb2.NodeGetCapabilitiesRequest(), timeout=CALL_TIMEOUT)

    other = Rosetctl(state_dir=workdir / "other-state", cwd=workdir, tracker=processes, binary=rosetctl_binary)
    rc, log = refused_second_serve(csi, other, workdir / "other.sock", workdir / "serve-second.log",
                                   ("--metrics-listen", f"127.0.0.1:{port}"))
    assert rc is not None and rc != 0, f"expected a second serve on metrics port {port} to be refused: {log}"
    assert "--metrics-listen" in log and f"127.0.0.1:{port}" in log, (
        f"expected the message to name the flag and the address: {log}")
    for _ in range(10):  # every scrape reaches the first
        assert sample(scrape(port), "rosetctl_calls_total", method="NodeGetCapabilities", code="OK") == 3

# ---------------------------------------------------------------- slow clients

# How long a scrape may take past slow clients: generous for two loaded cores. serve drops a
# client that sends nothing for 2 s; before that, 200 idle connections held a pool of two
# threads for 5 s each, 500 s in all, and two that trickled a request held it for good.
SCRAPE_WITHIN = 15.0

HALF_A_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def scrape_past_slow_clients(port: int) -> str:
    started = time.monotonic()
    try:
        text = scrape(port, timeout=SCRAPE_WITHIN)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as failure:
        raise AssertionError(f"expected a scrape to be answered past slow clients within {SCRAPE_WITHIN} s; "
                             f"after {time.monotonic() - started:.1f} s: {failure!r}") from failure
    assert time.monotonic() - started < SCRAPE_WITHIN
    assert "rosetctl_build_info" in text, text
    return text


def test_a_scrape_is_answered_past_200_connections_that_send_nothing_or_half_a_request(start_serve):
    server = start_serve(extra=("--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(server)
    with contextlib.ExitStack() as slow:
        for number in range(200):
            client = slow.enter_context(connect(port))
            if number % 2:
                client.sendall(HALF_A_REQUEST)
        scrape_past_slow_clients(port)
        scrape_past_slow_clients(port)


def test_two_clients_trickling_a_request_do_not_hold_off_scrapes_and_an_idle_one_is_dropped(start_serve):
    server = start_serve(extra=("--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(server)
    stop = threading.Event()

    def trickle(client: socket.socket):
        # A byte every half second, well inside the read timeout: the request never ends.
        request = HALF_A_REQUEST + b"X-Slow: " + b"a" * 8000
        for byte in request:
            if stop.wait(0.5):
                return
            try:
                client.sendall(bytes([byte]))
            except OSError:
                return

    with contextlib.ExitStack() as slow:
        tricklers = [slow.enter_context(connect(port)) for _ in range(2)]
        threads = [threading.Thread(target=trickle, args=(client,), daemon=True) for client in tricklers]
        slow.callback(lambda: [thread.join(timeout=5) for thread in threads])
        slow.callback(stop.set)
        for thread in threads:
            thread.start()
        idle = slow.enter_context(connect(port))
        time.sleep(1)  # the tricklers have their workers
        scrape_past_slow_clients(port)

        # The client that sends nothing is dropped (it reads end of file or a reset).
        idle.settimeout(SCRAPE_WITHIN)
        try:
            dropped = idle.recv(1) == b""
        except ConnectionResetError:
            dropped = True
        except TimeoutError:
            dropped = False
        assert dropped, f"expected serve to drop a connection that sent nothing within {SCRAPE_WITHIN} s"


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_crowd_of_connections_holds_a_bounded_number_of_descriptors_and_the_csi_socket_answers(start_serve):
    # serve answers CSI and its metrics with one descriptor limit: 700 connections that send
    # nothing once held 700 descriptors until a worker got to each, and a crowd that kept coming
    # would have left the CSI socket unable to accept. Now at most 256 wait for a worker.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    server = start_serve(extra=("--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(server)
    before = open_descriptors(server.proc.pid)
    with contextlib.ExitStack() as crowd:
        for _ in range(700):
            client = crowd.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            client.setblocking(False)  # the kernel's backlog may hold it: do not wait
            client.connect_ex(("127.0.0.1", port))
        held = 0
        for _ in range(16):  # the kernel resends refused handshakes after 1 s, then 3 s
            time.sleep(0.5)
            held = max(held, open_descriptors(server.proc.pid) - before)
        assert held <= 8 + 256 + 16, f"expected serve to hold at most ~280 descriptors for 700 idle connections, it held {held}"
        assert server.identity.Probe(server.csi.pb2.ProbeRequest(), timeout=CALL_TIMEOUT).ready.value
    scrape_past_slow_clients(port)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
