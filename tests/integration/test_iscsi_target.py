"""The iSCSI target backend (src/providers/iscsi, tgt) against a real tgtd, checked from the
initiator's side with libiscsi: who may log in, what LUN they see, CHAP, resize, removal, and a
tgtd that lost everything in a restart. Driven through tests/tools/iscsi_target_tool."""
from __future__ import annotations

import os
import subprocess

import tgtd_lab
from tgtd_lab import INITIATOR_A, INITIATOR_B, IQN_PREFIX, Lun, read_lun, visible_luns

MiB = 1024 * 1024


def make_image(workdir, name: str, size: int):
    path = workdir / f"{name}.img"
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def iqn(volume: str) -> str:
    return f"{IQN_PREFIX}:{volume}"


def test_bound_initiator_sees_one_lun_of_the_volume_size_and_serial(target_tool, tgtd, workdir):
    image = make_image(workdir, "vol-a", 64 * MiB)
    info = target_tool.ensure("vol-a", image)
    assert info["iqn"] == iqn("vol-a") and info["serial"] == "vol-a" and info["has_lun"], info
    assert info["backing_path"] == str(image) and info["initiators"] == [], info
    target_tool.ok("bind", "vol-a", INITIATOR_A)

    assert read_lun(tgtd.portal, iqn("vol-a"), INITIATOR_A) == Lun("vol-a", 64 * MiB)
    listing = visible_luns(tgtd.portal, INITIATOR_A)
    assert listing.rc == 0 and f"Target:{iqn('vol-a')}" in listing.stdout, listing.describe()
    disks = [line for line in listing.stdout.splitlines() if "DIRECT_ACCESS" in line]
    assert len(disks) == 1 and disks[0].split()[0] == "Lun:1", listing.describe()

    # Every call again: nothing changes, nothing fails.
    assert target_tool.ensure("vol-a", image) == {**info, "initiators": [INITIATOR_A]}
    target_tool.ok("bind", "vol-a", INITIATOR_A)
    assert [t["volume_id"] for t in target_tool.list()] == ["vol-a"]
    assert target_tool.list()[0]["initiators"] == [INITIATOR_A]


def test_an_initiator_not_bound_is_refused(target_tool, tgtd, workdir):
    target_tool.ensure("vol-b", make_image(workdir, "vol-b", 16 * MiB))
    target_tool.ok("bind", "vol-b", INITIATOR_A)
    refused = read_lun(tgtd.portal, iqn("vol-b"), INITIATOR_B)
    assert not isinstance(refused, Lun) and refused.rc != 0, refused
    assert "Login Failed" in refused.stderr, refused.describe()
    # Discovery does not even name the target to it.
    assert iqn("vol-b") not in visible_luns(tgtd.portal, INITIATOR_B).stdout
    # A target nobody is bound to admits nobody.
    target_tool.ensure("vol-c", make_image(workdir, "vol-c", 16 * MiB))
    assert not isinstance(read_lun(tgtd.portal, iqn("vol-c"), INITIATOR_A), Lun)


def test_after_unbind_the_initiator_is_refused_too(target_tool, tgtd, workdir):
    target_tool.ensure("vol-u", make_image(workdir, "vol-u", 16 * MiB))
    target_tool.ok("bind", "vol-u", INITIATOR_A)
    assert isinstance(read_lun(tgtd.portal, iqn("vol-u"), INITIATOR_A), Lun)
    target_tool.ok("unbind", "vol-u", INITIATOR_A)
    assert not isinstance(read_lun(tgtd.portal, iqn("vol-u"), INITIATOR_A), Lun)
    assert target_tool.list()[0]["initiators"] == []
    target_tool.ok("unbind", "vol-u", INITIATOR_A)       # again: already done
    target_tool.ok("unbind", "no-such-vol", INITIATOR_A)  # no target: nobody can log in anyway


def test_chap_refuses_a_wrong_password_and_keeps_it_off_every_output(target_tool, tgtd, workdir):
    password = "s3cret-" + os.urandom(6).hex()
    target_tool.ensure("vol-chap", make_image(workdir, "vol-chap", 16 * MiB))
    target_tool.ok("bind", "vol-chap", INITIATOR_A)
    set_once = target_tool.set_chap("vol-chap", "alice", password)
    set_twice = target_tool.set_chap("vol-chap", "alice", password)  # idempotent
    for result in (set_once, set_twice):
        assert result.rc == 0 and password not in result.stdout + result.stderr, result.describe()
        # The account is the volume's own: tgtd's accounts are global (see the test below).
        assert result.json() == {"chap_user": "vol-chap:alice"}, result.describe()
    assert target_tool.list()[0]["chap_users"] == ["vol-chap:alice"]

    account = "vol-chap:alice"
    assert read_lun(tgtd.portal, iqn("vol-chap"), INITIATOR_A, chap=(account, password)) == Lun("vol-chap", 16 * MiB)
    wrong = read_lun(tgtd.portal, iqn("vol-chap"), INITIATOR_A, chap=(account, password + "x"))
    assert not isinstance(wrong, Lun) and "Authentication failure" in wrong.stderr, wrong
    no_chap = read_lun(tgtd.portal, iqn("vol-chap"), INITIATOR_A)
    assert not isinstance(no_chap, Lun), no_chap
    # CHAP does not replace the ACL: the right password from another initiator is refused.
    assert not isinstance(read_lun(tgtd.portal, iqn("vol-chap"), INITIATOR_B, chap=(account, password)), Lun)

    # A bad password is refused before tgtd sees it, without being quoted back.
    bad = target_tool.fails("INVALID_ARGUMENT", "set-chap", "vol-chap", "alice", input="short,pw\n")
    assert "short,pw" not in bad.stderr and "alice" in bad.stderr

    target_tool.ok("clear-chap", "vol-chap")
    assert isinstance(read_lun(tgtd.portal, iqn("vol-chap"), INITIATOR_A), Lun)
    assert target_tool.list()[0]["chap_users"] == []
    accounts = tgtd.tgtadm("--mode", "account", "--op", "show")
    assert "alice" not in accounts.stdout, accounts.describe()


def test_resize_makes_the_lun_report_the_grown_image(target_tool, tgtd, workdir):
    image = make_image(workdir, "vol-r", 32 * MiB)
    target_tool.ensure("vol-r", image)
    target_tool.ok("bind", "vol-r", INITIATOR_A)
    os.truncate(image, 96 * MiB)
    # tgtd read the size once, at LUN creation.
    assert read_lun(tgtd.portal, iqn("vol-r"), INITIATOR_A) == Lun("vol-r", 32 * MiB)
    target_tool.ok("resize", "vol-r", str(image))
    target_tool.ok("resize", "vol-r", str(image))
    assert read_lun(tgtd.portal, iqn("vol-r"), INITIATOR_A) == Lun("vol-r", 96 * MiB)
    assert target_tool.list()[0]["initiators"] == [INITIATOR_A]
    target_tool.fails("NOT_FOUND", "resize", "vol-gone", str(image))
    target_tool.fails("FAILED_PRECONDITION", "resize", "vol-r", str(make_image(workdir, "other", MiB)))


def test_remove_takes_the_target_away_and_is_idempotent(target_tool, tgtd, workdir):
    target_tool.ensure("vol-d", make_image(workdir, "vol-d", 16 * MiB))
    target_tool.ensure("vol-keep", make_image(workdir, "vol-keep", 16 * MiB))
    target_tool.ok("bind", "vol-d", INITIATOR_A)
    assert target_tool.set_chap("vol-d", "dave", "dave-password-1").rc == 0
    target_tool.ok("remove", "vol-d")
    assert [t["volume_id"] for t in target_tool.list()] == ["vol-keep"]
    refused = read_lun(tgtd.portal, iqn("vol-d"), INITIATOR_A, chap=("vol-d:dave", "dave-password-1"))
    assert not isinstance(refused, Lun), refused
    assert "dave" not in tgtd.tgtadm("--mode", "account", "--op", "show").stdout
    target_tool.ok("remove", "vol-d")


def test_a_restarted_tgtd_has_lost_everything_and_the_list_shows_it(target_tool, tgtd, workdir):
    image = make_image(workdir, "vol-k", 16 * MiB)
    target_tool.ensure("vol-k", image)
    target_tool.ok("bind", "vol-k", INITIATOR_A)
    target_tool.ok("health")
    tgtd.kill()
    down = target_tool.fails("UNAVAILABLE", "health")
    assert f"control port {tgtd.control_port}" in down.stderr, down.describe()
    target_tool.fails("UNAVAILABLE", "ensure", "vol-k", str(image))
    target_tool.fails("UNAVAILABLE", "list")

    tgtd.start()
    target_tool.ok("health")
    assert target_tool.list() == []  # what the provider re-creates from its database
    target_tool.fails("NOT_FOUND", "bind", "vol-k", INITIATOR_A)
    target_tool.ensure("vol-k", image)
    target_tool.ok("bind", "vol-k", INITIATOR_A)
    assert read_lun(tgtd.portal, iqn("vol-k"), INITIATOR_A) == Lun("vol-k", 16 * MiB)


def test_bad_requests_name_what_is_wrong(target_tool, workdir):
    missing = target_tool.fails("NOT_FOUND", "ensure", "vol-m", str(workdir / "missing.img"))
    assert "missing.img" in missing.stderr
    (workdir / "dir.img").mkdir()
    target_tool.fails("FAILED_PRECONDITION", "ensure", "vol-m", str(workdir / "dir.img"))
    image = make_image(workdir, "vol-m", MiB)
    bad_id = target_tool.fails("INVALID_ARGUMENT", "ensure", "Vol_M", str(image))
    assert '"Vol_M"' in bad_id.stderr
    target_tool.fails("INVALID_ARGUMENT", "ensure", "vol-m", "relative.img")
    target_tool.fails("NOT_FOUND", "bind", "vol-m", INITIATOR_A)
    target_tool.ensure("vol-m", image)
    target_tool.fails("INVALID_ARGUMENT", "bind", "vol-m", "node-a")
    target_tool.fails("FAILED_PRECONDITION", "ensure", "vol-m", str(make_image(workdir, "other", MiB)))
    assert target_tool.list()[0]["backing_path"] == str(image)


def test_one_chap_user_on_two_volumes_is_two_accounts_and_a_new_password_changes_one(target_tool, tgtd, workdir):
    for volume in ("vol-s1", "vol-s2"):
        target_tool.ensure(volume, make_image(workdir, volume, 8 * MiB))
        target_tool.ok("bind", volume, INITIATOR_A)
        shared = target_tool.set_chap(volume, "shared", "first-password")
        assert shared.rc == 0 and shared.json() == {"chap_user": f"{volume}:shared"}, shared.describe()
    assert tgtd.accounts() == ["vol-s1:shared", "vol-s2:shared"]
    # A StorageClass's one secret serves many volumes: a new password replaces one volume's account.
    s2_before = tgtd.targets()[iqn("vol-s2")]
    assert target_tool.set_chap("vol-s1", "shared", "second-password").rc == 0
    assert tgtd.targets()[iqn("vol-s2")] == s2_before
    for volume, now, before in (("vol-s1", "second-password", "first-password"),
                                ("vol-s2", "first-password", "second-password")):
        assert isinstance(read_lun(tgtd.portal, iqn(volume), INITIATOR_A, chap=(f"{volume}:shared", now)), Lun)
        assert not isinstance(read_lun(tgtd.portal, iqn(volume), INITIATOR_A, chap=(f"{volume}:shared", before)), Lun)
    # Another user replaces the first on its target, whose old account goes; the other stays.
    assert target_tool.set_chap("vol-s1", "own-user", "own-password-1").rc == 0
    assert [t["chap_users"] for t in target_tool.list()] == [["vol-s1:own-user"], ["vol-s2:shared"]]
    assert tgtd.accounts() == ["vol-s1:own-user", "vol-s2:shared"]


def test_set_chap_never_changes_the_password_of_an_account_another_target_uses(target_tool, tgtd, workdir):
    """Security issue #31, row 9, at the backend: tgtd keeps one password per account for every
    target bound to it. Before the fix, set-chap on vol-b with vol-a's user re-created that
    account with vol-b's password and bound it to both targets: vol-a's password stopped working."""
    for volume in ("vol-a", "vol-b", "vol-y"):
        target_tool.ensure(volume, make_image(workdir, volume, 8 * MiB))
    target_tool.ok("bind", "vol-a", INITIATOR_A)
    target_tool.ok("bind", "vol-b", INITIATOR_B)
    assert target_tool.set_chap("vol-a", "alice", "alice-password").json() == {"chap_user": "vol-a:alice"}
    victim = tgtd.targets()[iqn("vol-a")]
    for user in ("alice", "vol-a:alice"):
        taken = target_tool.set_chap("vol-b", user, "mallory-password")
        assert taken.rc == 0 and taken.json() == {"chap_user": f"vol-b:{user}"}, taken.describe()
    assert tgtd.targets()[iqn("vol-a")] == victim
    assert tgtd.accounts() == ["vol-a:alice", "vol-b:vol-a:alice"]
    assert isinstance(read_lun(tgtd.portal, iqn("vol-a"), INITIATOR_A, chap=("vol-a:alice", "alice-password")), Lun)
    stolen = read_lun(tgtd.portal, iqn("vol-a"), INITIATOR_A, chap=("vol-a:alice", "mallory-password"))
    assert not isinstance(stolen, Lun), stolen

    # An account of a volume's name that another target uses (bound there by hand, outside
    # rosetctl) is refused, naming that target, and nothing changes on it.
    assert tgtd.tgtadm("--mode", "account", "--op", "new", "--user", "vol-x:eve", "--password", "eves-password").rc == 0
    tid_y = next(int(line.split()[1].rstrip(":")) for line in
                 tgtd.tgtadm("--mode", "target", "--op", "show").stdout.splitlines() if line.endswith(iqn("vol-y")))
    assert tgtd.tgtadm("--mode", "account", "--op", "bind", "--tid", str(tid_y), "--user", "vol-x:eve").rc == 0
    target_tool.ensure("vol-x", make_image(workdir, "vol-x", 8 * MiB))
    before = tgtd.targets()
    refused = target_tool.fails("ALREADY_EXISTS", "set-chap", "vol-x", "eve", input="mallory-password\n")
    assert refused.stderr == (f'ALREADY_EXISTS: CHAP account "vol-x:eve" of volume "vol-x" is also bound to '
                              f'tgtd\'s target "{iqn("vol-y")}", and rosetctl never changes the password of an '
                              "account another target uses; unbind it there (tgtadm --mode account --op unbind) "
                              "or choose another chap-user\n"), refused.describe()
    assert "mallory-password" not in refused.stdout + refused.stderr
    assert tgtd.targets() == before
    target_tool.ok("bind", "vol-y", INITIATOR_A)
    assert isinstance(read_lun(tgtd.portal, iqn("vol-y"), INITIATOR_A, chap=("vol-x:eve", "eves-password")), Lun)


def test_ensure_repairs_a_target_left_half_made(target_tool, tgtd, workdir):
    image = make_image(workdir, "vol-h", 8 * MiB)
    # What a crash between tgtadm calls leaves: the target, offline, without its LUN.
    assert tgtd.tgtadm("--mode", "target", "--op", "new", "--tid", "7", "--targetname", iqn("vol-h")).rc == 0
    assert tgtd.tgtadm("--mode", "target", "--op", "update", "--tid", "7", "--name", "state",
                       "--value", "offline").rc == 0
    info = target_tool.ensure("vol-h", image)
    assert info["has_lun"] and info["serial"] == "vol-h" and info["backing_path"] == str(image), info
    target_tool.ok("bind", "vol-h", INITIATOR_A)
    assert read_lun(tgtd.portal, iqn("vol-h"), INITIATOR_A) == Lun("vol-h", 8 * MiB)
    assert "State: ready" in tgtd.tgtadm("--mode", "target", "--op", "show").stdout


def test_a_tgtd_that_drops_the_request_is_unavailable_not_an_empty_list(target_tool, workdir):
    # tgtadm exits 0 with nothing on stdout when tgtd closes the control connection mid-request
    # (tgtd crashed): that must not read as "tgtd has no targets".
    fake_bin = workdir / "bin"
    fake_bin.mkdir()
    fake = fake_bin / "tgtadm"
    fake.write_text("#!/bin/sh\necho 'tgtadm: tgtd closed the socket' >&2\nexit 0\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    done = subprocess.run([target_tool.binary, "--control-port", str(target_tool.tgtd.control_port), "list"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("UNAVAILABLE: "), (done.stdout, done.stderr)
    assert "closed" in done.stderr


def test_a_tgtd_with_many_targets_gets_more_and_lists_them_all(target_tool, tgtd, workdir):
    # Past some sixty targets tgtadm's report is over 64 KiB, where the backend used to stop
    # reading it: the target just made "vanished" (exit 6 in the seat matrix), and a taken
    # target id looked free ("other tgtadm users kept taking the free target ids").
    count = 90
    for i in range(count):
        info = target_tool.ensure(f"many-{i}", make_image(workdir, f"many-{i}", 1 * MiB))
        assert info["serial"] == f"many-{i}" and info["has_lun"], info
    assert len(tgtd.tgtadm("--mode", "target", "--op", "show").stdout) > 64 * 1024
    listed = sorted(t["volume_id"] for t in target_tool.list())
    assert listed == sorted(f"many-{i}" for i in range(count))
    # One removed from the middle: its id is the free one a new target takes.
    target_tool.ok("remove", "many-7")
    info = target_tool.ensure("many-new", make_image(workdir, "many-new", 1 * MiB))
    assert info["serial"] == "many-new", info
    assert len(target_tool.list()) == count


def test_a_session_alias_that_forges_report_lines_is_refused_not_believed(target_tool, tgtd, workdir):
    # tgtd prints each session's initiator alias as it came: a host bound to its own volume's
    # target can add lines that read as another target. Here node-a forges a copy of vol-v's
    # target with node-a on its ACL and no LUN; believed, it would hide vol-v's real ACL and LUN.
    for volume in ("vol-own", "vol-v"):
        target_tool.ensure(volume, make_image(workdir, volume, 16 * MiB))
    target_tool.ok("bind", "vol-own", INITIATOR_A)
    target_tool.ok("bind", "vol-v", INITIATOR_B)
    before = tgtd.targets()
    victim_tid = tgtd.tgtadm("--mode", "target", "--op", "show").stdout.split(f": {iqn('vol-v')}")[0].rsplit("Target ", 1)[1]
    forged = (f"host\nTarget {victim_tid}: {iqn('vol-v')}\n    System information:\n        Driver: iscsi\n"
              "        State: ready\n    I_T nexus information:\n        I_T nexus: 9\n"
              f"            Initiator: {INITIATOR_A} alias: x")
    session = tgtd_lab.login_with_alias(tgtd.portal, iqn("vol-own"), INITIATOR_A, forged)
    try:
        shown = tgtd.tgtadm("--mode", "target", "--op", "show").stdout
        assert shown.count(f": {iqn('vol-v')}\n") == 2, shown  # the forgery is in tgtd's report
        refused = target_tool.fails("INTERNAL", "list")
        assert "initiator alias" in refused.stderr and "twice" in refused.stderr, refused.describe()
        # Nothing acts on what the report says while it cannot be trusted.
        target_tool.fails("INTERNAL", "unbind", "vol-v", INITIATOR_B)
        target_tool.fails("INTERNAL", "bind", "vol-v", INITIATOR_A)
    finally:
        session.close()
    tgtd_lab.wait_until(lambda: target_tool.run("list").rc == 0, 10, "the report once the session ended")
    assert tgtd.targets() == before
    listed = {t["volume_id"]: t for t in target_tool.list()}
    assert listed["vol-v"]["initiators"] == [INITIATOR_B] and listed["vol-v"]["has_lun"], listed
