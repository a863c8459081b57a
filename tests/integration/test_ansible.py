"""The Ansible collection (ansible/) driven by Debian's real ansible-playbook against localhost.

Each test builds its own collections path (ansible_collections/roset/storage -> the repository's
ansible/), inventory and ansible.cfg under the test's directory, so nothing outside it is read or
written: the role writes rosetctl's configuration there and points the state directory there.
Results come from the suite's own stdout callback (ansible_callbacks/json_results.py: Debian 12's
ansible-core has no JSON one) and from the system itself (mountinfo, the CLI).
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import grpc
import pytest
import yaml

from playbook_run import PlaybookRun
from roset_fixtures import STANDIN_FUSE, fuse_processes_under
from rosetctl_cli import isolated_environment
from rosetctl_mounts import is_mount_point

SOURCE_DIR = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
COLLECTION = SOURCE_DIR / "ansible"
PLAYBOOKS = SOURCE_DIR / "tests" / "ansible"
SEED_PLAYBOOK = PLAYBOOKS / "seed_002_playbook.yml"
CALLBACKS = Path(__file__).resolve().parent / "ansible_callbacks"
ANSIBLE_PLAYBOOK = "/usr/bin/ansible-playbook"
ANSIBLE_DOC = "/usr/bin/ansible-doc"
TIMEOUT = 300
SECRET = "s3cr3t-never-shown-7f1c"

pytestmark = pytest.mark.skipif(
    not os.access(ANSIBLE_PLAYBOOK, os.X_OK) and os.environ.get("ROSETCTL_REQUIRE_ROOT_TESTS") != "1",
    reason="ansible-core is not installed (scripts/install-deps.sh installs it)")


class Ansible:
    """ansible-playbook with a private collections path, inventory and configuration."""

    def __init__(self, workdir: Path, state_dir: Path, binary: str):
        self.workdir = workdir
        self.state_dir = state_dir
        self.binary = binary
        self.config_path = workdir / "etc" / "rosetctl" / "config.toml"
        collections = workdir / "collections"
        namespace = collections / "ansible_collections" / "roset"
        namespace.mkdir(parents=True)
        (namespace / "storage").symlink_to(COLLECTION)
        self.inventory = workdir / "inventory.ini"
        self.inventory.write_text(
            "[storage_consumers]\n"
            "localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
        self.cfg = workdir / "ansible.cfg"
        # The seed's short names: role `storage` from roles_path (the collection's roles/), which
        # as a classic role also brings its library/ (the module) and action_plugins/ to the play.
        self.cfg.write_text(
            "[defaults]\n"
            f"inventory = {self.inventory}\n"
            f"collections_path = {collections}\n"
            f"roles_path = {namespace / 'storage' / 'roles'}\n"
            f"local_tmp = {workdir / 'ansible-local'}\n"
            f"callback_plugins = {CALLBACKS}\n"
            "stdout_callback = json_results\n"
            "retry_files_enabled = false\n"
            "gathering = explicit\n"
            "interpreter_python = /usr/bin/python3\n"
            "[connection]\n"
            "pipelining = true\n")
        self.env = isolated_environment()
        self.env.update({
            "ANSIBLE_CONFIG": str(self.cfg),
            "ANSIBLE_STDOUT_CALLBACK": "json_results",
            "ANSIBLE_REMOTE_TEMP": str(workdir / "ansible-remote"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        })
        # What the role needs to keep the whole test inside workdir.
        self.role_vars = {
            "storage_rosetctl_binary": binary,
            "storage_config_path": str(self.config_path),
            "storage_state_dir": str(state_dir),
        }

    def playbook_file(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.write_text(text)
        return path

    def run(self, playbook: Path, *args: str, extra_vars: dict | None = None) -> PlaybookRun:
        variables = dict(self.role_vars, **(extra_vars or {}))
        done = subprocess.run(
            [ANSIBLE_PLAYBOOK, str(playbook), "-e", json.dumps(variables), *args],
            cwd=self.workdir, env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=TIMEOUT)
        return PlaybookRun(done)


@pytest.fixture
def ansible(workdir, state_dir, rosetctl_binary) -> Ansible:
    if not os.access(ANSIBLE_PLAYBOOK, os.X_OK):
        pytest.fail(f"{ANSIBLE_PLAYBOOK} is missing: install ansible-core (scripts/install-deps.sh)",
                    pytrace=False)
    return Ansible(workdir, state_dir, rosetctl_binary)


def tree(root: Path, skip: tuple[str, ...] = ("ansible-local", "ansible-remote")) -> list[str]:
    """Every path under root (relative), for before/after comparisons."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        entries += [os.path.normpath(os.path.join(rel, n)) for n in dirnames + filenames]
    return sorted(e for e in entries if e.split(os.sep)[0] not in skip)


# ---------------------------------------------------------------- the seed playbook, verbatim

# A copy of seed 002 as the team's docs hold it (../shared/seeds), so a checkout without them (CI)
# still compares the playbook with the seed, and a checkout with them checks that copy too.
SEED_COPY = Path(__file__).resolve().parent / "seeds" / "002_28623f9098c1c1f1.txt"


def seed_files() -> list[Path]:
    """Seed 002 wherever it is next to the repository (ROSETCTL_SEEDS_DIR, ../shared/seeds)."""
    candidates = [os.environ.get("ROSETCTL_SEEDS_DIR", ""), SOURCE_DIR / ".." / "shared" / "seeds",
                  SOURCE_DIR / ".." / ".." / "shared" / "seeds"]
    return [Path(f) for directory in candidates if directory
            for f in glob.glob(os.path.join(str(directory), "002_*.txt"))]


def seed_block(seed: Path) -> str:
    """The yaml block of seed 002, dedented."""
    lines = seed.read_text().split("\n")
    block = []
    for line in lines[lines.index(".. code-block:: yaml") + 1:]:
        if line and not line.startswith("   "):
            break
        block.append(line)
    text = "\n".join(line[3:] for line in block).strip("\n")
    return text + "\n"


def test_seed_playbook_file_is_the_seed_verbatim():
    assert SEED_PLAYBOOK.read_text() == seed_block(SEED_COPY), (
        f"expected {SEED_PLAYBOOK} to be seed 002's playbook ({SEED_COPY}) byte for byte")
    for seed in seed_files():
        assert seed.read_bytes() == SEED_COPY.read_bytes(), f"expected {SEED_COPY} to be {seed} byte for byte"


def test_seed_playbook_runs_unchanged(ansible, cli, state_dir, mounts_in):
    run = ansible.run(SEED_PLAYBOOK)
    run.assert_ok()

    created = run.task("Create volume")
    assert created["changed"] and re.match(r"^local-[0-9a-f]{16}$", created["id"]), (
        f"expected Create volume to create a volume and return its id, got {created}")
    assert created["name"] == "localhost" and created["capacity_bytes"] == 2**30, (
        f"expected the volume to be named after the inventory host with size 1 GiB, got {created}")
    connected = run.task("Connect volume")
    expected_path = str(state_dir / "mnt" / "localhost")
    assert connected["changed"] and connected["path"] == expected_path and connected["type"] == "filesystem", (
        f"expected Connect volume to mount at {expected_path}, got {connected}")
    debug = run.task("debug")
    assert debug["msg"] == f"Volume {created['id']} attached to {expected_path}", (
        f"expected the debug task to show id and path, got {debug}")
    assert run.task("Disconnect volume")["changed"] and run.task("Delete volume")["changed"], (
        f"expected disconnect and delete to change something: {run.describe()}")

    assert cli.volumes() == [], f"expected the volume to be gone, got {cli.volumes()}"
    assert mounts_in() == [], f"expected no mounts left under the test dir, got {mounts_in()}"
    config = ansible.config_path.read_text()
    assert f'state-dir = "{state_dir}"' in config and 'provider = "local"' in config, (
        f"expected the role to write the state dir and provider into {ansible.config_path}: {config!r}")


# ---------------------------------------------------------------- idempotency, diff, extend, stats

PRESENT_CONNECTED = """\
- hosts: storage_consumers
  roles:
    - role: storage
      node_type: [controller, consumer]
  tasks:
    - name: create
      roset.storage.storage: {name: data, size: 64Mi}
      register: created
    - name: connect
      roset.storage.storage: {name: data, state: connected, target: "{{ target }}"}
    - name: grow
      roset.storage.storage: {name: data, state: extended, size: 1}
    - name: usage
      roset.storage.storage: {name: data, state: stats}
      register: usage
    - name: host volume
      roset.storage.storage: {}
    - name: host volume connected at the default target
      roset.storage.storage: {state: connected}
"""


def test_second_run_reports_no_change_and_check_diff_predicts(ansible, cli, workdir, state_dir, mounts_in):
    target = workdir / "data-mnt"
    playbook = ansible.playbook_file("present.yml", PRESENT_CONNECTED)
    first = ansible.run(playbook, extra_vars={"target": str(target)})
    first.assert_ok()
    assert {"create", "connect", "grow", "host volume", "host volume connected at the default target"} <= set(
        first.changed_tasks()), f"expected the first run to change things, changed {first.changed_tasks()}"
    assert first.task("grow")["capacity_bytes"] == 2**30, f"expected grow to 1 GiB: {first.task('grow')}"
    usage = first.task("usage")
    assert not usage["changed"] and usage["path"] == str(target) and usage["stats"]["bytes"]["total"] > 0, (
        f"expected stats of the mounted volume, got {usage}")
    assert is_mount_point(str(target)), f"expected {target} to be mounted after the first run"

    second = ansible.run(playbook, extra_vars={"target": str(target)})
    second.assert_ok()
    assert second.changed_tasks() == [], (
        f"expected no task to change on the second run, changed {second.changed_tasks()}")
    mounts_before = mounts_in()

    # Check mode with --diff: says what disconnect and delete would do, does neither.
    teardown = ansible.playbook_file("teardown.yml", """\
- hosts: storage_consumers
  roles: [storage]
  tasks:
    - name: disconnect
      storage: {name: data, state: disconnected}
    - name: delete host volume
      storage: {state: absent}
""")
    checked = ansible.run(teardown, "--check", "--diff")
    checked.assert_ok()
    diff = checked.task("disconnect")["diff"]
    diff = diff[0] if isinstance(diff, list) else diff
    assert checked.task("disconnect")["changed"] and diff["before"]["connected_at"] == [str(target)] and (
        diff["after"]["connected_at"] == []), f"expected a before/after diff of the disconnect, got {diff}"
    delete = checked.task("delete host volume")
    assert delete["changed"] and delete.get("warnings"), (
        f"expected check mode to predict the delete and warn it is still connected, got {delete}")
    assert mounts_in() == mounts_before and len(cli.volumes()) == 2, (
        f"expected check mode to leave mounts {mounts_before} and both volumes, got {mounts_in()} {cli.volumes()}")

    # The fixture unmounts and removes the rest; deleting is covered by the seed and bad-input runs.


def test_check_mode_on_fresh_host_changes_nothing(ansible, workdir, state_dir, mounts_in):
    # The role would also install rosetctl from the controller's copy; in check mode it must not.
    installed = workdir / "bin" / "rosetctl"
    before = tree(workdir)
    run = ansible.run(SEED_PLAYBOOK, "--check", "--diff", extra_vars={
        "storage_rosetctl_src": ansible.binary, "storage_rosetctl_binary": str(installed)})
    run.assert_ok()
    assert {"Create volume", "Connect volume", "storage : Write the configuration"} <= set(run.changed_tasks()), (
        f"expected check mode to report what would change, changed {run.changed_tasks()}")
    diff = run.task("Create volume")["diff"]
    diff = diff[0] if isinstance(diff, list) else diff
    assert diff["before"]["state"] == "absent" and diff["after"]["size"] == "1Gi", (
        f"expected check mode to diff the volume it would create, got {diff}")
    connect = run.task("Connect volume")
    assert connect["path"] == "<state dir>/mnt/localhost", (
        f"expected check mode to say where the volume would be mounted, got {connect}")
    assert tree(workdir) == before, (
        f"expected check mode to write nothing, new paths: {sorted(set(tree(workdir)) - set(before))}")
    assert not state_dir.exists() and not installed.exists() and mounts_in() == [], (
        "expected no state dir, no installed binary and no mounts after check mode")


# ---------------------------------------------------------------- failures

BAD_INPUT = """\
- hosts: storage_consumers
  roles: [storage]
  tasks:
    - name: unknown state
      storage: {state: frobnicated}
      ignore_errors: true
    - name: negative size
      storage: {size: -1}
      ignore_errors: true
    - name: name with a slash
      storage: {name: a/b, size: 1}
      ignore_errors: true
    - name: connect a missing volume, with secrets
      storage: {name: missing, state: connected, secrets: {api_key: "%(secret)s"}}
      ignore_errors: true
    - name: snapshot state on a volume
      storage: {state: restored}
      ignore_errors: true
    - name: make one
      storage: {name: sized, size: 1}
    - name: same name, bigger size
      storage: {name: sized, size: 2}
      ignore_errors: true
    - name: delete
      storage: {name: sized, state: absent}
    - name: delete again
      storage: {name: sized, state: absent}
    - name: commit a volume that is not there
      storage: {resource: snapshot, volume: not-there, name: first}
      ignore_errors: true
    - name: secrets reach rosetctl as a private file
      storage: {name: spy, state: absent, binary: "{{ spy }}", secrets: {api_key: "%(secret)s"}}
""" % {"secret": SECRET}

# Stands in for rosetctl to see how the module hands it secrets; answers "not found".
SPY = """\
#!/bin/sh
{ echo "argv: $*"; echo "env: $(env | grep -c %(secret)s)"; stat -c 'mode: %%a' "$ROSETCTL_SECRETS_FILE"
  stat -c 'dir mode: %%a' "$(dirname "$ROSETCTL_SECRETS_FILE")"; echo "file: $ROSETCTL_SECRETS_FILE"
  echo "content: $(cat "$ROSETCTL_SECRETS_FILE")"; } > "$(dirname "$0")/spy.log"
echo 'rosetctl: no volume is named "spy" or has that id' >&2
exit 3
""" % {"secret": SECRET}


def test_bad_input_fails_the_task_with_a_clear_message(ansible, cli, workdir, mounts_in):
    spy = workdir / "spy" / "rosetctl"
    spy.parent.mkdir()
    spy.write_text(SPY)
    spy.chmod(0o755)
    run = ansible.run(ansible.playbook_file("bad.yml", BAD_INPUT), extra_vars={"spy": str(spy)})
    assert run.rc == 0 and run.output["stats"]["localhost"]["ignored"] == 7, (
        f"expected exactly the seven bad tasks to fail (ignored): {run.describe()}")
    assert not run.task("delete again")["changed"], "expected deleting a deleted volume to change nothing"
    expected = {
        "unknown state": r"value of state must be one of: .*got: frobnicated",
        "negative size": r"size -1 is negative",
        "name with a slash": r'"a/b".*\(rosetctl volume show exited 2: bad usage or input\)',
        "connect a missing volume, with secrets": r'volume "missing" does not exist; create it first',
        "snapshot state on a volume": r"state restored does not apply to volumes.*from_snapshot",
        "same name, bigger size": r'exists with size 1Gi, not 2Gi.*state: extended',
        "commit a volume that is not there": r'volume "not-there" does not exist',
    }
    for name, pattern in expected.items():
        result = run.task(name)
        assert result.get("failed") and re.search(pattern, result.get("msg", "")), (
            f"expected task {name!r} to fail with a message matching {pattern!r}, got {result}")
        assert "Traceback" not in json.dumps(result), f"expected no Python traceback in {name!r}: {result}"
    assert SECRET not in run.stdout and SECRET not in run.stderr, "expected the secret never to be printed"
    seen = dict(line.split(": ", 1) for line in (spy.parent / "spy.log").read_text().splitlines())
    assert SECRET not in seen["argv"] and seen["env"] == "0", f"expected no secret on argv or in the environment: {seen}"
    assert seen["mode"] == "600" and seen["dir mode"] == "700" and SECRET in seen["content"], (
        f"expected the secrets in a 0600 file in a 0700 directory named by ROSETCTL_SECRETS_FILE: {seen}")
    assert not os.path.exists(os.path.dirname(seen["file"])), f"expected {seen['file']} to be removed after the call"
    assert cli.volumes() == [] and mounts_in() == [], f"expected nothing left: {cli.volumes()} {mounts_in()}"


# ---------------------------------------------------------------- serve on a controller

SERVE = """\
- hosts: storage_consumers
  roles:
    - role: storage
      node_type: controller
      storage_serve: true
"""


def test_controller_role_runs_serve_without_systemd_and_leaves_it_running(ansible, csi, workdir):
    assert not Path("/run/systemd/system").is_dir(), "this test covers hosts without systemd"
    socket_path, pidfile = workdir / "run" / "csi.sock", workdir / "run" / "serve.pid"
    extra = {"storage_serve_endpoint": f"unix://{socket_path}", "storage_serve_pidfile": str(pidfile),
             "storage_serve_log": str(workdir / "log" / "serve.log")}
    try:
        first = ansible.run(ansible.playbook_file("serve.yml", SERVE), extra_vars=extra)
        first.assert_ok()
        assert [t for t in first.changed_tasks() if "serve" in t] == ["storage : Start rosetctl serve"], (
            f"expected one start of serve and no restart: {first.changed_tasks()}")
        pid = int(pidfile.read_text())
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            info = csi.grpc.IdentityStub(channel).GetPluginInfo(csi.pb2.GetPluginInfoRequest(), timeout=10)
        assert info.name == "io.roset.csi", f"expected serve to answer on {socket_path}: {info}"
        again = ansible.run(ansible.playbook_file("serve.yml", SERVE), extra_vars=extra)
        again.assert_ok()
        assert again.changed_tasks() == [] and int(pidfile.read_text()) == pid, (
            f"expected a second run to find serve running and change nothing: {again.changed_tasks()}")
        changed = ansible.run(ansible.playbook_file("serve.yml", SERVE), extra_vars=dict(extra, storage_driver_name="renamed.example"))
        changed.assert_ok()
        assert int(pidfile.read_text()) != pid and "storage : Restart rosetctl serve without systemd" in (
            changed.changed_tasks()), f"expected a new configuration to restart serve: {changed.changed_tasks()}"
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            info = csi.grpc.IdentityStub(channel).GetPluginInfo(csi.pb2.GetPluginInfoRequest(), timeout=10)
        assert info.name == "renamed.example", f"expected the restarted serve to read the new driver name: {info}"
    finally:
        if pidfile.exists():
            pid = int(pidfile.read_text())
            try:
                os.kill(pid, signal.SIGTERM)
                for _ in range(200):
                    os.kill(pid, 0)
                    time.sleep(0.05)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------- snapshots

SNAPSHOT_FLOW = """\
- hosts: storage_consumers
  roles: [storage]
  tasks:
    - {name: create, storage: {name: origin, size: 64Mi}}
    - {name: connect, storage: {name: origin, state: connected, target: "{{ workdir }}/origin"}}
    - name: write
      copy: {dest: "{{ workdir }}/origin/file.txt", content: "committed content\\n"}
    - name: commit
      storage: {resource: snapshot, volume: origin, name: first}
      register: snap
    - name: commit again
      storage: {resource: snapshot, volume: origin, name: first}
    - name: restore
      storage: {resource: snapshot, state: restored, name: "{{ snap.snapshot_id }}", volume: copy}
    - {name: connect copy, storage: {name: copy, state: connected, target: "{{ workdir }}/copy"}}
    - {name: read, slurp: {src: "{{ workdir }}/copy/file.txt"}, register: copied}
    - name: compare
      assert: {that: ["(copied.content | b64decode) == 'committed content\\n'"]}
    - {name: copy off, storage: {name: copy, state: disconnected}}
    - {name: origin off, storage: {name: origin, state: disconnected}}
    - {name: copy gone, storage: {name: copy, state: absent}}
    - {name: origin gone, storage: {name: origin, state: absent}}
    - {name: snapshot gone, storage: {resource: snapshot, state: absent, name: "{{ snap.snapshot_id }}"}}
"""


def test_snapshot_flow_commit_restore_connect_compare(ansible, cli, workdir, mounts_in):
    run = ansible.run(ansible.playbook_file("snap.yml", SNAPSHOT_FLOW), extra_vars={"workdir": str(workdir)})
    run.assert_ok()
    assert run.task("commit")["changed"] and run.task("commit")["snapshot_id"], (
        f"expected commit to return a snapshot id: {run.task('commit')}")
    assert not run.task("commit again")["changed"], "expected a second commit of the same name to change nothing"
    assert run.task("commit again")["snapshot_id"] == run.task("commit")["snapshot_id"], (
        "expected the second commit of the same name to return the first snapshot")
    assert run.task("commit")["snapshot"]["name"] == "first", run.task("commit")
    assert run.task("restore")["changed"] and run.task("restore")["name"] == "copy", run.task("restore")
    assert cli.volumes() == [] and mounts_in() == [], f"expected nothing left: {cli.volumes()} {mounts_in()}"
    assert cli.ok_json("snapshot", "list") == [], "expected the snapshot task with state absent to delete it"


MODIFY_FLOW = """\
- hosts: storage_consumers
  roles: [storage]
  tasks:
    - name: create
      storage: {name: fast, size: 16Mi, parameters: {type: image}, mutable_parameters: {directIO: false}}
    - name: same again
      storage: {name: fast, parameters: {type: image}, mutable_parameters: {directIO: false}}
    - name: switch
      storage: {name: fast, parameters: {type: image}, mutable_parameters: {directIO: true}}
    - name: fixed at creation
      storage: {name: fast, parameters: {type: image}, mutable_parameters: {type: dir}}
      ignore_errors: true
"""


def test_mutable_parameters_create_then_modify_with_check_mode_and_diff(ansible, cli):
    playbook = ansible.playbook_file("modify.yml", MODIFY_FLOW)
    run = ansible.run(playbook)
    assert run.task("create")["changed"], run.task("create")
    assert run.task("create")["volume"]["mutable_parameters"] == {"directIO": "false"}, run.task("create")
    assert not run.task("same again")["changed"], "expected an unchanged mutable parameter to change nothing"
    assert run.task("switch")["changed"], run.task("switch")
    assert cli.volume("fast")["mutable_parameters"] == {"directIO": "true"}, "expected the volume modified"
    refused = run.task("fixed at creation")
    assert refused.get("failed") and "type" in refused["msg"], refused
    assert cli.volume("fast")["mutable_parameters"] == {"directIO": "true"}

    # Check mode predicts the change with a diff and leaves the volume as it is.
    back = ansible.playbook_file("back.yml", """\
- hosts: storage_consumers
  roles: [storage]
  tasks:
    - {name: back, storage: {name: fast, parameters: {type: image}, mutable_parameters: {directIO: false}}}
""")
    checked = ansible.run(back, "--check", "--diff")
    checked.assert_ok()
    diff = checked.task("back")["diff"]
    diff = diff[0] if isinstance(diff, list) else diff
    assert checked.task("back")["changed"] and diff["before"]["mutable_parameters"] == {"directIO": "true"} and (
        diff["after"]["mutable_parameters"] == {"directIO": "false"}), checked.task("back")
    assert cli.volume("fast")["mutable_parameters"] == {"directIO": "true"}, "expected check mode to change nothing"
    ansible.run(back).assert_ok()
    assert cli.volume("fast")["mutable_parameters"] == {"directIO": "false"}


ROSET_FLOW = """\
- hosts: storage_consumers
  roles: [storage]
  module_defaults:
    storage: {secrets: "{{ roset_secrets }}"}
  tasks:
    - {name: create, storage: {name: shared, parameters: {basePath: /ansible}}}
    - {name: connect, storage: {name: shared, state: connected, target: "{{ workdir }}/shared"}}
    - name: write
      copy: {dest: "{{ workdir }}/shared/model.txt", content: "weights\\n"}
    - name: commit
      storage: {resource: snapshot, volume: shared, name: epoch-1}
    - {name: disconnect, storage: {name: shared, state: disconnected}}
    - {name: snapshot gone, storage: {resource: snapshot, state: absent, name: epoch-1}}
    - {name: gone, storage: {name: shared, state: absent}}
"""

KEY_ON_HOST = """\
- hosts: storage_consumers
  roles: [storage]
  tasks:
    - {name: create, storage: {name: keyed}}
    - {name: gone, storage: {name: keyed, state: absent}}
"""


def private_vars(path: Path, **variables) -> Path:
    """Secret extra vars go in a 0600 file (-e @file): a command line is visible to every user."""
    path.touch(mode=0o600)
    path.write_text(json.dumps(variables))
    return path


def test_roset_provider_with_the_key_in_task_secrets_or_on_the_host(ansible, roset, workdir, mounts_in):
    """The roset provider from playbooks: the role writes the provider's settings, the key comes
    either with each task (`secrets`) or from the role's 0600 key file; it is never printed."""
    settings = {"storage_provider": "roset", "storage_roset_api_url": roset.fake.url,
                "storage_roset_fuse": str(STANDIN_FUSE), "workdir": str(workdir)}
    run = ansible.run(ansible.playbook_file("roset.yml", ROSET_FLOW), "-e",
                      "@" + str(private_vars(workdir / "secrets.json", roset_secrets={"api-key": roset.key})),
                      extra_vars=settings)
    run.assert_ok()
    folder = roset.fake.live_node_at(roset.fake.default_mount, "/ansible/shared")
    assert folder is None and any(n["name"] == "shared" and n["deletedAt"] for n in roset.fake.state.nodes.values()), (
        "expected the volume's folder under /ansible to be made, then soft-deleted")
    commits = list(roset.fake.state.commits.values())
    assert len(commits) == 1 and "rosetctl/epoch-1" not in roset.fake.state.refs, (commits, roset.fake.state.refs)
    assert mounts_in() == [] and fuse_processes_under(workdir) == []
    config = ansible.config_path.read_text()
    assert "roset-api-url" in config and "roset-api-key-file" not in config, config

    key_file = workdir / "etc" / "rosetctl" / "roset.key"
    keyed = ansible.run(ansible.playbook_file("keyed.yml", KEY_ON_HOST), "-e",
                        "@" + str(private_vars(workdir / "key.json", storage_roset_api_key=roset.key)),
                        extra_vars=dict(settings, storage_roset_api_key_file=str(key_file)))
    keyed.assert_ok()
    assert keyed.task("create")["changed"] and keyed.task("gone")["changed"], keyed.describe()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and key_file.read_text() == roset.key + "\n"
    config = ansible.config_path.read_text()
    assert f'roset-api-key-file = "{key_file}"' in config and roset.key not in config, config
    for output in (run.stdout, run.stderr, keyed.stdout, keyed.stderr):
        assert roset.key not in output, "expected the API key never to be printed"


# ---------------------------------------------------------------- documentation

@pytest.mark.parametrize("kind", ["module", "role"])
def test_ansible_doc_renders(ansible, kind):
    done = subprocess.run([ANSIBLE_DOC, "-t", kind, "roset.storage.storage"], cwd=ansible.workdir,
                          env=ansible.env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and "ERROR" not in done.stderr and "WARNING" not in done.stderr, (
        f"expected ansible-doc -t {kind} to render cleanly: rc={done.returncode} stderr={done.stderr!r}")
    marker = "EXAMPLES" if kind == "module" else "ENTRY POINT: main"
    assert marker in done.stdout, f"expected {marker} in ansible-doc output: {done.stdout[:2000]!r}"


def load_plugin(relative: str, name: str):
    spec = importlib.util.spec_from_file_location(name, COLLECTION / relative)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    return plugin


def test_module_argument_spec_matches_its_documentation():
    """What ansible-test's validate-modules checks first (it needs pip, so it cannot run offline)."""
    module = load_plugin("plugins/modules/storage.py", "rosetctl_storage_module")
    options = yaml.safe_load(module.DOCUMENTATION)["options"]
    spec = module.ARGUMENT_SPEC
    assert sorted(options) == sorted(spec), (
        f"expected the documented options {sorted(options)} to be the argument spec's {sorted(spec)}")
    for name, doc in options.items():
        arg = spec[name]
        for key in ("type", "default", "choices", "required", "elements"):
            documented, actual = doc.get(key), arg.get(key)
            if key == "required":
                documented, actual = bool(documented), bool(actual)
            assert documented == actual, f"option {name}: DOCUMENTATION says {key}={documented!r}, the spec {actual!r}"
        assert doc.get("description"), f"option {name} has no description"
    assert spec["secrets"].get("no_log"), "expected secrets to be no_log"
    for block in ("EXAMPLES", "RETURN"):
        assert yaml.safe_load(getattr(module, block)), f"expected {block} to be YAML"


def test_role_argument_specs_match_its_defaults():
    role = COLLECTION / "roles" / "storage"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert sorted(options) == sorted(defaults), (
        f"expected every role variable to be documented: defaults {sorted(defaults)}, specs {sorted(options)}")
    for name, value in defaults.items():
        documented = options[name].get("default")
        if options[name]["type"] == "list" and isinstance(value, str):
            value = [value]
        assert documented == value, f"role variable {name}: argument_specs default {documented!r}, defaults/main.yml {value!r}"


@pytest.mark.parametrize("given, expected", [
    (1, 2**30), ("1", 2**30), (1.5, 3 * 2**29), ("64Mi", 64 * 2**20), ("10Gi", 10 * 2**30),
    ("1.5Ti", 3 * 2**39), ("500M", 500 * 10**6), (" 2 ", 2 * 2**30), ("0.0000001", 108),
])
def test_module_sizes_are_gib_numbers_or_rosetctl_units(given, expected):
    module = load_plugin("plugins/modules/storage.py", "rosetctl_storage_module")
    assert module.size_to_bytes(given) == expected, f"expected size {given!r} to be {expected} bytes"


@pytest.mark.parametrize("given, message", [
    (-1, "negative"), ("-64Mi", "negative"), (0, "zero"), ("ten", "not a size"), (True, "number of GiB"),
    ("1Xi", "not a size"), ("9Ei", "too large"),
])
def test_module_rejects_bad_sizes_clearly(given, message):
    module = load_plugin("plugins/modules/storage.py", "rosetctl_storage_module")
    with pytest.raises(module.TaskFailed, match=message):
        module.size_to_bytes(given)


def test_module_formats_sizes_as_rosetctl_does(cli):
    module = load_plugin("plugins/modules/storage.py", "rosetctl_storage_module")
    for size in ("1Gi", "1.5Gi", "1536Mi", "1.25Ti", "123456789", "64Mi", "500M", "1.5G"):
        shown = cli.create(f"v{len(size)}-{size.replace('.', '-')}", "--size", size)
        assert module.format_size(shown["capacity_bytes"]) == shown["size"], (
            f"expected the module to write {shown['capacity_bytes']} bytes as rosetctl does ({shown['size']})")


@pytest.mark.parametrize("hostname, name", [
    ("localhost", "localhost"), ("web1.example.com", "web1.example.com"), ("host:2222", "host-2222"),
    ("_x y", "x-y"), ("-", None), ("a" * 200, "a" * 128),
])
def test_volume_name_derived_from_inventory_hostname(hostname, name):
    action = load_plugin("plugins/action/storage.py", "rosetctl_storage_action")
    assert action.volume_name_for_host(hostname) == name


def test_example_playbook_parses(ansible):
    done = subprocess.run([ANSIBLE_PLAYBOOK, "--syntax-check", "roset.storage.volume_per_host"], cwd=ansible.workdir,
                          env=ansible.env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"expected the collection's example playbook to parse: {done.stdout} {done.stderr}"
