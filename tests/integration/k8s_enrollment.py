"""The enrollment part of a rendered overlay (docs/KUBERNETES.md), for test_deploy_kubernetes.py:
which files a pod's flags name and what volume each lies in, and the same flags made runnable on
this machine (the files a Secret, ConfigMap, projected token or emptyDir would hold, put in a
directory of the test's; addresses of a controller and API server the test runs)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import k8s_manifests as k8s
from rosetctl_cli import binary_path

# Flags whose value is a file the pod's volumes hold.
FILE_FLAGS = ("--tls-cert", "--tls-key", "--tls-ca", "--enroll-ca-key", "--enroll-token-file")
ADDRESS_FLAGS = ("--listen", "--enroll-listen", "--controller", "--enroll-at")


def files_named(pod: dict) -> dict[str, tuple[dict, str]]:
    """flag -> (the volume holding its file, the file's path inside that volume)."""
    args = k8s.container(pod, "rosetctl")["args"]
    out = {}
    for flag in FILE_FLAGS:
        path = k8s.flag_value(args, flag)
        if path is not None:
            volume, mount = k8s.mount_path_of(pod, "rosetctl", path)
            out[flag] = (volume, path[len(mount["mountPath"].rstrip("/")) + 1:])
    return out


def secret_layout(source: dict[str, Path], at: Path) -> Path:
    """A Secret or ConfigMap volume as kubelet writes it: the files in a timestamped directory,
    `..data` a symlink to it, each name at the top a symlink into `..data`, mode 0400."""
    real = at / "..2026_11_28_00_00_00.000000001"
    real.mkdir(parents=True)
    for name, path in source.items():
        shutil.copyfile(path, real / name)
        os.chmod(real / name, 0o400)
    os.symlink(real.name, at / "..data")
    for name in source:
        os.symlink(f"..data/{name}", at / name)
    return at


def runnable(pod: dict, flags: list[str], workdir: Path, addresses: dict[str, str],
             files: dict[str, Path]) -> list[str]:
    """The flags with every file under a pod volume's mount path moved to `workdir/<volume>/`
    (filled from `files`, by volume name: a directory to lay out as a Secret, or a single file)
    and each address flag's value replaced from `addresses` (flag -> HOST:PORT)."""
    out = []
    laid_out = {}
    for arg in flags:
        name, _, value = arg.partition("=")
        if name in ADDRESS_FLAGS and name in addresses:
            out.append(f"{name}={addresses[name]}")
            continue
        if name in FILE_FLAGS:
            volume, inside = k8s.mount_path_of(pod, "rosetctl", value)
            home = workdir / "pod-volumes" / volume["name"]
            if volume["name"] not in laid_out:
                source = files.get(volume["name"])
                if isinstance(source, dict):
                    secret_layout(source, home)
                else:
                    home.mkdir(parents=True, exist_ok=True)
                    if isinstance(source, Path):
                        target = home / Path(value).name
                        shutil.copyfile(source, target)
                        os.chmod(target, 0o400)
                laid_out[volume["name"]] = home
            relative = value[len(inside["mountPath"].rstrip("/")) + 1:]
            out.append(f"{name}={home / relative}")
            continue
        out.append(arg)
    return out


def rosetctl_tls(workdir: Path) -> Path:
    """What `tls init --dns rosetctl-controller.rosetctl.svc` makes (the guide's step), for 127.0.0.1 too."""
    tls = workdir / "rosetctl-tls"
    done = subprocess.run([binary_path(), "tls", "init", "--dir", str(tls), "--dns", "rosetctl-controller.rosetctl.svc",
                           "--ip", "127.0.0.1"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return tls
