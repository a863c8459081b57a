"""Seed 002 across real hosts (issue 21): one controller (this host) and two consumers (QEMU
guests, guest_lab.py) reached by Ansible over ssh, with the collection's role preparing each kind
of host and the seed's playbook, verbatim, attaching each consumer's volume over iSCSI.

The controller's tgtd and `rosetctl serve` are started by the role (no systemd here: in the
background with pid files under the test's directory, killed by PID afterwards). The guests see
this host as 10.0.2.2, so the controller's certificate names that address and the iSCSI portal
the controller hands out is 10.0.2.2. Each guest is a fresh consumer: its own /etc/rosetctl,
/var/lib/rosetctl, initiator name and iscsid; the role writes its configuration and certificate
there, and its rosetctl (this build, seen over 9p) sends controller calls to the controller.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import guest_lab
from fake_roset_api import FakeRoset
from guest_lab import HOST_ADDRESS
from playbook_run import PlaybookRun
from rosetctl_cli import isolated_environment, process_alive
from rosetctl_fixtures import skip_or_fail
from roset_fixtures import STANDIN_FUSE
from tgtd_lab import CONTROL_SOCKET_DIR, free_control_port, free_port

SOURCE_DIR = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
COLLECTION = SOURCE_DIR / "ansible"
SEED_PLAYBOOK = SOURCE_DIR / "tests" / "ansible" / "seed_002_playbook.yml"
CALLBACKS = Path(__file__).resolve().parent / "ansible_callbacks"
ANSIBLE_PLAYBOOK = "/usr/bin/ansible-playbook"
CONSUMERS = ("consumer-a", "consumer-b")
IQN_PREFIX = "iqn.2026-11.io.roset.hosts"
PLAYBOOK_TIMEOUT = 420

SITE_PLAYBOOK = """
- hosts: storage_controller
  roles:
    - {role: storage, node_type: controller}
- hosts: storage_consumers
  roles:
    - {role: storage, node_type: consumer}
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0 and os.environ.get("ROSETCTL_REQUIRE_ROOT_TESTS") != "1",
                                reason="needs root: tgtd, QEMU guests and the controller's state")


class Site:
    """The controller's files and processes, the two guests, and ansible-playbook for them all."""

    def __init__(self, directory: Path, binary: str, boot: guest_lab.BootFiles):
        self.dir = directory
        self.binary = binary
        self.controller_dir = directory / "controller"
        self.controller_port = free_port()
        self.portal_port = free_port()
        self.control_port = free_control_port()
        self.fake_storage = directory / "roset-storage"
        self.fake_storage.mkdir()
        key = directory / "ssh" / "client_key"
        key.parent.mkdir()
        self.guests = {}
        for name in CONSUMERS:
            access = guest_lab.SshAccess(key, free_port())
            self.guests[name] = guest_lab.Guest(boot, directory / f"guest-{name}", name, ssh=access,
                                                shares=(self.fake_storage,))
        self.pause_dir = directory / "pause"
        self.pause_dir.mkdir()
        self.fake: FakeRoset | None = None
        self._write_ansible_files()

    # ------------------------------------------------------------------ files
    def controller_vars(self) -> dict:
        c = self.controller_dir
        return {
            "ansible_connection": "local", "ansible_host": HOST_ADDRESS,
            "storage_config_path": str(c / "etc" / "config.toml"), "storage_state_dir": str(c / "state"),
            "storage_tls_dir": str(c / "tls"), "storage_tls_ips": [HOST_ADDRESS],
            "storage_listen": f"127.0.0.1:{self.controller_port}",
            "storage_serve_endpoint": f"unix://{c / 'run' / 'csi.sock'}",
            "storage_serve_pidfile": str(c / "run" / "serve.pid"), "storage_serve_log": str(c / "log" / "serve.log"),
            "storage_tgtd_pidfile": str(c / "run" / "tgtd.pid"), "storage_tgtd_log": str(c / "log" / "tgtd.log"),
            "storage_iscsi_listen": f"127.0.0.1:{self.portal_port}",
            "storage_iscsi_tgt_control_port": self.control_port, "storage_iscsi_iqn_prefix": IQN_PREFIX,
        }

    def _write_ansible_files(self) -> None:
        collections = self.dir / "collections"
        namespace = collections / "ansible_collections" / "roset"
        namespace.mkdir(parents=True)
        (namespace / "storage").symlink_to(COLLECTION)
        consumers = {}
        for name, guest in self.guests.items():
            consumers[name] = {"ansible_host": "127.0.0.1", "ansible_port": guest.ssh.port}
        some_guest = next(iter(self.guests.values()))
        inventory = {
            "all": {"vars": {"ansible_python_interpreter": "/usr/bin/python3",
                             "storage_rosetctl_binary": self.binary, "storage_provider": "iscsi",
                             "storage_controller_port": self.controller_port},
                    "children": {
                        "storage_controller": {"hosts": {"controller": self.controller_vars()}},
                        "storage_consumers": {"hosts": consumers, "vars": {
                            "ansible_user": "root", "ansible_ssh_private_key_file": str(some_guest.ssh.client_key),
                            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"}},
                    }},
        }
        self.inventory = self.dir / "inventory.yml"
        self.inventory.write_text(json.dumps(inventory, indent=1))  # JSON is YAML
        self.site_playbook = self.dir / "site.yml"
        self.site_playbook.write_text(SITE_PLAYBOOK)
        cfg = self.dir / "ansible.cfg"
        # As test_ansible.py: the seed's short names come from roles_path; facts are not gathered
        # (the seed's playbook uses none; under TCG a fact gathering costs ~10 s a guest).
        cfg.write_text(
            "[defaults]\n"
            f"inventory = {self.inventory}\n"
            f"collections_path = {collections}\n"
            f"roles_path = {namespace / 'storage' / 'roles'}\n"
            f"local_tmp = {self.dir / 'ansible-local'}\n"
            f"callback_plugins = {CALLBACKS}\n"
            "callbacks_enabled = pause_before\n"
            "stdout_callback = json_results\n"
            "retry_files_enabled = false\n"
            "gathering = explicit\n"
            "forks = 4\n"
            "[ssh_connection]\n"
            "pipelining = true\n"
            f"control_path_dir = {self.dir / 'ssh' / 'cp'}\n")
        self.env = isolated_environment()
        self.env.update({"ANSIBLE_CONFIG": str(cfg), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
                         "ROSETCTL_TEST_PAUSE_DIR": str(self.pause_dir)})

    # ------------------------------------------------------------------ running things
    def playbook(self, playbook: Path, *args: str, extra_vars: dict | None = None,
                 pause_before: str | None = None, while_paused=None) -> PlaybookRun:
        env = dict(self.env, ROSETCTL_TEST_PAUSE_TASK=pause_before or "")
        argv = [ANSIBLE_PLAYBOOK, str(playbook), *args]
        if extra_vars:
            argv += ["-e", json.dumps(extra_vars)]
        proc = subprocess.Popen(argv, cwd=self.dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            if pause_before is not None:
                reached = self.pause_dir / "reached"
                deadline = time.monotonic() + PLAYBOOK_TIMEOUT
                while not reached.exists():
                    if proc.poll() is not None:
                        out, err = proc.communicate()
                        raise AssertionError(f"the playbook ended before {pause_before!r}: "
                                             f"{PlaybookRun(subprocess.CompletedProcess(argv, proc.returncode, out, err)).describe()}")
                    assert time.monotonic() < deadline, f"the playbook never reached {pause_before!r}"
                    time.sleep(0.1)
                failed_before = json.loads(reached.read_text())
                reached.unlink()
                try:
                    assert not failed_before, (f"tasks failed before {pause_before!r}: "
                                               f"{json.dumps(failed_before, indent=1)}")
                    while_paused()
                finally:
                    (self.pause_dir / "go").touch()
            out, err = proc.communicate(timeout=PLAYBOOK_TIMEOUT)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return PlaybookRun(subprocess.CompletedProcess(argv, proc.returncode, out, err))

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        """rosetctl on the controller host, with the configuration the role wrote there."""
        return subprocess.run([self.binary, "--config", str(self.controller_dir / "etc" / "config.toml"), *args],
                              env=isolated_environment(), capture_output=True, text=True, timeout=120)

    def ctl_json(self, *args: str):
        done = self.ctl("--output", "json", *args)
        assert done.returncode == 0, f"rosetctl {args}: rc={done.returncode} {done.stderr}"
        return json.loads(done.stdout)

    def tgtadm(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tgtadm", "-C", str(self.control_port), "--lld", "iscsi", *args],
                              capture_output=True, text=True, timeout=30)

    def targets(self) -> dict[str, list[str]]:
        """tgtd's targets, each with the initiator names its ACL admits."""
        shown = self.tgtadm("--op", "show", "--mode", "target")
        assert shown.returncode == 0, shown.stderr
        targets: dict[str, list[str]] = {}
        current = None
        in_acl = False
        for line in shown.stdout.splitlines():
            if line.startswith("Target "):
                current = line.split(": ", 1)[1]
                targets[current] = []
                in_acl = False
            elif line.strip() == "ACL information:":
                in_acl = True
            elif in_acl and line.startswith("        ") and current:
                targets[current].append(line.strip())
            elif not line.startswith("        "):
                in_acl = False
        return targets

    def pid_of(self, pidfile: str) -> int | None:
        try:
            return int(Path(pidfile).read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        """Every guest, serve and tgtd ended by PID, whatever happened."""
        for guest in self.guests.values():
            guest.kill()
        variables = self.controller_vars()
        for pidfile in (variables["storage_serve_pidfile"], variables["storage_tgtd_pidfile"]):
            pid = self.pid_of(pidfile)
            if pid is not None and process_alive(pid):
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
                while process_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
        for name in (f"socket.{self.control_port}", f"socket.{self.control_port}.lock"):
            (CONTROL_SOCKET_DIR / name).unlink(missing_ok=True)
        if self.fake is not None:
            self.fake.close()


@pytest.fixture(scope="module")
def site(rosetctl_binary):
    if not os.access(ANSIBLE_PLAYBOOK, os.X_OK):
        skip_or_fail(f"{ANSIBLE_PLAYBOOK} is missing: install ansible-core (scripts/install-deps.sh)")
    reason = guest_lab.unavailable_reason(ssh=True)
    if reason is not None:
        skip_or_fail(reason)
    directory = Path(tempfile.mkdtemp(prefix="rosetctl-hosts-", dir="/tmp"))
    made = None
    try:
        boot = guest_lab.prepare_boot_files(directory)
        made = Site(directory, str(rosetctl_binary), boot)
        for guest in made.guests.values():  # both boot at once
            guest.start_booting()
        for guest in made.guests.values():
            guest.wait_until_ready()
            guest.ssh.wait()
        yield made
    finally:
        if made is not None:
            made.stop()
        shutil.rmtree(directory, ignore_errors=True)


def lan_address() -> str:
    """This host's first global IPv4 address (not loopback: a guest's 127.0.0.1 is its own)."""
    shown = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True)
    for line in shown.stdout.splitlines():
        words = line.split()
        if "inet" in words:
            return words[words.index("inet") + 1].split("/")[0]
    raise AssertionError(f"this host has no global IPv4 address for the guests to reach: {shown.stdout}")


def role_changes(run: PlaybookRun, host: str) -> list[str]:
    return [name for name in run.changed_tasks(host) if name.startswith("storage : ")]


def guest_sessions(guest) -> str:
    done = guest.run("iscsiadm -m session 2>&1 || true", timeout=60)
    return done.stdout


def refused_login(guest, target: str, portal: str):
    """`guest` tries to log in to `target` by hand, as a consumer it was not mapped to would."""
    return guest.run(f"""
iscsiadm -m node -o new -T {target} -p {portal} >/dev/null
iscsiadm -m node -T {target} -p {portal} --login
rc=$?
iscsiadm -m node -T {target} -p {portal} -o delete >/dev/null 2>&1
exit $rc
""", timeout=90)


def test_the_seed_playbook_attaches_each_consumers_volume_over_iscsi_from_one_controller(site):
    # The role on every host. (The seed playbook runs it again below: there it changes nothing.)
    first = site.playbook(site.site_playbook)
    first.assert_ok()
    assert "storage : Make the CA and the controller's certificate" in first.changed_tasks("controller"), first.describe()
    for name in CONSUMERS:
        assert "storage : Issue this consumer's certificate on the controller" in first.changed_tasks(name), first.describe()
    again = site.playbook(site.site_playbook, "--limit", "storage_controller")
    again.assert_ok()
    assert again.changed_tasks("controller") == [], f"a second run of the role changed {again.changed_tasks('controller')}"
    nodes = {node["node_id"]: node for node in site.ctl_json("node", "list")}
    for name, guest in site.guests.items():
        assert nodes[name]["iscsi_initiator"] == guest.initiator, nodes
    # Consumers hold their own certificate and the CA's, never a CA key or another's key.
    held = site.guests["consumer-a"].run("ls /etc/rosetctl/tls; stat -c '%a %n' /etc/rosetctl/tls/node.key")
    assert held.stdout.split() == ["ca.crt", "node.crt", "node.key", "600", "/etc/rosetctl/tls/node.key"], held.describe()

    # The seed playbook in check mode changes nothing anywhere.
    state_before = sorted(p.name for p in (site.controller_dir / "state").iterdir())
    checked = site.playbook(SEED_PLAYBOOK, "--check", "--diff")
    checked.assert_ok()
    for name in CONSUMERS:
        assert role_changes(checked, name) == [], f"the role in check mode would change {role_changes(checked, name)}"
        assert checked.task("Create volume", name)["changed"], "check mode should say the volume would be made"
    assert site.ctl_json("volume", "list") == [], "check mode created a volume"
    assert site.targets() == {}
    assert sorted(p.name for p in (site.controller_dir / "state").iterdir()) == state_before
    for guest in site.guests.values():
        assert "No active sessions" in guest_sessions(guest)

    # The seed playbook, verbatim. While every consumer has its volume connected, each volume is
    # mapped to its consumer alone: the other consumer's login is refused.
    portal = f"{HOST_ADDRESS}:{site.portal_port}"
    seen = {}

    def while_connected():
        listed = site.ctl_json("volume", "list")
        volumes = {v["name"]: v for v in listed}
        # One entry per name: a second "consumer-b" (a node's own, say) would hide the first.
        assert sorted(v["name"] for v in listed) == sorted(CONSUMERS), json.dumps(listed, indent=1)
        targets = site.targets()
        for name in CONSUMERS:
            volume = volumes[name]
            assert volume["published_nodes"] == [name], json.dumps(listed, indent=1)
            target = f"{IQN_PREFIX}:{volume['id']}"
            assert targets[target] == [site.guests[name].initiator], targets
            seen[name] = volume["id"]
            assert target in guest_sessions(site.guests[name])
        for name, other in (("consumer-a", "consumer-b"), ("consumer-b", "consumer-a")):
            refused = refused_login(site.guests[other], f"{IQN_PREFIX}:{seen[name]}", portal)
            assert refused.rc != 0, f"{other} logged in to {name}'s volume: {refused.describe()}"

    run = site.playbook(SEED_PLAYBOOK, pause_before="Disconnect volume", while_paused=while_connected)
    run.assert_ok()
    for name in CONSUMERS:
        assert role_changes(run, name) == [], f"a second run of the role changed {role_changes(run, name)} on {name}"
        created = run.task("Create volume", name)
        connected = run.task("Connect volume", name)
        assert created["changed"] and created["id"] == seen[name], created
        assert connected["changed"] and connected["path"] == f"/var/lib/rosetctl/mnt/{name}", connected
        message = [r for n, r in run.tasks(name) if r.get("action") == "debug"][0]["msg"]
        assert message == f"Volume {seen[name]} attached to /var/lib/rosetctl/mnt/{name}", message
    assert seen["consumer-a"] != seen["consumer-b"]

    # Nothing is left: no volumes on the controller, no targets in tgtd, no sessions in the guests.
    assert site.ctl_json("volume", "list") == []
    assert site.targets() == {}
    for guest in site.guests.values():
        assert "No active sessions" in guest_sessions(guest)


def test_the_seed_playbook_attaches_a_roset_folder_through_roset_fuse_on_each_consumer(site):
    api_key = "roset-key-" + os.urandom(8).hex()
    # The volume's context carries the API's URL from the controller to the consumers, so both
    # must reach the fake at one address: this host's own (the guests reach it through QEMU).
    site.fake = FakeRoset(site.fake_storage, api_key, host=lan_address()).start()
    roset = {"storage_provider": "roset", "storage_roset_api_key": api_key, "storage_roset_fuse": str(STANDIN_FUSE),
             "storage_roset_api_url": site.fake.url}
    controller_vars = dict(roset, storage_roset_api_key_file=str(site.controller_dir / "etc" / "roset.key"))
    site.playbook(site.site_playbook, "--limit", "storage_controller", extra_vars=controller_vars).assert_ok()
    consumer_vars = roset  # the seed playbook's role switches the consumers to roset

    def while_connected():
        for name, guest in site.guests.items():
            mounted = guest.run(f"grep ' /var/lib/rosetctl/mnt/{name} ' /proc/mounts && "
                                f"echo from-{name} > /var/lib/rosetctl/mnt/{name}/note")
            assert mounted.rc == 0 and "fuse" in mounted.stdout, mounted.describe()
        notes = sorted(p.read_text().strip() for p in site.fake_storage.rglob("note"))
        assert notes == [f"from-{name}" for name in CONSUMERS], notes

    run = site.playbook(SEED_PLAYBOOK, "--limit", "storage_consumers", extra_vars=consumer_vars,
                        pause_before="Disconnect volume", while_paused=while_connected)
    run.assert_ok()
    for name in CONSUMERS:
        assert run.task("Connect volume", name)["path"] == f"/var/lib/rosetctl/mnt/{name}"
    assert site.ctl_json("volume", "list") == []
