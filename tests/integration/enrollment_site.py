"""The site of the node-enrollment tests (docs/KUBERNETES.md): a fake Kubernetes API
(tests/fakes/fake_kube_api.py, HTTPS with a cluster CA of its own), a controller `serve --role
controller` with its mutual-TLS listener and its enrollment listener, reviewing tokens with the
fake as its own ServiceAccount, and node plugins `serve --role node --enroll-at` started as a
DaemonSet pod would start them: a projected token file, the CA, and nowhere a certificate of
their own. On 127.0.0.1 of the test's host (the tgtd of the iscsi tests listens there too), or
on the hosts of a host lab (`build_enrollment_site(..., controller_host=)`: the controller and
the fake API server on one host, each node plugin on its own; `start_*` take the host as
`processes`, as Host.start takes the same arguments as a process tracker's start).
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rosetctl_cli import Rosetctl, binary_path, isolated_environment
from tgtd_lab import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from fake_kube_api import FakeKubeApi, make_serving_certificate  # noqa: E402

NAMESPACE = "rosetctl"
NODE_SA = "rosetctl-node"
NODE_USER = f"system:serviceaccount:{NAMESPACE}:{NODE_SA}"
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:rosetctl-controller"
AUDIENCE = "rosetctl.io/enroll"


def write_token(path: Path, token: str) -> Path:
    """A projected token as kubelet writes it (0644 by default: it is read through a symlink too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(token)
    return path


@dataclass
class EnrollmentSite:
    workdir: Path
    kube: FakeKubeApi
    tls: Path  # the rosetctl CA and the controller's certificate (tls init)
    provider_flags: list[str]
    cluster_ca: Path | None = None  # the fake API server's CA (default: beside `tls`, in cluster/)
    listen_port: int = 0
    enroll_port: int = 0
    controller: subprocess.Popen | None = None
    controller_log: Path | None = None
    plugins: dict[str, tuple[subprocess.Popen, Path]] = field(default_factory=dict)
    tokens: list[str] = field(default_factory=list)  # every token made: none may be printed
    address: str = "127.0.0.1"  # the controller's: its listeners and its certificate's IP

    @property
    def enroll_address(self) -> str:
        return f"{self.address}:{self.enroll_port}"

    @property
    def controller_address(self) -> str:
        return f"{self.address}:{self.listen_port}"

    def token(self, node: str | None, *, service_account: str = NODE_SA, audiences=(AUDIENCE,),
              lifetime: float = 3600, pod: str | None = "auto") -> str:
        """A token as kubelet's projected serviceAccountToken gives a pod of `service_account` on
        `node` (no node: a token bound to no pod, as `kubectl create token` makes)."""
        if pod == "auto":
            pod = f"{service_account}-{node}" if node else None
        token = self.kube.issue(NAMESPACE, service_account, list(audiences), node=node, pod=pod,
                                lifetime=lifetime)
        self.tokens.append(token)
        return token

    def controller_cli(self, processes) -> Rosetctl:
        return Rosetctl(state_dir=self.workdir / "controller", cwd=self.workdir, tracker=processes,
                        binary=binary_path())

    def start_controller(self, processes, credential: str, extra=()) -> subprocess.Popen:
        credential_file = write_token(self.workdir / "controller-sa" / "token", credential)
        if not self.listen_port:  # a test may have picked them for a node plugin started first
            self.listen_port, self.enroll_port = free_port(), free_port()
        self.controller_log = self.workdir / "controller.log"
        argv = [binary_path(), "--state-dir", self.workdir / "controller", "--node-id", "controller",
                *self.provider_flags, "--tls-cert", self.tls / "controller.crt",
                "--tls-key", self.tls / "controller.key", "--tls-ca", self.tls / "ca.crt",
                "serve", "--role", "controller", "--endpoint", f"unix://{self.workdir}/controller.sock",
                "--listen", self.controller_address, "--enroll-listen", self.enroll_address,
                "--enroll-ca-key", self.tls / "ca.key", "--kube-api-url", self.kube.url,
                "--kube-api-ca", self.cluster_ca or self.tls.parent / "cluster" / "cluster-ca.crt",
                "--kube-api-token-file", credential_file, "--grace-period", "1", *extra]
        log = open(self.controller_log, "w")
        self.controller = processes.start([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=clean_env())
        wait_for_line(self.controller_log, "issuing node certificates on", self.controller)
        return self.controller

    def plugin_files(self, node: str) -> dict[str, Path]:
        pod = self.workdir / "pods" / node
        return {"token": pod / "token", "ca": pod / "ca.crt", "cert": pod / "tls" / "tls.crt",
                "key": pod / "tls" / "tls.key", "initiator": pod / "initiatorname.iscsi"}

    def start_plugin(self, processes, node: str, token: str, initiator: str | None = None,
                     node_id: str | None = None, wait: str | None = "registered node",
                     enroll_wait: int = 10) -> subprocess.Popen:
        """A node plugin pod on `node`: its projected token, the CA (a ConfigMap), an empty
        directory for its certificate. `node_id` is what it takes itself for (its spec.nodeName)."""
        files = self.plugin_files(node)
        write_token(files["token"], token)
        files["ca"].write_bytes((self.tls / "ca.crt").read_bytes())
        files["cert"].parent.mkdir(parents=True, exist_ok=True)
        env = clean_env()
        if initiator:
            files["initiator"].write_text(f"InitiatorName={initiator}\n")
            env["ROSETCTL_ISCSI_INITIATOR_FILE"] = str(files["initiator"])
        log_path = self.workdir / f"plugin-{node}-{len(self.plugins)}.log"
        argv = [binary_path(), "--state-dir", self.workdir / "nodes" / node, "--node-id", node_id or node,
                *self.provider_flags, "--controller", self.controller_address, "--tls-ca", files["ca"],
                "--tls-cert", files["cert"], "--tls-key", files["key"], "serve", "--role", "node",
                "--endpoint", f"unix://{self.workdir}/{node}.sock", "--enroll-at", self.enroll_address,
                "--enroll-token-file", files["token"], "--enroll-wait", str(enroll_wait), "--grace-period", "1"]
        log = open(log_path, "w")
        proc = processes.start([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=env)
        self.plugins[node] = (proc, log_path)
        if wait:
            wait_for_line(log_path, wait, proc)
        return proc

    def logs(self) -> str:
        paths = [self.controller_log] + [log for _, log in self.plugins.values()]
        return "\n".join(p.read_text(errors="replace") for p in paths if p and p.exists())

    def assert_no_token_anywhere(self, *texts: str) -> None:
        everything = "\n".join((self.logs(),) + texts)
        for token in self.tokens:
            assert token not in everything, "a ServiceAccount token was printed or logged"


def clean_env() -> dict[str, str]:
    return dict(isolated_environment())


def wait_for_line(path: Path, text: str, proc: subprocess.Popen, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return content
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before logging {text!r}:\n{content}")
        time.sleep(0.05)
    raise AssertionError(f"never logged {text!r} within {timeout} s:\n{path.read_text(errors='replace')}")


def build_enrollment_site(workdir: Path, provider_flags: list[str], controller_host=None) -> EnrollmentSite:
    """The rosetctl CA and controller certificate (for 127.0.0.1, or the address of
    `controller_host`, a host lab's Host), the cluster's CA and the fake API (on 127.0.0.1 of the
    controller's host: the API server as the controller reaches it, and nothing else does)."""
    address = controller_host.address if controller_host else "127.0.0.1"
    tls = workdir / "tls" / "rosetctl"
    done = subprocess.run([binary_path(), "tls", "init", "--dir", str(tls), "--ip", address],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    cluster_ca, cert, key = make_serving_certificate(workdir / "tls" / "cluster", "127.0.0.1")
    with controller_host.network() if controller_host else contextlib.nullcontext():
        kube = FakeKubeApi(cert, key, host="127.0.0.1")  # binds its socket here
    site = EnrollmentSite(workdir, kube.start(), tls, provider_flags, address=address)
    if controller_host:  # the lab's hosts are fresh namespaces: the manifests' own ports are free
        site.listen_port, site.enroll_port = 9443, 9444
    return site


def issue_request(site: EnrollmentSite, stubs, node_id: str, token: str | None,
                  csr_subject: str | None = None, address: str | None = None, with_cert=None) -> dict:
    """IssueNodeCertificate from a Python client without a certificate (as a node plugin pod has
    none yet): {"code", "details"} or {"code": "OK", "certificate", "key"}."""
    import grpc
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.COMMON_NAME, csr_subject)] if csr_subject else []
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names)).sign(key, hashes.SHA256())
    ca = (site.tls / "ca.crt").read_bytes()
    cert_key = (with_cert[1].read_bytes(), with_cert[0].read_bytes()) if with_cert else (None, None)
    channel = grpc.secure_channel(address or site.enroll_address, grpc.ssl_channel_credentials(ca, *cert_key))
    stub = stubs.grpc.EnrollmentStub(channel)
    request = stubs.pb2.IssueNodeCertificateRequest(
        node_id=node_id, certificate_request=csr.public_bytes(serialization.Encoding.PEM).decode())
    metadata = [("rosetctl-enrollment-token", token)] if token else []
    try:
        answer = stub.IssueNodeCertificate(request, timeout=20, metadata=metadata)
    except grpc.RpcError as e:
        return {"code": e.code().name, "details": e.details()}
    finally:
        channel.close()
    return {"code": "OK", "certificate": answer.certificate, "not_after": answer.not_after, "key": key}


def subject_of(pem: str) -> dict[str, str]:
    from cryptography import x509
    certificate = x509.load_pem_x509_certificate(pem.encode())
    return {attribute.oid._name: attribute.value for attribute in certificate.subject}
