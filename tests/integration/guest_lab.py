"""A QEMU guest as a real consumer host: its own kernel (with the iSCSI initiator the host kernel
lacks), the host's own files and binaries, its own initiator name, and 10.0.2.2 for the host.

How it is built (measured facts: ../../../shared/consumer-host-lab.md):
- The kernel is the host's /boot/vmlinuz-*, decompressed to its ELF once per test session and
  booted directly (PVH): unpacking a bzImage under TCG costs seconds. The initramfs is made at
  the same time: busybox (busybox-static) as PID 1 plus the modules GUEST_MODULES need, in
  dependency order (read from modules.dep), and INIT below.
- The guest's / is the host's / over 9p, read-only, under a tmpfs overlay: every host binary
  (the freshly built rosetctl, iscsiadm, mkfs) runs in it and nothing it writes reaches the host,
  except in its own directory (the guest's `dir`, shared read-write at the same path), through
  which commands, their output and exit codes travel.
- QEMU user networking: the guest is 10.0.2.15, and 10.0.2.2 is the host's loopback, so a tgtd
  or `rosetctl serve` listening on 127.0.0.1 is reached at 10.0.2.2. Nothing else is reachable.
- open-iscsi's iscsid runs in the guest with the guest's initiator name in
  /etc/iscsi/initiatorname.iscsi (on the overlay), before any command.

A Guest is started once (`start()`, a few seconds under TCG) and runs any number of shell scripts
(`run(script)`: its Result has the exit code, stdout and stderr) until `stop()`; qemu is ended by
PID. Scripts see only PATH, HOME and TERM: pass them what they need in the script text itself.
"""
from __future__ import annotations

import glob
import lzma
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

from rosetctl_cli import Result, process_alive

HOST_ADDRESS = "10.0.2.2"  # the host's loopback as the guest sees it
GUEST_ADDRESS = "10.0.2.15"
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Top-level modules; their dependencies are added from modules.dep. virtio and 9p bring the
# disk-less root, iscsi_tcp and sd_mod the initiator and its disks, ext4 the volumes' filesystem,
# fuse the roset provider's roset-fuse.
# Each module costs boot time under TCG (xfs alone ~3 MB): tests that need more (xfs, loop for
# image volumes in the guest) ask prepare_boot_files for them.
GUEST_MODULES = ["virtio_pci", "virtio_net", "9pnet_virtio", "9p", "overlay", "iscsi_tcp", "sd_mod",
                 "crc32c_generic", "ext4", "fuse"]
TOOLS = {"qemu-system-x86_64": "qemu-system-x86", "iscsiadm": "open-iscsi", "iscsid": "open-iscsi"}
# Guests reached by ssh (SshAccess) need these too.
SSH_TOOLS = {"sshd": "openssh-server", "ssh": "openssh-client", "ssh-keygen": "openssh-client"}

# PID 1. Settings come on the kernel command line (rosetctl.dir=, rosetctl.host=,
# rosetctl.initiator=), never from the host's environment. Progress markers go to the console
# (qemu's log); command output goes to files in the shared directory.
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /lower /rw /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for word in $(cat /proc/cmdline); do
  case "$word" in
    rosetctl.dir=*) DIR="${word#rosetctl.dir=}" ;;
    rosetctl.host=*) HOST="${word#rosetctl.host=}" ;;
    rosetctl.initiator=*) INITIATOR="${word#rosetctl.initiator=}" ;;
    rosetctl.sshd=*) SSHD_CONFIG="${word#rosetctl.sshd=}" ;;
    rosetctl.shares=*) SHARES="${word#rosetctl.shares=}" ;;
  esac
done
fail() { echo "@@GUEST-LAB-FAILED $*@@"; poweroff -f; }
echo "@@GUEST-LAB-INIT after $(cut -d' ' -f1 /proc/uptime) s@@"
for module in $(cat /modules.order); do insmod "/modules/$module" || fail "insmod $module"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostroot /lower \
  || fail "mount the host's /"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot \
  || fail "overlay"
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
# /tmp stays the host's (read-only below the overlay): a checkout, and the rosetctl built in it,
# may live there (CI clones into /tmp).
# A fresh consumer: none of the host's rosetctl configuration or state.
for dir in /run /root /etc/rosetctl /var/lib/rosetctl; do
  mkdir -p "/newroot$dir"
  mount -t tmpfs -o mode=0755 tmpfs "/newroot$dir"
done
mkdir -p "/newroot$DIR"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 guestdir "/newroot$DIR" || fail "mount $DIR"
# Host directories shared read-write with this guest (and others), each at its own path.
n=0
for share in $(echo "$SHARES" | tr ',' ' '); do
  mkdir -p "/newroot$share"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 "share$n" "/newroot$share" || fail "mount $share"
  n=$((n + 1))
done
echo "@@GUEST-LAB-ROOT after $(cut -d' ' -f1 /proc/uptime) s@@"
hostname "$HOST"
echo "$HOST" > /newroot/etc/hostname
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
# Only this guest's open-iscsi state: no node records from the host's /etc/iscsi.
rm -rf /newroot/etc/iscsi/nodes /newroot/etc/iscsi/send_targets /newroot/var/lib/iscsi
mkdir -p /newroot/etc/iscsi/nodes /newroot/etc/iscsi/send_targets /newroot/run/lock/iscsi
echo "InitiatorName=$INITIATOR" > /newroot/etc/iscsi/initiatorname.iscsi
in_root() { chroot /newroot /usr/bin/env -i PATH=%(path)s HOME=/root TERM=dumb "$@"; }
in_root iscsid || fail "iscsid"
if [ -n "$SSHD_CONFIG" ]; then
  mkdir -p /newroot/run/sshd
  in_root /usr/sbin/sshd -f "$SSHD_CONFIG" || fail "sshd"
fi
echo "@@GUEST-LAB-READY after $(cut -d' ' -f1 /proc/uptime) s@@"
: > "/newroot$DIR/ready"
# Commands arrive as DIR/commands/N.sh; N.out, N.err, then N.rc (last) answer them.
cd "/newroot$DIR/commands"
n=1
while true; do
  if [ -e stop ]; then break; fi
  if [ -e "$n.sh" ]; then
    in_root /bin/sh "$DIR/commands/$n.sh" > "$n.out" 2> "$n.err" < /dev/null
    echo $? > "$n.rc.tmp"
    mv "$n.rc.tmp" "$n.rc"
    n=$((n + 1))
  else
    usleep 50000
  fi
done
cd /
in_root iscsiadm -m session -u > /dev/null 2>&1
echo "@@GUEST-LAB-DONE@@"
sync
poweroff -f
""".replace("%(path)s", GUEST_PATH)


def unavailable_reason(ssh: bool = False) -> str | None:
    """Why no guest (with `ssh`, one reached by ssh) can boot here (a missing package or kernel),
    or None."""
    tools = dict(TOOLS, **(SSH_TOOLS if ssh else {}))
    missing = sorted({f"{tool} ({package})" for tool, package in tools.items()
                      if shutil.which(tool) is None and not os.access(f"/usr/sbin/{tool}", os.X_OK)})
    if not os.access("/bin/busybox", os.X_OK) or _is_dynamic("/bin/busybox"):
        missing.append("a static /bin/busybox (busybox-static)")
    if guest_kernel() is None:
        missing.append("a kernel in /boot with its modules in /lib/modules (linux-image-amd64)")
    if missing:
        return f"cannot boot a guest: missing {', '.join(missing)}; scripts/install-deps.sh installs them"
    return None


def _is_dynamic(path: str) -> bool:
    with open(path, "rb") as f:
        return b"/lib64/ld-linux" in f.read(4096)


def guest_kernel() -> tuple[Path, str] | None:
    """The newest /boot/vmlinuz-VERSION that has /lib/modules/VERSION, and VERSION."""
    found = []
    for path in glob.glob("/boot/vmlinuz-*"):
        version = path[len("/boot/vmlinuz-"):]
        if os.path.isfile(f"/lib/modules/{version}/modules.dep"):
            found.append((os.path.getmtime(path), Path(path), version))
    if not found:
        return None
    _, path, version = max(found)
    return path, version


class BootFiles(NamedTuple):
    kernel: Path     # uncompressed ELF
    initramfs: Path  # uncompressed newc cpio
    version: str


def prepare_boot_files(directory: Path, extra_modules: tuple[str, ...] = ()) -> BootFiles:
    found = guest_kernel()
    assert found is not None, "no guest kernel (see unavailable_reason)"
    vmlinuz, version = found
    kernel = directory / f"vmlinux-{version}"
    kernel.write_bytes(extract_vmlinux(vmlinuz.read_bytes()))
    initramfs = directory / f"initramfs-{version}.cpio"
    initramfs.write_bytes(build_initramfs(version, GUEST_MODULES + list(extra_modules)))
    return BootFiles(kernel, initramfs, version)


def extract_vmlinux(image: bytes) -> bytes:
    """The ELF inside a bzImage: find an xz (or gzip) payload's magic and decompress from there,
    as the kernel tree's scripts/extract-vmlinux does."""
    import zlib
    for magic, unpack in ((b"\xfd7zXZ\x00", lambda data: lzma.LZMADecompressor().decompress(data)),
                          (b"\x1f\x8b\x08", lambda data: zlib.decompressobj(31).decompress(data))):
        start = image.find(magic)
        while start >= 0:
            try:
                elf = unpack(image[start:])
                if elf.startswith(b"\x7fELF"):
                    return elf
            except (lzma.LZMAError, zlib.error):
                pass
            start = image.find(magic, start + 1)
    raise AssertionError("no xz or gzip payload with an ELF kernel in the vmlinuz image")


def module_order(version: str, wanted: list[str]) -> list[str]:
    """Paths (relative to /lib/modules/VERSION) of `wanted` and their dependencies, each after the
    modules it needs. Built-in modules (absent from modules.dep) are skipped."""
    base = Path("/lib/modules") / version
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in (base / "modules.dep").read_text().splitlines():
        path, _, needs = line.partition(":")
        deps[path] = needs.split()
        name = re.sub(r"\.ko(\.(xz|gz|zst))?$", "", os.path.basename(path)).replace("-", "_")
        by_name[name] = path
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        # modules.dep lists every dependency, nearest last; loading them first-to-last in
        # reverse works as modprobe does.
        for need in reversed(deps.get(path, [])):
            visit(need)
        order.append(path)

    for name in wanted:
        path = by_name.get(name.replace("-", "_"))
        if path is not None:
            visit(path)
    return order


def _module_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".xz":
        return lzma.decompress(data)
    return data


def build_initramfs(version: str, modules: list[str]) -> bytes:
    archive = Cpio()
    for directory in ("bin", "dev", "proc", "sys", "modules"):
        archive.add_dir(directory)
    archive.add_file("bin/busybox", Path("/bin/busybox").read_bytes(), 0o755)
    archive.add_file("init", INIT.encode(), 0o755)
    names = []
    for relative in module_order(version, modules):
        name = re.sub(r"\.(xz|gz|zst)$", "", os.path.basename(relative))
        archive.add_file(f"modules/{name}", _module_bytes(Path("/lib/modules") / version / relative), 0o644)
        names.append(name)
    archive.add_file("modules.order", ("\n".join(names) + "\n").encode(), 0o644)
    return archive.finish()


class Cpio:
    """A newc ("070701") cpio archive, the format the kernel unpacks as an initramfs."""

    def __init__(self):
        self._data = bytearray()
        self._inode = 1

    def add_dir(self, name: str) -> None:
        self._entry(name, 0o040755, b"")

    def add_file(self, name: str, data: bytes, mode: int) -> None:
        self._entry(name, 0o100000 | mode, data)

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0, b"")
        return bytes(self._data)

    def _entry(self, name: str, mode: int, data: bytes) -> None:
        encoded = name.encode() + b"\0"
        fields = [self._inode, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
        self._inode += 1
        self._data += b"070701" + b"".join(b"%08x" % field for field in fields) + encoded
        self._pad()
        self._data += data
        self._pad()

    def _pad(self) -> None:
        self._data += b"\0" * (-len(self._data) % 4)


class SshAccess:
    """sshd in a guest, for Ansible: the host's /usr/sbin/sshd with a throwaway host key, root's
    login by `client_key` only, forwarded from 127.0.0.1:`port` on this host. `client_key` (and its
    .pub) is made once and may serve several guests."""

    def __init__(self, client_key: Path, port: int):
        self.client_key = client_key
        self.port = port
        if not client_key.exists():
            _keygen(client_key)

    def configure(self, directory: Path) -> Path:
        """Writes the guest's sshd configuration and keys under `directory` (shared with the
        guest at the same path); returns the configuration's path."""
        directory.mkdir(parents=True, exist_ok=True)
        host_key = directory / "host_ed25519"
        if not host_key.exists():
            _keygen(host_key)
        authorized = directory / "authorized_keys"
        authorized.write_text(Path(f"{self.client_key}.pub").read_text())
        config = directory / "sshd_config"
        # No PAM and no strict modes: the guest's files are 9p shares owned as on the host.
        config.write_text(f"""Port 22
HostKey {host_key}
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PidFile /run/sshd.pid
Subsystem sftp internal-sftp
""")
        return config

    def options(self) -> list[str]:
        """ssh's options for reaching the guest (no known_hosts: its host key is throwaway)."""
        return ["-i", str(self.client_key), "-p", str(self.port), "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes"]

    def wait(self, timeout: float = 60) -> None:
        """Until ssh runs a command as root in the guest."""
        deadline = time.monotonic() + timeout
        while True:
            done = subprocess.run(["ssh", *self.options(), "-o", "ConnectTimeout=5", "root@127.0.0.1", "true"],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"ssh to the guest on port {self.port} never answered: {done.stderr}")
            time.sleep(0.5)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rosetctl-guest-lab", "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)


def require_guests_lock() -> None:
    """Under ctest, a test file may boot guests only while it holds the resource lock "guests"
    (tests/CMakeLists.txt lists such files): two files booting TCG guests side by side would
    starve each other on two cores. ctest says which locks it holds in ROSETCTL_TEST_LOCKS; run
    by hand (the variable unset) anything goes."""
    locks = os.environ.get("ROSETCTL_TEST_LOCKS")
    if locks is not None and "guests" not in locks.split(","):
        raise AssertionError("this test boots QEMU guests but ctest runs it without the resource lock "
                             "\"guests\": add its file to ROSETCTL_GUEST_TESTS in tests/CMakeLists.txt "
                             "(tests/README.md, \"Running tests side by side\")")


class Guest:
    """One QEMU guest (see the module's docstring). `dir` is shared read-write at the same path."""

    def __init__(self, boot: BootFiles, directory: Path, name: str, initiator: str | None = None,
                 ssh: SshAccess | None = None, shares: tuple[Path, ...] = (), memory_mib: int = 512,
                 forwards: tuple[tuple[int, int], ...] = (), prefix: tuple[str, ...] = ()):
        """`forwards`: (port on 127.0.0.1 where qemu runs, guest port) pairs; `prefix`: argv qemu is
        run under (nsenter into a network namespace: 10.0.2.2 is then that namespace's loopback,
        and the guest reaches that namespace's addresses)."""
        self.boot = boot
        self.memory_mib, self.forwards, self.prefix = memory_mib, forwards, tuple(prefix)
        self.dir = directory
        self.name = name
        self.initiator = initiator or f"iqn.2026-11.io.roset.test:{name}"
        self.ssh = ssh
        self.shares = shares
        self.proc: subprocess.Popen | None = None
        self.console_path = directory / "console.log"
        self._next = 1

    def __enter__(self) -> Guest:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 90) -> None:
        """Boots the guest and waits until it takes commands (iscsid running)."""
        self.start_booting()
        self.wait_until_ready(timeout)

    def wait_until_ready(self, timeout: float = 90) -> None:
        self._wait_for(lambda: (self.dir / "ready").exists(), timeout, "the guest to boot")

    def start_booting(self) -> None:
        """Starts qemu and returns at once (several guests boot together)."""
        assert self.proc is None, "a Guest boots once"
        require_guests_lock()
        (self.dir / "commands").mkdir(parents=True, exist_ok=True)
        words = ["console=ttyS0", "quiet", "loglevel=3", "panic=-1", "mitigations=off", "random.trust_cpu=on",
                 f"rosetctl.dir={self.dir}", f"rosetctl.host={self.name}", f"rosetctl.initiator={self.initiator}"]
        netdev = "user,id=n0"
        if self.ssh is not None:
            words.append(f"rosetctl.sshd={self.ssh.configure(self.dir / 'sshd')}")
            netdev += f",hostfwd=tcp:127.0.0.1:{self.ssh.port}-:22"
        netdev += "".join(f",hostfwd=tcp:127.0.0.1:{host}-:{guest}" for host, guest in self.forwards)
        if self.shares:
            words.append("rosetctl.shares=" + ",".join(str(share) for share in self.shares))
        argv = [
            *self.prefix, "qemu-system-x86_64", "-machine", "q35", "-accel", "tcg,tb-size=256", "-cpu", "max",
            "-smp", "1", "-m", str(self.memory_mib), "-nographic", "-no-reboot",
            "-kernel", str(self.boot.kernel), "-initrd", str(self.boot.initramfs), "-append", " ".join(words),
            "-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,romfile=", "-device", "virtio-rng-pci",
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={self.dir},mount_tag=guestdir,security_model=passthrough,multidevs=remap",
        ]
        for number, share in enumerate(self.shares):
            argv += ["-virtfs", f"local,path={share},mount_tag=share{number},security_model=passthrough,multidevs=remap"]
        with open(self.console_path, "wb") as console:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def run(self, script: str, timeout: float = 60) -> Result:
        """Runs `script` with the guest's /bin/sh (as root, in the guest's /) and waits for it."""
        assert self.proc is not None, "start the guest first"
        number = self._next
        self._next += 1
        commands = self.dir / "commands"
        temporary = commands / f"{number}.sh.tmp"
        temporary.write_text(script)
        temporary.rename(commands / f"{number}.sh")  # the guest never sees half a script
        rc_path = commands / f"{number}.rc"
        self._wait_for(rc_path.exists, timeout, f"command {number} in the guest")
        return Result(int(rc_path.read_text().strip()), (commands / f"{number}.out").read_text(errors="replace"),
                      (commands / f"{number}.err").read_text(errors="replace"))

    def stop(self, timeout: float = 30) -> None:
        """Logs out of every session, powers off, and waits for qemu (killed if it hangs)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        (self.dir / "commands" / "stop").touch()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        """qemu ended by PID, now."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert not process_alive(self.proc.pid)

    def console(self) -> str:
        try:
            return self.console_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def _wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"qemu exited ({self.proc.returncode}) while waiting for {what}; "
                                     f"console:\n{self.console()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; console:\n{self.console()}")
            time.sleep(0.05)
