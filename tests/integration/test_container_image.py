"""The container image (deploy/container, scripts/build-image.sh): built with no registry from
Debian packages (debootstrap, podman import, podman build), it runs the tested rosetctl, holds
every program rosetctl execs, and `rosetctl serve` in it answers CSI calls from this host through
a socket in a bind-mounted directory.

Slow the first time in a tree (debootstrap downloads and installs ~150 packages: about 2 minutes
on an idle 2-core machine); the base's tarball is kept in build/container, keyed by the package
list, so later runs take seconds."""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import grpc
import pytest

import k8s_manifests as k8s
from csi_server import CALL_TIMEOUT
from podman_lab import built_images, podman_command, remove_podman_cgroups, rendered_names, run, run_options
from rosetctl_cli import binary_path
from rosetctl_fixtures import skip_or_fail

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])

# What rosetctl execs (src/core/run_program.h callers): each must be in the image.
EXECUTED = {
    "mkfs.ext4": "e2fsprogs", "e2fsck": "e2fsprogs", "resize2fs": "e2fsprogs",
    "mkfs.xfs": "xfsprogs", "xfs_growfs": "xfsprogs",
    "fusermount3": "fuse3", "iscsiadm": "open-iscsi", "tgtadm": "tgt",
}


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """Builds the images from the tree holding the tested binary, under this run's own names:
    {"rosetctl": name, "roset": name}; removed at the end."""
    with built_images(SOURCE) as names:
        yield names
    remove_podman_cgroups()


@pytest.fixture(scope="module")
def image(images) -> str:
    return images["rosetctl"]


def rendered(overlay: str) -> list[dict]:
    kubectl = k8s.kubectl_binary()
    if kubectl is None:
        skip_or_fail("kubectl is missing: install Debian's kubernetes-client (scripts/install-deps.sh)")
    return k8s.render(kubectl, k8s.deploy_dir(SOURCE) / "overlays" / overlay)


def test_each_overlay_runs_the_image_built_for_it(images):
    """local and iscsi run the rosetctl image; roset the one with roset-fuse: each overlay renders
    the name build-image.sh gives that image by default (this run built them under its own)."""
    names = rendered_names(SOURCE)
    for overlay in k8s.OVERLAYS:
        wanted = names["roset" if overlay == "roset" else "rosetctl"]
        assert k8s.plugin_images(rendered(overlay)) == {wanted}, overlay
    done = run([*podman_command(), "run", "--rm", *run_options(), "--entrypoint", "/bin/sh", images["roset"],
                "-c", "command -v roset-fuse"])
    assert done.stdout.strip() == "/usr/bin/roset-fuse", done.stderr


def test_this_run_builds_images_of_its_own(images):
    """Two runs at once on one machine (several worktrees) must not retag or remove each other's
    images: a run never builds under the shared names the overlays render, and its own names
    are removed at the end (built_images checks that)."""
    shared = rendered_names(SOURCE)
    for kind in ("rosetctl", "roset"):
        assert images[kind] != shared[kind], kind
        assert f"-{os.getpid()}-" in images[kind], images[kind]
    assert run([*podman_command(), "image", "exists", images["rosetctl"]]).returncode == 0


def test_image_runs_the_tested_rosetctl(image):
    host = run([binary_path(), "--version"])
    inside = run([*podman_command(), "run", "--rm", *run_options(), image, "--version"])
    assert inside.returncode == 0, f"expected rosetctl --version to run in the image: {inside.stderr}"
    assert inside.stdout == host.stdout


def test_image_holds_every_program_rosetctl_runs(image):
    script = "for p in " + " ".join(EXECUTED) + "; do command -v $p >/dev/null || echo $p; done"
    done = run([*podman_command(), "run", "--rm", *run_options(), "--entrypoint", "/bin/sh", image, "-c", script])
    assert done.returncode == 0, done.stderr
    missing = done.stdout.split()
    assert not missing, "expected the image to hold " + ", ".join(f"{p} ({EXECUTED[p]})" for p in missing)


def test_image_holds_no_iscsi_initiator_name(image):
    """open-iscsi's postinst made one while debootstrap installed it: every node running the
    image would register that one name."""
    done = run([*podman_command(), "run", "--rm", *run_options(), "--entrypoint", "/bin/ls", image, "/etc/iscsi"])
    assert done.returncode == 0, done.stderr
    assert "initiatorname.iscsi" not in done.stdout.split(), done.stdout


@pytest.fixture
def served(image, tmp_path):
    """`rosetctl serve` in a container, its socket in a host directory bind-mounted at /csi."""
    podman = podman_command()
    socket_dir = tmp_path / "csi"
    socket_dir.mkdir()
    name = f"rosetctl-test-{uuid.uuid4().hex[:12]}"
    started = run([*podman, "run", "-d", "--name", name, *run_options(), "-v", f"{socket_dir}:/csi", image,
                   "serve", "--endpoint", "unix:///csi/csi.sock", "--state-dir", "/var/lib/rosetctl", "-v"])
    try:
        assert started.returncode == 0, f"expected the container to start: {started.stderr}"
        yield socket_dir / "csi.sock", name
    finally:
        run([*podman, "rm", "--force", "--time", "5", name])


def test_serve_in_the_image_answers_csi_calls_through_the_socket(served, csi):
    socket, name = served
    deadline = time.monotonic() + 30
    while not socket.is_socket() and time.monotonic() < deadline:
        time.sleep(0.1)
    logs = lambda: run([*podman_command(), "logs", name]).stderr  # noqa: E731
    assert socket.is_socket(), f"expected serve in the container to listen on {socket}: {logs()}"
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        identity = csi.grpc.IdentityStub(channel)
        info = identity.GetPluginInfo(csi.pb2.GetPluginInfoRequest(), timeout=CALL_TIMEOUT)
        probe = identity.Probe(csi.pb2.ProbeRequest(), timeout=CALL_TIMEOUT)
    version = run([binary_path(), "--version"]).stdout.split()[1]
    assert info.name and info.vendor_version == version, info
    assert probe.ready.value, f"expected serve in the container to be ready: {logs()}"


def probe_roset_node(image: str, tmp_path: Path, csi):
    """The roset overlay's node plugin as rendered (its args, ROSETCTL_NODE_ID) in `image`:
    Probe's answer, or the gRPC error it gave."""
    node = [o for o in rendered("roset") if o["kind"] == "DaemonSet"][0]
    plugin = k8s.container(node, "rosetctl")
    endpoint = k8s.flag_value(plugin["args"], "--endpoint").removeprefix("unix://")
    socket_dir = tmp_path / uuid.uuid4().hex[:8]
    socket_dir.mkdir()
    name = f"rosetctl-test-{uuid.uuid4().hex[:12]}"
    env = [f"--env={v['name']}=node-a" for v in plugin.get("env", [])]
    podman = podman_command()
    started = run([*podman, "run", "-d", "--name", name, *run_options(), *env, "-v",
                   f"{socket_dir}:{Path(endpoint).parent}", image, *plugin["args"]])
    try:
        assert started.returncode == 0, f"expected the container to start: {started.stderr}"
        socket = socket_dir / Path(endpoint).name
        deadline = time.monotonic() + 30
        while not socket.is_socket() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert socket.is_socket(), run([*podman, "logs", name]).stderr
        with grpc.insecure_channel(f"unix://{socket}") as channel:
            identity = csi.grpc.IdentityStub(channel)
            try:
                return identity.Probe(csi.pb2.ProbeRequest(), timeout=CALL_TIMEOUT)
            except grpc.RpcError as failure:
                return failure
    finally:
        run([*podman, "rm", "--force", "--time", "5", name])


def test_the_roset_overlays_node_plugin_is_ready_in_its_image(images, tmp_path, csi):
    """Issue 33 finding 4: in the plain image the roset node plugin's Probe fails (no roset-fuse),
    the livenessprobe answers 500 and kubelet restarts it; in the roset overlay's image it is ready."""
    ready = probe_roset_node(images["roset"], tmp_path, csi)
    assert not isinstance(ready, grpc.RpcError), ready.details()
    assert ready.ready.value
    without = probe_roset_node(images["rosetctl"], tmp_path, csi)
    assert isinstance(without, grpc.RpcError) and without.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "roset-fuse" in without.details()
