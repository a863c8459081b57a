"""The seat matrix (issue 32 item 1) as data: for every seat a user can stand at, every kind of
volume and every `volume`, `snapshot` and `node` verb, whether it works or how it refuses.

test_seat_matrix.py walks these cells in the network-namespace lab and asserts each (the effect
for a cell that works; the exit code and a fragment of the message for one that refuses);
scripts/gen-seat-matrix.py renders the same data as docs/reference/seats.md, and a test checks
the committed page equals what it renders, so the table and the test cannot drift.

No lab imports here: the generator imports this module on its own.
"""
from __future__ import annotations

from dataclasses import dataclass

# Seat key -> how the docs name it. The lab: a controller host, consumer-a and consumer-b, each
# consumer running `serve --role node --listen`; alice is an admin working from consumer-a's host.
SEATS = {
    "controller": "controller host, local CLI (its config names serve's `tls-*` files)",
    "consumer": "consumer-a with `--controller` (its node certificate)",
    "admin": "admin with `--controller` (an admin certificate, on consumer-a's host)",
    "on-node": "admin with `--controller --on-node consumer-b`",
    "node": "consumer-a locally (no `--controller`) while its `serve --role node` runs",
}

# Kind key -> how the docs name it; "-" is a verb about no one volume.
KINDS = {
    "dir": "`local` directory on the controller host",
    "image": "`local` image (`--type image --size 64Mi`) on the controller host",
    "placed": "`local` directory placed on consumer-a (`--node consumer-a`)",
    "roset": "`roset` (`-p provider=roset`; the Roset API key on the controller, and on consumers that connect)",
    "iscsi": "`iscsi` (`-p provider=iscsi`; tgtd beside the controller)",
    "-": "no one volume",
}

VOLUME_VERBS = ["create", "list", "show", "expand", "modify", "delete", "map", "unmap",
                "connect", "disconnect", "stats"]
SNAPSHOT_VERBS = ["commit", "list", "show", "diff", "restore", "delete", "verify", "gc", "push", "pull"]
NODE_VERBS = ["info", "register", "list", "show", "remove", "drain", "cordon", "uncordon"]
VERBS = ([f"volume {v}" for v in VOLUME_VERBS] + [f"snapshot {v}" for v in SNAPSHOT_VERBS]
         + [f"node {v}" for v in NODE_VERBS])

# Where a cell is not walked here, the reason (shown in the table instead of a result).
GUEST = "needs a kernel initiator: checked in a guest (test_ansible_across_hosts.py, test_doctor_iscsi.py)"


@dataclass(frozen=True)
class Cell:
    seat: str
    kind: str
    verb: str
    exit: int  # the exit code expected; 0: works, and its effect is asserted
    fragment: str = ""  # a refusal: a part of stderr the test asserts; works: a note; both in the docs
    elsewhere: str = ""  # not walked by test_seat_matrix.py: where it is checked instead


def ok(note: str = "") -> tuple:
    return (0, note, "")


def refused(code: int, fragment: str) -> tuple:
    return (code, fragment, "")


def elsewhere(why: str) -> tuple:
    return (0, "", why)


OK = ok()
SEAT_ORDER = list(SEATS)
ON_CONTROLLER = ("dir", "image", "roset", "iscsi")  # kinds the controller host holds

# Refusals several rows share.
# The node's own CLI: not found in its store, and it says --controller reaches the controller's.
ONLY_THIS_HOST = "sees only this host's own volumes and snapshots; --controller ADDRESS"
# The same for its node registry (node list, show, register, remove).
ONLY_THIS_REGISTRY = "reads this host's own node registry, not the controller's; --controller ADDRESS"
NOT_HERE = refused(3, ONLY_THIS_HOST)
NO_SNAPSHOT_HERE = refused(3, ONLY_THIS_HOST)
NOT_CONNECTED = refused(5, "is not connected on this node; connect it")
ONLY_ON = {"dir": 'can only be published to node "controller"', "image": 'can only be published to node "controller"'}
NODE_ACTS_FOR_ITSELF = refused(7, "a node acts only for itself")
NODE_ON_ITSELF = refused(7, "a node acts only on itself")
NODE_MAY_NOT_ON_CONTROLLER = refused(7, "that role may not make it on a controller; an admin's or a "
                                     "controller's certificate may")
ADMIN_TRANSFER = refused(7, "a node reads another node's snapshots only for a transfer the controller started")
ONLY_LOCAL_MOVE = refused(5, "only snapshots of the local provider move between nodes")
PULL_FROM_SELF = refused(2, "is this node: a snapshot is pulled from another node")
NEEDS_CONTROLLER = refused(6, "name the controller (--controller)")
NO_CONTROLLER_HERE = refused(6, "this host has no controller")
DIR_NOT_MUTABLE = refused(2, "directIO applies to image and block volumes")
ROSET_NOT_MUTABLE = refused(2, "volumes of provider \"roset\" have no parameters that can change")
ROSET_NO_DIFF = refused(9, "provider \"roset\" does not support snapshots")
NOTHING_CONNECTED = ok("nothing was connected there: says so")
OWN_STORE = ok("made in consumer-a's own store, not on the controller host")
# Its whole lists are of its own store: a note on stderr (JSON output too) says so and names
# --controller (checked).
NOT_LISTED_HERE = ok("consumer-a's own store: the controller host's volumes are not in it; a note "
                     "says so and names --controller")
LISTED_HERE = ok("a note says the list is this host's own and names --controller")
# Exit 0 as CSI's DeleteVolume of an unknown id; the words (checked) say it looked only here.
NOTHING_TO_DELETE = ok("not in this host's store: deletes nothing; says it looked only on this host "
                       "and names --controller")


def row(controller, consumer, admin, on_node, node) -> tuple:
    return (controller, consumer, admin, on_node, node)


# (verb, kind) -> one outcome per seat, in SEATS' order. Filled from what the walk found (see
# test_seat_matrix.py's ROSETCTL_SEAT_MATRIX_RECORD) and judged: each refusal names the fix.
TABLE: dict[tuple[str, str], tuple[tuple, ...]] = {}


def _volume_rows() -> None:
    for kind in ("dir", "image", "placed", "roset"):
        here = NOT_HERE if kind in ON_CONTROLLER else OK  # the node seat: consumer-a's own store
        own = kind in ON_CONTROLLER
        TABLE[("volume create", kind)] = row(OK, OK, OK, OK, OWN_STORE if own else OK)
        TABLE[("volume list", kind)] = row(OK, OK, OK, OK, NOT_LISTED_HERE if own else LISTED_HERE)
        for verb in ("show", "expand"):
            TABLE[(f"volume {verb}", kind)] = row(OK, OK, OK, OK, here)
        TABLE[("volume delete", kind)] = row(OK, OK, OK, OK, OK if kind == "placed" else NOTHING_TO_DELETE)
        if kind == "image":
            TABLE[("volume modify", kind)] = row(OK, OK, OK, OK, here)
        elif kind == "roset":
            TABLE[("volume modify", kind)] = row(*(ROSET_NOT_MUTABLE,) * 4, here)
        else:
            TABLE[("volume modify", kind)] = row(*(DIR_NOT_MUTABLE,) * 4, DIR_NOT_MUTABLE if kind == "placed" else here)
        mapping = NODE_ACTS_FOR_ITSELF if kind != "placed" else OK
        for verb in ("map", "unmap"):
            TABLE[(f"volume {verb}", kind)] = row(OK, mapping, OK, OK, here if kind != "placed" else OK)
        if kind in ("dir", "image"):
            elsewhere_only = refused(5, ONLY_ON[kind])
            TABLE[("volume connect", kind)] = row(OK, elsewhere_only, elsewhere_only, elsewhere_only, here)
            TABLE[("volume disconnect", kind)] = row(OK, NOTHING_CONNECTED, NOTHING_CONNECTED, NOTHING_CONNECTED, here)
            TABLE[("volume stats", kind)] = row(OK, NOT_CONNECTED, NOT_CONNECTED, NOT_CONNECTED, here)
        elif kind == "placed":
            elsewhere_only = refused(5, 'can only be published to node "consumer-a"')
            TABLE[("volume connect", kind)] = row(elsewhere_only, OK, OK, elsewhere_only, OK)
            TABLE[("volume disconnect", kind)] = row(NOTHING_CONNECTED, OK, OK, NOTHING_CONNECTED, OK)
            TABLE[("volume stats", kind)] = row(NOT_CONNECTED, OK, OK, NOT_CONNECTED, OK)
        else:
            for verb in ("connect", "disconnect", "stats"):
                TABLE[(f"volume {verb}", kind)] = row(OK, OK, OK, OK, here)


def _snapshot_rows() -> None:
    for kind in ("dir", "image", "placed", "roset"):
        here = NO_SNAPSHOT_HERE if kind in ON_CONTROLLER else OK
        TABLE[("snapshot commit", kind)] = row(OK, OK, OK, OK, NOT_HERE if kind in ON_CONTROLLER else OK)
        TABLE[("snapshot list", kind)] = row(OK, OK, OK, OK, NOT_HERE if kind in ON_CONTROLLER else OK)
        for verb in ("show", "restore"):
            TABLE[(f"snapshot {verb}", kind)] = row(OK, OK, OK, OK, here)
        TABLE[("snapshot delete", kind)] = row(OK, OK, OK, OK, OK if kind == "placed" else NOTHING_TO_DELETE)
        TABLE[("snapshot diff", kind)] = (row(OK, OK, OK, OK, here) if kind != "roset"
                                          else row(*(ROSET_NO_DIFF,) * 4, here))
        if kind == "placed":
            on_its_node = ok("verified by consumer-a: the controller forwards the call")
            TABLE[("snapshot verify", kind)] = row(on_its_node, NODE_MAY_NOT_ON_CONTROLLER, on_its_node,
                                                   on_its_node, OK)
        else:
            TABLE[("snapshot verify", kind)] = row(OK, NODE_MAY_NOT_ON_CONTROLLER, OK, OK, here)
        if kind == "roset":
            TABLE[("snapshot push", kind)] = row(NEEDS_CONTROLLER, NODE_ON_ITSELF, ONLY_LOCAL_MOVE, ONLY_LOCAL_MOVE,
                                                 NEEDS_CONTROLLER)
            TABLE[("snapshot pull", kind)] = row(PULL_FROM_SELF, ADMIN_TRANSFER, ONLY_LOCAL_MOVE, ONLY_LOCAL_MOVE,
                                                 NO_CONTROLLER_HERE)
        elif kind == "placed":
            TABLE[("snapshot push", kind)] = row(NEEDS_CONTROLLER, NODE_ON_ITSELF, OK, OK, NEEDS_CONTROLLER)
            TABLE[("snapshot pull", kind)] = row(NO_CONTROLLER_HERE, PULL_FROM_SELF, PULL_FROM_SELF, OK, PULL_FROM_SELF)
        else:
            TABLE[("snapshot push", kind)] = row(NEEDS_CONTROLLER, NODE_ON_ITSELF, OK, OK, NEEDS_CONTROLLER)
            TABLE[("snapshot pull", kind)] = row(PULL_FROM_SELF, ADMIN_TRANSFER, OK, OK, NO_CONTROLLER_HERE)
    TABLE[("snapshot gc", "-")] = row(OK, NODE_MAY_NOT_ON_CONTROLLER, OK, OK, OK)


def _node_rows() -> None:
    own = "this host's own registry: consumer-b is not in it; a note says so and names --controller"
    TABLE[("node info", "-")] = row(OK, OK, OK, OK, OK)
    # Without --address, a registration keeps the address the node's serve registered (checked).
    kept = ok("keeps the address the node's serve registered")
    TABLE[("node register", "-")] = row(kept, kept, kept, refused(2, "so it takes no --on-node: node \"consumer-b\" "
                                                                  "registers itself"),
                                        ok("in this host's own registry, not the controller's; a note says so "
                                           "and names --controller"))
    TABLE[("node list", "-")] = row(OK, OK, OK, OK, ok(own))
    TABLE[("node show", "-")] = row(OK, NODE_ACTS_FOR_ITSELF, OK, OK, refused(3, ONLY_THIS_REGISTRY))
    TABLE[("node remove", "-")] = row(OK, NODE_ACTS_FOR_ITSELF, OK, OK,
                                      ok("removes from this host's own registry: not there, says so and "
                                         "names --controller"))
    # A node registered for the cell, holding no volume: the drain has nothing to move.
    TABLE[("node drain", "-")] = row(OK, NODE_ACTS_FOR_ITSELF, OK, OK,
                                     refused(5, "node drain runs from the controller seat"))
    # A node registered for the cell: whether volumes are placed on it is an operator's call.
    for verb in ("node cordon", "node uncordon"):
        TABLE[(verb, "-")] = row(OK, refused(7, "an admin's certificate may"), OK, OK,
                                 refused(3, ONLY_THIS_REGISTRY))


_volume_rows()
_snapshot_rows()
_node_rows()


def _iscsi_rows() -> None:
    """The target side only: connect needs a kernel initiator (a guest). An iscsi volume's
    snapshot is its image in the controller host's commit store: it moves as a local one does."""
    kind = "iscsi"
    # Without --controller consumer-a would make it with its own tgtd, which it has not: the
    # message says tgtd runs on the controller host and names --controller.
    TABLE[("volume create", kind)] = row(OK, OK, OK, OK, refused(
        6, "with this host's tgtd: where tgtd runs on the controller host, run it with --controller ADDRESS"))
    TABLE[("volume list", kind)] = row(OK, OK, OK, OK, NOT_LISTED_HERE)
    for verb in ("show", "expand"):
        TABLE[(f"volume {verb}", kind)] = row(OK, OK, OK, OK, NOT_HERE)
    not_mutable = refused(2, "volumes of provider \"iscsi\" have no parameters that can change")
    TABLE[("volume modify", kind)] = row(*(not_mutable,) * 4, NOT_HERE)
    TABLE[("volume delete", kind)] = row(OK, OK, OK, OK, NOTHING_TO_DELETE)
    for verb in ("map", "unmap"):
        TABLE[(f"volume {verb}", kind)] = row(OK, NODE_ACTS_FOR_ITSELF, OK, OK, NOT_HERE)
    for verb in ("connect", "disconnect", "stats"):
        TABLE[(f"volume {verb}", kind)] = (elsewhere(GUEST),) * len(SEATS)
    TABLE[("snapshot commit", kind)] = row(OK, OK, OK, OK, NOT_HERE)
    TABLE[("snapshot list", kind)] = row(OK, OK, OK, OK, NOT_HERE)
    TABLE[("snapshot show", kind)] = row(OK, OK, OK, OK, NO_SNAPSHOT_HERE)
    TABLE[("snapshot delete", kind)] = row(OK, OK, OK, OK, NOTHING_TO_DELETE)
    for verb in ("diff", "restore"):
        TABLE[(f"snapshot {verb}", kind)] = row(OK, OK, OK, OK, NO_SNAPSHOT_HERE)
    TABLE[("snapshot verify", kind)] = row(OK, NODE_MAY_NOT_ON_CONTROLLER, OK, OK, NO_SNAPSHOT_HERE)
    TABLE[("snapshot push", kind)] = row(NEEDS_CONTROLLER, NODE_ON_ITSELF, OK, OK, NEEDS_CONTROLLER)
    TABLE[("snapshot pull", kind)] = row(PULL_FROM_SELF, ADMIN_TRANSFER, OK, OK, NO_CONTROLLER_HERE)


_iscsi_rows()


def cells() -> list[Cell]:
    out = []
    for (verb, kind), outcomes in TABLE.items():
        assert len(outcomes) == len(SEATS), (verb, kind)
        for seat, (code, fragment, why) in zip(SEAT_ORDER, outcomes):
            out.append(Cell(seat, kind, verb, code, fragment, why))
    return out


def describe(cell: Cell) -> str:
    if cell.elsewhere:
        return f"not here: {cell.elsewhere}"
    if cell.exit == 0:
        return "works" + (f" ({cell.fragment})" if cell.fragment else "")
    return f"exit {cell.exit}: \u201c{cell.fragment}\u201d"


def markdown() -> str:
    """docs/reference/seats.md."""
    by_row: dict[tuple[str, str], dict[str, Cell]] = {}
    for cell in cells():
        by_row.setdefault((cell.verb, cell.kind), {})[cell.seat] = cell
    order = sorted(by_row, key=lambda key: (VERBS.index(key[0]), list(KINDS).index(key[1])))
    lines = [
        "# Seats: every verb from every seat",
        "",
        "<!-- Generated by scripts/gen-seat-matrix.py from tests/integration/seat_matrix.py: do not edit.",
        "     Regenerate: scripts/gen-seat-matrix.py docs/reference/seats.md -->",
        "",
        "Where a command can be run from and what it does there. Each cell is walked by",
        "`tests/integration/test_seat_matrix.py` in a lab of a controller host and two consumers",
        "(consumer-a, consumer-b), each in its own network namespace, each consumer running",
        "`serve --role node --listen`: a cell that works has its effect checked, a refusal its exit",
        "code ([exit-codes.md](exit-codes.md)) and the part of its message quoted here, which names",
        "the fix (which host, which flag). A node's own CLI (without `--controller`) answers from its",
        "own store and registry, and says so on stderr (in JSON output too), naming `--controller`.",
        "",
        "Seats (columns):",
        "",
    ]
    lines += [f"- **{seat}**: {text}" for seat, text in SEATS.items()]
    lines += ["", "Volume kinds:", ""]
    lines += [f"- **{kind}**: {text}" for kind, text in KINDS.items()]
    for group in ("volume", "snapshot", "node"):
        lines += ["", f"## {group}", "", "| verb | kind | " + " | ".join(SEATS) + " |",
                  "|---|---|" + "---|" * len(SEATS)]
        for verb, kind in order:
            if not verb.startswith(group + " "):
                continue
            texts = [describe(by_row[(verb, kind)][seat]).replace("|", "\\|") for seat in SEATS]
            lines.append(f"| `{verb}` | {kind} | " + " | ".join(texts) + " |")
    return "\n".join(lines) + "\n"
