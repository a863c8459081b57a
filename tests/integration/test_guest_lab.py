"""The guest lab (guest_lab.py): a QEMU guest is a real consumer host. Its open-iscsi logs into
a tgtd on this host (exported by the target backend, src/providers/iscsi) at 10.0.2.2, finds the
disk by the serial the backend set, formats, mounts and writes it; an initiator the target does
not admit is refused, an unbound initiator's session is ended, and a LUN resized under a mounted
filesystem grows in the guest."""
from __future__ import annotations

import os
import subprocess

from guest_lab import HOST_ADDRESS
from tgtd_lab import INITIATOR_B, IQN_PREFIX, tool_path, wait_until

MiB = 1024 * 1024

# Shell for the guest: log in to the portal we were given (not discovery's answer, which names
# 127.0.0.1 as tgtd sees it), then find the disk whose serial is the volume id in /sys (no udev).
LOGIN = r"""
set -e
iscsiadm -m node -o new -T "$IQN" -p "$PORTAL" > /dev/null
iscsiadm -m node -T "$IQN" -p "$PORTAL" -o update -n node.startup -v manual
iscsiadm -m node -T "$IQN" -p "$PORTAL" --login
DEV=
for attempt in $(seq 1 100); do
  for block in /sys/block/sd*; do
    [ -e "$block/device/vpd_pg80" ] || continue
    serial=$(tail -c +5 "$block/device/vpd_pg80" | tr -d ' \000')
    if [ "$serial" = "$SERIAL" ]; then DEV=/dev/${block##*/}; break 2; fi
  done
  sleep 0.1
done
[ -n "$DEV" ] || { echo "no disk with serial $SERIAL in /sys/block" >&2; exit 1; }
echo "device=$DEV size=$(( $(cat /sys/block/${DEV#/dev/}/size) * 512 ))"
"""

LOGOUT = r"""
iscsiadm -m node -T "$IQN" -p "$PORTAL" --logout
iscsiadm -m node -T "$IQN" -p "$PORTAL" -o delete
"""


def settings(volume: str, tgtd) -> str:
    return f"IQN={IQN_PREFIX}:{volume}\nPORTAL={HOST_ADDRESS}:{tgtd.port}\nSERIAL={volume}\n"


def make_image(workdir, name: str, size: int):
    path = workdir / f"{name}.img"
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_a_guest_logs_in_finds_the_disk_by_serial_and_writes_a_filesystem(guest_lab_factory, target_tool, tgtd,
                                                                            workdir, rosetctl_binary):
    guest = guest_lab_factory("consumer")
    image = make_image(workdir, "vol-g", 64 * MiB)
    target_tool.ensure("vol-g", image)
    target_tool.ok("bind", "vol-g", guest.initiator)
    target_tool.ensure("vol-other", make_image(workdir, "vol-other", 16 * MiB))
    target_tool.ok("bind", "vol-other", INITIATOR_B)

    with guest:
        # The host's freshly built rosetctl runs in the guest, as the provider's node side will.
        version = guest.run(f"{rosetctl_binary} --version")
        assert version.rc == 0 and version.stdout.startswith("rosetctl "), version.describe()
        used = guest.run(settings("vol-g", tgtd) + LOGIN + r"""
mkfs.ext4 -q "$DEV"
mkdir -p /mnt/volume
mount "$DEV" /mnt/volume
echo "written by $(hostname)" > /mnt/volume/proof
umount /mnt/volume
""" + LOGOUT)
        assert used.rc == 0, used.describe()
        assert f"size={64 * MiB}" in used.stdout, used.describe()
        assert "successful" in used.stdout, used.describe()  # iscsiadm's login and logout lines

        # The guest's initiator is not in vol-other's ACL: its login is refused.
        refused = guest.run(settings("vol-other", tgtd) + LOGIN)
        assert refused.rc != 0, refused.describe()
        assert "login" in refused.stderr.lower() and "no disk" not in refused.stderr, refused.describe()
        sessions = guest.run("iscsiadm -m session || true")
        assert "vol-" not in sessions.stdout, sessions.describe()

    # What the guest wrote is in the volume's image on this host.
    proof = subprocess.run([tool_path("debugfs"), "-R", "cat /proof", str(image)], capture_output=True, text=True)
    assert proof.stdout.strip() == "written by consumer", proof


def test_unbinding_a_logged_in_initiator_ends_its_session(guest_lab_factory, target_tool, tgtd, workdir):
    guest = guest_lab_factory("unmapped")
    target_tool.ensure("vol-s", make_image(workdir, "vol-s", 16 * MiB))
    target_tool.ok("bind", "vol-s", guest.initiator)

    def session_of_guest() -> bool:
        return f"Initiator: {guest.initiator}" in tgtd.tgtadm("--mode", "target", "--op", "show").stdout

    with guest:
        login = guest.run(settings("vol-s", tgtd) + LOGIN)
        assert login.rc == 0, login.describe()
        assert session_of_guest()
        target_tool.ok("unbind", "vol-s", guest.initiator)
        wait_until(lambda: not session_of_guest(), 10, "tgtd to end the unbound initiator's session")
        # Its initiator re-connects and is refused; a fresh login is refused too.
        again = guest.run(settings("vol-s", tgtd) + "timeout 30 iscsiadm -m node -T \"$IQN\" -p \"$PORTAL\" "
                          "--logout >/dev/null 2>&1 || true\n" + LOGIN)
        assert again.rc != 0, again.describe()
        assert not session_of_guest()


def test_a_lun_resized_under_a_mounted_filesystem_grows_in_the_guest(guest_lab_factory, target_tool, tgtd, workdir):
    # tgt cannot re-read a LUN's size: resize_lun re-creates LUN 1 under the live session.
    guest = guest_lab_factory("grower")
    image = make_image(workdir, "vol-e", 32 * MiB)
    target_tool.ensure("vol-e", image)
    target_tool.ok("bind", "vol-e", guest.initiator)
    with guest:
        mounted = guest.run(settings("vol-e", tgtd) + LOGIN + r"""
mkfs.ext4 -q "$DEV"
mkdir -p /mnt/volume
mount "$DEV" /mnt/volume
echo before > /mnt/volume/before
sync
echo "$DEV" > /root/device
""")
        assert mounted.rc == 0, mounted.describe()
        os.truncate(image, 96 * MiB)
        target_tool.ok("resize", "vol-e", str(image))
        grown = guest.run(r"""
set -e
DEV=$(cat /root/device)
iscsiadm -m session -R > /dev/null
echo "size=$(( $(cat /sys/block/${DEV#/dev/}/size) * 512 ))"
resize2fs "$DEV" 2> /dev/null
echo after > /mnt/volume/after
sync
cat /mnt/volume/before /mnt/volume/after
umount /mnt/volume
""")
        assert grown.rc == 0, grown.describe()
        assert f"size={96 * MiB}" in grown.stdout and "before\nafter\n" in grown.stdout, grown.describe()
