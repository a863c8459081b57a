"""Describing a directory tree independently of rosetctl, to compare a restore with its source."""
from __future__ import annotations

import hashlib
import os
import random
import stat
from pathlib import Path


def describe_tree(root: Path, with_root_times: bool = True) -> dict[bytes, tuple]:
    """Every entry below root (root itself as b"."): type, mode, owner, mtime, size, content hash,
    link target and xattrs. Paths are bytes, so names with newlines and odd bytes compare exactly.
    atime is left out: rosetctl does not record it (reading a file changes it)."""
    out: dict[bytes, tuple] = {}
    root_bytes = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(root_bytes):
        for name in [b""] + dirnames + filenames:
            if name == b"" and dirpath != root_bytes:
                continue
            path = os.path.join(dirpath, name) if name else dirpath
            relative = os.path.relpath(path, root_bytes)
            st = os.lstat(path)
            content = target = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    content = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
            xattrs = {}
            if not stat.S_ISLNK(st.st_mode):
                for key in os.listxattr(path, follow_symlinks=False):
                    xattrs[key] = os.getxattr(path, key, follow_symlinks=False)
            mtime = st.st_mtime_ns if (relative != b"." or with_root_times) else None
            out[relative] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                             mtime, st.st_size if content else None, content, target,
                             tuple(sorted(xattrs.items())), st.st_rdev if stat.S_ISCHR(st.st_mode) else None)
    return out


def as_from_another_host(description: dict) -> dict:
    """What a restore on another node makes of a tree describe_tree() described: no setuid or setgid
    bit but on directories, no device nodes, no security.* or trusted.* xattrs (a snapshot another
    node sends is that node's word: docs/SECURITY.md)."""
    out = {}
    for path, (kind, mode, uid, gid, mtime, size, content, target, xattrs, rdev) in description.items():
        if kind in (stat.S_IFCHR, stat.S_IFBLK):
            continue
        if kind != stat.S_IFDIR:
            mode &= ~(stat.S_ISUID | stat.S_ISGID)
        xattrs = tuple((k, v) for k, v in xattrs if not k.startswith(("security.", "trusted.")))
        out[path] = (kind, mode, uid, gid, mtime, size, content, target, xattrs, rdev)
    return out


def differences(expected: dict, actual: dict) -> list[str]:
    lines = []
    for path in sorted(set(expected) | set(actual)):
        if expected.get(path) != actual.get(path):
            lines.append(f"{path!r}: expected {expected.get(path)}, got {actual.get(path)}")
    return lines


def set_mtime(path: Path | bytes, ns: int) -> None:
    os.utime(path, ns=(ns, ns), follow_symlinks=False)


def fill_everything(root: Path) -> None:
    """One of each thing a volume can hold, with unusual metadata."""
    (root / "plain.txt").write_text("hello\n")
    os.setxattr(root / "plain.txt", "user.checkpoint", b"epoch=3")
    (root / "empty").write_bytes(b"")
    (root / "empty dir").mkdir()
    os.setxattr(root / "empty dir", "user.note", b"")
    nested = root / "a" / "b" / "c"
    nested.mkdir(parents=True)
    (nested / "deep.bin").write_bytes(random.Random(1).randbytes(300_000))
    odd = os.path.join(os.fsencode(root), b"name with spaces\nand a newline \xff")
    with open(odd, "wb") as f:
        f.write(b"odd name")
    (root / "setuid").write_text("#!/bin/sh\n")
    os.chmod(root / "setuid", 0o4755)
    (root / "private").write_text("secret")
    os.chmod(root / "private", 0o600)
    os.chown(root / "private", 1234, 5678)
    os.chmod(root / "a" / "b", 0o750)
    os.chown(root / "a" / "b", 42, 43)
    os.symlink("plain.txt", root / "link")
    os.symlink("/nowhere/at/all", root / "dangling")
    os.lchown(root / "dangling", 7, 8)
    os.link(root / "plain.txt", root / "hardlink")
    os.mkfifo(root / "fifo", 0o640)
    with open(root / "sparse.img", "wb") as f:
        f.seek(32 * 2**20)
        f.write(b"end")
    set_mtime(root / "plain.txt", 1_600_000_000_123_456_789)
    set_mtime(root / "link", 1_500_000_000_000_000_001)
    set_mtime(root / "a" / "b", 1_400_000_000_000_000_002)
    set_mtime(root / "empty dir", 1_300_000_000_000_000_003)
