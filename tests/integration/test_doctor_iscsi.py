"""`rosetctl doctor` on an iSCSI consumer (a QEMU guest, whose kernel has the initiator this
host's lacks): a session to one of our targets that no staging uses fails `iscsi-sessions`,
naming the target and portal, and `doctor --fix` logs out of it (issue 36). A guest test
(tests/CMakeLists.txt, ROSETCTL_GUEST_TESTS)."""
from __future__ import annotations

import json

from guest_lab import HOST_ADDRESS
from test_iscsi_provider import iqn, start_controller
from tgtd_lab import kept_chap


def rows_of(stdout: str) -> dict:
    return {row["name"]: row for row in json.loads(stdout)}


def test_a_session_no_staging_uses_fails_iscsi_sessions_and_fix_logs_out(
        cli, tgtd, start_serve, workdir, guest_lab_factory, rosetctl_binary):
    flags, consumer = start_controller(cli, tgtd, start_serve, workdir, "guest-1")
    portal = f"{HOST_ADDRESS}:{tgtd.port}"
    stray_id = cli.ok_json(*flags, "volume", "create", "stray", "--size", "16Mi")["id"]
    guest = guest_lab_factory("guest-1")
    cli.ok(*flags, "--node-id", "guest-1", "node", "register", "--iscsi-initiator", guest.initiator)
    cli.ok(*flags, "volume", "map", "stray", "--node", "guest-1")
    ctl = consumer(guest)
    guest.start()
    try:
        clean = guest.run(f"{ctl} doctor -o json", timeout=120)
        assert clean.rc == 0 and rows_of(clean.stdout)["iscsi-sessions"]["status"] == "ok", clean.describe()

        # Logged in behind rosetctl's back (as by a crash between the login and its record), with
        # the node's own CHAP secret (every publication has one).
        user, password = kept_chap(cli.state_dir, stray_id, "guest-1")
        node = f"iscsiadm -m node -T {iqn(stray_id)} -p {portal}"
        stray = guest.run(f"""set -e
iscsiadm -m node -o new -T {iqn(stray_id)} -p {portal} >/dev/null
{node} -o update -n node.session.auth.authmethod -v CHAP
{node} -o update -n node.session.auth.username -v '{user}'
{node} -o update -n node.session.auth.password -v '{password}'
{node} --login >/dev/null
{ctl} doctor -o json || echo "EXIT $?"
""", timeout=120)
        out, _, code = stray.stdout.rpartition("EXIT ")
        assert stray.rc == 0 and code.strip() == "1", stray.describe()
        row = rows_of(out)["iscsi-sessions"]
        assert row == {"name": "iscsi-sessions", "status": "fail",
                       "message": f"a session to {iqn(stray_id)} at {portal} has no staging here; "
                                  "`rosetctl doctor --fix` logs out of it"}, row

        fixed = guest.run(f"""set -e
{ctl} doctor --fix -o json
echo SESSIONS
iscsiadm -m session 2>&1 || true
""", timeout=120)
        assert fixed.rc == 0, fixed.describe()
        report, sessions = fixed.stdout.split("SESSIONS", 1)
        row = rows_of(report)["iscsi-sessions"]
        assert row["status"] == "ok" and row["repaired"].startswith(f"repaired: a session to {iqn(stray_id)}"), row
        assert iqn(stray_id) not in sessions, fixed.describe()
    finally:
        guest.kill()
    cli.ok(*flags, "volume", "unmap", "stray", "--node", "guest-1")
    cli.ok(*flags, "volume", "delete", "stray")
