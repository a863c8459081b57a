"""ControllerModifyVolume and CreateVolume's mutable_parameters: the local provider's one mutable
parameter, directIO, switches the loop device of an image volume live (checked in
/sys/block/loopN/loop/dio) and is recorded, so it survives a restart of `serve` and applies at the
next stage; everything else is INVALID_ARGUMENT naming the key."""
from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from csi_calls import Driver, capability, unique
from csi_server import CALL_TIMEOUT, expect_code
from rosetctl_loops import loop_devices_of

IA = grpc.StatusCode.INVALID_ARGUMENT
MiB = 2**20


@pytest.fixture
def co(server, workdir) -> Driver:
    return Driver(server, workdir)


def create_image(co, block=False, name=None, **extra):
    pb2 = co.pb2
    request = pb2.CreateVolumeRequest(
        name=name or unique("img"), volume_capabilities=[capability(pb2, block=block)],
        capacity_range=pb2.CapacityRange(required_bytes=16 * MiB),
        parameters={} if block else {"type": "image"}, **extra)
    return co.server.controller.CreateVolume(request, timeout=CALL_TIMEOUT).volume


def modify(co, volume_id, **parameters):
    request = co.pb2.ControllerModifyVolumeRequest(volume_id=volume_id, mutable_parameters=parameters)
    return co.server.controller.ControllerModifyVolume(request, timeout=CALL_TIMEOUT)


def stage(co, volume_id, block=False) -> str:
    staging = co.staging_path(volume_id)
    request = co.pb2.NodeStageVolumeRequest(volume_id=volume_id, staging_target_path=staging,
                                            volume_capability=capability(co.pb2, block=block))
    co.server.node.NodeStageVolume(request, timeout=CALL_TIMEOUT)
    return staging


def dio_of(state_dir: Path, volume_id: str) -> list[str]:
    """The direct I/O flag of every loop device on the volume's image, as sysfs shows it."""
    image = state_dir / "images" / f"{volume_id}.img"
    return [Path(f"/sys/block/{Path(loop.device).name}/loop/dio").read_text().strip()
            for loop in loop_devices_of(image)]


def shown_parameters(cli, volume_id) -> dict:
    return cli.ok_json("volume", "show", volume_id)["mutable_parameters"]


def test_modify_volume_is_advertised(co):
    response = co.server.controller.ControllerGetCapabilities(co.pb2.ControllerGetCapabilitiesRequest(),
                                                              timeout=CALL_TIMEOUT)
    assert co.pb2.ControllerServiceCapability.RPC.MODIFY_VOLUME in {c.rpc.type for c in response.capabilities}


def test_direct_io_switches_live_and_survives_a_restart(start_serve, workdir, state_dir, cli):
    co = Driver(start_serve(), workdir)
    volume = create_image(co)
    vid = volume.volume_id
    staging = stage(co, vid)
    assert dio_of(state_dir, vid) == ["1"], "expected direct I/O by default where the filesystem allows it"
    for _ in range(2):  # idempotent: the second call finds it done
        modify(co, vid, directIO="false")
        assert dio_of(state_dir, vid) == ["0"], "expected the staged loop device to go buffered at once"
    (Path(staging) / "after-modify").write_bytes(b"still mounted and writable")
    assert shown_parameters(cli, vid) == {"directIO": "false"}, "expected the change recorded and shown"

    co.server.stop()
    co = Driver(start_serve(), workdir)
    assert shown_parameters(cli, vid) == {"directIO": "false"}, "expected the change to survive a restart"
    co.unstage(vid, staging)
    assert dio_of(state_dir, vid) == [], "expected the loop device gone after unstage"
    staging = stage(co, vid)
    assert dio_of(state_dir, vid) == ["0"], "expected the next stage to attach with the recorded setting"
    assert (Path(staging) / "after-modify").read_bytes() == b"still mounted and writable"
    modify(co, vid, directIO="true")
    assert dio_of(state_dir, vid) == ["1"], "expected direct I/O switched back on, live"
    assert shown_parameters(cli, vid) == {"directIO": "true"}
    listed = co.server.controller.ControllerGetVolume(co.pb2.ControllerGetVolumeRequest(volume_id=vid),
                                                      timeout=CALL_TIMEOUT).volume
    assert dict(listed.volume_context) == dict(volume.volume_context), "expected volume_context never to change"
    co.unstage(vid, staging)
    co.delete(vid)


def test_create_with_mutable_parameters_applies_them_at_the_first_stage(co, state_dir, cli):
    volume = create_image(co, block=True, mutable_parameters={"directIO": "false"})
    assert shown_parameters(cli, volume.volume_id) == {"directIO": "false"}
    staging = stage(co, volume.volume_id, block=True)
    assert dio_of(state_dir, volume.volume_id) == ["0"], "expected a buffered loop device for directIO=false"
    co.unstage(volume.volume_id, staging)


def test_create_is_idempotent_with_mutable_parameters_and_refuses_other_values(co):
    name = unique("mut")
    first = create_image(co, name=name, mutable_parameters={"directIO": "false"})
    again = create_image(co, name=name, mutable_parameters={"directIO": "false"})
    assert again.volume_id == first.volume_id
    details = expect_code(lambda: create_image(co, name=name, mutable_parameters={"directIO": "true"}),
                          grpc.StatusCode.ALREADY_EXISTS, "CreateVolume of the name with another directIO")
    assert "directIO" in details, f"expected the message to name the parameter: {details!r}"
    expect_code(lambda: co.create(mutable_parameters={"directIO": "true"}), IA,
                "directIO on a directory volume at creation")
    expect_code(lambda: create_image(co, mutable_parameters={"type": "dir"}), IA,
                "a creation-time parameter among the mutable ones")


def test_modify_is_idempotent_without_a_node(co, cli):
    volume = create_image(co)
    for _ in range(3):
        modify(co, volume.volume_id, directIO="false")
    assert shown_parameters(cli, volume.volume_id) == {"directIO": "false"}


@pytest.mark.parametrize("parameters, named, says", [
    ({"type": "dir"}, "type", "fixed at creation"),
    ({"fsType": "xfs"}, "fsType", "fixed at creation"),
    ({"size": "1Gi"}, "size", "ControllerExpandVolume"),
    ({"iops": "100"}, "iops", "unknown"),
    ({"directIO": "maybe"}, "directIO", "true or false"),
    ({"directIO": "true", "colour": "blue"}, "colour", "unknown"),
])
def test_parameters_that_cannot_change_are_invalid_argument_naming_the_key(co, cli, parameters, named, says):
    volume = create_image(co)
    details = expect_code(lambda: modify(co, volume.volume_id, **parameters), IA, f"ModifyVolume {parameters}")
    assert named in details and says in details, f"expected {named!r} and {says!r} in {details!r}"
    assert shown_parameters(cli, volume.volume_id) == {}, "expected a refused modify to change nothing"


def test_direct_io_on_a_directory_volume_is_invalid_argument(co):
    volume = co.create()
    details = expect_code(lambda: modify(co, volume.volume_id, directIO="true"), IA, "directIO on a dir volume")
    assert "directory volume" in details, details


def test_modify_of_an_unknown_volume_is_not_found(co):
    expect_code(lambda: modify(co, "local-ffffffffffffffff", directIO="false"), grpc.StatusCode.NOT_FOUND,
                "ModifyVolume of a volume that does not exist")


def test_modify_without_volume_id_is_invalid_argument_and_without_parameters_a_no_op(co):
    details = expect_code(lambda: modify(co, "", directIO="false"), IA, "ModifyVolume without volume_id")
    assert "volume_id" in details, details
    # The spec: a plugin changes only what is named. Naming nothing changes nothing (the common
    # conformance suite sends exactly this); for a volume that does not exist it is NOT_FOUND.
    volume = create_image(co)
    modify(co, volume.volume_id)
    expect_code(lambda: modify(co, "local-ffffffffffffffff"), grpc.StatusCode.NOT_FOUND,
                "ModifyVolume of an unknown volume without mutable_parameters")


def test_validate_volume_capabilities_checks_and_confirms_mutable_parameters(co):
    pb2 = co.pb2
    volume = create_image(co)
    request = pb2.ValidateVolumeCapabilitiesRequest(
        volume_id=volume.volume_id, volume_capabilities=[capability(pb2)], mutable_parameters={"directIO": "false"})
    response = co.server.controller.ValidateVolumeCapabilities(request, timeout=CALL_TIMEOUT)
    assert dict(response.confirmed.mutable_parameters) == {"directIO": "false"}, response
    request.mutable_parameters["bogus"] = "1"
    response = co.server.controller.ValidateVolumeCapabilities(request, timeout=CALL_TIMEOUT)
    assert not response.HasField("confirmed") and "bogus" in response.message, response


def test_validate_volume_capabilities_judges_a_clone_by_what_it_is(co):
    """A clone names no type (its source decides): directIO is confirmed for a clone of an image
    volume, refused for a clone of a directory volume."""
    pb2 = co.pb2
    for kind, expected in (("image", True), ("dir", False)):
        source = co.server.controller.CreateVolume(pb2.CreateVolumeRequest(
            name=unique(kind), volume_capabilities=[capability(pb2)],
            capacity_range=pb2.CapacityRange(required_bytes=16 * MiB), parameters={"type": kind}),
            timeout=CALL_TIMEOUT).volume
        clone = co.server.controller.CreateVolume(pb2.CreateVolumeRequest(
            name=unique("clone"), volume_capabilities=[capability(pb2)],
            volume_content_source=pb2.VolumeContentSource(
                volume=pb2.VolumeContentSource.VolumeSource(volume_id=source.volume_id))),
            timeout=CALL_TIMEOUT).volume
        request = pb2.ValidateVolumeCapabilitiesRequest(
            volume_id=clone.volume_id, volume_capabilities=[capability(pb2)],
            mutable_parameters={"directIO": "false"})
        response = co.server.controller.ValidateVolumeCapabilities(request, timeout=CALL_TIMEOUT)
        assert response.HasField("confirmed") == expected, (kind, response)
        if not expected:
            assert "directIO" in response.message, response
