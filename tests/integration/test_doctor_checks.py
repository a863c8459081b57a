"""`rosetctl doctor`: each check seen failing (or warning) on a host put in the state it names,
with its exact row, and each `--fix` action seen undoing that state (issue 36). The clean host,
a dead FUSE mount, a stray loop device and an expiring certificate are in test_doctor.py."""
from __future__ import annotations

import os
import re
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

from controller_site import expired_certificate
from rosetctl_loops import detach, loop_devices_of
from rosetctl_mounts import detach as unmount_lazily
from rosetctl_mounts import is_mount_point
from test_doctor import CHECKS, attach_loop, doctor
from test_iscsi_provider import provider_flags

MiB = 2**20


def only_failing(rows: dict, *names: str) -> None:
    """Every row but NAMES is ok: the state made changed that check and no other."""
    others = {name: row for name, row in rows.items() if name not in names and row["status"] != "ok"}
    assert not others, f"expected only {names} to change, also: {others}"


# ---------------------------------------------------------------- state-database

def damage_name_index(db: Path, name: str, other: str) -> None:
    """Rewrites volume NAME's key in the volumes' name index as OTHER (same length): the table
    still says NAME, so the index is out of order and misses a row, as after a torn write."""
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = connection.execute("PRAGMA page_size").fetchone()[0]
        pages = [row[0] for row in connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'volumes'")]
    data = bytearray(db.read_bytes())
    for page in pages:
        at = data.find(name.encode(), (page - 1) * size, page * size)
        if at >= 0:
            data[at:at + len(other)] = other.encode()
            db.write_bytes(bytes(data))
            return
    raise AssertionError(f"no index page of {db} holds {name!r}")


def test_a_damaged_state_database_fails_its_check_with_sqlites_findings(cli, state_dir):
    for name in ("vol-a", "vol-b", "vol-c"):
        cli.create(name)
    db = state_dir / "state.db"
    damage_name_index(db, "vol-b", "vol-z")
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        findings = [row[0] for row in connection.execute("PRAGMA integrity_check")]
    assert findings != ["ok"], findings

    rc, rows, result = doctor(cli)
    assert rc == 1, result.describe()
    assert rows["state-database"] == {
        "name": "state-database", "status": "fail",
        "message": f'"{db}" is damaged ({"; ".join(findings[:3])}); stop rosetctl and restore it, with its '
                   f'-wal file, from a backup'}, rows["state-database"]


# ---------------------------------------------------------------- fuse-clients, and --fix stops it

def children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry))
    return found


def test_a_roset_fuse_no_record_knows_is_named_and_fix_stops_it(cli, roset, workdir):
    cli.create("vol")
    cli.connect("vol", workdir / "target")
    [record] = roset.records()
    pid = record["pid"]
    # The record is lost (as by a crash between starting the client and writing it down).
    Path(record["dir"], "record.json").unlink()

    rc, rows, result = doctor(cli)
    assert rc == 1, result.describe()
    assert rows["fuse-clients"]["status"] == "fail", rows["fuse-clients"]
    # The client and its own helpers (the stand-in runs bindfs), each on a line of its own.
    named = [int(n) for n in re.findall(r"roset-fuse pid (\d+) serves", rows["fuse-clients"]["message"])]
    assert pid in named and set(named) <= {pid, *children(pid)}, (pid, rows["fuse-clients"])
    assert rows["fuse-clients"]["message"].startswith(
        f"roset-fuse pid {pid} serves a mount under the state directory that no record knows; "
        "`rosetctl doctor --fix` stops it"), rows["fuse-clients"]
    only_failing(rows, "fuse-clients")

    rc, rows, result = doctor(cli, "--fix")
    assert rows["fuse-clients"]["status"] == "ok", result.describe()
    assert rows["fuse-clients"]["repaired"].startswith("repaired: roset-fuse pid"), rows["fuse-clients"]
    assert not os.path.exists(f"/proc/{pid}") or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", (
        f"expected roset-fuse pid {pid} stopped by --fix")


# ---------------------------------------------------------------- providers

def test_iscsi_volumes_whose_tgtd_is_down_fail_the_providers_check(cli, tgtd):
    flags = provider_flags(tgtd)
    cli.ok(*flags, "volume", "create", "data", "--size", "16Mi")
    rc, rows, result = doctor(cli, *flags)
    assert rc == 0 and rows["providers"]["status"] == "ok", result.describe()

    tgtd.kill()
    rc, rows, result = doctor(cli, *flags)
    assert rc == 1, result.describe()
    row = rows["providers"]
    assert row["status"] == "fail" and row["message"].startswith('provider "iscsi": '), row
    assert "127.0.0.1" in row["message"] or "tgtd" in row["message"], row
    only_failing(rows, "providers")


# ---------------------------------------------------------------- free-space

def test_images_promised_more_than_the_filesystem_has_fail_free_space(cli, workdir):
    backing, mount_point = workdir / "small.img", workdir / "small"
    with open(backing, "wb") as out:
        out.truncate(64 * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(backing)], check=True, capture_output=True)
    mount_point.mkdir()
    subprocess.run(["mount", "-o", "loop", str(backing), str(mount_point)], check=True)
    cli.state_dir = mount_point / "state"
    cli.create("fits", "--type", "image", "--size", "16Mi")
    rc, rows, result = doctor(cli)
    assert rc == 0 and rows["free-space"]["status"] == "ok", result.describe()

    cli.ok("--capacity-overcommit", "volume", "create", "big", "--type", "image", "--size", "96Mi")
    rc, rows, result = doctor(cli)
    assert rc == 1, result.describe()
    images = cli.state_dir / "images"
    promised = sum(max(0, p.stat().st_size - p.stat().st_blocks * 512) for p in images.glob("*.img"))
    fs = os.statvfs(images)
    row = rows["free-space"]
    assert row["status"] == "fail" and row["message"].startswith(
        f'image volumes in "{images}" may still write {promised} bytes but only '), (row, promised)
    free = int(row["message"].split(" but only ")[1].split()[0])
    assert abs(free - fs.f_bavail * fs.f_frsize) <= MiB, (row, fs.f_bavail * fs.f_frsize)
    only_failing(rows, "free-space")


# ---------------------------------------------------------------- commit-store

def test_a_damaged_blob_fails_the_commit_store_check(cli, workdir, state_dir):
    cli.create("d")
    cli.connect("d", workdir / "d")
    (workdir / "d" / "file").write_bytes(b"x" * 5000)
    cli.ok("snapshot", "commit", "d")
    rc, rows, result = doctor(cli)
    assert rc == 0 and rows["commit-store"]["message"] == "1 snapshot(s) verified", result.describe()

    blob = next(p for p in (state_dir / "store" / "blobs").rglob("*") if p.is_file() and p.stat().st_size == 5000)
    os.chmod(blob, 0o644)
    blob.write_bytes(b"y" + b"x" * 4999)
    rc, rows, result = doctor(cli)
    assert rc == 1, result.describe()
    row = rows["commit-store"]
    assert row["status"] == "fail" and blob.name in row["message"], row
    assert row["message"].endswith("(`rosetctl snapshot verify` lists the snapshots it damages)"), row
    only_failing(rows, "commit-store")


# ---------------------------------------------------------------- certificates

def test_expired_and_missing_certificates_fail(cli, workdir):
    tls_dir = workdir / "tls"
    cli.ok("tls", "init", "--dir", str(tls_dir), "--name", "ctl", with_state_dir=False)
    cert, key = expired_certificate(tls_dir, "node-a", workdir / "expired")
    rc, rows, result = doctor(cli, "--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(tls_dir / "ca.crt"))
    assert rc == 1, result.describe()
    row = rows["certificates"]
    assert row["status"] == "fail" and row["message"].startswith(f'certificate "{cert}" expired at '), row
    assert "ca.crt" not in row["message"], row

    missing = workdir / "nowhere" / "node.crt"
    rc, rows, result = doctor(cli, "--tls-cert", str(missing), "--tls-key", str(key),
                              "--tls-ca", str(tls_dir / "ca.crt"))
    assert rc == 1, result.describe()
    row = rows["certificates"]
    assert row == {"name": "certificates", "status": "fail",
                   "message": f'cannot open certificate "{missing}": No such file or directory'}, row
    only_failing(rows, "certificates")


# ---------------------------------------------------------------- a staging with nothing mounted, and --fix

def test_a_staging_with_nothing_mounted_warns_and_fix_forgets_it(cli, workdir):
    volume = cli.create("d")
    target = workdir / "d"
    cli.connect("d", target)
    [staging] = [s["path"] for s in cli.volume("d")["stagings"]]
    unmount_lazily(str(target))
    unmount_lazily(staging)
    assert not is_mount_point(staging)

    rc, rows, result = doctor(cli)
    assert rc == 0, f"expected a warning alone to exit 0: {result.describe()}"
    assert rows["mounts"]["status"] == "warn", rows["mounts"]
    assert rows["mounts"]["message"] == (
        f'volume "{volume["id"]}" is recorded as staged at "{staging}" with nothing mounted there; '
        "`rosetctl doctor --fix` forgets that staging"), rows["mounts"]
    only_failing(rows, "mounts")

    rc, rows, result = doctor(cli, "--fix")
    assert rc == 0 and rows["mounts"]["status"] == "ok", result.describe()
    assert rows["mounts"]["repaired"].startswith("repaired: "), rows["mounts"]
    assert staging in rows["mounts"]["repaired"], rows["mounts"]
    assert cli.volume("d")["stagings"] == [], "expected --fix to forget the staging"
    assert rows["mounts"]["message"] == "0 staging(s) recorded, every mount answers", rows["mounts"]


# ---------------------------------------------------------------- --fix detaches an image's unused loop device

def test_fix_detaches_a_loop_device_no_staging_uses(cli, state_dir):
    volume = cli.create("img", "--type", "image", "--size", "16Mi")
    image = state_dir / "images" / f"{volume['id']}.img"
    device = attach_loop(image)  # as an interrupted stage would leave it
    try:
        rc, rows, result = doctor(cli)
        assert rc == 1, result.describe()
        assert rows["loop-devices"]["message"] == (
            f"{device} backs volume \"img\"'s image, and no staging or mount uses it (an interrupted "
            "stage); `rosetctl doctor --fix` detaches it"), rows["loop-devices"]
        only_failing(rows, "loop-devices")

        rc, rows, result = doctor(cli, "--fix")
        assert rc == 0 and rows["loop-devices"]["status"] == "ok", result.describe()
        assert device in rows["loop-devices"]["repaired"], rows["loop-devices"]
        assert loop_devices_of(image) == [], f"expected --fix to detach {device}"
    finally:
        detach(device)


def test_every_check_is_in_every_report(cli):
    _, rows, _ = doctor(cli)
    assert list(rows) == CHECKS
