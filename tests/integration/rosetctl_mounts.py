"""The mount table as the kernel shows it (/proc/self/mountinfo), and forced cleanup of test mounts.

Never shells out to mount(8): the same rule the product follows.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
from dataclasses import dataclass

MNT_DETACH = 2
UMOUNT_NOFOLLOW = 8

_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as \\ooo octal escapes."""
    raw = _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)
    # The kernel escapes bytes; decode them back as the filesystem encoding would.
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Mount:
    mount_id: int
    parent_id: int
    root: str  # the path inside the source filesystem that is mounted (a bind's source)
    mount_point: str
    options: tuple[str, ...]  # per-mount options, e.g. ("ro", "relatime")
    fs_type: str
    source: str

    @property
    def read_only(self) -> bool:
        return "ro" in self.options


def read_mounts() -> list[Mount]:
    mounts = []
    with open("/proc/self/mountinfo", encoding="latin-1") as table:
        for line in table:
            fields = line.rstrip("\n").split(" ")
            separator = fields.index("-")
            mounts.append(
                Mount(
                    mount_id=int(fields[0]),
                    parent_id=int(fields[1]),
                    root=unescape(fields[3]),
                    mount_point=unescape(fields[4]),
                    options=tuple(fields[5].split(",")),
                    fs_type=fields[separator + 1],
                    source=unescape(fields[separator + 2]),
                )
            )
    return mounts


def is_within(path: str, directory: str) -> bool:
    directory = directory.rstrip("/") or "/"
    return path == directory or path.startswith(directory + "/") or directory == "/"


def mounts_under(directory: str) -> list[Mount]:
    """Mounts whose mount point is the directory or below it, in mount order."""
    return [m for m in read_mounts() if is_within(m.mount_point, directory)]


def mount_points_under(directory: str) -> list[str]:
    return sorted(m.mount_point for m in mounts_under(directory))


def mount_at(path: str) -> Mount | None:
    """The topmost mount whose mount point is exactly this path, or None."""
    found = [m for m in read_mounts() if m.mount_point == path]
    return found[-1] if found else None


def is_mount_point(path: str) -> bool:
    return mount_at(path) is not None


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def detach(mount_point: str) -> int:
    """umount2(MNT_DETACH): returns 0 or the errno."""
    if _libc.umount2(os.fsencode(mount_point), MNT_DETACH | UMOUNT_NOFOLLOW) == 0:
        return 0
    return ctypes.get_errno()


def unmount_everything_under(directory: str, attempts: int = 20) -> list[str]:
    """Lazily unmounts every mount at or below `directory`, deepest and newest first.

    Stacked mounts on one point need one pass each, so this loops until the table is clean or
    no progress is made. Returns the mount points that could not be removed.
    """
    for _ in range(attempts):
        mounts = mounts_under(directory)
        if not mounts:
            return []
        mounts.sort(key=lambda m: (m.mount_point.count("/"), m.mount_id), reverse=True)
        progressed = False
        for mount in mounts:
            if detach(mount.mount_point) == 0:
                progressed = True
        if not progressed:
            break
    return [m.mount_point for m in mounts_under(directory)]
