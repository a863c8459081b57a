"""The pieces of a cluster the rendered-overlay tests (test_overlays_in_podman*.py) stand in for:
lab hosts (a root directory each, rshared as a host's / is, with kubelet's directories), pods
(each rendered pod's rosetctl container run by podman as the YAML says), stubs on a pod's socket,
and kubelet's and csi-provisioner's ways of naming paths and parameters."""
from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

import grpc

import k8s_manifests as k8s
from csi_server import CALL_TIMEOUT
from podman_lab import podman_command, run, run_options
from rosetctl_mounts import is_mount_point

PROPAGATION = {None: "rprivate", "None": "rprivate", "HostToContainer": "rslave", "Bidirectional": "rshared"}

# kubelet's (and the pod's default) grace period between SIGTERM and SIGKILL, in seconds.
GRACE = 30


class LabHost:
    """A host of the lab: a directory standing for its root file system, a bind mount of itself
    made rshared (as systemd makes a host's /), so Bidirectional mounts reach it."""

    def __init__(self, root: Path, name: str):
        self.root, self.name = root, name
        root.mkdir(parents=True)
        for argv in (["mount", "--bind", root, root], ["mount", "--make-rshared", root]):
            done = run(argv)
            assert done.returncode == 0, done.stderr
        # What kubelet makes on every node.
        for path in ("/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/pods"):
            self.path(path).mkdir(parents=True, exist_ok=True)

    def path(self, host_path: str) -> Path:
        return self.root / host_path.lstrip("/")

    def close(self):
        run(["umount", "--recursive", "--lazy", self.root])


@contextlib.contextmanager
def lab_hosts(names=("node-a", "node-b")) -> Iterator[tuple[dict[str, LabHost], list, Path]]:
    """({name: LabHost}, pods, root): lab hosts under a short directory of /tmp (a unix socket's
    path must fit in 108 bytes), and a list the test adds each Pod it starts to. At the end every
    pod of the list is closed, then every host's mounts go, and the directory is removed unless a
    mount is still in it (removing would delete through it: a person looks)."""
    root = Path(tempfile.mkdtemp(prefix="k8s-", dir="/tmp"))
    hosts, pods = {}, []
    try:
        for name in names:
            hosts[name] = LabHost(root / name, name)
        yield hosts, pods, root
    finally:
        for pod in pods:
            pod.close()
        for host in hosts.values():
            host.close()
        if not any(is_mount_point(str(h.root)) for h in hosts.values()):
            shutil.rmtree(root, ignore_errors=True)


class Pod:
    """One pod's rosetctl container, run by podman as the rendered pod says."""

    def __init__(self, obj: dict, host: LabHost, image: str, scratch: Path, network: str = "none",
                 test_volumes: tuple[Path, ...] = (), replace_args: dict[str, str] | None = None,
                 volume_files: dict[str, Path] | None = None, kubelet_options: tuple[str, ...] = ()):
        """`network`: podman's --network (the local overlay's pods talk only through unix sockets:
        none; others join a lab host's network namespace, ns:PATH; a hostNetwork pod: host).
        `test_volumes`: host paths bind-mounted at the same path, for what a test puts in place of
        the world outside the cluster; `replace_args`: rendered arguments a test must replace
        ({rendered: used}); each test lists both in its docstring. `volume_files`: the directory
        kubelet would fill for each Secret, ConfigMap or projected volume, by volume name;
        `kubelet_options`: podman options for what kubelet adds to every pod beyond the YAML
        (the ServiceAccount's kube-api-access volume, the API server's address)."""
        self.obj, self.host, self.image = obj, host, image
        self.network, self.test_volumes = network, test_volumes
        self.replace_args = dict(replace_args or {})
        self.volume_files = dict(volume_files or {})
        self.kubelet_options = tuple(kubelet_options)
        self.name = f"rosetctl-k8s-{uuid.uuid4().hex[:8]}-{obj['metadata']['name']}-{host.name}"
        self.plugin = k8s.container(obj, "rosetctl")
        self.empty_dirs = scratch / self.name.split("-")[2]  # short: unix socket paths fit in 108 bytes
        self.empty_dirs.mkdir(parents=True)
        self.start()

    def volume_source(self, volume: dict) -> Path:
        if volume["name"] in self.volume_files:
            return self.volume_files[volume["name"]]
        if "emptyDir" in volume:
            path = self.empty_dirs / volume["name"]
            path.mkdir(exist_ok=True)
            return path
        host = volume["hostPath"]
        if host["path"] == "/dev":
            return Path("/dev")
        path = self.host.path(host["path"])
        if host.get("type") == "DirectoryOrCreate":
            path.mkdir(parents=True, exist_ok=True)
        assert path.is_dir(), f"{self.obj['metadata']['name']}: hostPath {host} is missing on {self.host.name}"
        return path

    def argv(self) -> list[str]:
        volumes = {v["name"]: v for v in k8s.pod_spec(self.obj)["volumes"]}
        options = []
        for mount in self.plugin.get("volumeMounts", []):
            source = self.volume_source(volumes[mount["name"]])
            flags = [PROPAGATION[mount.get("mountPropagation")]] + (["ro"] if mount.get("readOnly") else [])
            options.append(f"--volume={source}:{mount['mountPath']}:{','.join(flags)}")
        for variable in self.plugin.get("env", []):
            field = variable.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            assert field in (None, "spec.nodeName"), f"an env field this test cannot give: {variable}"
            options.append(f"--env={variable['name']}={self.host.name if field else variable['value']}")
        security = self.plugin.get("securityContext") or {}
        if security.get("privileged"):
            options.append("--privileged")
        if security.get("readOnlyRootFilesystem"):
            options.append("--read-only")
        if k8s.pod_spec(self.obj).get("hostNetwork"):
            assert self.network == "host", f"{self.obj['metadata']['name']} is in its host's network"
        options += [f"--volume={path}:{path}:rprivate" for path in self.test_volumes]
        options += self.kubelet_options
        args = [self.replace_args.get(arg, arg) for arg in self.plugin["args"]]
        missing = set(self.replace_args) - set(self.plugin["args"])
        assert not missing, f"{self.obj['metadata']['name']}: no rendered argument {sorted(missing)} to replace"
        network = [o for o in run_options() if not o.startswith("--network=")] + [f"--network={self.network}"]
        return [*podman_command(), "run", "-d", "--name", self.name, *network, *options, self.image, *args]

    def start(self):
        done = run(self.argv())
        assert done.returncode == 0, f"expected {self.name} to start: {done.stderr}"

    def restart(self):
        """What kubelet does to a container it restarts: SIGTERM, SIGKILL after the grace period,
        then the same container again."""
        done = run([*podman_command(), "rm", "--force", "--time", str(GRACE), self.name], timeout=GRACE + 30)
        assert done.returncode == 0, done.stderr
        self.start()

    def logs(self) -> str:
        done = run([*podman_command(), "logs", self.name])
        return done.stdout + done.stderr

    def socket(self) -> Path:
        """The plugin's --endpoint as this host sees it."""
        endpoint = k8s.flag_value(self.plugin["args"], "--endpoint").removeprefix("unix://")
        volume, mount = k8s.mount_path_of(self.obj, "rosetctl", endpoint)
        inside = endpoint[len(mount["mountPath"].rstrip("/")) + 1:]
        return self.volume_source(volume) / inside

    def channel(self) -> grpc.Channel:
        deadline = time.monotonic() + 30
        while not self.socket().is_socket() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.socket().is_socket(), f"expected {self.name} to listen on {self.socket()}: {self.logs()}"
        channel = grpc.insecure_channel(f"unix://{self.socket()}")
        grpc.channel_ready_future(channel).result(timeout=30)
        return channel

    def close(self):
        run([*podman_command(), "rm", "--force", "--time", "5", self.name], timeout=60)


class Csi:
    """Stubs on a pod's socket, opened again after each restart."""

    def __init__(self, csi, pod: Pod):
        self.csi, self.pod = csi, pod
        self.open()

    def open(self):
        channel = self.pod.channel()
        self.identity = self.csi.grpc.IdentityStub(channel)
        self.controller = self.csi.grpc.ControllerStub(channel)
        self.node = self.csi.grpc.NodeStub(channel)

    def restart(self):
        self.pod.restart()
        self.open()
        assert self.identity.Probe(self.csi.pb2.ProbeRequest(), timeout=CALL_TIMEOUT).ready.value


def snapshot_when_ready(controller: Csi, pb2, source_volume_id: str, secrets: dict | None = None):
    """What csi-snapshotter does for a VolumeSnapshot: CreateSnapshot, then ListSnapshots by its id
    until it is ready to use (within 60 s); the ready snapshot."""
    secrets = secrets or {}
    snapshot = controller.controller.CreateSnapshot(pb2.CreateSnapshotRequest(
        source_volume_id=source_volume_id, name=f"snapshot-{uuid.uuid4()}", secrets=secrets),
        timeout=CALL_TIMEOUT).snapshot
    deadline = time.monotonic() + 60
    while not snapshot.ready_to_use and time.monotonic() < deadline:
        time.sleep(0.5)
        snapshot = controller.controller.ListSnapshots(pb2.ListSnapshotsRequest(
            snapshot_id=snapshot.snapshot_id, secrets=secrets), timeout=CALL_TIMEOUT).entries[0].snapshot
    assert snapshot.ready_to_use, snapshot
    return snapshot


def kubelet_paths(host: LabHost, driver: str, volume_id: str, pv: str) -> tuple[str, str]:
    """Where kubelet 1.32 stages (per volume handle) and publishes (per pod and PV), parents made
    as kubelet makes them."""
    staging = f"/var/lib/kubelet/plugins/kubernetes.io/csi/{driver}/{hashlib.sha256(volume_id.encode()).hexdigest()}/globalmount"
    target = f"/var/lib/kubelet/pods/{uuid.uuid4()}/volumes/kubernetes.io~csi/{pv}/mount"
    host.path(staging).parent.mkdir(parents=True)
    host.path(target).parent.mkdir(parents=True)
    return staging, target


def provisioner_parameters(storage_class: dict, pvc: str, pv: str) -> dict:
    """What csi-provisioner sends: the class's parameters without the keys it consumes (fstype,
    secret references), and with --extra-create-metadata's."""
    consumed = ("csi.storage.k8s.io/fstype",)
    params = {k: v for k, v in storage_class.get("parameters", {}).items()
              if k not in consumed and not k.endswith(("-secret-name", "-secret-namespace"))}
    params.update({"csi.storage.k8s.io/pvc/name": pvc, "csi.storage.k8s.io/pvc/namespace": "default",
                   "csi.storage.k8s.io/pv/name": pv})
    return params
