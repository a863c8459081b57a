"""Concurrency rules: one call per volume and target at a time (others ABORTED), different
targets never blocking each other, and retries after a client gave up."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from csi_calls import Driver, capability, unique
from csi_server import CALL_TIMEOUT


@pytest.fixture
def co(server, workdir) -> Driver:
    return Driver(server, workdir)


def outcome(call):
    try:
        return call(), grpc.StatusCode.OK
    except grpc.RpcError as failure:
        return None, failure.code()


def test_concurrent_creates_of_one_name_make_one_volume(co):
    name = unique("race")
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: outcome(lambda: co.create(name)), range(32)))
    codes = {code for _, code in results}
    assert codes <= {grpc.StatusCode.OK, grpc.StatusCode.ABORTED}, f"unexpected codes {codes}"
    ids = {volume.volume_id for volume, code in results if code == grpc.StatusCode.OK}
    assert len(ids) == 1, f"expected every successful create to return one id, got {ids}"
    listed = co.server.controller.ListVolumes(co.pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT)
    named = [e for e in listed.entries if e.volume.volume_context.get("rosetctl.io/name") == name]
    assert len(named) == 1


def test_concurrent_publishes_to_one_target_mount_once(co):
    volume = co.create()
    staging, target = co.staging_path(volume.volume_id), co.target_path()
    co.stage(volume.volume_id, staging)
    with ThreadPoolExecutor(16) as pool:
        codes = [code for _, code in pool.map(
            lambda _: outcome(lambda: co.node_publish(volume.volume_id, staging, target)), range(32))]
    assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.ABORTED}, f"unexpected codes {set(codes)}"
    assert grpc.StatusCode.OK in codes
    with open("/proc/self/mountinfo") as table:
        stacked = sum(1 for line in table if line.split()[4] == target)
    assert stacked == 1, f"expected exactly one mount at {target}, found {stacked}"


def test_publishes_to_different_targets_never_block_each_other(co):
    volume = co.create()
    staging = co.staging_path(volume.volume_id)
    co.stage(volume.volume_id, staging)
    targets = [co.target_path(f"t{i}") for i in range(40)]
    with ThreadPoolExecutor(20) as pool:
        codes = [code for _, code in pool.map(
            lambda t: outcome(lambda: co.node_publish(volume.volume_id, staging, t)), targets)]
    assert codes == [grpc.StatusCode.OK] * len(targets), f"expected all OK, got {set(codes)}"
    with ThreadPoolExecutor(20) as pool:
        codes = [code for _, code in pool.map(
            lambda t: outcome(lambda: co.node_unpublish(volume.volume_id, t)), targets)]
    assert codes == [grpc.StatusCode.OK] * len(targets)


def test_a_retry_after_a_client_timeout_converges(co):
    """A CO that gave up waiting retries: while the first call still runs it may see ABORTED (the
    spec's answer for an operation in flight), then the same volume."""
    pb2 = co.pb2
    name = unique("retry")
    request = pb2.CreateVolumeRequest(name=name, volume_capabilities=[capability(pb2)])
    try:
        co.server.controller.CreateVolume(request, timeout=0.0005)
    except grpc.RpcError as failure:
        assert failure.code() == grpc.StatusCode.DEADLINE_EXCEEDED, failure
    deadline = time.monotonic() + 10
    while True:
        volume, code = outcome(lambda: co.server.controller.CreateVolume(request, timeout=CALL_TIMEOUT).volume)
        if code != grpc.StatusCode.ABORTED or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert code == grpc.StatusCode.OK, f"expected the retry to succeed, got {code}"
    again = co.server.controller.CreateVolume(request, timeout=CALL_TIMEOUT).volume
    assert volume.volume_id == again.volume_id


def test_delete_racing_stage_never_deletes_a_staged_volume(co):
    for _ in range(10):
        volume = co.create()
        staging = co.staging_path(volume.volume_id)
        with ThreadPoolExecutor(2) as pool:
            stage = pool.submit(outcome, lambda: co.stage(volume.volume_id, staging))
            delete = pool.submit(outcome, lambda: co.delete(volume.volume_id))
            stage_code, delete_code = stage.result()[1], delete.result()[1]
        assert not (stage_code == grpc.StatusCode.OK and delete_code == grpc.StatusCode.OK), (
            "a volume was staged and deleted at the same time")
        listed = co.server.controller.ListVolumes(co.pb2.ListVolumesRequest(), timeout=CALL_TIMEOUT)
        present = any(e.volume.volume_id == volume.volume_id for e in listed.entries)
        assert present == (delete_code != grpc.StatusCode.OK), (
            f"stage {stage_code.name}, delete {delete_code.name}, but the volume is "
            f"{'present' if present else 'gone'}")
        if stage_code == grpc.StatusCode.OK:
            co.unstage(volume.volume_id, staging)
