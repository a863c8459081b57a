"""The three-host site of test_across_hosts.py: a controller host serving over mutual TLS
(`rosetctl serve --listen`), two consumers running the CLI with `--controller`, and the tools the
tests use on them (gRPC calls of our own from a lab host, an expired certificate, the fake Roset
API on the controller host).

Everything runs inside the lab's hosts, so nothing outside the lab reaches the controller, and
every process is started through the lab (`host.start`), which ends it at teardown.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from host_lab import Host, HostLab, HostProcess, HostRosetctl, wait_for_port
from rosetctl_cli import Result, binary_path

PORT = 9443
EXIT_UNAVAILABLE = 6
EXIT_PERMISSION = 7
PATIENCE = 30  # seconds the CLI retries an unreachable controller (csi_client.h, kBusyPatience)
INTEGRATION_DIR = Path(__file__).resolve().parent

# Runs on a lab host: the fake Roset API (fake_roset_api.py) on that host's 127.0.0.1; prints its URL.
FAKE_ROSET = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from fake_roset_api import FakeRoset
fake = FakeRoset(Path(sys.argv[2]), Path(sys.argv[3]).read_text().strip(), host=sys.argv[4]).start()
print(fake.url, flush=True)
fake.thread.join()
"""

# Runs on a lab host: one gRPC call described by a JSON argument; prints {"code", "details"|"response"}.
GRPC_CALL = """
import importlib, json, sys
import grpc
from google.protobuf import json_format
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["stubs"])
messages = importlib.import_module(spec["proto"] + "_pb2")
services = importlib.import_module(spec["proto"] + "_pb2_grpc")
read = lambda path: open(path, "rb").read() if path else None
if spec["security"] == "plaintext":
    channel = grpc.insecure_channel(spec["target"])
else:
    channel = grpc.secure_channel(spec["target"], grpc.ssl_channel_credentials(
        read(spec["ca"]), read(spec.get("key")), read(spec.get("cert"))))
stub = getattr(services, spec["service"] + "Stub")(channel)
request = json_format.ParseDict(spec["request"], getattr(messages, spec["method"] + "Request")())
try:
    response = getattr(stub, spec["method"])(request, timeout=10, metadata=spec["metadata"])
    print(json.dumps({"code": "OK", "response": json_format.MessageToDict(
        response, preserving_proto_field_name=True)}))
except grpc.RpcError as e:
    print(json.dumps({"code": e.code().name, "details": e.details()}))
"""


def retrying_lines(result: Result) -> list[str]:
    """The CLI's "...; retrying for up to 30 s" notes (it should print one per wait)."""
    return [line for line in result.stderr.splitlines() if "retrying" in line]


class RecordingCli(HostRosetctl):
    """rosetctl on one lab host with its own environment; every output goes to `printed`."""

    def __init__(self, host: Host, printed: list[str], env: dict[str, str]):
        super().__init__(host)
        self.env.update(env)
        self.printed = printed

    def run(self, *args, **kwargs) -> Result:
        result = super().run(*args, **kwargs)
        self.printed += [result.stdout, result.stderr]
        return result


@dataclass
class Site:
    """The controller host serving over mutual TLS, and two consumers with --controller."""

    controller: Host
    consumer_a: Host
    consumer_b: Host
    tls_dir: Path  # the controller's: CA, controller, consumers' and alice's certificates
    roset_env: dict[str, str]  # serve's environment for the fake Roset API
    ctl: RecordingCli = None  # the controller host's own CLI: no --controller, its state dir
    a: RecordingCli = None  # consumer-a: --controller and TLS from the environment
    b: RecordingCli = None  # consumer-b: the same from its TOML config file
    alice: RecordingCli = None  # an admin at consumer-a's host, with alice's certificate
    serve: HostProcess = None  # the running one
    serves: list[HostProcess] = field(default_factory=list)  # every serve started, in order
    printed: list[str] = field(default_factory=list)  # every output, checked for key material
    secret_files: list[Path] = field(default_factory=list)  # private keys and the API key

    @property
    def address(self) -> str:
        return f"{self.controller.address}:{PORT}"

    def serve_argv(self) -> list:
        tls = self.tls_dir
        return [binary_path(), "serve", "--role", "controller", "--listen", self.address,
                "--endpoint", f"unix://{self.controller.dir}/csi.sock", "--state-dir", self.controller.state_dir,
                "--node-id", "controller", "--grace-period", "2", "--tls-cert", tls / "controller.crt",
                "--tls-key", tls / "controller.key", "--tls-ca", tls / "ca.crt"]

    def start_serve(self) -> HostProcess:
        self.serve = self.controller.start(self.serve_argv(), env=self.roset_env)
        self.serves.append(self.serve)
        wait_for_port(self.consumer_a, self.controller.address, PORT, timeout=15, process=self.serve)
        return self.serve

    def kill_serve(self) -> None:
        self.serve.send_signal(signal.SIGKILL)
        self.serve.wait(timeout=10)

    def serve_log(self) -> str:
        """Every serve's log so far (restarts included), in order."""
        return "".join(serve.output() for serve in self.serves)

    def wait_until_registered(self, node: str, address: str, process: HostProcess | None = None,
                              ready=lambda: True, timeout: float = 20) -> None:
        """Returns once the controller's registry lists `node` at `address` (a node's heartbeat or
        `node register` put it there) and `ready()` holds; fails if `process`, the node's serve,
        ends first."""
        deadline = time.monotonic() + timeout
        while True:
            nodes = {n["node_id"]: n for n in self.ctl.ok_json("node", "list")}
            if nodes.get(node, {}).get("address") == address and ready():
                return
            alive = process is None or process.poll() is None
            assert time.monotonic() < deadline and alive, (
                f"expected {node} registered at {address}: {nodes}"
                + (f"\n{process.output()}" if process is not None else ""))
            time.sleep(0.2)

    def grpc(self, host: Host, stubs, proto: str, service: str, method: str, request: dict,
             identity: tuple[Path, Path, Path] | None = None, security: str = "mtls",
             metadata: list[tuple[str, str]] = ()) -> dict:
        """One gRPC call from a Python client on `host`; identity is (cert, key, ca)."""
        cert, key, ca = identity or (None, None, None)
        spec = {"stubs": str(Path(stubs.pb2.__file__).parent), "proto": proto, "service": service,
                "method": method, "request": request, "target": self.address, "security": security,
                "cert": cert and str(cert), "key": key and str(key), "ca": ca and str(ca),
                "metadata": [list(m) for m in metadata]}
        done = host.run([sys.executable, "-c", GRPC_CALL, json.dumps(spec)], timeout=60)
        self.printed += [done.stdout, done.stderr]
        assert done.rc == 0, f"the gRPC client on {host.name} broke: {done.describe()}"
        return json.loads(done.stdout)

    def identity(self, name: str) -> tuple[Path, Path, Path]:
        """NAME's certificate, key and the CA where `tls issue` made them (hosts share the filesystem)."""
        return self.tls_dir / f"{name}.crt", self.tls_dir / f"{name}.key", self.tls_dir / "ca.crt"

    def assert_no_secrets_printed(self) -> None:
        """No private key (nor the Roset API key) in any output of the test or any process's log."""
        logs = [p.read_text(errors="replace") for host in (self.controller, self.consumer_a, self.consumer_b)
                for p in (host.dir / "logs").glob("*.log")]
        everything = "\n".join(self.printed + logs)
        assert "PRIVATE KEY" not in everything, "a private key was printed or logged"
        for path in self.secret_files:
            lines = [line for line in path.read_text().splitlines() if line and not line.startswith("-----")]
            for line in lines:
                assert line not in everything, f"the content of {path.name} was printed or logged"


def copy_identity(tls_dir: Path, name: str, to: Path) -> tuple[Path, Path, Path]:
    """NAME's certificate and key and the CA into another host's directory (keys 0600)."""
    to.mkdir(parents=True, exist_ok=True)
    paths = []
    for source in (f"{name}.crt", f"{name}.key", "ca.crt"):
        target = to / source
        shutil.copyfile(tls_dir / source, target)
        os.chmod(target, 0o600 if source.endswith(".key") else 0o644)
        paths.append(target)
    return tuple(paths)


def tls_ok(host: Host, printed: list[str], *args) -> Result:
    """`rosetctl tls ARGS` on `host`, which must succeed; its output is kept in `printed`."""
    result = host.run([binary_path(), "tls", *map(str, args)])
    printed += [result.stdout, result.stderr]
    assert result.rc == 0, f"rosetctl tls {' '.join(map(str, args))}: {result.describe()}"
    return result


def signed_certificate(tls_dir: Path, to: Path, file_name: str, subject: list[tuple[str, str]],
                       valid: tuple[timedelta, timedelta] = (timedelta(minutes=-5), timedelta(days=1)),
                       dns_name: str = "peer") -> tuple[Path, Path]:
    """A leaf certificate signed by tls_dir's CA with any SUBJECT ((OID name, value) pairs, in order:
    "O", "OU", "CN") valid from now+valid[0] to now+valid[1], which `rosetctl tls issue` would never
    make (an expired one, an OU it does not know, two OUs); returns (certificate, key) in TO."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    oids = {"O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME}
    ca = x509.load_pem_x509_certificate((tls_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((tls_dir / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(timezone.utc)
    name = x509.Name([x509.NameAttribute(oids[field], value) for field, value in subject])
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(ca.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + valid[0]).not_valid_after(now + valid[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256()))
    to.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = to / f"{file_name}.crt", to / f"{file_name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def expired_certificate(tls_dir: Path, name: str, to: Path) -> tuple[Path, Path]:
    """A node certificate for NAME signed by tls_dir's CA, right in every way but that it expired a
    minute ago (`rosetctl tls issue` makes none such); returns (certificate, key)."""
    now = datetime.now(timezone.utc)
    cert_path, key_path = signed_certificate(
        tls_dir, to, name, [("O", "rosetctl"), ("OU", "node"), ("CN", name)],
        valid=(timedelta(minutes=-2), timedelta(minutes=-1)), dns_name=name)
    # Only the dates are wrong: openssl accepts it as of 90 s ago and says "expired" now.
    at = str(int((now - timedelta(seconds=90)).timestamp()))
    then = subprocess.run(["openssl", "verify", "-attime", at, "-CAfile", str(tls_dir / "ca.crt"), str(cert_path)],
                          capture_output=True, text=True)
    assert then.returncode == 0, f"expected the certificate good 90 s ago: {then.stdout} {then.stderr}"
    today = subprocess.run(["openssl", "verify", "-CAfile", str(tls_dir / "ca.crt"), str(cert_path)],
                           capture_output=True, text=True)
    assert today.returncode != 0 and "expired" in today.stdout + today.stderr, today
    return cert_path, key_path


def start_fake_roset(host: Host, key_file: Path) -> str:
    """The fake Roset API on `host`, at its lab address (consumers' roset-fuse reach it too)."""
    storage = host.dir / "roset-storage"
    storage.mkdir()
    fake = host.start([sys.executable, "-c", FAKE_ROSET, INTEGRATION_DIR, storage, key_file, host.address])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        url = fake.output().strip()
        if url.startswith("http://"):
            return url
        assert fake.poll() is None, f"the fake Roset API exited: {fake.output()}"
        time.sleep(0.05)
    raise AssertionError(f"the fake Roset API never started: {fake.output()}")


def build_site(lab: HostLab) -> Site:
    """Three hosts of `lab`: certificates made and copied, the fake Roset API up, serve listening."""
    controller = lab.add("controller")  # 192.0.2.1
    consumer_a = lab.add("consumer-a")
    consumer_b = lab.add("consumer-b")
    printed: list[str] = []
    tls = controller.config_dir / "tls"
    tls_ok(controller, printed, "init", "--dir", tls, "--ip", controller.address)
    for host in (consumer_a, consumer_b):  # each may listen too (serve --role node): its address
        tls_ok(controller, printed, "issue", host.name, "--dir", tls, "--ip", host.address)
    tls_ok(controller, printed, "issue", "alice", "--admin", "--dir", tls)

    api_key = controller.config_dir / "roset.key"
    api_key.write_text("rsk_live_" + secrets.token_hex(20) + "\n")
    os.chmod(api_key, 0o600)
    roset_env = {"ROSET_API_URL": start_fake_roset(controller, api_key), "ROSET_API_KEY_FILE": str(api_key)}

    s = Site(controller, consumer_a, consumer_b, tls, roset_env, printed=printed,
             secret_files=sorted(tls.glob("*.key")) + [api_key])
    s.ctl = RecordingCli(controller, printed, {"ROSETCTL_NODE_ID": "controller"})

    # consumer-a: everything from the environment.
    cert, key, ca = copy_identity(tls, "consumer-a", consumer_a.config_dir / "tls")
    s.a = RecordingCli(consumer_a, printed, {
        "ROSETCTL_CONTROLLER": s.address, "ROSETCTL_NODE_ID": "consumer-a",
        "ROSETCTL_TLS_CERT": str(cert), "ROSETCTL_TLS_KEY": str(key), "ROSETCTL_TLS_CA": str(ca)})
    # consumer-b: everything from its config file, as /etc/rosetctl/config.toml would say it.
    cert, key, ca = copy_identity(tls, "consumer-b", consumer_b.config_dir / "tls")
    config = consumer_b.config_dir / "config.toml"
    config.write_text(f'controller = "{s.address}"\nnode-id = "consumer-b"\n'
                      f'tls-cert = "{cert}"\ntls-key = "{key}"\ntls-ca = "{ca}"\n')
    s.b = RecordingCli(consumer_b, printed, {"ROSETCTL_CONFIG": str(config)})
    # An admin working from consumer-a's host with her own certificate.
    cert, key, ca = copy_identity(tls, "alice", consumer_a.config_dir / "alice")
    s.alice = RecordingCli(consumer_a, printed, {
        "ROSETCTL_CONTROLLER": s.address, "ROSETCTL_NODE_ID": "consumer-a",
        "ROSETCTL_TLS_CERT": str(cert), "ROSETCTL_TLS_KEY": str(key), "ROSETCTL_TLS_CA": str(ca)})

    s.start_serve()
    return s
