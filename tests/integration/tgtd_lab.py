"""A real tgtd of the test's own, and libiscsi's user-space initiator to check what it exports.

The host kernel has no iSCSI initiator, so exports are checked from user space with libiscsi's
tools (Debian's libiscsi-bin), which take the initiator name to log in as (`-i`). Each Tgtd
listens on 127.0.0.1 at a free port with a control port of its own (`tgtd -C N`), so parallel
runs and a system tgtd (port 3260, control port 0) never meet. tgtd ignores SIGTERM: it is
ended by PID with SIGKILL (it keeps nothing on disk but its control socket files, removed here).
See ../../../shared/consumer-host-lab.md for what was measured on these machines.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import NamedTuple, Sequence

from rosetctl_cli import DEFAULT_BINARY, Result, process_alive

TOOLS = {"tgtd": "tgt", "tgtadm": "tgt", "iscsi-inq": "libiscsi-bin", "iscsi-ls": "libiscsi-bin",
         "iscsi-readcapacity16": "libiscsi-bin"}
CONTROL_SOCKET_DIR = Path("/var/run/tgtd")
# Initiator names the tests log in as; none of them is a real host's.
INITIATOR_A = "iqn.2026-11.io.roset.test:node-a"
INITIATOR_B = "iqn.2026-11.io.roset.test:node-b"
IQN_PREFIX = "iqn.2026-11.io.roset"


def tool_path(name: str) -> str | None:
    """`name` on PATH or in /usr/sbin (tgtd and tgtadm live there; a test's PATH may lack it)."""
    found = shutil.which(name)
    if found is None and os.access(f"/usr/sbin/{name}", os.X_OK):
        found = f"/usr/sbin/{name}"
    return found


def unavailable_reason() -> str | None:
    """Why the tgtd tests cannot run here (a missing package), or None."""
    missing = sorted({f"{tool} ({package})" for tool, package in TOOLS.items() if tool_path(tool) is None})
    if missing:
        return f"not installed: {', '.join(missing)}; scripts/install-deps.sh installs them"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_control_port() -> int:
    """A tgtd control port whose socket no other tgtd holds (their files are socket.N[.lock])."""
    for _ in range(100):
        port = random.randint(1000, 32767)  # tgt keeps it in a signed short
        if not (CONTROL_SOCKET_DIR / f"socket.{port}.lock").exists():
            return port
    raise AssertionError(f"no free tgtd control port in {CONTROL_SOCKET_DIR}")


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Tgtd:
    """`tgtd -f --iscsi portal=127.0.0.1:PORT -C N`, started and ended by its owner."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.control_port = free_control_port()
        self.log_path = workdir / f"tgtd-{self.control_port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def portal(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "tgtd is running already"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [tool_path("tgtd"), "-f", "--iscsi", f"portal={self.portal}", "-C", str(self.control_port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._answers, 10, f"tgtd on {self.portal} (control port {self.control_port}); "
                   f"log {self.log_path}")

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"tgtd exited with {self.proc.returncode}: {self.log_text()}")
        probe = subprocess.run([tool_path("tgtadm"), "-C", str(self.control_port), "--mode", "system", "--op", "show"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            return False
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def kill(self) -> None:
        """SIGKILL by PID (tgtd ignores SIGTERM), as a crash would; then its socket files go."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        assert not process_alive(self.proc.pid)
        for name in (f"socket.{self.control_port}", f"socket.{self.control_port}.lock"):
            (CONTROL_SOCKET_DIR / name).unlink(missing_ok=True)

    def restart(self) -> None:
        self.kill()
        self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def tgtadm(self, *args: str) -> Result:
        done = subprocess.run([tool_path("tgtadm"), "-C", str(self.control_port), "--lld", "iscsi", *args],
                              capture_output=True, text=True, timeout=30)
        return Result(done.returncode, done.stdout, done.stderr)

    def targets(self) -> dict[str, dict]:
        """Each target by IQN as `tgtadm --op show` reports it: its state, LUNs (number: serial,
        backing file), the accounts bound to it and its ACL. What a test compares before and after
        an attack to show that nothing changed on the victim's target (sessions are left out: a
        check's own login comes and goes)."""
        shown = self.tgtadm("--mode", "target", "--op", "show")
        assert shown.rc == 0, shown.describe()
        lun_facts = ("SCSI SN: ", "Backing store path: ")
        targets: dict[str, dict] = {}
        target = lun = None
        section = ""
        for line in shown.stdout.splitlines():
            depth = len(line) - len(line.lstrip(" "))
            text = line.strip()
            if line.startswith("Target "):
                target = {"state": None, "luns": {}, "accounts": [], "acl": []}
                targets[text.split(": ", 1)[1]] = target
            elif target is None:
                continue
            elif depth == 4:
                section = text
            elif section == "System information:" and text.startswith("State: "):
                target["state"] = text.split(": ", 1)[1]
            elif section == "LUN information:" and text.startswith("LUN: "):
                lun = target["luns"].setdefault(int(text.split(": ", 1)[1]), {})
            elif section == "LUN information:" and lun is not None and text.startswith(lun_facts):
                lun[text.split(": ", 1)[0]] = text.split(": ", 1)[1]
            elif section == "Account information:" and depth == 8:
                target["accounts"].append(text)
            elif section == "ACL information:" and depth == 8:
                target["acl"].append(text)
        return targets

    def accounts(self) -> list[str]:
        """The CHAP accounts tgtd holds (`tgtadm --mode account --op show`), bound or not."""
        shown = self.tgtadm("--mode", "account", "--op", "show")
        assert shown.rc == 0, shown.describe()
        return sorted(line.strip() for line in shown.stdout.splitlines()[1:] if line.strip())


class TargetTool:
    """tests/tools/iscsi_target_tool: the target backend (src/providers/iscsi) bound to one tgtd."""

    def __init__(self, tgtd: Tgtd, binary: str):
        self.tgtd = tgtd
        self.binary = binary

    def run(self, *args: str, input: str | None = None) -> Result:
        argv = [self.binary, "--control-port", str(self.tgtd.control_port), *args]
        done = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=60)
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str, input: str | None = None) -> Result:
        result = self.run(*args, input=input)
        assert result.rc == 0, result.describe()
        return result

    def fails(self, code: str, *args: str, input: str | None = None) -> Result:
        """The call fails with the CSI code `code` ("NOT_FOUND", ...)."""
        result = self.run(*args, input=input)
        assert result.rc == 1 and result.stderr.startswith(f"{code}: "), result.describe()
        return result

    def ensure(self, volume: str, image: Path) -> dict:
        return json.loads(self.ok("ensure", volume, str(image)).stdout)

    def list(self) -> list[dict]:
        return json.loads(self.ok("list").stdout)

    def set_chap(self, volume: str, user: str, password: str) -> Result:
        # The password goes in on stdin, as the provider holds it: never on an argv.
        return self.run("set-chap", volume, user, input=password + "\n")


def target_tool_path() -> str:
    """The test tool next to the rosetctl under test (ctest names it in the environment)."""
    explicit = os.environ.get("ROSETCTL_ISCSI_TARGET_TOOL")
    if explicit:
        return explicit
    binary = Path(os.environ.get("ROSETCTL_BIN") or DEFAULT_BINARY)
    return str(binary.parent.parent / "tests" / "iscsi_target_tool")


class Lun(NamedTuple):
    serial: str
    size: int


def lun_url(portal: str, iqn: str, lun: int = 1, chap: tuple[str, str] | None = None) -> str:
    auth = f"{chap[0]}%{chap[1]}@" if chap else ""
    return f"iscsi://{auth}{portal}/{iqn}/{lun}"


def libiscsi(argv: Sequence[str], env: dict[str, str] | None = None) -> Result:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30,
                          env={**os.environ, **env} if env else None)
    return Result(done.returncode, done.stdout, done.stderr)


def read_lun(portal: str, iqn: str, initiator: str, chap: tuple[str, str] | None = None,
             target_chap: tuple[str, str] | None = None) -> Lun | Result:
    """LUN 1's serial and size as `initiator` sees them, or the failed tool's Result. TARGET_CHAP:
    mutual CHAP, the account the target must answer with (libiscsi checks its answer)."""
    url = lun_url(portal, iqn, chap=chap)
    env = {"LIBISCSI_CHAP_TARGET_USERNAME": target_chap[0],
           "LIBISCSI_CHAP_TARGET_PASSWORD": target_chap[1]} if target_chap else None
    inq = libiscsi(["iscsi-inq", "-i", initiator, "-e", "1", "-c", "128", url], env)
    if inq.rc != 0:
        return inq
    serial = inq.stdout.split("Unit Serial Number:[", 1)[1].split("]", 1)[0].strip()
    capacity = libiscsi(["iscsi-readcapacity16", "-i", initiator, url], env)
    if capacity.rc != 0:
        return capacity
    size = int(capacity.stdout.split("Total size:", 1)[1].split()[0])
    return Lun(serial, size)


def kept_chap(state_dir: Path, volume_id: str, node_id: str = "target") -> tuple[str, str]:
    """The CHAP account (tgtd's name for it) and password the controller keeps for NODE_ID's
    publication of the volume (node_id "target": the target's own, for mutual CHAP), read as
    root from its state directory as the controller's restore reads them."""
    name = "target" if node_id == "target" else f"node.{node_id}"
    user, password = (state_dir / "iscsi" / "chap" / volume_id / name).read_text().splitlines()
    return f"{volume_id}:{user}", password


def visible_luns(portal: str, initiator: str) -> Result:
    """`iscsi-ls -s`: the targets and LUNs discovery shows `initiator`."""
    return libiscsi(["iscsi-ls", "-s", "-i", initiator, f"iscsi://{portal}"])


def login_with_alias(portal: str, iqn: str, initiator: str, alias: str) -> socket.socket:
    """Logs in to `iqn` as `initiator` with the InitiatorAlias `alias`, which no initiator tool
    here lets a test choose: one Login PDU (RFC 7143 11.12; operational stage straight to full
    feature, no authentication) on a TCP connection, kept open so that tgtd keeps the session.
    The caller closes the socket. Fails the test unless the target accepted the login."""
    keys = {"InitiatorName": initiator, "InitiatorAlias": alias, "TargetName": iqn,
            "SessionType": "Normal", "HeaderDigest": "None", "DataDigest": "None"}
    data = b"".join(f"{key}={value}".encode() + b"\0" for key, value in keys.items())
    header = bytearray(48)
    header[0] = 0x43  # immediate, Login Request
    header[1] = 0x80 | (1 << 2) | 3  # Transit, from operational negotiation to full feature
    header[5:8] = len(data).to_bytes(3, "big")
    header[8:14] = bytes([0x80, 0, 0, random.randrange(256), random.randrange(256), 1])  # ISID, random
    header[16:20] = (1).to_bytes(4, "big")  # initiator task tag
    host, port = portal.rsplit(":", 1)
    connection = socket.create_connection((host, int(port)), timeout=10)
    try:
        connection.sendall(bytes(header) + data + b"\0" * (-len(data) % 4))
        answer = connection.recv(48)
        assert len(answer) == 48 and answer[0] & 0x3F == 0x23, f"no Login Response: {answer!r}"
        assert answer[36] == 0, f"login refused: status class {answer[36]}, detail {answer[37]}"
    except BaseException:
        connection.close()
        raise
    return connection
