"""podman as the tests run it (root, no systemd), and the images scripts/build-image.sh builds:
shared by test_container_image.py and test_overlays_in_podman.py.

Each run builds its images under names of its own (`built_images`), never the names the overlays
render (localhost/rosetctl:VERSION): two runs at once on one machine would otherwise retag and
remove each other's images. They are removed at the end, whatever happened."""
from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from rosetctl_cli import binary_path
from rosetctl_fixtures import skip_or_fail

BUILD_TIMEOUT = 900
INTEGRATION_DIR = Path(__file__).resolve().parent
# roset-fuse is not a Debian package: the roset image is built with the tests' stand-in
# (tests/integration/bin/roset-fuse, a Python script that mounts the fake API's storage with
# bindfs). The roset image holds it where the overlay's node plugin looks for roset-fuse;
# `standin_image` adds what it needs to run there.
STANDIN_FUSE = INTEGRATION_DIR / "bin" / "roset-fuse"
# What the stand-in runs beyond the roset image: its interpreter and bindfs.
STANDIN_PACKAGES = ("python3", "bindfs")


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


def run(argv, timeout=120, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd)


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


def build_image_argv(source: Path, *args) -> list:
    build_dir = Path(binary_path()).resolve().parents[1]
    return [source / "scripts" / "build-image.sh", "--build-dir", build_dir, "--roset-fuse", STANDIN_FUSE, *args]


def rendered_names(source: Path) -> dict[str, str]:
    """The names build-image.sh gives by default, those the overlays render:
    {"rosetctl": name, "roset": name}."""
    done = run(build_image_argv(source, "--print-names"))
    assert done.returncode == 0, f"expected build-image.sh --print-names to answer: {done.stderr}"
    rosetctl, roset = done.stdout.strip().splitlines()
    return {"rosetctl": rosetctl, "roset": roset}


def remove_images(names) -> list[str]:
    """`podman rmi` of each name that exists; the errors of those that could not be removed."""
    errors = []
    for name in names:
        if run([*podman_command(), "image", "exists", name]).returncode != 0:
            continue
        done = run([*podman_command(), "rmi", "--force", name], timeout=300)
        if done.returncode != 0:
            errors.append(f"{name}: {done.stderr.strip()}")
    return errors


@contextlib.contextmanager
def built_images(source: Path) -> Iterator[dict[str, str]]:
    """Builds the images from the tree holding the tested binary (seconds once the base is
    cached) under this run's own names: {"rosetctl": name, "roset": name}. Removes them at the
    end, also when the build or a test failed."""
    podman_command()
    if shutil.which("debootstrap") is None:
        skip_or_fail("debootstrap is missing: install Debian's debootstrap (scripts/install-deps.sh)")
    version = rendered_names(source)["rosetctl"].rsplit(":", 1)[1]
    tag = f"localhost/rosetctl-test-{os.getpid()}-{secrets.token_hex(4)}:{version}"
    names = {"rosetctl": tag, "roset": tag.replace(":", "-roset:")}
    try:
        started = time.monotonic()
        done = run(build_image_argv(source, "--tag", tag), timeout=BUILD_TIMEOUT)
        assert done.returncode == 0, f"expected build-image.sh to build the image:\n{done.stdout}{done.stderr}"
        print(f"build-image.sh took {time.monotonic() - started:.0f}s")
        assert done.stdout.strip().splitlines()[-2:] == [names["rosetctl"], names["roset"]], done.stdout
        yield names
    finally:
        errors = remove_images([names["roset"], names["rosetctl"]])
        assert not errors, f"expected this run's images removed: {errors}"


def standin_image(roset_image: str, name: str, cache_dir: Path) -> str:
    """A test image FROM the roset overlay's image, in which the stand-in roset-fuse (at
    /usr/bin/roset-fuse, where the rendered node plugin finds Roset's client) can run: the image
    plus the Debian packages of STANDIN_PACKAGES it lacks, resolved by apt against the image's
    own dpkg status and fetched with `apt-get download` on this machine (the build itself has no
    network). Returns `name`; remove it with remove_images."""
    podman = podman_command()
    with tempfile.TemporaryDirectory(prefix="standin-") as scratch:
        context = Path(scratch)
        status = run([*podman, "run", "--rm", *run_options(), "--entrypoint", "/bin/cat", roset_image,
                      "/var/lib/dpkg/status"])
        assert status.returncode == 0, f"expected the image's dpkg status: {status.stderr}"
        (context / "status").write_text(status.stdout)
        plan = run(["apt-get", "--simulate", "--no-install-recommends", "-o", f"Dir::State::status={context / 'status'}",
                    "install", *STANDIN_PACKAGES])
        assert plan.returncode == 0, f"expected apt to resolve {STANDIN_PACKAGES} for the image: {plan.stderr}"
        wanted = [f"{line.split()[1]}={line.split()[2].strip('(')}" for line in plan.stdout.splitlines()
                  if line.startswith("Inst ")]
        debs = context / "debs"
        debs.mkdir()
        cache_dir.mkdir(parents=True, exist_ok=True)
        for package in wanted:  # cached by file name (name_version_arch.deb): fetched once per version
            package_name, version = package.split("=")
            cached = [p for p in cache_dir.glob(f"{package_name}_*.deb")
                      if p.name.split("_")[1].replace("%3a", ":") == version]
            if not cached:
                done = run(["apt-get", "download", package], timeout=300, cwd=cache_dir)
                assert done.returncode == 0, f"expected apt-get download {package}: {done.stderr}"
                cached = [p for p in cache_dir.glob(f"{package_name}_*.deb")
                          if p.name.split("_")[1].replace("%3a", ":") == version]
            assert cached, f"apt-get download {package} left no .deb in {cache_dir}"
            shutil.copy(cached[0], debs / cached[0].name)
        shutil.copy(INTEGRATION_DIR / "containers" / "Containerfile.roset-standin", context / "Containerfile")
        limits = [option for option in run_options() if option.startswith("--ulimit=")]
        done = run([*podman, "build", "--quiet", "--network=none", "--pull=never", *limits,
                    "--build-arg", f"BASE={roset_image}", "-t", name, context], timeout=BUILD_TIMEOUT)
        assert done.returncode == 0, f"expected the stand-in's image to build: {done.stdout}{done.stderr}"
    return name
