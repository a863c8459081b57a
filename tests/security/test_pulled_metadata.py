"""Issue 31 row 7: what a snapshot from another node holds is that node's word. A tree with a
setuid-root file, a file with capabilities (security.capability), trusted.* xattrs and block and
character device nodes, taken on node A and restored on node B, is materialised on B without the
setuid and setgid bits, the device nodes and the privileged xattrs (core/commit_store/tree.h
strip_privileged_metadata); the same snapshot restored on A itself keeps every one of them.
"""
from __future__ import annotations

import os
import stat
import struct

from test_snapshot_streaming import Nodes, nodes  # noqa: F401  (the fixture)

# struct vfs_cap_data, revision 2: effective, CAP_NET_RAW (13) permitted.
CAPABILITY = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)


def plant_privileged_tree(root) -> None:
    (root / "suid").write_bytes(b"#!/bin/sh\n")
    os.chmod(root / "suid", 0o4755)
    (root / "sgid").write_bytes(b"x")
    os.chmod(root / "sgid", 0o2755)
    (root / "capable").write_bytes(b"y")
    os.setxattr(root / "capable", "security.capability", CAPABILITY)
    (root / "trusted").write_bytes(b"z")
    os.setxattr(root / "trusted", "trusted.overlay.opaque", b"y")
    os.setxattr(root / "trusted", "user.kept", b"yes")
    os.mknod(root / "disk", 0o660 | stat.S_IFBLK, os.makedev(8, 0))
    os.mknod(root / "mem", 0o666 | stat.S_IFCHR, os.makedev(1, 1))
    os.mkdir(root / "shared")
    os.chmod(root / "shared", 0o3777)  # setgid and sticky on a directory are not privileges


def test_privileged_metadata_from_another_node_is_not_materialised(nodes: Nodes):
    nodes.a.create("src")
    source = nodes.volume_dir(nodes.a, "src")
    plant_privileged_tree(source)
    nodes.a.ok("snapshot", "commit", "src", "--name", "planted")

    pushed = nodes.push("planted")
    assert pushed.rc == 0, pushed.describe()
    nodes.b.ok("snapshot", "restore", "planted", "--name", "copy")
    copy = nodes.volume_dir(nodes.b, "copy")
    assert sorted(p.name for p in copy.iterdir()) == ["capable", "sgid", "shared", "suid", "trusted"]
    assert stat.S_IMODE(os.stat(copy / "suid").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(copy / "sgid").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(copy / "shared").st_mode) == 0o3777
    assert "security.capability" not in os.listxattr(copy / "capable")
    assert os.listxattr(copy / "trusted") == ["user.kept"]
    assert (copy / "suid").read_bytes() == b"#!/bin/sh\n"

    # On A, its own snapshot is its own: everything comes back.
    nodes.a.ok("snapshot", "restore", "planted", "--name", "again")
    again = nodes.volume_dir(nodes.a, "again")
    assert stat.S_IMODE(os.stat(again / "suid").st_mode) == 0o4755
    assert os.getxattr(again / "capable", "security.capability") == CAPABILITY
    assert os.getxattr(again / "trusted", "trusted.overlay.opaque") == b"y"
    assert stat.S_ISBLK(os.lstat(again / "disk").st_mode) and os.lstat(again / "disk").st_rdev == os.makedev(8, 0)
    assert stat.S_ISCHR(os.lstat(again / "mem").st_mode)
