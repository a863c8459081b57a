"""Request builders for the conformance suite: the shapes a CO sends, with nothing optional set."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from csi_server import CALL_TIMEOUT


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def capability(pb2, mode=None, block=False, fs_type="", flags=()):
    access = pb2.VolumeCapability.AccessMode(mode=mode or pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    if block:
        return pb2.VolumeCapability(block=pb2.VolumeCapability.BlockVolume(), access_mode=access)
    mount = pb2.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(flags))
    return pb2.VolumeCapability(mount=mount, access_mode=access)


class Driver:
    """The CO's side of the protocol against one running `serve`."""

    def __init__(self, server, workdir: Path):
        self.server, self.pb2, self.workdir = server, server.csi.pb2, workdir
        self.node_id = server.node.NodeGetInfo(self.pb2.NodeGetInfoRequest(), timeout=CALL_TIMEOUT).node_id

    def create(self, name=None, required=0, limit=0, **extra):
        pb2 = self.pb2
        request = pb2.CreateVolumeRequest(
            name=name or unique("vol"), volume_capabilities=[capability(pb2)],
            capacity_range=pb2.CapacityRange(required_bytes=required, limit_bytes=limit), **extra)
        return self.server.controller.CreateVolume(request, timeout=CALL_TIMEOUT).volume

    def delete(self, volume_id):
        self.server.controller.DeleteVolume(self.pb2.DeleteVolumeRequest(volume_id=volume_id),
                                            timeout=CALL_TIMEOUT)

    def publish(self, volume_id, readonly=False, node_id=None):
        request = self.pb2.ControllerPublishVolumeRequest(
            volume_id=volume_id, node_id=node_id or self.node_id, volume_capability=capability(self.pb2),
            readonly=readonly)
        return self.server.controller.ControllerPublishVolume(request, timeout=CALL_TIMEOUT)

    def unpublish(self, volume_id, node_id=None):
        request = self.pb2.ControllerUnpublishVolumeRequest(volume_id=volume_id, node_id=node_id or self.node_id)
        self.server.controller.ControllerUnpublishVolume(request, timeout=CALL_TIMEOUT)

    def staging_path(self, volume_id) -> str:
        path = self.workdir / "staging" / volume_id
        path.mkdir(parents=True, exist_ok=True)  # kubelet creates staging directories
        return str(path)

    def target_path(self, name="target") -> str:
        (self.workdir / "pods").mkdir(exist_ok=True)  # kubelet creates the parent, not the target
        return str(self.workdir / "pods" / name)

    def stage(self, volume_id, staging, **extra):
        request = self.pb2.NodeStageVolumeRequest(
            volume_id=volume_id, staging_target_path=staging, volume_capability=capability(self.pb2), **extra)
        self.server.node.NodeStageVolume(request, timeout=CALL_TIMEOUT)

    def unstage(self, volume_id, staging):
        request = self.pb2.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging)
        self.server.node.NodeUnstageVolume(request, timeout=CALL_TIMEOUT)

    def node_publish(self, volume_id, staging, target, readonly=False, cap=None):
        request = self.pb2.NodePublishVolumeRequest(
            volume_id=volume_id, staging_target_path=staging, target_path=target,
            volume_capability=cap or capability(self.pb2), readonly=readonly)
        self.server.node.NodePublishVolume(request, timeout=CALL_TIMEOUT)

    def node_unpublish(self, volume_id, target):
        request = self.pb2.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target)
        self.server.node.NodeUnpublishVolume(request, timeout=CALL_TIMEOUT)

    def attach(self, name=None):
        """create + ControllerPublish + NodeStage + NodePublish; returns (volume, staging, target)."""
        volume = self.create(name)
        self.publish(volume.volume_id)
        staging = self.staging_path(volume.volume_id)
        self.stage(volume.volume_id, staging)
        target = self.target_path(unique("t"))
        self.node_publish(volume.volume_id, staging, target)
        return volume, staging, target


def exists(path: str) -> bool:
    return os.path.lexists(path)
