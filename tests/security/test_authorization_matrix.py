"""Every method of the authorization table (docs/SECURITY.md, cluster/authorization_table.cc) called
by every kind of caller at every kind of listener, over real mutual TLS in the network-namespace
lab: the answer is PERMISSION_DENIED exactly where the table says no, the handshake fails for a
certificate of another CA or none, and the calls the table allows get past the authorization
(whatever their request makes of them then).

The lab: a controller (serve --role controller --listen) and nodes consumer-a and consumer-b (each
serve --role node --listen, registered). Listeners: the controller's; node A's own; the
controller's proxy with `rosetctl-node: consumer-a`. Callers: an admin (alice), the controller's
certificate, node A (consumer-a: "itself" at A), node B (consumer-b: "another node" at A), a
CA-signed certificate with OU=guest (no role), one signed by another CA, and none. Requests that
name a node name consumer-a, so node A is acting for itself and node B for another node.

The expectation is read from the table docs/SECURITY.md prints (the unit test
authorization_test.cc checks that print against the code), so a row changed in the code without its
test here still has to hold over the wire.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from controller_site import Site, build_site, signed_certificate, tls_ok
from test_placement import start_node

NODE_KEY = "topology.rosetctl.io/node"
NODE_PORT = 9444  # test_placement.start_node's
A = "consumer-a"
PLACED_VOLUME = f"n{len(A)}.{A}.local-authzprobe"
PLACED_SNAPSHOT = f"n{len(A)}.{A}.snap-authzprobe"
SOURCE_DIR = Path(__file__).resolve().parents[2]

# One request per method: harmless when allowed (it fails validation, names something that does not
# exist, or only reads), and naming consumer-a wherever the method names a node.
# (proto, service, method, request, names_node, streaming)
CALLS = [
    ("csi", "Identity", "GetPluginInfo", {}, False, False),
    ("csi", "Identity", "GetPluginCapabilities", {}, False, False),
    ("csi", "Identity", "Probe", {}, False, False),
    ("csi", "Controller", "CreateVolume",
     {"name": "authz-probe", "accessibility_requirements": {"preferred": [{"segments": {NODE_KEY: A}}]}},
     True, False),
    ("csi", "Controller", "DeleteVolume", {"volume_id": PLACED_VOLUME}, True, False),
    ("csi", "Controller", "ControllerPublishVolume", {"volume_id": PLACED_VOLUME, "node_id": A}, True, False),
    ("csi", "Controller", "ControllerUnpublishVolume", {"volume_id": PLACED_VOLUME, "node_id": A}, True, False),
    ("csi", "Controller", "ValidateVolumeCapabilities", {"volume_id": PLACED_VOLUME}, True, False),
    ("csi", "Controller", "ListVolumes", {"max_entries": 1}, False, False),
    ("csi", "Controller", "GetCapacity", {"accessible_topology": {"segments": {NODE_KEY: A}}}, True, False),
    ("csi", "Controller", "ControllerGetCapabilities", {}, False, False),
    ("csi", "Controller", "CreateSnapshot", {"name": "authz-probe", "source_volume_id": PLACED_VOLUME}, True,
     False),
    ("csi", "Controller", "DeleteSnapshot", {"snapshot_id": PLACED_SNAPSHOT}, True, False),
    ("csi", "Controller", "ListSnapshots", {"max_entries": 1}, False, False),
    ("csi", "Controller", "ControllerExpandVolume",
     {"volume_id": PLACED_VOLUME, "capacity_range": {"required_bytes": 1 << 20}}, True, False),
    ("csi", "Controller", "ControllerGetVolume", {"volume_id": PLACED_VOLUME}, True, False),
    ("csi", "Controller", "ControllerModifyVolume", {"volume_id": PLACED_VOLUME}, True, False),
    ("csi", "Node", "NodeStageVolume", {"volume_id": "local-authzprobe"}, False, False),
    ("csi", "Node", "NodeUnstageVolume",
     {"volume_id": "local-authzprobe", "staging_target_path": "/nonexistent/authz"}, False, False),
    ("csi", "Node", "NodePublishVolume", {"volume_id": "local-authzprobe"}, False, False),
    ("csi", "Node", "NodeUnpublishVolume",
     {"volume_id": "local-authzprobe", "target_path": "/nonexistent/authz"}, False, False),
    ("csi", "Node", "NodeGetVolumeStats",
     {"volume_id": "local-authzprobe", "volume_path": "/nonexistent/authz"}, False, False),
    ("csi", "Node", "NodeExpandVolume", {"volume_id": "local-authzprobe"}, False, False),
    ("csi", "Node", "NodeGetCapabilities", {}, False, False),
    ("csi", "Node", "NodeGetInfo", {}, False, False),
    ("rosetctl", "Registry", "RegisterNode", {"node_id": A, "address": "not an address"}, True, False),
    ("rosetctl", "Registry", "GetNode", {"node_id": A}, True, False),
    ("rosetctl", "Registry", "TouchNode", {"node_id": A}, True, False),
    ("rosetctl", "Registry", "ListNodes", {}, False, False),
    ("rosetctl", "Registry", "CheckTransferGrant", {"node_id": A}, True, False),
    # Uncordon of a node that is not cordoned: nothing changed when allowed.
    ("rosetctl", "Registry", "CordonNode", {"node_id": A, "cordoned": False}, True, False),
    ("rosetctl", "Catalog", "FindVolume", {"name_or_id": "authz-none"}, False, False),
    ("rosetctl", "Catalog", "GetVolumeDetails", {"volume_ids": [PLACED_VOLUME]}, True, False),
    ("rosetctl", "Catalog", "FindSnapshot", {"reference": "authz-none"}, False, False),
    ("rosetctl", "Catalog", "ListSnapshotDetails", {"source_volume_id": PLACED_VOLUME}, True, False),
    ("rosetctl", "Catalog", "DiffSnapshots", {"from": "authz-none", "to": "authz-none"}, False, False),
    ("rosetctl", "Catalog", "VerifySnapshots", {"references": ["authz-none"]}, False, False),
    ("rosetctl", "Catalog", "CollectGarbage", {"patience_ms": 1}, False, False),
    ("rosetctl", "Catalog", "GetPublishSecrets", {"volume_id": "local-authzprobe", "node_id": A}, True, False),
    # CANCEL of a volume that is not there: nothing to end, nothing changed when allowed.
    ("rosetctl", "Catalog", "SetVolumeMove", {"volume_id": PLACED_VOLUME, "step": "CANCEL"}, True, False),
    # Off for a volume with no replica: nothing to remove, nothing changed when allowed.
    ("rosetctl", "Catalog", "SetVolumeReplica", {"volume_id": PLACED_VOLUME, "off": True}, True, False),
    ("rosetctl", "NodeState", "GetNodeVolumes", {"node_id": A}, True, False),
    ("rosetctl", "NodeState", "ResolveTarget", {"node_id": A, "volume_id": "local-authzprobe"}, True, False),
    ("rosetctl", "NodeState", "HoldAttachLock", {"node_id": A, "volume_id": "local-authzprobe"}, True, True),
    ("rosetctl", "ObjectStore", "LookupSnapshot", {"reference": "authz-none"}, False, False),
    ("rosetctl", "ObjectStore", "FetchObjects", {}, False, True),
    ("rosetctl", "ObjectStore", "PullSnapshot",
     # From A itself: refused as no pull at all once allowed, so that no source is asked (one
     # would refuse a pull the controller did not start: test_transfer_grants.py).
     {"node_id": A, "from_node_id": A, "reference": "authz-none"}, True, True),
    # Served on the enrollment listener alone, to peers without a certificate
    # (test_enrollment_attacks.py); every certificate here is refused it on every listener.
    ("rosetctl", "Enrollment", "IssueNodeCertificate", {"node_id": A, "certificate_request": "x"}, False, False),
    # Last: it removes node A from the registry when allowed.
    ("rosetctl", "Registry", "RemoveNode", {"node_id": A}, True, False),
]
NODE_SIDE = ("Node", "NodeState", "ObjectStore")

# Runs on a lab host: many gRPC calls described by a JSON argument; prints one result per call.
BATCH_CALLS = """
import importlib, json, sys
import grpc
from google.protobuf import json_format
spec = json.load(open(sys.argv[1]))
sys.path.insert(0, spec["stubs"])
read = lambda path: open(path, "rb").read() if path else None
channels, results = {}, []
for call in spec["calls"]:
    key = (call["target"], call["cert"], call["ca"])
    if key not in channels:
        credentials = grpc.ssl_channel_credentials(read(call["ca"]), read(call["key"]), read(call["cert"]))
        channels[key] = grpc.secure_channel(call["target"], credentials)
    messages = importlib.import_module(call["proto"] + "_pb2")
    services = importlib.import_module(call["proto"] + "_pb2_grpc")
    stub = getattr(services, call["service"] + "Stub")(channels[key])
    request = json_format.ParseDict(call["request"], getattr(messages, call["method"] + "Request")())
    try:
        answer = getattr(stub, call["method"])(request, timeout=5, metadata=call["metadata"])
        if call["streaming"]:
            for _ in answer:
                break
            answer.cancel()
        results.append({"code": "OK", "details": ""})
    except grpc.RpcError as e:
        results.append({"code": e.code().name, "details": e.details() or ""})
print(json.dumps(results))
"""


def documented_table() -> dict[str, tuple[str, str]]:
    """{method: (on a controller, on a node)} as docs/SECURITY.md prints the table."""
    text = (SOURCE_DIR / "docs" / "SECURITY.md").read_text()
    table = text.split("<!-- authorization table: generated -->")[1].split("<!-- end of the authorization")[0]
    rows = {}
    for line in table.splitlines():
        found = re.match(r"\| `(/[^`]+)` \| ([^|]+) \| ([^|]+) \|", line)
        if found:
            rows[found.group(1)] = (found.group(2).strip(), found.group(3).strip())
    assert len(rows) == len(CALLS), f"every method of the table has a call here: {sorted(rows)}"
    return rows


def allowed(cell: str, caller: str, names_node: bool, answering_node: str | None) -> bool:
    """Whether CALLER may make a call whose table cell is CELL; the request names consumer-a when
    NAMES_NODE; ANSWERING_NODE is the node that answers (None: the controller)."""
    entries = [entry.strip() for entry in cell.split(",")] if cell != "-" else []
    if caller in ("admin", "controller"):
        return caller in entries
    node = {"node-a": A, "node-b": "consumer-b"}[caller]
    if "any node" in entries:
        return True
    if "node (itself or granted)" in entries:
        return answering_node == node  # no call here carries a transfer grant: test_transfer_grants.py's
    if "node (its own nodes)" in entries:
        return not names_node or node == A
    if "node (itself)" in entries:
        return answering_node == node and (not names_node or node == A)
    return False


@pytest.fixture
def site(host_lab, rosetctl_binary) -> Site:
    built = build_site(host_lab)
    yield built
    built.assert_no_secrets_printed()


def callers(site: Site, workdir: Path) -> dict[str, tuple[str | None, str | None, str]]:
    """{caller: (cert, key, ca)} for every kind of caller."""
    tls = site.tls_dir
    ids = {
        "admin": site.identity("alice"),
        "controller": site.identity("controller"),
        "node-a": site.identity(A),
        "node-b": site.identity("consumer-b"),
    }
    guest = signed_certificate(tls, workdir / "guest", "guest", [("O", "rosetctl"), ("OU", "guest"), ("CN", "guest")])
    ids["no-role"] = (*guest, tls / "ca.crt")
    foreign = workdir / "foreign"
    tls_ok(site.controller, site.printed, "init", "--dir", foreign)
    tls_ok(site.controller, site.printed, "issue", A, "--dir", foreign)
    ids["other-ca"] = (foreign / f"{A}.crt", foreign / f"{A}.key", tls / "ca.crt")
    ids["no-certificate"] = (None, None, tls / "ca.crt")
    site.secret_files += [guest[1], foreign / f"{A}.key", foreign / "ca.key"]
    return {name: tuple(str(p) if p else None for p in paths) for name, paths in ids.items()}


def test_every_method_answers_every_caller_as_the_table_says(site, csi, registry_stubs, workdir):
    start_node(site, site.consumer_a, site.a)
    start_node(site, site.consumer_b, site.b)
    table = documented_table()
    identities = callers(site, workdir)
    node_a = f"{site.consumer_a.address}:{NODE_PORT}"
    # (listener, target, metadata, the node answering or None for the controller)
    listeners = [("controller", site.address, [], None),
                 ("node A", node_a, [], A),
                 ("proxy to A", site.address, [["rosetctl-node", A]], A)]
    stubs = str(Path(csi.pb2.__file__).parent)
    plan, calls = [], []
    for proto, service, method, request, names_node, streaming in CALLS:
        full = f"/{'csi.v1' if proto == 'csi' else 'rosetctl.v1'}.{service}/{method}"
        on_controller, on_node = table[full]
        for listener, target, metadata, answering in listeners:
            node_side = service in NODE_SIDE
            if listener == "controller" and node_side:
                continue  # not served there: the proxy answers UNIMPLEMENTED without metadata
            if listener == "proxy to A" and not node_side:
                continue  # the metadata changes nothing for the controller's own services
            cell = on_node if answering else on_controller
            for caller, (cert, key, ca) in identities.items():
                plan.append((full, listener, caller, cell, names_node, answering))
                calls.append({"proto": proto, "service": service, "method": method, "request": request,
                              "streaming": streaming, "target": target, "metadata": metadata,
                              "cert": cert, "key": key, "ca": ca})
    results = []
    for stub_dir, proto_calls in ((stubs, [c for c in calls if c["proto"] == "csi"]),
                                  (str(Path(registry_stubs.pb2.__file__).parent),
                                   [c for c in calls if c["proto"] == "rosetctl"])):
        spec = workdir / f"calls-{proto_calls[0]['proto']}.json"
        spec.write_text(json.dumps({"stubs": stub_dir, "calls": proto_calls}))
        done = site.consumer_a.run([sys.executable, "-c", BATCH_CALLS, str(spec)], timeout=600)
        assert done.rc == 0, done.describe()
        results += json.loads(done.stdout)
    plan = [p for p, c in zip(plan, calls) if c["proto"] == "csi"] + \
           [p for p, c in zip(plan, calls) if c["proto"] == "rosetctl"]

    wrong = []
    for (method, listener, caller, cell, names_node, answering), result in zip(plan, results):
        code = result["code"]
        if caller in ("other-ca", "no-certificate"):
            if code != "UNAVAILABLE":
                wrong.append(f"{method} at {listener} by {caller}: {code} {result['details']!r} (want a failed handshake)")
            continue
        want = caller != "no-role" and allowed(cell, caller, names_node, answering)
        if want and code in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
            wrong.append(f"{method} at {listener} by {caller}: refused {result['details']!r}; the table allows it")
        elif not want and code != "PERMISSION_DENIED":
            wrong.append(f"{method} at {listener} by {caller}: {code} {result['details']!r}; the table refuses it")
        elif not want and caller != "no-role" and "may not call" not in result["details"]:
            wrong.append(f"{method} at {listener} by {caller}: the refusal names nothing: {result['details']!r}")
    assert not wrong, f"{len(wrong)} of {len(plan)} cells differ:\n" + "\n".join(wrong)
    assert len(plan) > 500
