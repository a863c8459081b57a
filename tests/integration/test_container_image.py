"""The container image (deploy/container, scripts/build-image.sh): built with no registry from
Debian packages (debootstrap, podman import, podman build), it runs the tested rosetctl, holds
every program rosetctl execs, and `rosetctl serve` in it answers CSI calls from this host through
a socket in a bind-mounted directory.

Slow the first time in a tree (debootstrap downloads and installs ~150 packages: about 2 minutes
on an idle 2-core machine); the base's tarball is kept in build/container, keyed by the package
list, so later runs take seconds."""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import grpc
import pytest
import yaml

from csi_server import CALL_TIMEOUT
from rosetctl_cli import binary_path
from rosetctl_fixtures import skip_or_fail

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
BUILD_TIMEOUT = 900

# What rosetctl execs (src/core/run_program.h callers): each must be in the image.
EXECUTED = {
    "mkfs.ext4": "e2fsprogs", "e2fsck": "e2fsprogs", "resize2fs": "e2fsprogs",
    "mkfs.xfs": "xfsprogs", "xfs_growfs": "xfsprogs",
    "fusermount3": "fuse3", "iscsiadm": "open-iscsi", "tgtadm": "tgt",
}


def podman_command() -> list[str]:
    """podman as root on these machines (no systemd; cgroup v1 controllers with a cgroup2
    hierarchy beside them, which crun refuses: runc runs the containers)."""
    podman = shutil.which("podman")
    if podman is None or shutil.which("runc") is None:
        skip_or_fail("podman or runc is missing: install Debian's podman and runc (scripts/install-deps.sh)")
    return [podman, "--cgroup-manager=cgroupfs", "--events-backend=file", "--runtime=runc"]


def run_options() -> list[str]:
    """podman sets containers' limits above this process's (1048576 open files), and without
    CAP_SYS_RESOURCE the runtime may not raise them: ask for what this process has (processes at
    most podman's own 32768)."""
    _, files = resource.getrlimit(resource.RLIMIT_NOFILE)
    _, procs = resource.getrlimit(resource.RLIMIT_NPROC)
    procs = 32768 if procs == resource.RLIM_INFINITY else min(procs, 32768)
    return ["--network=none", f"--ulimit=nofile={files}:{files}", f"--ulimit=nproc={procs}:{procs}"]


def run(argv, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image():
    """Builds the image from the tree holding the tested binary; returns its name."""
    podman_command()
    if shutil.which("debootstrap") is None:
        skip_or_fail("debootstrap is missing: install Debian's debootstrap (scripts/install-deps.sh)")
    build_dir = Path(binary_path()).resolve().parents[1]
    started = time.monotonic()
    done = run([SOURCE / "scripts" / "build-image.sh", "--build-dir", build_dir], timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, f"expected build-image.sh to build the image:\n{done.stdout}{done.stderr}"
    print(f"build-image.sh took {time.monotonic() - started:.0f}s")
    yield done.stdout.strip().splitlines()[-1]
    remove_podman_cgroups()


def remove_podman_cgroups():
    """With cgroupfs, podman leaves libpod_parent/ (and its conmon/) in each cgroup v1 hierarchy
    once its containers are gone: removed when empty (rmdir refuses a cgroup still in use). The
    last conmon leaves its cgroup a moment after `podman rm` returns: a few seconds of retries."""
    deadline = time.monotonic() + 5
    while True:
        left = list(Path("/sys/fs/cgroup").glob("*/libpod_parent"))
        for parent in left:
            for directory in (parent / "conmon", parent):
                try:
                    directory.rmdir()
                except OSError:
                    pass
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def test_image_is_the_one_the_manifests_name(image):
    kustomization = yaml.safe_load((SOURCE / "deploy/kubernetes/base/kustomization.yaml").read_text())
    (entry,) = [i for i in kustomization["images"] if i["name"] == "rosetctl"]
    assert f"{entry['newName']}:{entry['newTag']}" == image


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
