"""The tables of JSON fields (docs/reference/json.md, once README's "JSON output") and the
binary's `-o json` output name exactly the same fields, both ways: a field the binary prints
that the page does not list fails, and so does a listed field the binary no longer prints."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
SPAN = re.compile(r"`([^`]*)`")
OBJECT = re.compile(r"^\[?\{([\w, ]*)\}\]?$")  # `{a, b}` or `[{a, b}]`, not a sample value
NESTED = re.compile(r"^(\w+): \{([^{}]*)\}$")  # `name: {a, b}`


def names(listing: str) -> set[str]:
    return {name.strip() for name in listing.split(",") if name.strip()}


def readme_tables() -> list[tuple[str, list[list[str]]]]:
    """Every table of docs/reference/json.md: (header, rows of cells)."""
    section = (SOURCE / "docs" / "reference" / "json.md").read_text()
    tables, rows, header = [], None, None
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if header is None:
                header, rows = " | ".join(cells), []
            elif not set(line) <= set("|- "):
                rows.append(cells)
        elif header is not None:
            tables.append((header, rows))
            header = None
    return tables


class Spec:
    """What json.md promises: an object's fields and, for some, the fields of what they hold."""

    def __init__(self, fields: set[str], nested: dict[str, set[str]]):
        self.fields, self.nested = fields, nested

    def check(self, what: str, value: dict) -> None:
        assert isinstance(value, dict), f"{what}: expected a JSON object, got {value!r}"
        printed = set(value)
        assert printed == self.fields, (
            f"{what}: json.md lists {sorted(self.fields - printed)} that the binary does not print, "
            f"and the binary prints {sorted(printed - self.fields)} that json.md does not list")
        for field, inner in self.nested.items():
            items = value[field] if isinstance(value[field], list) else [value[field]]
            for item in items:
                assert set(item) == inner, (
                    f"{what}.{field}: json.md lists {sorted(inner)}, the binary prints {sorted(item)}")


def field_table(rows: list[list[str]]) -> Spec:
    fields, nested = set(), {}
    for field_cell, meaning in rows:
        listed = SPAN.findall(field_cell)
        fields |= set(listed)
        spans = SPAN.findall(meaning)
        shape = OBJECT.match(spans[0]) if spans else None
        if len(listed) == 1 and shape:
            nested[listed[0]] = names(shape.group(1))
    return Spec(fields, nested)


def verb_table(rows: list[list[str]], bases: dict[str, Spec]) -> dict[str, Spec]:
    """`bases`: what "the volume" or "the node" at the start of a row stands for."""
    specs = {}
    for verb_cell, prints in rows:
        base = next((spec for name, spec in bases.items() if prints.startswith(f"the {name}")), None)
        fields = set(base.fields) if base else set()
        nested = dict(base.nested) if base else {}
        spans = SPAN.findall(prints)
        objects = [OBJECT.match(span) for span in spans if span.startswith("{")]
        if objects and objects[0]:
            fields |= names(objects[0].group(1))
        for span in spans:
            inner = NESTED.match(span)
            if inner:
                nested[inner.group(1)] = names(inner.group(2))
        key = SPAN.sub(lambda m: m.group(1), verb_cell)
        assert key not in specs, f"json.md lists {key!r} twice"
        specs[key] = Spec(fields, nested)
    return specs


# Verbs whose output needs more than one host: the test named checks it against json.md with
# json_specs(), so this file only makes sure that test names the verb.
CHECKED_ELSEWHERE = {"volume move": "test_volume_move.py", "node drain": "test_node_drain.py",
                     "node cordon": "test_node_drain.py", "node uncordon": "test_node_drain.py",
                     "volume replicate": "test_volume_replicas.py"}


def json_specs() -> dict[str, Spec]:
    tables = readme_tables()
    fields = [rows for header, rows in tables if header == "field | meaning"]
    verbs = [rows for header, rows in tables if header == "verb | prints"]
    assert len(fields) == 3 and len(verbs) == 3, f"expected json.md's volume, snapshot and node tables: {tables}"
    volume, snapshot, node = (field_table(rows) for rows in fields)
    specs = {"volume": volume, "snapshot": snapshot, "node": node}
    for rows in verbs:
        specs.update(verb_table(rows, {"volume": volume, "node": node}))
    return specs


@pytest.fixture(scope="module")
def readme():
    return json_specs()


def test_readme_json_tables_match_every_verbs_output(readme, cli, workdir):
    checked = set()

    def check(key: str, value) -> None:
        readme[key].check(key, value)
        checked.add(key)

    for name, extra in (("dir", []), ("img", ["--type", "image", "--size", "64Mi"]),
                        ("blk", ["--block", "--size", "16Mi"])):
        check("volume", cli.ok_json("volume", "create", name, *extra))
    for item in cli.ok_json("volume", "list"):
        check("volume", item)
    check("volume connect", cli.ok_json("volume", "connect", "dir", "--target", workdir / "dir"))
    again = cli.ok_json("volume", "connect", "dir", "--target", workdir / "dir")
    check("volume connect", again)
    assert again["already_connected"] is True
    check("volume", cli.ok_json("volume", "show", "dir"))
    check("volume stats", cli.ok_json("volume", "stats", "dir"))
    check("volume connect", cli.ok_json("volume", "connect", "blk"))
    check("volume stats of a block volume", cli.ok_json("volume", "stats", "blk"))
    check("volume modify", cli.ok_json("volume", "modify", "blk", "--param", "directIO=false"))
    check("volume expand", cli.ok_json("volume", "expand", "img", "--size", "128Mi"))

    (workdir / "dir" / "a.txt").write_text("one")
    first = cli.ok_json("snapshot", "commit", "dir", "-m", "first")
    check("snapshot", first)
    (workdir / "dir" / "a.txt").write_text("two")
    second = cli.ok_json("snapshot", "commit", "dir", "-m", "second")
    check("snapshot", cli.ok_json("snapshot", "show", second["id"]))
    for item in cli.ok_json("snapshot", "list"):
        check("snapshot", item)
    check("snapshot diff", cli.ok_json("snapshot", "diff", first["id"], second["id"]))
    check("snapshot verify", cli.ok_json("snapshot", "verify"))
    check("snapshot restore", cli.ok_json("snapshot", "restore", first["id"], "--name", "back"))
    check("snapshot delete", cli.ok_json("snapshot", "delete", first["id"]))
    check("snapshot gc", cli.ok_json("snapshot", "gc"))

    for name in ("dir", "blk"):
        check("volume disconnect", cli.ok_json("volume", "disconnect", name))
    check("volume delete", cli.ok_json("volume", "delete", "back"))

    check("node register", cli.ok_json("node", "register", "--address", "[::1]:9443"))
    check("node register", cli.ok_json("--node-id", "other", "node", "register",
                                       "--iscsi-initiator", "iqn.1993-08.org.debian:01:other"))
    for item in cli.ok_json("node", "list"):
        check("node", item)
    check("node", cli.ok_json("node", "show", "other"))
    check("node remove", cli.ok_json("node", "remove", "other"))
    for verb, test in CHECKED_ELSEWHERE.items():
        assert f'json_specs()["{verb}"]' in (Path(__file__).parent / test).read_text(), (
            f"{test} is to check the JSON of {verb!r} against json.md")
    checked |= set(CHECKED_ELSEWHERE)
    assert checked == set(readme), f"json.md tables without a check here: {sorted(set(readme) - checked)}"
