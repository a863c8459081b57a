"""The one-host guides run as written (issue 34 item 3): docs/guides/one-host.md and the blocks of
docs/guides/providers/local.md and roset.md, and README.md's own tour (issue 32), command by
command with bash on this machine, as root, through guide_blocks.Runner.

What differs from the reader's machine is substituted, and only that (the table below): the
guide's `rosetctl` is this build (a directory on PATH holding it), its configuration file is the
test's own (ROSETCTL_CONFIG naming a file whose `state-dir` is the test's), never the machine's
/etc/rosetctl, and the paths it mounts at or writes to (/mnt/..., /dev/rosetctl,
/etc/bash_completion.d, /etc/rosetctl, /run) are directories of the test's. The roset guide reaches
the fake Roset API (roset_fixtures) and the stand-in roset-fuse.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from guide_blocks import GUIDES, SOURCE, LocalExecutor, Runner
from roset_fixtures import STANDIN_FUSE
from rosetctl_cli import isolated_environment


@pytest.fixture
def host(workdir, rosetctl_binary):
    """bash on this machine with the guide's `rosetctl` on PATH and the test's own config file."""
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    (bin_dir / "rosetctl").symlink_to(rosetctl_binary)
    config = workdir / "config.toml"
    config.write_text(f'state-dir = "{workdir / "state"}"\n')
    # /dev/rosetctl is the one parent rosetctl makes itself (for a block volume's target), so its
    # stand-in is made here; the others exist on a Debian machine.
    for directory in ("mnt", "dev/rosetctl", "completion", "etc", "run"):
        (workdir / directory).mkdir(parents=True)
    env = isolated_environment() | {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ROSETCTL_CONFIG": str(config)}
    executor = LocalExecutor(env, workdir)
    yield executor
    for proc in executor.started:  # the guide's serve: SIGTERM stops it, as the guide says
        proc.terminate()
        proc.wait(timeout=60)


def serve_is_up(executor, script: str, proc) -> None:
    """The guide's `serve --endpoint unix://PATH` answers on its socket: the CLI's probe through it."""
    socket = re.search(r"--endpoint unix://(\S+)", script).group(1)
    deadline = time.monotonic() + 20
    while not os.path.exists(socket):
        assert proc.poll() is None, f"serve exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"no socket at {socket} after 20 s"
        time.sleep(0.05)


def paths(workdir: Path) -> list[tuple[str, str]]:
    """The guide's words and what they become here: the visible substitution."""
    return [("NODE_ADDRESS", "127.0.0.1:9443"),  # only registered, never dialled
            ("/mnt/", f"{workdir}/mnt/"),
            ("/dev/rosetctl/", f"{workdir}/dev/rosetctl/"),
            ("/etc/bash_completion.d/", f"{workdir}/completion/"),
            ("/etc/rosetctl/", f"{workdir}/etc/"),
            ("/run/", f"{workdir}/run/")]


def test_one_host_guide(host, workdir):
    runner = Runner(GUIDES / "one-host.md", {None: [host]}, lambda block, executor: paths(workdir),
                    ready=serve_is_up)
    runner.run_all()
    # The CLI keeps working beside serve, on the same state (the guide's promise after the block).
    assert host.run("rosetctl volume list", 60).rc == 0
    runner.assert_all_ran()
    assert (workdir / "completion" / "rosetctl").read_text().startswith("#"), "the completion script"


def test_readme_tour(host, workdir):
    """README.md's blocks: the tour as written (an image volume connected, written, committed,
    restored, disconnected, deleted), then its serve in the background."""
    runner = Runner(SOURCE / "README.md", {None: [host]}, lambda block, executor: paths(workdir),
                    ready=serve_is_up)
    runner.run_all()
    runner.assert_all_ran()
    # What the tour promises of its volumes: the copy holds the commit's content, demo is gone.
    listed = {v["name"]: v for v in host_json(host, "rosetctl volume list -o json")}
    assert "demo" not in listed and "demo-copy" in listed, sorted(listed)


def host_json(host, command: str):
    done = host.run(command, 60)
    assert done.rc == 0, done
    return json.loads(done.stdout)


def test_local_provider_guide(host, workdir):
    runner = Runner(GUIDES / "providers/local.md", {None: [host]}, lambda block, executor: paths(workdir))
    runner.run_all()
    runner.assert_all_ran()


def test_roset_provider_guide(host, workdir, roset):
    # The guide's key file is /etc/rosetctl/roset.key: the test's, with the fake API's key in it.
    (workdir / "etc" / "roset.key").write_bytes(roset.key_file.read_bytes())
    os.chmod(workdir / "etc" / "roset.key", 0o600)
    host.env |= {"ROSET_API_URL": roset.fake.url, "ROSET_FUSE_BINARY": str(STANDIN_FUSE)}
    runner = Runner(GUIDES / "providers/roset.md", {None: [host]}, lambda block, executor: paths(workdir))
    try:
        runner.run_all()
    finally:
        host.run("rosetctl --provider roset volume disconnect ckpt; rosetctl volume disconnect ckpt-e3", 60)
    runner.assert_all_ran()
