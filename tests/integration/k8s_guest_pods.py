"""A node of the rendered-overlay tests that is a QEMU guest (guest_lab.py): podman runs the node
plugin pod there, as kubelet would on a node with its own kernel (the iscsi overlay's node
plugin logs in with the kernel's initiator, which only a guest has here).

What the guest needs for podman, measured under TCG (test_overlays_in_podman_iscsi.py):
- cgroup2 mounted at /sys/fs/cgroup (runc with podman's cgroupfs manager);
- an image store it may write, in memory (/run is a tmpfs), with the host's own store as a
  read-only additional image store: the image this run built is run by its name, without a
  `podman save`/`podman load` of its ~460 MB (the guest sees the host's / over 9p);
- kubelet's directories on a tmpfs made rshared (as systemd makes a node's /), so that the
  plugin's Bidirectional mounts reach the node;
- a name for the controller's Service in /etc/hosts, where a cluster's DNS would answer, and a
  resolver that fails at once: the host's nameserver is out of the guest's reach, and gRPC's
  c-ares resolver asks it for the name's AAAA record even when /etc/hosts has its A record
  (the node plugin's enrollment then spent its whole 15 s deadline waiting: Deadline Exceeded).
"""
from __future__ import annotations

import shlex
import uuid
from pathlib import Path

import grpc

import k8s_manifests as k8s
from guest_lab import Guest
from k8s_pods import GRACE, Pod
from podman_lab import podman_command

STORAGE_CONF = "/run/k8s-storage.conf"
FORWARDER = Path(__file__).resolve().parent / "bin" / "stream-forward"


def prepare_node(guest: Guest, graph_root: str, hosts: dict[str, str], csi_socket: str, csi_port: int) -> None:
    """Makes the guest a node podman can run pods on (see the module's docstring), and starts a
    forwarder from `csi_port` (which qemu forwards from the host's side) to the plugin's
    socket `csi_socket`, through which the test's gRPC client makes the CSI calls."""
    host_lines = "".join(f"{address} {name}\n" for name, address in hosts.items())
    script = f"""set -e
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /run/k8s-podman/root /run/k8s-podman/run
cat > {STORAGE_CONF} <<'EOF'
[storage]
driver = "overlay"
graphroot = "/run/k8s-podman/root"
runroot = "/run/k8s-podman/run"
[storage.options]
additionalimagestores = ["{graph_root}"]
EOF
mkdir -p /var/lib/kubelet
mount -t tmpfs -o mode=0750 tmpfs /var/lib/kubelet
mount --make-rshared /var/lib/kubelet
mount --make-rshared /var/lib/rosetctl
mkdir -p /var/lib/kubelet/plugins_registry /var/lib/kubelet/pods
printf '%s' {shlex.quote(host_lines)} >> /etc/hosts
echo 'nameserver 127.0.0.1' > /etc/resolv.conf
setsid /usr/bin/python3 {FORWARDER} tcp:0.0.0.0:{csi_port} unix:{csi_socket} \
  > {guest.dir}/forwarder.log 2>&1 < /dev/null &
"""
    done = guest.run(script, timeout=120)
    assert done.rc == 0, f"expected the guest ready for pods: {done.stdout}{done.stderr}"


def guest_podman() -> str:
    """podman as the guest runs it (podman_lab.podman_command's flags), with the guest's store."""
    return f"CONTAINERS_STORAGE_CONF={STORAGE_CONF} " + shlex.join(podman_command())


class GuestHost:
    """The guest as a LabHost: its / is its own."""

    def __init__(self, guest: Guest):
        self.guest, self.name = guest, guest.name

    def path(self, host_path: str) -> Path:
        return Path(host_path)


class GuestPod(Pod):
    """One pod's rosetctl container, run by podman inside a guest as the rendered pod says
    (Pod's argv: args, env, securityContext, volumes with their propagation). hostPath volumes
    are the guest's own paths, emptyDirs are in the guest's memory, and `volume_files` (for
    Secret, ConfigMap and projected volumes) lie in the guest's shared directory. Its log is a
    file there too (podman's k8s-file driver, as kubelet keeps container logs in files);
    `socket_on_host` is where the test reaches its CSI socket."""

    def __init__(self, obj: dict, guest: Guest, image: str, volume_files: dict[str, Path], socket_on_host: Path):
        self.obj, self.guest, self.image = obj, guest, image
        self.host = GuestHost(guest)
        self.network = "host" if k8s.pod_spec(obj).get("hostNetwork") else "none"
        self.test_volumes, self.replace_args = (), {}
        self.volume_files = dict(volume_files)
        self.name = f"rosetctl-k8s-{uuid.uuid4().hex[:8]}-{obj['metadata']['name']}-{guest.name}"
        self.plugin = k8s.container(obj, "rosetctl")
        self.empty_dirs = Path("/run/k8s-pods") / self.name
        self.starts = 0
        self.socket_on_host = socket_on_host
        self.start()

    def volume_source(self, volume: dict) -> Path:
        if volume["name"] in self.volume_files:
            return self.volume_files[volume["name"]]
        if "emptyDir" in volume:
            return self.empty_dirs / volume["name"]
        return Path(volume["hostPath"]["path"])

    def _prepare(self) -> str:
        """The guest's shell lines making what kubelet makes before the container starts."""
        lines = []
        for volume in k8s.pod_spec(self.obj)["volumes"]:
            path = shlex.quote(str(self.volume_source(volume)))
            if "emptyDir" in volume:
                medium = volume["emptyDir"].get("medium")
                lines.append(f"mkdir -p {path}")
                if medium == "Memory":
                    lines.append(f"mountpoint -q {path} || mount -t tmpfs -o mode=0700 tmpfs {path}")
            elif "hostPath" in volume:
                if volume["hostPath"].get("type") == "DirectoryOrCreate":
                    lines.append(f"mkdir -p {path}")
                lines.append(f"test -d {path} || {{ echo 'hostPath {path} is missing'; exit 1; }}")
        return "\n".join(lines)

    def start(self):
        self.starts += 1  # a log file per start, as kubelet keeps one per container restart
        log = self.guest.dir / f"{self.name}-{self.starts}.log"
        self.kubelet_options = ("--log-driver=k8s-file", f"--log-opt=path={log}")
        done = self.guest.run(f"set -e\n{self._prepare()}\n{guest_podman()} " + shlex.join(self.argv()[len(podman_command()):]),
                              timeout=240)
        assert done.rc == 0, f"expected {self.name} to start in {self.guest.name}: {done.stdout}{done.stderr}"

    def restart(self):
        done = self.guest.run(f"{guest_podman()} rm --force --time {GRACE} {self.name}", timeout=GRACE + 120)
        assert done.rc == 0, done.stderr
        self.start()

    def logs(self) -> str:
        """The container's output (k8s-file lines: time, stream, tag, text), every start's."""
        lines = []
        for start in range(1, self.starts + 1):
            log = self.guest.dir / f"{self.name}-{start}.log"
            if log.exists():
                lines += [line.split(" ", 3)[-1] for line in log.read_text(errors="replace").splitlines()]
        return "\n".join(lines)

    def latest_log(self) -> str:
        """The output of the running container (its last start) alone."""
        log = self.guest.dir / f"{self.name}-{self.starts}.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        return "\n".join(line.split(" ", 3)[-1] for line in lines)

    def channel(self) -> grpc.Channel:
        channel = grpc.insecure_channel(f"unix://{self.socket_on_host}")
        try:
            grpc.channel_ready_future(channel).result(timeout=180)
        except grpc.FutureTimeoutError:
            raise AssertionError(f"expected {self.name} to answer on its CSI socket: {self.logs()}") from None
        return channel

    def close(self):
        self.guest.run(f"{guest_podman()} rm --force --time 5 {self.name}", timeout=120)
