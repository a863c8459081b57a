"""Fixtures shared by the integration and conformance suites: the real binary, run as root, with real mounts.

Every test gets its own directory under /tmp holding its state dir and mount targets. Teardown
always runs, in this order: end the processes the test started, unmount everything at or below
the directory (deepest/newest first, lazily), detach the loop devices whose backing files lie
under it (image volumes), then remove the directory -- but never while a
mount is still there, so cleanup can never delete through a mount.
"""
from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

import csi_stubs
from csi_server import Server
from rosetctl_cli import ProcessTracker, Rosetctl, binary_path
from rosetctl_loops import detach_everything_under
from rosetctl_mounts import mount_points_under, unmount_everything_under


def pytest_report_header(config):
    return f"rosetctl binary: {binary_path()}"


def pytest_configure(config):
    """Under ctest, a file's run ends itself ROSETCTL_TEST_DEADLINE seconds in, before ctest's
    TIMEOUT SIGKILLs it: ctest's kill leaves no fixture a chance to clean up, and daemons that
    are no longer pytest's children (serve and tgtd started by the Ansible role, guests) would
    outlive the run. At the deadline every thread's stack goes to stderr (where it hung) and
    the run is interrupted as by Ctrl-C, which tears down every fixture."""
    seconds = int(os.environ.get("ROSETCTL_TEST_DEADLINE") or 0)
    if seconds <= 0:
        return

    def interrupt(signum, frame):
        # The real stderr (ctest's log): pytest's capture of sys.stderr has no file descriptor.
        print(f"\n{config.rootpath}: still running after ROSETCTL_TEST_DEADLINE={seconds} s; "
              "the stacks, then teardown:", file=sys.__stderr__, flush=True)
        faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
        config.stash[_DEADLINE_HIT] = True
        raise KeyboardInterrupt(f"ROSETCTL_TEST_DEADLINE of {seconds} s reached")

    signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(seconds)


_DEADLINE_HIT = pytest.StashKey[bool]()


def pytest_runtest_setup(item):
    """No test starts after the deadline (a test that caught the interrupt ended by itself)."""
    if item.config.stash.get(_DEADLINE_HIT, False):
        pytest.exit("ROSETCTL_TEST_DEADLINE reached: the file's remaining tests did not run", returncode=1)


def skip_or_fail(reason: str):
    """Skips the test, or fails it under ROSETCTL_REQUIRE_ROOT_TESTS=1 (CI, where nothing may skip)."""
    if os.environ.get("ROSETCTL_REQUIRE_ROOT_TESTS") == "1":
        pytest.fail(f"{reason} (ROSETCTL_REQUIRE_ROOT_TESTS=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def needs_root():
    """The suite mounts for real. Skips as non-root unless ROSETCTL_REQUIRE_ROOT_TESTS=1."""
    if os.geteuid() != 0:
        skip_or_fail("needs root for mount(2)")


@pytest.fixture(scope="session")
def rosetctl_binary() -> str:
    path = binary_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"rosetctl binary {path} is missing or not executable; build it or set ROSETCTL_BIN",
                    pytrace=False)
    return path


@pytest.fixture
def processes():
    """Start background processes through this, so teardown can end them."""
    tracker = ProcessTracker()
    yield tracker
    tracker.stop_all()


@pytest.fixture
def workdir(processes):
    """A fresh directory under /tmp; its mounts and contents are gone after the test, pass or fail."""
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="rosetctl-it-", dir="/tmp")))
    try:
        yield path
    finally:
        processes.stop_all()
        left = unmount_everything_under(str(path))
        if left:
            # Removing the tree now would delete through the mounts; leave it for a human.
            raise AssertionError(f"could not unmount {left}; left {path} in place")
        attached = detach_everything_under(path)
        shutil.rmtree(path, ignore_errors=True)
        if attached:
            raise AssertionError(f"could not detach loop devices {attached} backed by files in {path}")


@pytest.fixture
def state_dir(workdir) -> Path:
    return workdir / "state"


@pytest.fixture
def cli(workdir, state_dir, processes, rosetctl_binary) -> Rosetctl:
    """rosetctl with this test's --state-dir, an empty config and a clean environment."""
    return Rosetctl(state_dir=state_dir, cwd=workdir, tracker=processes, binary=rosetctl_binary)


@pytest.fixture
def mounts_in(workdir):
    """Mount points at or below the test directory right now (sorted)."""
    return lambda: mount_points_under(str(workdir))


@pytest.fixture(scope="session")
def csi(tmp_path_factory):
    """csi_pb2 / csi_pb2_grpc generated from proto/csi.proto for this run."""
    return csi_stubs.generate(tmp_path_factory.mktemp("csi-stubs"))


@pytest.fixture(scope="session")
def registry_stubs(tmp_path_factory):
    """rosetctl_pb2 / rosetctl_pb2_grpc generated from proto/rosetctl.proto (the node registry)."""
    return csi_stubs.generate(tmp_path_factory.mktemp("rosetctl-stubs"), "rosetctl")


@pytest.fixture
def start_serve(csi, cli, workdir):
    """Factory: start_serve(socket=None, extra=(), wait=True) -> Server. Everything is stopped at teardown."""
    servers = []

    def start(socket_path: Path | None = None, extra=(), wait: bool = True) -> Server:
        path = socket_path or workdir / "csi.sock"
        server = Server(csi, cli, path, workdir / f"serve-{len(servers)}.log", extra)
        servers.append(server)
        return server.wait_ready() if wait else server

    yield start
    for server in servers:
        server.close()  # the processes fixture ends the processes themselves


@pytest.fixture
def server(start_serve) -> Server:
    return start_serve()
