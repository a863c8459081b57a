"""The .deb (cmake/Packaging.cmake): CPack builds it from the tested build tree, lintian finds no
error in it, dpkg installs it into a root of its own (never into this machine's /) and purges it,
and the systemd units it holds pass `systemd-analyze verify`."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rosetctl_cli import binary_path
from rosetctl_fixtures import skip_or_fail

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
UNITS = ("rosetctl-controller.service", "rosetctl-node.service")
PACKAGED = [
    "usr/bin/rosetctl",
    "usr/share/man/man1/rosetctl.1.gz",
    "usr/share/bash-completion/completions/rosetctl",
    "usr/share/zsh/vendor-completions/_rosetctl",
    "usr/share/fish/vendor_completions.d/rosetctl.fish",
    "usr/share/doc/rosetctl/copyright",
    "usr/share/lintian/overrides/rosetctl",
    *(f"usr/lib/systemd/system/{unit}" for unit in UNITS),
]


def run(*argv, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, **kwargs)


def need(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        skip_or_fail(f"{program} is missing: install Debian's {package} (scripts/install-deps.sh)")
    return path


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    """The package of the build tree that holds the tested binary."""
    build_dir = Path(binary_path()).resolve().parents[1]
    config = build_dir / "CPackConfig.cmake"
    if not config.is_file():
        pytest.fail(f"{config} is missing: configure and build that tree first", pytrace=False)
    out = tmp_path_factory.mktemp("deb")
    done = run("cpack", "--config", config, "-B", out)
    assert done.returncode == 0, f"expected cpack to build the .deb: {done.stdout}{done.stderr}"
    (package,) = out.glob("rosetctl_*.deb")
    return package


def test_lintian_finds_no_error(deb):
    lintian = need("lintian", "lintian")
    done = run(lintian, "--fail-on", "none", deb)
    errors = [line for line in done.stdout.splitlines() if line.startswith("E:")]
    assert not errors, "expected lintian to find no error in the .deb:\n" + done.stdout


def test_its_maintainer_is_the_maintainers_without_an_invented_address(deb):
    maintainer = run("dpkg-deb", "-f", deb, "Maintainer").stdout.strip()
    assert maintainer == "rosetctl maintainers", f"expected no e-mail address in the Maintainer field: {maintainer}"


def test_it_declares_what_rosetctl_runs_and_this_machine_satisfies_it(deb):
    fields = run("dpkg-deb", "-f", deb, "Depends", "Recommends").stdout
    depends = re.search(r"^Depends: (.*)$", fields, re.M).group(1)
    names = {d.split()[0] for d in depends.split(", ")}
    # Programs serve runs (mount, mkfs.*, resize2fs, xfs_growfs), libcurl and cpp-httplib it
    # dlopens, and the libraries it links (dpkg-shlibdeps).
    assert {"mount", "e2fsprogs", "xfsprogs", "libcurl4", "libcpp-httplib0.11", "libc6", "libsqlite3-0",
            "libssl3"} <= names
    assert "fuse3" in fields
    # Resolvable here: dpkg checks the dependencies against this machine's, changing nothing.
    done = run("dpkg", "--log=/dev/null", "--dry-run", "-i", deb)
    assert done.returncode == 0, f"expected the .deb's dependencies to be met here: {done.stdout}{done.stderr}"


def test_dpkg_installs_and_purges_it_in_a_root_of_its_own(deb, tmp_path):
    root = tmp_path / "root"
    for directory in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
        (root / directory).mkdir(parents=True)
    (root / "var/lib/dpkg/status").touch()
    dpkg = ["dpkg", f"--root={root}", f"--log={tmp_path / 'dpkg.log'}"]
    # The root is empty, so the dependencies (checked against this machine's above) are not there.
    done = run(*dpkg, "--force-depends", "-i", deb)
    assert done.returncode == 0, f"expected dpkg to install the .deb: {done.stdout}{done.stderr}"
    for path in PACKAGED:
        assert (root / path).is_file(), f"expected the package to install /{path}"
    version = run(root / "usr/bin/rosetctl", "--version")
    assert version.returncode == 0 and version.stdout.startswith("rosetctl ")
    listed = run(*dpkg, "-L", "rosetctl").stdout.splitlines()
    assert "/usr/bin/rosetctl" in listed

    check_man_page(root / "usr/share/man/man1/rosetctl.1.gz")
    check_units(root, tmp_path)

    done = run(*dpkg, "--purge", "rosetctl")
    assert done.returncode == 0, f"expected dpkg to purge the package: {done.stdout}{done.stderr}"
    left = [path for path in PACKAGED if (root / path).exists()]
    assert not left, f"expected purge to remove every file of the package; left: {left}"
    status = run(*dpkg, "-s", "rosetctl")
    assert status.returncode != 0 or "Status: deinstall ok config-files" not in status.stdout


def check_man_page(page: Path):
    env = {**os.environ, "MANWIDTH": "100", "LC_ALL": "C.UTF-8"}
    done = run("man", "--warnings", "-l", page, env=env)
    assert done.returncode == 0 and not done.stderr.strip(), f"expected man to render rosetctl(1) cleanly: {done.stderr}"
    text = done.stdout
    for section in ("NAME", "SYNOPSIS", "COMMANDS", "ENVIRONMENT", "EXIT STATUS"):
        assert re.search(rf"^{section}$", text, re.M), f"expected rosetctl(1) to have a {section} section"
    # Generated from the command tree: every command and subcommand has its own part.
    for command in ("rosetctl volume create", "rosetctl snapshot restore", "rosetctl serve", "rosetctl tls issue",
                    "rosetctl node register", "rosetctl completion"):
        assert re.search(rf"^\s+{command}$", text, re.M), f"expected rosetctl(1) to describe `{command}`"
    assert "--max-volumes-per-node" in text and "ROSETCTL_STATE_DIR" in text


def check_units(root: Path, tmp_path: Path):
    """systemd-analyze verify works here without systemd as PID 1. It checks that ExecStart's
    program exists, so the installed units are verified with /usr/bin/rosetctl pointing into
    the root (the one change made to them); Documentation= is checked by check_man_page."""
    analyze = need("systemd-analyze", "systemd")
    units = tmp_path / "units"
    units.mkdir()
    for unit in UNITS:
        text = (root / "usr/lib/systemd/system" / unit).read_text()
        assert "ExecReload=/bin/kill -HUP $MAINPID" in text, f"{unit}: SIGHUP reloads serve's TLS files"
        (units / unit).write_text(text.replace("/usr/bin/rosetctl", str(root / "usr/bin/rosetctl")))
    done = run(analyze, "verify", "--man=no", *(units / unit for unit in UNITS))
    # verify exits 0 on an unknown or misspelt setting, only saying so: any word of it is a failure.
    assert done.returncode == 0 and not done.stderr.strip() and not done.stdout.strip(), (
        f"expected systemd-analyze verify to accept the units: {done.stdout}{done.stderr}")
