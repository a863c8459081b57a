"""A hostile node for the security tests: a Python gRPC server of rosetctl.v1.ObjectStore with mutual
TLS and a real node certificate (`rosetctl tls issue evil`), run on a host of the lab and
registered with the controller like any node, that answers what the test tells it to.

It holds one made-up snapshot of its own (`Snapshot`: a tree of files, its commit, their ids, in
rosetctl's text formats) and a *plan* (a JSON file the test rewrites between calls) that says how
to lie:

- `lookup`: fields of the SnapshotDetails it answers LookupSnapshot with, over its own snapshot's
  (another node's snapshot id, a name holding a newline and an escape sequence, ...);
- `files`: a snapshot of these files (name -> text) instead of the one it started with;
- `endless_blob`: every blob asked for is said to be `endless_blob_size` bytes (1 TiB) and sent in
  1 MiB chunks that never end (up to `endless_bytes`, so a receiver that does not stop it still
  sees the stream end);
- `unrequested_blobs`: blobs nobody asked for (sound ones, named by their hash) sent before the
  blobs asked for;
- `endless_tree`: the tree is said to be `endless_tree_size` bytes and sent past that, forever
  (up to `endless_bytes`).

Any csi.v1.Controller call the controller makes of it (a volume placed on it) is logged with the
transfer grant it carries, and refused.

Run as a program (`python3 hostile_node.py SPEC.json`) inside the evil host; `HostileNode` in
hostile_node_fixtures.py starts it and writes its plans. What it served is logged, one JSON line
per call, on stdout.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import sys
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc

CHUNK = 1 << 20
TREE_HEADER = b"rosetctl-tree 1\n"
COMMIT_HEADER = "rosetctl-commit 1"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def escape_field(raw: bytes) -> str:
    """rosetctl's percent-encoding of a store field (core/commit_store/field_escape.cc)."""
    return "".join(chr(c) if 0x20 < c < 0x7f and c not in b"%=" else f"%{c:02X}" for c in raw)


class Snapshot:
    """A snapshot as rosetctl would store it: files (name -> bytes) in a tree under a commit."""

    def __init__(self, files: dict[str, bytes], volume_id: str = "local-evil", volume_name: str = "evil",
                 message: str = "", time_ns: int = 1_700_000_000_000_000_000, parent: str = ""):
        self.blobs = {sha256(data): data for data in files.values()}
        lines = [b"d . 755 0 0 0\n"]
        for name in sorted(files, key=lambda n: n.encode()):
            data = files[name]
            lines.append(f"f {escape_field(name.encode())} 644 0 0 {time_ns} {len(data)} {sha256(data)}\n".encode())
        self.tree = TREE_HEADER + b"".join(lines)
        self.tree_id = sha256(self.tree)
        self.files = len(files)
        self.bytes = sum(len(d) for d in files.values())
        parent_line = f"parent {parent}\n" if parent else ""
        self.commit = (f"{COMMIT_HEADER}\ntree {self.tree_id}\n{parent_line}volume {escape_field(volume_id.encode())}\n"
                       f"volume-name {escape_field(volume_name.encode())}\ntime {time_ns}\nfiles {self.files}\n"
                       f"bytes {self.bytes}\nmessage {escape_field(message.encode())}\n").encode()
        self.commit_id = sha256(self.commit)
        self.volume_id, self.volume_name, self.message, self.time_ns = volume_id, volume_name, message, time_ns


class Servicer:
    """rosetctl.v1.ObjectStore, answering from `snapshot` as the plan file says at each call."""

    def __init__(self, pb2, snapshot: Snapshot, plan_path: Path, snapshot_id: str):
        self.pb2, self.snapshot, self.plan_path, self.snapshot_id = pb2, snapshot, plan_path, snapshot_id
        self.lock = threading.Lock()

    def plan(self) -> dict:
        return json.loads(self.plan_path.read_text()) if self.plan_path.exists() else {}

    def log(self, **fields) -> None:
        with self.lock:
            print(json.dumps(fields), flush=True)

    def snapshot_of(self, plan: dict) -> Snapshot:
        """The plan's own files, when it names some; else the snapshot it started with."""
        if "files" not in plan:
            return self.snapshot
        files = {name: data.encode() for name, data in plan["files"].items()}
        files.update({name: bytes.fromhex(data) for name, data in plan.get("binary_files", {}).items()})
        return Snapshot(files, parent=plan.get("parent", ""))

    def LookupSnapshot(self, request, context):
        plan = self.plan()
        s = self.snapshot_of(plan)
        details = dict(id=self.snapshot_id, name="evil-snapshot", provider="local", source_volume_id=s.volume_id,
                       source_volume_name=s.volume_name, message=s.message, size_bytes=s.bytes,
                       file_count=s.files, created_at_ns=s.time_ns, commit_id=s.commit_id, ready=True,
                       context={"type": "dir"})
        details.update(plan.get("lookup", {}))
        self.log(call="LookupSnapshot", reference=request.reference, answered=details)
        # "checks_prefix": evil says it honours prefix_sha256, and (like a source older than it)
        # sends every blob from the offset asked all the same.
        return self.pb2.LookupSnapshotResponse(snapshot=self.pb2.SnapshotDetails(**details), tree_id=s.tree_id,
                                               checks_prefix=bool(plan.get("checks_prefix")))

    def FetchObjects(self, request, context):
        plan, pb2 = self.plan(), self.pb2
        s = self.snapshot_of(plan)
        self.log(call="FetchObjects", objects=[[r.kind, r.id, r.offset, r.prefix_sha256] for r in request.objects])
        limit = int(plan.get("endless_bytes", 4 << 30))
        # With the blobs asked for (a receiver asks for its commit and tree first, on their own).
        blobs_asked = any(r.kind == pb2.OBJECT_BLOB for r in request.objects)
        for data in plan.get("unrequested_blobs", []) if blobs_asked else []:
            data = data.encode()
            yield pb2.ObjectChunk(kind=pb2.OBJECT_BLOB, id=sha256(data), offset=0, size=len(data), data=data)
        for ref in request.objects:
            if ref.kind == pb2.OBJECT_COMMIT:
                yield from self.whole(pb2.OBJECT_COMMIT, ref.id, s.commit)
            elif ref.kind == pb2.OBJECT_TREE and plan.get("endless_tree"):
                yield from self.endless(pb2.OBJECT_TREE, ref.id, int(plan["endless_tree_size"]), limit, context)
            elif ref.kind == pb2.OBJECT_TREE:
                yield from self.whole(pb2.OBJECT_TREE, ref.id, s.tree)
            elif plan.get("endless_blob"):
                yield from self.endless(pb2.OBJECT_BLOB, ref.id, int(plan.get("endless_blob_size", 1 << 40)),
                                        limit, context)
            else:
                yield from self.whole(pb2.OBJECT_BLOB, ref.id, s.blobs[ref.id][ref.offset:], ref.offset,
                                      len(s.blobs[ref.id]))

    def PullSnapshot(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "this node writes into no store")

    def whole(self, kind, object_id: str, data: bytes, offset: int = 0, size: int | None = None):
        size = len(data) + offset if size is None else size
        at = 0
        while True:
            yield self.pb2.ObjectChunk(kind=kind, id=object_id, offset=offset + at, size=size,
                                       data=data[at:at + CHUNK])
            at += CHUNK
            if at >= len(data):
                return

    def endless(self, kind, object_id: str, size: int, limit: int, context):
        """Chunks that go on past `size` (and past any bound), until the receiver hangs up or
        `limit` bytes went: the receiver must stop it long before."""
        junk = b"x" * CHUNK
        sent = 0
        started = time.monotonic()
        while sent < limit and context.is_active():
            yield self.pb2.ObjectChunk(kind=kind, id=object_id, offset=sent, size=size, data=junk)
            sent += CHUNK
        self.log(call="endless", kind=kind, sent=sent, seconds=round(time.monotonic() - started, 1),
                 receiver_hung_up=not context.is_active())


class ControllerCalls(grpc.GenericRpcHandler):
    """csi.v1.Controller, as the controller calls a node it places a volume on: every call is logged
    with the transfer grant it carries (what a receiver gets to show the source), then refused."""

    def __init__(self, servicer: Servicer):
        self.servicer = servicer

    def service(self, details):
        if not details.method.startswith("/csi.v1.Controller/"):
            return None
        metadata = dict(details.invocation_metadata)

        def refuse(request, context):
            self.servicer.log(call=details.method.rsplit("/", 1)[1],
                              grant=metadata.get("rosetctl-transfer-grant", ""))
            context.abort(grpc.StatusCode.UNAVAILABLE, "this node makes no volumes")

        return grpc.unary_unary_rpc_method_handler(refuse)


def serve(spec: dict) -> None:
    sys.path.insert(0, spec["stubs"])
    pb2 = importlib.import_module("rosetctl_pb2")
    services = importlib.import_module("rosetctl_pb2_grpc")
    snapshot = Snapshot({name: data.encode() for name, data in spec["files"].items()})
    servicer = Servicer(pb2, snapshot, Path(spec["plan"]), spec["snapshot_id"])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_send_message_length", 8 << 20)])
    services.add_ObjectStoreServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers([ControllerCalls(servicer)])
    read = lambda name: Path(spec[name]).read_bytes()
    credentials = grpc.ssl_server_credentials([(read("key"), read("cert"))], root_certificates=read("ca"),
                                              require_client_auth=True)
    server.add_secure_port(spec["listen"], credentials)
    server.start()
    print(json.dumps({"listening": spec["listen"], "tree_id": snapshot.tree_id, "commit_id": snapshot.commit_id,
                      "blobs": sorted(snapshot.blobs)}), flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    serve(json.loads(Path(sys.argv[1]).read_text()))
