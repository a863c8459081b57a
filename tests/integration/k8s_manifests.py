"""deploy/kubernetes rendered and checked offline: `kubectl kustomize`, then each object against the
Kubernetes API's OpenAPI-generated models of Debian's python3-kubernetes (22.x: the Kubernetes
1.22 API), which reject unknown fields and missing required ones. Objects of CRDs (the
VolumeSnapshotClass) have no model there and are checked against the fields of their CRD by hand.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

OVERLAYS = ("local", "roset", "iscsi")

# Kinds the manifests may hold, with whether they are namespaced (kustomize and kubectl must not
# be left to guess it for CRDs).
NAMESPACED = {
    ("v1", "Namespace"): False,
    ("v1", "ServiceAccount"): True,
    ("v1", "Service"): True,  # the iscsi controller's, which node plugins register and enroll at
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): False,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): False,
    ("rbac.authorization.k8s.io/v1", "Role"): True,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): True,
    ("apps/v1", "Deployment"): True,
    ("apps/v1", "DaemonSet"): True,
    ("storage.k8s.io/v1", "CSIDriver"): False,
    ("storage.k8s.io/v1", "StorageClass"): False,
    ("snapshot.storage.k8s.io/v1", "VolumeSnapshotClass"): False,
}

# snapshot.storage.k8s.io/v1 VolumeSnapshotClass (external-snapshotter v8 CRD).
SNAPSHOT_CLASS_FIELDS = {"apiVersion", "kind", "metadata", "driver", "deletionPolicy", "parameters"}
SNAPSHOT_CLASS_REQUIRED = {"driver", "deletionPolicy"}

# Enumerations the 22.x models type as plain strings.
ENUMS = {
    "mountPropagation": {"None", "HostToContainer", "Bidirectional"},
    "fsGroupPolicy": {"None", "File", "ReadWriteOnceWithFSType"},
    "volumeLifecycleModes": {"Persistent", "Ephemeral"},
    "volumeBindingMode": {"Immediate", "WaitForFirstConsumer"},
    "reclaimPolicy": {"Delete", "Retain"},
}

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def deploy_dir(source_dir: Path) -> Path:
    return source_dir / "deploy" / "kubernetes"


def render(kubectl: str, overlay_dir: Path) -> list[dict]:
    done = subprocess.run([kubectl, "kustomize", str(overlay_dir)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"expected `kubectl kustomize {overlay_dir}` to render: {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def kubectl_binary() -> str | None:
    return shutil.which("kubectl")


def model_errors(data, type_name: str, where: str) -> list[str]:
    """Fields of `data` that the OpenAPI model `type_name` does not have, or of the wrong type."""
    import kubernetes.client as models

    if type_name.startswith("list["):
        if not isinstance(data, list):
            return [f"{where}: expected a list, got {type(data).__name__}"]
        return [e for i, item in enumerate(data) for e in model_errors(item, type_name[5:-1], f"{where}[{i}]")]
    if type_name.startswith("dict("):
        value_type = type_name[type_name.index(",") + 1:-1].strip()
        if not isinstance(data, dict):
            return [f"{where}: expected a map, got {type(data).__name__}"]
        return [e for key, value in data.items() for e in model_errors(value, value_type, f"{where}.{key}")]
    scalar = {"str": str, "bool": bool, "int": int, "float": (int, float)}
    if type_name in scalar:
        ok = isinstance(data, scalar[type_name]) and not (type_name == "int" and isinstance(data, bool))
        return [] if ok else [f"{where}: expected {type_name}, got {data!r}"]
    if type_name == "object":  # IntOrString, free-form
        return []
    model = getattr(models, type_name)
    if not isinstance(data, dict):
        return [f"{where}: expected an object ({type_name}), got {data!r}"]
    by_json_name = {json: attr for attr, json in model.attribute_map.items()}
    errors = []
    for key, value in data.items():
        if key not in by_json_name:
            errors.append(f"{where}: unknown field {key!r} in {type_name}")
            continue
        errors += model_errors(value, model.openapi_types[by_json_name[key]], f"{where}.{key}")
    return errors


def required_errors(data: dict, type_name: str, where: str) -> list[str]:
    """Required fields missing: the generated models refuse to be built without them."""
    import kubernetes.client as models

    client = models.ApiClient()
    try:
        client._ApiClient__deserialize(data, type_name)
    except (ValueError, TypeError) as failure:
        return [f"{where}: {failure}"]
    return []


def enum_errors(data, where: str) -> list[str]:
    errors = []
    if isinstance(data, dict):
        for key, value in data.items():
            allowed = ENUMS.get(key)
            values = value if isinstance(value, list) else [value]
            if allowed is not None and any(v not in allowed for v in values):
                errors.append(f"{where}.{key}: {value!r} is not one of {sorted(allowed)}")
            errors += enum_errors(value, f"{where}.{key}")
    elif isinstance(data, list):
        for i, item in enumerate(data):
            errors += enum_errors(item, f"{where}[{i}]")
    return errors


def validate(obj: dict) -> list[str]:
    """Every error found in one rendered object, as `Kind/name: what` lines."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    name = (obj.get("metadata") or {}).get("name", "")
    where = f"{kind}/{name}"
    if (api_version, kind) not in NAMESPACED:
        return [f"{where}: apiVersion {api_version!r} kind {kind!r} is not one the manifests may use"]
    errors = []
    if not name or len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        errors.append(f"{where}: metadata.name {name!r} is not a DNS subdomain")
    has_namespace = "namespace" in obj["metadata"]
    if NAMESPACED[(api_version, kind)] != has_namespace:
        errors.append(f"{where}: {'namespaced, needs' if not has_namespace else 'cluster-scoped, must not have'}"
                      " metadata.namespace")
    if kind == "VolumeSnapshotClass":
        errors += [f"{where}: unknown field {key!r}" for key in obj.keys() - SNAPSHOT_CLASS_FIELDS]
        errors += [f"{where}: {key} is required" for key in SNAPSHOT_CLASS_REQUIRED - obj.keys()]
        if obj.get("deletionPolicy") not in ("Delete", "Retain"):
            errors.append(f"{where}: deletionPolicy must be Delete or Retain")
        return errors + model_errors(obj["metadata"], "V1ObjectMeta", f"{where}.metadata")
    type_name = f"V1{kind}"
    errors += enum_errors(obj, where)
    errors += model_errors(obj, type_name, where)
    return errors + required_errors(obj, type_name, where)


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def container(obj: dict, name: str) -> dict:
    found = [c for c in pod_spec(obj)["containers"] if c["name"] == name]
    assert found, f"expected a container {name!r} in {obj['kind']}/{obj['metadata']['name']}"
    return found[0]


def flag_value(args: list[str], flag: str) -> str | None:
    for arg in args:
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def mount_path_of(obj: dict, container_name: str, path: str) -> tuple[dict, dict]:
    """The (volume, volumeMount) under which `path` lies in that container."""
    best = None
    for mount in container(obj, container_name).get("volumeMounts", []):
        prefix = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(prefix) and (best is None or len(prefix) > len(best["mountPath"])):
            best = mount
    assert best is not None, f"expected {path} of container {container_name} to lie in one of its volumeMounts"
    volume = [v for v in pod_spec(obj)["volumes"] if v["name"] == best["name"]][0]
    return volume, best


def host_path(obj: dict, container_name: str, path: str) -> str | None:
    """Where `path` of that container is on the host, or None if it is not on a hostPath."""
    volume, mount = mount_path_of(obj, container_name, path)
    if "hostPath" not in volume:
        return None
    return volume["hostPath"]["path"].rstrip("/") + "/" + path[len(mount["mountPath"].rstrip("/")) + 1:]


def volume_identity(obj: dict, container_name: str, path: str) -> tuple[str, str]:
    """(volume name, path inside it): the same file for every container of the pod."""
    volume, mount = mount_path_of(obj, container_name, path)
    return volume["name"], path[len(mount["mountPath"].rstrip("/")) + 1:]


def guide_commands(guide: Path) -> list[list[str]]:
    """The commands of the Kubernetes guide (the first ```sh block of "To Kubernetes"),
    each split into words with its comment dropped; `(cd DIR && CMD)` is kept as ["cd", DIR,
    "&&", ...], the way the test runs it."""
    import shlex

    text = guide.read_text()
    section = text[text.index("# To Kubernetes"):]
    block = section[section.index("```sh\n") + len("```sh\n"):]
    block = block[:block.index("```")]
    commands = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0].startswith("("):
            words[0] = words[0][1:]
            words[-1] = words[-1].removesuffix(")")
        if words:
            commands.append(words)
    return commands


def set_image(overlay_dir: Path, spec: str) -> None:
    """`kustomize edit set image NAME=NEWNAME:TAG` run in `overlay_dir`: the kustomize binary
    where there is one; else the entry it writes (kubectl renders kustomizations but cannot edit
    them): the `images` entry named NAME replaced by (or added as) {name, newName, newTag}."""
    kustomize = shutil.which("kustomize")
    if kustomize is not None:
        done = subprocess.run([kustomize, "edit", "set", "image", spec], cwd=overlay_dir,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"expected `kustomize edit set image {spec}` to work: {done.stderr}"
        return
    name, new = spec.split("=", 1)
    entry = {"name": name}
    last = new.rsplit("/", 1)[-1]
    if ":" in last:
        entry["newName"], entry["newTag"] = new.rsplit(":", 1)
    else:
        entry["newName"] = new
    path = overlay_dir / "kustomization.yaml"
    kustomization = yaml.safe_load(path.read_text())
    images = [i for i in kustomization.get("images", []) if i["name"] != name]
    kustomization["images"] = images + [entry]
    path.write_text(yaml.safe_dump(kustomization, sort_keys=False))


def plugin_images(objects: list[dict]) -> set[str]:
    """The images of every rosetctl container (the controller's and the node plugin's)."""
    return {container(o, "rosetctl")["image"] for o in objects if o["kind"] in ("Deployment", "DaemonSet")}
