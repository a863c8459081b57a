"""No secret anywhere (issue 24, item 5): flows run with recognisable secrets -- a Roset API key
(the fake API), a CHAP password (a real tgtd), the private keys `rosetctl tls` makes -- and
everything they leave is searched for each secret, as written, in base64 (at any alignment) and
in hex:

- every CLI stdout and stderr (with -v, and JSON outputs), serve's log, every gRPC error message;
- every file under the test's directory (the state dir with its database, WAL and roset-fuse
  logs; the tls dir; mount targets are not entered), and every row of the state database;
- the command line and environment of every process while the flows run: /proc is polled in a
  thread, and every program rosetctl runs (tgtadm, the mkfs family, fusermount3, roset-fuse) is
  a wrapper that records its argv and environment before it execs the real one, so that even a
  child that lives a millisecond is seen.

Only the places meant to hold a secret may: the key file and the secrets file the operator
wrote, roset-fuse's 0600 credentials file (`<state>/roset/fuse/<id>/secret/credentials`), the `.key` files
of `rosetctl tls`. One documented exception: tgtadm takes a CHAP password only on its command
line (src/providers/iscsi/tgt_chap.cc says why), so the argv of `tgtadm --mode account --op new`
holds it; any other process holding it fails the test.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import shutil
import sqlite3
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from csi_server import expect_code, mount_capability
from roset_fixtures import STANDIN_FUSE
from tgtd_lab import INITIATOR_A, free_port

# What rosetctl runs (src/core/run_program.h's callers, and roset-fuse): each is wrapped.
WRAPPED = ("tgtadm", "iscsiadm", "mkfs.ext4", "mkfs.xfs", "e2fsck", "resize2fs", "xfs_growfs", "fusermount3")


def encodings(secret: bytes) -> list[bytes]:
    """The secret and the forms it would take inside base64 or hex text, wherever it starts."""
    forms = [secret, binascii.hexlify(secret), binascii.hexlify(secret).upper()]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for offset in range(3):
            text = encode(b"\0" * offset + secret)
            # The first group holds the prefix's bits, the last the padding: the rest depends only
            # on the secret.
            forms.append(text[4 if offset else 0:-4])
    return [form for form in forms if len(form) >= 12]


@dataclass
class Secret:
    label: str
    value: bytes
    forms: list[bytes] = field(default_factory=list)


class SecretScan:
    """The secrets of a test and everything seen to hold one."""

    def __init__(self):
        self.secrets: list[Secret] = []
        self.hits: list[tuple[str, str]] = []  # (label, where)
        self.lock = threading.Lock()

    def add(self, label: str, value: str | bytes):
        raw = value.encode() if isinstance(value, str) else value
        with self.lock:
            self.secrets.append(Secret(label, raw, encodings(raw)))

    def labels_in(self, blob: bytes) -> list[str]:
        with self.lock:
            return [s.label for s in self.secrets if any(form in blob for form in s.forms)]

    def check(self, blob: bytes | str, where: str):
        if isinstance(blob, str):
            blob = blob.encode(errors="surrogateescape")
        for label in self.labels_in(blob):
            with self.lock:
                self.hits.append((label, where))


class ProcessWatch:
    """Polls every process's command line and environment until stopped."""

    def __init__(self, scan: SecretScan):
        self.scan = scan
        self.seen: set[tuple[str, str]] = set()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def poll(self):
        me = str(os.getpid())
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and entry.name != me:
                self._check(entry.name)

    def _check(self, pid: str):
        """One consistent look at a process: its command line read before and after its
        environment is the same (no exec in between, not exited), so a hit is attributed to the
        program that really held it."""
        for _ in range(5):
            try:
                before = Path(f"/proc/{pid}/cmdline").read_bytes()
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                after = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                return
            if before == after and before:
                break
        else:
            return  # exited (an empty command line) or exec'ing throughout
        argv = before.replace(b"\0", b" ").decode(errors="replace")
        for part, blob in (("cmdline", before), ("environ", environ)):
            for label in self.scan.labels_in(blob):
                where = f"{part} of pid {pid}: {argv}"
                if (label, where) not in self.seen:
                    self.seen.add((label, where))
                    self.scan.check(blob, where)

    def _run(self):
        while self.running:
            self.poll()
            time.sleep(0.005)

    def stop(self):
        self.running = False
        self.thread.join(timeout=10)


def write_wrapper(wrapper: Path, records: Path, real: str) -> None:
    """`wrapper` records its argv and environment in a file of its own under `records`, then
    execs `real` with both unchanged."""
    # Absolute paths: roset-fuse is started with exactly the environment it needs, no PATH.
    mktemp, cat = shutil.which("mktemp"), shutil.which("cat")
    wrapper.write_text(f"""#!/bin/sh
record=$({mktemp} -p {records} {wrapper.name}.XXXXXX)
{{ printf '%s\\0' "{real}" "$@"; printf '\\n'; {cat} /proc/$$/environ; }} > "$record"
exec "{real}" "$@"
""")
    wrapper.chmod(0o755)


def is_allowed_tgtadm(argv: list[bytes]) -> bool:
    """The documented exception: `tgtadm ... --mode account --op new --user U --password P`."""
    program = [a for a in argv[:2] if os.path.basename(a) == b"tgtadm"]
    words = set(argv)
    return bool(program) and {b"--mode", b"account", b"--op", b"new", b"--password"} <= words


def walk_files(top: Path):
    """Regular files under top, not entering other filesystems (mount targets, roset-fuse)."""
    device = os.lstat(top).st_dev
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == device]
        for name in files:
            path = Path(root) / name
            try:
                if stat.S_ISREG(os.lstat(path).st_mode):
                    yield path
            except OSError:
                continue


def read_chunks(path: Path, size: int = 1 << 20, overlap: int = 4096):
    """The file in overlapping chunks (image files are tens of MiB)."""
    try:
        with open(path, "rb") as f:
            tail = b""
            while chunk := f.read(size):
                yield tail + chunk
                tail = chunk[-overlap:]
    except OSError:
        return


@dataclass
class Leaks:
    scan: SecretScan
    workdir: Path
    state_dir: Path
    records: Path
    outputs: list[str] = field(default_factory=list)
    allowed_files: dict[str, set[str]] = field(default_factory=dict)  # label -> glob patterns
    allowed_environ: dict[str, set[str]] = field(default_factory=dict)  # label -> program names

    def allow_environ(self, label: str, program: str):
        """`program`'s own environment may hold the secret (the operator put it there)."""
        self.allowed_environ.setdefault(label, set()).add(program)

    def environ_allowed(self, label: str, where: str) -> bool:
        if not where.startswith("environ of pid "):
            return False
        argv0 = where.split(": ", 1)[1].split(" ", 1)[0]
        return os.path.basename(argv0) in self.allowed_environ.get(label, ())

    def allow_file(self, label: str, pattern: str):
        self.allowed_files.setdefault(label, set()).add(pattern)

    def _file_allowed(self, label: str, path: Path) -> bool:
        relative = path.relative_to(self.workdir)
        return any(relative.match(p) for p in self.allowed_files.get(label, ()))

    def collect(self):
        """Everything: outputs, exec records, files and database rows."""
        for text in self.outputs:
            self.scan.check(text, f"output: {text[:160]!r}")
        self.collect_state()
        for record in sorted(self.records.glob("*")):
            argv_part, _, environ = record.read_bytes().partition(b"\n")
            argv = argv_part.split(b"\0")
            for label in self.scan.labels_in(environ):
                self.scan.hits.append((label, f"environment of {argv[0].decode()}"))
            if self.scan.labels_in(argv_part) and not is_allowed_tgtadm(argv):
                shown = b" ".join(argv).decode(errors="replace")
                for label in self.scan.labels_in(argv_part):
                    self.scan.hits.append((label, f"argv: {shown}"))

    def collect_state(self):
        """The files under the test's directory and the state database's rows as they are now:
        called mid-flow too, while roset-fuse runs and its files exist."""
        for path in walk_files(self.workdir):
            if path.is_relative_to(self.records):
                continue
            for chunk in read_chunks(path):
                for label in self.scan.labels_in(chunk):
                    if not self._file_allowed(label, path):
                        self.scan.hits.append((label, f"file {path}"))
        database = self.state_dir / "state.db"
        if database.exists():
            with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
                tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                for table in tables:
                    for row in db.execute(f'SELECT * FROM "{table}"'):
                        self.scan.check(repr(row), f"state.db table {table}: {repr(row)[:160]}")


@pytest.fixture
def leaks(cli, workdir, state_dir, processes):
    """The scan of one test: the CLI's outputs kept, rosetctl's programs wrapped, /proc polled;
    at teardown everything is searched and any secret outside its place fails the test."""
    scan = SecretScan()
    records = workdir / "exec-records"
    system_path = "/usr/sbin:/usr/bin:/sbin:/bin"
    (workdir / "wrappers").mkdir()
    records.mkdir()
    for name in WRAPPED:
        real = shutil.which(name, path=system_path)
        if real:
            write_wrapper(workdir / "wrappers" / name, records, real)
    cli.env["PATH"] = f"{workdir / 'wrappers'}:{cli.env.get('PATH', system_path)}"
    result = Leaks(scan, workdir, state_dir, records)
    original_run = cli.run

    def run_and_keep(*args, **kwargs):
        done = original_run(*args, **kwargs)
        result.outputs.append(done.stdout + done.stderr)
        return done

    cli.run = run_and_keep
    watch = ProcessWatch(scan)
    try:
        yield result
    finally:
        watch.poll()
        watch.stop()
    processes.stop_all()
    for log in workdir.glob("serve-*.log"):
        result.outputs.append(log.read_text(errors="replace"))
    result.collect()
    # The process watch saw the wrappers' and tgtadm's own argv: the exception applies there too.
    real_hits = []
    for label, where in dict.fromkeys(scan.hits):
        if where.startswith("cmdline of pid "):
            argv = where.split(": ", 1)[1].encode().split(b" ")
            if is_allowed_tgtadm(argv):
                continue
        if result.environ_allowed(label, where):
            continue
        real_hits.append((label, where))
    assert not real_hits, "secrets found outside their place:\n" + "\n".join(f"{l}: {w}" for l, w in real_hits[:20])


def test_roset_api_key_is_only_in_its_key_file_and_roset_fuse_credentials(cli, roset, leaks, workdir, start_serve, csi):
    leaks.scan.add("roset key", roset.key)
    # The operator's key file; roset-fuse's 0600 credentials file (ROSET_CREDENTIALS_FILE).
    leaks.allow_file("roset key", "roset.key")
    leaks.allow_file("roset key", "state/roset/fuse/*/secret/credentials")
    fuse_wrapper = workdir / "wrappers" / "roset-fuse"
    write_wrapper(fuse_wrapper, leaks.records, str(STANDIN_FUSE))
    cli.env["ROSET_FUSE_BINARY"] = str(fuse_wrapper)

    cli.create("model")
    target = workdir / "t1"
    cli.connect("model", target)
    (target / "weights.bin").write_bytes(b"\x01" * 1000)
    leaks.collect_state()  # roset-fuse runs: its credentials file, log and record exist now
    cli.ok_json("-v", "snapshot", "commit", "model", "--name", "epoch-1")
    cli.ok_json("-v", "snapshot", "list", "--volume", "model")
    cli.ok_json("-v", "volume", "list")
    cli.ok("-v", "volume", "disconnect", "model")
    # The key as a CSI secret from --secrets-file, as a StorageClass's secret reaches serve.
    secrets_file = workdir / "secrets.json"
    write_secrets(secrets_file, {"api-key": roset.key})
    leaks.allow_file("roset key", "secrets.json")
    cli.ok_json("-v", "--secrets-file", str(secrets_file), "volume", "create", "other")
    cli.ok("-v", "--secrets-file", str(secrets_file), "volume", "delete", "other")

    # serve with the key as a CSI secret, and a wrong one whose error goes back to the caller.
    server = start_serve(extra=["--roset-fuse", str(fuse_wrapper)])
    pb2 = csi.pb2
    capability = mount_capability(pb2)
    given = {"api-key": roset.key}
    created = server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="pvc-1", volume_capabilities=[capability], secrets=given)).volume
    staging = workdir / "state" / "staging" / "pvc-1"
    server.node.NodeStageVolume(pb2.NodeStageVolumeRequest(
        volume_id=created.volume_id, staging_target_path=str(staging), volume_capability=capability,
        volume_context=created.volume_context, secrets=given))
    leaks.collect_state()
    server.node.NodeUnstageVolume(pb2.NodeUnstageVolumeRequest(volume_id=created.volume_id,
                                                               staging_target_path=str(staging)))
    wrong = "rsk_live_wrong_" + secrets.token_hex(16)
    leaks.scan.add("wrong roset key", wrong)
    roset.fake.echo_auth = "plain"
    details = expect_code(lambda: server.controller.CreateVolume(pb2.CreateVolumeRequest(
        name="nope", volume_capabilities=[capability], secrets={"api-key": wrong})),
        grpc.StatusCode.UNAUTHENTICATED, "CreateVolume with a wrong key")
    leaks.outputs.append(details)
    server.controller.DeleteVolume(pb2.DeleteVolumeRequest(volume_id=created.volume_id, secrets=given))
    cli.ok("-v", "volume", "delete", "model")
    assert list(leaks.records.glob("roset-fuse.*")), "expected roset-fuse to run through its wrapper"


def test_roset_key_in_rosetctls_environment_reaches_no_program_it_runs(cli, roset, leaks, workdir):
    """ROSET_API_KEY (instead of a key file) is for rosetctl, and for roset-fuse only in
    --roset-fuse-credentials env: mkfs and the other programs rosetctl runs never get it."""
    leaks.scan.add("roset key", roset.key)
    leaks.allow_file("roset key", "roset.key")
    leaks.allow_file("roset key", "state/roset/fuse/*/secret/credentials")
    leaks.allow_environ("roset key", "rosetctl")
    del cli.env["ROSET_API_KEY_FILE"]
    cli.env["ROSET_API_KEY"] = roset.key
    fuse_wrapper = workdir / "wrappers" / "roset-fuse"
    write_wrapper(fuse_wrapper, leaks.records, str(STANDIN_FUSE))
    cli.env["ROSET_FUSE_BINARY"] = str(fuse_wrapper)

    cli.create("shared")
    cli.connect("shared", workdir / "shared")
    # A local image volume: its first connect runs mkfs.ext4, its expansion resize2fs.
    cli.ok_json("-v", "--provider", "local", "volume", "create", "img", "--type", "image", "--size", "16Mi")
    cli.connect("img", workdir / "img")
    cli.ok("-v", "--provider", "local", "volume", "expand", "img", "--size", "32Mi")
    cli.ok("-v", "volume", "disconnect", "img")
    cli.ok("-v", "volume", "disconnect", "shared")
    cli.ok("-v", "--provider", "local", "volume", "delete", "img")
    cli.ok("-v", "volume", "delete", "shared")
    ran = {r.name.rsplit(".", 1)[0] for r in leaks.records.glob("*")}
    assert {"mkfs.ext4", "resize2fs", "roset-fuse"} <= ran, ran


def write_secrets(path: Path, values: dict) -> None:
    path.write_text(json.dumps(values))
    os.chmod(path, 0o600)


def test_chap_password_is_only_in_the_secrets_file_and_tgtadms_account_call(cli, tgtd, leaks, workdir):
    password = "chapPw" + secrets.token_hex(12)
    leaks.scan.add("chap password", password)
    leaks.allow_file("chap password", "chap.json")
    # The controller keeps each node's CHAP secret (0600) so that tgtd's targets come back with it.
    leaks.allow_file("chap password", "iscsi/chap/iscsi-*/node.node-a")
    flags = ["--provider", "iscsi", "--iscsi-portal", tgtd.portal, "--iscsi-tgt-control-port", str(tgtd.control_port)]
    secrets_file = workdir / "chap.json"
    write_secrets(secrets_file, {"chap-user": "consumer-a", "chap-password": password})
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    cli.ok_json(*flags, "-v", "volume", "create", "locked", "--size", "32Mi")
    mapped = cli.run_json(*flags, "-v", "--secrets-file", str(secrets_file), "volume", "map", "locked",
                          "--node", "node-a")
    assert mapped.rc == 0, mapped.describe()
    leaks.collect_state()
    # Set again: the account is re-created (tgtadm --op new again), its targets re-bound.
    cli.ok(*flags, "-v", "--secrets-file", str(secrets_file), "volume", "map", "locked", "--node", "node-a")
    # A password tgt refuses: the error names the user, never the password.
    bad = "bad pw " + secrets.token_hex(10)  # spaces: not printable-without-space ASCII for tgt
    leaks.scan.add("refused chap password", bad)
    write_secrets(secrets_file, {"chap-user": "consumer-a", "chap-password": bad + "\u00e9"})
    refused = cli.run(*flags, "-v", "--secrets-file", str(secrets_file), "volume", "map", "locked", "--node", "node-a")
    assert refused.rc != 0, refused.describe()
    write_secrets(secrets_file, {"chap-user": "consumer-a", "chap-password": password})
    cli.ok_json(*flags, "-v", "volume", "list")
    cli.ok(*flags, "-v", "volume", "unmap", "locked", "--node", "node-a")
    cli.ok(*flags, "-v", "volume", "delete", "locked")
    assert any(is_allowed_tgtadm(r.read_bytes().partition(b"\n")[0].split(b"\0"))
               for r in leaks.records.glob("tgtadm.*")), "expected the account's tgtadm call to be recorded"


def pem_body(path: Path) -> bytes:
    return b"".join(line for line in path.read_bytes().splitlines() if line and not line.startswith(b"-----"))


def test_tls_private_keys_are_only_in_their_key_files(cli, leaks, workdir, start_serve, csi):
    tls = workdir / "tls"
    cli.ok_json("tls", "init", "--dir", str(tls), "--ip", "127.0.0.1", with_state_dir=False)
    cli.ok_json("tls", "issue", "node-a", "--dir", str(tls), "--ip", "127.0.0.1", with_state_dir=False)
    cli.ok_json("tls", "issue", "alice", "--admin", "--dir", str(tls), with_state_dir=False)
    for key in sorted(tls.glob("*.key")):
        der = base64.b64decode(pem_body(key))
        leaks.scan.add(f"private key {key.name}", der)
        # Each line of the PEM too, as a copy of the file would show it.
        for number, line in enumerate(key.read_bytes().splitlines()):
            if not line.startswith(b"-----"):
                leaks.scan.add(f"private key {key.name} line {number}", line)
        leaks.allow_file(f"private key {key.name}", f"tls/{key.name}")
        for number, _ in enumerate(key.read_bytes().splitlines()):
            leaks.allow_file(f"private key {key.name} line {number}", f"tls/{key.name}")
    cli.ok_json("tls", "show", str(tls / "controller.crt"), with_state_dir=False)
    refused = cli.run("tls", "show", str(tls / "alice.key"), with_state_dir=False)
    assert refused.rc != 0, refused.describe()

    address = f"127.0.0.1:{free_port()}"
    server = start_serve(extra=["--role", "controller", "--listen", address, "--tls-cert", str(tls / "controller.crt"),
                                "--tls-key", str(tls / "controller.key"), "--tls-ca", str(tls / "ca.crt")])
    assert server.identity.Probe(csi.pb2.ProbeRequest()).ready.value
    client = ["--controller", address, "--tls-cert", str(tls / "alice.crt"), "--tls-key", str(tls / "alice.key"),
              "--tls-ca", str(tls / "ca.crt")]
    deadline = time.monotonic() + 15
    while True:
        listed = cli.run_json("-v", *client, "volume", "list")
        if listed.rc == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert listed.rc == 0, listed.describe()
    cli.ok_json("-v", *client, "volume", "create", "v1", "--type", "dir")
    cli.ok("-v", *client, "volume", "delete", "v1")
    # A key that is not the certificate's: refused, and the refusal names no key material.
    mismatched = cli.run("-v", "--controller", address, "--tls-cert", str(tls / "node-a.crt"),
                         "--tls-key", str(tls / "alice.key"), "--tls-ca", str(tls / "ca.crt"), "volume", "list")
    assert mismatched.rc != 0, mismatched.describe()
