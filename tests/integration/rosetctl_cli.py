"""Running the real rosetctl binary: one isolated state directory per test, results as tuples."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import NamedTuple, Sequence

# This checkout's release build, for running pytest by hand (ctest sets ROSETCTL_BIN).
DEFAULT_BINARY = str(Path(__file__).resolve().parents[2] / "build" / "release" / "src" / "rosetctl")
DEFAULT_TIMEOUT = 60

# Exit codes documented in `rosetctl --help`.
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_PRECONDITION = 5
EXIT_BUSY = 6
EXIT_UNIMPLEMENTED = 9


def binary_path() -> str:
    return os.environ.get("ROSETCTL_BIN") or DEFAULT_BINARY


def isolated_environment() -> dict[str, str]:
    """The caller's environment without anything that would steer rosetctl, plus an empty config.

    ROSETCTL_CONFIG=/dev/null reads as an empty TOML file, so a host's
    /etc/rosetctl/config.toml never leaks into a test.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROSETCTL_") and k != "CSI_ENDPOINT"}
    env["ROSETCTL_CONFIG"] = "/dev/null"
    env["LC_ALL"] = "C.UTF-8"
    return env


class Result(NamedTuple):
    rc: int
    stdout: str
    stderr: str

    def json(self):
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as e:
            raise AssertionError(f"expected JSON on stdout, got {self.stdout!r} (stderr {self.stderr!r})") from e

    def describe(self) -> str:
        return f"rc={self.rc} stdout={self.stdout!r} stderr={self.stderr!r}"


def process_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie or a dead process is not alive)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class ProcessTracker:
    """Processes a test started; all of them are ended at teardown (SIGTERM, wait, SIGKILL)."""

    def __init__(self):
        self._procs: list[subprocess.Popen] = []

    def start(self, args: Sequence[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(list(args), **kwargs)
        self._procs.append(proc)
        return proc

    def stop_all(self, grace: float = 10.0) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self._procs:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=grace)
        for proc in self._procs:
            for stream in (proc.stdout, proc.stderr, proc.stdin):
                if stream is not None:
                    stream.close()
        self._procs.clear()


class Rosetctl:
    """rosetctl bound to one state directory. `run` puts `--state-dir` first unless told not to."""

    def __init__(self, state_dir: Path, cwd: Path, tracker: ProcessTracker, binary: str | None = None):
        self.state_dir = state_dir
        self.cwd = cwd
        self.tracker = tracker
        self.binary = binary or binary_path()
        self.env = isolated_environment()

    def argv(self, args: Sequence[str], with_state_dir: bool = True) -> list[str]:
        prefix = ["--state-dir", str(self.state_dir)] if with_state_dir else []
        return [self.binary, *prefix, *map(str, args)]

    def run(self, *args, with_state_dir: bool = True, cwd: Path | None = None,
            timeout: float = DEFAULT_TIMEOUT, env: dict[str, str] | None = None) -> Result:
        done = subprocess.run(
            self.argv(args, with_state_dir),
            cwd=cwd or self.cwd,
            env=env or self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def run_json(self, *args, **kwargs) -> Result:
        return self.run(*args, "-o", "json", **kwargs)

    def ok(self, *args, **kwargs) -> Result:
        result = self.run(*args, **kwargs)
        assert result.rc == 0, f"expected `rosetctl {' '.join(map(str, args))}` to succeed: {result.describe()}"
        return result

    def ok_json(self, *args, **kwargs):
        return self.ok(*args, "-o", "json", **kwargs).json()

    def start(self, *args, with_state_dir: bool = True, **kwargs) -> subprocess.Popen:
        """Starts rosetctl without waiting (for concurrency tests and `serve`)."""
        kwargs.setdefault("cwd", self.cwd)
        kwargs.setdefault("env", self.env)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        return self.tracker.start(self.argv(args, with_state_dir), **kwargs)

    # Short-hands for the common queries.
    def volumes(self) -> list[dict]:
        return self.ok_json("volume", "list")

    def volume(self, name_or_id: str) -> dict:
        return self.ok_json("volume", "show", name_or_id)

    def create(self, name: str, *extra) -> dict:
        return self.ok_json("volume", "create", name, *extra)

    def connect(self, name: str, target: Path | str | None = None, *extra) -> dict:
        args = ["volume", "connect", name, *extra]
        if target is not None:
            args += ["--target", str(target)]
        return self.ok_json(*args)


def run_all_at_once(cli: Rosetctl, commands: Sequence[Sequence[str]], timeout: float = DEFAULT_TIMEOUT) -> list[Result]:
    """Starts every command before waiting for any; returns their results in order."""
    procs = [
        cli.start(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for args in commands
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        results.append(Result(proc.returncode, out, err))
    return results
