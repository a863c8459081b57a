"""A node that lies (issue 31, item 3): "evil" holds a real node certificate of the cluster's CA, is
registered with the controller, and answers ObjectStore calls as hostile_node.py's plan says.
Node B pulls from it (an admin's CreateVolume placed on B from evil's snapshot) and must take
nothing it did not ask for, nothing bigger than it was told, no record that is not the snapshot it
asked for or that a local CreateSnapshot would refuse; each refusal is DATA_LOSS naming evil and
what was wrong, and leaves B as it was (no record, no object, no part file that a later honest
pull would trip over), its memory bounded.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from controller_site import GRPC_CALL
from hostile_node import Snapshot
from hostile_node_fixtures import EVIL_SNAPSHOT_ID, Hostile
from test_placement import local_id
from test_snapshot_streaming import b_directory, placed_volume, restore_request, snapshot_through_controller

EVIL_PLACED = f"n4.evil.{EVIL_SNAPSHOT_ID}"
MiB = 1 << 20


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_under(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def victim_state(nodes: Hostile, tree_asked_for: str | None = None) -> dict:
    """What B holds: its snapshot records and volumes, every object in its store, every staged part.

    `tree_asked_for`: a tree B asked for and verified before the refusal, kept as any verified
    object of an interrupted pull is (unnamed by any commit until one arrives; garbage collection
    takes it otherwise): left out, so what is compared is what B was not asked for.
    """
    store = nodes.b.state_dir / "store"
    state = {"snapshots": nodes.b.ok_json("snapshot", "list"), "volumes": nodes.b.ok_json("volume", "list"),
             **{sub: files_under(store / sub) for sub in ("blobs", "trees", "commits", "incoming")}}
    state["trees"].discard(tree_asked_for)
    return state


# controller_site's one-call client, with a deadline of the test's choosing (its own is 10 s).
LONG_CALL = GRPC_CALL.replace("timeout=10,", "timeout=spec['timeout'],")


def restore_on_b(nodes: Hostile, csi, name: str, snapshot_id: str, timeout: float = 60) -> dict:
    """An admin's CSI CreateVolume on the controller, placed on B, from `snapshot_id`."""
    site = nodes.site
    cert, key, ca = site.identity("alice")
    spec = {"stubs": str(Path(csi.pb2.__file__).parent), "proto": "csi", "service": "Controller",
            "method": "CreateVolume", "request": restore_request(name, "consumer-b", snapshot_id),
            "target": site.address, "security": "mtls", "cert": str(cert), "key": str(key), "ca": str(ca),
            "metadata": [], "timeout": timeout}
    done = site.consumer_a.run([sys.executable, "-c", LONG_CALL, json.dumps(spec)], timeout=timeout + 30)
    site.printed += [done.stdout, done.stderr]
    assert done.rc == 0, done.describe()
    return json.loads(done.stdout)


def a_snapshot(nodes: Hostile, csi, files: dict[str, bytes]) -> tuple[str, str]:
    """A snapshot taken on A of a volume holding FILES: its placed id, and A's own id of it."""
    volume_id, source = placed_volume(nodes, "src", "consumer-a")
    for name, data in files.items():
        (source / name).write_bytes(data)
    placed = snapshot_through_controller(nodes, csi, "s1", volume_id)
    return placed, local_id(placed, "consumer-a")


def volume_files(nodes: Hostile, made: dict) -> dict[str, bytes]:
    root = b_directory(nodes, made["response"]["volume"]["volume_id"])
    return {p.name: p.read_bytes() for p in root.iterdir() if p.is_file()}


# ---------------------------------------------------------------- row 4: a lying snapshot id

def test_a_node_answering_with_another_nodes_snapshot_id_gets_nothing_recorded(hostile, csi):
    nodes = hostile
    a_placed, a_id = a_snapshot(nodes, csi, {"real": b"node-a's data\n"})
    # Asked for its snapshot "x", evil answers with A's real id (and its own content).
    nodes.evil.plan(lookup={"id": a_id, "name": "x"})
    before = victim_state(nodes)

    refused = restore_on_b(nodes, csi, "copy", "n4.evil.x")
    assert refused["code"] == "DATA_LOSS", refused
    details = refused["details"]
    assert 'node "evil" was asked for snapshot "x" and answered with snapshot' in details, details
    assert a_id in details and "nothing was stored" in details, details
    assert victim_state(nodes) == before, "expected nothing recorded, stored or staged on B"

    # A's snapshot on B is A's content, fetched from A: B holds nothing of evil's under A's id.
    made = restore_on_b(nodes, csi, "copy", a_placed)
    assert made["code"] == "OK", made
    assert volume_files(nodes, made) == {"real": b"node-a's data\n"}
    assert "held whole on this node" not in nodes.serve_b.output()


def test_a_record_pulled_from_one_node_is_never_taken_for_another_nodes_snapshot(hostile, csi):
    nodes = hostile
    a_placed, a_id = a_snapshot(nodes, csi, {"real": b"node-a's data\n"})
    # Asked for a snapshot by A's id, evil answers it with its own content: B records what evil
    # sent under that id, as evil's (the admin named evil), and restores it.
    nodes.evil.plan(lookup={"id": a_id})
    from_evil = restore_on_b(nodes, csi, "from-evil", f"n4.evil.{a_id}")
    assert from_evil["code"] == "OK", from_evil
    assert volume_files(nodes, from_evil) == {"data": b"evil's own content\n"}
    before = victim_state(nodes)

    # A's snapshot of that id is not "held whole on this node": B asks A, which names another
    # commit, so B refuses rather than restore evil's content for A's snapshot.
    refused = restore_on_b(nodes, csi, "from-a", a_placed)
    assert refused["code"] == "ALREADY_EXISTS", refused
    details = refused["details"]
    assert f"snapshot id {a_id} names another commit on this node" in details, details
    assert 'pulled from node "evil"' in details and 'node "consumer-a" says' in details, details
    assert "held whole on this node" not in nodes.serve_b.output()
    assert victim_state(nodes) == before


# ---------------------------------------------------------------- row 5: an endless blob, unrequested blobs

LEGITIMATE = b"legitimate"  # 10 bytes, in A's snapshot and in evil's tree alike


def test_an_endless_blob_is_refused_at_its_first_chunk_and_leaves_nothing_to_block_an_honest_pull(
        hostile, csi):
    nodes = hostile
    a_placed, _ = a_snapshot(nodes, csi, {"ten": LEGITIMATE})
    blob = sha256(LEGITIMATE)
    evil_tree = Snapshot({"ten": LEGITIMATE}).tree_id
    # evil's tree names the same 10 bytes; evil says the blob holds 1 TiB and never stops sending.
    nodes.evil.plan(files={"ten": LEGITIMATE.decode()}, endless_blob=True, endless_bytes=64 * MiB)
    before = victim_state(nodes)
    refused = restore_on_b(nodes, csi, "copy", EVIL_PLACED)
    assert refused["code"] == "DATA_LOSS", refused
    details = refused["details"]
    assert f'blob {blob} from node "evil"' in details, details
    assert "said to hold 1099511627776 bytes, where its tree says 10" in details, details
    assert victim_state(nodes, evil_tree) == before, "expected no part, blob or record left on B"

    # Said to hold its 10 bytes, then more of them: refused at the chunk that goes past.
    nodes.evil.plan(files={"ten": LEGITIMATE.decode()}, endless_blob=True, endless_blob_size=10,
                    endless_bytes=64 * MiB)
    refused = restore_on_b(nodes, csi, "copy", EVIL_PLACED)
    assert refused["code"] == "DATA_LOSS", refused
    assert f'blob {blob} from node "evil": a chunk of 1048576 bytes at byte 0 reaches past the 10 bytes' in (
        refused["details"]), refused
    assert victim_state(nodes, evil_tree) == before, "expected no part, blob or record left on B"

    # The honest pull of the same content from A is not blocked by anything evil sent.
    made = restore_on_b(nodes, csi, "copy", a_placed)
    assert made["code"] == "OK", made
    assert volume_files(nodes, made) == {"ten": LEGITIMATE}


def test_blobs_nobody_asked_for_are_refused_and_never_stored(hostile, csi):
    nodes = hostile
    unrequested = "a blob nobody asked for"
    nodes.evil.plan(unrequested_blobs=[unrequested])
    before = victim_state(nodes)
    refused = restore_on_b(nodes, csi, "copy", EVIL_PLACED)
    assert refused["code"] == "DATA_LOSS", refused
    blob = sha256(unrequested.encode())
    assert f'node "evil" sent blob {blob}, which was not asked for' in refused["details"], refused
    assert victim_state(nodes, nodes.evil.facts["tree_id"]) == before, (
        "expected the unrequested blob never stored, nor anything else")


# ---------------------------------------------------------------- row 6: an endless tree

def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def serve_pid(process) -> int:
    """The serve process itself (nsenter --net execs it, so the PID it was started as)."""
    assert Path(f"/proc/{process.pid}/comm").read_text().strip() == "rosetctl", process.args
    return process.pid


def test_an_endless_tree_is_cut_at_its_bound_and_never_held_in_memory(hostile, csi):
    nodes = hostile
    tree_id = nodes.evil.facts["tree_id"]
    pid = serve_pid(nodes.serve_b)
    before = victim_state(nodes)

    # Said to be bigger than any tree this node takes: refused at the first chunk.
    nodes.evil.plan(endless_tree=True, endless_tree_size=2 << 30, endless_bytes=64 * MiB)
    refused = restore_on_b(nodes, csi, "copy", EVIL_PLACED)
    assert refused["code"] == "DATA_LOSS", refused
    assert f'tree {tree_id} from node "evil" is said to hold 2147483648 bytes' in refused["details"], refused
    assert victim_state(nodes) == before

    # Said to be 1 GiB (the bound) and sent past it, forever: B takes the bound, on disk, then refuses.
    nodes.evil.plan(endless_tree=True, endless_tree_size=1 << 30, endless_bytes=3 << 29)
    peak, done = [rss_bytes(pid)], threading.Event()

    def watch():
        while not done.is_set():
            peak.append(rss_bytes(pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        refused = restore_on_b(nodes, csi, "copy", EVIL_PLACED, timeout=600)
    finally:
        done.set()
        watcher.join()
    assert refused["code"] == "DATA_LOSS", refused
    assert f'tree {tree_id} from node "evil": more bytes arrived than the 1073741824' in refused["details"], refused
    assert max(peak) < 200 * MiB, f"serve on B grew to {max(peak) // MiB} MiB while receiving the tree"
    assert victim_state(nodes) == before, "expected nothing of the tree kept on B"


# ---------------------------------------------------------------- row 12: a hostile name

def test_a_snapshot_name_holding_control_characters_is_refused_and_nothing_stored(hostile, csi):
    nodes = hostile
    nodes.evil.plan(lookup={"name": "evil\n\x1b[2J"})
    before = victim_state(nodes)
    refused = restore_on_b(nodes, csi, "copy", EVIL_PLACED)
    assert refused["code"] == "DATA_LOSS", refused
    details = refused["details"]
    assert f'node "evil" answered with snapshot "{EVIL_SNAPSHOT_ID}" that this node refuses' in details, details
    assert 'name "evil\\x0a\\x1b[2J" may only contain' in details, details
    assert "\n" not in details and "\x1b" not in details
    assert victim_state(nodes) == before

    # The same through `snapshot pull` by B's own CLI (PullSnapshot, any reference).
    pulled = nodes.site.b.run("snapshot", "pull", EVIL_SNAPSHOT_ID, "--from-node", "evil")
    assert pulled.rc == 1 and 'node "evil" answered with snapshot' in pulled.stderr, pulled.describe()
    assert "\x1b" not in pulled.stderr
    assert victim_state(nodes) == before

    # A message may hold control characters, as a local snapshot's may: kept, and shown escaped.
    nodes.evil.plan(lookup={"message": "line one\n\x1b[2Jline two"})
    made = restore_on_b(nodes, csi, "copy", EVIL_PLACED)
    assert made["code"] == "OK", made
    shown = nodes.b.run("snapshot", "show", "evil-snapshot")
    assert shown.rc == 0 and "\x1b" not in shown.stdout and "line one  [2Jline two" in shown.stdout, shown.describe()
    assert nodes.b.run("snapshot", "delete", "evil-snapshot").rc == 0


# ---------------------------------------------------------------- a file said to be appended to

def test_a_node_that_says_it_checks_a_blobs_first_bytes_and_does_not_gets_nothing_stored(hostile, csi):
    """B begins the blob of a file with the version it holds (from the snapshot's parent) only
    for a source that says it checks the prefix B names (LookupSnapshot's checks_prefix). evil
    says so and sends from the offset asked all the same, where its file does not begin with
    B's version: the blob fails its hash, DATA_LOSS, and B keeps nothing of it. A source that
    does not say so gets every blob asked for from byte 0, as before."""
    nodes = hostile
    earlier, later = os.urandom(2 * MiB), os.urandom(3 * MiB)
    a_placed, a_local = a_snapshot(nodes, csi, {"log": earlier})
    assert restore_on_b(nodes, csi, "copy", a_placed)["code"] == "OK"
    parent = nodes.b.ok_json("snapshot", "show", a_local)["commit"]
    evil = Snapshot({"log": later}, parent=parent)
    nodes.evil.plan(files={}, binary_files={"log": later.hex()}, parent=parent, checks_prefix=True)
    before = victim_state(nodes)
    refused = restore_on_b(nodes, csi, "copy2", EVIL_PLACED)
    assert refused["code"] == "DATA_LOSS", refused
    assert f'blob {sha256(later)} from node "evil" is corrupt' in refused["details"], refused
    asked = [o for c in nodes.evil.calls() if c["call"] == "FetchObjects" for o in c["objects"]
             if o[1] == sha256(later)]
    assert asked and asked[-1][2:] == [2 * MiB, sha256(earlier)], f"expected B to begin the blob with its version: {asked}"
    assert victim_state(nodes, evil.tree_id) == before, "expected no part, blob or record left on B"

    nodes.evil.plan(files={}, binary_files={"log": later.hex()}, parent=parent)
    made = restore_on_b(nodes, csi, "copy2", EVIL_PLACED)
    assert made["code"] == "OK", made
    assert volume_files(nodes, made) == {"log": later}
    asked = [o for c in nodes.evil.calls() if c["call"] == "FetchObjects" for o in c["objects"]
             if o[1] == sha256(later)]
    assert asked[-1][2:] == [0, ""], f"expected the whole blob asked of a source that checks no prefix: {asked}"
