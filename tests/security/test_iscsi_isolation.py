"""Node isolation on the iscsi provider (security issue #31), against a real tgtd of the test's own
and checked from the initiator's side with libiscsi (tgtd_lab.py). Each attack is followed by
what tgtd holds for the victim (`tgtadm --op show`) and the registry's records, which must not
have changed."""
from __future__ import annotations

import sqlite3

from tgtd_lab import INITIATOR_A, INITIATOR_B, IQN_PREFIX, Lun, read_lun
from rosetctl_cli import EXIT_PRECONDITION, EXIT_USAGE

MiB = 1024 * 1024


def provider_flags(tgtd) -> list[str]:
    return ["--provider", "iscsi", "--iscsi-portal", tgtd.portal, "--iscsi-tgt-control-port", str(tgtd.control_port)]


def iqn(volume_id: str) -> str:
    return f"{IQN_PREFIX}:{volume_id}"


def nodes(cli) -> dict[str, str | None]:
    """The registry's records: each node's initiator name."""
    return {node["node_id"]: node["iscsi_initiator"] for node in cli.ok_json("node", "list")}


def logs_in(tgtd, volume_id: str, initiator: str, chap=None) -> bool:
    seen = read_lun(tgtd.portal, iqn(volume_id), initiator, chap=chap)
    if isinstance(seen, Lun):
        assert seen.serial == volume_id, seen
        return True
    return False


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
    assert logs_in(tgtd, vid, INITIATOR_A)

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
