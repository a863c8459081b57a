"""A `serve --role all` host with nodes registered (controller and node in one process): it serves
Node, NodeState and ObjectStore itself, so a call naming another node (gRPC metadata
`rosetctl-node`: `rosetctl --on-node B`, a node pulling a snapshot of A through it) reaches its own
handlers rather than the proxy. Such a call must still go to the node it names, exactly as on a
`--role controller` host, never be answered from the role-all host's own state (its own node's
data, or a NOT_FOUND for what only the named node holds). Calls naming no node or this host's own
node are answered on the spot.

The lab of controller_site.py: the controller host serves `--role all` (same listener, same
controller certificate), consumer-a and consumer-b serve `--role node` and register with it.
"""
from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

import pytest

from controller_site import EXIT_PERMISSION, EXIT_UNAVAILABLE, PORT, Site, build_site
from host_lab import wait_for_port
from test_snapshot_streaming import NODE_PORT, Nodes, commit_small, fetch_lines


# Holds consumer-b's attach lock of volume "v1" through the role-all host, then lets it go.
HOLD_THROUGH = """
import sys
import grpc
sys.path.insert(0, sys.argv[1])
import rosetctl_pb2, rosetctl_pb2_grpc
read = lambda path: open(path, "rb").read()
channel = grpc.secure_channel(sys.argv[2], grpc.ssl_channel_credentials(read(sys.argv[3]), read(sys.argv[4]),
                                                                        read(sys.argv[5])))
stub = rosetctl_pb2_grpc.NodeStateStub(channel)
call = stub.HoldAttachLock(rosetctl_pb2.HoldAttachLockRequest(node_id="consumer-b", volume_id="v1"),
                           metadata=[("rosetctl-node", "consumer-b")], timeout=30)
print("held" if next(call).held else "not held", flush=True)
call.cancel()
"""


def serve_role_all(site: Site) -> None:
    """The controller host's serve restarted as `--role all`, before any node registers."""
    site.serve.send_signal(signal.SIGTERM)
    assert site.serve.wait(timeout=20) == 0, site.serve.output()
    argv = site.serve_argv()
    argv[argv.index("--role") + 1] = "all"
    site.serve = site.controller.start(argv, env=site.roset_env)
    site.serves.append(site.serve)
    wait_for_port(site.consumer_a, site.controller.address, PORT, timeout=15, process=site.serve)


@pytest.fixture
def nodes(host_lab, rosetctl_binary) -> Nodes:
    site = build_site(host_lab)
    serve_role_all(site)
    yield Nodes(site)  # both nodes register with the role-all host (Nodes waits for that)
    site.assert_no_secrets_printed()


def forwarded(site: Site, method: str, node: str) -> list[str]:
    """The role-all host's log lines for METHOD calls it forwarded to NODE."""
    pattern = re.compile(rf'{re.escape(method)} node="{re.escape(node)}" .*forwarded .*status=OK')
    return [line for line in site.serve_log().splitlines() if pattern.search(line)]


def test_a_call_naming_another_node_is_forwarded_not_answered_from_the_role_all_hosts_state(nodes, registry_stubs):
    site = nodes.site
    commit_small(nodes, "src", "s1")  # on consumer-a only

    # ObjectStore (unary): A's snapshot, asked of the role-all host naming A, is A's answer.
    looked_up = site.grpc(site.consumer_b, registry_stubs, "rosetctl", "ObjectStore", "LookupSnapshot",
                          {"reference": "s1"}, identity=site.identity("alice"),
                          metadata=[("rosetctl-node", "consumer-a")])
    assert looked_up["code"] == "OK", f"expected consumer-a's snapshot, not the role-all host's: {looked_up}"
    assert looked_up["response"]["snapshot"]["name"] == "s1" and looked_up["response"]["tree_id"], looked_up
    assert forwarded(site, "/rosetctl.v1.ObjectStore/LookupSnapshot", "consumer-a"), site.serve_log()

    # ObjectStore (streaming): B, which cannot dial A, pulls A's snapshot through the role-all host:
    # PullSnapshot naming B, then B's LookupSnapshot and FetchObjects naming A, all forwarded.
    with nodes.b_cannot_dial_a():
        pushed = nodes.push("s1")
    assert pushed.rc == 0, pushed.describe()
    assert pushed.json()["route"] == "through the controller's proxy", pushed.json()
    assert pushed.json()["objects_sent"] == 3, pushed.json()
    assert forwarded(site, "/rosetctl.v1.ObjectStore/PullSnapshot", "consumer-b"), site.serve_log()
    assert forwarded(site, "/rosetctl.v1.ObjectStore/FetchObjects", "consumer-a"), site.serve_log()
    fetches = fetch_lines(nodes.serve_a)
    assert fetches and all("peer=controller:" in line for line in fetches), fetches
    assert [s["name"] for s in nodes.b.ok_json("snapshot", "list")] == ["s1"]

    # Node (rosetctl --on-node): B's own NodeGetInfo, not the role-all host's.
    info = site.alice.ok_json("--on-node", "consumer-b", "node", "info")
    assert info["node_id"] == "consumer-b", f"expected consumer-b's own NodeGetInfo: {info}"
    assert forwarded(site, "/csi.v1.Node/NodeGetInfo", "consumer-b"), site.serve_log()
    assert re.search(r"NodeGetInfo peer=controller:\S+ .*status=OK", nodes.serve_b.output()), nodes.serve_b.output()

    # A failure of the named node reaches the caller as the node answered it, naming the node.
    missing = site.grpc(site.consumer_b, registry_stubs, "rosetctl", "ObjectStore", "LookupSnapshot",
                        {"reference": "nope"}, identity=site.identity("alice"),
                        metadata=[("rosetctl-node", "consumer-a")])
    assert missing["code"] == "NOT_FOUND" and 'node "consumer-a"' in missing["details"], missing

    # NodeState (streaming): consumer-b's attach lock, held through the role-all host.
    cert, key, ca = site.identity("alice")
    held = site.consumer_a.run([sys.executable, "-c", HOLD_THROUGH, str(Path(registry_stubs.pb2.__file__).parent),
                                site.address, str(ca), str(key), str(cert)], timeout=60)
    site.printed += [held.stdout, held.stderr]
    assert held.rc == 0 and held.stdout.strip() == "held", held.describe()
    assert re.search(r'HoldAttachLock .*peer=controller:\S+ .*status=OK', nodes.serve_b.output()), nodes.serve_b.output()

    # Naming the role-all host's own node: answered there, with no hop.
    own = site.alice.ok_json("--on-node", "controller", "node", "info")
    assert own["node_id"] == "controller", own
    assert not forwarded(site, "NodeGetInfo", "controller"), site.serve_log()

    # A node that is not registered: refused as by a controller's proxy, not answered locally.
    unknown = site.alice.run("--on-node", "nobody", "node", "info")
    assert unknown.rc == EXIT_UNAVAILABLE and 'node "nobody" is not registered' in unknown.stderr, unknown.describe()

    # A `--role node` server is no controller: the CLI does not take its certificate for one (nor
    # would it answer for consumer-a with its own node's data: it forwards nothing).
    at_b = site.alice.run("--controller", f"{nodes.b_host.address}:{NODE_PORT}", "--on-node", "consumer-a",
                          "node", "info")
    assert at_b.rc == EXIT_PERMISSION, at_b.describe()
    assert "consumer-b" in at_b.stderr and "where a controller certificate was expected" in at_b.stderr, \
        at_b.describe()
    site.assert_no_secrets_printed()
