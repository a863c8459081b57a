#!/usr/bin/python3
"""The iscsi provider's speed (issue 20): `volume connect` and `volume disconnect` of an iSCSI
volume on a consumer (a QEMU guest under TCG, as in the tests), p50 of N, timed inside the guest;
and the controller's map/unmap (ControllerPublish/Unpublish through the CLI) per second on the
host, against the same map/unmap of a local provider volume to the controller's own node in the
same run (the cost of driving tgtd). Results in bench/README.md.

The guest is the tests' guest lab (tests/integration/guest_lab.py) and tgtd the tests' own
(tgtd_lab.py). Run as root from the repository, after a release build:
    sudo /usr/bin/python3 bench/iscsi/connect.py [--cycles N]
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
BINARY = os.environ.setdefault("ROSETCTL_BIN", str(ROOT / "build" / "release" / "src" / "rosetctl"))

import guest_lab  # noqa: E402
import tgtd_lab  # noqa: E402

HOST = guest_lab.HOST_ADDRESS


def run(*args, env=None) -> str:
    done = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"rosetctl {' '.join(map(str, args))} failed: {done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def map_rate(state: Path, flags: list, volume: str, node: str, cycles: int) -> float:
    started = time.perf_counter()
    for _ in range(cycles):
        run("--state-dir", state, *flags, "volume", "map", volume, "--node", node)
        run("--state-dir", state, *flags, "volume", "unmap", volume, "--node", node)
    return cycles / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10, help="connect+disconnect cycles in the guest")
    parser.add_argument("--map-cycles", type=int, default=50, help="map+unmap pairs per provider")
    parser.add_argument("--old-bin", help="a previous rosetctl: its connect and disconnect run in the same "
                        "cycles, alternating with this one's (A/B in the same minutes)")
    parser.add_argument("--trace", type=Path, help="after the cycles, write an `strace -f -tt` of one connect "
                        "and one disconnect (processes, waits, mounts) to this directory, with serve's "
                        "call log (serve.log)")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="rosetctl-iscsibench-", dir="/var/tmp"))
    tgtd = tgtd_lab.Tgtd(work)
    serve = None
    guest = None
    boot = work / "boot"
    try:
        tgtd.start()
        state = work / "state"
        flags = ["--provider", "iscsi", "--iscsi-portal", f"{HOST}:{tgtd.port}",
                 "--iscsi-tgt-control-port", tgtd.control_port]
        tls = work / "tls"
        run("tls", "init", "--dir", tls, "--ip", HOST)
        run("tls", "issue", "guest", "--dir", tls)

        # The controller's map/unmap rate: iscsi (tgtd's ACL) against local (a record only).
        run("--state-dir", state, *flags, "--node-id", "controller", "node", "register",
            "--iscsi-initiator", tgtd_lab.INITIATOR_A)
        run("--state-dir", state, *flags, "--node-id", "bench", "node", "register",
            "--iscsi-initiator", tgtd_lab.INITIATOR_B)
        run("--state-dir", state, *flags, "volume", "create", "mapped", "--size", "32Mi")
        run("--state-dir", state, "--node-id", "controller", "volume", "create", "plain", "--size", "32Mi",
            "--type", "image")
        iscsi_rate = map_rate(state, flags, "mapped", "bench", options.map_cycles)
        local_rate = map_rate(state, ["--node-id", "controller"], "plain", "controller", options.map_cycles)

        # connect/disconnect in a guest, through `serve --listen` on this host.
        port = free_port()
        serve = subprocess.Popen(
            [BINARY, "--state-dir", state, "--node-id", "controller", *map(str, flags), "serve",
             "--role", "controller", "--endpoint", f"unix://{work}/csi.sock", "--listen", f"127.0.0.1:{port}",
             "--tls-cert", tls / "controller.crt", "--tls-key", tls / "controller.key", "--tls-ca", tls / "ca.crt"],
            stdout=subprocess.DEVNULL, stderr=open(work / "serve.log", "w"))
        run("--state-dir", state, *flags, "volume", "create", "data", "--size", "64Mi")
        # The baseline: the same login, mount, umount and logout by hand (iscsiadm, mount) of a
        # volume mapped to the guest from here, and the guest's cost of starting rosetctl at all.
        bare_id = run("--state-dir", state, *flags, "volume", "create", "bare", "--size", "64Mi",
                      "-o", "json")
        bare_id = __import__("json").loads(bare_id)["id"]
        run("--state-dir", state, *flags, "--node-id", "guest", "node", "register",
            "--iscsi-initiator", "iqn.2026-11.io.roset.test:guest")
        # Every mapping has a CHAP account (issue 31): give this one known credentials, which the
        # hand-made record below carries (a throwaway secret, in a script file, never an argv).
        chap_user, chap_password = "bare-by-hand", "bench-" + __import__("secrets").token_hex(8)
        chap_file = work / "chap.json"
        chap_file.write_text(__import__("json").dumps({"chap-user": chap_user, "chap-password": chap_password}))
        os.chmod(chap_file, 0o600)
        mapped = run("--state-dir", state, *flags, "--secrets-file", chap_file, "volume", "map", "bare",
                     "--node", "guest", "-o", "json")
        chap_user = __import__("json").loads(mapped)["publish_context"]["chap-user"]  # "<id>:<user>"
        bare_iqn = f"iqn.2026-11.io.roset:{bare_id}"
        portal = f"{HOST}:{tgtd.port}"
        boot.mkdir()
        files = guest_lab.prepare_boot_files(boot)
        guest = guest_lab.Guest(files, work / "guest", "guest")
        own = guest.dir / "tls"
        own.mkdir(parents=True)
        for name in ("ca.crt", "guest.crt", "guest.key"):
            shutil.copy2(tls / name, own / name)
        old = options.old_bin or BINARY
        flags_ctl = (f" --controller {HOST}:{port} --node-id guest --tls-cert {own}/guest.crt "
               f"--tls-key {own}/guest.key --tls-ca {own}/ca.crt")
        ctl = BINARY + flags_ctl
        old_ctl = old + flags_ctl
        guest.start()
        script = f"""set -e
ms() {{ echo $(( $(date +%s%N) / 1000000 )); }}
mkdir -p /mnt/bare
iscsiadm -m node -o new -T {bare_iqn} -p {portal} >/dev/null
iscsiadm -m node -T {bare_iqn} -p {portal} -o update -n node.session.auth.authmethod -v CHAP \
  -n node.session.auth.username -v {chap_user}
record=$(ls -d /etc/iscsi/nodes/{bare_iqn}/*); [ -d "$record" ] && record=$record/default
echo "node.session.auth.password = {chap_password}" >> "$record"
for i in $(seq {options.cycles}); do
  g=0; h=0; j=0
  if [ {1 if options.old_bin else 0} = 1 ] && [ $((i % 2)) = 0 ]; then
    g=$(ms); {old_ctl} volume connect data --target /mnt/data >/dev/null; h=$(ms)
    {old_ctl} volume disconnect data >/dev/null; j=$(ms)
  fi
  a=$(ms); {ctl} volume connect data --target /mnt/data >/dev/null; b=$(ms)
  {ctl} volume disconnect data >/dev/null; c=$(ms)
  if [ {1 if options.old_bin else 0} = 1 ] && [ $((i % 2)) = 1 ]; then
    g=$(ms); {old_ctl} volume connect data --target /mnt/data >/dev/null; h=$(ms)
    {old_ctl} volume disconnect data >/dev/null; j=$(ms)
  fi
  iscsiadm -m node -T {bare_iqn} -p {portal} --login >/dev/null
  while ! ls /sys/class/iscsi_session/*/device/target*/*:*:*:1/block >/dev/null 2>&1; do sleep 0.05; done
  disk=$(ls /sys/class/iscsi_session/*/device/target*/*:*:*:1/block)
  [ "$i" = 1 ] && mkfs.ext4 -q /dev/$disk
  mount /dev/$disk /mnt/bare; d=$(ms)
  umount /mnt/bare; iscsiadm -m node -T {bare_iqn} -p {portal} --logout >/dev/null; e=$(ms)
  {BINARY} --version >/dev/null; f=$(ms)
  echo "$((b - a)) $((c - b)) $((d - c)) $((e - d)) $((f - e)) $((h - g)) $((j - h))"
done
"""
        if options.trace:
            traces = guest.dir / "trace"  # the guest writes only under its own directory
            traces.mkdir()
            calls = "trace=process,wait4,clock_nanosleep,nanosleep,connect,mount,umount2,fsync,rename,poll,ppoll"
            script += (f"strace -f -tt -e {calls} -o {traces}/connect.strace {ctl} volume connect data "
                       f"--target /mnt/data >/dev/null\n"
                       f"strace -f -tt -e {calls} -o {traces}/disconnect.strace {ctl} volume disconnect "
                       f"data >/dev/null\n")
        result = guest.run(script, timeout=120 * options.cycles + 180)
        if result.rc != 0:
            raise SystemExit(f"the guest's cycles failed: {result.describe()}")
        if options.trace:
            shutil.copytree(guest.dir / "trace", options.trace, dirs_exist_ok=True)
            # The controller's call log: one line per RPC (method, peer, duration), the count of
            # controller calls a connect and a disconnect make.
            shutil.copy2(work / "serve.log", options.trace / "serve.log")
        pairs = [tuple(map(int, line.split())) for line in result.stdout.split("\n") if line.strip()]
        # The first cycle formats the disks: reported apart.
        first = pairs[0]
        rest = pairs[1:] or pairs
        p50 = [statistics.median(p[i] for p in rest) for i in range(7)]
        print(f"first cycle (mkfs): rosetctl connect {first[0]} ms, disconnect {first[1]} ms")
        print(f"p50 of {len(rest)}: rosetctl connect {p50[0]:.0f} ms, disconnect {p50[1]:.0f} ms; "
              f"by hand (iscsiadm login + mount) {p50[2]:.0f} ms, (umount + logout) {p50[3]:.0f} ms; "
              f"rosetctl --version {p50[4]:.0f} ms")
        print(f"ratios: connect {p50[0] / p50[2]:.2f}x by hand, disconnect {p50[1] / p50[3]:.2f}x")
        if options.old_bin:
            print(f"old binary: connect {p50[5]:.0f} ms ({p50[5] / p50[2]:.2f}x by hand), disconnect "
                  f"{p50[6]:.0f} ms ({p50[6] / p50[3]:.2f}x); old / new connect {p50[5] / p50[0]:.2f}, "
                  f"disconnect {p50[6] / p50[1]:.2f}")
        print("cycles (connect, disconnect, by-hand login+mount, umount+logout, --version, old connect, "
              "old disconnect):")
        for pair in pairs:
            print("  " + " ".join(map(str, pair)))
        print(f"controller map+unmap pairs/s: iscsi {iscsi_rate:.1f}, local {local_rate:.1f} "
              f"(ratio {iscsi_rate / local_rate:.2f})")
    finally:
        if guest is not None:
            guest.kill()
        if serve is not None:
            serve.kill()
            serve.wait()
        tgtd.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
