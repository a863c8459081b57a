"""Loop devices as the kernel shows them (/sys/block/loop*/loop/), and forced cleanup of test ones.

Never shells out to losetup(8): the same rule the product follows.
"""
from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

LOOP_CLR_FD = 0x4C01
DELETED_MARK = " (deleted)"


@dataclass(frozen=True)
class Loop:
    device: str  # /dev/loopN
    backing_file: str  # without the " (deleted)" mark
    deleted: bool
    read_only: bool
    autoclear: bool
    size_bytes: int


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:  # detached between listing and reading: treat as free
        return ""


def loop_devices() -> list[Loop]:
    found = []
    for block in sorted(Path("/sys/block").glob("loop*")):
        backing = _read(block / "loop" / "backing_file")
        if not backing:
            continue
        deleted = backing.endswith(DELETED_MARK)
        found.append(Loop(
            device=f"/dev/{block.name}",
            backing_file=backing[: -len(DELETED_MARK)] if deleted else backing,
            deleted=deleted,
            read_only=_read(block / "ro") == "1",
            autoclear=_read(block / "loop" / "autoclear") == "1",
            size_bytes=int(_read(block / "size") or 0) * 512,
        ))
    return found


def loop_devices_of(path: str | Path) -> list[Loop]:
    """Loop devices backed by exactly this file (also once it has been deleted)."""
    return [loop for loop in loop_devices() if loop.backing_file == str(path)]


def loop_devices_under(directory: str | Path) -> list[Loop]:
    prefix = str(directory).rstrip("/") + "/"
    return [loop for loop in loop_devices() if loop.backing_file.startswith(prefix)]


def detach(device: str) -> int:
    """LOOP_CLR_FD: returns 0 or the errno (ENXIO: nothing attached, which is fine too)."""
    try:
        fd = os.open(device, os.O_RDONLY)
    except OSError as e:
        return e.errno
    try:
        fcntl.ioctl(fd, LOOP_CLR_FD)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def detach_everything_under(directory: str | Path, patience: float = 5.0) -> list[str]:
    """Detaches every loop device whose backing file lies under `directory` (run after unmounting:
    a mounted device is only marked to go). Returns the devices still attached after `patience`."""
    deadline = time.monotonic() + patience
    while True:
        left = loop_devices_under(directory)
        if not left or time.monotonic() > deadline:
            return [loop.device for loop in left]
        for loop in left:
            detach(loop.device)
        time.sleep(0.05)


def wait_until_detached(path: str | Path, patience: float = 5.0) -> list[Loop]:
    """The kernel detaches an autoclear device when its last user goes; give it a moment.
    Returns the devices still backed by `path` afterwards."""
    deadline = time.monotonic() + patience
    while True:
        left = loop_devices_of(path)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
