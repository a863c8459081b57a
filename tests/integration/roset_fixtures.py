"""Fixtures for the roset provider: a fake Roset API, the stand-in roset-fuse, and a watch for the key.

`roset` gives each test its own fake API (in this process), a fresh API key in a 0600 key file,
and sets the CLI's environment to use them. At teardown it ends the roset-fuse processes of the
test by pid (they run detached, outside the process tracker), then the workdir fixture unmounts.

Every key handed out is watched for: a thread reads /proc/*/cmdline all through the session,
and each test's teardown greps its logs (CLI output, serve logs, roset-fuse logs).
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fake_roset_api import FakeRoset
from rosetctl_cli import Rosetctl, Result, process_alive  # noqa: F401 (tests import it from here)

STANDIN_FUSE = Path(__file__).resolve().parent / "bin" / "roset-fuse"


class KeyWatch:
    """Scans every process's command line for any key handed out, until stopped."""

    def __init__(self):
        self.keys: set[str] = set()
        self.hits: list[str] = []
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._scan_forever, daemon=True)
        self.thread.start()

    def add(self, key: str):
        with self.lock:
            self.keys.add(key)

    def scan_once(self):
        with self.lock:
            keys = list(self.keys)
        if not keys:
            return
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
            except OSError:
                continue
            for key in keys:
                if key in cmdline:
                    with self.lock:
                        self.hits.append(f"pid {entry.name}: {cmdline.replace(chr(0), ' ')[:300]}")

    def _scan_forever(self):
        while self.running:
            self.scan_once()
            time.sleep(0.05)

    def stop(self):
        self.running = False
        self.thread.join(timeout=5)


@pytest.fixture(scope="session")
def key_watch():
    watch = KeyWatch()
    yield watch
    watch.stop()
    assert not watch.hits, f"an API key appeared on a command line: {watch.hits[:5]}"


@dataclass
class RosetEnv:
    fake: FakeRoset
    key: str
    key_file: Path
    state_dir: Path
    workdir: Path
    outputs: list[str] = field(default_factory=list)

    def records(self) -> list[dict]:
        """The node's records of shared roset-fuse processes."""
        out = []
        for path in sorted((self.state_dir / "roset" / "fuse").glob("*/record.json")):
            out.append(json.loads(path.read_text()) | {"dir": str(path.parent)})
        return out

    def fuse_pids(self) -> list[int]:
        return [r["pid"] for r in self.records() if r["pid"]]

    def node_of(self, volume: dict) -> dict:
        return self.fake.state.nodes[volume["context"]["nodeId"]]


def stop_pid(pid: int, grace: float = 5.0):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.05)
        if not process_alive(pid):
            return


def fuse_processes_under(directory: Path) -> list[int]:
    """Processes with an argument inside `directory` (our roset-fuse clients), by pid."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        program = os.path.basename(args[0])
        if program.startswith(b"fusermount") or b"rosetctl" in program:
            continue  # libfuse's auto_unmount helper belongs to its client; rosetctl is not a client
        if any(arg.startswith(os.fsencode(str(directory)) + b"/") for arg in args[1:]):
            found.append(int(entry.name))
    return found


def write_key_file(path: Path, key: str, mode: int = 0o600):
    path.write_text(key + "\n")
    os.chmod(path, mode)


@pytest.fixture
def roset(workdir, state_dir, cli: Rosetctl, key_watch, processes):
    key = "rsk_live_" + secrets.token_hex(20)
    key_watch.add(key)
    storage = workdir / "roset-storage"
    storage.mkdir()
    fake = FakeRoset(storage, key).start()
    key_file = workdir / "roset.key"
    write_key_file(key_file, key)
    cli.env.update(ROSET_API_URL=fake.url, ROSET_API_KEY_FILE=str(key_file), ROSET_FUSE_BINARY=str(STANDIN_FUSE),
                   ROSETCTL_PROVIDER="roset")
    env = RosetEnv(fake, key, key_file, state_dir, workdir)
    original_run = cli.run

    def run_and_keep(*args, **kwargs) -> Result:
        result = original_run(*args, **kwargs)
        env.outputs.append(result.stdout + result.stderr)
        return result

    cli.run = run_and_keep
    try:
        yield env
    finally:
        logs = list(env.outputs)
        for path in list(workdir.glob("serve-*.log")) + list((state_dir / "roset").glob("fuse/*/fuse.log")):
            logs.append(path.read_text(errors="replace"))
        key_watch.scan_once()
        processes.stop_all()  # serve first, so nothing restarts a client while they are ended
        for pid in set(env.fuse_pids() + fuse_processes_under(workdir)):
            stop_pid(pid)
        fake.close()
        leaked = [log[:200] for log in logs if key in log]
        assert not leaked, f"the API key appeared in a log or output: {leaked}"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)
