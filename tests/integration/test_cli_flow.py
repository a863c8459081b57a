"""The operator's flow through the real CLI with real bind mounts, and its idempotency."""
from __future__ import annotations

import errno
import re

import pytest

from rosetctl_cli import EXIT_CONFLICT, EXIT_NOT_FOUND, EXIT_PRECONDITION, EXIT_USAGE, Rosetctl, run_all_at_once
from rosetctl_mounts import is_mount_point, mount_at

ID_PATTERN = re.compile(r"^local-[0-9a-f]{16}$")


@pytest.fixture
def node_id(cli) -> str:
    return cli.ok_json("node", "info")["node_id"]


def data_dir(cli: Rosetctl, volume_id: str):
    """Where the local provider keeps a volume's files (see providers/common/local_storage.cc)."""
    return cli.state_dir / "volumes" / volume_id


def connection_targets(volume: dict) -> list[str]:
    return sorted(c["target"] for c in volume["connections"])


def assert_consistent(cli: Rosetctl, node: str, mounts_in) -> None:
    """Records and the kernel's mount table agree: every connection is a mount and vice versa,
    a connected volume is staged and mapped to this node, a disconnected one is neither."""
    expected_mounts = set()
    for volume in cli.volumes():
        targets = connection_targets(volume)
        for connection in volume["connections"]:
            assert is_mount_point(connection["target"]), (
                f"expected recorded connection {connection['target']} of {volume['name']} to be a mount")
            expected_mounts.add(connection["target"])
            expected_mounts.add(connection["staging_path"])
        if targets:
            assert volume["published_nodes"] == [node], (
                f"expected connected volume {volume['name']} (at {targets}) to be mapped to {node}, "
                f"got published_nodes={volume['published_nodes']}")
        else:
            assert volume["published_nodes"] == [], (
                f"expected disconnected volume {volume['name']} to be mapped nowhere, "
                f"got {volume['published_nodes']}")
    assert set(mounts_in()) == expected_mounts, (
        f"expected exactly the recorded targets and stagings to be mounted: {sorted(expected_mounts)}, "
        f"kernel has {mounts_in()}")


# ---------------------------------------------------------------- the user flow

def test_user_flow_create_connect_write_disconnect_delete(cli, workdir, node_id, mounts_in):
    created = cli.create("flow", "--size", "64Mi")
    volume_id = created["id"]
    assert ID_PATTERN.match(volume_id), f"expected an id like local-<16 hex>, got {volume_id!r}"
    assert created["name"] == "flow" and created["capacity_bytes"] == 64 * 2**20, (
        f"expected name flow with 64Mi, got {created}")
    assert created["connections"] == [] and created["published_nodes"] == [], (
        f"expected a new volume to be connected nowhere, got {created}")

    target = workdir / "flow-target"
    connected = cli.connect("flow", target)
    assert connected["path"] == str(target), f"expected connect to report path {target}, got {connected}"
    mount = mount_at(str(target))
    assert mount is not None, f"expected {target} to be a mount point after connect"
    assert mount.root.endswith(f"/volumes/{volume_id}"), (
        f"expected {target} to be a bind of the volume's data directory, mountinfo root is {mount.root}")
    (target / "hello.txt").write_text("kept across disconnect\n")

    listed = [v for v in cli.volumes() if v["id"] == volume_id]
    assert len(listed) == 1, f"expected volume list to contain {volume_id} once, got {listed}"
    assert connection_targets(listed[0]) == [str(target)], f"expected list to show {target}, got {listed[0]}"
    assert listed[0]["published_nodes"] == [node_id], f"expected list to show node {node_id}, got {listed[0]}"
    for reference in ("flow", volume_id):
        shown = cli.volume(reference)
        assert shown["id"] == volume_id and connection_targets(shown) == [str(target)], (
            f"expected `show {reference}` to find the volume connected at {target}, got {shown}")
    table = cli.ok("volume", "show", "flow").stdout
    assert str(target) in table and node_id in table, f"expected the table to name {target} and {node_id}: {table}"

    refused = cli.run("volume", "delete", "flow")
    assert refused.rc == EXIT_PRECONDITION, f"expected delete of a connected volume to exit 5: {refused.describe()}"
    assert "disconnect" in refused.stderr and refused.stderr.startswith("rosetctl: "), (
        f"expected a message telling to disconnect first: {refused.stderr!r}")
    assert is_mount_point(str(target)) and (target / "hello.txt").exists(), (
        "expected the refused delete to leave the mount and its file alone")
    assert cli.volume("flow")["id"] == volume_id, "expected the volume to survive the refused delete"

    disconnected = cli.ok_json("volume", "disconnect", "flow")
    assert disconnected == {"id": volume_id, "name": "flow", "disconnected": [str(target)], "unstaged": [],
                            "connected": False, "staged": False}, (
        f"expected disconnect to report {target} removed, got {disconnected}")
    assert not is_mount_point(str(target)), f"expected {target} to be unmounted after disconnect"
    assert mounts_in() == [], f"expected no mounts left (staging too), got {mounts_in()}"
    assert (data_dir(cli, volume_id) / "hello.txt").read_text() == "kept across disconnect\n", (
        "expected the data to be kept after disconnect")
    after = cli.volume("flow")
    assert after["connections"] == [] and after["published_nodes"] == [], (
        f"expected show to say not connected after disconnect, got {after}")

    cli.connect("flow", target)
    assert (target / "hello.txt").read_text() == "kept across disconnect\n", (
        "expected the file written before disconnect to be visible after reconnecting")
    cli.ok("volume", "disconnect", "flow")

    deleted = cli.ok_json("volume", "delete", "flow")
    assert deleted == {"id": volume_id, "name": "flow", "deleted": True}, f"expected a delete report, got {deleted}"
    assert cli.volumes() == [], "expected no volumes after delete"
    assert not data_dir(cli, volume_id).exists(), "expected the data directory to be gone after delete"
    assert list((cli.state_dir / "trash").iterdir()) == [], "expected nothing left in the trash after delete"
    gone = cli.run("volume", "show", volume_id)
    assert gone.rc == EXIT_NOT_FOUND, f"expected show of a deleted volume to exit 3: {gone.describe()}"


def test_connect_without_target_mounts_under_state_mnt(cli, mounts_in):
    cli.create("plain")
    connected = cli.connect("plain")
    expected = cli.state_dir / "mnt" / "plain"
    assert connected["path"] == str(expected), f"expected default target {expected}, got {connected['path']}"
    assert is_mount_point(str(expected)), f"expected {expected} to be a mount point"
    assert cli.ok("volume", "connect", "plain").stdout.strip() == str(expected), (
        "expected table output of connect to be just the path")
    cli.ok("volume", "disconnect", "plain")
    assert mounts_in() == [], f"expected no mounts after disconnect, got {mounts_in()}"


def test_disconnect_removes_target_it_created_and_keeps_one_it_did_not(cli, workdir):
    cli.create("dirs")
    made_by_rosetctl = workdir / "made"
    existing = workdir / "existing"
    existing.mkdir()
    cli.connect("dirs", made_by_rosetctl)
    cli.connect("dirs", existing)
    cli.ok("volume", "disconnect", "dirs")
    assert not made_by_rosetctl.exists(), "expected the target directory rosetctl created to be removed"
    assert existing.is_dir() and not is_mount_point(str(existing)), (
        "expected the pre-existing target directory to stay, unmounted")


def test_read_only_connect_makes_writes_fail_with_erofs(cli, workdir):
    cli.create("ro")
    writable, read_only = workdir / "rw", workdir / "ro"
    cli.connect("ro", writable)
    (writable / "seed.txt").write_text("seed")
    connected = cli.connect("ro", read_only, "--read-only")
    assert connected["readonly"] is True, f"expected connect --read-only to report readonly, got {connected}"
    assert mount_at(str(read_only)).read_only, f"expected {read_only} to be mounted ro"
    assert (read_only / "seed.txt").read_text() == "seed", "expected reads through the ro mount to work"
    with pytest.raises(OSError) as failure:
        (read_only / "new.txt").write_text("nope")
    assert failure.value.errno == errno.EROFS, f"expected EROFS writing to a read-only connect, got {failure.value}"
    assert not mount_at(str(writable)).read_only, "expected the other target to stay writable"


def test_two_targets_share_data_and_disconnect_one_at_a_time(cli, workdir, node_id):
    volume_id = cli.create("twice")["id"]
    first, second = workdir / "first", workdir / "second"
    cli.connect("twice", first)
    cli.connect("twice", second)
    (first / "shared.txt").write_text("both")
    assert (second / "shared.txt").read_text() == "both", "expected both targets to show the same data"
    assert connection_targets(cli.volume("twice")) == sorted([str(first), str(second)]), (
        "expected show to list both targets")

    partial = cli.ok_json("volume", "disconnect", "twice", "--target", str(first))
    assert partial["disconnected"] == [str(first)] and partial["connected"] is True, (
        f"expected only {first} to be disconnected, the volume still connected: {partial}")
    assert not is_mount_point(str(first)) and is_mount_point(str(second)), (
        f"expected {first} unmounted and {second} still mounted")
    remaining = cli.volume("twice")
    assert connection_targets(remaining) == [str(second)] and remaining["published_nodes"] == [node_id], (
        f"expected the volume still connected at {second} on {node_id}: {remaining}")

    rest = cli.ok_json("volume", "disconnect", "twice", "--target", str(second))
    assert rest == {"id": volume_id, "name": "twice", "disconnected": [str(second)], "unstaged": [],
                    "connected": False, "staged": False}, (
        f"expected the last target to be disconnected: {rest}")
    assert cli.volume("twice")["published_nodes"] == [], "expected the node mapping to go with the last target"


# ---------------------------------------------------------------- idempotency

def test_create_again_with_same_size_returns_same_volume(cli):
    first = cli.create("again", "--size", "1Gi")
    second = cli.create("again", "--size", "1Gi")
    by_bytes = cli.create("again", "--size", str(2**30))
    assert first["id"] == second["id"] == by_bytes["id"], (
        f"expected repeated creates to return one volume, got {first['id']}, {second['id']}, {by_bytes['id']}")
    assert len(cli.volumes()) == 1, "expected exactly one volume after repeated creates"


def test_create_again_with_other_size_is_refused_with_exit_4(cli):
    before = cli.create("sized", "--size", "1Gi")
    other = cli.run("volume", "create", "sized", "--size", "2Gi")
    assert other.rc == EXIT_CONFLICT, f"expected exit 4 for a conflicting create: {other.describe()}"
    assert '"sized"' in other.stderr and "already exists" in other.stderr, (
        f"expected the message to name the existing volume: {other.stderr!r}")
    assert cli.volumes() == [cli.volume(before["id"])] and cli.volume("sized")["capacity_bytes"] == 2**30, (
        "expected the existing volume to be unchanged")


def test_help_and_behaviour_agree_on_a_create_of_an_existing_name_with_another_size(cli):
    # Issue 32: the help said a differing size fails with exit 4 while a smaller one returned the
    # volume. One rule, CSI's: the size is the least the volume must have.
    help_text = cli.ok("volume", "create", "--help").stdout
    assert "at least --size" in help_text and "smaller" in help_text, help_text
    before = cli.create("sized", "--size", "1Gi")
    smaller = cli.run("volume", "create", "sized", "--size", "512Mi", "-o", "json")
    assert smaller.rc == 0 and smaller.json()["id"] == before["id"], smaller.describe()
    assert smaller.json()["capacity_bytes"] == 2**30, "expected the existing volume as it is"
    assert cli.run("volume", "create", "sized", "--size", "2Gi").rc == EXIT_CONFLICT
    assert cli.run("volume", "create", "sized", "--size", "1Gi", "--type", "image").rc == EXIT_CONFLICT


def test_connect_same_target_again_is_a_no_op(cli, workdir, mounts_in):
    cli.create("idem")
    target = workdir / "idem"
    first = cli.connect("idem", target)
    second = cli.connect("idem", target)
    assert first["path"] == second["path"] == str(target), "expected both connects to report the same path"
    stacked = [m for m in mounts_in() if m == str(target)]
    assert len(stacked) == 1, f"expected exactly one mount at {target}, got {len(stacked)}"
    assert connection_targets(cli.volume("idem")) == [str(target)], "expected one recorded connection"
    assert first["already_connected"] is False and second["already_connected"] is True
    table = cli.ok("volume", "connect", "idem", "--target", str(target))
    assert table.stdout.strip() == str(target), "expected stdout to stay the path, for scripts"
    assert "already connected" in table.stderr and "nothing to do" in table.stderr, (
        f"expected an idempotent connect to say so (README): {table.describe()}")


def test_decimal_sizes_show_as_given_not_as_fractional_kibibytes(cli):
    assert cli.create("half-giga", "--size", "500M")["size"] == "500M"
    assert "500M" in cli.ok("volume", "show", "half-giga").stdout


def test_disconnect_again_and_when_never_connected_succeeds(cli, workdir):
    volume_id = cli.create("loose")["id"]
    never = cli.ok_json("volume", "disconnect", "loose")
    assert never == {"id": volume_id, "name": "loose", "disconnected": [], "unstaged": [],
                     "connected": False, "staged": False}, (
        f"expected disconnect of an unconnected volume to succeed with nothing done: {never}")
    assert "not connected" in cli.ok("volume", "disconnect", "loose").stdout, (
        "expected the table output to say it was not connected")
    cli.connect("loose", workdir / "loose")
    cli.ok("volume", "disconnect", "loose")
    again = cli.ok_json("volume", "disconnect", "loose", "--target", str(workdir / "loose"))
    assert again["disconnected"] == [] and again["connected"] is False, f"expected a no-op: {again}"


def test_delete_again_succeeds_and_says_nothing_to_delete(cli):
    cli.create("doomed")
    cli.ok("volume", "delete", "doomed")
    again = cli.run("volume", "delete", "doomed")
    assert again.rc == 0, f"expected a repeated delete to succeed: {again.describe()}"
    assert "does not exist" in again.stdout, f"expected it to say the volume does not exist: {again.stdout!r}"
    as_json = cli.ok_json("volume", "delete", "doomed")
    assert as_json == {"id": None, "name": "doomed", "deleted": False}, f"expected deleted=false, got {as_json}"


def test_map_and_unmap_repeat_and_mapping_blocks_delete(cli, node_id):
    cli.create("mapped")
    for _ in range(2):
        mapped = cli.ok_json("volume", "map", "mapped")
        assert mapped["mapped"] is True and mapped["node"] == node_id, f"expected a mapping to {node_id}: {mapped}"
        assert cli.volume("mapped")["published_nodes"] == [node_id], "expected show to list the mapped node"
    refused = cli.run("volume", "delete", "mapped")
    assert refused.rc == EXIT_PRECONDITION, f"expected delete of a mapped volume to exit 5: {refused.describe()}"
    for _ in range(2):
        unmapped = cli.ok_json("volume", "unmap", "mapped")
        assert unmapped["mapped"] is False, f"expected unmap to report mapped=false: {unmapped}"
        assert cli.volume("mapped")["published_nodes"] == [], "expected no mapped nodes after unmap"
    cli.ok("volume", "delete", "mapped")


def test_map_to_another_node_is_not_found_for_local_volumes(cli):
    cli.create("here")
    other = cli.run("volume", "map", "here", "--node", "some-other-node")
    assert other.rc == EXIT_NOT_FOUND, f"expected exit 3 mapping a local volume elsewhere: {other.describe()}"
    assert "some-other-node" in other.stderr, f"expected the message to name the node: {other.stderr!r}"
    assert cli.volume("here")["published_nodes"] == [], "expected no mapping to be recorded"


def test_expand_grows_and_repeats(cli):
    cli.create("grow", "--size", "64Mi")
    for _ in range(2):
        grown = cli.ok_json("volume", "expand", "grow", "--size", "128Mi")
        assert grown["capacity_bytes"] == 128 * 2**20, f"expected 128Mi after expand, got {grown}"


# ---------------------------------------------------------------- flags and sizes

def test_global_flags_work_before_and_after_the_verb(cli):
    cli.create("flags")
    state = str(cli.state_dir)
    before = cli.run("-o", "json", "--state-dir", state, "volume", "list", with_state_dir=False)
    after = cli.run("volume", "list", "--state-dir", state, "-o", "json", with_state_dir=False)
    mixed = cli.run("--output", "json", "volume", "show", "flags", "--state-dir", state, with_state_dir=False)
    for result in (before, after, mixed):
        assert result.rc == 0, f"expected global flags to parse in any position: {result.describe()}"
    assert before.json() == after.json() and before.json()[0] == mixed.json(), (
        "expected the same answer whichever side of the verb the flags are on")
    for args in (["--node-id", "n1", "node", "info"], ["node", "info", "--node-id", "n1"]):
        assert cli.ok_json(*args)["node_id"] == "n1", f"expected --node-id to apply in {args}"


def test_state_dir_comes_from_environment_when_not_given(cli):
    cli.create("envstate")
    env = dict(cli.env, ROSETCTL_STATE_DIR=str(cli.state_dir))
    listed = cli.run("volume", "list", "-o", "json", with_state_dir=False, env=env)
    assert listed.rc == 0 and [v["name"] for v in listed.json()] == ["envstate"], (
        f"expected ROSETCTL_STATE_DIR to select the state dir: {listed.describe()}")


@pytest.mark.parametrize("size, expected", [
    ("64Mi", 64 * 2**20),
    ("1.5Gi", 3 * 2**29),
    ("4096", 4096),
    ("500M", 500_000_000),
])
def test_sizes_are_parsed_exactly(cli, size, expected):
    created = cli.create("sized", "--size", size)
    assert created["capacity_bytes"] == expected, f"expected {size} to be {expected} bytes, got {created}"


@pytest.mark.parametrize("size", ["12XB", "lots", "1.5", "-1", "Gi", "9Ei"])
def test_bad_sizes_are_refused_with_exit_2_and_create_nothing(cli, size):
    result = cli.run("volume", "create", "badsize", "--size", size)
    assert result.rc == EXIT_USAGE, f"expected exit 2 for size {size!r}: {result.describe()}"
    assert result.stderr.startswith("rosetctl: ") and "size" in result.stderr, (
        f"expected a message about the size: {result.stderr!r}")
    assert cli.volumes() == [], f"expected no volume after a bad size {size!r}"


def test_explicitly_empty_size_is_refused_not_ignored(cli):
    """`--size "$SIZE"` with SIZE unset must not silently create a volume of no particular size."""
    result = cli.run("volume", "create", "nosize", "--size", "")
    assert result.rc == EXIT_USAGE, f"expected exit 2 for an empty --size: {result.describe()}"
    assert "size" in result.stderr, f"expected the message to be about the size: {result.stderr!r}"
    assert cli.volumes() == [], "expected no volume after an empty --size"


# ---------------------------------------------------------------- concurrency

def test_concurrent_creates_of_one_name_make_exactly_one_volume(cli, workdir):
    for attempt in range(8):
        # A fresh state dir each round, so the racers also race to initialise it.
        racer = Rosetctl(workdir / f"state-{attempt}", workdir, cli.tracker, cli.binary)
        processes = 2 if attempt < 6 else 4
        results = run_all_at_once(racer, [["volume", "create", "same", "-o", "json"]] * processes)
        for result in results:
            assert result.rc == 0, f"expected every concurrent create to succeed (round {attempt}): {result.describe()}"
        ids = {result.json()["id"] for result in results}
        assert len(ids) == 1, f"expected all racers to get the same volume (round {attempt}), got {ids}"
        listed = racer.volumes()
        assert [v["id"] for v in listed] == list(ids), (
            f"expected exactly one volume after concurrent creates (round {attempt}), got {listed}")


def test_parallel_connects_and_disconnects_of_distinct_targets(cli, workdir, node_id, mounts_in):
    cli.create("busy")
    targets = [workdir / f"t{i}" for i in range(4)]
    connects = [["volume", "connect", "busy", "--target", str(t)] for t in targets]
    results = run_all_at_once(cli, connects + connects[:1])  # one target twice: idempotent under a race
    for result in results:
        assert result.rc == 0, f"expected every parallel connect to succeed: {result.describe()}"
    assert connection_targets(cli.volume("busy")) == sorted(map(str, targets)), "expected all four connections"
    assert_consistent(cli, node_id, mounts_in)

    disconnects = [["volume", "disconnect", "busy", "--target", str(t)] for t in targets]
    for result in run_all_at_once(cli, disconnects):
        assert result.rc == 0, f"expected every parallel disconnect to succeed: {result.describe()}"
    assert mounts_in() == [], f"expected no mounts after all disconnects, got {mounts_in()}"
    assert_consistent(cli, node_id, mounts_in)


def test_connect_racing_disconnect_of_another_target_keeps_state_consistent(cli, workdir, node_id, mounts_in):
    """A connect of target B while target A (the last one) is disconnected: both must succeed
    and leave B connected, staged and mapped -- never a mount the records do not explain."""
    cli.create("race")
    old, new = workdir / "old", workdir / "new"
    failures = []
    for attempt in range(12):
        cli.connect("race", old)
        disconnect, connect = run_all_at_once(cli, [
            ["volume", "disconnect", "race", "--target", str(old)],
            ["volume", "connect", "race", "--target", str(new)],
        ])
        for what, result in (("disconnect", disconnect), ("connect", connect)):
            if result.rc != 0:
                failures.append(f"round {attempt}: {what} {result.describe()}")
        try:
            assert_consistent(cli, node_id, mounts_in)
        except AssertionError as inconsistent:
            failures.append(f"round {attempt}: {str(inconsistent).splitlines()[0]}")
        cli.ok("volume", "disconnect", "race")
        cli.ok("volume", "unmap", "race")  # repair a lost mapping so later rounds start clean
    assert not failures, "expected racing connect/disconnect to both succeed consistently:\n" + "\n".join(failures)
