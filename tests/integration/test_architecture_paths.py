"""Every path docs/ARCHITECTURE.md names exists in the source tree, and every function it places
in a file is in that file (issue 37). The document is the map a newcomer reads first; files move
(src/daemon/ to src/cluster/, the state store split by record family) and a name left behind
sends the reader to nothing. It named a `registry_client.h` that never existed and a
`place_own_snapshot` that is `place_own_source`.

What counts as a path, in a `code span` outside fenced blocks:
- `src/core/`, `tests/README.md`, `ansible/...`: from the top of the tree;
- `core/validate.h`, `daemon/placement.cc`, `unit/...`: from src/ or tests/;
- a bare `name.cc` or `local/`: in a folder the same table row, paragraph or list item (or its
  section's heading) names, e.g. `validate.h` in the row of `src/core/`, or at the top of the
  tree or in proto/ (`README.md`, `rosetctl.proto`), which a paragraph names without its folder;
- `core/run_program`: a module by its stem (a .h, .cc or .py of that name).
Runtime names (`store/incoming/`, `/etc/rosetctl/config.toml`) name no source folder and are
left alone. `name` (`file`) says the function or class `name` is in `file`."""
from __future__ import annotations

import os
import re
from pathlib import Path

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
DOCUMENT = SOURCE / "docs" / "ARCHITECTURE.md"

SPAN = re.compile(r"`([^`\n]+)`")
EXTENSIONS = r"(?:h|cc|py|proto|md|sh|txt|toml|yml|yaml|json|j2|cmake|in)"
FILE_NAME = re.compile(rf"^[\w.+-]+\.{EXTENSIONS}$")
PATH = re.compile(r"^[\w.+-]+(?:/[\w.+-]+)+/?$|^[\w.+-]+/$")
# `place_own_source` (`daemon/placement.cc`): a name, then the file it is in.
PLACED_NAME = re.compile(rf"`(\w+)(?:\(\))?` \(`([\w./-]+\.{EXTENSIONS})`")
STEM_EXTENSIONS = (".h", ".cc", ".py")


def blocks(text: str) -> list[tuple[int, str, str]]:
    """(first line, section heading, text) of each table row, list item and paragraph outside
    fenced code."""
    out: list[tuple[int, str, str]] = []
    lines: list[str] = []
    start, heading, fence = 0, "", None

    def close() -> None:
        if lines:
            out.append((start, heading, " ".join(lines)))
            lines.clear()

    for number, line in enumerate(text.splitlines(), 1):
        marker = re.match(r"^\s*(```|~~~)", line)
        if marker:
            close()
            fence = None if fence == marker.group(1) else (fence or marker.group(1))
            continue
        if fence is not None:
            continue
        if line.startswith("#"):
            close()
            heading = line
            continue
        if not line.strip() or line.startswith("|") or re.match(r"^\s*([-*]|\d+\.)\s", line):
            close()
        if line.strip():
            if not lines:
                start = number
            lines.append(line)
    close()
    return out


class Tree:
    """The source tree's top folders, to tell a source path from a runtime one."""

    def __init__(self, root: Path):
        self.root = root
        self.top = {p.name for p in root.iterdir() if p.name != "build"}
        self.under_src = {p.name for p in (root / "src").iterdir() if p.is_dir()}
        self.under_tests = {p.name for p in (root / "tests").iterdir() if p.is_dir()}

    def known_folder(self, span: str) -> bool:
        first = span.split("/")[0]
        return first in self.top or first in self.under_src or first in self.under_tests

    def candidates(self, span: str, folders: list[Path]) -> list[Path]:
        first = span.split("/")[0]
        out = []
        if first in self.top:
            out.append(self.root / span)
        if first in self.under_src:
            out.append(self.root / "src" / span)
        if first in self.under_tests:
            out.append(self.root / "tests" / span)
        return out + [folder / span for folder in folders]

    def anywhere(self, name: str) -> bool:
        return any(path.name == name for path in self.root.rglob(name)
                   if path.relative_to(self.root).parts[0] != "build")


def exists(candidate: Path) -> bool:
    return candidate.exists() or any(
        candidate.with_name(candidate.name + ext).is_file() for ext in STEM_EXTENSIONS)


def problems_in(text: str, tree: Tree) -> list[str]:
    problems = []
    for line, heading, block in blocks(text):
        spans = SPAN.findall(heading) + SPAN.findall(block)
        # The folders this block (or its section's heading) names, for the bare names in it.
        folders: list[Path] = []
        everywhere = [tree.root, tree.root / "proto"]
        for span in spans:
            if PATH.match(span):
                found = [c for c in tree.candidates(span, folders) if c.is_dir()]
                if found:
                    folders.append(found[0])
        for span in spans:
            where = f"docs/ARCHITECTURE.md:{line}: `{span}`"
            if PATH.match(span):
                names_file = re.search(rf"\.{EXTENSIONS}$", span) is not None
                if not names_file and not span.endswith("/") and not tree.known_folder(span):
                    continue  # `Catalog/GetPublishSecrets`, `list|show`: not a path
                candidates = tree.candidates(span, folders)
                if not candidates and not names_file:
                    continue  # a runtime folder (the state directory's `store/`, `trash/`)
                if not any(exists(c) for c in candidates):
                    problems.append(f"{where}: no such file or folder")
            elif FILE_NAME.match(span):
                if folders:
                    if not any((folder / span).exists() for folder in folders + everywhere):
                        shown = ", ".join(str(f.relative_to(tree.root)) + "/" for f in folders)
                        problems.append(f"{where}: not in {shown}, the folders it is named with")
                elif not tree.anywhere(span):
                    problems.append(f"{where}: no file of that name in the tree")
        for name, path in PLACED_NAME.findall(block):
            files = [c for c in tree.candidates(path, folders) if c.is_file()]
            if files and not any(re.search(rf"\b{name}\b", f.read_text()) for f in files):
                problems.append(f"docs/ARCHITECTURE.md:{line}: `{name}` is not in {path}")
    return problems


def test_every_path_architecture_md_names_exists():
    problems = problems_in(DOCUMENT.read_text(), Tree(SOURCE))
    assert not problems, "\n".join(problems)


def test_the_check_finds_a_wrong_name():
    """The check is not vacuous: each kind of wrong name in a document is found."""
    tree = Tree(SOURCE)
    wrong = "\n\n".join([
        "| core | `src/core/` | `state_store.h`, `no_such_file.h` |",
        "See `src/daemon/gone.cc` and `core/gone.h`.",
        "In `src/cli/`: `registry_client.h`; from `proto/`'s `rosetctl.proto`, `csi.proto`.",
        "`no_such_function` (`core/validate.h`) and `escape_text` (`core/validate.h`).",
        "## Somewhere (`src/providers/`)\n\n`local/` and `nowhere/`.",
    ])
    found = problems_in(wrong, tree)
    for name in ("no_such_file.h", "src/daemon/gone.cc", "core/gone.h", "registry_client.h",
                 "no_such_function", "nowhere/"):
        assert any(f"`{name}`" in problem for problem in found), (name, found)
    assert not any(f"`{name}`" in problem for problem in found
                   for name in ("state_store.h", "src/core/", "local/", "escape_text", "rosetctl.proto",
                                "csi.proto"))
    # Runtime names and RPC paths are not source paths.
    assert problems_in("Under the state dir: `trash/`, `store/incoming/`, "
                       "`Catalog/GetPublishSecrets`, `/etc/rosetctl/config.toml`.", tree) == []
