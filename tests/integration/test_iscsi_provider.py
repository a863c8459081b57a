"""The iscsi provider end to end: volumes exported by a real tgtd on this host, mapped to nodes by
their initiator names, checked from the initiator's side with libiscsi; and a QEMU guest as the
consumer host, attaching them with open-iscsi through `rosetctl --controller`.

The host kernel has no iSCSI initiator, so the consumer side runs only in the guest
(guest_lab.py); the controller side runs here, with tgtd on 127.0.0.1 (the guest's 10.0.2.2)."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from typing import Callable

from guest_lab import HOST_ADDRESS
from tgtd_lab import INITIATOR_A, INITIATOR_B, IQN_PREFIX, Lun, free_port, kept_chap, read_lun, wait_until

MiB = 1024 * 1024
EXIT_NOT_FOUND = 3
EXIT_WRONG_STATE = 5


def provider_flags(tgtd, portal: str | None = None) -> list[str]:
    return ["--provider", "iscsi", "--iscsi-portal", portal or tgtd.portal,
            "--iscsi-tgt-control-port", str(tgtd.control_port)]


def iqn(volume_id: str) -> str:
    return f"{IQN_PREFIX}:{volume_id}"


def our_targets(tgtd) -> list[str]:
    shown = tgtd.tgtadm("--op", "show", "--mode", "target")
    assert shown.rc == 0, shown.describe()
    return [line.split(": ", 1)[1] for line in shown.stdout.splitlines() if line.startswith("Target ")]


def test_map_lets_only_the_mapped_node_in_and_the_database_rebuilds_a_restarted_tgtd(cli, tgtd, state_dir):
    flags = provider_flags(tgtd)
    # Two nodes, registered as they would register themselves.
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    cli.ok(*flags, "--node-id", "node-b", "node", "register", "--iscsi-initiator", INITIATOR_B)
    volume = cli.ok_json(*flags, "volume", "create", "data", "--size", "64Mi")
    vid = volume["id"]
    assert vid.startswith("iscsi-") and volume["capacity_bytes"] == 64 * MiB, volume
    # Exported at once, closed to everyone until mapped.
    assert our_targets(tgtd) == [iqn(vid)]
    assert not isinstance(read_lun(tgtd.portal, iqn(vid), INITIATOR_A), Lun)

    mapped = cli.ok_json(*flags, "volume", "map", "data", "--node", "node-a")
    chap = kept_chap(state_dir, vid, "node-a")  # every publication has CHAP of its own
    assert read_lun(tgtd.portal, iqn(vid), INITIATOR_A, chap=chap) == Lun(vid, 64 * MiB), mapped
    assert not isinstance(read_lun(tgtd.portal, iqn(vid), INITIATOR_A), Lun), "let in without CHAP"
    refused = read_lun(tgtd.portal, iqn(vid), INITIATOR_B, chap=chap)
    assert not isinstance(refused, Lun), "an initiator of a node the volume is not mapped to got in"
    # Idempotent: mapping again changes nothing.
    cli.ok(*flags, "volume", "map", "data", "--node", "node-a")
    # A mapped volume is not deleted.
    busy = cli.run(*flags, "volume", "delete", "data")
    assert busy.rc == EXIT_WRONG_STATE, busy.describe()
    assert our_targets(tgtd) == [iqn(vid)]

    # tgtd keeps nothing across its restart: the next call finds the target missing and makes
    # every target and ACL again from the state database.
    tgtd.restart()
    assert our_targets(tgtd) == []
    cli.ok(*flags, "volume", "map", "data", "--node", "node-a")
    assert read_lun(tgtd.portal, iqn(vid), INITIATOR_A, chap=chap) == Lun(vid, 64 * MiB)

    # Expansion reaches the LUN.
    cli.ok(*flags, "volume", "expand", "data", "--size", "96Mi")
    assert read_lun(tgtd.portal, iqn(vid), INITIATOR_A, chap=chap) == Lun(vid, 96 * MiB)

    cli.ok(*flags, "volume", "unmap", "data", "--node", "node-a")
    assert not isinstance(read_lun(tgtd.portal, iqn(vid), INITIATOR_A, chap=chap), Lun), "unmapped, still let in"
    cli.ok(*flags, "volume", "delete", "data")
    assert our_targets(tgtd) == []


def test_serve_restores_every_target_at_start(cli, tgtd, start_serve, state_dir):
    flags = provider_flags(tgtd)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    vid = cli.ok_json(*flags, "volume", "create", "kept", "--size", "32Mi")["id"]
    cli.ok(*flags, "volume", "map", "kept", "--node", "node-a")
    tgtd.restart()
    assert our_targets(tgtd) == []
    server = start_serve(extra=["--role", "controller", *flags])
    chap = kept_chap(state_dir, vid, "node-a")
    assert read_lun(tgtd.portal, iqn(vid), INITIATOR_A, chap=chap) == Lun(vid, 32 * MiB), server.log()
    assert not isinstance(read_lun(tgtd.portal, iqn(vid), INITIATOR_A), Lun)
    assert not isinstance(read_lun(tgtd.portal, iqn(vid), INITIATOR_B, chap=chap), Lun)
    # Probe: a controller with iscsi volumes and no tgtd is not ready, and says why.
    assert cli.ok(*flags, "probe").stdout.strip() == "ready"
    tgtd.kill()
    down = cli.run(*flags, "probe")
    assert down.rc != 0 and "tgtd" in down.stderr and str(tgtd.control_port) in down.stderr, down.describe()


def test_a_node_without_an_initiator_name_or_a_controller_without_a_portal_is_refused(cli, tgtd):
    flags = provider_flags(tgtd)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    cli.ok(*flags, "volume", "create", "data", "--size", "32Mi")
    no_portal = cli.run("--provider", "iscsi", "--iscsi-tgt-control-port", str(tgtd.control_port),
                        "volume", "map", "data", "--node", "node-a")
    assert no_portal.rc == EXIT_WRONG_STATE and "--iscsi-portal" in no_portal.stderr, no_portal.describe()
    # An empty --iscsi-initiator registers a node without one (no open-iscsi there).
    cli.ok(*flags, "--node-id", "node-c", "node", "register", "--iscsi-initiator", "")
    no_initiator = cli.run(*flags, "volume", "map", "data", "--node", "node-c")
    assert no_initiator.rc == EXIT_WRONG_STATE, no_initiator.describe()
    assert "node-c" in no_initiator.stderr and "initiator" in no_initiator.stderr, no_initiator.describe()
    unknown = cli.run(*flags, "volume", "map", "data", "--node", "node-z")
    assert unknown.rc == EXIT_NOT_FOUND and "node-z" in unknown.stderr, unknown.describe()
    dirs = cli.run(*flags, "volume", "create", "d", "--type", "dir")
    assert dirs.rc == 2 and "image" in dirs.stderr, dirs.describe()


def write_secrets(path, secrets: dict) -> None:
    path.write_text(json.dumps(secrets))
    os.chmod(path, 0o600)


def test_chap_from_the_publish_secrets_closes_the_target_to_initiators_without_it(cli, tgtd, workdir):
    flags = provider_flags(tgtd)
    password = "s3cret-" + secrets.token_hex(8)
    secrets_file = workdir / "chap.json"
    write_secrets(secrets_file, {"chap-user": "consumer-a", "chap-password": password})
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    vid = cli.ok_json(*flags, "volume", "create", "locked", "--size", "32Mi")["id"]
    mapped = cli.run_json(*flags, "--secrets-file", str(secrets_file), "volume", "map", "locked",
                          "--node", "node-a")
    assert mapped.rc == 0, mapped.describe()
    assert password not in mapped.stdout + mapped.stderr
    assert not isinstance(read_lun(tgtd.portal, iqn(vid), INITIATOR_A), Lun), "let in without CHAP"
    # The target's account is the volume's own, named after it (tgtd's accounts are global).
    account = mapped.json()["publish_context"]["chap-user"]
    assert account == f"{vid}:consumer-a", mapped.describe()
    wrong = read_lun(tgtd.portal, iqn(vid), INITIATOR_A, chap=(account, "not-the-password"))
    assert not isinstance(wrong, Lun), "let in with a wrong CHAP password"
    assert read_lun(tgtd.portal, iqn(vid), INITIATOR_A, chap=(account, password)) == Lun(vid, 32 * MiB)
    # Half a credential is refused, naming what is missing.
    write_secrets(secrets_file, {"chap-password": password})
    half = cli.run(*flags, "--secrets-file", str(secrets_file), "volume", "map", "locked", "--node", "node-a")
    assert half.rc == 2 and "chap-user" in half.stderr and password not in half.stderr, half.describe()


def start_controller(cli, tgtd, start_serve, workdir, *nodes: str) -> tuple[list[str], Callable]:
    """`serve --role controller --listen` on 127.0.0.1 (the guests' 10.0.2.2) with a certificate
    for each of `nodes`; returns the provider flags and `consumer(guest)`, the rosetctl command
    line for that guest, its certificate copied into the guest's own directory (the guest sees
    the host's files read-only; this is how an operator copies it to a consumer host)."""
    tls = workdir / "tls"
    cli.ok("tls", "init", "--dir", str(tls), "--ip", HOST_ADDRESS)
    for node in nodes:
        cli.ok("tls", "issue", node, "--dir", str(tls))
    port = free_port()
    flags = provider_flags(tgtd, portal=f"{HOST_ADDRESS}:{tgtd.port}")
    start_serve(extra=["--role", "controller", "--node-id", "controller", *flags,
                       "--listen", f"127.0.0.1:{port}", "--tls-cert", str(tls / "controller.crt"),
                       "--tls-key", str(tls / "controller.key"), "--tls-ca", str(tls / "ca.crt")])

    def consumer(guest) -> str:
        own = guest.dir / "tls"
        own.mkdir(parents=True)
        for file in ("ca.crt", f"{guest.name}.crt", f"{guest.name}.key"):
            shutil.copy2(tls / file, own / file)
        return (f"{cli.binary} --controller {HOST_ADDRESS}:{port} --node-id {guest.name} "
                f"--tls-cert {own}/{guest.name}.crt --tls-key {own}/{guest.name}.key "
                f"--tls-ca {own}/ca.crt")

    return flags, consumer


def test_a_guest_consumer_connects_writes_disconnects_and_finds_its_data_again(
        cli, tgtd, start_serve, workdir, state_dir, guest_lab_factory, rosetctl_binary):
    flags, consumer = start_controller(cli, tgtd, start_serve, workdir, "guest-1", "guest-2")
    cli.ok(*flags, "volume", "create", "data", "--size", "64Mi")
    cli.ok(*flags, "volume", "create", "raw", "--size", "32Mi", "--block")
    cli.ok(*flags, "volume", "create", "locked", "--size", "32Mi")

    guest = guest_lab_factory("guest-1")
    other = guest_lab_factory("guest-2")
    ctl = consumer(guest)
    guest.start()
    try:
        first = guest.run(f"""set -e
{ctl} volume connect data --target /mnt/data
echo hello-from-the-guest > /mnt/data/note
grep -q ' /mnt/data ext4 ' /proc/mounts
{ctl} volume disconnect data
! grep -q ' /mnt/data ' /proc/mounts
{ctl} volume connect data --target /mnt/data
cat /mnt/data/note
{ctl} volume connect raw --target /dev/raw-disk
blockdev --getsize64 /dev/raw-disk
""", timeout=180)
        assert first.rc == 0, first.describe() + guest.console()
        lines = first.stdout.splitlines()
        assert "hello-from-the-guest" in lines, first.describe()
        assert str(32 * MiB) in lines, first.describe()

        # CHAP: the same secrets reach the controller's publish (the target's account) and the
        # guest's stage (its node record, written without a command line).
        chap = guest.dir / "chap.json"
        write_secrets(chap, {"chap-user": "guest-1", "chap-password": "s3cret-" + secrets.token_hex(8)})
        locked = guest.run(f"""set -e
{ctl} --secrets-file {chap} volume connect locked --target /mnt/locked
grep -q ' /mnt/locked ext4 ' /proc/mounts
{ctl} --secrets-file {chap} volume disconnect locked
""", timeout=120)
        assert locked.rc == 0, locked.describe()

        # The controller maps the volume to this node only.
        shown = cli.ok_json(*flags, "volume", "show", "data")
        assert shown["published_nodes"] == ["guest-1"], shown

        # Expand while connected: the LUN grows on the controller, the guest rescans and grows
        # the filesystem.
        grown = guest.run(f"""set -e
{ctl} volume expand data --size 96Mi
df -B1 --output=size /mnt/data | tail -1
""", timeout=120)
        assert grown.rc == 0, grown.describe()
        assert int(grown.stdout.split()[-1]) > 80 * MiB, grown.describe()

        # kill -9 tgtd under a writer, restart it empty: the controller's watcher makes the
        # target, ACL and CHAP accounts again within seconds, and open-iscsi's session recovery
        # (replacement_timeout, 120 s by default) holds the writes meanwhile: no I/O error
        # reaches the writer or the kernel log (issue 31, row 10).
        writer = guest.run(r"""
rm -f /run/writer.*
( for i in $(seq 1 30); do
    dd if=/dev/urandom of=/mnt/data/w$i bs=64k count=4 conv=fsync status=none 2>>/run/writer.err || echo "FAILED $i" >> /run/writer.err
    echo $i > /run/writer.at; sleep 0.3
  done; echo done > /run/writer.end ) >/dev/null 2>&1 &
for t in $(seq 100); do [ -e /run/writer.at ] && break; sleep 0.1; done
cat /run/writer.at
""", timeout=60)
        assert writer.rc == 0 and writer.stdout.strip(), writer.describe()
        tgtd.kill()
        time.sleep(2)  # the writer is held meanwhile
        tgtd.start()
        wait_until(lambda: iqn(shown["id"]) in tgtd.targets(), 20, "the watcher to restore the target")
        finished = guest.run(r"""
for t in $(seq 900); do [ -e /run/writer.end ] && break; sleep 0.1; done
cat /run/writer.end /run/writer.at
cat /run/writer.err 2>/dev/null
dmesg | grep -i -E 'i/o error|rejecting i/o' || true
cat /mnt/data/w30 | wc -c
""", timeout=150)
        assert finished.rc == 0 and finished.stdout.startswith("done\n30\n"), finished.describe()
        assert "FAILED" not in finished.stdout and "error" not in finished.stdout.lower(), finished.describe()
        assert finished.stdout.strip().endswith(str(4 * 64 * 1024)), finished.describe()

        # Another host cannot log in to a volume that is not mapped to it, nor by claiming the
        # mapped node's initiator name (anyone can read it: node list) without its CHAP secret,
        # which only guest-1 got, from the controller over its mutual TLS (issue 31, row 8).
        other.start()
        iqn_data = iqn(shown["id"])
        portal = f"{HOST_ADDRESS}:{tgtd.port}"
        refused = other.run(f"""
iscsiadm -m node -o new -T {iqn_data} -p {portal} >/dev/null
iscsiadm -m node -T {iqn_data} -p {portal} --login
""", timeout=90)
        assert refused.rc != 0, refused.describe()
        # An interface of its own that sends guest-1's initiator name (iface.initiatorname).
        spoofed = other.run(f"""
iscsiadm -m iface -I spoof -o new >/dev/null
iscsiadm -m iface -I spoof -o update -n iface.initiatorname -v {guest.initiator} >/dev/null
iscsiadm -m iface -I spoof | grep '^iface.initiatorname'
iscsiadm -m node -o new -T {iqn_data} -p {portal} -I spoof >/dev/null
iscsiadm -m node -T {iqn_data} -p {portal} -I spoof --login
""", timeout=90)
        assert spoofed.rc != 0 and guest.initiator in spoofed.stdout, spoofed.describe()
        assert "authorization failure" in spoofed.stderr.lower(), spoofed.describe()
        # The claim itself works (tgtd takes the name): only guest-1's secret is missing.
        user, password = kept_chap(state_dir, shown["id"], "guest-1")
        record = f"iscsiadm -m node -T {iqn_data} -p {portal} -I spoof -o update -n"
        with_secret = other.run(f"""set -e
{record} node.session.auth.authmethod -v CHAP
{record} node.session.auth.username -v {user}
{record} node.session.auth.password -v {password}
iscsiadm -m node -T {iqn_data} -p {portal} -I spoof --login
iscsiadm -m node -T {iqn_data} -p {portal} -I spoof --logout
""", timeout=90)
        assert with_secret.rc == 0, with_secret.describe()

        done = guest.run(f"""set -e
{ctl} volume disconnect data
{ctl} volume disconnect raw
iscsiadm -m session 2>&1 || true
""", timeout=120)
        assert done.rc == 0, done.describe()
        assert "iqn." not in done.stdout, done.describe()
    finally:
        guest.kill()
        other.kill()
    # Disconnected and unmapped: the controller may delete them.
    cli.ok(*flags, "volume", "delete", "data")
    cli.ok(*flags, "volume", "delete", "raw")
    cli.ok(*flags, "volume", "delete", "locked")


def test_a_node_starting_logs_out_of_stray_sessions_and_back_in_for_staged_volumes(
        cli, tgtd, start_serve, workdir, state_dir, guest_lab_factory, rosetctl_binary):
    """serve --role node's startup repairs: a session no staging knows (a crash between login and
    record) is logged out; a staged volume whose session is gone gets it back."""
    flags, consumer = start_controller(cli, tgtd, start_serve, workdir, "guest-1")
    portal = f"{HOST_ADDRESS}:{tgtd.port}"
    staged_id = cli.ok_json(*flags, "volume", "create", "staged", "--size", "32Mi")["id"]
    stray_id = cli.ok_json(*flags, "volume", "create", "stray", "--size", "32Mi")["id"]
    guest = guest_lab_factory("guest-1")
    ctl = consumer(guest)
    serve_node = (f"{rosetctl_binary} --node-id guest-1 serve --role node "
                  f"--endpoint unix:///run/node.sock > /run/node.log 2>&1 & pid=$!; "
                  f"for i in $(seq 100); do [ -S /run/node.sock ] && break; sleep 0.1; done; "
                  f"kill $pid; wait $pid || true")
    guest.start()
    try:
        setup = guest.run(f"""set -e
{ctl} volume connect staged --target /mnt/staged
""", timeout=120)
        assert setup.rc == 0, setup.describe()
        # The stray volume is mapped to this node, and logged in to behind rosetctl's back.
        cli.ok(*flags, "volume", "map", "stray", "--node", "guest-1")
        user, password = kept_chap(state_dir, stray_id, "guest-1")
        stray_record = f"iscsiadm -m node -T {iqn(stray_id)} -p {portal} -o update -n"
        repaired = guest.run(f"""set -e
iscsiadm -m node -o new -T {iqn(stray_id)} -p {portal} >/dev/null
{stray_record} node.session.auth.authmethod -v CHAP
{stray_record} node.session.auth.username -v {user}
{stray_record} node.session.auth.password -v {password}
iscsiadm -m node -T {iqn(stray_id)} -p {portal} --login >/dev/null
iscsiadm -m node -T {iqn(staged_id)} -p {portal} --logout >/dev/null
{serve_node}
cat /run/node.log
echo SESSIONS
iscsiadm -m session 2>&1 || true
""", timeout=120)
        assert repaired.rc == 0, repaired.describe()
        log, sessions = repaired.stdout.split("SESSIONS", 1)
        assert iqn(stray_id) not in sessions, repaired.describe()
        assert iqn(staged_id) in sessions, repaired.describe()
        assert "logged out of" in log and "logged in to" in log, repaired.describe()
    finally:
        guest.kill()
