"""The layers of src/ include one way (src/CMakeLists.txt, docs/ARCHITECTURE.md): core, then
providers, then daemon (what one host does), then cluster (what crosses hosts, and the assembly of
a serve process), then cli; a file includes its own layer and those below, never one above. Above
all, nothing under src/daemon/ includes cluster/ (issue 37): a reader of a single host never opens
the cluster folder, and daemon/ states what it needs of the cluster as interfaces of its own
(daemon/call_gate.h, daemon/remote_sources.h) that cluster/ implements."""
from __future__ import annotations

import os
import re
from pathlib import Path

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
LAYERS = ["core", "providers", "daemon", "cluster", "cli"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def upward_includes(src: Path) -> list[str]:
    """`file: #include "x"` for every include of a layer above the file's own."""
    found = []
    for layer in LAYERS:
        folder = src / layer
        if not folder.is_dir():
            continue
        rank = LAYERS.index(layer)
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".h", ".cc", ".in"):
                continue
            for included in INCLUDE.findall(path.read_text(errors="replace")):
                top = included.split("/")[0]
                if top in LAYERS and LAYERS.index(top) > rank:
                    found.append(f'{path.relative_to(src)}: #include "{included}"')
    return found


def test_no_layer_includes_one_above_it():
    found = upward_includes(SOURCE / "src")
    assert not found, "includes against the layers' direction:\n" + "\n".join(found)


def test_nothing_under_daemon_includes_cluster():
    daemon = [line for line in upward_includes(SOURCE / "src") if line.startswith("daemon/")]
    assert not daemon, "src/daemon/ reaches into src/cluster/:\n" + "\n".join(daemon)
    assert (SOURCE / "src" / "daemon").is_dir() and (SOURCE / "src" / "cluster").is_dir()


def test_the_check_finds_an_upward_include(tmp_path: Path):
    (tmp_path / "daemon").mkdir()
    (tmp_path / "core").mkdir()
    (tmp_path / "daemon" / "call_log.h").write_text(
        '#pragma once\n#include "core/status.h"\n#include "cluster/authorization.h"\n')
    (tmp_path / "core" / "status.cc").write_text('#include "core/status.h"\n  #include "cli/x.h"\n')
    assert upward_includes(tmp_path) == [
        'core/status.cc: #include "cli/x.h"',
        'daemon/call_log.h: #include "cluster/authorization.h"',
    ]
