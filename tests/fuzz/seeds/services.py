#!/usr/bin/python3
"""Writes the seed corpus of fuzz_services (tests/fuzz/corpus/services/seed-*).

Each seed is a few calls as services_fuzz.cc reads them: a kind byte (the method's index in
KINDS, which lists services_fuzz.cc's methods() table in its order), a 2-byte little-endian
length, and the request encoded by `protoc --encode` from the text form below. "@v0" names the
first volume the seed created, "@s0" its first snapshot, "@n" the plugin's node.

    /usr/bin/python3 tests/fuzz/seeds/services.py
"""
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
OUT = os.path.join(HERE, "..", "corpus", "services")

KINDS = [
    ("csi.v1.GetPluginInfoRequest", "GetPluginInfo"),
    ("csi.v1.GetPluginCapabilitiesRequest", "GetPluginCapabilities"),
    ("csi.v1.ProbeRequest", "Probe"),
    ("csi.v1.CreateVolumeRequest", "CreateVolume"),
    ("csi.v1.DeleteVolumeRequest", "DeleteVolume"),
    ("csi.v1.ControllerPublishVolumeRequest", "ControllerPublishVolume"),
    ("csi.v1.ControllerUnpublishVolumeRequest", "ControllerUnpublishVolume"),
    ("csi.v1.ValidateVolumeCapabilitiesRequest", "ValidateVolumeCapabilities"),
    ("csi.v1.ListVolumesRequest", "ListVolumes"),
    ("csi.v1.GetCapacityRequest", "GetCapacity"),
    ("csi.v1.ControllerGetCapabilitiesRequest", "ControllerGetCapabilities"),
    ("csi.v1.ControllerGetVolumeRequest", "ControllerGetVolume"),
    ("csi.v1.ControllerExpandVolumeRequest", "ControllerExpandVolume"),
    ("csi.v1.CreateSnapshotRequest", "CreateSnapshot"),
    ("csi.v1.DeleteSnapshotRequest", "DeleteSnapshot"),
    ("csi.v1.ListSnapshotsRequest", "ListSnapshots"),
    ("csi.v1.ControllerModifyVolumeRequest", "ControllerModifyVolume"),
    ("csi.v1.NodeGetInfoRequest", "NodeGetInfo"),
    ("csi.v1.NodeGetCapabilitiesRequest", "NodeGetCapabilities"),
    ("csi.v1.NodeGetVolumeStatsRequest", "NodeGetVolumeStats"),
    ("csi.v1.NodeExpandVolumeRequest", "NodeExpandVolume"),
    ("rosetctl.v1.RegisterNodeRequest", "RegisterNode"),
    ("rosetctl.v1.GetNodeRequest", "GetNode"),
    ("rosetctl.v1.TouchNodeRequest", "TouchNode"),
    ("rosetctl.v1.ListNodesRequest", "ListNodes"),
    ("rosetctl.v1.RemoveNodeRequest", "RemoveNode"),
    ("rosetctl.v1.FindVolumeRequest", "FindVolume"),
    ("rosetctl.v1.GetVolumeDetailsRequest", "GetVolumeDetails"),
    ("rosetctl.v1.FindSnapshotRequest", "FindSnapshot"),
    ("rosetctl.v1.ListSnapshotDetailsRequest", "ListSnapshotDetails"),
    ("rosetctl.v1.DiffSnapshotsRequest", "DiffSnapshots"),
    ("rosetctl.v1.VerifySnapshotsRequest", "VerifySnapshots"),
    ("rosetctl.v1.CollectGarbageRequest", "CollectGarbage"),
    ("rosetctl.v1.GetNodeVolumesRequest", "GetNodeVolumes"),
    ("rosetctl.v1.ResolveTargetRequest", "ResolveTarget"),
    ("rosetctl.v1.LookupSnapshotRequest", "LookupSnapshot"),
    ("rosetctl.v1.FetchObjectsRequest", "FetchObjects"),
]
INDEX = {method: i for i, (_, method) in enumerate(KINDS)}

MOUNT = 'volume_capabilities { mount { } access_mode { mode: SINGLE_NODE_WRITER } }'
BLOCK = 'volume_capabilities { block { } access_mode { mode: SINGLE_NODE_WRITER } }'

SEEDS = [
    [("Probe", ""), ("GetPluginInfo", ""), ("GetPluginCapabilities", ""), ("NodeGetInfo", ""),
     ("NodeGetCapabilities", ""), ("ControllerGetCapabilities", "")],
    [("CreateVolume", f'name: "dir-a" {MOUNT} parameters {{ key: "type" value: "dir" }}'),
     ("ControllerGetVolume", 'volume_id: "@v0"'),
     ("ValidateVolumeCapabilities", f'volume_id: "@v0" {MOUNT}'),
     ("ListVolumes", 'max_entries: 1'),
     ("ControllerExpandVolume", f'volume_id: "@v0" capacity_range {{ required_bytes: 1048576 }}'),
     ("DeleteVolume", 'volume_id: "@v0"')],
    [("CreateVolume", f'name: "img-a" {MOUNT} capacity_range {{ required_bytes: 67108864 }} '
                      'parameters { key: "type" value: "image" }'),
     ("ControllerModifyVolume", 'volume_id: "@v0" mutable_parameters { key: "directIO" '
                                'value: "true" }'),
     ("ControllerPublishVolume", f'volume_id: "@v0" node_id: "@n" '
                                 f'volume_capability {{ mount {{ }} access_mode {{ mode: '
                                 f'SINGLE_NODE_WRITER }} }}'),
     ("ControllerUnpublishVolume", 'volume_id: "@v0" node_id: "@n"'),
     ("NodeExpandVolume", 'volume_id: "@v0" volume_path: "/nonexistent"')],
    [("CreateVolume", f'name: "blk-a" {BLOCK} capacity_range {{ required_bytes: 1048576 }}'),
     ("GetCapacity", f'{BLOCK}'),
     ("NodeGetVolumeStats", 'volume_id: "@v0" volume_path: "/dev/rosetctl/blk-a"')],
    [("CreateVolume", f'name: "dir-b" {MOUNT}'),
     ("CreateSnapshot", 'source_volume_id: "@v0" name: "snap-b"'),
     ("ListSnapshots", 'source_volume_id: "@v0"'),
     ("CreateVolume", f'name: "dir-c" {MOUNT} volume_content_source {{ snapshot {{ '
                      f'snapshot_id: "@s0" }} }}'),
     ("DiffSnapshots", 'from: "@s0" to: "@s0"'),
     ("VerifySnapshots", 'references: "@s0"')],
    [("CreateVolume", f'name: "dir-d" {MOUNT}'),
     ("CreateVolume", f'name: "dir-e" {MOUNT} volume_content_source {{ volume {{ '
                      f'volume_id: "@v0" }} }}'),
     ("FindVolume", 'name_or_id: "dir-d"'),
     ("GetVolumeDetails", 'volume_ids: "@v0"'),
     ("GetNodeVolumes", 'node_id: "@n"'),
     ("ResolveTarget", 'node_id: "@n" volume_id: "@v0" volume_name: "dir-d" check: true')],
    [("CreateVolume", f'name: "dir-f" {MOUNT}'),
     ("CreateSnapshot", 'source_volume_id: "@v0" name: "snap-f"'),
     ("FindSnapshot", 'reference: "snap-f"'),
     ("ListSnapshotDetails", 'snapshot_ids: "@s0"'),
     ("LookupSnapshot", 'reference: "snap-f"'),
     ("CollectGarbage", '')],
    [("RegisterNode", 'node_id: "node-b" address: "10.0.0.2:7443" version: "0.1.0" '
                      'topology { key: "topology.rosetctl.io/node" value: "node-b" }'),
     ("GetNode", 'node_id: "node-b"'), ("TouchNode", 'node_id: "node-b"'),
     ("ListNodes", ''), ("RemoveNode", 'node_id: "node-b"')],
    [("FetchObjects", 'objects { kind: OBJECT_COMMIT id: "' + "cd" * 32 + '" }')],
]


def encode(message, text):
    proto = "proto/csi.proto" if message.startswith("csi.") else "proto/rosetctl.proto"
    return subprocess.run(
        ["protoc", "--proto_path=proto", "--proto_path=/usr/include", f"--encode={message}",
         os.path.basename(proto)],
        input=text.encode(), stdout=subprocess.PIPE, check=True, cwd=ROOT).stdout


os.makedirs(OUT, exist_ok=True)
for n, calls in enumerate(SEEDS):
    data = b""
    for method, text in calls:
        kind = INDEX[method]
        body = encode(KINDS[kind][0], text)
        data += bytes([kind]) + struct.pack("<H", len(body)) + body
    with open(os.path.join(OUT, f"seed-{n}"), "wb") as f:
        f.write(data)
