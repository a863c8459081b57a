"""The by-hand set-up of docs/guides/across-hosts.md works as written (issue 32 item 6, issue 34
item 3): its blocks run command by command, in order, in the network-namespace lab (host_lab.py)
on the host each names: the controller (192.0.2.1), consumer-a, consumer-b and an admin's host.
Then docs/guides/operating.md's blocks on the same controller.

The lab stands in for what the guide leaves to the reader, and only for that:
- the placeholders get the lab's addresses, and each host's own paths (/etc/rosetctl,
  /var/lib/rosetctl, /mnt, /var/backups) become directories of that host's: the lab's hosts
  share one filesystem (`values` below: the whole substitution);
- `rosetctl` is this build, on PATH; each host's default CSI socket (/run/rosetctl/csi.sock,
  shared otherwise) is one of its own (CSI_ENDPOINT);
- the prose steps: copying the certificates and the Roset API key to each host; the Roset API
  is the fake one (on the controller's address) and roset-fuse the stand-in (bin/roset-fuse);
  `apt install tgt` is a tgtd the test starts in the controller's namespace (with a control port
  of its own: ROSETCTL_ISCSI_TGT_CONTROL_PORT), and `apt install open-iscsi` is the initiator
  name file it writes for each consumer (the lab has no kernel initiator: the connect of an
  iscsi volume is not run here, and says so in the guide).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import tgtd_lab
from controller_site import copy_identity, start_fake_roset
from guide_blocks import GUIDES, HostExecutor, Runner
from host_lab import HostLab, sweep_stale, unavailable_reason, wait_for_port
from roset_fixtures import STANDIN_FUSE
from rosetctl_fixtures import skip_or_fail
from rosetctl_loops import detach_everything_under
from rosetctl_mounts import unmount_everything_under

PORT = 9443  # the controller's --listen, and each node's (every host has its own addresses)
PORTAL_PORT = 3260


class GuideLab:
    """Four hosts with a bash each: the guide's `rosetctl` on PATH, the host's paths its own."""

    def __init__(self, lab: HostLab, binary: str):
        self.lab = lab
        self.controller = lab.add("controller")  # 192.0.2.1
        self.consumer_a = lab.add("consumer-a")  # 192.0.2.2
        self.consumer_b = lab.add("consumer-b")  # 192.0.2.3
        self.admin = lab.add("admin")  # 192.0.2.4
        bin_dir = lab.workdir / "bin"
        bin_dir.mkdir()
        (bin_dir / "rosetctl").symlink_to(binary)
        self.executors = {}
        for host in lab.hosts:
            (host.dir / "mnt").mkdir(parents=True)
            self.executors[host.name] = HostExecutor(host, {
                "PATH": f"{bin_dir}:{os.environ['PATH']}:/usr/sbin:/sbin",
                "ROSETCTL_STATE_DIR": str(host.state_dir),  # its /var/lib/rosetctl
                "CSI_ENDPOINT": f"unix://{host.dir}/csi.sock",  # its /run/rosetctl/csi.sock
            }, config=host.config_dir / "config.toml")  # its /etc/rosetctl/config.toml
        self.tgtd = None
        self.controller_serve = None  # (executor, script, process) of the guide's controller serve

    def prepare_providers(self) -> None:
        """What the guide's prose and `apt install` lines leave to the reader: the Roset API (the
        fake, with the controller's key), roset-fuse, tgtd on the controller, open-iscsi's
        initiator name on each consumer."""
        key = self.controller.config_dir / "roset.key"
        key.write_text("rsk_live_" + secrets.token_hex(20) + "\n")
        os.chmod(key, 0o600)
        url = start_fake_roset(self.controller, key)
        for host in self.lab.hosts:
            self.executors[host.name].env |= {"ROSET_API_URL": url, "ROSET_FUSE_BINARY": str(STANDIN_FUSE)}
        reason = tgtd_lab.unavailable_reason()
        if reason is not None:
            skip_or_fail(reason)
        self.control_port = tgtd_lab.free_control_port()
        portal = f"{self.controller.address}:{PORTAL_PORT}"
        self.tgtd = self.controller.start([tgtd_lab.tool_path("tgtd"), "-f", "--iscsi", f"portal={portal}",
                                           "-C", str(self.control_port)])
        wait_for_port(self.consumer_a, self.controller.address, PORTAL_PORT, timeout=15, process=self.tgtd)
        self.executors["controller"].env["ROSETCTL_ISCSI_TGT_CONTROL_PORT"] = str(self.control_port)
        for host in (self.consumer_a, self.consumer_b):
            host.initiator_file.parent.mkdir(parents=True, exist_ok=True)
            host.initiator_file.write_text(f"InitiatorName=iqn.2026-11.io.roset.test:{host.name}\n")

    def copy_files(self) -> None:
        """The prose step after the controller's certificates: each host gets its own (and the CA),
        each consumer its own copy of the Roset API key."""
        tls = self.controller.config_dir / "tls"
        for host in (self.consumer_a, self.consumer_b):
            copy_identity(tls, host.name, host.config_dir / "tls")
            own_key = host.config_dir / "roset.key"
            shutil.copyfile(self.controller.config_dir / "roset.key", own_key)
            os.chmod(own_key, 0o600)
        copy_identity(tls, "alice", self.admin.config_dir / "tls")

    def hosts(self) -> dict:
        e = self.executors
        return {"the controller": [e["controller"]], "consumer-a": [e["consumer-a"]],
                "consumer-b": [e["consumer-b"]], "each consumer": [e["consumer-a"], e["consumer-b"]],
                "an admin's host": [e["admin"]], None: [e["controller"]],
                "the controller, with serve stopped": [e["controller"]]}

    def values(self, block, executor) -> list[tuple[str, str]]:
        """The substitution for a block run on executor's host."""
        host = executor.host
        own = [("consumer-a", host.name)] if block.run_on == "each consumer" else []
        return own + [
            ("CONTROLLER_IP", self.controller.address),
            ("CONTROLLER_ADDRESS", f"{self.controller.address}:{PORT}"),
            ("CONSUMER_A_IP", self.consumer_a.address),
            ("CONSUMER_B_IP", self.consumer_b.address),
            ("CONSUMER_IP", host.address),
            ("NODE_ADDRESS", f"{host.address}:{PORT}"),
            ("PORTAL_ADDRESS", f"{self.controller.address}:{PORTAL_PORT}"),
            ("/etc/rosetctl", str(host.config_dir)),
            ("/var/lib/rosetctl", str(host.state_dir)),
            ("/var/backups/", f"{host.dir}/backups/"),
            ("/mnt/", f"{host.dir}/mnt/"),
        ]

    def ready(self, executor, script: str, proc) -> None:
        """A background serve is up: it listens, and a node is in the controller's registry with
        the address it listens on (the next block may place volumes on it)."""
        address, port = re.search(r"--listen (\S+):(\d+)", script).groups()
        wait_for_port(executor.host, address, int(port), timeout=20, process=proc)
        if "--role controller" in script:
            self.controller_serve = (executor, script, proc)
        if "--role node" not in script:
            return
        deadline = time.monotonic() + 20
        while True:
            listed = self.executors["controller"].run("rosetctl node list -o json", 30)
            nodes = {n["node_id"]: n for n in json.loads(listed.stdout or "[]")} if listed.rc == 0 else {}
            if nodes.get(executor.host.name, {}).get("address") == f"{address}:{port}":
                return
            assert time.monotonic() < deadline and proc.poll() is None, (listed, proc.output())
            time.sleep(0.2)


    def controller_serving(self) -> bool:
        return self.controller_serve is not None and self.controller_serve[2].poll() is None

    def stop_controller(self) -> None:
        """What `systemctl stop rosetctl-controller` does to the guide's serve: SIGTERM, then gone."""
        proc = self.controller_serve[2]
        proc.terminate()
        proc.wait(timeout=60)

    def start_controller(self) -> None:
        """The guide's controller serve again, as `systemctl start` would run it."""
        executor, script, _ = self.controller_serve
        self.ready(executor, script, executor.start(script))


@pytest.fixture(scope="module")
def lab(rosetctl_binary):
    """One lab for the file: both guides follow one set-up, as a reader's hosts would."""
    reason = unavailable_reason()
    if reason is not None:
        skip_or_fail(reason)
    sweep_stale()
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="rosetctl-it-", dir="/tmp")))
    try:
        with HostLab(path, grace=2.0) as host_lab:
            guide_lab = GuideLab(host_lab, rosetctl_binary)
            try:
                yield guide_lab
            finally:
                host_lab.close()  # serve, roset-fuse and tgtd end before their mounts go
                if guide_lab.tgtd is not None:
                    for name in (f"socket.{guide_lab.control_port}", f"socket.{guide_lab.control_port}.lock"):
                        (tgtd_lab.CONTROL_SOCKET_DIR / name).unlink(missing_ok=True)
    finally:
        left = unmount_everything_under(str(path))
        attached = detach_everything_under(path)
        if not left:
            shutil.rmtree(path, ignore_errors=True)
        assert not left and not attached, f"left mounted {left}, attached {attached} under {path}"


def test_across_hosts_guide(lab):
    lab.prepare_providers()
    runner = Runner(GUIDES / "across-hosts.md", lab.hosts(), lab.values, ready=lab.ready)
    certificates = runner.blocks[0]
    assert certificates.commands[0].text.startswith("rosetctl tls init"), certificates
    runner.run_block(certificates)
    lab.copy_files()
    runner.run_all()
    runner.assert_all_ran()
    # What the guide promises beyond exit codes: each consumer registered with its address, so no
    # host's view is partial; the admin's host is no node.
    admin = lab.executors["admin"]
    listed = admin.run("rosetctl volume list -o json", 60)
    assert listed.rc == 0 and json.loads(listed.stdout) == [], listed.describe()
    nodes = admin.run("rosetctl node list -o json", 60)
    assert sorted(n["node_id"] for n in json.loads(nodes.stdout)) == ["consumer-a", "consumer-b"], nodes
    # No view leaves a consumer out as "registered no address" (issue 32: the set-up once never
    # said consumers run `serve --role node --listen`): the admin's is whole, and a consumer's
    # lacks only what its certificate may not ask (the other consumer's mounts).
    assert admin.run("rosetctl volume create whole-view", 60).rc == 0
    for name in ("admin", "consumer-a", "consumer-b"):
        seen = lab.executors[name].run("rosetctl volume list -o json", 60)
        assert seen.rc == 0, seen.describe()
        left_out = {n["node"]: n["reason"] for v in json.loads(seen.stdout) for n in v["unreachable_nodes"]}
        assert not [r for r in left_out.values() if "no address" in r], (name, left_out)
        if name == "admin":
            assert left_out == {}, left_out
    assert admin.run("rosetctl volume delete whole-view", 60).rc == 0
    # The guide's warning: a local volume made without --node is the controller host's, and a
    # consumer cannot connect it (exit 5, saying where it lives).
    a = lab.executors["consumer-a"]
    assert a.run("rosetctl volume create stray", 60).rc == 0
    stray = a.run(f"rosetctl volume connect stray --target {lab.consumer_a.dir}/mnt/stray", 60)
    assert stray.rc == 5 and 'node "controller"' in stray.stderr, stray.describe()
    assert "volume create --node consumer-a" in stray.stderr, stray.describe()
    assert a.run("rosetctl volume delete stray", 60).rc == 0


def test_operating_guide(lab):
    if not (lab.controller.config_dir / "config.toml").exists():
        pytest.fail("the across-hosts guide's set-up did not run (its test failed first)", pytrace=False)
    runner = Runner(GUIDES / "operating.md", lab.hosts(), lab.values, ready=lab.ready)
    for block in runner.blocks:
        # The prose around the backup blocks: serve stopped (systemctl stop) while they run.
        stopped = block.run_on == "the controller, with serve stopped"
        if stopped and lab.controller_serving():
            lab.stop_controller()
        elif not stopped and not lab.controller_serving():
            lab.start_controller()
        runner.run_block(block)
    if not lab.controller_serving():
        lab.start_controller()
    runner.assert_all_ran()
    assert (lab.controller.dir / "backups" / "rosetctl" / "state.db").stat().st_size > 0
    assert (lab.controller.dir / "backups" / "rosetctl" / "state.tar").stat().st_size > 0
    # The restored controller knows its nodes again (the registry is in the database).
    nodes = lab.executors["admin"].run("rosetctl node list -o json", 60)
    assert nodes.rc == 0, nodes.describe()
    assert sorted(n["node_id"] for n in json.loads(nodes.stdout)) == ["consumer-a", "consumer-b"], nodes
