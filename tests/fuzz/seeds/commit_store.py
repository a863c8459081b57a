#!/usr/bin/python3
"""Writes the seed corpus of fuzz_commit_store (tests/fuzz/corpus/commit_store/seed-*).

Each seed is what commit_store_fuzz.cc reads: a flags byte, a commit object, NUL, a tree, NUL,
a blob. The objects are in the store's own text formats (src/core/commit_store/commit_object.cc
and tree.cc); "@tree" and "@blob" stand for the ids the target fills in.

    /usr/bin/python3 tests/fuzz/seeds/commit_store.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "corpus", "commit_store")

COMMIT = (
    "rosetctl-commit 1\n"
    "tree @tree\n"
    "volume local-0123456789abcdef\n"
    "volume-name data%20one\n"
    "time 1764230400123456789\n"
    "files {files}\n"
    "bytes {bytes}\n"
    "message nightly\n"
)
IMAGE_COMMIT = (
    "rosetctl-commit 1\n"
    "tree @tree\n"
    "parent " + "ab" * 32 + "\n"
    "image ext4\n"
    "volume local-0123456789abcdef\n"
    "volume-name img\n"
    "time 0\n"
    "files 1\n"
    "bytes 5\n"
    "message %E2%9C%93\n"
)
# A tree of every entry type: directories, a file, a hard link to it, a symlink, a FIFO, a
# socket, devices, and xattrs.
TREE_ALL = (
    "rosetctl-tree 1\n"
    "d . 755 0 0 1764230400000000000 user.note=root%3Dyes\n"
    "f a 644 1000 1000 1764230400000000001 5 @blob user.k=v security.x=%00%01\n"
    "h b 644 1000 1000 1764230400000000001 a\n"
    "b blk 660 0 6 0 2049\n"
    "c chr 666 0 0 0 259\n"
    "d dir 2775 0 0 -1\n"
    "p dir/fifo 600 0 0 0\n"
    "f dir/file%20with%20space 4755 0 0 5 5 @blob\n"
    "l dir/link 777 0 0 0 ../a\n"
    "s sock 600 0 0 0\n"
)
TREE_IMAGE = (
    "rosetctl-tree 1\n"
    "d . 700 0 0 0\n"
    "f image 600 0 0 0 5 @blob\n"
)
TREE_EMPTY = "rosetctl-tree 1\nd . 700 0 0 0\n"

SEEDS = [
    (0, COMMIT.format(files=2, bytes=10), TREE_ALL, "hello"),
    (0, IMAGE_COMMIT, TREE_IMAGE, "hello"),
    (0, COMMIT.format(files=0, bytes=0), TREE_EMPTY, ""),
    (1, COMMIT.format(files=2, bytes=10), TREE_ALL, "hello"),  # a damaged tree
    (4, COMMIT.format(files=2, bytes=10), TREE_ALL, "hello"),  # a damaged blob
    (8, IMAGE_COMMIT, TREE_IMAGE, "hello"),  # a blob cut short
]

os.makedirs(OUT, exist_ok=True)
for n, (flags, commit, tree, blob) in enumerate(SEEDS):
    data = bytes([flags]) + commit.encode() + b"\0" + tree.encode() + b"\0" + blob.encode()
    with open(os.path.join(OUT, f"seed-{n}"), "wb") as f:
        f.write(data)
