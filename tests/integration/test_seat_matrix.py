"""Every verb from every seat (issue 32 item 1): walks seat_matrix.py's cells in one lab.

The lab of test_seats.py (controller_site.build_site + test_snapshot_streaming.Nodes): a
controller host and two consumers, each running `serve --role node --listen`. Each cell gets
volumes and snapshots of its own (made by the admin through the controller, named after the
cell), runs its verb from its seat, and checks the result: for a cell that works, its effect
(the volume is there, grown, mapped, mounted, the snapshot listed where it was pushed...); for a
refusal, the exit code and the words of the message that name the fix.

ROSETCTL_SEAT_MATRIX_RECORD=FILE writes what every cell did (exit code, first line of stderr,
whether its effect held) to FILE as JSON: how the table was filled.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import seat_matrix
import tgtd_lab
from controller_site import build_site
from rosetctl_fixtures import skip_or_fail
from seat_matrix import Cell
from test_across_hosts import use_roset
from test_snapshot_streaming import Nodes, local_cli

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
MiB = 2**20
ISCSI_PORT = 3260  # tgtd's, in the controller host's own network namespace

KIND_ARGS = {"dir": [], "image": ["--type", "image", "--size", "64Mi"], "placed": ["--node", "consumer-a"],
             "roset": ["-p", "provider=roset"], "iscsi": ["-p", "provider=iscsi", "--size", "64Mi"]}
HOLDER = {"dir": "controller", "image": "controller", "placed": "consumer-a", "roset": "controller",
          "iscsi": "controller"}
# The node a volume of each kind may be mapped to (a local volume: only where it lives).
MAP_NODE = {"dir": "controller", "image": "controller", "placed": "consumer-a", "roset": "consumer-b",
            "iscsi": "consumer-b"}
# The node each seat's node calls run on.
SEAT_NODE = {"controller": "controller", "consumer": "consumer-a", "admin": "consumer-a",
             "on-node": "consumer-b", "node": "consumer-a"}


class OnNode:
    """alice's CLI with --on-node NODE before every command."""

    def __init__(self, cli, node: str):
        self.cli, self.node, self.host = cli, node, cli.host

    def run(self, *args, **kwargs):
        return self.cli.run("--on-node", self.node, *args, **kwargs)


class Lab:
    def __init__(self, nodes: Nodes):
        self.nodes = nodes
        site = self.site = nodes.site
        node_cli = local_cli(site.consumer_a)
        node_cli.env.update({k: v for k, v in site.a.env.items() if k.startswith("ROSET_")})
        # The controller host's CLI with serve's certificate in its configuration, as a
        # controller host's /etc/rosetctl/config.toml has it for serve.
        tls = site.tls_dir
        config = site.controller.config_dir / "config.toml"
        config.write_text(f'node-id = "controller"\ntls-cert = "{tls / "controller.crt"}"\n'
                          f'tls-key = "{tls / "controller.key"}"\ntls-ca = "{tls / "ca.crt"}"\n')
        site.ctl.env.update({"ROSETCTL_CONFIG": str(config), **site.roset_env,
                             "ROSET_FUSE_BINARY": site.a.env["ROSET_FUSE_BINARY"]})
        self.seats = {"controller": site.ctl, "consumer": site.a, "admin": site.alice,
                      "on-node": OnNode(site.alice, "consumer-b"), "node": node_cli}
        self.host_of = {"controller": site.controller, "consumer": site.consumer_a, "admin": site.consumer_a,
                        "on-node": site.consumer_b, "node": site.consumer_a}


def mounted(path: Path) -> bool:
    """Whether PATH is a mount point (a bind mount on the same filesystem too, which
    os.path.ismount misses)."""
    with open("/proc/self/mountinfo") as mountinfo:
        return any(line.split()[4] == str(path) for line in mountinfo)


def start_tgtd(site) -> tuple:
    """tgtd in the controller host's namespace at its address, and serve restarted to use it
    (the iscsi provider's settings in serve's environment, and in the controller host's CLI's)."""
    reason = tgtd_lab.unavailable_reason()
    if reason is not None:
        skip_or_fail(reason)
    control_port = tgtd_lab.free_control_port()
    portal = f"{site.controller.address}:{ISCSI_PORT}"
    tgtd = site.controller.start([tgtd_lab.tool_path("tgtd"), "-f", "--iscsi", f"portal={portal}",
                                  "-C", str(control_port)])
    tgtd_lab.wait_until(lambda: subprocess.run(
        [tgtd_lab.tool_path("tgtadm"), "-C", str(control_port), "--op", "show", "--mode", "target"],
        capture_output=True).returncode == 0, 10, "tgtd answering")
    settings = {"ROSETCTL_ISCSI_PORTAL": portal, "ROSETCTL_ISCSI_TGT_CONTROL_PORT": str(control_port)}
    site.kill_serve()
    site.roset_env.update(settings)
    site.start_serve()
    site.ctl.env.update(settings)
    return tgtd, control_port


@pytest.fixture
def lab(host_lab, rosetctl_binary) -> Lab:
    site = build_site(host_lab)
    use_roset(site, site.a, site.b, site.alice)  # before the nodes' serves start: they connect roset
    for host in (site.controller, site.consumer_a, site.consumer_b):  # registered: iscsi volumes map there
        host.initiator_file.parent.mkdir(parents=True, exist_ok=True)
        host.initiator_file.write_text(f"InitiatorName=iqn.2026-11.io.roset.test:{host.name}\n")
    built = Lab(Nodes(site))
    tgtd, control_port = start_tgtd(site)
    try:
        yield built
        site.assert_no_secrets_printed()
    finally:
        tgtd.send_signal(signal.SIGKILL)  # tgtd ignores SIGTERM
        tgtd.wait(timeout=10)
        for leftover in tgtd_lab.CONTROL_SOCKET_DIR.glob(f"socket.{control_port}*"):
            leftover.unlink(missing_ok=True)


def base_name(cell: Cell) -> str:
    verb = cell.verb.replace("volume ", "v").replace("snapshot ", "s").replace("node ", "n")
    return f"{verb}-{cell.seat}-{cell.kind}".replace("-" + "-", "-").rstrip("-")


class Walk:
    """One cell: its setup, its command, and its effect."""

    def __init__(self, lab: Lab, cell: Cell):
        self.lab, self.cell = lab, cell
        self.admin = lab.site.alice
        self.seat = lab.seats[cell.seat]
        self.name = base_name(cell)
        self.volume = self.name + "-v"
        self.s1, self.s2 = self.name + "-s1", self.name + "-s2"
        self.target = lab.host_of[cell.seat].dir / ("mnt-" + self.name)
        self.notes: list[str] = []

    def admin_ok(self, *args):
        done = self.admin.run(*args, "-o", "json")
        assert done.rc == 0, f"setup of {self.cell}: {' '.join(args)}: {done.describe()}"
        return done.json()

    def setup(self) -> None:
        verb, kind = self.cell.verb, self.cell.kind
        if kind == "-":
            if verb in ("node remove", "node drain", "node cordon", "node uncordon"):
                ghost = self.lab.site.ctl.run("--node-id", self.name, "node", "register", "--iscsi-initiator",
                                              f"iqn.2026-11.io.roset.test:{self.name}")
                assert ghost.rc == 0, ghost.describe()
            if verb == "node uncordon":
                self.admin_ok("node", "cordon", self.name)
            if verb == "node register":
                shown = self.admin.run("node", "show", SEAT_NODE[self.cell.seat], "-o", "json")
                self.address_before = shown.json()["address"] if shown.rc == 0 else None
            return
        if verb != "volume create":
            self.admin_ok("volume", "create", self.volume, *KIND_ARGS[kind])
        if verb.startswith("snapshot ") and verb != "snapshot commit":
            self.admin_ok("snapshot", "commit", self.volume, "--name", self.s1)
            if verb == "snapshot diff":
                self.admin_ok("snapshot", "commit", self.volume, "--name", self.s2)
        if verb == "volume unmap":
            self.admin_ok("volume", "map", self.volume, "--node", MAP_NODE[kind])
        if verb in ("volume disconnect", "volume stats"):
            done = self.seat.run("volume", "connect", self.volume, "--target", self.target)
            self.notes.append(f"connect first: exit {done.rc}")
            self.connected = done.rc == 0

    def argv(self) -> list:
        verb, kind = self.cell.verb, self.cell.kind
        v, s1 = self.volume, self.s1
        return {
            "volume create": ["volume", "create", self.name + "-new", *KIND_ARGS.get(kind, [])],
            "volume list": ["volume", "list"],
            "volume show": ["volume", "show", v],
            "volume expand": ["volume", "expand", v, "--size", "128Mi"],
            "volume modify": ["volume", "modify", v, "-p", "directIO=false"],
            "volume delete": ["volume", "delete", v],
            "volume map": ["volume", "map", v, "--node", MAP_NODE.get(kind, "")],
            "volume unmap": ["volume", "unmap", v, "--node", MAP_NODE.get(kind, "")],
            "volume connect": ["volume", "connect", v, "--target", self.target],
            "volume disconnect": ["volume", "disconnect", v],
            "volume stats": ["volume", "stats", v],
            "snapshot commit": ["snapshot", "commit", v, "--name", s1],
            "snapshot list": ["snapshot", "list", "--volume", v],
            "snapshot show": ["snapshot", "show", s1],
            "snapshot diff": ["snapshot", "diff", s1, self.s2],
            "snapshot restore": ["snapshot", "restore", s1, "--name", self.name + "-r"]
            + (["--read-only"] if kind == "roset" else []),
            "snapshot delete": ["snapshot", "delete", s1],
            "snapshot verify": ["snapshot", "verify", s1] if kind != "-" else ["snapshot", "verify"],
            "snapshot gc": ["snapshot", "gc"],
            "snapshot push": ["snapshot", "push", s1, "--from-node", HOLDER.get(kind, ""), "--to-node", "consumer-b"],
            "snapshot pull": ["snapshot", "pull", s1, "--from-node", HOLDER.get(kind, "")],
            "node info": ["node", "info"],
            "node register": ["node", "register"],
            "node list": ["node", "list"],
            "node show": ["node", "show", "consumer-b"],
            "node remove": ["node", "remove", self.name],
            "node drain": ["node", "drain", self.name],
            "node cordon": ["node", "cordon", self.name],
            "node uncordon": ["node", "uncordon", self.name],
        }[verb]

    def seat_json(self, *args):
        """A check's own call. Exit 6 says "unavailable: retry" (a node did not answer a name
        lookup in time, as happens on a loaded machine), so it is retried twice, as a user would."""
        for _ in range(3):
            done = self.seat.run(*args, "-o", "json")
            if done.rc != 6:
                break
        return done.rc, (done.json() if done.rc == 0 else done.stderr)

    def effect(self, result) -> str | None:
        """None when the verb's effect holds, else what is wrong."""
        verb = self.cell.verb
        out = result.json() if result.stdout.strip() else None
        # A node's own CLI answers a whole list, and the registry verbs, from this host's own
        # store: it must say so (on stderr, in JSON output too) and name --controller.
        note = {"volume list": seat_matrix.ONLY_THIS_HOST, "snapshot list": seat_matrix.ONLY_THIS_HOST,
                "node list": seat_matrix.ONLY_THIS_REGISTRY, "node register": seat_matrix.ONLY_THIS_REGISTRY,
                "node remove": seat_matrix.ONLY_THIS_REGISTRY}.get(verb)
        if note is not None and self.cell.seat == "node" and note not in result.stderr:
            return f"no note naming --controller on stderr: {result.stderr!r}"
        if verb == "volume create":
            rc, shown = self.seat_json("volume", "show", self.name + "-new")
            return None if rc == 0 and shown["id"] == out["id"] else f"not shown after create: {shown}"
        if verb == "volume list":
            # The node's local CLI lists its own store: not the controller host's volumes.
            visible = not (self.cell.seat == "node" and self.cell.kind in seat_matrix.ON_CONTROLLER)
            listed = self.volume in [v["name"] for v in out]
            return None if listed == visible else f"{self.volume} listed: {listed}"
        if verb == "volume show":
            return None if out["name"] == self.volume else f"shows {out['name']}"
        if verb == "volume expand":
            return None if (out.get("capacity_bytes") or 0) >= 128 * MiB else f"capacity {out.get('capacity_bytes')}"
        if verb == "volume modify":
            rc, shown = self.seat_json("volume", "show", self.volume)
            return None if rc == 0 and shown["mutable_parameters"].get("directIO") == "false" else f"{shown}"
        if verb in ("volume delete", "snapshot delete") and self.cell.seat == "node" \
                and self.cell.kind in seat_matrix.ON_CONTROLLER:
            # Not in the node's own store: exit 0 (CSI's idempotent delete), saying it looked here.
            if out["deleted"] or seat_matrix.ONLY_THIS_HOST not in result.stderr:
                return f"expected deleted false and a note naming --controller: {out}, {result.stderr!r}"
        if verb == "volume delete":
            rc, shown = self.seat_json("volume", "show", self.volume)
            return None if rc == 3 else f"volume show after delete: exit {rc}: {shown}"
        if verb in ("volume map", "volume unmap"):
            rc, shown = self.seat_json("volume", "show", self.volume)
            mapped = rc == 0 and MAP_NODE[self.cell.kind] in shown["published_nodes"]
            return None if rc == 0 and mapped == (verb == "volume map") else f"show: exit {rc}: {shown}"
        if verb == "volume connect":
            return None if mounted(self.target) else f"{self.target} is not a mount point"
        if verb == "volume disconnect":
            if getattr(self, "connected", False) != bool(out["disconnected"]):
                return f"connected first: {getattr(self, 'connected', False)}; disconnected {out['disconnected']}"
            return None if not mounted(self.target) and not out["connected"] else f"{self.target} is still mounted"
        if verb == "volume stats":
            return None if out["bytes"]["total"] > 0 else f"{out}"
        if verb in ("snapshot commit", "snapshot show"):
            return None if out["name"] == self.s1 and out["ready"] else f"{out}"
        if verb == "snapshot list":
            return None if self.s1 in [s["name"] for s in out] else f"{self.s1} not listed"
        if verb == "snapshot restore":
            rc, shown = self.seat_json("volume", "show", self.name + "-r")
            return None if rc == 0 else f"restored volume not shown: {shown}"
        if verb == "snapshot delete":
            rc, shown = self.seat_json("snapshot", "show", self.s1)
            return None if rc == 3 else f"snapshot show after delete: exit {rc}: {shown}"
        if verb in ("snapshot push", "snapshot pull"):
            to = "consumer-b" if verb == "snapshot push" else SEAT_NODE[self.cell.seat]
            listed = self.admin.run("snapshot", "list", "-o", "json")
            where = [s["node"] for s in listed.json() if s["name"] == self.s1]
            return None if to in where else f"{self.s1} is on {where}, not {to}"
        if verb == "node info":
            return None if out["node_id"] == SEAT_NODE[self.cell.seat] else f"{out}"
        own_registry = self.cell.seat == "node"  # the node's local CLI answers from its own store
        if verb == "node list":
            ids = [n["node_id"] for n in out]
            return None if ("consumer-b" in ids) != own_registry else f"{ids}"
        if verb == "node show":
            return None if out["node_id"] == "consumer-b" else f"{out}"
        if verb == "node remove":
            return None if out["removed"] != own_registry else f"{out}"
        if verb == "node drain":
            return None if out["node"] == self.name and out["summary"]["volumes"] == 0 else f"{out}"
        if verb in ("node cordon", "node uncordon"):
            # Changed, and the controller's registry says so.
            cordon = verb == "node cordon"
            shown = self.admin_ok("node", "show", self.name)
            return None if out["changed"] and shown["cordoned"] == cordon else f"{out}; {shown}"
        if verb == "node register" and not own_registry:
            # No --address: the one registered before (consumer-a's serve's) stays.
            return None if out["address"] == self.address_before else f"address {self.address_before} -> {out}"
        if verb == "snapshot verify":
            # Verified where it is stored: one snapshot re-read there (a roset one: its commit).
            return None if out["snapshots"] == 1 and out["ok"] else f"{out}"
        return None  # diff, gc: the exit code is the effect

    def run(self) -> dict:
        started = time.monotonic()
        observed = self.walk()
        if self.cell.kind == "iscsi":
            self.remove_volumes()
        observed["seconds"] = round(time.monotonic() - started, 2)
        return observed

    def remove_volumes(self) -> None:
        """The cell's volumes gone again: tgtd keeps one target per iscsi volume, and the walk
        makes some two hundred (test_iscsi_target.py checks a tgtd with many targets)."""
        for volume in (self.volume, self.name + "-new", self.name + "-r"):
            self.admin.run("volume", "unmap", volume, "--node", MAP_NODE["iscsi"])
            self.admin.run("volume", "delete", volume)

    def walk(self) -> dict:
        try:
            self.setup()
        except AssertionError as e:
            return {"exit": None, "problems": [f"setup failed: {e}"], "detail": ""}
        result = self.seat.run(*self.argv(), "-o", "json", timeout=120)
        # Exit 6 ("unavailable: retry") when a node did not answer a name lookup in time (a
        # handshake cut short on a loaded machine): nothing was done, so it is retried as a user
        # would, unless 6 is what the cell expects.
        for _ in range(2):
            if result.rc != 6 or self.cell.exit == 6 or "did not answer" not in result.stderr:
                break
            time.sleep(1)
            result = self.seat.run(*self.argv(), "-o", "json", timeout=120)
        observed = {"exit": result.rc, "stderr": result.stderr.strip().splitlines()[:1]}
        problems = []
        if result.rc != self.cell.exit:
            problems.append(f"exit {result.rc}, expected {self.cell.exit}")
        if self.cell.exit != 0 and self.cell.fragment not in result.stderr:
            problems.append(f"stderr lacks {self.cell.fragment!r}")
        if result.rc == 0:
            try:
                wrong = self.effect(result)
            except Exception as e:  # a malformed answer is a wrong effect, reported per cell
                wrong = f"{type(e).__name__}: {e}"
            observed["effect"] = wrong
            if wrong and self.cell.exit == 0:
                problems.append(f"effect: {wrong}")
        if problems:
            observed["problems"] = problems
            observed["detail"] = result.describe()
        return observed


def walked(cells: list[Cell]) -> list[Cell]:
    return [cell for cell in cells if not cell.elsewhere]


def test_every_cell_of_the_seat_matrix_does_what_the_table_says(lab):
    cells = walked(seat_matrix.cells())
    assert len(cells) > 100, "the matrix has lost its rows"
    # Transfers one after another: two receiving the same blob (empty images hash alike) would
    # have one wait (exit 6), which is right, but not what the cell is about. `node register`
    # runs among the others: it keeps the address consumer-a's serve registered, which the
    # transfers need.
    # iscsi cells one after another too: targets made at once by serve and the controller
    # host's CLI collide on tgtd's target ids (noted in the report of issue 32's matrix).
    serial = {i for i, cell in enumerate(cells)
              if cell.verb in ("snapshot push", "snapshot pull") or cell.kind == "iscsi"}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip((i for i in range(len(cells)) if i not in serial),
                           pool.map(lambda cell: Walk(lab, cell).run(),
                                    [c for i, c in enumerate(cells) if i not in serial])))
    results.update({i: Walk(lab, cells[i]).run() for i in sorted(serial)})
    results = [results[i] for i in range(len(cells))]
    record = os.environ.get("ROSETCTL_SEAT_MATRIX_RECORD")
    if record:
        Path(record).write_text(json.dumps(
            [{"seat": c.seat, "kind": c.kind, "verb": c.verb, **r} for c, r in zip(cells, results)], indent=1))
    wrong = [f"{c.verb} / {c.kind} / {c.seat}: {'; '.join(r['problems'])}: {r['detail']}"
             for c, r in zip(cells, results) if r.get("problems")]
    assert not wrong, f"{len(wrong)} of {len(cells)} cells are not what the table says:\n" + "\n".join(wrong)


def test_the_docs_table_is_what_the_matrix_says():
    generated = subprocess.run([sys.executable, str(SOURCE / "scripts" / "gen-seat-matrix.py"), "-"],
                               capture_output=True, text=True, check=True, timeout=60).stdout
    committed = (SOURCE / "docs" / "reference" / "seats.md").read_text()
    assert committed == generated, ("docs/reference/seats.md is not what tests/integration/seat_matrix.py "
                                    "says: regenerate it with scripts/gen-seat-matrix.py docs/reference/seats.md")
