"""Fixtures of the iSCSI lab: a real tgtd per test (tgtd_lab.py) and a QEMU guest as a consumer
host per test (guest_lab.py), with the guest's kernel and initramfs built once per session."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import guest_lab
import tgtd_lab
from rosetctl_fixtures import skip_or_fail

__all__ = ["tgtd", "target_tool", "guest_boot_files", "guest_lab_factory"]


@pytest.fixture
def tgtd(workdir):
    """A started tgtd on 127.0.0.1:<free port>, control port of its own; SIGKILLed by PID after."""
    reason = tgtd_lab.unavailable_reason()
    if reason is not None:
        skip_or_fail(reason)
    daemon = tgtd_lab.Tgtd(workdir)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.kill()


@pytest.fixture
def target_tool(tgtd) -> tgtd_lab.TargetTool:
    path = tgtd_lab.target_tool_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing; build the iscsi_target_tool target (or set "
                    "ROSETCTL_ISCSI_TARGET_TOOL)", pytrace=False)
    return tgtd_lab.TargetTool(tgtd, path)


@pytest.fixture(scope="session")
def guest_boot_files() -> guest_lab.BootFiles:
    """The guest's uncompressed kernel and its initramfs, made once per test session in a
    temporary directory removed at its end (the kernel alone is ~65 MB)."""
    reason = guest_lab.unavailable_reason()
    if reason is not None:
        skip_or_fail(reason)
    directory = Path(tempfile.mkdtemp(prefix="rosetctl-guest-boot-", dir="/tmp"))
    try:
        yield guest_lab.prepare_boot_files(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def guest_lab_factory(guest_boot_files, workdir):
    """`guest_lab_factory(name)` boots nothing yet: it returns a Guest whose `run(script)` boots a
    guest that runs the script and powers off. Every qemu left running is killed by PID after."""
    guests: list[guest_lab.Guest] = []

    def make(name: str = "guest", initiator: str | None = None) -> guest_lab.Guest:
        guest = guest_lab.Guest(guest_boot_files, workdir / f"guest-{name}", name, initiator)
        guests.append(guest)
        return guest

    try:
        yield make
    finally:
        for guest in guests:
            guest.kill()
