"""podman as the tests run it (root, no systemd), and the images scripts/build-image.sh builds:
shared by test_container_image.py and test_overlays_in_podman.py."""
from __future__ import annotations

import resource
import shutil
import subprocess
import time
from pathlib import Path

from rosetctl_cli import binary_path
from rosetctl_fixtures import skip_or_fail

BUILD_TIMEOUT = 900
# roset-fuse is not a Debian package: the roset image is built with the tests' stand-in
# (tests/integration/bin/roset-fuse, a Python script; the image has no Python, so it cannot run
# there: what is checked is that the roset overlay's image holds the client its Probe needs).
STANDIN_FUSE = Path(__file__).resolve().parent / "bin" / "roset-fuse"


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


def build_images(source: Path) -> dict[str, str]:
    """Builds the images from the tree holding the tested binary (seconds once the base is
    cached): {"rosetctl": name, "roset": name}."""
    podman_command()
    if shutil.which("debootstrap") is None:
        skip_or_fail("debootstrap is missing: install Debian's debootstrap (scripts/install-deps.sh)")
    build_dir = Path(binary_path()).resolve().parents[1]
    started = time.monotonic()
    done = run([source / "scripts" / "build-image.sh", "--build-dir", build_dir, "--roset-fuse", STANDIN_FUSE],
               timeout=BUILD_TIMEOUT)
    assert done.returncode == 0, f"expected build-image.sh to build the image:\n{done.stdout}{done.stderr}"
    print(f"build-image.sh took {time.monotonic() - started:.0f}s")
    rosetctl, roset = done.stdout.strip().splitlines()[-2:]
    return {"rosetctl": rosetctl, "roset": roset}
