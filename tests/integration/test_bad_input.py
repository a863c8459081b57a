"""Bad input gets a clear message naming the offending thing, a documented exit code, and
changes nothing that already exists (volumes, their mounts, their files, the state dir)."""
from __future__ import annotations

import os

import pytest

from rosetctl_cli import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_PRECONDITION, EXIT_USAGE
from rosetctl_mounts import is_mount_point


class World:
    """What exists before a bad command: one connected volume with a file, one idle volume."""

    def __init__(self, cli, workdir, mounts_in):
        self.cli, self.workdir, self.mounts_in = cli, workdir, mounts_in
        self.connected = cli.create("keep", "--size", "64Mi")
        self.idle = cli.create("idle")
        self.target = workdir / "keep-target"
        cli.connect("keep", self.target)
        (self.target / "precious.txt").write_text("do not touch")
        self.before = self.snapshot()

    def snapshot(self):
        state = self.cli.state_dir
        return {
            "volumes": self.cli.volumes(),
            "mounts": self.mounts_in(),
            "file": (self.target / "precious.txt").read_text(),
            "state entries": sorted(os.listdir(state)),
            "workdir entries": sorted(os.listdir(self.workdir)),
        }

    def assert_unchanged(self, what: str) -> None:
        after = self.snapshot()
        for key, value in self.before.items():
            assert after[key] == value, f"expected {what} to change nothing, but {key} went from {value} to {after[key]}"


@pytest.fixture
def world(cli, workdir, mounts_in) -> World:
    return World(cli, workdir, mounts_in)


def assert_refused(result, code: int, *mentions: str) -> None:
    assert result.rc == code, f"expected exit {code}: {result.describe()}"
    assert result.stderr.startswith("rosetctl: "), f"expected a 'rosetctl: <message>' error: {result.stderr!r}"
    for text in mentions:
        assert text in result.stderr, f"expected the message to mention {text!r}: {result.stderr!r}"
    assert result.stdout == "", f"expected nothing on stdout for a refused command: {result.stdout!r}"


# ---------------------------------------------------------------- names

BAD_NAMES = [
    pytest.param("", ["name is required"], id="empty"),
    pytest.param("a" * 129, ["129 bytes", "128"], id="129-bytes"),
    pytest.param("../x", ['"../x"'], id="dot-dot-slash"),
    pytest.param("..", ['".."'], id="dot-dot"),
    pytest.param("a/b", ['"a/b"'], id="slash"),
    pytest.param("a b", ['"a b"'], id="space"),
    pytest.param("a\nb", ['"a\\x0ab"'], id="newline"),
    pytest.param(".hidden", ['".hidden"'], id="leading-dot"),
    pytest.param("x\u00e9", ["may only contain"], id="non-ascii"),
]


@pytest.mark.parametrize("name, mentions", BAD_NAMES)
def test_create_with_bad_name_is_refused_and_changes_nothing(world, cli, name, mentions):
    result = cli.run("volume", "create", name)
    assert_refused(result, EXIT_USAGE, "name", *mentions)
    world.assert_unchanged(f"create {name!r}")


@pytest.mark.parametrize("verb", ["show", "connect", "disconnect", "delete", "expand", "map"])
@pytest.mark.parametrize("name", ["../keep", "keep/..", "", "k" * 129])
def test_volume_argument_with_bad_name_is_refused_by_every_verb(world, cli, verb, name):
    extra = ["--size", "1Gi"] if verb == "expand" else []
    result = cli.run("volume", verb, name, *extra)
    assert_refused(result, EXIT_USAGE, "volume name or id")
    world.assert_unchanged(f"{verb} {name!r}")


def test_name_of_exactly_128_bytes_is_accepted(cli):
    name = "n" * 128
    assert cli.create(name)["name"] == name, "expected a 128-byte name to be the limit, not over it"


def test_name_that_is_another_volumes_id_is_refused(world, cli):
    result = cli.run("volume", "create", world.idle["id"])
    assert_refused(result, EXIT_CONFLICT, world.idle["id"])
    world.assert_unchanged("create with a name equal to an id")


@pytest.mark.parametrize("kind", [[], ["--type", "image"], ["--block"]])
def test_size_zero_is_refused_not_taken_as_no_size(world, cli, kind):
    """CSI reads required_bytes 0 as "no size", which made --size 0 a 1 GiB image."""
    result = cli.run("volume", "create", "zero", "--size", "0", *kind)
    assert_refused(result, EXIT_USAGE, "--size 0", "at least")
    world.assert_unchanged("create --size 0")


# ---------------------------------------------------------------- unknown volumes

@pytest.mark.parametrize("verb", ["show", "connect", "disconnect", "expand", "map", "unmap", "stats"])
@pytest.mark.parametrize("missing", ["nosuch", "local-0123456789abcdef"])
def test_unknown_volume_is_not_found_for_every_verb(world, cli, verb, missing):
    extra = ["--size", "1Gi"] if verb == "expand" else []
    result = cli.run("volume", verb, missing, *extra)
    assert_refused(result, EXIT_NOT_FOUND, f'"{missing}"')
    world.assert_unchanged(f"{verb} {missing}")


# ---------------------------------------------------------------- targets

def test_target_that_is_a_regular_file_is_refused(world, cli, workdir):
    target = workdir / "a-file"
    target.write_text("file content")
    world.before = world.snapshot()
    result = cli.run("volume", "connect", "idle", "--target", str(target))
    assert_refused(result, EXIT_USAGE, str(target), "not a directory")
    assert target.read_text() == "file content" and not is_mount_point(str(target)), (
        "expected the file to stay as it was, unmounted")
    world.assert_unchanged("connect to a regular file")


@pytest.mark.parametrize("inside", ["volumes/x", "volumes", "staging/x", ".", "locks", "state.db", "trash/x"])
def test_target_inside_the_state_dir_is_refused(world, cli, inside):
    target = os.path.normpath(cli.state_dir / inside)
    result = cli.run("volume", "connect", "idle", "--target", target)
    assert_refused(result, EXIT_USAGE, target, "state directory")
    world.assert_unchanged(f"connect to {target}")


def test_target_containing_the_state_dir_is_refused(world, cli, workdir):
    result = cli.run("volume", "connect", "idle", "--target", str(workdir))
    assert_refused(result, EXIT_USAGE, str(workdir), "state directory")
    world.assert_unchanged("connect to the state dir's parent")


def test_target_inside_the_volumes_data_dir_is_refused(world, cli):
    own_data = cli.state_dir / "volumes" / world.connected["id"] / "sub"
    result = cli.run("volume", "connect", "idle", "--target", str(own_data))
    assert_refused(result, EXIT_USAGE, "state directory")
    world.assert_unchanged("connect into another volume's data")


def test_target_under_state_mnt_is_allowed(cli):
    cli.create("inmnt")
    target = cli.state_dir / "mnt" / "custom"
    assert cli.connect("inmnt", target)["path"] == str(target), "expected <state>/mnt/<x> to be a valid target"
    assert is_mount_point(str(target)), f"expected {target} to be mounted"


def test_target_that_is_a_non_empty_directory_is_refused(world, cli, workdir):
    target = workdir / "full"
    target.mkdir()
    (target / "mine.txt").write_text("mine")
    world.before = world.snapshot()
    result = cli.run("volume", "connect", "idle", "--target", str(target))
    assert_refused(result, EXIT_PRECONDITION, str(target), "not empty")
    assert (target / "mine.txt").read_text() == "mine" and not is_mount_point(str(target)), (
        "expected the directory and its file to stay, unmounted")
    world.assert_unchanged("connect over a non-empty directory")


def test_target_whose_parent_is_missing_is_refused(world, cli, workdir):
    target = workdir / "missing-parent" / "t"
    result = cli.run("volume", "connect", "idle", "--target", str(target))
    assert_refused(result, EXIT_USAGE, str(workdir / "missing-parent"), "does not exist")
    assert not (workdir / "missing-parent").exists(), "expected the missing parent not to be created"
    world.assert_unchanged("connect below a missing parent")


def test_target_that_is_a_symlink_is_refused(world, cli, workdir):
    real = workdir / "real"
    real.mkdir()
    link = workdir / "link"
    link.symlink_to(real)
    world.before = world.snapshot()
    result = cli.run("volume", "connect", "idle", "--target", str(link))
    assert_refused(result, EXIT_USAGE, str(link), "symbolic link")
    assert not is_mount_point(str(real)) and link.is_symlink(), "expected neither the link nor its target to change"
    world.assert_unchanged("connect to a symlink")


def test_target_already_used_by_another_volume_is_refused(world, cli):
    result = cli.run("volume", "connect", "idle", "--target", str(world.target))
    assert_refused(result, EXIT_CONFLICT, str(world.target), "another mount")
    world.assert_unchanged("connect over another volume's mount")


def test_target_with_dot_dot_components_resolves_like_the_kernel(cli, workdir):
    # ".." is resolved through the real directory tree (as the kernel would), never lexically.
    (workdir / "x").mkdir()
    cli.create("dots")
    result = cli.run("volume", "connect", "dots", "--target", f"{workdir}/x/../y", "-o", "json")
    assert result.rc == 0, f"expected {workdir}/x/../y to resolve to {workdir}/y: {result.describe()}"
    assert result.json()["path"] == str(workdir / "y"), f"expected path {workdir}/y: {result.describe()}"
    assert is_mount_point(str(workdir / "y")), f"expected {workdir}/y to be mounted"
    assert cli.run("volume", "disconnect", "dots").rc == 0


@pytest.mark.parametrize("relative, expected", [
    ("rel", "cwd/rel"),
    ("nested/rel", "cwd/nested/rel"),
    ("./dot", "cwd/dot"),
    ("../up", "up"),
])
def test_relative_target_is_taken_from_the_current_directory(cli, workdir, relative, expected):
    cwd = workdir / "cwd"
    (cwd / "nested").mkdir(parents=True)
    cli.create("rel")
    result = cli.run("volume", "connect", "rel", "--target", relative, "-o", "json", cwd=cwd)
    absolute = str(workdir / expected)
    assert result.rc == 0, f"expected relative target {relative!r} to resolve against {cwd}: {result.describe()}"
    assert result.json()["path"] == absolute, f"expected path {absolute}, got {result.json()['path']}"
    assert is_mount_point(absolute), f"expected {absolute} to be mounted"
    undone = cli.run("volume", "disconnect", "rel", "--target", relative, "-o", "json", cwd=cwd)
    assert undone.rc == 0 and undone.json()["disconnected"] == [absolute], (
        f"expected disconnect with the same relative target to find it: {undone.describe()}")


def test_connect_reports_the_canonical_path_it_mounted(cli, workdir):
    cli.create("slash")
    connected = cli.connect("slash", f"{workdir}//slashy/")
    recorded = [c["target"] for c in connected["connections"]]
    assert recorded == [str(workdir / "slashy")], f"expected the connection to be recorded canonically, got {recorded}"
    assert connected["path"] == str(workdir / "slashy"), (
        f"expected the printed path to be the mount point {workdir / 'slashy'}, got {connected['path']!r}")


def test_disconnect_of_a_target_it_is_not_connected_at_changes_nothing(world, cli, workdir):
    result = cli.run("volume", "disconnect", "keep", "--target", str(workdir / "elsewhere"), "-o", "json")
    assert result.rc == 0, f"expected disconnect from an unrelated target to be a no-op: {result.describe()}"
    assert result.json()["disconnected"] == [] and result.json()["connected"] is True, (
        f"expected nothing disconnected and keep still connected: {result.stdout}")
    world.assert_unchanged("disconnect at an unrelated target")


# ---------------------------------------------------------------- flags

@pytest.mark.parametrize("args, mention", [
    pytest.param(["volume", "list", "-o", "yaml"], "yaml", id="output-yaml"),
    pytest.param(["volume", "create", "p1", "-p", "novalue"], "novalue", id="param-without-value"),
    pytest.param(["volume", "create", "p2", "-p", "colour=blue"], "colour", id="unknown-param"),
    pytest.param(["volume", "create", "p3", "-p", "type=zfs"], 'type="zfs"', id="unsupported-type"),
    pytest.param(["volume", "create"], "name", id="missing-name"),
])
def test_bad_flags_and_parameters_are_usage_errors(world, cli, args, mention):
    result = cli.run(*args)
    assert result.rc == EXIT_USAGE, f"expected exit 2 for {args}: {result.describe()}"
    assert result.stderr.startswith("rosetctl: ") and mention in result.stderr, (
        f"expected the message to mention {mention!r}: {result.stderr!r}")
    world.assert_unchanged(f"rosetctl {' '.join(args)}")


def test_unknown_subcommand_is_named_in_the_error(world, cli):
    result = cli.run("volume", "frobnicate")
    assert result.rc == EXIT_USAGE, f"expected exit 2 for an unknown verb: {result.describe()}"
    assert "frobnicate" in result.stderr, f"expected the message to name the unknown verb: {result.stderr!r}"
    world.assert_unchanged("rosetctl volume frobnicate")
