"""deploy/kubernetes: every overlay renders, every object is a valid Kubernetes object, and what the
manifests tell kubelet and the sidecars agrees with the rosetctl they run: its flags parse, the
driver name and sockets match, and the sidecars are set up for exactly what serve advertises."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

import k8s_enrollment
import k8s_manifests as k8s
from rosetctl_fixtures import skip_or_fail

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
DEPLOY = k8s.deploy_dir(SOURCE)
GUIDE = SOURCE / "docs" / "guides" / "kubernetes.md"


@pytest.fixture(scope="module")
def kubectl():
    path = k8s.kubectl_binary()
    if path is None:
        skip_or_fail("kubectl is missing: install Debian's kubernetes-client (scripts/install-deps.sh)")
    return path


@pytest.fixture(scope="module")
def rendered(kubectl) -> dict[str, list[dict]]:
    return {overlay: k8s.render(kubectl, DEPLOY / "overlays" / overlay) for overlay in k8s.OVERLAYS}


def the(objects: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected exactly one {kind} {name or ''}, found {len(found)}"
    return found[0]


def needs_kubernetes_models() -> None:
    """python3-kubernetes (the API's OpenAPI models), which scripts/install-deps.sh installs: a
    skip without it, a failure in CI."""
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        skip_or_fail("python3-kubernetes (the API's OpenAPI models) is missing")


def all_of(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_every_object_is_a_valid_kubernetes_object(rendered, overlay):
    needs_kubernetes_models()
    objects = rendered[overlay]
    errors = [e for obj in objects for e in k8s.validate(obj)]
    assert not errors, f"expected overlay {overlay} to hold only valid objects:\n" + "\n".join(errors)
    kinds = {o["kind"] for o in objects}
    assert {"CSIDriver", "Deployment", "DaemonSet", "StorageClass", "VolumeSnapshotClass", "ClusterRole"} <= kinds


def test_the_validator_rejects_what_kubernetes_would():
    """The check above is not vacuous: a misspelt field, a wrong type and a missing required field
    of a real manifest are each reported."""
    needs_kubernetes_models()
    import copy
    import yaml
    node = yaml.safe_load((DEPLOY / "base" / "node.yaml").read_text())
    assert k8s.validate(node) == []
    typo = copy.deepcopy(node)
    k8s.container(typo, "rosetctl")["volumeMounts"][1]["mountPropogation"] = "Bidirectional"
    assert any("mountPropogation" in e for e in k8s.validate(typo))
    wrong_type = copy.deepcopy(node)
    k8s.container(wrong_type, "rosetctl")["securityContext"]["privileged"] = "yes"
    assert any("privileged" in e for e in k8s.validate(wrong_type))
    wrong_case = copy.deepcopy(node)
    k8s.container(wrong_case, "rosetctl")["volumeMounts"][1]["mountPropagation"] = "bidirectional"
    assert any("bidirectional" in e for e in k8s.validate(wrong_case))
    no_image = copy.deepcopy(node)
    del k8s.pod_spec(no_image)["containers"][0]["name"]
    assert any("name" in e for e in k8s.validate(no_image))
    cluster_scoped = {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
                      "metadata": {"name": "x", "namespace": "rosetctl"}, "driver": "io.roset.csi",
                      "deletionPolicy": "Delete"}
    assert any("cluster-scoped" in e for e in k8s.validate(cluster_scoped))


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_names_and_sockets_agree(rendered, overlay):
    objects = rendered[overlay]
    driver = the(objects, "CSIDriver")["metadata"]["name"]
    for sc in all_of(objects, "StorageClass"):
        assert sc["provisioner"] == driver, f"StorageClass {sc['metadata']['name']} names another driver"
    assert the(objects, "VolumeSnapshotClass")["driver"] == driver

    node = the(objects, "DaemonSet", "rosetctl-node")
    plugin_args = k8s.container(node, "rosetctl")["args"]
    endpoint = k8s.flag_value(plugin_args, "--endpoint").removeprefix("unix://")
    registrar_args = k8s.container(node, "node-driver-registrar")["args"]
    # kubelet dials the registration path on the host: it must be the plugin's socket there, in
    # the directory named after the driver, as CSI drivers are laid out under /var/lib/kubelet.
    registration = k8s.flag_value(registrar_args, "--kubelet-registration-path")
    assert k8s.host_path(node, "rosetctl", endpoint) == registration
    assert registration == f"/var/lib/kubelet/plugins/{driver}/csi.sock"
    for sidecar in ("node-driver-registrar", "liveness-probe"):
        address = k8s.flag_value(k8s.container(node, sidecar)["args"], "--csi-address")
        assert k8s.volume_identity(node, sidecar, address) == k8s.volume_identity(node, "rosetctl", endpoint), (
            f"expected {sidecar} to dial the plugin's socket {endpoint}")
    assert k8s.host_path(node, "node-driver-registrar", "/registration/x") == "/var/lib/kubelet/plugins_registry/x"

    controller = the(objects, "Deployment", "rosetctl-controller")
    endpoint = k8s.flag_value(k8s.container(controller, "rosetctl")["args"], "--endpoint").removeprefix("unix://")
    for c in k8s.pod_spec(controller)["containers"]:
        if c["name"] == "rosetctl":
            continue
        address = k8s.flag_value(c["args"], "--csi-address")
        assert k8s.volume_identity(controller, c["name"], address) == \
            k8s.volume_identity(controller, "rosetctl", endpoint), f"expected {c['name']} to dial {endpoint}"

    for pod in (node, controller):
        probe_port = k8s.flag_value(k8s.container(pod, "liveness-probe")["args"], "--health-port")
        ports = {p["name"]: p["containerPort"] for p in k8s.container(pod, "rosetctl")["ports"]}
        probe = k8s.container(pod, "rosetctl")["livenessProbe"]["httpGet"]
        assert ports[probe["port"]] == int(probe_port), "the plugin's livenessProbe must ask the livenessprobe sidecar"


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_privilege_only_where_needed(rendered, overlay):
    """A sidecar is privileged exactly when the plugin whose socket it dials is (on SELinux hosts
    an unprivileged container may not connect to a privileged one's socket: csi-driver-host-path
    marks its sidecars privileged for this)."""
    for obj in rendered[overlay]:
        if obj["kind"] not in ("Deployment", "DaemonSet"):
            continue
        plugin_privileged = bool((k8s.container(obj, "rosetctl").get("securityContext") or {}).get("privileged"))
        for c in k8s.pod_spec(obj)["containers"]:
            privileged = (c.get("securityContext") or {}).get("privileged", False)
            if c["name"] != "rosetctl":
                assert privileged == plugin_privileged, (
                    f"sidecar {c['name']} of {obj['metadata']['name']} must be privileged exactly when the plugin is")
                assert (c.get("securityContext") or {}).get("readOnlyRootFilesystem") or obj["kind"] == "Deployment"
            for mount in c.get("volumeMounts", []):
                if mount.get("mountPropagation") == "Bidirectional":
                    assert privileged, f"{c['name']}: Bidirectional propagation needs (and is the reason for) privilege"
    node = the(rendered[overlay], "DaemonSet", "rosetctl-node")
    kubelet = [m for m in k8s.container(node, "rosetctl")["volumeMounts"] if m["mountPath"] == "/var/lib/kubelet"]
    assert kubelet and kubelet[0].get("mountPropagation") == "Bidirectional"
    controller = the(rendered[overlay], "Deployment", "rosetctl-controller")
    plugin = k8s.container(controller, "rosetctl")
    # Only the local controller freezes filesystems for snapshots of image volumes.
    assert bool((plugin.get("securityContext") or {}).get("privileged")) == (overlay == "local")


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_no_two_containers_of_a_node_listen_on_one_port(rendered, overlay):
    """The controller may run on a node of the DaemonSet: the ports of pods in the host's network
    must differ from each other, and within a pod every container's must."""
    def ports(pod: dict) -> list[int]:
        """Ports the sidecars listen on (each once) and the ones containers declare (a declared
        port may be a sidecar's: the plugin's livenessProbe port is the livenessprobe's)."""
        listening, declared = [], set()
        for c in k8s.pod_spec(pod)["containers"]:
            declared |= {p["containerPort"] for p in c.get("ports", [])}
            for flag in ("--http-endpoint", "--health-port"):
                value = k8s.flag_value(c.get("args", []), flag)
                if value is not None:
                    listening.append(int(value.rsplit(":", 1)[-1]))
        assert len(listening) == len(set(listening)), f"{pod['metadata']['name']}: two sidecars on one port"
        return sorted(set(listening) | declared)

    pods = [o for o in rendered[overlay] if o["kind"] in ("Deployment", "DaemonSet")]
    host = [p for pod in pods if k8s.pod_spec(pod).get("hostNetwork") for p in ports(pod)]
    assert len(host) == len(set(host)), f"pods in the host's network share a port: {sorted(host)}"
    # A pod in the host's network takes its ports on every node it runs on: not the ones other
    # CSI drivers' pods and the sidecars' defaults take (livenessprobe 9808, 9809, 9810).
    taken = {9808, 9809, 9810}
    assert not taken & set(host), f"pods in the host's network listen on {sorted(taken & set(host))} of the node"
    for pod in pods:
        if k8s.pod_spec(pod).get("hostNetwork"):
            annotated = pod["spec"]["template"]["metadata"].get("annotations", {}).get("prometheus.io/port")
            declared = {p["name"]: p["containerPort"] for p in k8s.container(pod, "rosetctl")["ports"]}
            metrics = k8s.flag_value(k8s.container(pod, "rosetctl")["args"], "--metrics-listen")
            assert int(annotated) == declared["metrics"] == int(metrics.rsplit(":", 1)[1])


def known_flags(cli) -> set[str]:
    """Every long flag the binary's help lists: the global ones and serve's."""
    text = cli.ok("--help", with_state_dir=False).stdout + cli.ok("serve", "--help", with_state_dir=False).stdout
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", text))


def serve_flags(container: dict) -> tuple[list[str], dict[str, str]]:
    """The container's serve flags but --endpoint and --state-dir (the test's own socket and state
    directory take their place), and its environment."""
    flags = [a for a in container["args"][1:] if not a.startswith(("--endpoint=", "--state-dir="))]
    # fieldRef spec.nodeName: a node's name
    env = {var["name"]: var.get("value", "node-a") for var in container.get("env", [])}
    return flags, env


@pytest.mark.parametrize("role", ["controller", "node"])
@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_serve_accepts_the_manifests_flags_and_advertises_what_the_sidecars_expect(
        rendered, overlay, role, cli, csi, start_serve, workdir, processes):
    objects = rendered[overlay]
    pod = the(objects, "Deployment" if role == "controller" else "DaemonSet", f"rosetctl-{role}")
    plugin = k8s.container(pod, "rosetctl")
    args = plugin["args"]
    assert args[0] == "serve" and f"--role={role}" in args
    names = {a.split("=", 1)[0] for a in args[1:]}
    known = known_flags(cli)
    unknown = names - known
    assert not unknown, f"expected rosetctl to know every flag of the {overlay} {role} manifest; unknown: {unknown}"

    flags, env = serve_flags(plugin)
    site = None
    if set(names) & set(k8s_enrollment.FILE_FLAGS + k8s_enrollment.ADDRESS_FLAGS):
        flags, site = enrolling_flags(pod, role, flags, env, workdir, processes)
    cli.env.update(env)
    try:
        server = start_serve(extra=flags)  # fails, quoting serve's log, unless serve parses them and starts
    finally:
        if site is not None:
            site.kube.stop()
    pb2 = csi.pb2
    info = server.identity.GetPluginInfo(pb2.GetPluginInfoRequest(), timeout=10)
    assert info.name == the(objects, "CSIDriver")["metadata"]["name"]
    plugin_caps = server.identity.GetPluginCapabilities(pb2.GetPluginCapabilitiesRequest(), timeout=10)
    services = {c.service.type for c in plugin_caps.capabilities if c.HasField("service")}
    Service = pb2.PluginCapability.Service
    if role == "node":
        check_node(server, pb2, objects)
        assert Service.CONTROLLER_SERVICE not in services
        return
    assert Service.CONTROLLER_SERVICE in services
    check_controller(server, pb2, objects, pod, topology=Service.VOLUME_ACCESSIBILITY_CONSTRAINTS in services)


def enrolling_flags(pod, role, flags, env, workdir, processes):
    """An enrolling pod's flags made runnable here (k8s_enrollment.py): the controller's TLS files
    as its Secret holds them and an API server address as a pod's environment has it; a node
    plugin's token, CA and certificate directory, and a controller (with a fake API server) it
    really enrolls with at the addresses its flags name. What cannot be honoured: the Service's
    DNS name (the test's controller is at 127.0.0.1) and the API server's own address."""
    tls = k8s_enrollment.rosetctl_tls(workdir)
    if role == "controller":
        env.update({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"})
        secret = {name: tls / name for name in ("ca.crt", "ca.key", "controller.crt", "controller.key")}
        return k8s_enrollment.runnable(pod, flags, workdir, {"--listen": "127.0.0.1:0", "--enroll-listen": "127.0.0.1:0"},
                                       {"tls": secret}), None
    from enrollment_site import CONTROLLER_USER, EnrollmentSite, FakeKubeApi, make_serving_certificate
    cluster = make_serving_certificate(workdir / "tls" / "cluster", "127.0.0.1")
    site = EnrollmentSite(workdir, FakeKubeApi(cluster[1], cluster[2]).start(), tls, [], cluster_ca=cluster[0])
    site.start_controller(processes, site.kube.add_caller(CONTROLLER_USER))
    token = workdir / "projected-token"
    token.write_text(site.token(env["ROSETCTL_NODE_ID"]))
    files = {volume["name"]: None for volume, _ in k8s_enrollment.files_named(pod).values()}
    files.update({"enroll-token": {"token": token}, "rosetctl-ca": {"ca.crt": tls / "ca.crt"}})
    addresses = {"--controller": site.controller_address, "--enroll-at": site.enroll_address}
    return k8s_enrollment.runnable(pod, flags, workdir, addresses, files), site


def check_node(server, pb2, objects):
    caps = {c.rpc.type for c in server.node.NodeGetCapabilities(pb2.NodeGetCapabilitiesRequest(), timeout=10).capabilities}
    driver = the(objects, "CSIDriver")["spec"]
    RPC = pb2.NodeServiceCapability.RPC
    # With STAGE_UNSTAGE every NodePublish needs a staging, which ephemeral inline volumes never get.
    assert RPC.STAGE_UNSTAGE_VOLUME in caps and driver["volumeLifecycleModes"] == ["Persistent"]
    # Without VOLUME_MOUNT_GROUP kubelet applies fsGroup itself (File) or not at all (None).
    assert RPC.VOLUME_MOUNT_GROUP not in caps and driver["fsGroupPolicy"] in ("File", "None")


def check_controller(server, pb2, objects, pod, topology: bool):
    caps = {c.rpc.type for c in
            server.controller.ControllerGetCapabilities(pb2.ControllerGetCapabilitiesRequest(), timeout=10).capabilities}
    RPC = pb2.ControllerServiceCapability.RPC
    sidecars = {c["name"]: c["args"] for c in k8s.pod_spec(pod)["containers"] if c["name"] != "rosetctl"}
    driver = the(objects, "CSIDriver")["spec"]
    provisioner = sidecars.get("csi-provisioner", [])
    resizer = sidecars.get("csi-resizer", [])
    expected = {
        "provisioner": RPC.CREATE_DELETE_VOLUME in caps,
        "attacher and attachRequired": RPC.PUBLISH_UNPUBLISH_VOLUME in caps,
        "snapshotter": RPC.CREATE_DELETE_SNAPSHOT in caps,
        "resizer and allowVolumeExpansion": RPC.EXPAND_VOLUME in caps,
        # off by default: the API is off in stock 1.31 and 1.32 (the opt-in test below)
        "resizer's VolumeAttributesClass gate": False,
        "provisioner --enable-capacity and storageCapacity": RPC.GET_CAPACITY in caps,
        "provisioner's Topology gate": topology,
    }
    configured = {
        "provisioner": "csi-provisioner" in sidecars,
        "attacher and attachRequired": "csi-attacher" in sidecars and driver["attachRequired"] is True,
        "snapshotter": "csi-snapshotter" in sidecars and bool(all_of(objects, "VolumeSnapshotClass")),
        "resizer and allowVolumeExpansion": "csi-resizer" in sidecars and all(
            sc.get("allowVolumeExpansion") for sc in all_of(objects, "StorageClass")),
        "resizer's VolumeAttributesClass gate": "VolumeAttributesClass=true" in (
            k8s.flag_value(resizer, "--feature-gates") or ""),
        "provisioner --enable-capacity and storageCapacity": "--enable-capacity" in provisioner and
        driver.get("storageCapacity") is True,
        "provisioner's Topology gate": "Topology=true" in (k8s.flag_value(provisioner, "--feature-gates") or ""),
    }
    assert configured == expected, (
        "expected the sidecars to be set up for exactly what serve advertises; "
        f"differs in: {[k for k in expected if expected[k] != configured[k]]}")


def test_the_namespace_allows_privileged_pods(rendered):
    """Pod Security Admission: the node plugin is privileged with Bidirectional hostPath mounts;
    a namespace without labels gets the cluster's default level, which may refuse them."""
    for overlay, objects in rendered.items():
        labels = the(objects, "Namespace")["metadata"].get("labels", {})
        for mode in ("enforce", "audit", "warn"):
            assert labels.get(f"pod-security.kubernetes.io/{mode}") == "privileged", (overlay, labels)


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_every_container_requests_resources_and_the_plugin_has_no_memory_limit(rendered, overlay):
    for obj in rendered[overlay]:
        if obj["kind"] not in ("Deployment", "DaemonSet"):
            continue
        for c in k8s.pod_spec(obj)["containers"]:
            requests = (c.get("resources") or {}).get("requests", {})
            assert {"cpu", "memory"} <= requests.keys(), f"{obj['metadata']['name']}/{c['name']} requests {requests}"
        # roset-fuse runs in the node plugin: an OOM kill would end every FUSE mount of the node.
        node = the(rendered[overlay], "DaemonSet", "rosetctl-node")
        assert "memory" not in (k8s.container(node, "rosetctl").get("resources") or {}).get("limits", {})


# Host directories every Kubernetes node has (kubelet's, the devices): a hostPath of type
# Directory elsewhere keeps a DaemonSet pod from starting on a node without that software.
NODE_DIRECTORIES = {"/var/lib/kubelet", "/var/lib/kubelet/plugins_registry", "/dev"}


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_node_pods_start_on_nodes_without_the_providers_software(rendered, overlay):
    node = the(rendered[overlay], "DaemonSet", "rosetctl-node")
    for volume in k8s.pod_spec(node)["volumes"]:
        host = volume.get("hostPath")
        if host and host.get("type") == "Directory":
            assert host["path"] in NODE_DIRECTORIES, f"{volume['name']}: {host} (DirectoryOrCreate?)"


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_controller_and_node_keep_their_own_state(rendered, overlay):
    """A node's records of its stagings are its own: a controller sharing its database (the
    controller's node runs a node plugin too) would read and write them. The local provider's
    volumes are files of the node's state directory, whose records the node stages from: there,
    and only there, the controller uses the node's (and runs no node-side clean-up: test_serve)."""
    objects = rendered[overlay]
    where = {}
    for kind, role in (("Deployment", "controller"), ("DaemonSet", "node")):
        pod = the(objects, kind, f"rosetctl-{role}")
        state = k8s.flag_value(k8s.container(pod, "rosetctl")["args"], "--state-dir")
        where[role] = k8s.host_path(pod, "rosetctl", state + "/state.db")
        assert where[role] == state + "/state.db", f"{role}: the state directory is at its host path ({state})"
    if overlay == "local":
        assert where["controller"] == where["node"]
    else:
        controller, node = (where[r].rsplit("/", 1)[0] for r in ("controller", "node"))
        assert controller != node and not node.startswith(controller + "/") and \
            not controller.startswith(node + "/"), where


def guide_steps():
    return k8s.guide_commands(GUIDE)


def test_the_guide_creates_the_namespace_before_what_goes_into_it():
    made = set()
    commands = guide_steps()
    assert commands, "expected the Deploying guide to hold commands"
    for words in commands:
        if words[:2] == ["kubectl", "apply"] and "-f" in words:
            import yaml
            for doc in yaml.safe_load_all((SOURCE / words[words.index("-f") + 1]).read_text()):
                if doc and doc["kind"] == "Namespace":
                    made.add(doc["metadata"]["name"])
        if words[:3] == ["kubectl", "create", "namespace"]:
            made.add(words[3])
        for flag in ("-n", "--namespace"):
            if flag in words:
                namespace = words[words.index(flag) + 1]
                assert namespace in made, f"`{' '.join(words)}` runs before namespace {namespace} exists"
    applied = [w for w in commands if w[:2] == ["kubectl", "apply"] and "-k" in w]
    assert applied, "expected the guide to apply an overlay"


def copy_of_the_manifests(tmp_path: Path) -> Path:
    copy = tmp_path / "deploy" / "kubernetes"
    shutil.copytree(DEPLOY, copy)
    return tmp_path


@pytest.mark.parametrize("overlay", k8s.OVERLAYS)
def test_the_documented_image_override_changes_what_kubelet_pulls(kubectl, rendered, overlay, tmp_path):
    """The guide's `kustomize edit set image`, run in a copy of the overlay, changes the image of
    every rosetctl container: the name it sets must be the one the containers have."""
    (edit,) = [w for w in guide_steps() if "kustomize" in w and "set" in w]
    assert edit[0] == "cd" and edit[2] == "&&" and edit[3:6] == ["kustomize", "edit", "set"], edit
    name, new = edit[7].split("=", 1)
    if overlay == "roset":
        # the roset overlay's image holds roset-fuse (README: the image)
        new = new.replace("/rosetctl:", "/rosetctl-roset:")
    root = copy_of_the_manifests(tmp_path)
    overlay_dir = root / edit[1].replace("/local", f"/{overlay}")
    k8s.set_image(overlay_dir, f"{name}={new}")
    before = k8s.plugin_images(rendered[overlay])
    after = k8s.plugin_images(k8s.render(kubectl, overlay_dir))
    assert after == {new}, f"expected `kustomize edit set image {name}={new}` to make kubelet pull {new}, not {after}"
    assert before != after


def test_the_volume_attributes_class_gate_is_opt_in(kubectl, rendered, tmp_path):
    """Off as rendered (stock 1.31 and 1.32 serve no VolumeAttributesClass API, and the resizer's
    modify controller fails to sync without it); the documented component turns it on, on the
    resizer only."""
    for overlay, objects in rendered.items():
        for c in k8s.pod_spec(the(objects, "Deployment", "rosetctl-controller"))["containers"]:
            assert "VolumeAttributesClass" not in " ".join(c.get("args", [])), (overlay, c["name"])
    documented = re.search(r"`components: \[([^\]]+)\]`", GUIDE.read_text())
    assert documented, f"expected {GUIDE} to say how to turn the gate on"
    root = copy_of_the_manifests(tmp_path)
    overlay_dir = root / "deploy/kubernetes/overlays/local"
    with open(overlay_dir / "kustomization.yaml", "a") as f:
        f.write(f"components:\n  - {documented.group(1)}\n")
    controller = the(k8s.render(kubectl, overlay_dir), "Deployment", "rosetctl-controller")
    gated = [c["name"] for c in k8s.pod_spec(controller)["containers"]
             if "--feature-gates=VolumeAttributesClass=true" in c.get("args", [])]
    assert gated == ["csi-resizer"]

