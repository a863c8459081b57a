"""The conformance flow with raw block access, as a CO runs it with `Block{}` capabilities:
the plugin creates the target file, places the device there and removes the file again."""
from __future__ import annotations

import os
import stat

import grpc
import pytest

from csi_calls import Driver, capability, unique
from csi_server import CALL_TIMEOUT, expect_code


@pytest.fixture
def co(server, workdir) -> Driver:
    return Driver(server, workdir)


def block_create(co, required=0, limit=0, name=None):
    pb2 = co.pb2
    request = pb2.CreateVolumeRequest(name=name or unique("blk"), volume_capabilities=[capability(pb2, block=True)],
                                      capacity_range=pb2.CapacityRange(required_bytes=required, limit_bytes=limit))
    return co.server.controller.CreateVolume(request, timeout=CALL_TIMEOUT).volume


def block_attach(co, volume):
    pb2 = co.pb2
    cap = capability(pb2, block=True)
    publish = pb2.ControllerPublishVolumeRequest(volume_id=volume.volume_id, node_id=co.node_id,
                                                 volume_capability=cap, volume_context=volume.volume_context)
    published = co.server.controller.ControllerPublishVolume(publish, timeout=CALL_TIMEOUT)
    staging = co.staging_path(volume.volume_id)
    stage = pb2.NodeStageVolumeRequest(volume_id=volume.volume_id, staging_target_path=staging,
                                       volume_capability=cap, publish_context=published.publish_context,
                                       volume_context=volume.volume_context)
    target = co.target_path(unique("dev"))
    node_publish = pb2.NodePublishVolumeRequest(volume_id=volume.volume_id, staging_target_path=staging,
                                                target_path=target, volume_capability=cap,
                                                publish_context=published.publish_context,
                                                volume_context=volume.volume_context)
    for _ in range(3):  # every step is idempotent
        co.server.node.NodeStageVolume(stage, timeout=CALL_TIMEOUT)
    for _ in range(3):
        co.server.node.NodePublishVolume(node_publish, timeout=CALL_TIMEOUT)
    return staging, target


def test_block_volume_lifecycle_places_and_removes_the_device(co):
    pb2 = co.pb2
    volume = block_create(co, required=16 << 20)
    assert volume.capacity_bytes == 16 << 20
    staging, target = block_attach(co, volume)
    assert stat.S_ISBLK(os.stat(target).st_mode), f"expected a block device at {target}"
    with open(target, "r+b", buffering=0) as device:
        device.seek(8 << 20)
        device.write(b"block-data")
    stats = co.server.node.NodeGetVolumeStats(
        pb2.NodeGetVolumeStatsRequest(volume_id=volume.volume_id, volume_path=target), timeout=CALL_TIMEOUT)
    assert stats.usage and stats.usage[0].total == 16 << 20
    co.node_unpublish(volume.volume_id, target)
    assert not os.path.lexists(target), "expected NodeUnpublish to remove the target file it created"
    co.unstage(volume.volume_id, staging)
    co.unstage(volume.volume_id, staging)
    co.unpublish(volume.volume_id)
    co.delete(volume.volume_id)


def test_block_volume_without_capacity_gets_a_default_size(co):
    volume = block_create(co)
    assert volume.capacity_bytes > 0, "expected a block volume created without a size to get one"
    co.delete(volume.volume_id)


def test_block_expand_returns_exactly_the_requested_size(co):
    pb2 = co.pb2
    volume = block_create(co, required=8 << 20)
    request = pb2.ControllerExpandVolumeRequest(volume_id=volume.volume_id,
                                                capacity_range=pb2.CapacityRange(required_bytes=24 << 20),
                                                volume_capability=capability(pb2, block=True))
    assert co.server.controller.ControllerExpandVolume(request, timeout=CALL_TIMEOUT).capacity_bytes == 24 << 20


def test_mount_access_to_a_block_volume_is_failed_precondition_at_the_node(co):
    pb2 = co.pb2
    volume = block_create(co, required=8 << 20)
    staging = co.staging_path(volume.volume_id)
    request = pb2.NodeStageVolumeRequest(volume_id=volume.volume_id, staging_target_path=staging,
                                         volume_capability=capability(pb2))
    expect_code(lambda: co.server.node.NodeStageVolume(request, timeout=CALL_TIMEOUT),
                grpc.StatusCode.FAILED_PRECONDITION, "mount access to a block volume")
