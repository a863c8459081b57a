#!/usr/bin/python3
"""Random-fault soak of `rosetctl serve` (issue 24 item 1).

Several client threads drive one `serve` over its socket with a random mix of CSI calls on
directory, image (mount and block) and roset volumes (a fake Roset API in this process):
create, create from a snapshot, clone, expand, stage, publish, unpublish, unstage, snapshot,
delete snapshot, delete. At random moments serve is killed with SIGKILL (and now and then a CLI
run on the same state directory, mid-call), restarted, and, with the clients paused, checked:

- every interrupted call, retried with the same request, succeeds (CSI's idempotency);
- a call answered ABORTED (another operation on the volume is in progress) is made again with
  exponential backoff, as a CO does; one still ABORTED after ABORTED_PATIENCE is a violation;
- every restored or cloned volume holds exactly its source's content (the source volume's at
  the clone, the snapshot's as recorded when it was taken): read from its storage as soon as
  CreateVolume answers OK, and every publication holds the tree (or, on a block volume, the
  bytes) the model says its volume has;
- every call answered OK is reflected in state (ListVolumes, ListSnapshots, capacities,
  NodeGetVolumeStats of every publication) and on disk (each publication still shows the file
  written into it);
- after startup reconcile no mount, loop device or FUSE client exists that no record knows;
- every recorded staging and publication is mounted, or is repaired by repeating its call;
- `rosetctl snapshot verify` is clean.

Everything is random but seeded: the seed is printed, and `--seed` (or ROSETCTL_SOAK_SEED)
replays the same choices
(timings differ from run to run, so a replay is likely, not certain, to meet the same fault).
Each client owns its own volumes, so a call's outcome depends only on the calls before it.

Run as root: python3 tests/soak/soak.py --kills 40 [--seed N] [--workdir DIR] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

import grpc  # noqa: E402

import csi_stubs  # noqa: E402
from fake_roset_api import FakeRoset  # noqa: E402
from roset_fixtures import fuse_processes_under, stop_pid  # noqa: E402
from rosetctl_cli import binary_path, isolated_environment  # noqa: E402
from rosetctl_loops import detach_everything_under, loop_devices_under  # noqa: E402
from rosetctl_mounts import is_mount_point, mounts_under, unmount_everything_under  # noqa: E402

MiB = 2**20
CALL_TIMEOUT = 60.0
STANDIN_FUSE = HERE.parent / "integration" / "bin" / "roset-fuse"
KINDS = ("dir", "image", "block", "roset")
# ABORTED says another operation on the volume is in progress (here: a snapshot still being
# taken in the background, or a CLI run on the same state directory). A CO retries it with
# exponential backoff (the external-provisioner and kubelet do); a call still ABORTED after
# ABORTED_PATIENCE seconds is a violation: a volume stuck busy, or a lock nobody releases.
ABORTED_FIRST_WAIT = 0.05
ABORTED_LONGEST_WAIT = 2.0
ABORTED_PATIENCE = 30.0
# What the soak writes into a block volume and compares: its first bytes.
BLOCK_HEAD = 128
BLOCK = "<first bytes of the block device>"


@dataclass
class Volume:
    name: str
    id: str
    kind: str
    size: int
    context: dict
    staging: Path | None = None
    target: Path | None = None
    marker: str | None = None  # written into the publication; must still be there
    snapshots: dict[str, str] = field(default_factory=dict)  # name -> id
    # What the volume holds: path -> bytes (directories as "name/" -> b""), or for a block
    # volume {BLOCK: its first BLOCK_HEAD bytes}.
    content: dict[str, bytes] = field(default_factory=dict)


def empty_content(kind: str) -> dict[str, bytes]:
    return {BLOCK: bytes(BLOCK_HEAD)} if kind == "block" else {}


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file (and directory) under `root`, but ext4's own lost+found at its top."""
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [d for d in dirnames if d != "lost+found"]
        for name in dirnames:
            found[str((here / name).relative_to(root)) + "/"] = b""
        for name in filenames:
            found[str((here / name).relative_to(root))] = (here / name).read_bytes()
    return found


def read_block_head(device: Path) -> dict[str, bytes]:
    fd = os.open(device, os.O_RDONLY)
    try:
        return {BLOCK: os.pread(fd, BLOCK_HEAD, 0)}
    finally:
        os.close(fd)


def content_difference(found: dict[str, bytes], expected: dict[str, bytes]) -> str:
    """'' when equal, else what differs, short."""
    if found == expected:
        return ""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    changed = sorted(k for k in set(found) & set(expected) if found[k] != expected[k])
    parts = [f"{label} {names[:5]}" for label, names in
             (("missing", missing), ("unexpected", extra), ("different", changed)) if names]
    if changed:
        k = changed[0]
        parts.append(f"{k!r} reads {found[k][:60]!r}, expected {expected[k][:60]!r}")
    return "; ".join(parts)


@dataclass
class Stats:
    seed: int = 0
    kills: int = 0
    cli_kills: int = 0
    calls: int = 0
    ok: int = 0
    retries: int = 0
    refused: dict[str, int] = field(default_factory=dict)  # answers retried, by code
    ok_by_call: dict[str, int] = field(default_factory=dict)  # "create", "restore", "stage", ...
    copies_checked: int = 0
    violations: list[str] = field(default_factory=list)


class Serve:
    """One `rosetctl serve` process after another on the same state dir and socket."""

    def __init__(self, binary: str, state_dir: Path, workdir: Path, env: dict, csi):
        self.binary, self.state_dir, self.workdir, self.env, self.csi = binary, state_dir, workdir, env, csi
        self.socket = workdir / "csi.sock"
        self.proc: subprocess.Popen | None = None
        self.channel = None
        self.generation = 0
        self.log_path = workdir / "serve.log"

    def start(self):
        # The previous serve's channel goes only now, when no client is inside a call (kill()
        # keeps it: see there).
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self.generation += 1
        log = open(self.log_path, "ab")
        log.write(f"---- serve start {self.generation}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            [self.binary, "--state-dir", str(self.state_dir), "serve", "--endpoint", f"unix://{self.socket}",
             "-v", "--grace-period", "2"], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log, cwd=self.workdir)
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode} at start: {self.tail()}")
            if self.socket.is_socket():
                channel = grpc.insecure_channel(f"unix://{self.socket}")
                try:
                    grpc.channel_ready_future(channel).result(timeout=5)
                    self.channel = channel
                    return
                except grpc.FutureTimeoutError:
                    channel.close()
            time.sleep(0.02)
        raise RuntimeError(f"serve did not listen within 30 s: {self.tail()}")

    def kill(self):
        """SIGKILL, while clients are still inside their calls. The channel stays open until the
        next start(): a client's call then fails as it would for kubelet, UNAVAILABLE, and is
        retried; a closed (or no) channel would crash the client instead (it did, under load,
        when a kill fell between the two RPCs of a stage)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @property
    def controller(self):
        return self.csi.grpc.ControllerStub(self.channel)

    @property
    def node(self):
        return self.csi.grpc.NodeStub(self.channel)


class Gate:
    """Lets clients call while serve runs; the main thread closes it, waits for every client to
    be out of its call, kills and restarts serve, checks, and opens it again."""

    def __init__(self):
        self.cond = threading.Condition()
        self.open = False
        self.inside = 0
        self.finished = False

    def enter(self) -> bool:
        with self.cond:
            while not self.open and not self.finished:
                self.cond.wait()
            if self.finished:
                return False
            self.inside += 1
            return True

    def leave(self):
        with self.cond:
            self.inside -= 1
            self.cond.notify_all()

    def close(self):
        with self.cond:
            self.open = False

    def wait_empty(self, timeout: float = 120):
        with self.cond:
            if not self.cond.wait_for(lambda: self.inside == 0, timeout=timeout):
                raise RuntimeError(f"{self.inside} client calls did not end within {timeout}s")

    def reopen(self):
        with self.cond:
            self.open = True
            self.cond.notify_all()

    def finish(self):
        with self.cond:
            self.finished = True
            self.cond.notify_all()


class Client(threading.Thread):
    """One client: its own volumes, random calls on them, and the call a kill interrupted."""

    def __init__(self, soak: "Soak", index: int, seed: int):
        super().__init__(name=f"client-{index}", daemon=True)
        self.soak, self.index, self.rng = soak, index, random.Random(seed)
        self.pb2 = soak.csi.pb2
        self.volumes: dict[str, Volume] = {}
        self.counter = 0
        self.pending = None  # (what, call, request, apply) of a call a kill interrupted
        self.snapshot_content: dict[str, dict[str, bytes]] = {}  # id -> its volume's content then
        self.dir = soak.workdir / f"c{index}"
        self.dir.mkdir()
        self.error: str | None = None

    # ---- requests

    def capability(self, kind: str):
        pb2 = self.pb2
        mode = pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
        access = pb2.VolumeCapability.AccessMode(mode=mode)
        if kind == "block":
            return pb2.VolumeCapability(block=pb2.VolumeCapability.BlockVolume(), access_mode=access)
        return pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(), access_mode=access)

    def parameters(self, kind: str) -> dict:
        return {"dir": {}, "image": {"type": "image"}, "block": {"type": "image"},
                "roset": {"provider": "roset"}}[kind]

    def next_name(self, stem: str) -> str:
        self.counter += 1
        return f"c{self.index}-{stem}{self.counter}"

    # ---- the calls, each as (what, stub method name, request, apply on OK)

    def op_create(self, kind: str | None = None):
        kind = kind or self.rng.choice(KINDS)
        name, size = self.next_name(kind), self.rng.choice((16, 24, 32)) * MiB
        request = self.pb2.CreateVolumeRequest(
            name=name, capacity_range=self.pb2.CapacityRange(required_bytes=size),
            volume_capabilities=[self.capability(kind)], parameters=self.parameters(kind))

        def apply(response):
            v = response.volume
            self.volumes[name] = Volume(name, v.volume_id, kind, v.capacity_bytes, dict(v.volume_context),
                                        content=empty_content(kind))
        return f"create {kind} {name}", "controller", "CreateVolume", request, apply

    def op_copy(self, source: Volume | None = None, restore: bool | None = None):
        sources = [v for v in self.volumes.values() if v.kind != "roset"]
        if source is None and not sources:
            return None
        if source is None:
            # Half of the copies are restores, from a volume that has snapshots when one has.
            restore = self.rng.random() < 0.5 and any(v.snapshots for v in sources)
            source = self.rng.choice([v for v in sources if v.snapshots or not restore])
        pb2 = self.pb2
        if restore is None:
            restore = bool(source.snapshots) and self.rng.random() < 0.5
        if restore:
            snap_name, snap_id = self.rng.choice(sorted(source.snapshots.items()))
            content = pb2.VolumeContentSource(snapshot=pb2.VolumeContentSource.SnapshotSource(snapshot_id=snap_id))
            what = f"restore {snap_name}"
            expected = dict(self.snapshot_content[snap_id])
        else:
            content = pb2.VolumeContentSource(volume=pb2.VolumeContentSource.VolumeSource(volume_id=source.id))
            what = f"clone {source.name}"
            expected = dict(source.content)  # the model's now: every write of this client is done
        name = self.next_name(f"{source.kind}-copy")
        request = pb2.CreateVolumeRequest(
            name=name, capacity_range=pb2.CapacityRange(required_bytes=source.size),
            volume_capabilities=[self.capability(source.kind)], parameters=self.parameters(source.kind),
            volume_content_source=content)

        def apply(response):
            v = response.volume
            made = Volume(name, v.volume_id, source.kind, v.capacity_bytes, dict(v.volume_context),
                          content=expected)
            self.volumes[name] = made
            # OK means the copy is whole now: an empty or half-made one is a violation.
            self.soak.check_copy(made, f"{what} as {name}")
        return f"{what} as {name}", "controller", "CreateVolume", request, apply

    def op_expand(self):
        grow = [v for v in self.volumes.values() if v.kind in ("image", "block") and v.size < 64 * MiB]
        if not grow:
            return None
        v = self.rng.choice(grow)
        size = v.size + 8 * MiB
        request = self.pb2.ControllerExpandVolumeRequest(
            volume_id=v.id, capacity_range=self.pb2.CapacityRange(required_bytes=size),
            volume_capability=self.capability(v.kind))

        def apply(response):
            v.size = max(v.size, response.capacity_bytes)
        return f"expand {v.name}", "controller", "ControllerExpandVolume", request, apply

    def op_stage(self):
        idle = [v for v in self.volumes.values() if v.staging is None]
        if not idle:
            return None
        v = self.rng.choice(idle)
        staging = self.dir / f"stage-{v.name}"
        request = self.pb2.NodeStageVolumeRequest(
            volume_id=v.id, staging_target_path=str(staging), volume_capability=self.capability(v.kind),
            volume_context=v.context)

        def apply(_):
            v.staging = staging
        return f"stage {v.name}", "stage", "NodeStageVolume", request, apply

    def op_publish(self):
        staged = [v for v in self.volumes.values() if v.staging is not None and v.target is None]
        if not staged:
            return None
        v = self.rng.choice(staged)
        target = self.dir / f"pub-{v.name}"
        request = self.pb2.NodePublishVolumeRequest(
            volume_id=v.id, staging_target_path=str(v.staging), target_path=str(target),
            volume_capability=self.capability(v.kind), volume_context=v.context)

        def apply(_):
            v.target = target
            self.soak.check_published_content(v)
            written = f"{v.name} {self.rng.random()}"
            if v.kind == "block":
                head = written.encode().ljust(BLOCK_HEAD, b"\0")[:BLOCK_HEAD]
                fd = os.open(target, os.O_WRONLY)
                try:
                    os.pwrite(fd, head, 0)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                v.content = {BLOCK: head}
                return
            v.marker = written
            (target / "marker").write_text(v.marker)
            with open(target / "marker") as f:
                os.fsync(f.fileno())
            v.content["marker"] = v.marker.encode()
        return f"publish {v.name}", "node", "NodePublishVolume", request, apply

    def op_unpublish(self):
        published = [v for v in self.volumes.values() if v.target is not None]
        if not published:
            return None
        v = self.rng.choice(published)
        request = self.pb2.NodeUnpublishVolumeRequest(volume_id=v.id, target_path=str(v.target))

        def apply(_):
            v.target, v.marker = None, None
        return f"unpublish {v.name}", "node", "NodeUnpublishVolume", request, apply

    def op_unstage(self):
        staged = [v for v in self.volumes.values() if v.staging is not None and v.target is None]
        if not staged:
            return None
        v = self.rng.choice(staged)
        request = self.pb2.NodeUnstageVolumeRequest(volume_id=v.id, staging_target_path=str(v.staging))

        def apply(_):
            v.staging = None
        return f"unstage {v.name}", "unstage", "NodeUnstageVolume", request, apply

    def op_snapshot(self):
        if not self.volumes:
            return None
        v = self.rng.choice(sorted(self.volumes.values(), key=lambda x: x.name))
        name = self.next_name(f"{v.name}-s")
        request = self.pb2.CreateSnapshotRequest(source_volume_id=v.id, name=name)

        def apply(response):
            v.snapshots[name] = response.snapshot.snapshot_id
            # What a restore of it must hold: the volume's content now (no write of this
            # client's is in flight).
            self.snapshot_content[response.snapshot.snapshot_id] = dict(v.content)
        return f"snapshot {v.name} as {name}", "controller", "CreateSnapshot", request, apply

    def op_delete_snapshot(self):
        owners = [v for v in self.volumes.values() if v.snapshots]
        if not owners:
            return None
        v = self.rng.choice(owners)
        name, snap_id = self.rng.choice(sorted(v.snapshots.items()))
        request = self.pb2.DeleteSnapshotRequest(snapshot_id=snap_id)

        def apply(_):
            v.snapshots.pop(name, None)
        return f"delete snapshot {name}", "controller", "DeleteSnapshot", request, apply

    def op_delete(self):
        idle = [v for v in self.volumes.values() if v.staging is None]
        if not idle:
            return None
        v = self.rng.choice(idle)
        request = self.pb2.DeleteVolumeRequest(volume_id=v.id)

        def apply(_):
            self.volumes.pop(v.name, None)
            self.soak.orphan_snapshots.update(v.snapshots.values())  # snapshots outlive volumes
        return f"delete {v.name}", "controller", "DeleteVolume", request, apply

    OPS = [("op_create", 4), ("op_copy", 2), ("op_expand", 1), ("op_stage", 4), ("op_publish", 4),
           ("op_unpublish", 3), ("op_unstage", 3), ("op_snapshot", 2), ("op_delete_snapshot", 1),
           ("op_delete", 2)]

    def choose(self):
        if len(self.volumes) >= 6:  # keep the working set small: room on disk and quick checks
            weights = {"op_create": 0, "op_copy": 0}
        else:
            weights = {}
        names = [n for n, _ in self.OPS]
        w = [weights.get(n, wt) for n, wt in self.OPS]
        for _ in range(10):
            made = getattr(self, self.rng.choices(names, w)[0])()
            if made is not None:
                return made
        return self.op_create() if len(self.volumes) < 6 else self.op_delete_snapshot() or self.op_unpublish() \
            or self.op_unstage() or self.op_delete()

    # ---- running them

    def call(self, service: str, method: str, request):
        serve = self.soak.serve
        if service == "stage":  # kubelet's attach step (ControllerPublish) comes first
            node_id = serve.node.NodeGetInfo(self.pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id
            serve.controller.ControllerPublishVolume(self.pb2.ControllerPublishVolumeRequest(
                volume_id=request.volume_id, node_id=node_id, volume_capability=request.volume_capability,
                volume_context=request.volume_context), timeout=CALL_TIMEOUT)
        stub = serve.controller if service == "controller" else serve.node
        response = getattr(stub, method)(request, timeout=CALL_TIMEOUT)
        if service == "unstage":  # and kubelet's detach step (ControllerUnpublish) after it
            node_id = serve.node.NodeGetInfo(self.pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id
            serve.controller.ControllerUnpublishVolume(self.pb2.ControllerUnpublishVolumeRequest(
                volume_id=request.volume_id, node_id=node_id), timeout=CALL_TIMEOUT)
        return response

    def run(self):
        try:
            while self.soak.gate.enter():
                try:
                    if self.pending is None:
                        made = self.choose()
                        if made is not None:
                            self.attempt(made)
                finally:
                    self.soak.gate.leave()
                time.sleep(self.rng.random() * 0.02)
        except Exception:  # noqa: BLE001 (reported as a violation of the harness itself)
            self.error = traceback.format_exc()
            self.soak.violation(f"client {self.index} crashed: {self.error}")

    def attempt(self, made, after_kill: bool = False):
        """Makes the call as a CO would: ABORTED is retried with exponential backoff up to
        ABORTED_PATIENCE, then it is a violation; a kill's UNAVAILABLE leaves the call pending,
        to be made again after the restart (retry_pending). Any other failure is a violation."""
        what, service, method, request, apply = made
        label = f"retry of interrupted {what}" if after_kill else what
        wait, waited, tries = ABORTED_FIRST_WAIT, 0.0, 0
        while True:
            tries += 1
            if after_kill:
                self.soak.stats.retries += 1
            else:
                self.soak.count_call()
            try:
                response = self.call(service, method, request)
            except grpc.RpcError as e:
                code = e.code()
                if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED) and self.soak.killing:
                    self.pending = made  # retried with the same request after the restart
                    return
                if code == grpc.StatusCode.ABORTED and waited < ABORTED_PATIENCE:
                    self.soak.count_refused(code.name)
                    time.sleep(wait)
                    waited, wait = waited + wait, min(wait * 2, ABORTED_LONGEST_WAIT)
                    continue
                if code == grpc.StatusCode.ABORTED:
                    self.soak.violation(f"{label}: {method} still ABORTED after {tries} tries over {waited:.1f} s: "
                                        f"{e.details()}")
                else:
                    self.soak.violation(f"{label}: {method} failed {code.name}: {e.details()}")
                return
            self.soak.count_ok(what.split()[0])
            apply(response)
            return

    def retry_pending(self):
        """After a restart: the interrupted call again, with the same request, must succeed."""
        if self.pending is None:
            return
        made, self.pending = self.pending, None
        self.attempt(made, after_kill=True)


class Soak:
    def __init__(self, workdir: Path, binary: str, seed: int, kills: int, clients: int, log=print):
        self.workdir, self.binary, self.seed, self.kills_wanted = workdir, binary, seed, kills
        self.rng = random.Random(seed)
        self.log = log
        self.stats = Stats(seed=seed)
        self.lock = threading.Lock()
        self.killing = False
        self.gate = Gate()
        self.orphan_snapshots: set[str] = set()
        self.state_dir = workdir / "state"
        self.csi = csi_stubs.generate(Path(tempfile.mkdtemp(prefix="soak-stubs-", dir=workdir)))
        self.key = "rsk_soak_" + os.urandom(12).hex()
        storage = workdir / "roset-storage"
        storage.mkdir()
        self.fake = FakeRoset(storage, self.key).start()
        # Every kill of serve resets its connections to the fake API: expected, not worth a trace.
        self.fake.httpd.handle_error = lambda request, address: None
        key_file = workdir / "roset.key"
        key_file.write_text(self.key + "\n")
        os.chmod(key_file, 0o600)
        self.env = isolated_environment()
        self.env.update(ROSET_API_URL=self.fake.url, ROSET_API_KEY_FILE=str(key_file),
                        ROSET_FUSE_BINARY=str(STANDIN_FUSE))
        self.serve = Serve(binary, self.state_dir, workdir, self.env, self.csi)
        self.clients = [Client(self, i, self.rng.randrange(2**32)) for i in range(clients)]
        self.cli_counter = 0
        self.cli_volumes: dict[str, str] = {}  # name -> id, made by CLI runs

    # ---- bookkeeping (from client threads)

    def count_call(self):
        with self.lock:
            self.stats.calls += 1

    def count_ok(self, call: str):
        with self.lock:
            self.stats.ok += 1
            self.stats.ok_by_call[call] = self.stats.ok_by_call.get(call, 0) + 1

    def count_refused(self, code: str):
        with self.lock:
            self.stats.refused[code] = self.stats.refused.get(code, 0) + 1

    def violation(self, text: str):
        with self.lock:
            self.stats.violations.append(f"[kill {self.stats.kills}] {text}")
        self.log(f"VIOLATION [kill {self.stats.kills}] {text}")

    # ---- the run

    def run(self) -> Stats:
        self.log(f"soak seed {self.seed}: {self.kills_wanted} kills, {len(self.clients)} clients, "
                 f"workdir {self.workdir}")
        self.serve.start()
        for client in self.clients:
            client.start()
        self.gate.reopen()
        try:
            while self.stats.kills < self.kills_wanted and len(self.stats.violations) < 20:
                if self.rng.random() < 0.15:
                    self.cli_run_killed()
                time.sleep(self.rng.uniform(0.2, 1.2))
                if self.serve.proc.poll() is not None:
                    self.violation(f"serve exited {self.serve.proc.returncode} by itself: {self.serve.tail()}")
                self.kill_and_check()
        except KeyboardInterrupt:  # a long run cut short still reports what it did
            self.log(f"interrupted after {self.stats.kills} kills")
        finally:
            self.gate.close()
            self.gate.finish()
            for client in self.clients:
                client.join(timeout=CALL_TIMEOUT)
        if self.key in self.serve.log_path.read_text(errors="replace"):
            self.violation("the Roset API key appeared in serve's log")
        self.log(self.summary())
        return self.stats

    def kill_and_check(self):
        self.gate.close()
        self.killing = True
        # Kill while calls are in flight: the clients are still inside theirs.
        self.serve.kill()
        self.stats.kills += 1
        self.gate.wait_empty()
        self.killing = False
        self.serve.start()
        for client in self.clients:
            client.retry_pending()
        self.check()
        self.gate.reopen()

    def cli_run_killed(self):
        """A CLI run on the same state dir (its own in-process services), killed mid-call, then
        run again: the second must succeed."""
        self.cli_counter += 1
        name = f"cli-{self.cli_counter}"
        kind = self.rng.choice(("dir", "image"))
        args = [self.binary, "--state-dir", str(self.state_dir), "volume", "create", name, "--size", "16Mi",
                "-o", "json"] + (["--type", "image"] if kind == "image" else [])
        proc = subprocess.Popen(args, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=self.workdir)
        time.sleep(self.rng.uniform(0.0, 0.15))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            self.stats.cli_kills += 1
        proc.wait()
        again = subprocess.run(args, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               cwd=self.workdir, timeout=120)
        self.stats.calls += 2
        if again.returncode != 0:
            self.violation(f"CLI `volume create {name}` after a kill -9: exit {again.returncode}: {again.stderr.strip()}")
            return
        self.cli_volumes[name] = json.loads(again.stdout)["id"]
        # And away again, also killed at a random moment, then repeated.
        delete = [self.binary, "--state-dir", str(self.state_dir), "volume", "delete", name]
        proc = subprocess.Popen(delete, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=self.workdir)
        time.sleep(self.rng.uniform(0.0, 0.1))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            self.stats.cli_kills += 1
        proc.wait()
        again = subprocess.run(delete, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               cwd=self.workdir, timeout=120)
        if again.returncode not in (0, 3):  # 3: the killed run had already deleted it
            self.violation(f"CLI `volume delete {name}` after a kill -9: exit {again.returncode}: {again.stderr.strip()}")
            return
        self.cli_volumes.pop(name)

    # ---- invariants, with every client paused

    def model(self) -> list[Volume]:
        return [v for c in self.clients for v in c.volumes.values()]

    def check(self):
        pb2 = self.csi.pb2
        volumes = self.model()
        controller = self.serve.controller
        listed = {e.volume.volume_id: e.volume for e in controller.ListVolumes(
            pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT).entries}
        expected = {v.id for v in volumes} | set(self.cli_volumes.values())
        if set(listed) != expected:
            self.violation(f"ListVolumes: missing {sorted(expected - set(listed))}, "
                           f"unknown {sorted(set(listed) - expected)}")
        for v in volumes:
            if v.id in listed and listed[v.id].capacity_bytes < v.size:
                self.violation(f"{v.name}: capacity {listed[v.id].capacity_bytes} < {v.size} answered OK")
        snapshots = {e.snapshot.snapshot_id for e in controller.ListSnapshots(
            pb2.ListSnapshotsRequest(), timeout=CALL_TIMEOUT).entries}
        wanted = {s for v in volumes for s in v.snapshots.values()}
        if not wanted <= snapshots:
            self.violation(f"ListSnapshots lacks {sorted(wanted - snapshots)}")
        unknown = snapshots - wanted - self.orphan_snapshots
        if unknown:
            self.violation(f"ListSnapshots has snapshots no OK answer made: {sorted(unknown)}")

        for v in volumes:
            self.check_mounts_of(v)
        self.check_nothing_unknown(volumes)
        if self.stats.kills % 5 == 0 or self.stats.kills == self.kills_wanted:
            self.verify_store()

    def repair(self, v: Volume, what: str, call, request):
        """A recorded mount that is gone must come back when its call is repeated."""
        try:
            call(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as e:
            self.violation(f"{v.name}: {what} missing after restart and its repeat failed {e.code().name}: "
                           f"{e.details()}")
            return False
        return True

    def check_mounts_of(self, v: Volume):
        pb2, node = self.csi.pb2, self.serve.node
        cap = self.clients[0].capability(v.kind)
        if v.staging is not None and not is_mount_point(str(v.staging)):
            self.repair(v, f"staging {v.staging}", node.NodeStageVolume, pb2.NodeStageVolumeRequest(
                volume_id=v.id, staging_target_path=str(v.staging), volume_capability=cap, volume_context=v.context))
        if v.target is None:
            return
        if not is_mount_point(str(v.target)):
            if not self.repair(v, f"publication {v.target}", node.NodePublishVolume, pb2.NodePublishVolumeRequest(
                    volume_id=v.id, staging_target_path=str(v.staging), target_path=str(v.target),
                    volume_capability=cap, volume_context=v.context)):
                return
        try:
            stats = node.NodeGetVolumeStats(pb2.NodeGetVolumeStatsRequest(
                volume_id=v.id, volume_path=str(v.target)), timeout=CALL_TIMEOUT)
            if stats.HasField("volume_condition") and stats.volume_condition.abnormal:
                self.violation(f"{v.name}: published at {v.target} but abnormal: {stats.volume_condition.message}")
        except grpc.RpcError as e:
            self.violation(f"{v.name}: NodeGetVolumeStats at {v.target} failed {e.code().name}: {e.details()}")
        if v.marker is not None:
            try:
                found = (v.target / "marker").read_text()
            except OSError as e:
                found = f"<{e}>"
            if found != v.marker:
                self.violation(f"{v.name}: the file written into {v.target} reads {found!r}, not {v.marker!r}")
        if is_mount_point(str(v.target)):
            self.check_published_content(v)

    def stored_content(self, v: Volume) -> dict[str, bytes]:
        """What a local volume holds, read from its storage without mounting it: a directory
        volume's tree, an image's filesystem (debugfs rdump), a block volume's first bytes."""
        if v.kind == "dir":
            data = self.state_dir / "volumes" / v.id
            return read_tree(data) if data.exists() else {}
        image = self.state_dir / "images" / f"{v.id}.img"
        if v.kind == "block":
            with open(image, "rb") as f:
                return {BLOCK: f.read(BLOCK_HEAD).ljust(BLOCK_HEAD, b"\0")}
        dump = Path(tempfile.mkdtemp(prefix="dump-", dir=self.workdir))
        try:
            done = subprocess.run(["debugfs", "-R", f"rdump / {dump}", str(image)], capture_output=True,
                                  text=True, timeout=60)
            if done.returncode != 0:
                raise RuntimeError(f"debugfs on {image}: {done.stderr.strip()}")
            return read_tree(dump)
        finally:
            shutil.rmtree(dump, ignore_errors=True)

    def check_copy(self, v: Volume, what: str):
        with self.lock:
            self.stats.copies_checked += 1
        difference = content_difference(self.stored_content(v), v.content)
        if difference:
            self.violation(f"{what} answered OK, but {v.id} does not hold its source's content: {difference}")

    def check_published_content(self, v: Volume):
        """The publication just made shows what its volume holds, every file of it."""
        found = read_block_head(v.target) if v.kind == "block" else read_tree(v.target)
        difference = content_difference(found, v.content)
        if difference:
            self.violation(f"{v.name}: published at {v.target}, it does not hold what it should: {difference}")

    def check_nothing_unknown(self, volumes: list[Volume]):
        known = set()
        for v in volumes:
            for path in (v.staging, v.target):
                if path is not None:
                    known.add(str(path))
        for mount in mounts_under(str(self.workdir)):
            point = mount.mount_point
            if point in known or point.startswith(str(self.state_dir / "roset") + "/"):
                continue
            # A block staging keeps the device bound to a file below its staging directory.
            if any(point.startswith(k + "/") for k in known):
                continue
            self.violation(f"mount at {point} ({mount.fs_type}, {mount.root}) that no record knows")
        staged_images = {v.id for v in volumes if v.kind in ("image", "block") and v.staging is not None}
        for loop in loop_devices_under(self.state_dir):
            owner = Path(loop.backing_file).name.split(".")[0]
            if owner not in staged_images:
                self.violation(f"loop device {loop.device} on {loop.backing_file} that no staging uses")
        fuse = [pid for pid in fuse_processes_under(self.workdir)]
        if fuse and not any(v.kind == "roset" and v.staging is not None for v in volumes):
            self.violation(f"roset-fuse processes {fuse} while no roset volume is staged")

    def verify_store(self):
        done = subprocess.run([self.binary, "--state-dir", str(self.state_dir), "snapshot", "verify", "-o", "json"],
                              env=self.env, capture_output=True, text=True, timeout=300, cwd=self.workdir)
        if done.returncode != 0:
            self.violation(f"snapshot verify: exit {done.returncode}: {done.stdout[-500:]} {done.stderr[-500:]}")

    def summary(self) -> str:
        s = self.stats
        return (f"soak seed {self.seed}: {s.kills} serve kills, {s.cli_kills} CLI kills, {s.calls} calls "
                f"({s.ok} OK: {dict(sorted(s.ok_by_call.items()))}; {s.retries} retries after kills, "
                f"answers retried {s.refused}), {s.copies_checked} copies compared with their source, "
                f"{len(s.violations)} violations")

    def close(self):
        """Everything this soak started or made goes, whatever happened."""
        self.gate.finish()
        self.serve.stop()
        for pid in fuse_processes_under(self.workdir):
            stop_pid(pid)
        self.fake.close()
        left = unmount_everything_under(str(self.workdir))
        stuck = detach_everything_under(self.workdir, patience=30)
        return left, stuck


def run_soak(kills: int, seed: int | None = None, clients: int = 3, workdir: Path | None = None,
             keep: bool = False, binary: str | None = None, log=print) -> Stats:
    """Runs one soak; cleans up everything it made. `workdir` (made if missing) is left in place
    when given, for its owner to remove."""
    seed = seed if seed is not None else random.randrange(2**31)
    own = workdir is None
    if own:
        workdir = Path(os.path.realpath(tempfile.mkdtemp(prefix="rosetctl-soak-", dir="/tmp")))
    else:
        workdir.mkdir(parents=True, exist_ok=True)
    soak = Soak(workdir, binary or binary_path(), seed, kills, clients, log=log)
    try:
        return soak.run()
    finally:
        left, stuck = soak.close()
        if left or stuck:
            log(f"could not clean up: mounts {left}, loop devices {stuck}; left {workdir} in place")
        elif own and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif own:
            log(f"kept {workdir}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("ROSETCTL_SOAK_SEED") or 0) or None,
                        help="replay a run (default: ROSETCTL_SOAK_SEED, else a new one, printed)")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (serve.log, state)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("soak: run as root (it mounts)", file=sys.stderr)
        return 2
    started = time.monotonic()
    stats = run_soak(args.kills, args.seed, args.clients, keep=args.keep, log=lambda m: print(m, flush=True))
    elapsed = time.monotonic() - started
    for v in stats.violations:
        print(f"  {v}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "seed": stats.seed, "kills": stats.kills, "cli_kills": stats.cli_kills, "calls": stats.calls,
            "ok": stats.ok, "ok_by_call": stats.ok_by_call, "copies_checked": stats.copies_checked,
            "retries": stats.retries, "refused": stats.refused, "violations": stats.violations,
            "seconds": round(elapsed, 1)}, indent=2))
    print(f"took {elapsed:.0f}s")
    return 1 if stats.violations else 0


if __name__ == "__main__":
    sys.exit(main())
