"""The iscsi overlay's enrollment of node plugins, as rendered (docs/KUBERNETES.md): the Service,
the flags, the projected token, the volumes and the RBAC agree with each other and with serve's
defaults; the other overlays do not enroll. test_deploy_kubernetes.py runs these flags for real
(test_serve_accepts_the_manifests_flags_and_advertises_what_the_sidecars_expect)."""
from __future__ import annotations

import pytest

import k8s_enrollment
import k8s_manifests as k8s
from test_deploy_kubernetes import DEPLOY, all_of, kubectl, the  # noqa: F401  (kubectl: a fixture)


@pytest.fixture(scope="module")
def rendered(kubectl) -> dict[str, list[dict]]:  # noqa: F811
    return {overlay: k8s.render(kubectl, DEPLOY / "overlays" / overlay) for overlay in k8s.OVERLAYS}


def test_the_iscsi_overlay_enrolls_its_node_plugins(rendered):
    """The iscsi node plugins get node certificates the Kubernetes way (docs/KUBERNETES.md): each
    rendered piece the enrollment needs is there and agrees with the others and with serve's
    defaults. (test_serve_accepts_the_manifests_flags... runs these flags against a controller.)"""
    objects = rendered["iscsi"]
    controller = the(objects, "Deployment", "rosetctl-controller")
    node = the(objects, "DaemonSet", "rosetctl-node")
    c_args = k8s.container(controller, "rosetctl")["args"]
    n_args = k8s.container(node, "rosetctl")["args"]
    service = the(objects, "Service", "rosetctl-controller")
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert service["spec"]["selector"] == controller["spec"]["selector"]["matchLabels"]
    listen = int(k8s.flag_value(c_args, "--listen").rsplit(":", 1)[1])
    enroll = int(k8s.flag_value(c_args, "--enroll-listen").rsplit(":", 1)[1])
    assert (ports["grpc"], ports["enroll"]) == (listen, enroll)
    dns = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    assert k8s.flag_value(n_args, "--controller") == f"{dns}:{listen}"
    assert k8s.flag_value(n_args, "--enroll-at") == f"{dns}:{enroll}"
    # Node plugins in the host's network resolve the Service's name through the cluster's DNS.
    assert k8s.pod_spec(node)["dnsPolicy"] == "ClusterFirstWithHostNet"

    # The token: projected, of the node's own ServiceAccount, for the audience the controller checks.
    files = k8s_enrollment.files_named(node)
    volume, inside = files["--enroll-token-file"]
    sources = volume["projected"]["sources"]
    token = [s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s]
    assert token and token[0]["path"] == inside
    audience = k8s.flag_value(c_args, "--enroll-audience") or "rosetctl.io/enroll"
    assert token[0]["audience"] == audience and token[0]["expirationSeconds"] <= 3600
    account = k8s.pod_spec(node)["serviceAccountName"]
    assert (k8s.flag_value(c_args, "--enroll-service-account") or
            "system:serviceaccount:rosetctl:rosetctl-node") == f"system:serviceaccount:rosetctl:{account}"
    # Its certificate and key in memory, the CA from the ConfigMap the guide makes.
    assert files["--tls-cert"][0] == files["--tls-key"][0]
    assert files["--tls-key"][0]["emptyDir"] == {"medium": "Memory"}
    assert files["--tls-ca"][0]["configMap"]["name"] == "rosetctl-ca"

    # The controller's files from the Secret, 0400 (a key others can read is refused), each by
    # its key's plain name, the symlink kubelet makes (rosetctl follows exactly kubelet's links;
    # test_deploy_kubernetes.py runs serve with these flags on such a layout).
    c_files = k8s_enrollment.files_named(controller)
    for flag in ("--tls-cert", "--tls-key", "--tls-ca", "--enroll-ca-key"):
        volume, inside = c_files[flag]
        assert volume["secret"] == {"secretName": "rosetctl-tls", "defaultMode": 0o400}, flag
        assert "/" not in inside and not inside.startswith(".."), f"{flag}: {inside}"
    assert k8s_enrollment.files_named(node).keys().isdisjoint({"--enroll-ca-key"})
    assert all("rosetctl-tls" != (v.get("secret") or {}).get("secretName") for v in k8s.pod_spec(node)["volumes"])

    # RBAC: the controller's ServiceAccount may create tokenreviews; the node's gets nothing new.
    roles = {r["metadata"]["name"]: r for r in all_of(objects, "ClusterRole")}
    bound = [b for b in all_of(objects, "ClusterRoleBinding")
             if {"kind": "ServiceAccount", "name": k8s.pod_spec(controller)["serviceAccountName"],
                 "namespace": "rosetctl"} in b["subjects"]]
    rules = [rule for b in bound for rule in roles[b["roleRef"]["name"]]["rules"]]
    assert any("authentication.k8s.io" in r["apiGroups"] and "tokenreviews" in r["resources"] and
               "create" in r["verbs"] for r in rules), rules
    node_bound = [b for b in all_of(objects, "ClusterRoleBinding") + all_of(objects, "RoleBinding")
                  if any(s.get("name") == account for s in b["subjects"])]
    assert node_bound == []


@pytest.mark.parametrize("overlay", ["local", "roset"])
def test_only_the_iscsi_overlay_enrolls(rendered, overlay):
    """roset publishes to any node id and local to the controller's node: no node certificates."""
    for obj in rendered[overlay]:
        if obj["kind"] in ("Deployment", "DaemonSet"):
            args = k8s.container(obj, "rosetctl")["args"]
            assert not [a for a in args if a.startswith(("--enroll", "--listen", "--controller"))], args
