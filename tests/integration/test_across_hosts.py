"""A controller and its consumers on different hosts (issue 19): `rosetctl serve --listen` on one
host of the lab, the CLI with `--controller` on two others, over real mutual TLS between network
namespaces (the site's machinery is controller_site.py).

The certificates are made with `rosetctl tls` on the controller host and copied to each consumer's
own config directory. Volumes of the local provider live on the controller host; a roset volume
(the fake Roset API, run on the controller host) is the one a node other than the controller may
be mapped to, so the authorization tests use it. gRPC calls of our own (the registry, plaintext and
certificate-less clients) run as Python clients on a lab host too: nothing outside the lab reaches
it.
"""
from __future__ import annotations

import os
import shutil
import json
import signal
import subprocess
import sys
import threading
import re
import time
from pathlib import Path

import pytest

from controller_site import (EXIT_PERMISSION, EXIT_UNAVAILABLE, PATIENCE, PORT, Site, build_site,
                             expired_certificate, retrying_lines, signed_certificate, tls_ok)
from host_lab import HostProcess, wait_for_port
from roset_fixtures import STANDIN_FUSE
from rosetctl_cli import EXIT_NOT_FOUND, EXIT_PRECONDITION, EXIT_USAGE, Result, binary_path



@pytest.fixture
def site(host_lab, rosetctl_binary) -> Site:
    """controller (192.0.2.1) serving on PORT, consumer-a (TLS by environment), consumer-b (by its
    config file); after the test, no private key may have been printed or logged anywhere."""
    built = build_site(host_lab)
    yield built
    built.assert_no_secrets_printed()


# ---------------------------------------------------------------- volumes across hosts


def same_view(volume: dict) -> dict:
    """A volume without `unreachable_nodes`, which depends on where the CLI runs."""
    return {key: value for key, value in volume.items() if key != "unreachable_nodes"}


def test_consumers_share_one_controller(site):
    a, b, ctl = site.a, site.b, site.ctl
    created = a.create("shared")
    volume_id = created["id"]
    assert created["name"] == "shared" and created["provider"] == "local", created

    # The controller host's own CLI (local mode, no --controller) is the reference for the shapes.
    # Which registered nodes a view could not ask depends on where it stands (the controller host's
    # local CLI asks none; a consumer has itself at hand): compared apart.
    local = ctl.volume(volume_id)
    assert local["unreachable_nodes"] == [
        {"node": "consumer-a", "reason": "not asked: only a CLI with --controller asks the registered nodes"}]
    assert a.volume(volume_id)["unreachable_nodes"] == [], "consumer-a's own node answered"
    assert same_view(a.volume(volume_id)) == same_view(local) == same_view(created), (
        "expected show over --controller to equal the local show")
    assert [same_view(v) for v in a.volumes()] == [same_view(local)], (
        "expected list over --controller to equal the local list")

    # consumer-b (config file) makes one of its own and sees both: one controller.
    other = b.create("b-own")
    assert same_view(b.volume(other["id"])) == same_view(ctl.volume(other["id"]))
    everyone = sorted([same_view(local), same_view(ctl.volume(other["id"]))], key=lambda v: v["id"])
    for cli in (a, b, ctl):
        assert sorted(map(same_view, cli.volumes()), key=lambda v: v["id"]) == everyone, (
            f"expected {cli.host.name} to list both")
    table = b.ok("volume", "list").stdout
    assert volume_id in table and other["id"] in table, table

    deleted = a.ok_json("volume", "delete", volume_id)
    assert deleted == {"deleted": True, "id": volume_id, "name": "shared"}, deleted
    for cli in (a, b, ctl):
        assert [v["id"] for v in cli.volumes()] == [other["id"]], f"expected {cli.host.name} not to list it"
        gone = cli.run("volume", "show", volume_id)
        assert gone.rc == EXIT_NOT_FOUND and volume_id in gone.stderr, f"{cli.host.name}: {gone.describe()}"
    b.ok("volume", "delete", other["id"])
    assert ctl.volumes() == []

    # One log line per remote call, naming the caller's certificate.
    log = site.serve_log().splitlines()
    creates = [line for line in log if 'CreateVolume name="shared"' in line]
    assert len(creates) == 1 and "peer=node:consumer-a" in creates[0] and "status=OK" in creates[0], creates
    creates = [line for line in log if 'CreateVolume name="b-own"' in line]
    assert len(creates) == 1 and "peer=node:consumer-b" in creates[0], creates
    deletes = [line for line in log if f'DeleteVolume volume_id="{volume_id}"' in line]
    assert len(deletes) == 1 and "peer=node:consumer-a" in deletes[0], deletes
    lists = [line for line in log if " ListVolumes " in line]
    assert sum("peer=node:consumer-a" in line for line in lists) == 3, lists  # a's three `volume list`
    assert sum("peer=node:consumer-b" in line for line in lists) == 3, lists  # b's two and the table
    calls = [line for line in log if " status=" in line]
    assert calls and all(" peer=node:consumer-" in line for line in calls), "expected every call to name its peer"


def test_volume_names_over_the_controller(site):
    volume_id = site.a.create("by-name")["id"]
    # consumer-b's own volume first, so it has local state (test_a_fresh_consumer_asks_the_controller).
    site.b.create("from-b")
    assert site.a.volume("by-name")["id"] == volume_id
    assert site.b.volume("by-name")["id"] == volume_id
    assert site.a.volume("from-b")["name"] == "from-b"
    assert site.b.ok_json("volume", "delete", "by-name")["deleted"] is True
    assert [v["name"] for v in site.ctl.volumes()] == ["from-b"]

    # --provider on a consumer is the controller's provider for the new volume, not its default.
    assert site.a.create("chosen", "--provider", "roset")["provider"] == "roset"
    both = site.a.run("volume", "create", "torn", "--provider", "roset", "-p", "provider=local")
    assert both.rc == EXIT_USAGE and "contradicts" in both.stderr, both.describe()


def test_a_fresh_consumer_asks_the_controller(site):
    volume_id = site.a.create("seen-from-b")["id"]
    assert not site.consumer_b.state_dir.exists(), "consumer-b has made no call yet"
    assert [v["id"] for v in site.b.volumes()] == [volume_id], "expected the controller's volume"
    assert site.b.volume(volume_id)["id"] == volume_id
    # Settings that cannot work are an error, not an empty list.
    unusable = site.b.run("--tls-ca", site.consumer_b.config_dir / "missing-ca.crt", "volume", "list")
    assert unusable.rc != 0 and "--tls-ca" in unusable.stderr and not unusable.stdout, unusable.describe()


# ---------------------------------------------------------------- who may do what


def test_only_a_nodes_own_certificate_registers_its_host(site):
    # An admin's CLI is no node: its host stays out of the registry (issue 32), however many calls.
    site.alice.ok("--node-id", "admin-desk", "volume", "list")
    assert "admin-desk" not in [n["node_id"] for n in site.ctl.ok_json("node", "list")]
    # A node's certificate registers its own host, under its own id only.
    site.b.ok("--node-id", "not-consumer-b", "volume", "list")
    site.b.ok("volume", "list")
    assert sorted(n["node_id"] for n in site.ctl.ok_json("node", "list")) == ["consumer-b"]


def test_a_revoked_nodes_certificates_are_refused_until_it_gets_a_newer_one(site, registry_stubs, workdir):
    from datetime import timedelta

    site.b.ok("volume", "list")  # registers consumer-b with its certificate
    assert "consumer-b" in [n["node_id"] for n in site.ctl.ok_json("node", "list")]
    # Without --revoke a removed node's certificate brings it back (the old behaviour, kept).
    site.ctl.ok("node", "remove", "consumer-b")
    site.b.ok("volume", "list")
    assert "consumer-b" in [n["node_id"] for n in site.ctl.ok_json("node", "list")]

    removed = site.ctl.ok_json("node", "remove", "consumer-b", "--revoke")
    assert removed["removed"] is True and removed["revoked_at"].endswith("Z"), removed
    for attempt in (site.b.run("volume", "list"), site.b.run("node", "register")):
        assert attempt.rc == EXIT_PERMISSION, attempt.describe()
        assert 'node certificate "consumer-b"' in attempt.stderr and "revoked" in attempt.stderr, attempt.stderr
    assert "consumer-b" not in [n["node_id"] for n in site.ctl.ok_json("node", "list")]
    # Every call, not only the registry's; and the other node is untouched.
    refused = site.grpc(site.consumer_b, registry_stubs, "rosetctl", "Registry", "ListNodes", {},
                        site.identity("consumer-b"))
    assert refused["code"] == "PERMISSION_DENIED" and "revoked" in refused["details"], refused
    assert site.grpc(site.consumer_a, registry_stubs, "rosetctl", "Registry", "ListNodes", {},
                     site.identity("consumer-a"))["code"] == "OK"
    # Revoking again (a node not registered any more) succeeds and says so.
    again = site.ctl.ok_json("node", "remove", "consumer-b", "--revoke")
    assert again["removed"] is False and again["revoked_at"] >= removed["revoked_at"], again

    # A certificate of consumer-b valid only from after the revocation is let in.
    time.sleep(1.1)
    newer = signed_certificate(site.tls_dir, workdir / "newer", "consumer-b",
                               [("O", "rosetctl"), ("OU", "node"), ("CN", "consumer-b")],
                               valid=(timedelta(seconds=1), timedelta(days=1)))
    site.secret_files.append(newer[1])
    time.sleep(1.5)
    let_in = site.grpc(site.consumer_b, registry_stubs, "rosetctl", "Registry", "RegisterNode",
                       {"node_id": "consumer-b"}, (*newer, site.tls_dir / "ca.crt"))
    assert let_in["code"] == "OK", let_in
    # The old one stays refused.
    refused = site.grpc(site.consumer_b, registry_stubs, "rosetctl", "Registry", "ListNodes", {},
                        site.identity("consumer-b"))
    assert refused["code"] == "PERMISSION_DENIED", refused


def test_a_node_certificate_acts_only_for_itself(site, csi, registry_stubs):
    a, alice = site.a, site.alice
    volume_id = a.create("roaming", "-p", "provider=roset")["id"]  # any node may reach a roset volume

    def registry(host, identity, method, request):
        return site.grpc(host, registry_stubs, "rosetctl", "Registry", method, request, identity)

    # Registering: a node for itself, an admin for anyone, a node never for another.
    refused = registry(site.consumer_a, site.identity("consumer-a"), "RegisterNode", {"node_id": "consumer-b"})
    assert refused["code"] == "PERMISSION_DENIED" and '"consumer-a"' in refused["details"], refused
    for method, request in (("GetNode", {"node_id": "consumer-b"}), ("RemoveNode", {"node_id": "consumer-b"})):
        refused = registry(site.consumer_a, site.identity("consumer-a"), method, request)
        assert refused["code"] == "PERMISSION_DENIED" and '"consumer-a"' in refused["details"], (method, refused)
    assert registry(site.consumer_b, site.identity("consumer-b"), "RegisterNode",
                    {"node_id": "consumer-b"})["code"] == "OK"
    assert registry(site.consumer_a, site.identity("alice"), "RegisterNode", {"node_id": "consumer-a"})["code"] == "OK"
    listed = registry(site.consumer_a, site.identity("consumer-a"), "ListNodes", {})
    assert listed["code"] == "OK", listed
    assert sorted(n["node_id"] for n in listed["response"]["nodes"]) == ["consumer-a", "consumer-b"], listed

    # Mapping: consumer-a's certificate may map to consumer-a, never to consumer-b.
    refused = a.run("volume", "map", volume_id, "--node", "consumer-b")
    assert refused.rc == EXIT_PERMISSION, f"expected exit 7: {refused.describe()}"
    assert 'node certificate "consumer-a"' in refused.stderr and "consumer-b" in refused.stderr, refused.stderr
    assert a.volume(volume_id)["published_nodes"] == [], "expected nothing recorded"
    assert a.ok_json("volume", "map", volume_id)["node"] == "consumer-a"
    a.ok("volume", "unmap", volume_id)

    # alice (admin) may map it to consumer-b, and unmap it; consumer-a may not unmap it for consumer-b.
    mapped = alice.ok_json("volume", "map", volume_id, "--node", "consumer-b")
    assert mapped["mapped"] is True and mapped["node"] == "consumer-b", mapped
    assert site.ctl.volume(volume_id)["published_nodes"] == ["consumer-b"]
    refused = a.run("volume", "unmap", volume_id, "--node", "consumer-b")
    assert refused.rc == EXIT_PERMISSION and 'node certificate "consumer-a"' in refused.stderr, refused.describe()
    assert alice.ok_json("volume", "unmap", volume_id, "--node", "consumer-b")["mapped"] is False
    assert site.ctl.volume(volume_id)["published_nodes"] == []

    # The same rules for calls made with any client: unpublish from every node, a forwarded call.
    def controller(identity, method, request, metadata=()):
        return site.grpc(site.consumer_a, csi, "csi", "Controller", method, request, identity, metadata=metadata)

    refused = controller(site.identity("consumer-a"), "ControllerUnpublishVolume", {"volume_id": volume_id})
    assert refused["code"] == "PERMISSION_DENIED" and "every node" in refused["details"], refused
    refused = controller(site.identity("consumer-a"), "ListVolumes", {}, metadata=[("rosetctl-node", "consumer-b")])
    assert refused["code"] == "PERMISSION_DENIED" and '"consumer-a"' in refused["details"], refused
    assert controller(site.identity("consumer-a"), "ListVolumes", {},
                      metadata=[("rosetctl-node", "consumer-a")])["code"] == "OK"
    assert controller(site.identity("alice"), "ListVolumes", {},
                      metadata=[("rosetctl-node", "consumer-b")])["code"] == "OK"

    # Authorization comes first, placement second: a local volume lives on the controller host, so
    # even an admin's mapping to consumer-b is refused, by the placement rule and not for permission.
    local_id = a.create("stays-home")["id"]
    refused = a.run("volume", "map", local_id, "--node", "consumer-b")
    assert refused.rc == EXIT_PERMISSION and 'node certificate "consumer-a"' in refused.stderr, refused.describe()
    placed = alice.run("volume", "map", local_id, "--node", "consumer-b")
    assert placed.rc == EXIT_PRECONDITION and 'node "consumer-b" cannot reach volume' in placed.stderr, placed.describe()

    a.ok("volume", "delete", volume_id)
    a.ok("volume", "delete", local_id)
    log = site.serve_log()
    publishes = [line for line in log.splitlines() if "ControllerPublishVolume" in line]
    assert any("peer=admin:alice" in line and "status=OK" in line for line in publishes), publishes
    assert any("peer=node:consumer-a" in line and "status=PERMISSION_DENIED" in line for line in publishes), publishes


# ---------------------------------------------------------------- refusals at the TLS layer


def test_clients_without_a_good_certificate_are_refused(site, csi):
    other_ca = site.controller.config_dir / "other-ca"
    tls_ok(site.controller, site.printed, "init", "--dir", other_ca, "--ip", site.controller.address)
    tls_ok(site.controller, site.printed, "issue", "consumer-a", "--dir", other_ca)
    site.secret_files += sorted(other_ca.glob("*.key"))
    good_ca = site.tls_dir / "ca.crt"

    def list_volumes(security, identity=None):
        return site.grpc(site.consumer_a, csi, "csi", "Controller", "ListVolumes", {}, identity, security)

    assert list_volumes("mtls", site.identity("consumer-a"))["code"] == "OK", "the good certificate must work"
    calls_before = site.serve_log().count(" ListVolumes ")
    strangers = (other_ca / "consumer-a.crt", other_ca / "consumer-a.key", good_ca)
    for what, security, identity in (("a plaintext client", "plaintext", None),
                                     ("a client without a certificate", "tls", (None, None, good_ca)),
                                     ("a certificate of another CA", "mtls", strangers)):
        refused = list_volumes(security, identity)
        assert refused["code"] == "UNAVAILABLE", f"expected {what} refused at the handshake: {refused}"
    assert site.serve_log().count(" ListVolumes ") == calls_before, "expected no refused client's call to be served"

    # The CLI with the wrong CA (it cannot trust the controller): exit 7 at once, no retrying.
    started = time.monotonic()
    wrong_ca = site.a.run("--tls-ca", other_ca / "ca.crt", "volume", "create", "never")
    assert wrong_ca.rc == EXIT_PERMISSION, f"expected exit 7: {wrong_ca.describe()}"
    assert wrong_ca.stderr.startswith("rosetctl: TLS with controller"), wrong_ca.stderr
    assert site.address in wrong_ca.stderr and not retrying_lines(wrong_ca), wrong_ca.stderr
    assert time.monotonic() - started < 10, "expected a TLS failure not to be retried"
    # The CLI without a certificate of its own does not try.
    no_cert = site.a.run("volume", "create", "never",
                         env={k: v for k, v in site.a.env.items() if k != "ROSETCTL_TLS_CERT"})
    assert no_cert.rc == EXIT_USAGE and "--controller needs --tls-cert" in no_cert.stderr, no_cert.describe()
    # A CLI whose certificate and CA are both another CA's: the same.
    stranger = site.a.run("--tls-cert", other_ca / "consumer-a.crt", "--tls-key", other_ca / "consumer-a.key",
                          "--tls-ca", other_ca / "ca.crt", "volume", "create", "never")
    assert stranger.rc == EXIT_PERMISSION and stranger.stderr.startswith("rosetctl: TLS with controller"), \
        stranger.describe()
    assert site.ctl.volumes() == [], "expected nothing created by a refused client"


def test_a_client_certificate_the_controller_rejects_is_a_tls_failure(site):
    other_ca = site.controller.config_dir / "other-ca"
    tls_ok(site.controller, site.printed, "init", "--dir", other_ca, "--ip", site.controller.address)
    tls_ok(site.controller, site.printed, "issue", "consumer-a", "--dir", other_ca)
    expired = expired_certificate(site.tls_dir, "consumer-a", site.consumer_a.config_dir / "expired")
    site.secret_files += sorted(other_ca.glob("*.key")) + [expired[1]]
    site.a.ok("volume", "create", "seed")  # local state, so nothing short-cuts the calls below
    # consumer-a trusts the controller (the right CA) but shows a certificate the controller cannot.
    procs = {what: site.a.start("--tls-cert", cert, "--tls-key", key, "volume", "create", "never",
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for what, (cert, key) in (("another CA's", (other_ca / "consumer-a.crt", other_ca / "consumer-a.key")),
                                       ("an expired", expired))}
    deadline = time.monotonic() + 10
    failures = []
    for what, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            site.printed += [out, err]
            failures.append(f"{what} certificate: still retrying after 10 s: {err!r}")
            continue
        site.printed += [out, err]
        if proc.returncode != EXIT_PERMISSION or not err.startswith("rosetctl: TLS with controller"):
            failures.append(f"{what} certificate: expected exit 7 'TLS with controller': rc={proc.returncode} {err!r}")
    assert not failures, failures
    assert [v["name"] for v in site.ctl.volumes()] == ["seed"]


# ---------------------------------------------------------------- network failures


class DelayedRestart(threading.Thread):
    """Starts the site's serve again after `delay` seconds, while the test waits on a CLI call."""

    def __init__(self, site: Site, delay: float):
        super().__init__(daemon=True)
        self.site, self.delay, self.failure = site, delay, None
        self.start()

    def run(self):
        time.sleep(self.delay)
        try:
            self.site.start_serve()
        except BaseException as e:  # re-raised by wait(), not lost with the thread
            self.failure = e

    def wait(self):
        self.join(timeout=60)
        if self.failure is not None:
            raise AssertionError(f"serve did not come back: {self.failure}") from self.failure


def test_a_retry_completes_when_the_controller_comes_back(site):
    a = site.a
    volume_id = a.create("before")["id"]

    # A read: waits for the controller, then answers.
    site.kill_serve()
    restart = DelayedRestart(site, 2)
    started = time.monotonic()
    listed = a.run("-o", "json", "volume", "list", timeout=PATIENCE + 30)
    restart.wait()
    assert listed.rc == 0, f"expected the retry to complete once serve was back: {listed.describe()}"
    assert 1.5 < time.monotonic() - started < PATIENCE, "expected it to wait for the restart, and no longer"
    assert [v["id"] for v in listed.json()] == [volume_id]
    waiting = retrying_lines(listed)
    assert len(waiting) == 1, f"expected one retrying line: {listed.stderr!r}"
    assert "192.0.2.1" in waiting[0] and "refused" in waiting[0], waiting

    # A change: sent again once the controller is back, made exactly once.
    site.kill_serve()
    restart = DelayedRestart(site, 2)
    made = a.run("-o", "json", "volume", "create", "during", timeout=PATIENCE + 30)
    restart.wait()
    assert made.rc == 0 and len(retrying_lines(made)) == 1, made.describe()
    assert sorted(v["name"] for v in site.ctl.volumes()) == ["before", "during"]
    assert site.serve_log().count('CreateVolume name="during"') == 1, "expected one CreateVolume, after the restart"
    assert same_view(a.volume(made.json()["id"])) == same_view(site.ctl.volume(made.json()["id"]))


def test_an_unreachable_controller_exits_6_after_retrying(site):
    before = site.a.create("from-a")["id"]
    site.b.create("from-b")
    # consumer-a's cable is pulled; for consumer-b, the controller's serve is gone (refused).
    site.consumer_a.disconnect()
    site.kill_serve()
    started = time.monotonic()
    procs = {name: cli.start("volume", "list", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, cli in (("a", site.a), ("b", site.b))}
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=PATIENCE + 60)
        results[name] = Result(proc.returncode, out, err)
        site.printed += [out, err]
    took = time.monotonic() - started
    assert PATIENCE - 1 < took < PATIENCE + 30, f"expected about {PATIENCE} s of retrying, took {took:.1f} s"

    cut, refused = results["a"], results["b"]
    assert cut.rc == EXIT_UNAVAILABLE and refused.rc == EXIT_UNAVAILABLE, (cut.describe(), refused.describe())
    for result in (cut, refused):
        assert len(retrying_lines(result)) == 1, f"expected one retrying line: {result.stderr!r}"
        last = result.stderr.splitlines()[-1]
        assert last.startswith(f'rosetctl: controller "{site.address}"') and "retrying" not in last, result.stderr
    assert "no route" in cut.stderr or "did not answer" in cut.stderr, cut.stderr
    assert "refused the connection" in refused.stderr, refused.stderr

    site.consumer_a.reconnect()
    site.start_serve()
    assert [v["id"] for v in site.a.volumes() if v["name"] == "from-a"] == [before]
    assert sorted(v["name"] for v in site.b.volumes()) == ["from-a", "from-b"]


# ---------------------------------------------------------------- serve's own refusals


def test_serve_listen_refuses_bad_settings(site):
    ctl = site.controller
    other_state = ctl.dir / "other-state"

    def serve(*argv) -> Result:
        result = ctl.run([binary_path(), "serve", "--endpoint", f"unix://{ctl.dir}/other.sock",
                          "--state-dir", other_state, *map(str, argv)], timeout=30)
        site.printed += [result.stdout, result.stderr]
        return result

    tls = site.tls_dir
    flags = ["--tls-cert", tls / "controller.crt", "--tls-key", tls / "controller.key", "--tls-ca", tls / "ca.crt"]
    missing = serve("--listen", f"{ctl.address}:0")
    assert missing.rc == EXIT_USAGE and "--tls-cert" in missing.stderr, missing.describe()
    missing = serve("--listen", f"{ctl.address}:0", *flags[2:])
    assert missing.rc == EXIT_USAGE and "--tls-cert" in missing.stderr, missing.describe()

    loose = ctl.dir / "loose.key"
    shutil.copyfile(tls / "controller.key", loose)
    os.chmod(loose, 0o644)
    site.secret_files.append(loose)
    open_key = serve("--listen", f"{ctl.address}:0", *flags[:2], "--tls-key", loose, *flags[4:])
    assert open_key.rc == EXIT_PERMISSION and str(loose) in open_key.stderr and "0644" in open_key.stderr, \
        open_key.describe()

    nonsense = serve("--listen", "nonsense", *flags)
    assert nonsense.rc == EXIT_USAGE and '--listen "nonsense"' in nonsense.stderr, nonsense.describe()
    tcp = ctl.run([binary_path(), "serve", "--endpoint", f"tcp://{ctl.address}:5000", "--state-dir", other_state])
    assert tcp.rc == EXIT_USAGE and "--listen" in tcp.stderr and "tcp://" in tcp.stderr, tcp.describe()
    assert not other_state.exists(), "expected a refused serve to make no state"

    # Port 0 picks one and says which.
    picked = ctl.start([binary_path(), "serve", "--endpoint", f"unix://{ctl.dir}/other.sock", "--state-dir",
                        other_state, "--listen", f"{ctl.address}:0", *flags])
    deadline = time.monotonic() + 15
    while "(mutual TLS)" not in picked.output():
        assert picked.poll() is None and time.monotonic() < deadline, picked.output()
        time.sleep(0.05)
    line = next(line for line in picked.output().splitlines() if "(mutual TLS)" in line)
    port = int(line.split(f"listening on {ctl.address}:")[1].split()[0])
    assert port not in (0, PORT), line
    wait_for_port(site.consumer_b, ctl.address, port, timeout=10, process=picked)
    picked.send_signal(signal.SIGTERM)
    assert picked.wait(timeout=20) == 0, picked.output()


def start_node_serve(site) -> HostProcess:
    """consumer-b's `serve --role node --listen`, registered (by its heartbeat) with its address."""
    b = site.consumer_b
    node_serve = b.start([binary_path(), "serve", "--role", "node", "--listen", f"{b.address}:9444",
                          "--endpoint", f"unix://{b.dir}/csi.sock", "--state-dir", b.state_dir,
                          "--grace-period", "2"], env=site.b.env)
    site.wait_until_registered("consumer-b", f"{b.address}:9444", node_serve)
    return node_serve


def test_a_node_registers_by_heartbeat_and_the_controller_proxies_calls_to_it(site):
    """serve --role node --controller registers its address; --on-node N reaches N's own Node
    service through the controller's proxy, as the same CSI call, and only as N or an admin."""
    node_serve = start_node_serve(site)
    assert "registered node \"consumer-b\" with controller" in node_serve.output()

    info = site.alice.ok_json("--on-node", "consumer-b", "node", "info")
    assert info["node_id"] == "consumer-b", f"expected consumer-b's own NodeGetInfo: {info}"
    assert re.search(r'NodeGetInfo node="consumer-b" peer=admin:alice forwarded .*status=OK', site.serve_log()), (
        site.serve_log())
    assert re.search(r"NodeGetInfo peer=controller:\S+ .*status=OK", node_serve.output()), node_serve.output()

    refused = site.a.run("--on-node", "consumer-b", "node", "info")
    assert refused.rc == EXIT_PERMISSION and 'node certificate "consumer-a"' in refused.stderr, refused.describe()
    no_address = site.alice.run("--on-node", "consumer-a", "node", "info")
    assert no_address.rc == EXIT_UNAVAILABLE and "registered no address" in no_address.stderr, (
        no_address.describe())
    unknown = site.alice.run("--on-node", "nobody", "node", "info")
    assert unknown.rc == EXIT_UNAVAILABLE and 'node "nobody" is not registered' in unknown.stderr, unknown.describe()
    site.assert_no_secrets_printed()


def use_roset(site, *clis) -> None:
    """Each consumer CLI (and what it starts) reaches the fake Roset API with its own copy of the key."""
    api_key = site.controller.config_dir / "roset.key"
    for cli in clis:
        own_key = cli.host.config_dir / "roset.key"
        shutil.copyfile(api_key, own_key)
        os.chmod(own_key, 0o600)
        cli.env.update({"ROSET_API_URL": site.roset_env["ROSET_API_URL"],
                        "ROSET_API_KEY_FILE": str(own_key), "ROSET_FUSE_BINARY": str(STANDIN_FUSE)})


# Runs on a lab host: holds a volume's attach lock through NodeState's HoldAttachLock on a serve's
# unix socket, prints "held" once it has it, and keeps it until killed.
HOLD_ATTACH_LOCK = """
import sys, time
import grpc
sys.path.insert(0, sys.argv[1])
import rosetctl_pb2, rosetctl_pb2_grpc
stub = rosetctl_pb2_grpc.NodeStateStub(grpc.insecure_channel("unix://" + sys.argv[2]))
call = stub.HoldAttachLock(rosetctl_pb2.HoldAttachLockRequest(node_id=sys.argv[3], volume_id=sys.argv[4]))
for message in call:
    if message.held:
        print("held", flush=True)
        break
time.sleep(3600)
"""


def hold_attach_lock(site, stubs, volume_id: str) -> HostProcess:
    """Another holder of consumer-b's attach lock of the volume, through its serve's socket."""
    b = site.consumer_b
    holder = b.start([sys.executable, "-c", HOLD_ATTACH_LOCK, str(Path(stubs.pb2.__file__).parent),
                      f"{b.dir}/csi.sock", "consumer-b", volume_id])
    deadline = time.monotonic() + 15
    while "held" not in holder.output():
        assert time.monotonic() < deadline and holder.poll() is None, holder.output()
        time.sleep(0.05)
    return holder


def finishes_after(holder: HostProcess, proc) -> Result:
    """`proc` (a CLI run started meanwhile) waits while `holder` holds the lock, and ends once it
    dies (the node sees its call cancelled and releases the lock)."""
    time.sleep(2)
    assert proc.poll() is None, f"expected the CLI run to wait for its turn: {proc.communicate()}"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    out, err = proc.communicate(timeout=60)
    result = Result(proc.returncode, out, err)
    assert result.rc == 0, result.describe()
    assert 'another rosetctl run is connecting or disconnecting volume' in err and "waiting up to 60 s" in err, (
        result.describe())
    return result


def test_on_node_acts_on_that_nodes_connections_and_attachments_take_turns(site, registry_stubs):
    """`--on-node N volume show|stats|disconnect` answer from and act on node N's connections
    (NodeState through the controller's proxy), not the host the CLI runs on; connect and
    disconnect of one volume on a node take turns through that node's attach lock, whether the
    CLI runs there or reaches it through the proxy."""
    use_roset(site, site.a, site.b)
    start_node_serve(site)
    volume_id = site.a.create("far", "-p", "provider=roset")["id"]
    target_b = site.consumer_b.dir / "far"

    # consumer-b's own connect waits while another holder has the volume's turn on consumer-b.
    holder = hold_attach_lock(site, registry_stubs, volume_id)
    connect = site.b.start("volume", "connect", volume_id, "--target", target_b, "-o", "json",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert json.loads(finishes_after(holder, connect).stdout)["path"] == str(target_b)
    # Two connects at once take turns: both succeed, on one staging.
    targets = [site.consumer_b.dir / "far-1", site.consumer_b.dir / "far-2"]
    both = [site.b.start("volume", "connect", volume_id, "--target", t, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True) for t in targets]
    for proc in both:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out, err)
    shown = site.b.volume(volume_id)
    assert sorted(c["target"] for c in shown["connections"]) == sorted(map(str, [target_b, *targets]))
    assert len(shown["stagings"]) == 1, shown

    # From consumer-a's host, through the controller: consumer-b's connections, not consumer-a's.
    assert site.a.volume(volume_id)["connections"] == []
    far = site.alice.ok_json("--on-node", "consumer-b", "volume", "show", volume_id)
    assert far["connections"] == shown["connections"] and far["stagings"] == shown["stagings"], far
    # A node certificate asks only its own node.
    refused = site.a.run("--on-node", "consumer-b", "volume", "show", volume_id)
    assert refused.rc == EXIT_PERMISSION and 'node certificate "consumer-a"' in refused.stderr, refused.describe()
    stats = site.alice.ok_json("--on-node", "consumer-b", "volume", "stats", volume_id, "--target", target_b)
    assert stats["path"] == str(target_b), stats
    assert site.alice.ok_json("--on-node", "consumer-b", "volume", "stats", volume_id)["path"] == min(
        str(t) for t in [target_b, *targets])

    # The disconnect through the proxy waits its turn on consumer-b too, then undoes consumer-b's
    # connections (and its mapping), not anything of consumer-a.
    holder = hold_attach_lock(site, registry_stubs, volume_id)
    disconnect = site.alice.start("--on-node", "consumer-b", "volume", "disconnect", volume_id, "-o", "json",
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = json.loads(finishes_after(holder, disconnect).stdout)
    assert sorted(done["disconnected"]) == sorted(map(str, [target_b, *targets])), done
    assert done["connected"] is False and done["staged"] is False, done
    assert not any(t.exists() for t in [target_b, *targets])
    assert site.b.volume(volume_id)["stagings"] == []
    assert site.ctl.volume(volume_id)["published_nodes"] == []
    # The proxied run's turn ended with it: the next run on consumer-b goes at once.
    again = site.b.run("volume", "connect", volume_id, "--target", target_b)
    assert again.rc == 0 and "waiting" not in again.stderr, again.describe()
    site.b.ok("volume", "disconnect", volume_id)
    site.a.ok("volume", "delete", volume_id)
    site.assert_no_secrets_printed()


def test_the_controller_lists_where_each_node_has_a_volume_connected(site):
    """Seed 001's combined ListVolumes: an admin's `volume list` and `volume show` ask every
    registered node with an address (through the controller's proxy) where it has each volume
    connected; a node that cannot be asked (down, or no address) is named with the reason, so the
    view is marked partial rather than silently short."""
    use_roset(site, site.a, site.b)
    node_serve = start_node_serve(site)
    volume_id = site.a.create("seen", "-p", "provider=roset")["id"]
    target_b = site.consumer_b.dir / "seen"
    site.b.ok("volume", "connect", volume_id, "--target", target_b)

    # alice sits on consumer-a's host: her own node answers here, consumer-b through the proxy.
    [listed] = [v for v in site.alice.volumes() if v["id"] == volume_id]
    assert listed["connections"] == [], "expected this host's own connections unchanged (none)"
    assert listed["nodes"] == [{"node": "consumer-b", "mapped": True, "connections": [str(target_b)],
                                "staged": True}], listed
    assert listed["unreachable_nodes"] == [], listed
    assert site.alice.volume(volume_id)["nodes"] == listed["nodes"]
    assert re.search(r'GetNodeVolumes node="consumer-b" peer=admin:alice forwarded .*status=OK', site.serve_log())
    table = site.alice.ok("volume", "list")
    assert "CONNECTED ON" in table.stdout and "consumer-b" in table.stdout and not table.stderr, table.describe()
    shown = site.alice.ok("volume", "show", volume_id).stdout
    assert f"Connected on: consumer-b: {target_b}" in re.sub(r":\s+", ": ", shown), shown

    # consumer-b's serve goes down: it is still registered with its address, and reported.
    node_serve.send_signal(signal.SIGKILL)
    node_serve.wait(timeout=10)
    started = time.monotonic()
    [listed] = [v for v in site.alice.volumes() if v["id"] == volume_id]
    assert time.monotonic() - started < 30, "expected a down node to cost one short deadline"
    assert listed["nodes"] == [{"node": "consumer-b", "mapped": True, "connections": None, "staged": None}], listed
    [down] = listed["unreachable_nodes"]
    assert down["node"] == "consumer-b" and "consumer-b" in down["reason"], listed
    table = site.alice.ok("volume", "list")
    assert 'node "consumer-b" is left out of this view' in table.stderr and volume_id in table.stdout, table.describe()

    # A node registered without an address cannot be asked either: consumer-a, seen from consumer-b.
    from_b = site.b.volume(volume_id)
    assert {"node": "consumer-a", "reason": "registered no address (its serve runs without --listen)"} in (
        from_b["unreachable_nodes"]), from_b
    assert [c["target"] for c in from_b["connections"]] == [str(target_b)]
    assert from_b["nodes"] == [{"node": "consumer-b", "mapped": True, "connections": [str(target_b)],
                                "staged": True}], from_b

    site.b.ok("volume", "disconnect", volume_id)
    site.a.ok("volume", "delete", volume_id)
    site.assert_no_secrets_printed()


def test_two_consumers_connect_one_roset_volume_and_see_each_others_writes(site):
    """The seed-002 shape with a shared filesystem: a roset volume made on the controller is
    mapped to each consumer by its own connect, staged there by its own roset-fuse with its own
    copy of the API key (the controller never sends one), and both see each other's writes."""
    use_roset(site, site.a, site.b)
    volume_id = site.a.create("team", "-p", "provider=roset")["id"]
    target_a = site.consumer_a.dir / "team"
    target_b = site.consumer_b.dir / "team"
    assert site.a.ok_json("volume", "connect", volume_id, "--target", target_a)["path"] == str(target_a)
    assert site.b.ok_json("volume", "connect", volume_id, "--target", target_b)["path"] == str(target_b)
    (target_a / "from-a.txt").write_text("written on consumer-a")
    (target_b / "from-b.txt").write_text("written on consumer-b")
    assert (target_b / "from-a.txt").read_text() == "written on consumer-a"
    assert (target_a / "from-b.txt").read_text() == "written on consumer-b"
    assert sorted(site.ctl.volume(volume_id)["published_nodes"]) == ["consumer-a", "consumer-b"]
    # Each consumer's own connections are its own: consumer-a sees its target, not consumer-b's.
    assert [c["target"] for c in site.a.volume(volume_id)["connections"]] == [str(target_a)]

    refused = site.a.run("volume", "delete", volume_id)
    assert refused.rc == 5 and "mapped" in refused.stderr, refused.describe()
    for cli in (site.a, site.b):
        cli.ok("volume", "disconnect", volume_id)
    assert site.ctl.volume(volume_id)["published_nodes"] == []
    assert not target_a.exists() and not target_b.exists()
    site.a.ok("volume", "delete", volume_id)
    site.assert_no_secrets_printed()


# ---------------------------------------------------------------- the controller killed mid-connect

# Stands in front of roset-fuse on a consumer, so a test can hold `volume connect` inside NodeStage
# (after the controller's ControllerPublishVolume answered): says it was reached, waits for the go.
HELD_FUSE = """#!/bin/sh
touch "{reached}"
i=0
while [ ! -e "{go}" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
exec "{fuse}" "$@"
"""


def hold_roset_fuse(site: Site, cli) -> tuple:
    """cli's host gets its own API key and a roset-fuse that waits in NodeStage until `go` exists;
    returns (reached, go)."""
    host = cli.host
    own_key = host.config_dir / "roset.key"
    shutil.copyfile(site.controller.config_dir / "roset.key", own_key)
    os.chmod(own_key, 0o600)
    reached, go = host.dir / "fuse-reached", host.dir / "fuse-go"
    wrapper = host.dir / "held-roset-fuse"
    wrapper.write_text(HELD_FUSE.format(reached=reached, go=go, fuse=STANDIN_FUSE))
    os.chmod(wrapper, 0o755)
    cli.env.update({"ROSET_API_URL": site.roset_env["ROSET_API_URL"], "ROSET_API_KEY_FILE": str(own_key),
                    "ROSET_FUSE_BINARY": str(wrapper)})
    return reached, go


def wait_for_file(path, proc, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"{what}: the connect exited first with {proc.returncode}: {out!r} {err!r}")
        assert time.monotonic() < deadline, f"{what}: not reached within {timeout} s"
        time.sleep(0.05)


def test_connects_in_flight_when_the_controller_is_killed_complete(site):
    """SIGKILL of the controller mid-`connect`, twice over: one run is between the controller's
    ControllerPublishVolume and its own NodeStage (it finishes on the consumer alone, at once: the
    controller has nothing left to do), a second run of the same volume waits its turn behind it and
    meets the dead controller at its ControllerPublishVolume (it retries until serve is back, then
    completes). Both sides agree afterwards, and disconnect undoes everything."""
    a = site.a
    reached, go = hold_roset_fuse(site, a)
    volume_id = a.create("interrupted", "-p", "provider=roset")["id"]
    first_target, second_target = site.consumer_a.dir / "first", site.consumer_a.dir / "second"
    procs = []

    def connect(target):
        procs.append(a.start("-o", "json", "volume", "connect", volume_id, "--target", target,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        return procs[-1]

    def finish(proc, timeout):
        out, err = proc.communicate(timeout=timeout)
        site.printed += [out, err]
        return Result(proc.returncode, out, err)

    try:
        first = connect(first_target)
        wait_for_file(reached, first, "NodeStage's roset-fuse")
        assert re.search(r"ControllerPublishVolume .*peer=node:consumer-a .*status=OK", site.serve_log()), (
            site.serve_log())
        second = connect(second_target)  # resolves the volume, then waits for first's turn to end
        time.sleep(2)
        assert second.poll() is None, finish(second, 10).describe()
        site.kill_serve()
        go.touch()
        started = time.monotonic()
        done = finish(first, PATIENCE + 30)
        assert done.rc == 0, f"expected the connect to finish without the controller: {done.describe()}"
        assert time.monotonic() - started < 10 and not retrying_lines(done), done.describe()
        assert done.json()["path"] == str(first_target) and done.json()["published_nodes"] == ["consumer-a"], (
            done.json())

        restart = DelayedRestart(site, 2)
        done = finish(second, PATIENCE + 30)
        restart.wait()
    finally:
        go.touch()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert done.rc == 0, f"expected the second connect to complete once serve was back: {done.describe()}"
    assert len(retrying_lines(done)) == 1 and "192.0.2.1" in retrying_lines(done)[0], done.stderr
    assert re.search(r"ControllerPublishVolume .*peer=node:consumer-a .*status=OK", site.serve.output()), (
        "expected the second run's ControllerPublishVolume answered by the restarted serve")

    assert site.ctl.volume(volume_id)["published_nodes"] == ["consumer-a"], site.ctl.volume(volume_id)
    shown = a.volume(volume_id)
    assert shown["published_nodes"] == ["consumer-a"], shown
    assert sorted(c["target"] for c in shown["connections"]) == [str(first_target), str(second_target)], shown
    for target in (first_target, second_target):
        assert os.path.ismount(target), f"expected {target} mounted"
    assert "consumer-a" in [n["node_id"] for n in site.ctl.ok_json("node", "list")]
    assert a.ok_json("volume", "connect", volume_id, "--target", first_target)["already_connected"] is True

    a.ok("volume", "disconnect", volume_id)
    assert site.ctl.volume(volume_id)["published_nodes"] == []
    assert a.volume(volume_id)["connections"] == [] and a.volume(volume_id)["stagings"] == []
    assert not first_target.exists() and not second_target.exists()
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    assert str(site.consumer_a.dir) not in mounts, mounts
    a.ok("volume", "delete", volume_id)


# ---------------------------------------------------------------- certificate rotation

# Runs on a lab host: one TLS handshake with the controller (client certificate shown); prints the
# serial number of the certificate the controller presented.
PEER_SERIAL = """
import socket, ssl, sys
from cryptography import x509
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.load_verify_locations(sys.argv[3])
context.load_cert_chain(sys.argv[4], sys.argv[5])
context.set_alpn_protocols(["h2"])
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) as raw:
    with context.wrap_socket(raw, server_hostname=sys.argv[1]) as tls:
        print(x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number)
"""


def test_sighup_makes_serve_show_a_new_certificate_at_once(site):
    """`tls init --force` re-issues the controller's certificate in place; SIGHUP makes serve use
    it for the next connection at once (gRPC's own look at the files comes only every 10 s), the
    reload is logged, and the CLI goes on working through it."""
    cert, key, ca = site.identity("consumer-a")

    def presented() -> int:
        done = site.consumer_a.run([sys.executable, "-c", PEER_SERIAL, site.controller.address, str(PORT),
                                    str(ca), str(cert), str(key)])
        assert done.rc == 0, done.describe()
        return int(done.stdout)

    def on_disk() -> int:
        from cryptography import x509
        return x509.load_pem_x509_certificate((site.tls_dir / "controller.crt").read_bytes()).serial_number

    volume_id = site.a.create("through-rotation")["id"]
    assert presented() == on_disk()
    for _ in range(3):  # gRPC's 10 s poll may happen to read the new files first: rotate again
        tls_ok(site.controller, site.printed, "init", "--force", "--dir", site.tls_dir, "--ip",
               site.controller.address)
        rotated = on_disk()
        if presented() != rotated:
            break
    assert presented() != rotated, "expected the old certificate until serve is told (or polls)"
    site.serve.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 4  # well inside gRPC's 10 s poll
    while presented() != rotated:
        assert site.serve.poll() is None, f"serve died of SIGHUP: {site.serve.output()}"
        assert time.monotonic() < deadline, "expected the new certificate at once after SIGHUP"
        time.sleep(0.1)
    assert site.serve.poll() is None
    log = site.serve.output()
    assert "received SIGHUP: reloading the TLS files" in log and "TLS files reloaded" in log, log
    assert site.a.volume(volume_id)["id"] == volume_id, "expected the CLI to work with the new certificate"

    # A bad file is refused at the SIGHUP: the certificate in use stays, and so does serve.
    (site.tls_dir / "controller.crt").write_text("not a certificate\n")
    site.serve.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "kept the TLS files in use" not in site.serve.output():
        assert time.monotonic() < deadline and site.serve.poll() is None, site.serve.output()
        time.sleep(0.1)
    assert presented() == rotated
    assert site.a.volume(volume_id)["id"] == volume_id
