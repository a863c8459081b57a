"""Attacks on the enrollment of node plugins (docs/KUBERNETES.md, docs/SECURITY.md): the controller
issues a node certificate only for the node a TokenReview of a pod-bound token of the node
plugin's ServiceAccount names, for the enrollment audience, and nothing else gets one. Each
refusal is checked for its code and that nothing was issued (no certificate, no registry entry),
and every output and log for the tokens. The API server is tests/fakes/fake_kube_api.py."""
from __future__ import annotations

import pytest

from enrollment_site import CONTROLLER_USER, build_enrollment_site, issue_request, subject_of


@pytest.fixture
def site(workdir, processes):
    s = build_enrollment_site(workdir, [])
    try:
        s.start_controller(processes, s.kube.add_caller(CONTROLLER_USER))
        yield s
    finally:
        s.kube.stop()


def registered(site, processes) -> list[str]:
    return [node["node_id"] for node in site.controller_cli(processes).ok_json("node", "list")]


def refused(site, stubs, node_id, token, code, **kwargs) -> str:
    answer = issue_request(site, stubs, node_id, token, **kwargs)
    assert answer["code"] == code, answer
    assert "certificate" not in answer
    site.assert_no_token_anywhere(answer["details"])
    return answer["details"]


def test_a_token_for_node_a_never_gets_a_certificate_for_node_b(site, registry_stubs, processes):
    token_a = site.token("node-a")
    details = refused(site, registry_stubs, "node-b", token_a, "PERMISSION_DENIED")
    assert 'proves node "node-a"' in details and '"node-b"' in details, details
    # Nor by the request's own subject: the certificate names the token's node, whatever the CSR says.
    issued = issue_request(site, registry_stubs, "node-a", token_a, csr_subject="node-b")
    assert issued["code"] == "OK", issued
    assert subject_of(issued["certificate"])["commonName"] == "node-a"
    # And a node plugin pod on node A started as node B is refused at start, and exits.
    proc = site.start_plugin(processes, "node-a", site.token("node-a"), node_id="node-b", wait=None)
    assert proc.wait(timeout=30) != 0
    _, log = site.plugins["node-a"]
    assert "PERMISSION_DENIED" in log.read_text() or "never issued" in log.read_text(), log.read_text()
    assert not site.plugin_files("node-a")["cert"].exists()
    assert "node-b" not in registered(site, processes)
    site.assert_no_token_anywhere()


def test_a_token_for_another_audience_is_unauthenticated(site, registry_stubs, processes):
    # The pod's default token (the API server's audience), and one made for another service.
    for audiences in (["https://kubernetes.default.svc.cluster.local"], ["vault"]):
        details = refused(site, registry_stubs, "node-a", site.token("node-a", audiences=audiences),
                          "UNAUTHENTICATED")
        assert "rosetctl.io/enroll" in details, details
    assert registered(site, processes) == []


def test_another_service_accounts_token_is_refused(site, registry_stubs, processes):
    # A pod of the namespace's default ServiceAccount on node-a, with the right audience.
    details = refused(site, registry_stubs, "node-a", site.token("node-a", service_account="default"),
                      "PERMISSION_DENIED")
    assert "system:serviceaccount:rosetctl:default" in details and "rosetctl-node" in details, details
    assert registered(site, processes) == []


def test_a_token_bound_to_no_pod_names_no_node_and_is_refused(site, registry_stubs, processes):
    # `kubectl create token rosetctl-node --audience rosetctl.io/enroll`: right ServiceAccount, no node.
    details = refused(site, registry_stubs, "node-a", site.token(None), "PERMISSION_DENIED")
    assert "authentication.kubernetes.io/node-name" in details, details


def test_unknown_expired_and_missing_tokens_are_unauthenticated(site, registry_stubs, processes):
    refused(site, registry_stubs, "node-a", "not-a-token-the-api-server-made", "UNAUTHENTICATED")
    details = refused(site, registry_stubs, "node-a", site.token("node-a", lifetime=-1), "UNAUTHENTICATED")
    assert "expired" in details, details
    details = refused(site, registry_stubs, "node-a", None, "UNAUTHENTICATED")
    assert "rosetctl-enrollment-token" in details, details
    assert registered(site, processes) == []


def test_a_controller_the_api_server_refuses_issues_nothing(workdir, registry_stubs, processes):
    """Without `create tokenreviews` in its RBAC (403) or with credentials the API server does not
    know (401), nothing is issued: UNAVAILABLE naming what to fix, never PERMISSION_DENIED for the node."""
    s = build_enrollment_site(workdir, [])
    try:
        s.start_controller(processes, s.kube.add_caller(CONTROLLER_USER, allowed=False))
        answer = issue_request(s, registry_stubs, "node-a", s.token("node-a"))
        assert answer["code"] == "UNAVAILABLE" and "tokenreviews" in answer["details"], answer
        assert s.kube.reviews == []
        s.assert_no_token_anywhere(answer["details"])
    finally:
        s.kube.stop()


def test_a_peer_without_a_certificate_may_make_no_other_call(site, registry_stubs, csi):
    """The enrollment listener serves Enrollment alone; the mutual-TLS listener lets nobody in
    without a certificate, enrollment included."""
    import grpc
    ca = (site.tls / "ca.crt").read_bytes()
    with grpc.secure_channel(site.enroll_address, grpc.ssl_channel_credentials(ca)) as channel:
        registry = registry_stubs.grpc.RegistryStub(channel)
        with pytest.raises(grpc.RpcError) as failed:
            registry.RegisterNode(registry_stubs.pb2.RegisterNodeRequest(node_id="node-a"), timeout=10)
        assert failed.value.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED)
        identity = csi.grpc.IdentityStub(channel)
        with pytest.raises(grpc.RpcError) as failed:
            identity.GetPluginInfo(csi.pb2.GetPluginInfoRequest(), timeout=10)
        assert failed.value.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED)
    answer = issue_request(site, registry_stubs, "node-a", site.token("node-a"), address=site.controller_address)
    assert answer["code"] == "UNAVAILABLE", answer  # the handshake itself fails: no certificate


def test_an_enrolled_node_acts_only_for_itself(site, registry_stubs, processes, tmp_path):
    """The certificate is a node's like any other: node-a's registers node-a, never node-b."""
    import grpc
    issued = issue_request(site, registry_stubs, "node-a", site.token("node-a"))
    assert issued["code"] == "OK", issued
    from cryptography.hazmat.primitives import serialization
    key = issued["key"].private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    credentials = grpc.ssl_channel_credentials((site.tls / "ca.crt").read_bytes(), key,
                                               issued["certificate"].encode())
    with grpc.secure_channel(site.controller_address, credentials) as channel:
        registry = registry_stubs.grpc.RegistryStub(channel)
        with pytest.raises(grpc.RpcError) as failed:
            registry.RegisterNode(registry_stubs.pb2.RegisterNodeRequest(node_id="node-b"), timeout=10)
        assert failed.value.code() == grpc.StatusCode.PERMISSION_DENIED, failed.value
        registry.RegisterNode(registry_stubs.pb2.RegisterNodeRequest(node_id="node-a"), timeout=10)
    assert registered(site, processes) == ["node-a"]


def test_a_node_plugin_refuses_to_show_its_token_to_a_peer_that_is_not_the_controller(
        workdir, registry_stubs, processes):
    """A node's certificate of the same CA answering at the enrollment address (a node that took
    the controller's address) never sees the token: the node plugin checks for OU=controller."""
    import subprocess
    from rosetctl_cli import binary_path
    s = build_enrollment_site(workdir, [])
    try:
        done = subprocess.run([binary_path(), "tls", "issue", "impostor", "--dir", str(s.tls), "--ip", "127.0.0.1"],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        # The impostor serves enrollment with a node certificate (its own "controller").
        (s.tls / "real-controller.crt").write_bytes((s.tls / "controller.crt").read_bytes())
        (s.tls / "real-controller.key").write_bytes((s.tls / "controller.key").read_bytes())
        (s.tls / "controller.crt").write_bytes((s.tls / "impostor.crt").read_bytes())
        (s.tls / "controller.key").write_bytes((s.tls / "impostor.key").read_bytes())
        s.start_controller(processes, s.kube.add_caller(CONTROLLER_USER))
        proc = s.start_plugin(processes, "node-a", s.token("node-a"), wait=None)
        assert proc.wait(timeout=60) != 0
        _, log = s.plugins["node-a"]
        text = log.read_text()
        assert "where a controller certificate was expected" in text, text
        assert s.kube.reviews == [], "the impostor got the token reviewed"
        s.assert_no_token_anywhere()
    finally:
        s.kube.stop()
