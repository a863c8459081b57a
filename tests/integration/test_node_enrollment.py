"""Node plugins known to the controller the Kubernetes way (issue 33, item 1; docs/KUBERNETES.md):
a node plugin started as the DaemonSet starts it (a projected ServiceAccount token for the
enrollment audience, the CA, no certificate) gets a node certificate for exactly its node from
the controller, which asks TokenReview (a fake API server following the contract,
tests/fakes/fake_kube_api.py), registers itself with it, and ControllerPublish of an iscsi
volume to that node then works without anyone running `node register`. The attacks on the
enrollment are in tests/security/test_enrollment_attacks.py."""
from __future__ import annotations

import os
import socket
import stat
import threading
import time
from datetime import datetime, timezone

import pytest

from enrollment_site import (AUDIENCE, CONTROLLER_USER, NODE_USER, build_enrollment_site, subject_of,
                             wait_for_line)
from tgtd_lab import INITIATOR_A, INITIATOR_B, IQN_PREFIX, free_port


def iscsi_flags(tgtd) -> list[str]:
    return ["--provider", "iscsi", "--iscsi-portal", tgtd.portal, "--iscsi-tgt-control-port",
            str(tgtd.control_port), "--iscsi-iqn-prefix", IQN_PREFIX]


@pytest.fixture
def lab_site(workdir, tgtd, host_lab):
    """The controller (and the API server it reviews tokens with) on the lab host "controller",
    192.0.2.1, listening on the manifests' ports; node-a and node-b are hosts of their own,
    which reach it only over the lab's network, as DaemonSet pods reach the controller's Service.
    tgtd stays on the test's host: the controller reaches it through its control socket (a
    file), and no node logs in here."""
    controller = host_lab.add("controller")
    nodes = {name: host_lab.add(name) for name in ("node-a", "node-b")}
    s = build_enrollment_site(workdir, iscsi_flags(tgtd), controller_host=controller)
    try:
        s.start_controller(controller, s.kube.add_caller(CONTROLLER_USER))
        yield s, nodes
    finally:
        s.kube.stop()


def registry(cli) -> dict[str, dict]:
    return {node["node_id"]: node for node in cli.ok_json("node", "list")}


def test_a_node_plugin_gets_a_certificate_for_its_node_registers_itself_and_is_published_to(
        lab_site, processes, tgtd):
    """Across hosts: each node plugin on its own lab host enrolls at and registers with the
    controller's address on the lab's network."""
    site, hosts = lab_site
    ctl = site.controller_cli(processes)
    volume = ctl.ok_json(*site.provider_flags, "volume", "create", "data", "--size", "16Mi")["id"]
    # Before: the node is unknown to the controller, as every Kubernetes node was (issue 33 #1).
    unknown = ctl.run(*site.provider_flags, "volume", "map", "data", "--node", "node-a")
    assert unknown.rc != 0 and "not registered" in unknown.stderr, unknown.describe()

    site.start_plugin(hosts["node-a"], "node-a", site.token("node-a"), initiator=INITIATOR_A)
    site.start_plugin(hosts["node-b"], "node-b", site.token("node-b"), initiator=INITIATOR_B)
    # Only the lab's network joins them: the controller is not on this host's loopback.
    assert site.controller_address == "192.0.2.1:9443" and site.enroll_address == "192.0.2.1:9444"
    assert not hosts["node-a"].can_connect("127.0.0.1", 9444)

    files = site.plugin_files("node-a")
    certificate = files["cert"].read_text()
    assert subject_of(certificate) == {"organizationName": "rosetctl", "organizationalUnitName": "node",
                                       "commonName": "node-a"}
    from cryptography import x509
    facts = x509.load_pem_x509_certificate(certificate.encode())
    lifetime = facts.not_valid_after.replace(tzinfo=timezone.utc) - datetime.now(timezone.utc)
    assert 23 * 3600 < lifetime.total_seconds() <= 24 * 3600, lifetime  # short-lived: no revocation
    assert stat.S_IMODE(os.stat(files["key"]).st_mode) == 0o600
    # The key never left the node: the controller holds no copy of it anywhere in its state.
    key_text = files["key"].read_text()
    for path in (site.workdir / "controller").rglob("*"):
        if path.is_file():
            assert key_text.splitlines()[1] not in path.read_bytes().decode(errors="replace")

    nodes = registry(ctl)
    assert nodes["node-a"]["iscsi_initiator"] == INITIATOR_A, nodes
    assert nodes["node-b"]["iscsi_initiator"] == INITIATOR_B, nodes
    # The controller asked the API server as itself, for the enrollment audience.
    assert [(r["caller"], r["audiences"], r["username"]) for r in site.kube.reviews] == \
        [(CONTROLLER_USER, [AUDIENCE], NODE_USER)] * 2

    mapped = ctl.run_json(*site.provider_flags, "volume", "map", "data", "--node", "node-a")
    assert mapped.rc == 0, mapped.describe()
    assert tgtd.targets()[f"{IQN_PREFIX}:{volume}"]["acl"] == [INITIATOR_A]
    site.assert_no_token_anywhere(unknown.stdout, unknown.stderr, mapped.stdout, mapped.stderr)


def test_a_node_plugin_renews_its_certificate_before_it_expires(workdir, tgtd, processes):
    s = build_enrollment_site(workdir, iscsi_flags(tgtd))
    try:
        # 0.02 h: 72 s certificates, renewed at half-life (at the earliest 30 s after the last).
        s.start_controller(processes, s.kube.add_caller(CONTROLLER_USER), extra=["--enroll-hours", "0.02"])
        s.start_plugin(processes, "node-a", s.token("node-a"), initiator=INITIATOR_A)
        first = s.plugin_files("node-a")["cert"].read_text()
        deadline = time.monotonic() + 60
        while s.plugin_files("node-a")["cert"].read_text() == first:
            assert time.monotonic() < deadline, "the certificate was not renewed within 60 s"
            time.sleep(0.5)
        assert subject_of(s.plugin_files("node-a")["cert"].read_text())["commonName"] == "node-a"
        assert len(s.kube.reviews) >= 2
        # The renewed certificate is the one its heartbeat now uses: it keeps registering.
        proc, log = s.plugins["node-a"]
        assert proc.poll() is None, log.read_text()
        s.assert_no_token_anywhere()
    finally:
        s.kube.stop()


def test_a_node_plugin_that_starts_before_its_controller_waits_for_it(workdir, tgtd, processes):
    """A DaemonSet pod may start before the controller's: it waits (--enroll-wait) rather than
    exiting, and enrolls and registers once the controller answers."""
    s = build_enrollment_site(workdir, iscsi_flags(tgtd))
    try:
        credential = s.kube.add_caller(CONTROLLER_USER)
        s.listen_port, s.enroll_port = free_port(), free_port()
        proc = s.start_plugin(processes, "node-a", s.token("node-a"), initiator=INITIATOR_A, wait=None)
        _, log = s.plugins["node-a"]
        wait_for_line(log, "trying again every 2 s", proc)
        s.start_controller(processes, credential)
        wait_for_line(log, "registered node", proc)
        assert registry(s.controller_cli(processes))["node-a"]["iscsi_initiator"] == INITIATOR_A
    finally:
        s.kube.stop()


def test_enrolling_without_a_controller_to_register_with_is_refused_at_start(cli, workdir):
    """A certificate nobody registers with would leave the node unknown, as before: a usage error."""
    token = workdir / "token"
    token.write_text("t")
    done = cli.run("--tls-ca", workdir / "ca.crt", "--tls-cert", workdir / "n.crt", "--tls-key", workdir / "n.key",
                   "serve", "--role", "node", "--endpoint", f"unix://{workdir}/n.sock",
                   "--enroll-at", "127.0.0.1:9", "--enroll-token-file", token, timeout=30)
    assert done.rc != 0 and "--enroll-at" in done.stderr and "--controller" in done.stderr, done.describe()


def test_a_node_plugin_waits_out_a_controller_that_accepts_and_never_answers(workdir, tgtd, processes):
    """A controller address that takes the connection and then says nothing (a resolver waiting
    for a nameserver, a firewall dropping the handshake) ends each enrollment attempt with
    DEADLINE_EXCEEDED, not UNAVAILABLE: the node plugin keeps trying as for a refused connection,
    rather than exiting on the first silent attempt."""
    s = build_enrollment_site(workdir, iscsi_flags(tgtd))
    try:
        credential = s.kube.add_caller(CONTROLLER_USER)
        s.listen_port, s.enroll_port = free_port(), free_port()
        silent = socket.create_server(("127.0.0.1", s.enroll_port))  # never accepts, never answers
        try:
            proc = s.start_plugin(processes, "node-a", s.token("node-a"), initiator=INITIATOR_A,
                                  wait=None, enroll_wait=120)
            _, log = s.plugins["node-a"]
            # The first attempt's own deadline is 15 s.
            said = wait_for_line(log, "trying again every 2 s", proc, timeout=60)
            assert "Deadline" in said or "deadline" in said, said
        finally:
            silent.close()
        s.start_controller(processes, credential)
        wait_for_line(log, "registered node", proc, timeout=60)
        assert registry(s.controller_cli(processes))["node-a"]["iscsi_initiator"] == INITIATOR_A
    finally:
        s.kube.stop()


def test_a_node_stage_waits_for_a_restarting_controller_to_give_the_secrets(workdir, tgtd, processes, csi):
    """NodeStage of an iscsi volume asks the controller for the node's CHAP secrets first. While
    the controller restarts (a new pod, an upgrade) that call waits for it within its 30 s rather
    than failing the stage at once with UNAVAILABLE (kubelet would retry, but a CO's first
    attempt after every controller restart failing is noise in its events)."""
    import grpc
    s = build_enrollment_site(workdir, iscsi_flags(tgtd))
    try:
        credential = s.kube.add_caller(CONTROLLER_USER)
        s.start_controller(processes, credential)
        s.start_plugin(processes, "node-a", s.token("node-a"), initiator=INITIATOR_A)
        ctl = s.controller_cli(processes)
        volume = ctl.ok_json(*s.provider_flags, "volume", "create", "data", "--size", "16Mi")["id"]
        mapped = ctl.run_json(*s.provider_flags, "volume", "map", "data", "--node", "node-a")
        assert mapped.rc == 0, mapped.describe()
        publish_context = mapped.json()["publish_context"]

        s.controller.terminate()
        s.controller.wait(timeout=30)
        # A regular file as the staging path: the stage fails at the step right after the
        # secrets (making that directory), so no login touches this host's iscsi records.
        not_a_directory = workdir / "stage-here-is-a-file"
        not_a_directory.write_text("")
        pb2 = csi.pb2
        capability = pb2.VolumeCapability(
            mount=pb2.VolumeCapability.MountVolume(fs_type="ext4"),
            access_mode=pb2.VolumeCapability.AccessMode(
                mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER))
        outcome: dict = {}

        def stage():
            with grpc.insecure_channel(f"unix://{workdir}/node-a.sock") as channel:
                try:
                    csi.grpc.NodeStub(channel).NodeStageVolume(pb2.NodeStageVolumeRequest(
                        volume_id=volume, publish_context=publish_context,
                        staging_target_path=str(not_a_directory), volume_capability=capability),
                        timeout=60)
                    outcome["code"] = grpc.StatusCode.OK
                except grpc.RpcError as failure:
                    outcome["code"], outcome["details"] = failure.code(), failure.details()

        stager = threading.Thread(target=stage)
        stager.start()
        time.sleep(3)  # the stage is waiting for the controller now
        assert stager.is_alive(), outcome
        s.start_controller(processes, credential)
        stager.join(timeout=60)
        assert not stager.is_alive()
        assert outcome["code"] != grpc.StatusCode.UNAVAILABLE, outcome
        assert "secrets" not in outcome.get("details", ""), outcome
        assert str(not_a_directory) in outcome.get("details", ""), outcome
    finally:
        s.kube.stop()
