"""Node isolation on the iscsi provider (security issue #31, rows 8, 9 and 13), against a real tgtd
of the test's own and checked from the initiator's side with libiscsi (tgtd_lab.py): a host that
claims a mapped node's initiator name gets nothing without that node's own CHAP secret, one node
can never take over another node's CHAP account or initiator name, and a node that changes its
initiator name takes its volumes' ACLs along. Each attack is followed by what tgtd holds for the
victim (`tgtadm --op show`) and the registry's records, which must not have changed."""
from __future__ import annotations

import json
import os
import secrets
import sqlite3
import stat

from tgtd_lab import INITIATOR_A, INITIATOR_B, IQN_PREFIX, Lun, kept_chap, read_lun
from rosetctl_cli import EXIT_CONFLICT, EXIT_PRECONDITION, EXIT_USAGE

MiB = 1024 * 1024
# node-a's initiator name after it changed (a host re-installed, or its name regenerated).
INITIATOR_A_NEW = "iqn.2026-11.io.roset.test:node-a-reinstalled"


def provider_flags(tgtd) -> list[str]:
    return ["--provider", "iscsi", "--iscsi-portal", tgtd.portal, "--iscsi-tgt-control-port", str(tgtd.control_port)]


def iqn(volume_id: str) -> str:
    return f"{IQN_PREFIX}:{volume_id}"


def chap_file(workdir, name: str, user: str, password: str):
    path = workdir / f"{name}.json"
    path.write_text(json.dumps({"chap-user": user, "chap-password": password}))
    os.chmod(path, 0o600)
    return path


def nodes(cli) -> dict[str, str | None]:
    """The registry's records: each node's initiator name."""
    return {node["node_id"]: node["iscsi_initiator"] for node in cli.ok_json("node", "list")}


def logs_in(tgtd, volume_id: str, initiator: str, chap=None, target_chap=None) -> bool:
    seen = read_lun(tgtd.portal, iqn(volume_id), initiator, chap=chap, target_chap=target_chap)
    if isinstance(seen, Lun):
        assert seen.serial == volume_id, seen
        return True
    return False


def test_a_chap_user_of_another_volume_never_takes_over_its_account(cli, tgtd, workdir):
    """Row 9: node-b maps its own volume with node-a's CHAP user and a password of its own. tgtd
    keeps one password per account for every target bound to it, so before the fix node-a's
    password stopped working. Now every volume's account is its own ("<volume id>:<user>")."""
    flags = provider_flags(tgtd)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    cli.ok(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_B)
    victim = cli.ok_json(*flags, "volume", "create", "victim", "--size", "16Mi")["id"]
    own = cli.ok_json(*flags, "volume", "create", "attacker", "--size", "16Mi")["id"]
    password_a = "node-a-" + secrets.token_hex(8)
    password_b = "node-b-" + secrets.token_hex(8)
    mapped = cli.ok_json(*flags, "--secrets-file", chap_file(workdir, "a", "alice", password_a),
                         "volume", "map", "victim", "--node", "node-a")
    account_a = mapped["publish_context"]["chap-user"]
    assert account_a == f"{victim}:alice", mapped
    victim_before, accounts_before = tgtd.targets()[iqn(victim)], tgtd.accounts()
    assert victim_before["accounts"] == [account_a, f"{victim}:target (outgoing)"], victim_before
    assert victim_before["acl"] == [INITIATOR_A], victim_before

    # The attack, with the CHAP user node-a was given and with the account name tgtd knows it by.
    for user in ("alice", account_a):
        attack = cli.run_json(*flags, "--secrets-file", chap_file(workdir, "b", user, password_b),
                              "volume", "map", "attacker", "--node", "node-b")
        assert attack.rc == 0, attack.describe()
        assert attack.json()["publish_context"]["chap-user"] == f"{own}:{user}", attack.describe()
        assert password_b not in attack.stdout + attack.stderr

    # Nothing changed on the victim's target; node-b's volume holds an account of its own.
    assert tgtd.targets()[iqn(victim)] == victim_before
    assert tgtd.accounts() == sorted(accounts_before + [f"{own}:{account_a}", f"{own}:target"])
    assert tgtd.targets()[iqn(own)]["accounts"] == [f"{own}:{account_a}", f"{own}:target (outgoing)"]
    # node-a's password still opens its volume; node-b's opens it under no name.
    assert logs_in(tgtd, victim, INITIATOR_A, chap=(account_a, password_a))
    for user in ("alice", account_a, f"{own}:alice", f"{own}:{account_a}"):
        assert not logs_in(tgtd, victim, INITIATOR_A, chap=(user, password_b)), user
    assert logs_in(tgtd, own, INITIATOR_B, chap=(f"{own}:{account_a}", password_b))
    assert nodes(cli) == {"node-a": INITIATOR_A, "node-b": INITIATOR_B}


def test_an_initiator_name_in_capitals_or_not_an_iscsi_name_is_refused_at_registration(cli, tgtd, state_dir):
    """Row 13: before the fix "IQN.…" was accepted, and every map to the node then failed blaming
    it. iSCSI names are case-insensitive (RFC 3722), but open-iscsi sends its name as its file
    writes it and tgtd compares ACL entries byte for byte (a login as "IQN.…" is refused by an
    ACL holding "iqn.…"), so folding it would only move the failure to the node's login: the
    registration is refused, saying what to write."""
    flags = provider_flags(tgtd)
    shouted = INITIATOR_A.upper()
    refused = cli.run(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", shouted)
    assert refused.rc == EXIT_USAGE, refused.describe()
    assert (f'iscsi_initiator "{shouted}" is not written in lower case, the normal form of iSCSI names: '
            "initiators send their name as written and tgtd compares names byte for byte, so write it "
            f'as "{INITIATOR_A}" (in /etc/iscsi/initiatorname.iscsi on the node, then restart iscsid)'
            ) in refused.stderr, refused.describe()
    for bad, says in (("iqn.2026-13.io.roset.test:x", "an iqn. name is iqn.YYYY-MM.reversed.domain"),
                      ("eui.1234", "an eui. name is eui. and 16 hex digits"),
                      ("node-a", "it must start with iqn., eui. or naa.")):
        refused = cli.run(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", bad)
        assert refused.rc == EXIT_USAGE, refused.describe()
        assert f'iscsi_initiator "{bad}" is not an iSCSI name: {says}' in refused.stderr, refused.describe()
    assert nodes(cli) == {}

    # In lower case, as open-iscsi's iscsi-iname writes it, the node maps and logs in.
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    vid = cli.ok_json(*flags, "volume", "create", "data", "--size", "16Mi")["id"]
    cli.ok(*flags, "volume", "map", "data", "--node", "node-a")
    assert tgtd.targets()[iqn(vid)]["acl"] == [INITIATOR_A]
    assert logs_in(tgtd, vid, INITIATOR_A, chap=kept_chap(state_dir, vid, "node-a"))

    # A record from before names were checked holds capitals: map names the node and the fix,
    # and the node registering again in lower case is the same initiator.
    cli.ok(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_B)
    with sqlite3.connect(state_dir / "state.db") as db:
        db.execute("UPDATE nodes SET iscsi_initiator = ? WHERE node_id = 'node-b'", (INITIATOR_B.upper(),))
    other = cli.ok_json(*flags, "volume", "create", "other", "--size", "16Mi")["id"]
    stale = cli.run(*flags, "volume", "map", "other", "--node", "node-b")
    assert stale.rc == EXIT_PRECONDITION, stale.describe()
    assert (f'node "node-b"\'s registered iscsi_initiator "{INITIATOR_B.upper()}" is not written in '
            "lower case") in stale.stderr, stale.describe()
    assert "then let the node register again" in stale.stderr, stale.describe()
    cli.ok(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_B)
    cli.ok(*flags, "volume", "map", "other", "--node", "node-b")
    assert tgtd.targets()[iqn(other)]["acl"] == [INITIATOR_B]
    assert nodes(cli) == {"node-a": INITIATOR_A, "node-b": INITIATOR_B}


def test_a_second_node_cannot_register_an_initiator_name_another_node_holds(cli, tgtd):
    """Row 13: two nodes with one name are one initiator to tgtd, so mapping a volume to either
    let both in. Before the fix the second registration was accepted silently."""
    flags = provider_flags(tgtd)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    vid = cli.ok_json(*flags, "volume", "create", "victim", "--size", "16Mi")["id"]
    cli.ok(*flags, "volume", "map", "victim", "--node", "node-a")
    victim_before = tgtd.targets()[iqn(vid)]
    records_before = cli.ok_json("node", "list")

    taken = (f'node "node-b" cannot register iscsi_initiator "{INITIATOR_A}": node "node-a" holds that name, '
             "and two nodes with one name would each get into the other's volumes")
    refused = cli.run(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_A)
    assert refused.rc == EXIT_CONFLICT and taken in refused.stderr, refused.describe()
    # Nor can node-b, once registered under a name of its own, switch to node-a's.
    cli.ok(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_B)
    switched = cli.run(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_A)
    assert switched.rc == EXIT_CONFLICT and taken in switched.stderr, switched.describe()

    assert nodes(cli) == {"node-a": INITIATOR_A, "node-b": INITIATOR_B}
    assert [n for n in cli.ok_json("node", "list") if n["node_id"] == "node-a"] == records_before
    assert tgtd.targets()[iqn(vid)] == victim_before
    assert not logs_in(tgtd, vid, INITIATOR_B)


def test_a_node_registering_a_new_initiator_name_takes_its_volumes_acls_along(cli, tgtd, workdir, state_dir):
    """Row 13: before the fix the volumes mapped to the node kept its old name on their ACLs (the
    old name still got in, the new one did not). Now re-registering moves them, through map's own
    path: the new name gets in, the old one is taken off (its sessions ended), CHAP stays."""
    flags = provider_flags(tgtd)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    cli.ok(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_B)
    plain = cli.ok_json(*flags, "volume", "create", "plain", "--size", "16Mi")["id"]
    locked = cli.ok_json(*flags, "volume", "create", "locked", "--size", "16Mi")["id"]
    others = cli.ok_json(*flags, "volume", "create", "others", "--size", "16Mi")["id"]
    password = "s3cret-" + secrets.token_hex(8)
    cli.ok(*flags, "volume", "map", "plain", "--node", "node-a")
    account = cli.ok_json(*flags, "--secrets-file", chap_file(workdir, "chap", "alice", password),
                          "volume", "map", "locked", "--node", "node-a")["publish_context"]["chap-user"]
    cli.ok(*flags, "volume", "map", "others", "--node", "node-b")
    others_before = tgtd.targets()[iqn(others)]

    moved = cli.ok_json(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A_NEW)
    assert moved["iscsi_initiator"] == INITIATOR_A_NEW, moved
    assert nodes(cli) == {"node-a": INITIATOR_A_NEW, "node-b": INITIATOR_B}
    targets = tgtd.targets()
    assert targets[iqn(plain)]["acl"] == [INITIATOR_A_NEW], targets[iqn(plain)]
    assert targets[iqn(locked)]["acl"] == [INITIATOR_A_NEW], targets[iqn(locked)]
    assert targets[iqn(locked)]["accounts"] == [account, f"{locked}:target (outgoing)"], targets[iqn(locked)]
    assert targets[iqn(others)] == others_before
    plain_chap = kept_chap(state_dir, plain, "node-a")
    assert logs_in(tgtd, plain, INITIATOR_A_NEW, chap=plain_chap)
    assert not logs_in(tgtd, plain, INITIATOR_A, chap=plain_chap)
    assert logs_in(tgtd, locked, INITIATOR_A_NEW, chap=(account, password))
    assert not logs_in(tgtd, locked, INITIATOR_A_NEW), "the new name got in without CHAP"
    assert not logs_in(tgtd, locked, INITIATOR_A, chap=(account, password)), "the old name still got in"
    # The old name is free again, for the host that has it now.
    cli.ok(*flags, "--node-id", "node-c", "node", "register", "--iscsi-initiator", INITIATOR_A)

    # tgtd restarts and loses everything, CHAP accounts included. Moving back to a name makes
    # both volumes' targets again, with the CHAP accounts the controller keeps (0600 files in its
    # state directory): the CHAP volume opens to its node's password, not to anyone without it.
    cli.ok(*flags, "--node-id", "node-c", "node", "remove", "node-c")
    tgtd.restart()
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    targets = tgtd.targets()
    assert targets[iqn(plain)]["acl"] == [INITIATOR_A], targets[iqn(plain)]
    assert targets[iqn(locked)]["acl"] == [INITIATOR_A], targets[iqn(locked)]
    assert targets[iqn(locked)]["accounts"] == [account, f"{locked}:target (outgoing)"], targets[iqn(locked)]
    assert not logs_in(tgtd, locked, INITIATOR_A)
    assert logs_in(tgtd, locked, INITIATOR_A, chap=(account, password))
    assert logs_in(tgtd, plain, INITIATOR_A, chap=plain_chap)

    # Unmapping after the move takes the name the node has now off the ACL.
    cli.ok(*flags, "volume", "unmap", "plain", "--node", "node-a")
    assert tgtd.targets()[iqn(plain)]["acl"] == []


def test_a_host_claiming_a_mapped_nodes_initiator_name_gets_nothing_without_its_chap_secret(cli, tgtd, state_dir):
    """Row 8: an initiator name is whatever a host sends, and anyone can read node-a's (ListNodes).
    Before the fix a volume mapped without secrets let any host that claimed node-a's name in.
    Now every publication has CHAP: the controller makes node-a its own account and secret,
    keeps them 0600 in its state directory, gives them to node-a alone over mutual TLS, and puts
    only the account's name in the publish context. The target proves itself too (mutual CHAP)."""
    flags = provider_flags(tgtd)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    cli.ok(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_B)
    victim = cli.ok_json(*flags, "volume", "create", "victim", "--size", "16Mi")["id"]
    own = cli.ok_json(*flags, "volume", "create", "own", "--size", "16Mi")["id"]
    mapped = cli.run_json(*flags, "volume", "map", "victim", "--node", "node-a")
    assert mapped.rc == 0, mapped.describe()
    cli.ok(*flags, "volume", "map", "own", "--node", "node-b")
    account, password = kept_chap(state_dir, victim, "node-a")
    target_account, target_password = kept_chap(state_dir, victim)
    # The publish context names the account and where the secret is; it never holds a secret.
    context = mapped.json()["publish_context"]
    assert context["chap-user"] == account and context["rosetctl.io/secrets"] == "controller", context
    for secret in (password, target_password):
        assert secret not in mapped.stdout + mapped.stderr
        assert secret not in (state_dir / "state.db").read_bytes().decode(errors="replace")
    assert password != target_password and len(password) >= 32
    kept = state_dir / "iscsi" / "chap" / victim
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    assert stat.S_IMODE((kept / "node.node-a").stat().st_mode) == 0o600
    assert stat.S_IMODE((kept / "target").stat().st_mode) == 0o600

    # The attacker claims node-a's initiator name: without a secret, with a guessed one, with
    # node-b's own secret (of node-b's own volume) and under its own volume's account.
    own_account, own_password = kept_chap(state_dir, own, "node-b")
    for chap in (None, (account, "guessed-password-123"), (account, own_password), (own_account, own_password)):
        assert not logs_in(tgtd, victim, INITIATOR_A, chap=chap), chap
    # node-a's secret opens it, and the target answers node-a's challenge with its own account;
    # a target that cannot is refused by the initiator (a wrong password stands in for it).
    assert logs_in(tgtd, victim, INITIATOR_A, chap=(account, password), target_chap=(target_account, target_password))
    assert not logs_in(tgtd, victim, INITIATOR_A, chap=(account, password),
                       target_chap=(target_account, "not-the-targets-1"))
    # Mapping again keeps the node's secret (the node may be logged in with it); unmapping takes
    # its account off the target and the secret out of the state directory.
    cli.ok(*flags, "volume", "map", "victim", "--node", "node-a")
    assert kept_chap(state_dir, victim, "node-a") == (account, password)
    cli.ok(*flags, "volume", "unmap", "victim", "--node", "node-a")
    assert not (kept / "node.node-a").exists()
    assert account not in tgtd.accounts()
    assert tgtd.targets()[iqn(victim)]["accounts"] == [] and tgtd.targets()[iqn(victim)]["acl"] == []
    cli.ok(*flags, "volume", "delete", "victim")
    assert not kept.exists()
