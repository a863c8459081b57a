"""The `hostile` fixture: the site of test_snapshot_streaming.py (a controller, node A and node B, each
in its own network namespace, with mutual TLS) and a fourth host, "evil": a node certificate of
the cluster's CA issued by `rosetctl tls issue evil`, registered with the controller at its
address, serving rosetctl.v1.ObjectStore from hostile_node.py as its plan says.

Every process runs on a host of the lab (host.start), so the lab's teardown ends it by PID and
deletes the namespaces, whether the test passed or not.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from controller_site import RecordingCli, copy_identity, tls_ok
from host_lab import Host, HostProcess, wait_for_port
from test_snapshot_streaming import Nodes

__all__ = ["hostile", "Hostile", "EVIL_PORT", "EVIL_SNAPSHOT_ID", "EVIL_FILES"]

EVIL_PORT = 9444
# The id of evil's own snapshot: a valid snapshot id, made up.
EVIL_SNAPSHOT_ID = "snap-17a0000000000000deadbeef"
# What evil's snapshot holds unless a test says otherwise.
EVIL_FILES = {"data": "evil's own content\n"}
PROGRAM = Path(__file__).resolve().parent / "hostile_node.py"


class EvilNode:
    """hostile_node.py running on the evil host; `plan()` tells it how to lie from the next call on."""

    def __init__(self, host: Host, process: HostProcess, plan_path: Path, facts: dict):
        self.host, self.process, self.plan_path, self.facts = host, process, plan_path, facts

    def plan(self, **plan) -> None:
        temporary = self.plan_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(plan))
        temporary.replace(self.plan_path)  # a call never reads half a plan

    def calls(self) -> list[dict]:
        """What it answered so far, one entry per call."""
        return [json.loads(line) for line in self.process.output().splitlines() if line.startswith('{"call"')]

    @property
    def address(self) -> str:
        return f"{self.host.address}:{EVIL_PORT}"


def start_evil(nodes: Nodes, stubs, files: dict[str, str]) -> EvilNode:
    site = nodes.site
    host = site.controller.lab.add("evil")
    # A real node certificate for "evil", from the cluster's CA, naming the address it serves at.
    tls_ok(site.controller, site.printed, "issue", "evil", "--dir", site.tls_dir, "--ip", host.address)
    cert, key, ca = copy_identity(site.tls_dir, "evil", host.config_dir / "tls")
    site.secret_files.append(site.tls_dir / "evil.key")
    plan_path = host.dir / "plan.json"
    spec = {"stubs": str(Path(stubs.pb2.__file__).parent), "cert": str(cert), "key": str(key), "ca": str(ca),
            "listen": f"{host.address}:{EVIL_PORT}", "plan": str(plan_path), "files": files,
            "snapshot_id": EVIL_SNAPSHOT_ID}
    spec_path = host.dir / "spec.json"
    spec_path.write_text(json.dumps(spec))
    process = host.start([sys.executable, PROGRAM, spec_path])
    wait_for_port(nodes.b_host, host.address, EVIL_PORT, timeout=30, process=process)
    deadline = time.monotonic() + 10
    while not (facts := [json.loads(line) for line in process.output().splitlines()
                         if line.startswith('{"listening"')]):
        assert time.monotonic() < deadline and process.poll() is None, process.output()
        time.sleep(0.05)
    # Registered with the controller by its own certificate, as a node registers itself.
    cli = RecordingCli(host, site.printed, {
        "ROSETCTL_CONTROLLER": site.address, "ROSETCTL_NODE_ID": "evil", "ROSETCTL_TLS_CERT": str(cert),
        "ROSETCTL_TLS_KEY": str(key), "ROSETCTL_TLS_CA": str(ca)})
    registered = cli.run("node", "register", "--address", f"{host.address}:{EVIL_PORT}")
    assert registered.rc == 0, registered.describe()
    site.wait_until_registered("evil", f"{host.address}:{EVIL_PORT}")
    return EvilNode(host, process, plan_path, facts[0])


class Hostile(Nodes):
    """Nodes A and B of test_snapshot_streaming.py, and `evil`."""

    def __init__(self, site, stubs):
        super().__init__(site)
        self.evil = start_evil(self, stubs, EVIL_FILES)


@pytest.fixture
def hostile(host_lab, rosetctl_binary, registry_stubs) -> Hostile:
    from controller_site import build_site

    site = build_site(host_lab)
    yield Hostile(site, registry_stubs)
    site.assert_no_secrets_printed()
