"""Every gauge of `serve --metrics-listen` (README, "Metrics") moved by a real change of the host,
with its exact value: snapshots and the commit store's bytes, stagings mounted, dead (a killed
roset-fuse) and unmounted, roset-fuse clients, iSCSI targets and sessions in a real tgtd, and
build_info's labels; and no listener at all without the flag."""
from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from csi_server import CALL_TIMEOUT
from rosetctl_mounts import detach as unmount_lazily
from rosetctl_mounts import is_mount_point
from test_iscsi_provider import iqn, provider_flags
from test_metrics import metrics_port, promtool_check, sample, scrape
from tgtd_lab import INITIATOR_A, kept_chap, lun_url, wait_until

CONDITIONS = ("mounted", "dead", "unmounted")


def staged(text: str) -> dict[str, float | None]:
    return {condition: sample(text, "rosetctl_staged_volumes", condition=condition) for condition in CONDITIONS}


def blob_bytes(state_dir: Path) -> int:
    """What the commit store's blobs take on disk (blocks, as the gauge counts them)."""
    return sum(p.stat().st_blocks * 512 for p in (state_dir / "store" / "blobs").rglob("*") if p.is_file())


def wait_dead(path: Path, timeout: float = 10) -> None:
    def dead() -> bool:
        try:
            os.stat(path)
            return False
        except OSError as e:
            return e.errno in (107, 116, 5)  # ENOTCONN, ESTALE, EIO
    wait_until(dead, timeout, f"{path} to stop answering")


def test_gauges_follow_snapshots_stagings_and_fuse_clients(cli, roset, start_serve, workdir, state_dir):
    server = start_serve(extra=("--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(server)
    text = scrape(port)
    assert sample(text, "rosetctl_snapshots", provider="local") == 0, text
    assert sample(text, "rosetctl_roset_fuse_clients", provider="roset") == 0, text
    assert sample(text, "rosetctl_commit_store_bytes") is None, f"expected no store measured before one exists: {text}"
    assert staged(text) == {"mounted": 0, "dead": 0, "unmounted": 0}, text

    # A local volume connected (one staging, mounted), with a file in it, and two snapshots.
    cli.create("d", "--provider", "local")
    d = workdir / "d"
    cli.connect("d", d, "--provider", "local")
    (d / "data").write_bytes(os.urandom(300_000))
    cli.ok("snapshot", "commit", "d")
    (d / "more").write_bytes(os.urandom(100_000))
    cli.ok("snapshot", "commit", "d")
    text = scrape(port)
    assert sample(text, "rosetctl_snapshots", provider="local") == 2, text
    assert sample(text, "rosetctl_snapshots", provider="roset") == 0, text
    stored = blob_bytes(state_dir)
    assert stored >= 400_000 and sample(text, "rosetctl_commit_store_bytes", provider="local") == stored, (
        f"expected the store's {stored} bytes of blobs: {text}")
    assert staged(text) == {"mounted": 1, "dead": 0, "unmounted": 0}, text

    # A roset volume connected: its roset-fuse runs and its staging answers.
    cli.create("r")
    r = workdir / "r"
    cli.connect("r", r)
    [pid] = roset.fuse_pids()
    text = scrape(port)
    assert sample(text, "rosetctl_roset_fuse_clients", provider="roset") == 1, text
    assert staged(text) == {"mounted": 2, "dead": 0, "unmounted": 0}, text

    # Its roset-fuse killed: the staging is dead, no client runs.
    os.kill(pid, signal.SIGKILL)
    wait_dead(r)
    text = scrape(port)
    assert sample(text, "rosetctl_roset_fuse_clients", provider="roset") == 0, text
    dead = staged(text)
    assert dead == {"mounted": 1, "dead": 1, "unmounted": 0}, text

    # The local volume's mounts taken away behind rosetctl's back: recorded, nothing mounted.
    [staging] = [s["path"] for s in cli.volume("d")["stagings"]]
    unmount_lazily(str(d))
    unmount_lazily(staging)
    assert not is_mount_point(staging)
    text = scrape(port)
    assert staged(text) == {"mounted": 0, "dead": 1, "unmounted": 1}, text
    promtool_check(text, workdir)


def test_iscsi_gauges_count_targets_and_logged_in_sessions(cli, tgtd, start_serve, workdir):
    flags = provider_flags(tgtd)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    server = start_serve(extra=(*flags, "--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(server)
    text = scrape(port)
    assert sample(text, "rosetctl_iscsi_targets") is None, f"expected no iSCSI gauges without iscsi volumes: {text}"

    data = cli.ok_json(*flags, "volume", "create", "data", "--size", "16Mi")
    cli.ok_json(*flags, "volume", "create", "other", "--size", "16Mi")
    text = scrape(port)
    assert sample(text, "rosetctl_iscsi_targets", provider="iscsi") == 2, text
    assert sample(text, "rosetctl_iscsi_sessions", provider="iscsi") == 0, text

    # An initiator of the node it is mapped to logs in with that node's CHAP secret and stays
    # (libiscsi's iscsi-perf reads until stopped): one session, then none once it is gone.
    cli.ok(*flags, "volume", "map", "data", "--node", "node-a")
    chap = kept_chap(cli.state_dir, data["id"], "node-a")
    reader = subprocess.Popen(["iscsi-perf", "-i", INITIATOR_A, lun_url(tgtd.portal, iqn(data["id"]), chap=chap)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_until(lambda: sample(scrape(port), "rosetctl_iscsi_sessions", provider="iscsi") == 1, 20,
                   "one session in the gauge")
        text = scrape(port)
        assert sample(text, "rosetctl_iscsi_targets", provider="iscsi") == 2, text
        promtool_check(text, workdir)
    finally:
        reader.kill()
        reader.wait(timeout=10)
    wait_until(lambda: sample(scrape(port), "rosetctl_iscsi_sessions", provider="iscsi") == 0, 20,
               "no session in the gauge once the initiator is gone")
    cli.ok(*flags, "volume", "unmap", "data", "--node", "node-a")
    cli.ok(*flags, "volume", "delete", "other")
    assert sample(scrape(port), "rosetctl_iscsi_targets", provider="iscsi") == 1


def test_build_info_names_this_binary(cli, csi, start_serve):
    server = start_serve(extra=("--metrics-listen", "127.0.0.1:0"))
    text = scrape(metrics_port(server))
    version = re.match(r"rosetctl (\S+) \(commit (\w+)", cli.ok("--version", with_state_dir=False).stdout)
    assert version, cli.run("--version", with_state_dir=False).describe()
    manifest = server.identity.GetPluginInfo(csi.pb2.GetPluginInfoRequest(), timeout=CALL_TIMEOUT)
    assert sample(text, "rosetctl_build_info", version=version[1], commit=manifest.manifest["git_commit"]) == 1, (
        f"expected build_info labelled {version[1]} and {manifest.manifest['git_commit']}: {text}")
    assert manifest.manifest["git_commit"].startswith(version[2]), manifest
    [line] = [l for l in text.splitlines() if l.startswith("rosetctl_build_info")]
    assert set(re.findall(r'(\w+)="', line)) == {"version", "commit"}, line


def listening_tcp_ports(pid: int) -> list[int]:
    """The TCP ports process PID listens on: its socket inodes among /proc/net/tcp{,6}'s LISTEN rows."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = []
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_metrics_are_off_by_default_no_port_is_opened(start_serve):
    """Without --metrics-listen serve listens on no TCP port at all (its unix socket only); with
    it, on exactly the metrics port."""
    quiet = start_serve()
    assert listening_tcp_ports(quiet.proc.pid) == [], "expected serve without --metrics-listen to listen on no port"
    metered = start_serve(socket_path=quiet.socket_path.parent / "metered.sock", extra=("--metrics-listen", "127.0.0.1:0"))
    assert listening_tcp_ports(metered.proc.pid) == [metrics_port(metered)]


def mapped_libraries(pid: int) -> set[str]:
    """The file names of the shared objects mapped into process `pid`."""
    with open(f"/proc/{pid}/maps") as maps:
        return {Path(line.split()[5]).name for line in maps if len(line.split()) > 5 and ".so" in line}


def test_cpp_httplib_and_brotli_are_loaded_only_for_the_metrics_endpoint(rosetctl_binary, start_serve):
    """Issue 35: every CLI run loaded cpp-httplib and, through it, brotli, though only serve's
    metrics endpoint uses them. The dynamic loader's own log names what a CLI run loads."""
    done = subprocess.run([rosetctl_binary, "--version"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LD_DEBUG": "libs"})
    assert done.returncode == 0, done.stderr
    loaded = re.findall(r"calling init: (\S+)", done.stderr)
    assert loaded, f"expected the loader to name the libraries it initialised: {done.stderr[-2000:]}"
    unused = [path for path in loaded if "httplib" in path or "brotli" in path]
    assert not unused, f"expected a CLI run to load neither cpp-httplib nor brotli, it loaded {unused}"

    quiet = start_serve()
    assert not any("httplib" in name for name in mapped_libraries(quiet.proc.pid)), (
        "expected serve without --metrics-listen to leave cpp-httplib unloaded")
    metered = start_serve(socket_path=quiet.socket_path.parent / "metered.sock", extra=("--metrics-listen", "127.0.0.1:0"))
    port = metrics_port(metered)
    assert any("httplib" in name for name in mapped_libraries(metered.proc.pid)), (
        "expected serve --metrics-listen to have loaded cpp-httplib")
    assert "rosetctl_build_info" in scrape(port)
