"""A fake Roset API server for the tests, following ../shared/roset-api.md (recorded in README).

Python stdlib only (http.server). It keeps nodes, commits and refs in memory, and every folder
node as a real directory under a storage root, so the stand-in roset-fuse (bin/roset-fuse) can
serve a mount's folders with bindfs. What the document says, this does:

- ``Authorization: Bearer <key>``; anything else is 401 ``{error, code: UNAUTHORIZED}``.
- ``Idempotency-Key`` on mutations: a repeat with the same key and body replays the first
  response; the same key with another body is 422.
- Nodes: create (201; 409 NAME_CONFLICT with ``details.existingNodeId``), get, soft delete (204,
  to the trash), permanent delete, restore, children (paged), resolve.
- Commits: ``POST /v1/nodes/{id}/commit`` (202 ``{commit:{id}, _links}``) and/or the older
  ``POST /v1/commits {node_id}`` (``commit_forms``), ``GET /v1/commits/{id}`` (``pending`` until
  ``commit_delay`` passes, then ``completed`` or ``failed``), list (paged, 1-indexed, pageSize
  default 50, max 100).
- Refs: PUT, GET, DELETE ``/v1/refs/{name}``; mounts: GET ``/v1/mounts[/{id}]``.
- Response shapes switchable (``shape = "bare" | "wrapped"``, ``resolve_shape``), as clients of the
  real API disagree.
- Faults: latency, 429 bursts (with Retry-After), 500s and dropped connections, per route; a
  status fault may answer before reading the request's body (``read_body=False``), as a
  load-shedding gateway may, leaving the body on the kept-alive connection.
- ``echo_auth``: a 401 whose message echoes the request's ``Authorization`` header (``"plain"``,
  or ``"escaped"``: every character of it as a JSON ``\\uXXXX`` escape), as some servers do.

Test-only: ``GET /_fake/storage?mountId=`` (authenticated) tells the stand-in where a mount's
folders live.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Fault:
    """Applied to the next `count` requests whose method and path match."""
    kind: str  # "latency" | "status" | "drop"
    method: str | None = None
    path_prefix: str = "/v1/"
    count: int = 1
    seconds: float = 0.0
    status: int = 500
    retry_after: str | None = None
    read_body: bool = True  # False: answer without reading the request's body first

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and (self.method is None or self.method == method) and path.startswith(self.path_prefix)


@dataclass
class Logged:
    method: str
    path: str
    status: int
    idempotency_key: str | None
    mount_header: str | None
    body: dict | None


@dataclass
class State:
    storage: Path
    keys: dict[str, str]  # api key -> tenant id
    mounts: dict[str, dict] = field(default_factory=dict)
    nodes: dict[str, dict] = field(default_factory=dict)
    commits: dict[str, dict] = field(default_factory=dict)
    commit_ready_at: dict[str, float] = field(default_factory=dict)
    refs: dict[str, dict] = field(default_factory=dict)
    idempotency: dict[tuple[str, str], tuple[str, int, bytes]] = field(default_factory=dict)


class FakeRoset:
    """The server plus the knobs tests turn. Start with start(), stop with close()."""

    def __init__(self, storage: Path, api_key: str, tenant: str = "tenant-1", host: str = "127.0.0.1"):
        self.state = State(storage=storage, keys={api_key: tenant})
        self.lock = threading.RLock()
        self.faults: list[Fault] = []
        self.log: list[Logged] = []
        self.shape = "bare"  # node responses: bare Node or {node}
        self.resolve_shape = "map"  # "map" (OpenAPI), "nodes" (FUSE client), "results" (docs)
        self.commit_forms = ("new", "old")  # which commit endpoints exist
        self.commit_delay = 0.3  # seconds a commit stays pending
        self.fail_commits = False
        self.echo_auth: str | None = None  # None | "plain" | "escaped"
        self.default_mount = self.add_mount("default", is_default=True)
        self.host = host  # a lab host's address, for clients on other hosts
        self.httpd = ThreadingHTTPServer((host, 0), _handler_class_for(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # ---- control
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.httpd.server_address[1]}"

    def start(self) -> "FakeRoset":
        self.thread.start()
        return self

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def add_mount(self, name: str, is_default: bool = False) -> str:
        mount_id = str(uuid.uuid4())
        with self.lock:
            self.state.mounts[mount_id] = {
                "id": mount_id, "tenantId": "tenant-1", "name": name, "provider": "s3", "bucket": f"bucket-{name}",
                "region": "eu-west-1", "basePrefix": "", "endpoint": None, "isDefault": is_default,
                "retentionDays": 30, "createdAt": now_iso(), "updatedAt": now_iso(),
            }
            (self.state.storage / mount_id).mkdir(parents=True, exist_ok=True)
        return mount_id

    def inject(self, kind: str, **kwargs) -> Fault:
        fault = Fault(kind=kind, **kwargs)
        with self.lock:
            self.faults.append(fault)
        return fault

    def requests(self, method: str | None = None, prefix: str = "") -> list[Logged]:
        with self.lock:
            return [r for r in self.log if (method is None or r.method == method) and r.path.startswith(prefix)]

    def live_node_at(self, mount_id: str, path: str) -> dict | None:
        with self.lock:
            return self._resolve(mount_id, path)

    def folder_dir(self, node_id: str) -> Path:
        with self.lock:
            return self._dir_of(self.state.nodes[node_id])

    # ---- model (call with self.lock held)
    def _mount_of(self, tenant: str, requested: str | None) -> str | None:
        if requested:
            return requested if requested in self.state.mounts else None
        return self.default_mount

    def _children(self, mount_id: str, parent_id: str | None) -> list[dict]:
        return [n for n in self.state.nodes.values()
                if n["mountId"] == mount_id and n["parentId"] == parent_id and n["deletedAt"] is None]

    def _resolve(self, mount_id: str, path: str) -> dict | None:
        parent = None
        node = None
        for part in [p for p in path.split("/") if p]:
            matches = [n for n in self._children(mount_id, parent) if n["name"] == part]
            if not matches:
                return None
            node = matches[0]
            parent = node["id"]
        if node is None:  # "/": the mount's root
            return {"id": f"root-{mount_id}", "tenantId": "tenant-1", "mountId": mount_id, "parentId": None,
                    "name": "", "type": "folder", "createdAt": now_iso(), "updatedAt": now_iso(), "deletedAt": None}
        return node

    def _path_of(self, node: dict) -> str:
        parts = []
        while node is not None:
            parts.append(node["name"])
            node = self.state.nodes.get(node["parentId"]) if node["parentId"] else None
        return "/" + "/".join(reversed(parts))

    def _dir_of(self, node: dict) -> Path:
        return self.state.storage / node["mountId"] / self._path_of(node).lstrip("/")

    def _node_out(self, node: dict):
        return {"node": node} if self.shape == "wrapped" else node


def _error(status: int, message: str, code: str, details: dict | None = None):
    body = {"error": message, "code": code}
    if details:
        body["details"] = details
    return status, body


class _Handler(BaseHTTPRequestHandler):
    fake: FakeRoset
    protocol_version = "HTTP/1.1"  # keep-alive, as the real API

    def log_message(self, *args):  # quiet
        pass

    # ---- plumbing
    def _body(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length == 0:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return {"__invalid__": True}

    def _send(self, status: int, body=None, headers: dict | None = None, data: bytes | None = None):
        if data is None:
            data = b"" if body is None or status == 204 else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", f"req-{uuid.uuid4().hex[:12]}")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        fake = self.fake
        with fake.lock:
            fault = next((f for f in fake.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.count -= 1
        return fault

    def _apply_fault(self, fault: Fault | None) -> int:
        """The status `fault` answered with (-1: connection dropped), or 0 when it did not answer."""
        if fault is None:
            return 0
        if fault.kind == "latency":
            time.sleep(fault.seconds)
            return 0
        if fault.kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return -1
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        code = "RATE_LIMIT" if fault.status == 429 else "INTERNAL_ERROR"
        self._send(fault.status, {"error": "injected fault", "code": code}, headers)
        return fault.status

    def _handle(self, method: str):
        fake = self.fake
        parsed = urlparse(self.path)
        path, query = parsed.path, parse_qs(parsed.query)
        fault = self._take_fault(method, path)
        early = fault is not None and fault.kind == "status" and not fault.read_body
        body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") and not early else None
        key = self.headers.get("Idempotency-Key")
        status = 0
        try:
            status = self._apply_fault(fault)
            if status:
                return
            auth = self.headers.get("Authorization", "")
            tenant = fake.state.keys.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
            if tenant is None:
                status, out = _error(401, "Missing or invalid API key", "UNAUTHORIZED")
                self._send(status, out, data=_echoing(auth, fake.echo_auth))
                return
            if body is not None and body.get("__invalid__"):
                status, out = _error(400, "Request body is not JSON", "INVALID_REQUEST")
                self._send(status, out)
                return
            fingerprint = hashlib.sha256(json.dumps([method, path, body], sort_keys=True).encode()).hexdigest()
            if key and method in ("POST", "PUT", "PATCH", "DELETE"):
                with fake.lock:
                    seen = fake.state.idempotency.get((tenant, key))
                if seen is not None:
                    if seen[0] != fingerprint:
                        status, out = _error(422, "Idempotency-Key reused with another request", "INVALID_REQUEST")
                        self._send(status, out)
                        return
                    status = seen[1]
                    self._send(seen[1], json.loads(seen[2]) if seen[2] else None, {"Idempotent-Replayed": "true"})
                    return
            with fake.lock:
                status, out, headers = _route(fake, tenant, method, path, query, body or {}, self.headers)
                if key and method in ("POST", "PUT", "PATCH", "DELETE") and status < 500:
                    fake.state.idempotency[(tenant, key)] = (fingerprint, status, json.dumps(out).encode() if out is not None else b"")
            self._send(status, out, headers)
        finally:
            with fake.lock:
                fake.log.append(Logged(method, path, status, key, self.headers.get("X-Roset-Mount-Id"), body))

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")


def _echoing(auth: str, mode: str | None) -> bytes | None:
    """The body of a 401 that quotes the Authorization header back, or None for the usual one."""
    if mode is None:
        return None
    if mode == "plain":
        message = json.dumps("bad key " + auth)
    else:  # the same text, every character of the header written as a \uXXXX escape
        message = '"bad key ' + "".join(f"\\u{ord(c):04x}" for c in auth) + '"'
    return ('{"error": ' + message + ', "code": "UNAUTHORIZED"}').encode()


def _page(items: list, query: dict, wrapper: str = "items"):
    try:
        page = int(query.get("page", ["1"])[0])
        size = int(query.get("pageSize", query.get("page_size", ["50"]))[0])
    except ValueError:
        return _error(400, "page and pageSize must be numbers", "INVALID_REQUEST")
    if page < 1 or size < 1 or size > 100:
        return _error(400, "page starts at 1; pageSize is 1-100", "INVALID_REQUEST")
    chunk = items[(page - 1) * size: page * size]
    return 200, {wrapper: chunk, "total": len(items), "page": page, "pageSize": size}


def _commit_public(fake: FakeRoset, commit: dict) -> dict:
    if commit["status"] == "pending" and time.monotonic() >= fake.state.commit_ready_at.get(commit["id"], 0):
        if fake.fail_commits:
            commit["status"], commit["errorMessage"] = "failed", "storage backend rejected the manifest"
        else:
            commit["status"] = "completed"
            node = fake.state.nodes.get(commit["nodeId"])
            if node is not None:
                node["commitStatus"] = "committed"
    return commit


def _make_commit(fake: FakeRoset, tenant: str, node_id: str, message: str):
    node = fake.state.nodes.get(node_id)
    if node is None or node["deletedAt"] is not None:
        return None
    files, size = 0, 0
    for root, _dirs, names in os.walk(fake._dir_of(node)):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(root, name)).st_size
    commit = {"id": str(uuid.uuid4()), "tenantId": tenant, "nodeId": node_id, "actorId": "actor-1", "message": message,
              "stats": {"fileCount": files, "totalSize": size}, "status": "pending", "errorMessage": None,
              "createdAt": now_iso()}
    fake.state.commits[commit["id"]] = commit
    fake.state.commit_ready_at[commit["id"]] = time.monotonic() + fake.commit_delay
    node["commitStatus"] = "committing"
    return commit


def _route(fake: FakeRoset, tenant: str, method: str, path: str, query: dict, body: dict, headers):
    st = fake.state
    parts = [unquote(p) for p in path.strip("/").split("/")]
    mount_hint = body.get("mountId") or headers.get("X-Roset-Mount-Id") or query.get("mountId", [None])[0]

    if parts[:2] == ["_fake", "storage"] and method == "GET":
        mount_id = fake._mount_of(tenant, mount_hint)
        if mount_id is None:
            return (*_error(404, "mount not found", "NOT_FOUND"), None)
        return 200, {"path": str(st.storage / mount_id)}, None
    if parts[:1] != ["v1"]:
        return (*_error(404, "no such route", "NOT_FOUND"), None)
    rest = parts[1:]

    if rest == ["mounts"] and method == "GET":
        return 200, {"mounts": list(st.mounts.values())}, None
    if len(rest) == 2 and rest[0] == "mounts" and method == "GET":
        mount = st.mounts.get(rest[1])
        return (200, mount, None) if mount else (*_error(404, f"Mount {rest[1]} not found", "NOT_FOUND"), None)

    if rest == ["nodes"] and method == "POST":
        mount_id = fake._mount_of(tenant, mount_hint)
        if mount_id is None:
            return (*_error(404, "Mount not found", "NOT_FOUND"), None)
        name, kind = body.get("name"), body.get("type")
        if not name or "/" in name or kind not in ("file", "folder"):
            return (*_error(400, "name and type (file|folder) are required", "INVALID_REQUEST"), None)
        if body.get("parentId"):
            parent = st.nodes.get(body["parentId"])
        else:
            parent = fake._resolve(mount_id, body.get("parentPath") or "/")
        if parent is None or parent.get("deletedAt"):
            return (*_error(404, "Parent not found", "NODE_NOT_FOUND"), None)
        if parent["type"] != "folder":
            return (*_error(400, "Parent is not a folder", "PARENT_NOT_FOLDER"), None)
        parent_id = None if parent["id"].startswith("root-") else parent["id"]
        clash = [n for n in fake._children(mount_id, parent_id) if n["name"] == name]
        if clash:
            return (*_error(409, f"A node named {name} already exists", "NAME_CONFLICT",
                            {"existingNodeId": clash[0]["id"]}), None)
        node = {"id": str(uuid.uuid4()), "tenantId": tenant, "mountId": mount_id, "parentId": parent_id,
                "name": name, "type": kind, "size": None, "contentType": None, "metadata": body.get("metadata") or {},
                "isImmutable": False, "commitStatus": "active", "createdAt": now_iso(), "updatedAt": now_iso(),
                "deletedAt": None}
        st.nodes[node["id"]] = node
        if kind == "folder":
            fake._dir_of(node).mkdir(parents=True, exist_ok=True)
        return 201, fake._node_out(node), None

    if rest == ["resolve"] and method == "POST":
        mount_id = fake._mount_of(tenant, mount_hint)
        paths = body.get("paths") or []
        found = {p: (fake._resolve(mount_id, p) if mount_id else None) for p in paths}
        if fake.resolve_shape == "nodes":
            return 200, {"nodes": found}, None
        if fake.resolve_shape == "results":
            return 200, {"results": [{"path": p, "nodeId": n["id"] if n else None} for p, n in found.items()]}, None
        return 200, found, None

    if len(rest) >= 2 and rest[0] == "nodes":
        node = st.nodes.get(rest[1])
        tail = rest[2:]
        if node is None:
            return (*_error(404, f"Node {rest[1]} not found", "NODE_NOT_FOUND"), None)
        if tail == [] and method == "GET":
            return 200, fake._node_out(node), None
        if tail == [] and method == "DELETE":
            if node["deletedAt"] is not None:
                return (*_error(404, f"Node {rest[1]} not found", "NODE_NOT_FOUND"), None)
            trash = st.storage / ".trash" / node["id"]
            trash.parent.mkdir(parents=True, exist_ok=True)
            if fake._dir_of(node).exists():
                shutil.move(str(fake._dir_of(node)), str(trash))
            node["deletedAt"] = now_iso()
            return 204, None, None
        if tail == ["permanent"] and method == "DELETE":
            if node["deletedAt"] is None and fake._dir_of(node).exists():
                shutil.rmtree(fake._dir_of(node))
            shutil.rmtree(st.storage / ".trash" / node["id"], ignore_errors=True)
            del st.nodes[node["id"]]
            return 204, None, None
        if tail == ["restore"] and method == "POST":
            trash = st.storage / ".trash" / node["id"]
            node["deletedAt"] = None
            if trash.exists():
                shutil.move(str(trash), str(fake._dir_of(node)))
            return 200, fake._node_out(node), None
        if tail == ["children"] and method == "GET":
            return (*_page(fake._children(node["mountId"], node["id"]), query), None)
        if tail == ["commit"] and method == "POST" and "new" in fake.commit_forms:
            commit = _make_commit(fake, tenant, node["id"], body.get("message") or "")
            if commit is None:
                return (*_error(404, "Node not found", "NODE_NOT_FOUND"), None)
            links = {"self": f"/v1/commits/{commit['id']}", "poll": f"/v1/commits/{commit['id']}"}
            return 202, {"commit": {"id": commit["id"]}, "_links": links}, None
        return (*_error(404, "no such route", "NOT_FOUND"), None)

    if rest == ["commits"] and method == "POST" and "old" in fake.commit_forms:
        commit = _make_commit(fake, tenant, body.get("node_id") or "", body.get("message") or "")
        if commit is None:
            return (*_error(404, "Node not found", "NODE_NOT_FOUND"), None)
        return 201, {"commit": commit}, None
    if rest == ["commits"] and method == "GET":
        node_id = query.get("nodeId", query.get("node_id", [None]))[0]
        items = [_commit_public(fake, c) for c in st.commits.values() if node_id is None or c["nodeId"] == node_id]
        return (*_page(items, query), None)
    if len(rest) == 2 and rest[0] == "commits" and method == "GET":
        commit = st.commits.get(rest[1])
        if commit is None:
            return (*_error(404, f"Commit {rest[1]} not found", "NOT_FOUND"), None)
        return 200, {"commit": _commit_public(fake, commit)}, None

    if rest == ["refs"] and method == "GET":
        return 200, {"refs": list(st.refs.values())}, None
    if len(rest) >= 2 and rest[0] == "refs":
        name = "/".join(rest[1:])
        if method == "PUT":
            commit_id = body.get("commit_id")
            if commit_id not in st.commits:
                return (*_error(404, "Commit not found", "NOT_FOUND"), None)
            expected = body.get("expected_commit_id")
            if expected is not None and st.refs.get(name, {}).get("commitId") != expected:
                return (*_error(409, "Ref moved", "CONFLICT"), None)
            ref = {"tenantId": tenant, "mountId": fake.default_mount, "name": name, "commitId": commit_id,
                   "updatedAt": now_iso(), "updatedBy": "actor-1"}
            st.refs[name] = ref
            return 200, {"ref": ref}, None
        if method == "GET":
            ref = st.refs.get(name)
            if ref is None:
                return (*_error(404, "Ref not found", "NOT_FOUND"), None)
            commit = st.commits[ref["commitId"]]
            return 200, {"ref": ref, "commit": {k: commit[k] for k in ("id", "nodeId", "status", "message", "createdAt")}}, None
        if method == "DELETE":
            if st.refs.pop(name, None) is None:
                return (*_error(404, "Ref not found", "NOT_FOUND"), None)
            return 204, None, None
    return (*_error(404, "no such route", "NOT_FOUND"), None)


def _handler_class_for(fake: FakeRoset):
    return type("FakeRosetHandler", (_Handler,), {"fake": fake})

