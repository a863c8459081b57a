"""The host lab itself (host_lab.py): real namespaces, real processes, real TCP between them."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from host_lab import (HostLab, LabError, list_namespaces, namespace_id, pids_in_namespaces, process_alive,
                      sweep_stale, unavailable_reason, wait_for_port)
from rosetctl_cli import binary_path
from rosetctl_fixtures import skip_or_fail

PYTHON = sys.executable  # Debian's /usr/bin/python3, as the suite runs under


@pytest.fixture(autouse=True)
def lab_available():
    """Some tests build HostLab themselves (to look after its teardown); they skip as host_lab does."""
    reason = unavailable_reason()
    if reason is not None:
        skip_or_fail(reason)


def http_server(host, port=8000):
    """A python http.server on the host's address, serving the host's directory; returns it listening."""
    server = host.start([PYTHON, "-m", "http.server", "--bind", host.address, str(port),
                         "--directory", str(host.dir)])
    wait_for_port(host, host.address, port, timeout=10, process=server)
    return server


def fetch(host, url):
    """GETs url from inside host; returns the body."""
    code = ("import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())")
    result = host.run([PYTHON, "-c", code, url], timeout=20)
    assert result.rc == 0, f"{host.name} could not fetch {url}: {result.describe()}"
    return result.stdout


def root_links():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split(":")[1].strip() for line in out.splitlines())


def test_each_host_is_a_namespace_with_its_own_address_and_nothing_else(host_lab):
    before = root_links()
    hosts = [host_lab.add(name) for name in ("controller", "node1", "node2")]

    assert [h.address for h in hosts] == ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
    for host in hosts:
        assert host.run(["readlink", "/proc/self/ns/net"]).stdout.strip() == f"net:[{namespace_id(host.namespace)[1]}]"
        addresses = host.run(["ip", "-o", "-4", "addr", "show"]).stdout.split()
        assert [w for w in addresses if "/" in w] == ["127.0.0.1/8", f"{host.address}/24"]
        # One route, to the lab's /24: no default route, so nothing can leave the lab.
        routes = host.run(["ip", "-4", "-o", "route", "show", "table", "all", "type", "unicast"]).stdout
        assert [r.split()[:3] for r in routes.splitlines()] == [["192.0.2.0/24", "dev", "eth0"]], routes
    assert root_links() == before, "building the lab changed the root namespace's interfaces"
    assert len({h.dir for h in hosts}) == 3 and all(h.dir.parent.parent == host_lab.workdir for h in hosts)


def test_hosts_share_the_machines_mounts(host_lab, mounts_in):
    # A node host's mounts must be seen by the test, by cleanup and by its own next command, so a
    # host changes only the network namespace (`ip netns exec` would hide them).
    a, b = host_lab.add("a"), host_lab.add("b")
    target = a.dir / "mnt"
    target.mkdir()
    assert a.run(["mount", "-t", "tmpfs", "host-lab-test", str(target)]).rc == 0
    assert str(target) in mounts_in()
    for host in (a, b):
        assert host.run(["findmnt", "-n", "-o", "SOURCE", str(target)]).stdout.strip() == "host-lab-test"
    # workdir's teardown unmounts it


def test_three_hosts_reach_each_other_over_tcp(host_lab):
    controller, node1, node2 = (host_lab.add(name) for name in ("controller", "node1", "node2"))
    (controller.dir / "hello.txt").write_text("from the controller\n")
    server = http_server(controller)

    for client in (node1, node2):
        assert fetch(client, f"http://{controller.address}:8000/hello.txt") == "from the controller\n"
    # The server saw each client at its own lab address: the traffic crossed the switch.
    deadline = time.monotonic() + 5
    while not all(f"{c.address} - -" in server.output() for c in (node1, node2)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert f"{node1.address} - -" in server.output() and f"{node2.address} - -" in server.output(), server.output()
    for a in (controller, node1, node2):
        for b in (controller, node1, node2):
            assert a.ping(b), f"{a} cannot reach {b}"


def test_the_same_port_on_every_host_does_not_collide(host_lab):
    hosts = [host_lab.add(name) for name in ("a", "b")]
    for host in hosts:
        (host.dir / "who").write_text(host.name)
        http_server(host, port=8000)
    assert fetch(hosts[0], f"http://{hosts[1].address}:8000/who") == "b"
    assert fetch(hosts[1], f"http://{hosts[0].address}:8000/who") == "a"


def test_a_host_reaches_nothing_outside_the_lab(host_lab):
    host = host_lab.add("consumer")
    with socket.socket() as machine_listener:  # a service on the machine's (root namespace's) loopback
        machine_listener.bind(("127.0.0.1", 0))
        machine_listener.listen()
        port = machine_listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # it is really there for the machine

        assert not host.can_connect("127.0.0.1", port, timeout=1)
        # The host's 127.0.0.1 is its own: a listener there on the same port is the one it reaches.
        own = host.start([PYTHON, "-m", "http.server", "--bind", "127.0.0.1", str(port)])
        wait_for_port(host, "127.0.0.1", port, timeout=10, process=own)
    # Addresses beyond the lab's /24 have no route at all (answered at once, nothing is sent).
    started = time.monotonic()
    assert not host.ping("198.51.100.1", timeout=5)
    assert time.monotonic() - started < 2


def test_disconnect_cuts_one_host_and_reconnect_restores_it(host_lab):
    controller, cut, other = (host_lab.add(name) for name in ("controller", "cut", "other"))
    http_server(controller)
    assert other.can_connect(controller.address, 8000)

    cut.disconnect()
    # Long enough for cut's ARP lookup of the controller to use up its probes on the dead link:
    # without reconnect()'s flush that lookup then fails the first connection after reconnecting.
    assert not cut.can_connect(controller.address, 8000, timeout=2.5)
    assert not controller.ping(cut, timeout=0.3)
    assert other.can_connect(controller.address, 8000), "only the disconnected host may lose the network"

    cut.reconnect()
    assert cut.can_connect(controller.address, 8000, timeout=1)
    assert controller.ping(cut, timeout=1)


def test_wait_for_port_stops_as_soon_as_the_server_exits(host_lab):
    host = host_lab.add("a")
    dead = host.start([PYTHON, "-c", "import sys; print('bad flag'); sys.exit(7)"])
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"exited with 7 'bad flag\\n'"):
        wait_for_port(host, host.address, 8000, timeout=30, process=dead)
    assert time.monotonic() - started < 5
    with pytest.raises(AssertionError, match="accepted no connection"):
        wait_for_port(host, host.address, 8000, timeout=0.3)


def test_teardown_ends_every_process_and_deletes_every_namespace(workdir):
    with pytest.raises(RuntimeError, match="the test failed"):
        with HostLab(workdir, grace=0.5) as lab:
            a, b = lab.add("a"), lab.add("b")
            tracked = a.start(["sleep", "300"])
            stubborn = b.start([PYTHON, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                "print('ready', flush=True); time.sleep(300)"])
            # A daemon the lab never saw start: its shell exits at once and leaves it behind.
            a.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 &"])
            names, ids = lab.namespaces(), {namespace_id(n) for n in lab.namespaces()}
            deadline = time.monotonic() + 5
            while "ready" not in stubborn.output() and time.monotonic() < deadline:
                time.sleep(0.02)
            pids = lab.pids()
            assert tracked.pid in pids and stubborn.pid in pids and len(pids) == 3, pids
            raise RuntimeError("the test failed")

    assert len(names) == 3 and not set(names) & set(list_namespaces())
    assert not any(os.path.exists(f"/run/netns/{n}") for n in names)
    assert not any(process_alive(pid) for pid in pids)
    assert pids_in_namespaces(ids) == []
    assert tracked.returncode == -15 and stubborn.returncode == -9
    lab.close()  # again: nothing left to do, no error


def test_a_half_built_lab_is_torn_down_and_leaves_namespaces_not_its_own(workdir):
    lab = HostLab(workdir)
    foreign = f"{lab.prefix}b"  # someone else's namespace under the name host "b" would take
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        with pytest.raises(LabError, match="netns add"):
            with lab:
                lab.add("a")
                lab.add("b")
        assert lab.namespaces() == []
        listed = list_namespaces()
        assert foreign in listed and f"{lab.prefix}a" not in listed and lab.switch not in listed
    finally:
        subprocess.run(["ip", "netns", "delete", foreign], check=True)


def test_sweep_stale_removes_labs_of_dead_runs_only(workdir):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"rosetctl-lab-{dead.pid}-0-crashed"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    leftover = subprocess.Popen(["nsenter", f"--net=/run/netns/{stale}", "--", "sleep", "300"])
    try:
        with HostLab(workdir) as live:
            live.add("a")
            swept = sweep_stale()
            assert stale in swept and not set(live.namespaces()) & set(swept)
            leftover.wait(timeout=5)
            assert set(live.namespaces()) <= set(list_namespaces()), "a live run's lab was swept"
            assert stale not in list_namespaces()
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait()
        if stale in list_namespaces():
            subprocess.run(["ip", "netns", "delete", stale])


def test_rosetctl_runs_on_a_host_with_its_own_state_dir(host_lab):
    a, b = host_lab.add("a"), host_lab.add("b")
    version = a.run([binary_path(), "--version"])
    assert version.rc == 0 and version.stdout.startswith("rosetctl "), version.describe()

    listed = a.run([binary_path(), "volume", "list", "--state-dir", str(a.state_dir), "-o", "json"])
    assert listed.rc == 0 and listed.json() == [], listed.describe()
    a.rosetctl.create("only-on-a")
    assert [v["name"] for v in a.rosetctl.volumes()] == ["only-on-a"]
    assert b.rosetctl.volumes() == []
    assert a.state_dir != b.state_dir and a.state_dir.is_dir()
    # The CLI helper's commands really run inside the host.
    assert a.rosetctl.argv(["volume", "list"])[:3] == a.command([])
