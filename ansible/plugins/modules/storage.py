#!/usr/bin/python
# -*- coding: utf-8 -*-
# The `storage` module of the roset.storage collection: rosetctl volumes and snapshots from
# playbooks. Every call is `rosetctl ... --output json` (a list argv, never a shell), so a
# playbook, an operator's shell and kubelet go through the same code path.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: storage
short_description: Create, attach, grow, snapshot and delete rosetctl volumes
version_added: 0.1.0
description:
  - Manages volumes and snapshots of C(rosetctl) on the managed host by running the
    C(rosetctl) CLI with C(--output json); nothing is reimplemented in Python, so the
    module, an operator's shell and Kubernetes (C(rosetctl serve)) behave identically.
  - Volumes are named; without C(name) a consumer host gets one volume named after its
    inventory hostname (the C(storage) action plugin fills it in), so the playbook of the
    original cinderlib storage role runs unchanged.
  - Every state is idempotent, supports check mode (only read-only C(rosetctl) verbs run) and
    reports before/after states with C(--diff).
  - Failures return C(rosetctl)'s own message in C(msg), with its exit code in C(rc).
  - Snapshots are C(rosetctl snapshot) commits. A snapshot C(name) is its idempotency key
    (C(rosetctl snapshot commit --name)), so a repeated task finds the snapshot it made. A
    C(rosetctl) or provider without snapshots answers with exit code 9 (UNIMPLEMENTED); the
    task then fails with that message. Nothing is emulated.
author:
  - rosetctl developers
attributes:
  check_mode:
    support: full
    description: Only C(volume show), C(volume stats) and C(snapshot list) run.
  diff_mode:
    support: full
    description: Shows the volume or snapshot before and after the change.
  platform:
    platforms: posix
    description: Runs C(rosetctl) on the managed host; mounting needs root.
options:
  resource:
    description: What to manage.
    type: str
    choices: [volume, snapshot]
    default: volume
  state:
    description:
      - B(Volumes:)
      - C(present) creates the volume (idempotent by name). An existing volume of at least
        C(size) is left alone (so a volume grown later by C(extended) stays C(present)); a
        smaller one fails the task, since C(present) never resizes; use C(extended) to grow.
      - C(absent) deletes the volume and its data. C(rosetctl) refuses while the volume is
        connected or mapped anywhere; disconnect it first.
      - C(connected) attaches and mounts the volume on this host at C(target) and returns the
        mount point in C(path). Without C(target), a volume connected anywhere on this host
        counts as connected; otherwise it is mounted at C(<state dir>/mnt/<name>).
      - C(disconnected) unmounts it from C(target), or from every mount point on this host
        when no C(target) is given; the data is kept.
      - C(extended) grows the volume to at least C(size) (C(rosetctl volume expand)); a volume
        that is already that large or larger is left alone. Volumes never shrink.
      - C(stats) reports used and free bytes and inodes (C(rosetctl volume stats)); the volume
        must be connected on this host. Never changes anything.
      - B(Snapshots:)
      - C(present) commits the content of C(volume) (C(rosetctl snapshot commit VOLUME -m
        MESSAGE)). With C(name), a snapshot of that volume with that name (or message) already
        there means nothing is done; without C(name) every run commits, and reports a change
        only when C(rosetctl) returns a snapshot that was not listed before.
      - C(absent) deletes the snapshot C(name) (an id or a name).
      - C(restored) creates the new volume C(volume) from snapshot C(name) (C(rosetctl snapshot
        restore ID --name VOLUME)); nothing is done when that volume exists.
    type: str
    choices: [present, absent, connected, disconnected, extended, stats, restored]
    default: present
  name:
    description:
      - For volumes, the volume name or id. Names are 1 to 128 letters, digits, C(.), C(_) and
        C(-), starting with a letter or digit.
      - Default (filled in by the C(storage) action plugin) is the inventory hostname with
        every other character replaced by C(-), one volume per host.
      - For snapshots, the snapshot id or name (the commit message when C(rosetctl) records no
        separate name). Required for C(state=absent) and C(state=restored).
    type: str
  volume:
    description:
      - For snapshots only. With C(state=present), the volume to commit (default as for a
        volume's C(name)); with C(state=restored), the name of the new volume.
    type: str
  size:
    description:
      - A number means GiB (C(1) is 1 GiB, C(1.5) is 1.5 GiB), as in the cinderlib role; a
        number given as a string (C("2")) means GiB too.
      - A string with a unit is read as C(rosetctl) reads it, e.g. C(64Mi), C(10Gi), C(1.5Ti)
        (powers of 1024), C(500M) (powers of 1000).
      - Must be more than zero. Used by C(state=present) (create) and C(state=extended) (the
        new size).
    type: raw
  provider:
    description:
      - Provider for new volumes (C(rosetctl --provider)); default from the host's
        configuration, else C(local).
    type: str
  parameters:
    description:
      - Provider parameters for new volumes, passed as C(--param KEY=VALUE). The local
        provider knows C(type) (C(dir) or C(image)); the roset provider
        C(mountId), C(basePath), C(subPath) and C(deletePolicy) (C(rosetctl)'s docs/guides/providers/roset.md).
    type: dict
  mutable_parameters:
    description:
      - Parameters that can change after creation (CSI ControllerModifyVolume), with
        C(resource=volume) and C(state=present). The local provider has C(directIO)
        (C(true) or C(false)) for image and block volumes (C(rosetctl)'s docs/guides/providers/local.md,
        Mutable parameters).
      - On an existing volume, the keys given that differ from what it has are changed
        (C(rosetctl volume modify)), live where it is connected; keys not given are left alone.
        A new volume is created, then modified the same way (should that fail, the volume
        exists with the defaults and the next run sets them).
    type: dict
  target:
    description:
      - Absolute mount path for C(state=connected), C(state=disconnected) and C(state=stats).
        Its parent directory must exist.
      - Default for C(state=connected) is C(<state dir>/mnt/<name>), so
        C(/var/lib/rosetctl/mnt/<name>) with the default state directory.
    type: path
  read_only:
    description: Mount read-only (C(state=connected)).
    type: bool
    default: false
  from_snapshot:
    description:
      - With C(resource=volume) and C(state=present), create the volume from this snapshot id
        (C(rosetctl volume create --from-snapshot)). Needs a C(rosetctl) with snapshots.
    type: str
  message:
    description:
      - Commit message for C(resource=snapshot), C(state=present); default C(name), else
        C(committed by Ansible).
    type: str
  secrets:
    description:
      - CSI secrets for the provider, sent with every C(rosetctl) call that takes secrets, as
        a Kubernetes StorageClass's secret would be. For C(provider=roset), C(api-key) (the
        Roset API key) and optionally C(api-url); the host then needs no key of its own.
      - Never put on a command line or logged; handed to C(rosetctl) as a file with mode 0600
        in a private temporary directory named by the environment variable
        C(ROSETCTL_SECRETS_FILE), and removed after the call. The local provider ignores them.
    type: dict
  binary:
    description:
      - The C(rosetctl) executable. Default is the one the C(storage) role installed or found
        (fact C(storage_rosetctl)), else C(rosetctl) on C(PATH) or in C(/usr/local/bin).
    type: path
  config:
    description:
      - C(rosetctl) configuration file (C(--config)). Default is the file the C(storage) role
        wrote (fact C(storage_rosetctl)), else C(rosetctl)'s own default
        (C(ROSETCTL_CONFIG), else C(/etc/rosetctl/config.toml) when it exists).
    type: path
  state_dir:
    description:
      - C(rosetctl --state-dir); overrides the configuration file. Default from the
        configuration, else C(/var/lib/rosetctl).
    type: path
  node_id:
    description: C(rosetctl --node-id), this host's CSI node id; default the host name.
    type: str
notes:
  - The module runs C(rosetctl) on the managed host; the C(storage) role checks it is installed
    and writes its configuration.
  - In check mode only read-only verbs run. A volume an earlier task would have created is
    reported as changing (connect, extend) rather than failing, since it does not exist yet.
  - In check mode, when the C(config) file is not written yet, the module runs nothing and
    reports every volume as absent. The default mount target is reported under the state
    directory, resolved as C(rosetctl) resolves it (C(state_dir), else C(ROSETCTL_STATE_DIR),
    else C(state-dir) in the configuration file, else C(/var/lib/rosetctl)).
  - C(rosetctl)'s docs/ describe the CLI (guides), its JSON fields and its exit codes (reference).
'''

EXAMPLES = r'''
# The cinderlib storage role's playbook, unchanged: one volume per consumer host.
- hosts: storage_consumers
  roles:
    - {role: storage, node_type: consumer}
  tasks:
    - storage: {resource: volume, state: present, size: 1}
      register: vol
    - storage: {resource: volume, state: connected}
      register: conn
    - debug: {msg: "Volume {{ vol.id }} attached to {{ conn.path }}"}
    - storage: {resource: volume, state: disconnected}
    - storage: {resource: volume, state: absent}

- name: A named 10 GiB volume mounted read-only at /srv/data
  roset.storage.storage:
    name: data
    size: 10Gi
  # then
- roset.storage.storage:
    name: data
    state: connected
    target: /srv/data
    read_only: true

- name: Grow it to 20 GiB
  roset.storage.storage:
    name: data
    state: extended
    size: 20

- name: How full is it
  roset.storage.storage:
    name: data
    state: stats
  register: usage

- name: Commit a snapshot, then restore it to a new volume
  roset.storage.storage:
    resource: snapshot
    volume: data
    name: before-upgrade
  register: snap
- roset.storage.storage:
    resource: snapshot
    state: restored
    name: "{{ snap.snapshot_id }}"
    volume: data-restored
'''

RETURN = r'''
id:
  description:
    - Volume id (for snapshots, the snapshot id); null when there is none (not created yet, or
      check mode).
  returned: always
  type: str
  sample: local-3f9a0c1d2e4b5a69
name:
  description: Volume name (for snapshots, the snapshot name or message).
  returned: always
  type: str
  sample: web1
size:
  description: The volume's size as C(rosetctl) writes it; null when unknown or created without one.
  returned: always
  type: str
  sample: 1Gi
capacity_bytes:
  description: The volume's size in bytes; null when created without one.
  returned: when the volume exists
  type: int
  sample: 1073741824
path:
  description:
    - Where the volume is mounted (or the device, for block volumes), for C(state=connected)
      and C(state=stats); null otherwise, and in check mode before a connect.
  returned: always
  type: str
  sample: /var/lib/rosetctl/mnt/web1
type:
  description: C(filesystem) for a mounted directory, C(block) for a device; null without C(path).
  returned: always
  type: str
  sample: filesystem
connections:
  description: This host's mounts of the volume.
  returned: when the volume exists
  type: list
  elements: dict
  sample: [{"target": "/var/lib/rosetctl/mnt/web1", "staging_path": "/var/lib/rosetctl/staging/local-3f9a0c1d2e4b5a69", "readonly": false}]
snapshot_id:
  description:
    - The snapshot committed, deleted or restored from (also for volumes created with
      C(from_snapshot)); null otherwise.
  returned: always
  type: str
stats:
  description:
    - C(rosetctl volume stats) output, C(bytes) and C(inodes) with C(total), C(used), C(available);
      a block volume's C(bytes) has C(total) only.
  returned: with C(state=stats)
  type: dict
  sample: {"bytes": {"total": 10737418240, "used": 4096, "available": 10737414144}}
volume:
  description: The volume as C(rosetctl volume show -o json) prints it.
  returned: when the volume exists
  type: dict
snapshot:
  description: The snapshot as C(rosetctl snapshot list -o json) prints it.
  returned: with C(resource=snapshot) when the snapshot exists
  type: dict
msg:
  description: What was done, or C(rosetctl)'s message when the task failed.
  returned: always
  type: str
  sample: created volume "web1" (local-3f9a0c1d2e4b5a69)
rc:
  description: C(rosetctl)'s exit code.
  returned: when a C(rosetctl) call failed
  type: int
  sample: 5
cmd:
  description: The failed C(rosetctl) command line (it never holds secrets).
  returned: when a C(rosetctl) call failed
  type: list
  elements: str
stdout:
  description: What the failed C(rosetctl) call printed on stdout.
  returned: when a C(rosetctl) call failed
  type: str
  sample: ''
stderr:
  description: What the failed C(rosetctl) call printed on stderr (its message starts C(rosetctl:)).
  returned: when a C(rosetctl) call failed
  type: str
  sample: 'rosetctl: volume "web1" is not connected on this node; connect it to see its usage'
'''

import json
import os
import re
import shutil
import stat
import tempfile
from fractions import Fraction

from ansible.module_utils.basic import AnsibleModule

# What each exit code means: docs/reference/exit-codes.md of rosetctl.
EXIT_MEANINGS = {
    1: 'operation failed',
    2: 'bad usage or input',
    3: 'not found',
    4: 'exists with other properties',
    5: 'wrong state (in use, or not connected)',
    6: 'busy or unavailable, retry',
    7: 'not permitted',
    8: 'out of space or over a limit',
    9: 'not implemented in this rosetctl release',
    10: 'timed out',
}
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4

DEFAULT_STATE_DIR = '/var/lib/rosetctl'
DEFAULT_CONFIG = '/etc/rosetctl/config.toml'

VOLUME_STATES = ('present', 'absent', 'connected', 'disconnected', 'extended', 'stats')
SNAPSHOT_STATES = ('present', 'absent', 'restored')

# Units exactly as rosetctl reads them (src/core/size.cc): binary first, then decimal.
SIZE_UNITS = (
    ('Ki', 1024), ('Mi', 1024 ** 2), ('Gi', 1024 ** 3), ('Ti', 1024 ** 4), ('Pi', 1024 ** 5),
    ('Ei', 1024 ** 6), ('k', 1000), ('K', 1000), ('M', 1000 ** 2), ('G', 1000 ** 3),
    ('T', 1000 ** 4), ('P', 1000 ** 5), ('E', 1000 ** 6),
)
MAX_BYTES = 2 ** 63 - 1
NUMBER = re.compile(r'^(\d+(\.\d*)?|\.\d+)$')


# The options, as DOCUMENTATION describes them (tests/integration/test_ansible.py compares the two).
ARGUMENT_SPEC = dict(
    resource=dict(type='str', default='volume', choices=['volume', 'snapshot']),
    state=dict(type='str', default='present',
               choices=['present', 'absent', 'connected', 'disconnected', 'extended',
                        'stats', 'restored']),
    name=dict(type='str'),
    volume=dict(type='str'),
    size=dict(type='raw'),
    provider=dict(type='str'),
    parameters=dict(type='dict'),
    mutable_parameters=dict(type='dict'),
    target=dict(type='path'),
    read_only=dict(type='bool', default=False),
    from_snapshot=dict(type='str'),
    message=dict(type='str'),
    secrets=dict(type='dict', no_log=True),
    binary=dict(type='path'),
    config=dict(type='path'),
    state_dir=dict(type='path'),
    node_id=dict(type='str'),
)


class TaskFailed(Exception):
    """Ends the task with `msg` and extra result keys; never carries a traceback."""

    def __init__(self, msg, **result):
        super(TaskFailed, self).__init__(msg)
        self.msg = msg
        self.result = result


def size_to_bytes(value):
    """Module size -> bytes. A bare number means GiB; a unit is read as rosetctl reads it."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TaskFailed('size must be a number of GiB or a string like 10Gi, got %r' % (value,))
    text = str(value).strip()
    shown = text[:64]
    if text.startswith('-'):
        raise TaskFailed('size %s is negative; give a positive size such as 1 (GiB) or 64Mi' % shown)
    multiplier = 1024 ** 3
    for suffix, unit in SIZE_UNITS:
        if len(text) > len(suffix) and text.endswith(suffix):
            text, multiplier = text[:-len(suffix)], unit
            break
    if not NUMBER.match(text):
        raise TaskFailed('size %r is not a size; write a number of GiB (1, 1.5) or a number with '
                         'a unit (64Mi, 10Gi, 1.5Ti, 500M)' % shown)
    exact = Fraction(text) * multiplier
    whole = -(-exact.numerator // exact.denominator)  # round up to a byte, as rosetctl does
    if whole <= 0:
        raise TaskFailed('size %s is zero; give a positive size' % shown)
    if whole > MAX_BYTES:
        raise TaskFailed('size %s is too large (the limit is 8Ei)' % shown)
    return whole


def format_size(size):
    """Bytes as rosetctl prints them (core/size.cc): the shortest form exact to two decimals,
    binary or decimal (largest unit first, binary on a tie), else plain bytes."""
    if size is None:
        return None
    best = None
    order = list(reversed(SIZE_UNITS[:6])) + [u for u in reversed(SIZE_UNITS[6:]) if u[0] != 'K']
    for suffix, unit in order:
        if size < unit or (size * 100) % unit:
            continue
        hundredths = size * 100 // unit
        if hundredths % 100 == 0:
            text = '%d%s' % (hundredths // 100, suffix)
        elif hundredths % 10 == 0:
            text = '%d.%d%s' % (hundredths // 100, hundredths % 100 // 10, suffix)
        else:
            text = '%d.%02d%s' % (hundredths // 100, hundredths % 100, suffix)
        if best is None or len(text) < len(best):
            best = text
    return best if best is not None else str(size)


def canonical_target(target):
    """The mount path as rosetctl records it: parent resolved through symlinks, leaf kept."""
    if target is None:
        return None
    trimmed = target.rstrip('/') or '/'
    if not os.path.isabs(trimmed):
        raise TaskFailed('target %r must be an absolute path' % target)
    parent, leaf = os.path.split(trimmed)
    if leaf in ('', '.', '..'):
        return os.path.realpath(trimmed)
    return os.path.join(os.path.realpath(parent), leaf)


def simple_toml_string(path, key):
    """The string value of a top-level `key = "..."` in a TOML file, or None.

    Only used to find the state directory in check mode; rosetctl itself reads the file.
    """
    try:
        with open(path, 'rb') as handle:
            data = handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None
    try:
        import tomllib  # Python 3.11+
        value = tomllib.loads(data).get(key)
        return value if isinstance(value, str) else None
    except ImportError:
        pass
    except ValueError:
        return None
    for line in data.splitlines():
        line = line.strip()
        if line.startswith('['):
            return None  # past the top-level table
        match = re.match(r'^%s\s*=\s*(["\'])(.*)\1\s*(#.*)?$' % re.escape(key), line)
        if match:
            return match.group(2)
    return None


class Rosetctl(object):
    """Runs `rosetctl GLOBALS --output json VERB...` and returns its JSON, or raises TaskFailed."""

    def __init__(self, module):
        self.module = module
        params = module.params
        self.binary = None  # found on first use: check mode on a fresh host runs nothing
        self.config = params['config']
        self.globals = []
        for flag, key in (('--config', 'config'), ('--state-dir', 'state_dir'),
                          ('--provider', 'provider'), ('--node-id', 'node_id')):
            if params[key]:
                self.globals += [flag, params[key]]
        self.secrets = params['secrets'] or None

    def _find_binary(self, binary):
        if binary and '/' in binary:
            if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
                raise TaskFailed('rosetctl binary %s is missing or not executable; apply the '
                                 'storage role or set binary' % binary)
            return binary
        found = self.module.get_bin_path(binary or 'rosetctl', required=False,
                                         opt_dirs=['/usr/local/bin', '/usr/local/sbin'])
        if not found:
            raise TaskFailed('rosetctl was not found on PATH or in /usr/local/bin; install it '
                             '(the storage role can) or set binary')
        return found

    def state_dir(self):
        """The state directory rosetctl will use, resolved as rosetctl resolves it."""
        params = self.module.params
        if params['state_dir']:
            return params['state_dir']
        if os.environ.get('ROSETCTL_STATE_DIR'):
            return os.environ['ROSETCTL_STATE_DIR']
        config = self.config or os.environ.get('ROSETCTL_CONFIG') or DEFAULT_CONFIG
        return simple_toml_string(config, 'state-dir') or DEFAULT_STATE_DIR

    def run(self, args, missing_ok=False):
        if self.binary is None:
            self.binary = self._find_binary(self.module.params['binary'])
        argv = [self.binary] + self.globals + ['--output', 'json'] + list(args)
        environ = {'ROSETCTL_OUTPUT': 'json'}
        private_dir = None
        try:
            if self.secrets:
                private_dir = tempfile.mkdtemp(prefix='rosetctl-ansible-')  # mode 0700
                secrets_file = os.path.join(private_dir, 'secrets.json')
                fd = os.open(secrets_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, 'w') as handle:
                    json.dump(self.secrets, handle)
                environ['ROSETCTL_SECRETS_FILE'] = secrets_file
            rc, out, err = self.module.run_command(argv, environ_update=environ, check_rc=False)
        finally:
            if private_dir:
                shutil.rmtree(private_dir, ignore_errors=True)
        if rc == EXIT_NOT_FOUND and missing_ok:
            return None
        if rc != 0:
            raise TaskFailed(self.failure_message(args, rc, err), rc=rc, cmd=argv,
                             stdout=out, stderr=err)
        try:
            return json.loads(out)
        except ValueError:
            raise TaskFailed('rosetctl %s printed something that is not JSON: %r'
                             % (' '.join(args[:2]), out[:200]), rc=rc, cmd=argv, stdout=out,
                             stderr=err)

    @staticmethod
    def failure_message(args, rc, err):
        lines = [line for line in err.strip().splitlines()
                 if line.strip() and not line.startswith('Run with --help')]
        text = '; '.join(line[len('rosetctl: '):] if line.startswith('rosetctl: ') else line
                         for line in lines) or 'no message'
        return '%s (rosetctl %s exited %d: %s)' % (
            text, ' '.join(args[:2]), rc, EXIT_MEANINGS.get(rc, 'unknown exit code'))

    # Volumes.
    def show(self, name):
        return self.run(['volume', 'show', name], missing_ok=True)

    def create(self, name, size, parameters, from_snapshot):
        args = ['volume', 'create', name]
        if size is not None:
            args += ['--size', str(size)]
        args += param_args(parameters)
        if from_snapshot:
            args += ['--from-snapshot', from_snapshot]
        return self.run(args)

    def modify(self, volume_id, changes):
        return self.run(['volume', 'modify', volume_id] + param_args(changes))

    # Snapshots: commit VOL [--name N] -m MSG, list (a JSON array), restore ID --name N, delete ID.
    def snapshots(self):
        return self.run(['snapshot', 'list']) or []


def param_args(parameters):
    """--param KEY=VALUE for each entry, in key order (rosetctl's way to pass parameters)."""
    args = []
    for key in sorted(parameters):
        args += ['--param', '%s=%s' % (key, parameters[key])]
    return args


def checked_parameters(option, parameters):
    """The option's dict with string values; keys that cannot travel as KEY=VALUE fail the task."""
    parameters = parameters or {}
    for key in parameters:
        if not key or '=' in key:
            raise TaskFailed('%s key %r must be non-empty and contain no "="' % (option, key))
    # YAML turns true into a boolean: rosetctl's values are strings ("true", not "True").
    return {key: str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in parameters.items()}


def volume_view(volume):
    """The return values for a volume."""
    return dict(
        id=volume.get('id'),
        name=volume.get('name'),
        size=volume.get('size'),
        capacity_bytes=volume.get('capacity_bytes'),
        provider=volume.get('provider'),
        connections=volume.get('connections', []),
        volume=volume,
    )


def volume_diff_state(name, volume):
    if volume is None:
        return {'name': name, 'state': 'absent'}
    return {
        'name': volume.get('name', name),
        'state': 'present',
        'id': volume.get('id'),
        'size': volume.get('size'),
        'connected_at': sorted(c.get('target') for c in volume.get('connections', [])),
    }


def path_type(path):
    try:
        return 'block' if stat.S_ISBLK(os.stat(path).st_mode) else 'filesystem'
    except OSError:
        return 'filesystem'


def snapshot_id(snapshot):
    return snapshot.get('id')


def snapshot_source(snapshot):
    """The id and name of the volume the snapshot was taken of."""
    return [snapshot.get(key) for key in ('volume_id', 'volume_name') if snapshot.get(key)]


def snapshot_view(snapshot):
    return dict(snapshot_id=snapshot_id(snapshot), id=snapshot_id(snapshot),
                name=snapshot.get('name') or snapshot.get('message'), snapshot=snapshot)


def snapshot_diff_state(name, snapshot):
    if snapshot is None:
        return {'snapshot': name, 'state': 'absent'}
    return {'snapshot': snapshot_id(snapshot), 'name': snapshot.get('name') or snapshot.get('message'),
            'state': 'present', 'volume': (snapshot_source(snapshot) or [None])[0]}


class Storage(object):
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.check_mode = module.check_mode
        self.cli = Rosetctl(module)
        self.warnings = []
        # rosetctl refuses a configuration file it is told to read that does not exist, so check
        # mode before the role has written it queries nothing: no volume or snapshot exists yet.
        config = self.cli.config
        self.fresh_host = self.check_mode and config is not None and not os.path.exists(config)

    # Queries that stay read-only even on a fresh host.
    def show(self, name):
        if self.fresh_host:
            return None
        return self.cli.show(name)

    def snapshots(self):
        if self.fresh_host:
            return []
        return self.cli.snapshots()

    def default_target(self, name):
        """Where `volume connect` mounts without --target: <state dir>/mnt/<name>."""
        config = self.cli.config
        if config is not None and not os.path.exists(config):
            return '<state dir>/mnt/%s' % name  # the configuration naming it is not written yet
        return os.path.join(self.cli.state_dir(), 'mnt', name)

    def done(self, changed, msg, before=None, after=None, **result):
        result.update(changed=changed, msg=msg)
        # The documented return values are always there (null when unknown, e.g. in check mode),
        # so `{{ vol.id }}` renders instead of failing on a missing key.
        for key in ('id', 'name', 'size', 'path', 'type', 'snapshot_id'):
            result.setdefault(key, None)
        if result['path'] and not result['type']:
            result['type'] = path_type(result['path'])
        if self.module._diff and before is not None:
            result['diff'] = dict(before=before, after=after if changed else before)
        if self.warnings:
            result['warnings'] = self.warnings
        return result

    # ------------------------------------------------------------------ volumes
    def volume(self):
        name = self.params['name']
        if not name:
            raise TaskFailed('name is required: the storage action plugin derives it from the '
                             'inventory hostname, so give it when calling the module directly')
        refuse_option_like(name, 'name')
        state = self.params['state']
        return getattr(self, 'volume_' + state)(name)

    def volume_present(self, name):
        wanted = size_to_bytes(self.params['size'])
        parameters = checked_parameters('parameters', self.params['parameters'])
        mutable = checked_parameters('mutable_parameters', self.params['mutable_parameters'])
        from_snapshot = self.params['from_snapshot']
        if from_snapshot:
            refuse_option_like(from_snapshot, 'from_snapshot')
        before = self.show(name)
        if before is not None:
            current = before.get('capacity_bytes')
            if wanted is not None and (current is None or wanted > current):
                raise TaskFailed(size_mismatch_message(name, current, wanted), **volume_view(before))
            if not self.check_mode:
                # The size is settled above: at least what was asked (a volume grown later by
                # state=extended stays "present"). Creating the name again with the size it has
                # (image volumes need one) makes rosetctl, the one place that decides
                # compatibility, check the parameters: it answers with the existing volume, or
                # exit 4 when they differ.
                self.cli.create(name, current or None, parameters, from_snapshot)
            return self.volume_modified(name, before, mutable)
        diff_before = volume_diff_state(name, None)
        if self.check_mode:
            after = {'name': name, 'state': 'present', 'size': format_size(wanted), 'connected_at': []}
            if mutable:
                after['mutable_parameters'] = mutable
            return self.done(True, 'would create volume "%s"' % name, diff_before, after,
                             name=name, size=format_size(wanted), capacity_bytes=wanted)
        created = self.cli.create(name, wanted, parameters, from_snapshot)
        if mutable:
            # Set by a modify rather than passed as creation parameters, which every later
            # run's create of the name would then have to repeat to count as the same volume.
            created = self.cli.modify(created['id'], mutable)
        result = volume_view(created)
        if from_snapshot:
            result['snapshot_id'] = from_snapshot
        return self.done(True, 'created volume "%s" (%s)' % (name, created.get('id')), diff_before,
                         volume_diff_state(name, created), **result)

    def volume_modified(self, name, before, mutable):
        """state=present of an existing volume: the mutable parameters given that differ change."""
        current = before.get('mutable_parameters') or {}
        changes = {key: value for key, value in mutable.items() if current.get(key) != value}
        if not changes:
            return self.done(False, 'volume "%s" exists' % name, **volume_view(before))
        diff_before = dict(volume_diff_state(name, before), mutable_parameters=current)
        diff_after = dict(diff_before, mutable_parameters=dict(current, **changes))
        listed = ', '.join('%s=%s' % (key, changes[key]) for key in sorted(changes))
        if self.check_mode:
            return self.done(True, 'would set %s on volume "%s"' % (listed, name), diff_before,
                             diff_after, **volume_view(before))
        after = self.cli.modify(before['id'], changes)
        return self.done(True, 'set %s on volume "%s"' % (listed, name), diff_before,
                         dict(volume_diff_state(name, after),
                              mutable_parameters=after.get('mutable_parameters') or {}),
                         **volume_view(after))

    def volume_absent(self, name):
        before = self.show(name)
        if before is None:
            return self.done(False, 'volume "%s" does not exist' % name, name=name)
        diff_before = volume_diff_state(name, before)
        after = volume_diff_state(name, None)
        if self.check_mode:
            if before.get('connections') or before.get('published_nodes'):
                self.warnings.append('volume "%s" is connected or mapped (%s); rosetctl will refuse '
                                     'to delete it until it is disconnected'
                                     % (name, ', '.join(c['target'] for c in before.get('connections', []))
                                        or ', '.join(before.get('published_nodes', []))))
            return self.done(True, 'would delete volume "%s"' % name, diff_before, after,
                             **volume_view(before))
        self.cli.run(['volume', 'delete', before['id']])
        result = volume_view(before)
        result['connections'] = []
        return self.done(True, 'deleted volume "%s" (%s)' % (name, before['id']), diff_before,
                         after, **result)

    def volume_connected(self, name):
        target = canonical_target(self.params['target'])
        read_only = self.params['read_only']
        before = self.show(name)
        if before is None:
            if self.check_mode:
                path = target or self.default_target(name)
                return self.done(True, 'would connect volume "%s" at %s (it does not exist yet; an '
                                 'earlier task may create it)' % (name, path), volume_diff_state(name, None),
                                 {'name': name, 'state': 'present', 'connected_at': [path]},
                                 name=name, path=path)
            raise TaskFailed('volume "%s" does not exist; create it first (state: present)' % name,
                             name=name)
        matches = [c for c in before.get('connections', []) if target is None or c.get('target') == target]
        if matches:
            connection = matches[0]
            if bool(connection.get('readonly')) != read_only:
                raise TaskFailed('volume "%s" is connected at %s %s; disconnect it first to connect '
                                 'it %s' % (name, connection['target'],
                                            'read-only' if connection.get('readonly') else 'read-write',
                                            'read-only' if read_only else 'read-write'),
                                 **volume_view(before))
            return self.done(False, 'volume "%s" is connected at %s' % (name, connection['target']),
                             path=connection['target'], type=path_type(connection['target']),
                             **volume_view(before))
        diff_before = volume_diff_state(name, before)
        if self.check_mode:
            path = target or self.default_target(name)
            after = dict(diff_before, connected_at=sorted(diff_before['connected_at'] + [path]))
            return self.done(True, 'would connect volume "%s" at %s' % (name, path), diff_before, after,
                             path=path, **volume_view(before))
        args = ['volume', 'connect', before['id']]
        if target:
            args += ['--target', target]
        if read_only:
            args.append('--read-only')
        connected = self.cli.run(args)
        path = connected.get('path')
        return self.done(True, 'connected volume "%s" at %s' % (name, path), diff_before,
                         volume_diff_state(name, connected), path=path, type=path_type(path),
                         read_only=bool(connected.get('readonly')), **volume_view(connected))

    def volume_disconnected(self, name):
        target = canonical_target(self.params['target'])
        before = self.show(name)
        if before is None:
            return self.done(False, 'volume "%s" does not exist; nothing to disconnect' % name, name=name)
        targets = [c.get('target') for c in before.get('connections', [])
                   if target is None or c.get('target') == target]
        if not targets:
            return self.done(False, 'volume "%s" is not connected%s' % (name, ' at ' + target if target else ''),
                             **volume_view(before))
        diff_before = volume_diff_state(name, before)
        after = dict(diff_before, connected_at=sorted(set(diff_before['connected_at']) - set(targets)))
        if self.check_mode:
            return self.done(True, 'would disconnect volume "%s" from %s' % (name, ', '.join(targets)),
                             diff_before, after, **volume_view(before))
        args = ['volume', 'disconnect', before['id']]
        if target:
            args += ['--target', target]
        self.cli.run(args)
        now = self.cli.show(before['id']) or before
        return self.done(True, 'disconnected volume "%s" from %s' % (name, ', '.join(targets)),
                         diff_before, volume_diff_state(name, now), **volume_view(now))

    def volume_extended(self, name):
        if self.params['size'] is None:
            raise TaskFailed('state: extended needs size (the new size, e.g. 20 for 20 GiB or "20Gi")')
        wanted = size_to_bytes(self.params['size'])
        before = self.show(name)
        if before is None:
            if self.check_mode:
                return self.done(True, 'would grow volume "%s" to %s (it does not exist yet; an '
                                 'earlier task may create it)' % (name, format_size(wanted)),
                                 name=name, capacity_bytes=wanted, size=format_size(wanted))
            raise TaskFailed('volume "%s" does not exist; create it first (state: present)' % name,
                             name=name)
        current = before.get('capacity_bytes')
        if current is not None and current >= wanted:
            return self.done(False, 'volume "%s" is %s, at least %s' % (name, before.get('size'), format_size(wanted)),
                             **volume_view(before))
        diff_before = volume_diff_state(name, before)
        after = dict(diff_before, size=format_size(wanted))
        if self.check_mode:
            result = volume_view(before)
            result.update(size=format_size(wanted), capacity_bytes=wanted)
            return self.done(True, 'would grow volume "%s" to %s' % (name, format_size(wanted)),
                             diff_before, after, **result)
        grown = self.cli.run(['volume', 'expand', before['id'], '--size', str(wanted)])
        return self.done(True, 'grew volume "%s" from %s to %s' % (name, before.get('size'), grown.get('size')),
                         diff_before, volume_diff_state(name, grown), **volume_view(grown))

    def volume_stats(self, name):
        target = canonical_target(self.params['target'])
        before = self.show(name)
        if self.check_mode and (before is None or not before.get('connections')):
            return self.done(False, 'volume "%s" is not connected yet; an earlier task may connect '
                             'it' % name, name=name)
        if before is None:
            raise TaskFailed('volume "%s" does not exist' % name, name=name)
        args = ['volume', 'stats', before['id']]
        if target:
            args += ['--target', target]
        stats = self.cli.run(args)
        stats_only = dict((k, v) for k, v in stats.items() if k not in ('id', 'name', 'path'))
        return self.done(False, 'volume "%s" at %s' % (name, stats.get('path')), path=stats.get('path'),
                         type=path_type(stats.get('path')), stats=stats_only, **volume_view(before))

    # ------------------------------------------------------------------ snapshots
    def snapshot(self):
        state = self.params['state']
        return getattr(self, 'snapshot_' + state)()

    def find_snapshot(self, reference, snapshots, volume=None):
        """Snapshots whose id, or name/message, is `reference` (of `volume` when given)."""
        by_id = [s for s in snapshots if snapshot_id(s) == reference]
        if by_id:
            return by_id
        found = [s for s in snapshots if reference in (s.get('name'), s.get('message'))]
        if volume is not None:
            found = [s for s in found if set(snapshot_source(s)) & set([volume.get('id'), volume.get('name')])]
        return found

    def one_snapshot(self, reference, snapshots, volume=None):
        found = self.find_snapshot(reference, snapshots, volume)
        if len(found) > 1:
            raise TaskFailed('snapshot "%s" is ambiguous: %d snapshots carry that name (%s); use an id'
                             % (reference, len(found), ', '.join(snapshot_id(s) for s in found)))
        return found[0] if found else None

    def snapshot_present(self):
        volume_name = self.params['volume']
        if not volume_name:
            raise TaskFailed('volume is required: the volume to commit')
        refuse_option_like(volume_name, 'volume')
        name = self.params['name']
        volume = self.show(volume_name)
        snapshots = self.snapshots()  # first, so a rosetctl without snapshots fails here
        if volume is None:
            if self.check_mode:
                return self.done(True, 'would commit volume "%s" (it does not exist yet; an earlier '
                                 'task may create it)' % volume_name, name=name)
            raise TaskFailed('volume "%s" does not exist; nothing to commit' % volume_name)
        if name:
            existing = self.one_snapshot(name, snapshots, volume)
            if existing is not None:
                return self.done(False, 'snapshot "%s" of volume "%s" exists' % (name, volume_name),
                                 **snapshot_view(existing))
        before = snapshot_diff_state(name, None)
        if self.check_mode:
            return self.done(True, 'would commit volume "%s"' % volume_name, before,
                             {'name': name, 'state': 'present', 'volume': volume['id']}, name=name)
        message = self.params['message'] or name or 'committed by Ansible'
        args = ['snapshot', 'commit', volume['id'], '-m', message]
        if name:
            args += ['--name', name]
        committed = self.cli.run(args)
        new = snapshot_id(committed) not in set(snapshot_id(s) for s in snapshots)
        return self.done(new, '%s snapshot %s of volume "%s"' % ('committed' if new else 'content unchanged since',
                                                                 snapshot_id(committed), volume_name),
                         before, snapshot_diff_state(name, committed), **snapshot_view(committed))

    def snapshot_absent(self):
        name = self.params['name']
        if not name:
            raise TaskFailed('name is required: the snapshot id (or name) to delete')
        refuse_option_like(name, 'name')
        existing = self.one_snapshot(name, self.snapshots())
        if existing is None:
            return self.done(False, 'snapshot "%s" does not exist' % name, name=name)
        before = snapshot_diff_state(name, existing)
        after = snapshot_diff_state(name, None)
        if self.check_mode:
            return self.done(True, 'would delete snapshot %s' % snapshot_id(existing), before, after,
                             **snapshot_view(existing))
        self.cli.run(['snapshot', 'delete', snapshot_id(existing)])
        return self.done(True, 'deleted snapshot %s' % snapshot_id(existing), before, after,
                         **snapshot_view(existing))

    def snapshot_restored(self):
        name = self.params['name']
        volume_name = self.params['volume']
        if not name or not volume_name:
            raise TaskFailed('state: restored needs name (the snapshot id or name) and volume (the '
                             'new volume)')
        refuse_option_like(name, 'name')
        refuse_option_like(volume_name, 'volume')
        snapshots = self.snapshots()
        existing = self.one_snapshot(name, snapshots)
        volume = self.show(volume_name)
        if volume is not None:
            result = volume_view(volume)
            result['snapshot_id'] = snapshot_id(existing) if existing else name
            return self.done(False, 'volume "%s" exists' % volume_name, **result)
        if existing is None:
            raise TaskFailed('snapshot "%s" does not exist' % name, name=name)
        before = volume_diff_state(volume_name, None)
        if self.check_mode:
            return self.done(True, 'would restore snapshot %s to new volume "%s"'
                             % (snapshot_id(existing), volume_name), before,
                             {'name': volume_name, 'state': 'present', 'from_snapshot': snapshot_id(existing)},
                             name=volume_name, snapshot_id=snapshot_id(existing))
        restored = self.cli.run(['snapshot', 'restore', snapshot_id(existing), '--name', volume_name])
        result = volume_view(restored)
        result['snapshot_id'] = snapshot_id(existing)
        return self.done(True, 'restored snapshot %s to volume "%s" (%s)'
                         % (snapshot_id(existing), volume_name, restored.get('id')), before,
                         volume_diff_state(volume_name, restored), **result)


def refuse_option_like(value, what):
    """A value starting with "-" would be read as a flag; rosetctl names never start so."""
    if value.startswith('-'):
        raise TaskFailed('%s "%s" must start with a letter or digit' % (what, value))


def size_mismatch_message(name, current, wanted):
    if current is None:
        return ('volume "%s" exists without a recorded size; state: present does not change it '
                '(asked for %s)' % (name, format_size(wanted)))
    return ('volume "%s" exists with size %s, not %s; state: present does not resize. To grow '
            'it, use state: extended with size: %s' % (name, format_size(current),
                                                      format_size(wanted), format_size(wanted)))


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    resource, state = module.params['resource'], module.params['state']
    allowed = VOLUME_STATES if resource == 'volume' else SNAPSHOT_STATES
    if state not in allowed:
        hint = ''
        if state == 'restored':
            hint = '; to create a volume from a snapshot use resource: volume, state: present, from_snapshot: ID'
        module.fail_json(msg='state %s does not apply to %ss; a %s takes %s%s'
                         % (state, resource, resource, ', '.join(allowed), hint))
    try:
        storage = Storage(module)
        result = storage.volume() if resource == 'volume' else storage.snapshot()
    except TaskFailed as failure:
        module.fail_json(msg=failure.msg, **failure.result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
