"""CSI Identity and Controller rules, checked over `serve`'s unix socket."""
from __future__ import annotations

import re
from pathlib import Path

import grpc
import pytest

from csi_calls import Driver, capability, unique
from csi_server import CALL_TIMEOUT, expect_code

IA, NF, AE = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS


@pytest.fixture
def co(server, workdir) -> Driver:
    return Driver(server, workdir)


# ---------------------------------------------------------------- identity

def test_plugin_info_has_a_valid_name_version_and_build_manifest(co):
    info = co.server.identity.GetPluginInfo(co.pb2.GetPluginInfoRequest(), timeout=CALL_TIMEOUT)
    assert re.fullmatch(r"[a-zA-Z][A-Za-z0-9.\-_]{0,61}[a-zA-Z]", info.name), f"bad plugin name {info.name!r}"
    assert info.vendor_version, "expected a vendor_version"
    assert info.manifest.get("git_commit"), f"expected git_commit in the manifest: {dict(info.manifest)}"


def test_plugin_capabilities_are_the_documented_ones(co):
    pb2 = co.pb2
    response = co.server.identity.GetPluginCapabilities(pb2.GetPluginCapabilitiesRequest(), timeout=CALL_TIMEOUT)
    services = {c.service.type for c in response.capabilities if c.HasField("service")}
    expansion = {c.volume_expansion.type for c in response.capabilities if c.HasField("volume_expansion")}
    assert services == {pb2.PluginCapability.Service.CONTROLLER_SERVICE,
                        pb2.PluginCapability.Service.VOLUME_ACCESSIBILITY_CONSTRAINTS}
    assert expansion == {pb2.PluginCapability.VolumeExpansion.ONLINE}


def test_probe_reports_ready(co):
    response = co.server.identity.Probe(co.pb2.ProbeRequest(), timeout=CALL_TIMEOUT)
    assert response.ready.value, "expected Probe to report ready on a healthy state dir"


def test_probe_is_failed_precondition_when_the_state_dir_is_unusable(co, state_dir):
    # Root ignores permission bits, so break the volumes directory by replacing it with a file.
    volumes = state_dir / "volumes"
    volumes.rename(state_dir / "volumes.moved")
    volumes.write_text("not a directory")
    try:
        details = expect_code(lambda: co.server.identity.Probe(co.pb2.ProbeRequest(), timeout=CALL_TIMEOUT),
                              grpc.StatusCode.FAILED_PRECONDITION, "Probe with a broken volumes directory")
        assert "local" in details, f"expected the message to name the provider: {details!r}"
    finally:
        volumes.unlink()
        (state_dir / "volumes.moved").rename(volumes)


# ---------------------------------------------------------------- required fields name the field

@pytest.mark.parametrize("rpc, request_fields, field", [
    ("CreateVolume", {}, "name"),
    ("CreateVolume", {"name": "x"}, "volume_capabilities"),
    ("DeleteVolume", {}, "volume_id"),
    ("ControllerPublishVolume", {}, "volume_id"),
    ("ControllerPublishVolume", {"volume_id": "local-0000000000000000"}, "node_id"),
    ("ControllerPublishVolume", {"volume_id": "local-0000000000000000", "node_id": "n"}, "volume_capability"),
    ("ControllerUnpublishVolume", {}, "volume_id"),
    ("ValidateVolumeCapabilities", {}, "volume_id"),
    ("ValidateVolumeCapabilities", {"volume_id": "local-0000000000000000"}, "volume_capabilities"),
    ("ControllerExpandVolume", {}, "volume_id"),
    ("ControllerExpandVolume", {"volume_id": "local-0000000000000000"}, "capacity_range"),
    ("ControllerGetVolume", {}, "volume_id"),
    ("ControllerModifyVolume", {"mutable_parameters": {"directIO": "true"}}, "volume_id"),
])
def test_missing_required_field_is_invalid_argument_naming_it(co, rpc, request_fields, field):
    request = getattr(co.pb2, f"{rpc}Request")(**request_fields)
    details = expect_code(lambda: getattr(co.server.controller, rpc)(request, timeout=CALL_TIMEOUT), IA,
                          f"{rpc} without {field}")
    assert field in details, f"expected the message to name {field!r}: {details!r}"


# ---------------------------------------------------------------- CreateVolume / DeleteVolume

def test_create_is_idempotent_by_name(co):
    name = unique("idem")
    ids = {co.create(name, required=1 << 20).volume_id for _ in range(10)}
    assert len(ids) == 1, f"expected one volume for ten identical CreateVolume calls, got {ids}"


def test_create_with_the_same_name_and_another_size_is_already_exists(co):
    name = unique("size")
    co.create(name, required=1 << 20, limit=1 << 20)
    expect_code(lambda: co.create(name, required=2 << 20, limit=2 << 20), AE, "CreateVolume with a new size")


def test_names_of_128_bytes_work_and_129_are_refused(co):
    volume = co.create("n" * 128)
    assert volume.volume_id
    expect_code(lambda: co.create("n" * 129), IA, "a 129-byte name")


def test_capacity_is_reported_and_an_inverted_range_is_refused(co):
    assert co.create(required=5 << 20).capacity_bytes == 5 << 20
    expect_code(lambda: co.create(required=2 << 20, limit=1 << 20), IA, "limit below required")


def test_unknown_parameters_are_refused_naming_the_key(co):
    details = expect_code(lambda: co.create(parameters={"colour": "blue"}), IA, "an unknown parameter")
    assert "colour" in details


def test_kubernetes_metadata_parameters_are_accepted(co):
    volume = co.create(parameters={"csi.storage.k8s.io/pvc/name": "data", "type": "dir"})
    assert volume.volume_id.startswith("local-")


def test_volumes_carry_this_nodes_topology_and_honour_requisites(co):
    pb2 = co.pb2
    volume = co.create()
    segments = [dict(t.segments) for t in volume.accessible_topology]
    assert segments == [{"topology.rosetctl.io/node": co.node_id}], f"unexpected topology {segments}"
    elsewhere = pb2.TopologyRequirement(requisite=[pb2.Topology(segments={"topology.rosetctl.io/node": "other"})])
    expect_code(lambda: co.create(accessibility_requirements=elsewhere), grpc.StatusCode.RESOURCE_EXHAUSTED,
                "a requisite topology without this node")
    here = pb2.TopologyRequirement(requisite=[pb2.Topology(segments={"topology.rosetctl.io/node": co.node_id})])
    assert co.create(accessibility_requirements=here).volume_id


def test_delete_is_idempotent_and_unknown_ids_are_ok(co, state_dir):
    """Each DeleteVolume answers OK, and the volume is gone after the first: no record (NOT_FOUND,
    not listed) and no data (a delete that answered OK and kept them would pass otherwise)."""
    pb2 = co.pb2
    volume, staging, target = co.attach()
    Path(target).joinpath("kept").write_text("data\n")
    co.node_unpublish(volume.volume_id, target)
    co.unstage(volume.volume_id, staging)
    co.unpublish(volume.volume_id)
    data = state_dir / "volumes" / volume.volume_id
    assert (data / "kept").read_text() == "data\n", f"expected the volume's data in {data}"
    image = co.create(parameters={"type": "image"}, required=8 * 2**20)
    image_file = state_dir / "images" / f"{image.volume_id}.img"
    assert image_file.exists(), f"expected the image volume's file {image_file}"
    for _ in range(3):
        co.delete(volume.volume_id)
        co.delete(image.volume_id)
        for gone in (volume.volume_id, image.volume_id):
            expect_code(lambda: co.server.controller.ControllerGetVolume(
                pb2.ControllerGetVolumeRequest(volume_id=gone), timeout=CALL_TIMEOUT), NF,
                f"ControllerGetVolume of the deleted volume {gone}")
        listed = [e.volume.volume_id for e in co.server.controller.ListVolumes(
            pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT).entries]
        assert volume.volume_id not in listed and image.volume_id not in listed, listed
        assert not data.exists(), f"expected the deleted volume's data {data} gone"
        assert not image_file.exists(), f"expected the deleted image {image_file} gone"
    co.delete("fake-vol-id")
    co.delete("local-ffffffffffffffff")


def test_delete_of_a_published_volume_is_failed_precondition(co):
    volume = co.create()
    co.publish(volume.volume_id)
    expect_code(lambda: co.delete(volume.volume_id), grpc.StatusCode.FAILED_PRECONDITION,
                "DeleteVolume of a published volume")


# ---------------------------------------------------------------- ControllerPublish / Unpublish

def test_publish_is_idempotent_and_unknowns_are_not_found(co):
    volume = co.create()
    contexts = {tuple(sorted(co.publish(volume.volume_id).publish_context.items())) for _ in range(10)}
    assert len(contexts) == 1
    expect_code(lambda: co.publish("local-ffffffffffffffff"), NF, "ControllerPublish of an unknown volume")
    expect_code(lambda: co.publish(volume.volume_id, node_id="fake-node-id"), NF,
                "ControllerPublish to an unknown node")


def test_publish_with_another_readonly_flag_is_already_exists(co):
    volume = co.create()
    co.publish(volume.volume_id, readonly=False)
    expect_code(lambda: co.publish(volume.volume_id, readonly=True), AE, "a read-only re-publish")


def test_unpublish_of_unknown_or_unpublished_volumes_is_ok(co):
    volume = co.create()
    co.unpublish(volume.volume_id)
    co.publish(volume.volume_id)
    co.unpublish(volume.volume_id)
    co.unpublish(volume.volume_id)
    co.unpublish("local-ffffffffffffffff")
    co.delete(volume.volume_id)
    co.unpublish(volume.volume_id)


def test_attach_limit_is_resource_exhausted(start_serve, workdir):
    co = Driver(start_serve(extra=("--max-volumes-per-node", "2")), workdir)
    info = co.server.node.NodeGetInfo(co.pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT)
    assert info.max_volumes_per_node == 2
    for _ in range(2):
        co.publish(co.create().volume_id)
    expect_code(lambda: co.publish(co.create().volume_id), grpc.StatusCode.RESOURCE_EXHAUSTED,
                "a third publication with max_volumes_per_node=2")


# ---------------------------------------------------------------- queries

def test_validate_capabilities_confirms_mount_and_refuses_unknown_volumes(co):
    pb2 = co.pb2
    volume = co.create()
    request = pb2.ValidateVolumeCapabilitiesRequest(volume_id=volume.volume_id, volume_capabilities=[capability(pb2)])
    response = co.server.controller.ValidateVolumeCapabilities(request, timeout=CALL_TIMEOUT)
    assert response.confirmed.volume_capabilities, f"expected mount access confirmed: {response}"
    request.volume_id = "local-ffffffffffffffff"
    expect_code(lambda: co.server.controller.ValidateVolumeCapabilities(request, timeout=CALL_TIMEOUT), NF,
                "ValidateVolumeCapabilities of an unknown volume")


def test_list_volumes_pages_and_survives_changes_between_pages(co):
    pb2 = co.pb2
    created = [co.create().volume_id for _ in range(5)]
    first = co.server.controller.ListVolumes(pb2.ListVolumesRequest(max_entries=2), timeout=CALL_TIMEOUT)
    assert len(first.entries) == 2 and first.next_token, f"expected a page of 2 and a token: {first}"
    for entry in first.entries:
        co.delete(entry.volume.volume_id)
    co.create()
    seen = []
    token = first.next_token
    while token:
        page = co.server.controller.ListVolumes(pb2.ListVolumesRequest(max_entries=2, starting_token=token),
                                                timeout=CALL_TIMEOUT)
        assert len(page.entries) <= 2
        seen += [e.volume.volume_id for e in page.entries]
        token = page.next_token
    assert len(seen) == len(set(seen)), f"duplicates across pages: {seen}"
    remaining = set(created) - {e.volume.volume_id for e in first.entries}
    assert remaining <= set(seen), f"expected {remaining} on the later pages, saw {seen}"


def test_list_volumes_rejects_bad_tokens_and_negative_sizes(co):
    pb2 = co.pb2
    expect_code(lambda: co.server.controller.ListVolumes(pb2.ListVolumesRequest(starting_token="invalid-token"),
                                                         timeout=CALL_TIMEOUT),
                grpc.StatusCode.ABORTED, "ListVolumes with a token we never issued")
    expect_code(lambda: co.server.controller.ListVolumes(pb2.ListVolumesRequest(max_entries=-1),
                                                         timeout=CALL_TIMEOUT), IA, "negative max_entries")


def test_list_and_get_volume_report_published_nodes_and_condition(co):
    pb2 = co.pb2
    volume = co.create()
    co.publish(volume.volume_id)
    listed = co.server.controller.ListVolumes(pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT)
    entry = next(e for e in listed.entries if e.volume.volume_id == volume.volume_id)
    assert list(entry.status.published_node_ids) == [co.node_id]
    assert entry.status.HasField("volume_condition") and not entry.status.volume_condition.abnormal
    got = co.server.controller.ControllerGetVolume(pb2.ControllerGetVolumeRequest(volume_id=volume.volume_id),
                                                   timeout=CALL_TIMEOUT)
    assert list(got.status.published_node_ids) == [co.node_id]
    expect_code(lambda: co.server.controller.ControllerGetVolume(
        pb2.ControllerGetVolumeRequest(volume_id="local-ffffffffffffffff"), timeout=CALL_TIMEOUT), NF,
        "ControllerGetVolume of an unknown volume")


def test_get_capacity_is_real_free_space_and_zero_elsewhere(co):
    pb2 = co.pb2
    free = co.server.controller.GetCapacity(pb2.GetCapacityRequest(), timeout=CALL_TIMEOUT).available_capacity
    assert free > 0
    elsewhere = pb2.Topology(segments={"topology.rosetctl.io/node": "other"})
    response = co.server.controller.GetCapacity(pb2.GetCapacityRequest(accessible_topology=elsewhere),
                                                timeout=CALL_TIMEOUT)
    assert response.available_capacity == 0


def test_expand_grows_to_exactly_the_request_and_never_shrinks(co):
    pb2 = co.pb2
    volume = co.create(required=1 << 20)
    request = pb2.ControllerExpandVolumeRequest(volume_id=volume.volume_id,
                                                capacity_range=pb2.CapacityRange(required_bytes=3 << 20))
    for _ in range(2):
        response = co.server.controller.ControllerExpandVolume(request, timeout=CALL_TIMEOUT)
        assert response.capacity_bytes == 3 << 20
    shrink = pb2.ControllerExpandVolumeRequest(volume_id=volume.volume_id,
                                               capacity_range=pb2.CapacityRange(required_bytes=1 << 20,
                                                                                limit_bytes=1 << 20))
    expect_code(lambda: co.server.controller.ControllerExpandVolume(shrink, timeout=CALL_TIMEOUT),
                grpc.StatusCode.OUT_OF_RANGE, "shrinking a volume")


def test_unadvertised_rpcs_are_unimplemented(co):
    pb2 = co.pb2
    advertised = co.server.controller.ControllerGetCapabilities(pb2.ControllerGetCapabilitiesRequest(),
                                                                timeout=CALL_TIMEOUT)
    types = {c.rpc.type for c in advertised.capabilities}
    if pb2.ControllerServiceCapability.RPC.MODIFY_VOLUME not in types:
        expect_code(lambda: co.server.controller.ControllerModifyVolume(
            pb2.ControllerModifyVolumeRequest(volume_id="local-ffffffffffffffff"), timeout=CALL_TIMEOUT),
            grpc.StatusCode.UNIMPLEMENTED, "ControllerModifyVolume without MODIFY_VOLUME")
