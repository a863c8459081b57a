"""`rosetctl doctor`: checks of a real host (mounts, loop devices, certificates) and --fix."""
from __future__ import annotations

import errno
import fcntl
import os
import signal

from roset_fixtures import fuse_processes_under  # noqa: F401  (the roset fixture's helpers)
from rosetctl_loops import detach, loop_devices_of

LOOP_CTL_GET_FREE = 0x4C82
LOOP_SET_FD = 0x4C00

CHECKS = ["config-file", "state-database", "mounts", "loop-devices", "fuse-clients", "iscsi-sessions", "providers",
          "certificates", "free-space", "commit-store"]


def doctor(cli, *args, **kwargs):
    """(exit code, rows by check name)."""
    result = cli.run("doctor", *args, "-o", "json", **kwargs)
    rows = result.json()
    return result.rc, {row["name"]: row for row in rows}, result


def is_dead(path) -> bool:
    try:
        os.stat(path)
        return False
    except OSError as e:
        return e.errno in (107, 116, 5)  # ENOTCONN, ESTALE, EIO


def attach_loop(path) -> str:
    """Attaches `path` to a free loop device the way losetup does (LOOP_SET_FD); returns it.
    LOOP_CTL_GET_FREE hands the same device to racing callers (a test beside this one attaching
    too): the loser sees EBUSY and asks again, as losetup and rosetctl do."""
    for _ in range(20):
        with open("/dev/loop-control", "rb") as control:
            number = fcntl.ioctl(control, LOOP_CTL_GET_FREE)
        device = f"/dev/loop{number}"
        with open(path, "r+b") as backing, open(device, "r+b") as loop:
            try:
                fcntl.ioctl(loop, LOOP_SET_FD, backing.fileno())
            except OSError as e:
                if e.errno == errno.EBUSY:
                    continue
                raise
        return device
    raise AssertionError(f"no free loop device for {path} after 20 tries (each taken by someone else first)")


def test_doctor_says_which_configuration_file_it_read(cli, workdir):
    # Issue 32: a stray config file silently changed a host's defaults; nothing said it was read.
    config = workdir / "config.toml"
    config.write_text('provider = "local"\n')
    rc, rows, result = doctor(cli, "--config", str(config))
    assert rc == 0, result.describe()
    assert rows["config-file"]["message"] == f'configuration file "{config}" read', rows["config-file"]
    missing = workdir / "absent.toml"
    rc, rows, result = doctor(cli, env={**cli.env, "ROSETCTL_CONFIG": str(missing)})
    assert rc == 0 and f'"{missing}" does not exist' in rows["config-file"]["message"], rows


def test_clean_host_is_all_ok(cli):
    rc, rows, result = doctor(cli)
    assert rc == 0, f"expected a clean host to pass: {result.describe()}"
    assert list(rows) == CHECKS, f"expected every check in order, got {list(rows)}"
    assert all(row["status"] == "ok" for row in rows.values()), rows
    table = cli.run("doctor")
    assert table.rc == 0 and "CHECK" in table.stdout and "state-database" in table.stdout, table.describe()


def test_killed_fuse_client_is_named_then_fixed(cli, roset, workdir):
    cli.create("vol")
    target = workdir / "target"
    cli.connect("vol", target)
    (target / "kept").write_text("1")
    [pid] = roset.fuse_pids()
    os.kill(pid, signal.SIGKILL)
    deadline = 50
    while not is_dead(target) and deadline:
        os.sched_yield()
        deadline -= 1
        import time
        time.sleep(0.1)
    assert is_dead(target), "expected the target to die with its FUSE process"

    rc, rows, result = doctor(cli)
    assert rc == 1, f"expected doctor to fail on a dead mount: {result.describe()}"
    assert rows["mounts"]["status"] == "fail" and str(target) in rows["mounts"]["message"], rows["mounts"]
    assert "--fix" in rows["mounts"]["message"], rows["mounts"]

    rc, rows, result = doctor(cli, "--fix")
    assert rc == 0, f"expected --fix to repair the dead mount: {result.describe()}"
    assert rows["mounts"]["status"] == "ok", rows["mounts"]
    assert rows["mounts"]["repaired"].startswith("repaired:") and str(target) in rows["mounts"]["repaired"], rows
    assert (target / "kept").read_text() == "1", "expected the target to answer again with its data"
    [new_pid] = roset.fuse_pids()
    assert new_pid != pid

    rc, rows, result = doctor(cli)
    assert rc == 0 and all(row["status"] == "ok" for row in rows.values()), result.describe()


def test_unknown_loop_device_under_the_state_dir_is_named(cli, state_dir):
    assert doctor(cli)[0] == 0  # makes the state directory
    stray = state_dir / "stray.img"
    with open(stray, "wb") as f:
        f.truncate(8 * 2**20)
    device = attach_loop(stray)
    try:
        rc, rows, result = doctor(cli)
        assert rc == 1, f"expected an unknown loop device to fail the check: {result.describe()}"
        row = rows["loop-devices"]
        assert row["status"] == "fail" and device in row["message"] and str(stray) in row["message"], row
        # --fix does not detach what no record knows: someone may be using it.
        rc, rows, _ = doctor(cli, "--fix")
        assert rc == 1 and device in rows["loop-devices"]["message"], rows["loop-devices"]
        assert loop_devices_of(stray), "expected --fix to leave an unknown loop device attached"
    finally:
        detach(device)


def test_expiring_certificate_warns(cli, workdir):
    tls_dir = workdir / "tls"
    cli.ok("tls", "init", "--dir", str(tls_dir), "--name", "ctl", with_state_dir=False)
    cli.ok("tls", "issue", "node-a", "--dir", str(tls_dir), "--days", "5", with_state_dir=False)
    rc, rows, result = doctor(cli, "--tls-cert", str(tls_dir / "node-a.crt"), "--tls-key",
                              str(tls_dir / "node-a.key"), "--tls-ca", str(tls_dir / "ca.crt"))
    assert rc == 0, f"expected warnings alone to exit 0: {result.describe()}"
    row = rows["certificates"]
    assert row["status"] == "warn" and "node-a.crt" in row["message"] and "expires" in row["message"], row
    assert "ca.crt" not in row["message"], f"expected the CA (10 years) not to be named: {row}"
