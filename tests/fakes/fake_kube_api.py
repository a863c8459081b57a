"""A fake Kubernetes API server that answers the TokenReview API and nothing else, for the tests
of node enrollment (docs/KUBERNETES.md). It follows the API's documented contract strictly
(kubernetes.io, "TokenReview v1"; "Managing Service Accounts": bound tokens' extra info):

- HTTPS only, with a certificate of its own CA (the cluster CA a pod finds in
  /var/run/secrets/kubernetes.io/serviceaccount/ca.crt).
- ``POST /apis/authentication.k8s.io/v1/tokenreviews`` alone; any other path is 404, any
  other method 405, each as a ``Status`` object.
- The caller authenticates with ``Authorization: Bearer <token>``: a token the fake does not know
  (or none) is 401 ``Unauthorized``; a known caller without ``create tokenreviews`` in its RBAC
  (``allowed_callers``) is 403 ``Forbidden``.
- The body must be JSON (``Content-Type: application/json``, else 415) of ``apiVersion:
  authentication.k8s.io/v1`` and ``kind: TokenReview`` (else 400), with ``spec.token`` (else 400
  "token is required").
- The answer is 201 with the TokenReview as sent (its spec echoed, the token included, as the real
  server does) and a status: for a token the fake issued, not expired, whose audiences meet
  ``spec.audiences`` (or, with none given, the API server's own audience):
  ``authenticated: true``, ``user`` {username ``system:serviceaccount:NS:NAME``, uid, groups
  ``system:serviceaccounts``, ``system:serviceaccounts:NS``, ``system:authenticated``; extra
  ``authentication.kubernetes.io/pod-name``, ``pod-uid``, ``node-name``, ``node-uid``,
  ``credential-id`` as Kubernetes 1.30+ puts them in a pod-bound token}, ``audiences`` the
  intersection. Otherwise ``user: {}`` and ``error`` saying why, ``authenticated`` left out
  (false), as the real server answers unknown, expired and wrong-audience tokens.

Tokens are opaque random strings here (the real ones are JWTs; the controller must treat them as
opaque either way). The test makes them with ``issue()``; ``reviews`` records every review asked
(without the token) for the tests to check who asked what.
"""
from __future__ import annotations

import json
import secrets
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"


@dataclass
class IssuedToken:
    namespace: str
    service_account: str
    audiences: list[str]
    expires_at: float
    pod_name: str | None = None  # bound to a pod: its name, and its node's
    node_name: str | None = None
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))


def make_serving_certificate(directory: Path, address: str) -> tuple[Path, Path, Path]:
    """A cluster CA and the API server's certificate for `address` (an IP); returns (ca, cert, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    now = datetime.now(timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
              .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([
                  x509.IPAddress(ipaddress.ip_address(address)), x509.DNSName("kubernetes.default.svc")]),
                  critical=False)
              .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    paths = directory / "cluster-ca.crt", directory / "apiserver.crt", directory / "apiserver.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].touch(mode=0o600)
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class FakeKubeApi:
    """The fake on `host`:`port` over HTTPS with (cert, key). Tokens live in memory; a file-backed
    mode (`tokens_file`) lets a test in another process issue them: the file is re-read at every
    request, a JSON object token -> IssuedToken fields."""

    def __init__(self, cert: Path, key: Path, host: str = "127.0.0.1", port: int = 0,
                 tokens_file: Path | None = None):
        self.tokens: dict[str, IssuedToken] = {}
        self.callers: dict[str, str] = {}  # bearer token -> username of the caller
        self.allowed_callers: set[str] = set()  # usernames RBAC lets create tokenreviews
        self.reviews: list[dict] = []  # {caller, audiences, authenticated, username}
        self.tokens_file = tokens_file
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: the tests read `reviews`
                pass

            def do_POST(self):
                fake.handle(self)

            def do_GET(self):
                fake.refuse(self, 405, "MethodNotAllowed", "the server does not allow this method")

            do_PUT = do_DELETE = do_PATCH = do_GET

        self.server = ThreadingHTTPServer((host, port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"https://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> "FakeKubeApi":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what a test does -------------------------------------------------------------------
    def add_caller(self, username: str, allowed: bool = True) -> str:
        """A bearer token for a client of the API (the controller's ServiceAccount)."""
        token = secrets.token_urlsafe(32)
        with self.lock:
            self.callers[token] = username
            if allowed:
                self.allowed_callers.add(username)
        return token

    def issue(self, namespace: str, service_account: str, audiences: list[str], *, node: str | None = None,
              pod: str | None = None, lifetime: float = 3600) -> str:
        """A token as the TokenRequest API makes one: for NS/NAME, these audiences, bound to a pod on
        `node` when given (kubelet's projected serviceAccountToken)."""
        token = secrets.token_urlsafe(48)
        with self.lock:
            self.tokens[token] = IssuedToken(namespace, service_account, list(audiences),
                                             time.time() + lifetime, pod, node)
        return token

    # -- the API ----------------------------------------------------------------------------
    def all_tokens(self) -> dict[str, IssuedToken]:
        with self.lock:
            tokens = dict(self.tokens)
        if self.tokens_file is not None and self.tokens_file.exists():
            for token, fields in json.loads(self.tokens_file.read_text()).items():
                tokens[token] = IssuedToken(**fields)
        return tokens

    def refuse(self, handler, code: int, reason: str, message: str) -> None:
        self.answer(handler, code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                    "message": message, "reason": reason, "code": code})

    def answer(self, handler, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def handle(self, handler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if handler.path.split("?")[0] != REVIEW_PATH:
            return self.refuse(handler, 404, "NotFound", "the server could not find the requested resource")
        auth = handler.headers.get("Authorization", "")
        with self.lock:
            caller = self.callers.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
            allowed = caller in self.allowed_callers
        if caller is None:
            return self.refuse(handler, 401, "Unauthorized", "Unauthorized")
        if not allowed:
            return self.refuse(handler, 403, "Forbidden",
                               f'tokenreviews.authentication.k8s.io is forbidden: User "{caller}" cannot create '
                               'resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope')
        if handler.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            return self.refuse(handler, 415, "UnsupportedMediaType", "the body of the request was in an unknown format")
        try:
            review = json.loads(raw)
        except ValueError:
            return self.refuse(handler, 400, "BadRequest", "the body is not JSON")
        if (not isinstance(review, dict) or review.get("apiVersion") != "authentication.k8s.io/v1"
                or review.get("kind") != "TokenReview"):
            return self.refuse(handler, 400, "BadRequest", "the object is no authentication.k8s.io/v1 TokenReview")
        spec = review.get("spec") or {}
        token = spec.get("token") or ""
        if not token:
            return self.refuse(handler, 400, "BadRequest", "token is required for TokenReview in authentication")
        wanted = spec.get("audiences") or [API_AUDIENCE]
        review["status"] = self.status_of(token, wanted)
        review.setdefault("metadata", {})["creationTimestamp"] = None
        with self.lock:
            self.reviews.append({"caller": caller, "audiences": wanted,
                                 "authenticated": review["status"].get("authenticated", False),
                                 "username": review["status"]["user"].get("username")})
        self.answer(handler, 201, review)

    def status_of(self, token: str, wanted: list[str]) -> dict:
        issued = self.all_tokens().get(token)
        if issued is None:
            return {"user": {}, "error": "[invalid bearer token, square/go-jose: error in cryptographic primitive]"}
        if issued.expires_at <= time.time():
            return {"user": {}, "error": "[invalid bearer token, service account token has expired]"}
        common = [audience for audience in wanted if audience in issued.audiences]
        if not common:
            return {"user": {}, "error": f"[invalid bearer token, token audiences {json.dumps(issued.audiences)} "
                                         f"is invalid for the target audiences {json.dumps(wanted)}]"}
        extra = {"authentication.kubernetes.io/credential-id": [f"JTI={uuid.uuid4()}"]}
        if issued.pod_name:
            extra["authentication.kubernetes.io/pod-name"] = [issued.pod_name]
            extra["authentication.kubernetes.io/pod-uid"] = [str(uuid.uuid5(uuid.NAMESPACE_DNS, issued.pod_name))]
        if issued.node_name:
            extra["authentication.kubernetes.io/node-name"] = [issued.node_name]
            extra["authentication.kubernetes.io/node-uid"] = [str(uuid.uuid5(uuid.NAMESPACE_DNS, issued.node_name))]
        return {"authenticated": True, "audiences": common, "user": {
            "username": f"system:serviceaccount:{issued.namespace}:{issued.service_account}",
            "uid": issued.uid,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{issued.namespace}",
                       "system:authenticated"],
            "extra": extra}}
