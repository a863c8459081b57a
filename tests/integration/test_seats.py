"""Every verb from every seat (issue 32): volumes and snapshots placed on nodes are found by name
and id wherever the user stands, through the controller's Catalog, which asks the node that holds
them (as CSI calls on placed ids go there); a name of several is refused naming each id; a
snapshot a node holds (taken there or pulled there) restores there with that node's normal
configuration, and the controller's `snapshot list` says where each copy is; errors say which
host lacks what (the controller's Roset settings, a consumer's key or roset-fuse, tgtd), `serve`
logs which configuration file it read, and a node's own CLI says its lists are its host's alone.

The lab of test_snapshot_streaming.py: a controller and two nodes (consumer-a, consumer-b), each
running `serve --role node --listen`; alice is an admin working from consumer-a's host, and
`site.a` / `site.b` are the nodes' own CLIs with their node certificates (--controller).
"""
from __future__ import annotations

import pytest

from controller_site import EXIT_PERMISSION, EXIT_UNAVAILABLE, Site, build_site
from rosetctl_cli import EXIT_NOT_FOUND, EXIT_PRECONDITION
from seat_matrix import ONLY_THIS_HOST, ONLY_THIS_REGISTRY
from test_across_hosts import use_roset
from test_placement import local_id, stored_volumes
from test_snapshot_streaming import Nodes


@pytest.fixture
def nodes(host_lab, rosetctl_binary) -> Nodes:
    site = build_site(host_lab)
    yield Nodes(site)
    site.assert_no_secrets_printed()


@pytest.fixture
def site(host_lab, rosetctl_binary) -> Site:
    built = build_site(host_lab)
    yield built
    built.assert_no_secrets_printed()


def names_in(listed: list[dict]) -> list[str]:
    return sorted(entry["name"] for entry in listed)


def test_a_placed_volume_and_its_snapshots_are_found_by_name_through_the_controller(nodes):
    site = nodes.site
    placed = site.alice.ok_json("volume", "create", "pl", "--node", "consumer-a")["id"]
    assert local_id(placed, "consumer-a")
    directory = nodes.a_host.state_dir / "volumes" / local_id(placed, "consumer-a")
    directory.mkdir(exist_ok=True)
    (directory / "f").write_text("placed\n")

    # Commit through the controller, by the admin and by the node itself: the snapshot is made
    # on consumer-a, and its details come from there (not "no record on the controller").
    by_admin = site.alice.run("snapshot", "commit", "pl", "--name", "s1", "-o", "json")
    assert by_admin.rc == 0, by_admin.describe()
    s1 = by_admin.json()
    assert s1["node"] == "consumer-a" and local_id(s1["id"], "consumer-a"), s1
    by_node = site.a.run("snapshot", "commit", "pl", "--name", "s2", "-o", "json")
    assert by_node.rc == 0, by_node.describe()

    # Listed (all, and of the placed volume by id and by name) and shown by name, from either seat.
    for cli in (site.alice, site.a):
        everything = cli.run("snapshot", "list", "-o", "json")
        assert everything.rc == 0, everything.describe()
        assert names_in(everything.json()) == ["s1", "s2"], everything.json()
        for volume in (placed, "pl"):
            of_volume = cli.run("snapshot", "list", "--volume", volume, "-o", "json")
            assert of_volume.rc == 0, of_volume.describe()
            assert names_in(of_volume.json()) == ["s1", "s2"], of_volume.json()
        shown = cli.run("snapshot", "show", "s1", "-o", "json")
        assert shown.rc == 0, shown.describe()
        assert shown.json()["id"] == s1["id"] and shown.json()["commit"] == s1["commit"], shown.json()
    table = site.alice.ok("snapshot", "list").stdout
    assert "NODE" in table and "consumer-a" in table, table

    # The other node's certificate sees the controller host's and its own only.
    assert site.b.run("snapshot", "show", "s1").rc == EXIT_NOT_FOUND

    # Deleted by name through the controller: it is gone from consumer-a, not "nothing to delete".
    deleted = site.alice.run("volume", "delete", "pl", "-o", "json")
    assert deleted.rc == 0, deleted.describe()
    assert deleted.json()["deleted"] is True and deleted.json()["id"] == placed, deleted.json()
    assert local_id(placed, "consumer-a") not in stored_volumes(nodes.a_host)
    assert "pl" not in names_in(site.alice.ok_json("volume", "list"))


def test_a_name_of_several_volumes_or_snapshots_is_refused_naming_each_id(nodes):
    site = nodes.site
    here = site.alice.ok_json("volume", "create", "dup")["id"]
    there = site.alice.ok_json("volume", "create", "dup", "--node", "consumer-a")["id"]
    assert here != there

    for cli in (site.alice, site.a):  # consumer-a's certificate sees both as well
        shown = cli.run("volume", "show", "dup")
        assert shown.rc == EXIT_NOT_FOUND, shown.describe()
        assert here in shown.stderr and there in shown.stderr and "by its id" in shown.stderr, shown.stderr
    # Never "nothing to delete" for what exists: nothing is deleted, both are named.
    refused = site.alice.run("volume", "delete", "dup")
    assert refused.rc == EXIT_NOT_FOUND, refused.describe()
    assert here in refused.stderr and there in refused.stderr, refused.stderr
    ids = {v["id"] for v in site.alice.ok_json("volume", "list")}
    assert {here, there} <= ids, ids
    # consumer-b sees only the controller host's: the name is unique there.
    assert site.b.ok_json("volume", "show", "dup")["id"] == here

    # By id, each is found and deleted.
    for volume_id in (here, there):
        assert site.alice.ok_json("volume", "show", volume_id)["id"] == volume_id
        assert site.alice.ok_json("volume", "delete", volume_id)["deleted"] is True

    # Snapshots of one name on two hosts likewise.
    site.alice.ok("volume", "create", "v1")
    site.alice.ok("volume", "create", "v2", "--node", "consumer-a")
    first = site.alice.ok_json("snapshot", "commit", "v1", "--name", "same")
    second = site.alice.ok_json("snapshot", "commit", "v2", "--name", "same")
    shown = site.alice.run("snapshot", "show", "same")
    assert shown.rc == EXIT_NOT_FOUND, shown.describe()
    assert first["id"] in shown.stderr and second["id"] in shown.stderr, shown.stderr
    refused = site.alice.run("snapshot", "delete", "same")
    assert refused.rc == EXIT_NOT_FOUND, refused.describe()
    assert len(site.alice.ok_json("snapshot", "list")) == 2


def test_a_snapshot_pulled_to_a_node_restores_there_with_its_normal_configuration(nodes):
    site = nodes.site
    a = nodes.a
    a.create("src")
    (nodes.volume_dir(a, "src") / "f").write_text("from a\n")
    taken = a.ok_json("snapshot", "commit", "src", "--name", "s1")

    # consumer-b comes to hold s1 (the admin has it pull from consumer-a; however it got there),
    # then consumer-b's CLI as README has it set up, its config naming the controller, restores it.
    pushed = nodes.push("s1")
    assert pushed.rc == 0, pushed.describe()
    restored = site.b.run("snapshot", "restore", "s1", "--name", "copy", "-o", "json")
    assert restored.rc == 0, restored.describe()
    copy = restored.json()
    assert local_id(copy["id"], "consumer-b") in stored_volumes(nodes.b_host), copy
    assert (nodes.b_host.state_dir / "volumes" / local_id(copy["id"], "consumer-b") / "f").read_text() == "from a\n"

    # The controller lists each copy with where it is.
    listed = site.alice.ok_json("snapshot", "list")
    assert sorted((s["name"], s["node"]) for s in listed) == [("s1", "consumer-a"), ("s1", "consumer-b")], listed
    assert {local_id(s["id"], s["node"]) for s in listed} == {taken["id"]}, listed

    # The admin sees two copies: the name alone is refused naming both; --node picks one.
    ambiguous = site.alice.run("snapshot", "restore", "s1", "--name", "copy-2")
    assert ambiguous.rc == EXIT_NOT_FOUND, ambiguous.describe()
    assert all(s["id"] in ambiguous.stderr for s in listed), ambiguous.stderr
    picked = site.alice.run("snapshot", "restore", "s1", "--name", "copy-2", "--node", "consumer-b", "-o", "json")
    assert picked.rc == 0, picked.describe()
    assert local_id(picked.json()["id"], "consumer-b") in stored_volumes(nodes.b_host)


def test_the_controller_hosts_own_cli_reaches_placed_volumes_with_serves_certificate(nodes):
    site = nodes.site
    placed = site.alice.ok_json("volume", "create", "pl", "--node", "consumer-a")["id"]
    # Without a certificate the controller host's CLI knows only its own host's volumes.
    assert site.ctl.run("volume", "show", "pl").rc == EXIT_NOT_FOUND

    # With serve's certificate configured (as serve reads it from the same config file), it asks
    # the node as serve does: the placed volume is shown, listed and committed by name.
    cert, key, ca = site.identity("controller")
    site.ctl.env.update({"ROSETCTL_TLS_CERT": str(cert), "ROSETCTL_TLS_KEY": str(key), "ROSETCTL_TLS_CA": str(ca)})
    shown = site.ctl.run("volume", "show", "pl", "-o", "json")
    assert shown.rc == 0, shown.describe()
    assert shown.json()["id"] == placed, shown.json()
    assert "pl" in names_in(site.ctl.ok_json("volume", "list"))
    taken = site.ctl.run("snapshot", "commit", "pl", "--name", "s1", "-o", "json")
    assert taken.rc == 0, taken.describe()
    assert taken.json()["node"] == "consumer-a", taken.json()
    assert site.alice.ok_json("snapshot", "show", "s1")["node"] == "consumer-a"

    # Another certificate (a node's) is no controller's: the nodes are not asked with it.
    cert, key, ca = site.identity("consumer-b")
    site.ctl.env.update({"ROSETCTL_TLS_CERT": str(cert), "ROSETCTL_TLS_KEY": str(key)})
    assert site.ctl.run("volume", "show", "pl").rc == EXIT_NOT_FOUND


# ---------------------------------------------------------------- which host lacks what

def test_errors_name_the_host_that_lacks_the_roset_key_or_roset_fuse(site):
    # The controller has the Roset settings (build_site); consumer-a has neither key nor roset-fuse.
    made = site.a.run("volume", "create", "team", "-p", "provider=roset", "-o", "json")
    assert made.rc == 0, made.describe()
    no_key = site.a.run("volume", "connect", "team", "--target", site.consumer_a.dir / "team")
    assert no_key.rc == EXIT_PERMISSION, no_key.describe()
    assert "no Roset API key on this host" in no_key.stderr and "roset-fuse" in no_key.stderr, no_key.stderr
    use_roset(site, site.a)
    site.a.env["ROSET_FUSE_BINARY"] = "roset-fuse-not-installed"
    no_fuse = site.a.run("volume", "connect", "team", "--target", site.consumer_a.dir / "team")
    assert no_fuse.rc == EXIT_PRECONDITION, no_fuse.describe()
    assert "not on this host's PATH" in no_fuse.stderr, no_fuse.stderr

    # A controller without Roset settings: the consumer's own key changes nothing, and the
    # message says it is the controller host that lacks one.
    site.kill_serve()
    site.roset_env = {}
    site.start_serve()
    refused = site.a.run("volume", "create", "data", "-p", "provider=roset")
    assert refused.rc == EXIT_PERMISSION, refused.describe()
    assert "no Roset API key on the controller host" in refused.stderr, refused.stderr
    assert "a consumer's own key does not reach it" in refused.stderr, refused.stderr


def test_serve_logs_which_configuration_file_it_read(nodes):
    config = nodes.b_host.config_dir / "config.toml"  # consumer-b's, which its serve reads
    assert f'configuration file "{config}" read' in nodes.serve_b.output(), nodes.serve_b.output()


def test_a_nodes_own_cli_says_its_lists_are_this_hosts_alone(nodes):
    """A node's own CLI (no --controller) answers from its own store and registry: in table and
    JSON output alike it says so on stderr and names --controller (stdout stays the list)."""
    site = nodes.site
    site.alice.ok_json("volume", "create", "elsewhere")  # the controller host's: not in A's store
    own = nodes.a
    # Its serve recorded which controller this state directory is a node of: the note names both.
    node_of = f'rosetctl: note: this host is node "consumer-a" of controller {site.address}; without --controller'
    for output in ([], ["-o", "json"]):
        for verb, words in ((["volume", "list"], ONLY_THIS_HOST), (["snapshot", "list"], ONLY_THIS_HOST),
                            (["node", "list"], ONLY_THIS_REGISTRY)):
            done = own.run(*verb, *output)
            assert done.rc == 0 and node_of in done.stderr, done.describe()
            assert words in done.stderr, done.describe()
            assert "elsewhere" not in done.stdout, done.describe()
        shown = own.run("node", "show", "consumer-b", *output)
        assert shown.rc == EXIT_NOT_FOUND and ONLY_THIS_REGISTRY in shown.stderr, shown.describe()
        assert f"of controller {site.address}" in shown.stderr, shown.describe()
    assert own.run("volume", "list", "-o", "json").json() == [], "expected JSON on stdout, the note apart"
    # Through the controller, the whole view and no note.
    through = site.a.run("volume", "list", "-o", "json")
    assert through.rc == 0 and "elsewhere" in through.stdout and "note:" not in through.stderr, through.describe()


def test_an_iscsi_create_on_a_node_without_tgtd_names_the_controller(nodes):
    """Without --controller a node's CLI would make an iscsi volume with its own tgtd, which it has
    not: exit 6, saying tgtd runs on the controller host and naming --controller."""
    made = nodes.a.run("volume", "create", "iv", "-p", "provider=iscsi", "--size", "64Mi")
    assert made.rc == EXIT_UNAVAILABLE, made.describe()
    assert "tgtd is not reachable" in made.stderr, made.stderr
    assert "where tgtd runs on the controller host, run it with --controller ADDRESS" in made.stderr, made.stderr


ONE_HOST_LISTS = (["volume", "list"], ["snapshot", "list"], ["node", "list"])


def test_a_one_host_cli_lists_without_a_note(cli):
    """The quickstart's host has no controller at all: its lists are everything there is, so no
    note about --controller, in table or JSON output, nor on what it does not find."""
    cli.ok_json("volume", "create", "solo")
    assert cli.run("snapshot", "commit", "solo", "--name", "s1").rc == 0
    for output in ([], ["-o", "json"]):
        for verb in ONE_HOST_LISTS:
            done = cli.run(*verb, *output)
            assert done.rc == 0 and done.stderr == "", done.describe()
    assert [v["name"] for v in cli.ok_json("volume", "list")] == ["solo"]
    missing = cli.run("volume", "show", "nowhere")
    assert missing.rc == EXIT_NOT_FOUND and "--controller" not in missing.stderr, missing.describe()
    gone = cli.run("volume", "delete", "nowhere")
    assert gone.rc == 0 and "note:" not in gone.stderr and "on this host" not in gone.stdout, gone.describe()


def test_a_node_record_in_the_state_directory_is_checked_before_it_is_believed(cli):
    """The record a node's serve leaves (node_id, controller) is read as untrusted input: a good one
    gives the note, one that is malformed, readable by others or a symbolic link is ignored."""
    cli.ok_json("volume", "create", "solo")
    record = cli.state_dir / "node-of-controller"

    def listed() -> str:
        done = cli.run("volume", "list", "-o", "json")
        assert done.rc == 0 and [v["name"] for v in done.json()] == ["solo"], done.describe()
        return done.stderr

    record.write_text("node_id=n1\ncontroller=192.0.2.1:7443\n")
    record.chmod(0o600)
    assert 'this host is node "n1" of controller 192.0.2.1:7443' in listed()
    for bad in ("node_id=n1\n", "node_id=n1\ncontroller=no port\n", "node_id=../x\ncontroller=h:1\n",
                "node_id=n1\ncontroller=h:1\nmore=1\n", "\x00" * 5000):
        record.write_text(bad)
        assert listed() == "", bad
    record.write_text("node_id=n1\ncontroller=192.0.2.1:7443\n")
    record.chmod(0o644)
    assert listed() == ""
    real = cli.state_dir / "elsewhere"
    record.rename(real)
    real.chmod(0o600)
    record.symlink_to(real)
    assert listed() == ""
