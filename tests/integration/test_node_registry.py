"""The controller's node registry (rosetctl.v1.Registry) end to end: the real CLI's `node
register|list|show|remove`, what it means to `volume map` (ControllerPublishVolume), and the same
service over `serve`'s unix socket with generated Python stubs."""
from __future__ import annotations

import time

import grpc

from csi_server import CALL_TIMEOUT, expect_code, mount_capability
from rosetctl_cli import EXIT_NOT_FOUND, EXIT_OK, EXIT_PRECONDITION, EXIT_USAGE

INITIATOR = "iqn.1993-08.org.debian:01:5e1f2a3b4c"
NODE_FIELDS = {"node_id", "address", "iscsi_initiator", "topology", "version", "registered_at",
               "registered_at_ns", "last_seen", "last_seen_ns", "cordoned", "cordoned_at", "cordoned_at_ns"}


def binary_version(cli) -> str:
    return cli.ok("--version", with_state_dir=False).stdout.split()[1]


def test_register_list_show_and_register_again(cli):
    info = cli.ok_json("node", "info")
    first = cli.ok_json("node", "register", "--address", "127.0.0.1:9443", "--iscsi-initiator", INITIATOR)
    assert set(first) == NODE_FIELDS, f"unexpected fields: {sorted(first)}"
    assert first["node_id"] == info["node_id"], f"expected this node's id {info['node_id']}: {first}"
    assert first["topology"] == info["topology"], f"expected NodeGetInfo's topology: {first}"
    assert first["address"] == "127.0.0.1:9443" and first["iscsi_initiator"] == INITIATOR, first
    assert first["version"] == binary_version(cli), f"expected the binary's version: {first}"
    assert first["registered_at_ns"] == first["last_seen_ns"] > 0, first
    assert not first["cordoned"] and first["cordoned_at"] is None and first["cordoned_at_ns"] is None, first
    assert cli.ok_json("node", "list") == [first]
    assert cli.ok_json("node", "show", info["node_id"]) == first

    time.sleep(0.01)
    again = cli.ok_json("node", "register", "--iscsi-initiator", "")
    assert again["registered_at_ns"] == first["registered_at_ns"], f"expected the first registration kept: {again}"
    assert again["last_seen_ns"] > first["last_seen_ns"], f"expected last_seen refreshed: {first} -> {again}"
    # No --address: the registered one stays (serve's, which the admin's re-registration must not
    # erase); an initiator name given (even empty) replaces the recorded one.
    assert again["address"] == "127.0.0.1:9443", f"expected the address kept: {again}"
    assert again["iscsi_initiator"] is None, f"expected the initiator name replaced: {again}"
    assert cli.ok_json("node", "list") == [again], "expected re-registering to keep one entry"

    other = cli.ok_json("--node-id", "worker-2", "node", "register")
    assert other["topology"] == {"topology.rosetctl.io/node": "worker-2"}, other
    assert [n["node_id"] for n in cli.ok_json("node", "list")] == sorted([info["node_id"], "worker-2"])
    table = cli.ok("node", "list").stdout
    assert table.splitlines()[0].split()[:2] == ["NODE", "ID"] and "worker-2" in table, table
    shown = cli.ok("node", "show", "worker-2").stdout
    assert "Node id:" in shown and "worker-2" in shown, shown

    # A cordon is kept across the node's registrations (its heartbeat) and shown.
    cordon = cli.ok_json("node", "cordon", "worker-2")
    assert cordon["changed"] and cordon["node"]["cordoned"], cordon
    registered = cli.ok_json("--node-id", "worker-2", "node", "register")
    assert registered["cordoned"] and registered["cordoned_at_ns"] == cordon["node"]["cordoned_at_ns"], registered
    assert "yes, since" in cli.ok("node", "show", "worker-2").stdout
    assert cli.ok_json("node", "uncordon", "worker-2")["changed"]


def test_unknown_nodes_and_bad_registrations(cli, state_dir):
    assert cli.ok_json("node", "list") == [] and not state_dir.exists(), "expected list to create no state"
    missing = cli.run("node", "show", "ghost")
    assert missing.rc == EXIT_NOT_FOUND and "ghost" in missing.stderr, missing.describe()
    # No initiator name: this host's (open-iscsi's file) can be registered by one node only.
    cli.ok_json("--node-id", "real", "node", "register", "--iscsi-initiator", "")
    missing = cli.run("node", "show", "ghost")
    assert missing.rc == EXIT_NOT_FOUND and 'node "ghost" is not registered' in missing.stderr, missing.describe()
    gone = cli.ok_json("node", "remove", "ghost")
    assert gone == {"node_id": "ghost", "removed": False, "published_volume_ids": [], "revoked_at": None}, gone
    assert "not registered; nothing to remove" in cli.ok("node", "remove", "ghost").stdout

    for flags, says in ((["--address", "node1"], 'address "node1"'),
                        (["--address", "node1:0"], "port 0"),
                        (["--address", "fd00::1:9443"], "without brackets"),
                        (["--address", "[fd00::zz]:9443"], "no valid IPv6 address"),
                        (["--iscsi-initiator", "not-an-iqn"], 'iscsi_initiator "not-an-iqn"')):
        bad = cli.run("--node-id", "bad", "node", "register", *flags)
        assert bad.rc == EXIT_USAGE and says in bad.stderr, f"{flags}: {bad.describe()}"
    assert [n["node_id"] for n in cli.ok_json("node", "list")] == ["real"], "expected nothing stored by bad input"
    assert cli.ok_json("--node-id", "v6", "node", "register", "--address", "[fd00::1]:9443",
                       "--iscsi-initiator", "")["address"] == "[fd00::1]:9443"


def test_map_to_an_unregistered_node_is_not_found_where_the_node_record_is_needed(cli):
    """local (and iscsi, test_iscsi_provider) volumes: the node must be known. roset volumes need
    no record of the node (test_roset: publishing is bookkeeping there)."""
    cli.create("here")
    refused = cli.run("volume", "map", "here", "--node", "worker-2")
    assert refused.rc == EXIT_NOT_FOUND, f"expected exit 3 mapping to an unregistered node: {refused.describe()}"
    assert 'node "worker-2" is not registered with this controller' in refused.stderr, refused.stderr
    assert "rosetctl node list" in refused.stderr, refused.stderr
    assert cli.volume("here")["published_nodes"] == [], "expected no mapping recorded"


def test_a_registered_node_with_mappings_is_removed_only_by_force(cli, roset):
    cli.create("shared")
    cli.ok_json("--node-id", "worker-2", "node", "register")
    mapped = cli.ok_json("volume", "map", "shared", "--node", "worker-2")
    assert mapped["mapped"] is True and mapped["node"] == "worker-2", mapped
    assert cli.volume("shared")["published_nodes"] == ["worker-2"]

    refused = cli.run("node", "remove", "worker-2")
    assert refused.rc == EXIT_PRECONDITION, f"expected exit 5 removing a node with a mapping: {refused.describe()}"
    assert 'still has volumes published to it: "shared"' in refused.stderr and "--force" in refused.stderr, refused.stderr
    assert cli.ok_json("node", "show", "worker-2")["node_id"] == "worker-2", "expected the node kept"

    volume_id = cli.volume("shared")["id"]
    forced = cli.run("node", "remove", "worker-2", "--force")
    assert forced.rc == EXIT_OK and 'removed node "worker-2"' in forced.stdout, forced.describe()
    assert volume_id in forced.stderr and "volume unmap" in forced.stderr, forced.stderr
    assert cli.run("node", "show", "worker-2").rc == EXIT_NOT_FOUND
    assert cli.volume("shared")["published_nodes"] == ["worker-2"], "expected a forced removal to leave the mapping"
    again = cli.ok_json("node", "remove", "worker-2")
    assert again == {"node_id": "worker-2", "removed": False, "published_volume_ids": [volume_id],
                     "revoked_at": None}, again
    cli.ok("volume", "unmap", "shared", "--node", "worker-2")
    cli.ok("volume", "delete", "shared")


def test_local_volumes_stay_on_their_node_even_for_registered_nodes(cli):
    cli.create("here")
    cli.ok_json("--node-id", "worker-2", "node", "register")
    refused = cli.run("volume", "map", "here", "--node", "worker-2")
    assert refused.rc == EXIT_PRECONDITION, (
        f"expected exit 5 (a known node the volume cannot reach): {refused.describe()}")
    assert 'node "worker-2" cannot reach volume "here"' in refused.stderr, refused.stderr
    assert "local volumes live on the node that created them" in refused.stderr, refused.stderr
    assert "--provider roset" in refused.stderr, "expected the refusal to point to a provider that can"
    assert cli.volume("here")["published_nodes"] == []


def test_registry_over_the_serve_socket(cli, csi, registry_stubs, start_serve):
    server = start_serve()
    pb2, registry = registry_stubs.pb2, registry_stubs.grpc.RegistryStub(server.channel)
    request = pb2.RegisterNodeRequest(node_id="worker-3", address="[::1]:9443", iscsi_initiator=INITIATOR,
                                      topology={"topology.rosetctl.io/node": "worker-3"}, version="9.9.9")
    first = registry.RegisterNode(request, timeout=CALL_TIMEOUT).node
    assert first.registered_at == first.last_seen > 0 and first.address == "[::1]:9443", first
    time.sleep(0.01)
    again = registry.RegisterNode(request, timeout=CALL_TIMEOUT).node
    assert again.registered_at == first.registered_at and again.last_seen > first.last_seen, (first, again)
    listed = registry.ListNodes(pb2.ListNodesRequest(), timeout=CALL_TIMEOUT).nodes
    assert [n.node_id for n in listed] == ["worker-3"] and listed[0] == again, listed
    assert registry.GetNode(pb2.GetNodeRequest(node_id="worker-3"), timeout=CALL_TIMEOUT).node == again

    details = expect_code(lambda: registry.GetNode(pb2.GetNodeRequest(node_id="ghost"), timeout=CALL_TIMEOUT),
                          grpc.StatusCode.NOT_FOUND, "GetNode of an unknown node")
    assert "ghost" in details, details
    bad = pb2.RegisterNodeRequest(node_id="worker-4", address="worker-4:99999")
    details = expect_code(lambda: registry.RegisterNode(bad, timeout=CALL_TIMEOUT),
                          grpc.StatusCode.INVALID_ARGUMENT, "RegisterNode with a bad port")
    assert 'address "worker-4:99999"' in details, details
    # The CLI on this host reads the same state: what serve registered, it lists.
    assert [n["node_id"] for n in cli.ok_json("node", "list")] == ["worker-3"]

    csi_pb2 = csi.pb2
    volume_id = server.controller.CreateVolume(csi_pb2.CreateVolumeRequest(
        name="over-socket", volume_capabilities=[mount_capability(csi_pb2)]), timeout=CALL_TIMEOUT).volume.volume_id
    publish = csi_pb2.ControllerPublishVolumeRequest(volume_id=volume_id, node_id="ghost",
                                                     volume_capability=mount_capability(csi_pb2))
    details = expect_code(lambda: server.controller.ControllerPublishVolume(publish, timeout=CALL_TIMEOUT),
                          grpc.StatusCode.NOT_FOUND, "ControllerPublishVolume to an unregistered node")
    assert 'node "ghost" is not registered' in details, details

    removed = registry.RemoveNode(pb2.RemoveNodeRequest(node_id="worker-3"), timeout=CALL_TIMEOUT)
    assert removed.removed and not removed.published_volume_ids, removed
    assert not registry.RemoveNode(pb2.RemoveNodeRequest(node_id="worker-3"), timeout=CALL_TIMEOUT).removed
    log = server.log()
    assert 'RegisterNode node_id="worker-3"' in log and "status=OK" in log, log[-2000:]


def test_a_node_role_server_has_no_registry(registry_stubs, start_serve):
    server = start_serve(extra=("--role", "node"))
    registry = registry_stubs.grpc.RegistryStub(server.channel)
    expect_code(lambda: registry.ListNodes(registry_stubs.pb2.ListNodesRequest(), timeout=CALL_TIMEOUT),
                grpc.StatusCode.UNIMPLEMENTED, "ListNodes on a node-only server")
