"""A node reads another node's objects only for a transfer the controller started (issue 31, item 1):
node A's store answers LookupSnapshot and FetchObjects to another node's certificate only under a
grant the controller issued for that transfer, naming the receiver, the source and the snapshot
(cluster/transfer_grants.h). The receiver here is "evil" (hostile_node.py), registered like any node:
the controller places a volume on it from A's snapshot, so the CreateVolume it forwards carries the
grant, which evil records. With it, evil reads that snapshot of A and nothing else; nobody else
reads with it; without one, no node reads A's store, directly or through the controller's proxy.
An expired grant is refused too (tests/unit/cluster/transfer_grants_test.cc: ten minutes unused).
The transfers the controller starts (a create placed across nodes, a clone across nodes, an
admin's pull or push) are test_snapshot_streaming.py's, and still work.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from hostile_node_fixtures import Hostile
from test_placement import csi_call, local_id
from test_snapshot_streaming import NODE_PORT, placed_volume, restore_request, snapshot_through_controller

A = "consumer-a"

# Runs on a lab host: one ObjectStore read of a node's store, as the spec says.
READ_STORE = """
import importlib, json, sys
import grpc
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["stubs"])
pb2 = importlib.import_module("rosetctl_pb2")
services = importlib.import_module("rosetctl_pb2_grpc")
read = lambda path: open(path, "rb").read()
channel = grpc.secure_channel(spec["target"], grpc.ssl_channel_credentials(
    read(spec["ca"]), read(spec["key"]), read(spec["cert"])))
stub = services.ObjectStoreStub(channel)
metadata = [tuple(pair) for pair in spec["metadata"]]
try:
    if spec["method"] == "LookupSnapshot":
        answer = stub.LookupSnapshot(pb2.LookupSnapshotRequest(reference=spec["reference"]), timeout=20,
                                     metadata=metadata)
        print(json.dumps({"code": "OK", "commit": answer.snapshot.commit_id, "tree": answer.tree_id}))
    else:
        wants = [pb2.ObjectRef(kind=getattr(pb2, kind), id=id) for kind, id in spec["objects"]]
        chunks = stub.FetchObjects(pb2.FetchObjectsRequest(objects=wants), timeout=20, metadata=metadata)
        print(json.dumps({"code": "OK", "bytes": sum(len(chunk.data) for chunk in chunks)}))
except grpc.RpcError as e:
    print(json.dumps({"code": e.code().name, "details": e.details()}))
"""


def read_store(nodes: Hostile, stubs, identity: str, method: str, grant: str | None = None,
               through_proxy: bool = False, **request) -> dict:
    """IDENTITY's certificate reads A's store (at A's listener, or through the controller's proxy)."""
    site = nodes.site
    cert, key, ca = site.identity(identity)
    metadata = [["rosetctl-node", A]] if through_proxy else []
    if grant is not None:
        metadata.append(["rosetctl-transfer-grant", grant])
    spec = {"stubs": str(Path(stubs.pb2.__file__).parent), "method": method, "metadata": metadata,
            "target": site.address if through_proxy else f"{nodes.a_host.address}:{NODE_PORT}",
            "cert": str(cert), "key": str(key), "ca": str(ca), **request}
    done = site.consumer_b.run([sys.executable, "-c", READ_STORE, json.dumps(spec)], timeout=60)
    site.printed += [done.stdout, done.stderr]
    assert done.rc == 0, done.describe()
    return json.loads(done.stdout)


def refused(answer: dict, *says: str) -> None:
    assert answer["code"] == "PERMISSION_DENIED", answer
    for text in says:
        assert text in answer["details"], (text, answer)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_node_reads_another_nodes_store_only_under_the_controllers_grant_for_that_transfer(
        hostile, csi, registry_stubs):
    nodes, stubs = hostile, registry_stubs
    volume_id, source = placed_volume(nodes, "src", A)
    (source / "granted").write_bytes(b"what the transfer moves\n")
    s1 = local_id(snapshot_through_controller(nodes, csi, "s1", volume_id), A)
    (source / "other").write_bytes(b"in another snapshot of A alone\n")
    s2 = local_id(snapshot_through_controller(nodes, csi, "s2", volume_id), A)
    other_blob = sha256(b"in another snapshot of A alone\n")

    # No grant: node B's certificate reads nothing of A's, at A or through the controller, and is
    # told the route that works.
    for through_proxy in (False, True):
        answer = read_store(nodes, stubs, "consumer-b", "LookupSnapshot", reference=s1,
                            through_proxy=through_proxy)
        refused(answer, 'node certificate "consumer-b" may not call /rosetctl.v1.ObjectStore/LookupSnapshot',
                "carries no transfer grant", "snapshot pull SNAPSHOT --from-node SOURCE")
    refused(read_store(nodes, stubs, "consumer-b", "FetchObjects", objects=[["OBJECT_BLOB", other_blob]]),
            "carries no transfer grant")
    # A made-up grant is no grant: A asks the controller, which issued none.
    refused(read_store(nodes, stubs, "consumer-b", "LookupSnapshot", grant="0" * 64, reference=s1),
            "not one the controller issued")

    # The controller starts a transfer of s1 from A to evil: the CreateVolume it forwards to evil
    # carries the grant.
    started = csi_call(nodes.site, csi, "CreateVolume",
                       restore_request("to-evil", "evil", f"n{len(A)}.{A}.{s1}"))
    assert started["code"] == "UNAVAILABLE" and "makes no volumes" in started["details"], started
    (grant,) = [call["grant"] for call in nodes.evil.calls() if call["call"] == "CreateVolume"]
    assert len(grant) == 64, grant

    # With it, evil reads s1 of A: the snapshot and its objects.
    looked_up = read_store(nodes, stubs, "evil", "LookupSnapshot", grant=grant, reference=s1)
    assert looked_up["code"] == "OK", looked_up
    granted_blob = sha256(b"what the transfer moves\n")
    fetched = read_store(nodes, stubs, "evil", "FetchObjects", grant=grant,
                         objects=[["OBJECT_COMMIT", looked_up["commit"]], ["OBJECT_TREE", looked_up["tree"]],
                                  ["OBJECT_BLOB", granted_blob]])
    assert fetched["code"] == "OK" and fetched["bytes"] > len(b"what the transfer moves\n"), fetched
    # ...and nothing else of A's: not another snapshot, not an object that is no part of s1.
    refused(read_store(nodes, stubs, "evil", "LookupSnapshot", grant=grant, reference=s2),
            f'is not for snapshot "{s2}"', f'read snapshot "{s1}" of node "{A}"')
    refused(read_store(nodes, stubs, "evil", "FetchObjects", grant=grant,
                       objects=[["OBJECT_BLOB", granted_blob], ["OBJECT_BLOB", other_blob]]),
            f'object "{other_blob}"', f'no part of snapshot "{s1}"')
    # Nobody else reads with evil's grant: not at A, not through the controller's proxy.
    refused(read_store(nodes, stubs, "consumer-b", "LookupSnapshot", grant=grant, reference=s1),
            "is not node \"consumer-b\"'s")
    refused(read_store(nodes, stubs, "consumer-b", "LookupSnapshot", grant=grant, reference=s1,
                       through_proxy=True),
            "through the controller", "is not node \"consumer-b\"'s")

    # The grant is a capability: no message and no log line shows it.
    everything = "\n".join(nodes.site.printed + [nodes.site.serve_log(), nodes.serve_a.output(),
                                                 nodes.serve_b.output()])
    assert grant not in everything, "the grant was printed or logged"
