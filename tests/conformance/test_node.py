"""CSI Node rules, checked over `serve`'s unix socket with real bind mounts."""
from __future__ import annotations

import errno
import os

import grpc
import pytest

from csi_calls import Driver, capability, exists, unique
from csi_server import CALL_TIMEOUT, expect_code
from rosetctl_mounts import is_mount_point

IA, NF, AE, FP = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS,
                  grpc.StatusCode.FAILED_PRECONDITION)


@pytest.fixture
def co(server, workdir) -> Driver:
    return Driver(server, workdir)


def test_node_info_has_id_limit_and_topology(co):
    info = co.server.node.NodeGetInfo(co.pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT)
    assert info.node_id and info.max_volumes_per_node >= 0
    assert dict(info.accessible_topology.segments) == {"topology.rosetctl.io/node": info.node_id}


@pytest.mark.parametrize("rpc, request_fields, field", [
    ("NodeStageVolume", {}, "volume_id"),
    ("NodeStageVolume", {"volume_id": "local-0000000000000000"}, "staging_target_path"),
    ("NodeUnstageVolume", {}, "volume_id"),
    ("NodeUnstageVolume", {"volume_id": "local-0000000000000000"}, "staging_target_path"),
    ("NodePublishVolume", {}, "volume_id"),
    ("NodePublishVolume", {"volume_id": "local-0000000000000000"}, "target_path"),
    ("NodePublishVolume", {"volume_id": "local-0000000000000000", "target_path": "/tmp/x"}, "volume_capability"),
    ("NodeUnpublishVolume", {}, "volume_id"),
    ("NodeUnpublishVolume", {"volume_id": "local-0000000000000000"}, "target_path"),
    ("NodeGetVolumeStats", {"volume_path": "/tmp"}, "volume_id"),
    ("NodeGetVolumeStats", {"volume_id": "local-0000000000000000"}, "volume_path"),
])
def test_missing_required_field_is_invalid_argument_naming_it(co, rpc, request_fields, field):
    request = getattr(co.pb2, f"{rpc}Request")(**request_fields)
    details = expect_code(lambda: getattr(co.server.node, rpc)(request, timeout=CALL_TIMEOUT), IA,
                          f"{rpc} without {field}")
    assert field in details, f"expected the message to name {field!r}: {details!r}"


def test_stage_without_capability_is_invalid_argument(co):
    volume = co.create()
    request = co.pb2.NodeStageVolumeRequest(volume_id=volume.volume_id,
                                            staging_target_path=co.staging_path(volume.volume_id))
    expect_code(lambda: co.server.node.NodeStageVolume(request, timeout=CALL_TIMEOUT), IA, "no capability")


def test_stage_and_publish_of_unknown_volumes_are_not_found(co):
    staging = co.staging_path("unknown")
    expect_code(lambda: co.stage("local-ffffffffffffffff", staging), NF, "NodeStage of an unknown volume")
    expect_code(lambda: co.node_publish("local-ffffffffffffffff", staging, co.target_path()), NF,
                "NodePublish of an unknown volume")


def test_publish_without_staging_path_is_failed_precondition(co):
    volume = co.create()
    expect_code(lambda: co.node_publish(volume.volume_id, "", co.target_path()), FP,
                "NodePublish without staging_target_path")


def test_publish_of_an_unstaged_volume_is_failed_precondition(co):
    volume = co.create()
    expect_code(lambda: co.node_publish(volume.volume_id, co.staging_path(volume.volume_id), co.target_path()),
                FP, "NodePublish before NodeStage")


def test_stage_and_publish_are_idempotent(co):
    volume = co.create()
    co.publish(volume.volume_id)
    staging, target = co.staging_path(volume.volume_id), co.target_path()
    for _ in range(10):
        co.stage(volume.volume_id, staging)
    for _ in range(10):
        co.node_publish(volume.volume_id, staging, target)
    assert is_mount_point(staging) and is_mount_point(target)
    with open("/proc/self/mountinfo") as table:
        stacked = sum(1 for line in table if line.split()[4] == target)
    assert stacked == 1, f"expected one mount at {target}, found {stacked}"


def test_restage_with_another_capability_is_already_exists(co):
    pb2 = co.pb2
    volume = co.create()
    staging = co.staging_path(volume.volume_id)
    co.stage(volume.volume_id, staging)
    other = capability(pb2, flags=["noexec"])
    request = pb2.NodeStageVolumeRequest(volume_id=volume.volume_id, staging_target_path=staging,
                                         volume_capability=other)
    expect_code(lambda: co.server.node.NodeStageVolume(request, timeout=CALL_TIMEOUT), AE,
                "NodeStage again with other mount flags")


def test_unpublish_removes_the_target_it_created(co):
    volume, staging, target = co.attach()
    assert exists(target)
    co.node_unpublish(volume.volume_id, target)
    assert not exists(target), f"expected {target} removed by NodeUnpublish"
    co.node_unpublish(volume.volume_id, target)  # again: OK


def test_read_only_publish_refuses_writes_and_a_conflicting_republish(co):
    volume = co.create()
    staging, target = co.staging_path(volume.volume_id), co.target_path()
    co.stage(volume.volume_id, staging)
    co.node_publish(volume.volume_id, staging, target, readonly=True)
    with pytest.raises(OSError) as failure:
        open(os.path.join(target, "x"), "w").close()
    assert failure.value.errno == errno.EROFS
    expect_code(lambda: co.node_publish(volume.volume_id, staging, target, readonly=False), AE,
                "a read-write publish over a read-only one")


def test_mount_flags_from_the_capability_are_applied(co):
    volume = co.create()
    staging, target = co.staging_path(volume.volume_id), co.target_path()
    co.stage(volume.volume_id, staging)
    co.node_publish(volume.volume_id, staging, target, cap=capability(co.pb2, flags=["noexec", "nosuid"]))
    with open("/proc/self/mountinfo") as table:
        options = next(line.split()[5] for line in table if line.split()[4] == target)
    assert "noexec" in options and "nosuid" in options, f"expected noexec,nosuid in {options}"


def test_unknown_mount_flags_are_invalid_argument(co):
    volume = co.create()
    staging, target = co.staging_path(volume.volume_id), co.target_path()
    co.stage(volume.volume_id, staging)
    details = expect_code(lambda: co.node_publish(volume.volume_id, staging, target,
                                                  cap=capability(co.pb2, flags=["bogus"])), IA,
                          "an unknown mount flag")
    assert "bogus" in details
    assert not exists(target), "expected no target left behind by a refused publish"


def test_unstage_while_published_is_failed_precondition_then_works(co):
    volume, staging, target = co.attach()
    expect_code(lambda: co.unstage(volume.volume_id, staging), FP, "NodeUnstage of a published volume")
    co.node_unpublish(volume.volume_id, target)
    for _ in range(3):
        co.unstage(volume.volume_id, staging)
    assert not is_mount_point(staging)


def test_unpublish_and_unstage_of_unknown_volumes_are_not_found(co):
    expect_code(lambda: co.node_unpublish("local-ffffffffffffffff", co.target_path()), NF,
                "NodeUnpublish of an unknown volume")
    expect_code(lambda: co.unstage("local-ffffffffffffffff", co.staging_path("x")), NF,
                "NodeUnstage of an unknown volume")


def test_unpublish_after_the_target_parent_vanished_is_ok(co, workdir):
    volume = co.create()
    co.node_unpublish(volume.volume_id, str(workdir / "gone" / "target"))


def test_stats_report_bytes_and_inodes_of_a_published_volume(co):
    pb2 = co.pb2
    volume, staging, target = co.attach()
    response = co.server.node.NodeGetVolumeStats(
        pb2.NodeGetVolumeStatsRequest(volume_id=volume.volume_id, volume_path=target), timeout=CALL_TIMEOUT)
    units = {u.unit: u for u in response.usage}
    assert set(units) == {pb2.VolumeUsage.BYTES, pb2.VolumeUsage.INODES}
    assert units[pb2.VolumeUsage.BYTES].total > 0
    assert not response.volume_condition.abnormal


@pytest.mark.parametrize("path", ["some/path", "/", "/tmp"])
def test_stats_of_a_path_that_is_not_the_volume_are_not_found(co, path):
    pb2 = co.pb2
    volume, _, _ = co.attach()
    expect_code(lambda: co.server.node.NodeGetVolumeStats(
        pb2.NodeGetVolumeStatsRequest(volume_id=volume.volume_id, volume_path=path), timeout=CALL_TIMEOUT),
        NF, f"NodeGetVolumeStats at {path}")
    expect_code(lambda: co.server.node.NodeGetVolumeStats(
        pb2.NodeGetVolumeStatsRequest(volume_id="fake-vol-id", volume_path=path), timeout=CALL_TIMEOUT),
        NF, "NodeGetVolumeStats of an unknown volume")


def test_stats_condition_is_abnormal_when_the_mount_is_gone(co):
    pb2 = co.pb2
    volume, _, target = co.attach()
    assert os.system(f"umount {target}") == 0
    response = co.server.node.NodeGetVolumeStats(
        pb2.NodeGetVolumeStatsRequest(volume_id=volume.volume_id, volume_path=target), timeout=CALL_TIMEOUT)
    assert response.volume_condition.abnormal, f"expected an abnormal condition: {response}"
    assert "mounted" in response.volume_condition.message


def test_node_capabilities_are_the_documented_ones(co):
    pb2 = co.pb2
    response = co.server.node.NodeGetCapabilities(pb2.NodeGetCapabilitiesRequest(), timeout=CALL_TIMEOUT)
    types = {c.rpc.type for c in response.capabilities}
    rpc = pb2.NodeServiceCapability.RPC
    assert {rpc.STAGE_UNSTAGE_VOLUME, rpc.GET_VOLUME_STATS, rpc.VOLUME_CONDITION} <= types


def test_volume_with_unique_name_survives_a_full_cycle(co):
    volume, staging, target = co.attach(unique("cycle"))
    with open(os.path.join(target, "data"), "w") as f:
        f.write("kept")
    co.node_unpublish(volume.volume_id, target)
    co.unstage(volume.volume_id, staging)
    co.unpublish(volume.volume_id)
    co.stage(volume.volume_id, staging)
    co.node_publish(volume.volume_id, staging, target)
    with open(os.path.join(target, "data")) as f:
        assert f.read() == "kept"
