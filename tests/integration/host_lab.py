"""A lab of "hosts" on one machine for multi-host tests: one network namespace per host.

Every host is a network namespace cabled (a veth pair) to one bridge that lives in the lab's own
"switch" namespace, so every host reaches every other and nothing else: the root namespace gets no
interface, address or route, and no host has a default route. Host i (in the order added) is
192.0.2.(i+1)/24 (TEST-NET-1) on its `eth0`, with its own `lo`. Names carry the creating PID and
a per-process counter (`rosetctl-lab-<pid>-<lab>-<host>`), so parallel runs never collide and
`sweep_stale()` can recognise what a crashed run left behind.

Commands run on a host through `nsenter --net`, which changes only the network namespace.
`ip netns exec` would also give each command a private mount namespace (a slave of the root
one), so a mount made by a host's `rosetctl` or `serve` would be invisible to the test, to
cleanup and to the host's next command. Namespaces share the filesystem: a host's "own" files
are the paths under its directory, handed to programs by flags or environment.

`close()` (the context manager's exit) always ends every process in the lab's namespaces, by PID
(SIGTERM, then SIGKILL after a grace period), deletes the namespaces (their veths and the bridge
go with them), then checks that `ip netns list` shows none of them and that no process is left
in any of them; it raises AssertionError when something could not be cleaned.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

from rosetctl_cli import Result, Rosetctl, binary_path, isolated_environment, process_alive

LAB_PREFIX = "rosetctl-lab-"
NETWORK = "192.0.2"  # TEST-NET-1 (RFC 5737): never routed anywhere
PREFIX_LEN = 24
MAX_HOSTS = 254
NETNS_DIR = Path("/run/netns")  # where `ip netns add` binds the namespaces it names
SWITCH = "switch"  # the switch namespace's suffix; no host may take it
BRIDGE = "br0"
HOST_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
STALE_NAME = re.compile(rf"{re.escape(LAB_PREFIX)}(\d+)-\d+-")
DEFAULT_TIMEOUT = 60.0
CLONE_NEWNET = 0x40000000  # setns(2)'s namespace type
DISCARD_PORT = 9  # ping() knocks here; nobody listens, so a live host answers with a reset

_lab_numbers = itertools.count()  # with the PID, makes every lab's names unique on the machine

# Runs inside a host: one TCP connect. Exit 0 connected, 3 refused (the peer answered), 4 other.
_CONNECT_ONCE = """
import socket, sys
s = socket.socket()
s.settimeout(float(sys.argv[3]))
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
except ConnectionRefusedError:
    sys.exit(3)
except OSError as e:
    print(e, file=sys.stderr)
    sys.exit(4)
"""

# Runs inside a host: connects until it works (exit 0) or the deadline passes (exit 4).
_CONNECT_UNTIL = """
import socket, sys, time
deadline = time.monotonic() + float(sys.argv[3])
while True:
    s = socket.socket()
    s.settimeout(max(0.05, min(1.0, deadline - time.monotonic())))
    try:
        s.connect((sys.argv[1], int(sys.argv[2])))
        sys.exit(0)
    except OSError as e:
        last = e
    finally:
        s.close()
    if time.monotonic() >= deadline:
        print(last, file=sys.stderr)
        sys.exit(4)
    time.sleep(0.02)
"""


class LabUnavailable(Exception):
    """This machine cannot run a host lab (not root, no iproute2, no nsenter)."""


class LabError(Exception):
    """Building or changing the lab's network failed."""


def unavailable_reason() -> str | None:
    """Why a lab cannot be built here, or None when it can."""
    if os.geteuid() != 0:
        return "the host lab needs root to create network namespaces"
    if _tool("ip") is None:
        return "the host lab needs `ip` (Debian package iproute2; scripts/install-deps.sh installs it)"
    if _tool("nsenter") is None:
        return "the host lab needs `nsenter` (Debian package util-linux)"
    listed = subprocess.run([_tool("ip"), "netns", "list"], capture_output=True, text=True)
    if listed.returncode != 0:
        return f"`ip netns` does not work here: {listed.stderr.strip()}"
    return None


class HostProcess(subprocess.Popen):
    """A background process on a host; `log_path` holds its stdout and stderr unless redirected."""

    log_path: Path | None = None

    def output(self) -> str:
        """What it has written to its log so far (for assertion messages)."""
        if self.log_path is None:
            return ""
        return self.log_path.read_text(errors="replace")


class Host:
    """One machine of the lab: a network namespace, an address and a directory of its own."""

    def __init__(self, lab: HostLab, name: str, index: int):
        self.lab = lab
        self.name = name
        self.namespace = f"{lab.prefix}{name}"
        self.address = f"{NETWORK}.{index + 1}"
        self.switch_port = f"p{index}"  # its cable's end on the switch (a veth in the switch namespace)
        self.dir = lab.workdir / "hosts" / name
        self.state_dir = self.dir / "state"  # not created: rosetctl makes its state dir itself
        self.config_dir = self.dir / "etc"  # this host's /etc/rosetctl
        # Its open-iscsi initiator name file, a stand-in for /etc/iscsi/initiatorname.iscsi: absent
        # (no open-iscsi) unless a test writes one. The hosts share the machine's /etc, and two
        # nodes may not register one initiator name.
        self.initiator_file = self.config_dir / "iscsi" / "initiatorname.iscsi"
        # Every command's environment; run()/start() add to it. Edit it to change the host's defaults.
        self.env = isolated_environment()
        self.env["ROSETCTL_ISCSI_INITIATOR_FILE"] = str(self.initiator_file)
        self._started = itertools.count()

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.address}, netns {self.namespace})"

    def command(self, argv: Sequence[str]) -> list[str]:
        """argv as run inside this host (only the network namespace changes)."""
        return [_tool("nsenter"), f"--net={NETNS_DIR / self.namespace}", "--", *map(str, argv)]

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
            cwd: Path | None = None, input: str | None = None) -> Result:
        """Runs argv on this host and waits. `env` adds to (and overrides) `self.env`."""
        done = subprocess.run(self.command(argv), env={**self.env, **(env or {})}, cwd=cwd or self.dir,
                              input=input, stdin=None if input is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
        return Result(done.returncode, done.stdout, done.stderr)

    def start(self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None,
              **popen) -> HostProcess:
        """Starts argv on this host in the background; the lab ends it at teardown.

        stdout and stderr go to a log file under the host's directory (`proc.log_path`,
        `proc.output()`) unless given, so a chatty server never blocks on a full pipe.
        """
        env = {**self.env, **(env or {})}
        cwd = cwd or self.dir
        if "stdout" in popen or "stderr" in popen:
            popen.setdefault("stdin", subprocess.DEVNULL)
            return self.lab._track(self.command(argv), env=env, cwd=cwd, **popen)
        logs = self.dir / "logs"
        logs.mkdir(exist_ok=True)
        log_path = logs / f"{next(self._started)}-{Path(str(argv[0])).name}.log"
        with open(log_path, "wb") as log:
            proc = self.lab._track(self.command(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, **popen)
        proc.log_path = log_path
        return proc

    @functools.cached_property
    def rosetctl(self) -> Rosetctl:
        """rosetctl (ROSETCTL_BIN) on this host with this host's --state-dir; `.env` is its environment."""
        return HostRosetctl(self)

    def can_connect(self, address: str, port: int, timeout: float = 1.0) -> bool:
        """True if a TCP connection from this host to address:port is accepted right now."""
        return self._connect_once(address, port, timeout) == 0

    def ping(self, other: Host | str, timeout: float = 1.0) -> bool:
        """True if `other` (a Host or an address) answers this host over the network.

        A TCP knock on the discard port: a SYN-ACK or a reset both prove the path works (these
        machines have no ping binary).
        """
        address = other.address if isinstance(other, Host) else other
        return self._connect_once(address, DISCARD_PORT, timeout) in (0, 3)

    @contextlib.contextmanager
    def network(self) -> Iterator[None]:
        """Sockets this thread makes inside the block are this host's (setns(2) of the calling
        thread only): a server of the test's own process, bound here, listens on this host."""
        with open("/proc/thread-self/ns/net") as here, open(NETNS_DIR / self.namespace) as there:
            _setns(there.fileno())
            try:
                yield
            finally:
                _setns(here.fileno())

    def disconnect(self) -> None:
        """Pulls this host's cable at the switch: its eth0 loses carrier and keeps its address."""
        self.lab._ip("-n", self.lab.switch, "link", "set", self.switch_port, "down")

    def reconnect(self) -> None:
        """Plugs the cable back in. Forgets the lab's failed ARP lookups, which would otherwise
        keep answering "no route to host" for a while after the link is back."""
        self.lab._ip("-n", self.lab.switch, "link", "set", self.switch_port, "up")
        for host in self.lab.hosts:
            self.lab._ip("-n", host.namespace, "neigh", "flush", "dev", "eth0")

    def _connect_once(self, address: str, port: int, timeout: float) -> int:
        probe = self.run([sys.executable, "-I", "-S", "-c", _CONNECT_ONCE, address, str(port), str(timeout)],
                         timeout=timeout + 10)
        if probe.rc not in (0, 3, 4):
            raise LabError(f"the connection probe on {self.name} broke: {probe.describe()}")
        return probe.rc


class HostRosetctl(Rosetctl):
    """The CLI helper of the single-host tests, run inside one host of the lab."""

    def __init__(self, host: Host):
        super().__init__(state_dir=host.state_dir, cwd=host.dir, tracker=host.lab, binary=binary_path())
        self.host = host
        self.env["ROSETCTL_ISCSI_INITIATOR_FILE"] = str(host.initiator_file)

    def argv(self, args: Sequence[str], with_state_dir: bool = True) -> list[str]:
        return self.host.command(super().argv(args, with_state_dir))


def wait_for_port(host: Host, address: str, port: int, timeout: float = 10.0,
                  process: subprocess.Popen | None = None) -> None:
    """Waits until address:port accepts TCP connections from inside `host`.

    Raises AssertionError at the deadline, or at once if `process` (the server) has exited.
    """
    probe = subprocess.Popen(
        host.command([sys.executable, "-I", "-S", "-c", _CONNECT_UNTIL, address, str(port), str(timeout)]),
        env=host.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while probe.poll() is None:
            if process is not None and process.poll() is not None:
                output = process.output() if isinstance(process, HostProcess) else ""
                raise AssertionError(f"{address}:{port} never listened for {host.name}: the server exited "
                                     f"with {process.returncode} {output!r}")
            time.sleep(0.02)
        if probe.returncode != 0:
            raise AssertionError(f"{address}:{port} accepted no connection from {host.name} within {timeout}s: "
                                 f"{probe.stderr.read().strip()}")
    finally:
        if probe.poll() is None:
            probe.kill()
        probe.wait()
        probe.stderr.close()


class HostLab:
    """Hosts on one switch. Use as a context manager (or the `host_lab` fixture); add() hosts inside."""

    def __init__(self, workdir: Path, grace: float = 5.0):
        self.workdir = Path(workdir)
        self.grace = grace  # seconds between SIGTERM and SIGKILL at teardown
        self.prefix = f"{LAB_PREFIX}{os.getpid()}-{next(_lab_numbers)}-"
        self.switch = f"{self.prefix}{SWITCH}"
        self.hosts: list[Host] = []
        self._attempted = 0  # hosts add() began; a failed add's address and veth name stay unused
        self._namespaces: list[str] = []  # only those we created, in creation order
        self._namespace_ids: set[tuple[int, int]] = set()  # kept after deletion, to find leftovers
        self._processes: list[subprocess.Popen] = []

    def __enter__(self) -> HostLab:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Builds the switch. Raises LabUnavailable when the machine cannot host a lab."""
        reason = unavailable_reason()
        if reason is not None:
            raise LabUnavailable(reason)
        try:
            self._add_namespace(self.switch)
            self._ip("-n", self.switch, "link", "add", BRIDGE, "type", "bridge")
            self._ip("-n", self.switch, "link", "set", BRIDGE, "up")
        except BaseException:
            self.close()
            raise

    def add(self, name: str) -> Host:
        """A new host on the switch, with the next address (the first host added is 192.0.2.1)."""
        if not self._namespaces:
            raise LabError("open the lab (use it as a context manager) before adding hosts")
        if not HOST_NAME.fullmatch(name) or name == SWITCH:
            raise ValueError(f"host name {name!r}: use 1-32 of a-z, 0-9 and '-', starting with a letter "
                             f"(not {SWITCH!r})")
        if any(h.name == name for h in self.hosts):
            raise ValueError(f"host name {name!r} is taken in this lab")
        if self._attempted == MAX_HOSTS:
            raise LabError(f"a lab holds at most {MAX_HOSTS} hosts (one /24)")
        host = Host(self, name, self._attempted)
        self._attempted += 1
        self._add_namespace(host.namespace)
        # Both ends are made in the switch namespace and one is moved straight into the host's,
        # so the root namespace never sees either.
        self._ip("-n", self.switch, "link", "add", host.switch_port, "type", "veth", "peer", "name", "eth0",
                 "netns", host.namespace)
        self._ip("-n", self.switch, "link", "set", host.switch_port, "master", BRIDGE, "up")
        self._ip("-n", host.namespace, "addr", "add", f"{host.address}/{PREFIX_LEN}", "dev", "eth0")
        self._ip("-n", host.namespace, "link", "set", "eth0", "up")
        self._ip("-n", host.namespace, "link", "set", "lo", "up")
        host.config_dir.mkdir(parents=True, exist_ok=True)
        self.hosts.append(host)
        return host

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"no host {name!r} in this lab (hosts: {[h.name for h in self.hosts]})")

    def namespaces(self) -> list[str]:
        """The names of the namespaces this lab created (the switch first)."""
        return list(self._namespaces)

    def pids(self) -> list[int]:
        """Every process now running in one of the lab's namespaces."""
        return pids_in_namespaces(self._namespace_ids)

    def start(self, args: Sequence[str], **popen) -> subprocess.Popen:
        """ProcessTracker's interface, so HostRosetctl.start() is tracked too; args are run as given."""
        return self._track(list(args), **popen)

    def close(self) -> None:
        """Ends every process in the lab, deletes its namespaces and checks nothing is left. Idempotent."""
        if not self._namespace_ids and not self._processes:
            return  # never built anything
        problems = []
        for _ in range(3):  # again, in case something forked while we were ending the others
            pids = {p.pid for p in self._processes if p.poll() is None} | set(self.pids())
            if not pids:
                break
            end_processes(pids, self.grace)
        for proc in self._processes:
            try:
                proc.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:
                problems.append(f"process {proc.pid} ({proc.args!r}) survived SIGKILL")
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        self._processes.clear()
        for namespace in reversed(self._namespaces):  # hosts first, the switch last
            deleted = subprocess.run([_tool("ip"), "netns", "delete", namespace], capture_output=True, text=True)
            if deleted.returncode != 0:
                problems.append(f"`ip netns delete {namespace}`: {deleted.stderr.strip()}")
        still_listed = set(self._namespaces) & set(list_namespaces())
        if still_listed:
            problems.append(f"`ip netns list` still shows {sorted(still_listed)}")
        self._namespaces.clear()
        left = self.pids()
        if left:
            problems.append(f"processes {left} are still in the lab's namespaces")
        if problems:
            raise AssertionError("host lab teardown: " + "; ".join(problems))

    def _add_namespace(self, name: str) -> None:
        self._ip("netns", "add", name)
        # Recorded only once it exists: a failed add (say, the name was taken) is not ours to delete.
        self._namespaces.append(name)
        self._namespace_ids.add(namespace_id(name))

    def _track(self, argv: list[str], **popen) -> subprocess.Popen:
        proc = HostProcess(argv, **popen)
        self._processes.append(proc)
        return proc

    @staticmethod
    def _ip(*args: str) -> None:
        done = subprocess.run([_tool("ip"), *args], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise LabError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns: {os.strerror(error)}")


def list_namespaces() -> list[str]:
    """The names `ip netns list` shows."""
    listed = subprocess.run([_tool("ip"), "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


def namespace_id(name: str) -> tuple[int, int]:
    """(device, inode) of a named namespace: what /proc/PID/ns/net of its processes resolve to."""
    st = os.stat(NETNS_DIR / name)
    return st.st_dev, st.st_ino


def pids_in_namespaces(ids: set[tuple[int, int]]) -> list[int]:
    """Processes (not zombies: those have no namespaces left) in any of the given network namespaces."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue  # gone, or a zombie
        if (st.st_dev, st.st_ino) in ids:
            found.append(int(entry.name))
    return sorted(found)


def end_processes(pids: set[int], grace: float) -> None:
    """SIGTERM to all, up to `grace` seconds for them to go, then SIGKILL to the rest (by PID)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while True:
            pids = {pid for pid in pids if process_alive(pid)}
            if not pids or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if not pids:
            return


def sweep_stale() -> list[str]:
    """Deletes lab namespaces whose creating process is gone (a crashed run); returns their names.

    A lab's name starts with its creator's PID, so a live run's lab is never touched. (A reused
    PID only delays the sweep of a stale lab until that process ends.)
    """
    swept = []
    for name in list_namespaces():
        match = STALE_NAME.match(name)
        if match is None or process_alive(int(match[1])):
            continue
        try:
            ids = {namespace_id(name)}
        except OSError:
            continue  # another sweeper got there first
        end_processes(set(pids_in_namespaces(ids)), grace=1.0)
        if subprocess.run([_tool("ip"), "netns", "delete", name], capture_output=True).returncode == 0:
            swept.append(name)
    return swept


def _tool(name: str) -> str | None:
    """A system program, found even when PATH lacks the sbin directories."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin"]))
