"""Runs the shell blocks of the guides (docs/guides/**/*.md) as written (issue 34 item 3).

A guide's ```sh blocks are read in order with the HTML comments on the lines just before each
(docs/guides/README.md, "How the shell blocks are written"):

  <!-- run on: HOST -->                  which host runs it ("the controller", "consumer-a",
                                          "each consumer", "an admin's host"); unmarked: one host
  <!-- in the background: WHY -->        it runs until stopped (serve): started, waited for
  <!-- not run in the lab: WHY -->        never run here; WHY names where it is tested instead

Each block is split into commands (a line, with its `\\` continuations and here-documents), the
placeholders and paths are replaced with the test's values (a table the test writes down, so
the substitution is visible), and each command runs on its host with bash; the first that fails
stops the run with the guide's file and line, the command as written and as run, its exit code
and its output. The test then asks `assert_all_ran()`: every block of the guide either ran or
says why not.
"""
from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

from rosetctl_cli import Result

SOURCE = Path(__file__).resolve().parents[2]
GUIDES = SOURCE / "docs" / "guides"

# docs/guides/README.md's placeholders: a block that still holds one after substitution is an
# error (the test forgot a value), never run with the word in it.
PLACEHOLDERS = ("CONTROLLER_IP", "CONTROLLER_ADDRESS", "CONSUMER_A_IP", "CONSUMER_B_IP", "CONSUMER_IP",
                "NODE_ADDRESS", "PORTAL_ADDRESS")
ANNOTATION = re.compile(r"^<!--\s*(run on|in the background|not run in the lab)\s*:\s*(.*?)\s*-->\s*$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
FENCE = re.compile(r"^(```|~~~)\s*(\S*)\s*$")


class GuideError(AssertionError):
    """A guide that cannot be run as it is written (a block unmarked, a placeholder left over)."""


class CommandFailed(AssertionError):
    """A guide's command exited non-zero (or its background process did not come up)."""


@dataclass
class Command:
    line: int  # of its first line in the guide
    text: str  # as written, continuations and here-document included


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence
    heading: str  # the nearest heading above it
    commands: list[Command]
    run_on: str | None = None
    background: str | None = None
    not_run: str | None = None

    @property
    def where(self) -> str:
        return f"{shown(self.path)}:{self.line}"


def shown(path: Path) -> str:
    """A guide's path as a reader finds it: relative to the source tree when it is in it."""
    try:
        return str(path.relative_to(SOURCE))
    except ValueError:
        return str(path)


def split_commands(lines: Sequence[str], first_line: int) -> list[Command]:
    """The commands of a block's lines: blank and comment-only lines dropped, a line ending in `\\`
    joined with the next, a here-document taken whole up to its delimiter."""
    commands: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        start, text = i, [line]
        while text[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text.append(lines[i])
        for match in HEREDOC.finditer("\n".join(text)):
            delimiter = match.group(2)
            while i + 1 < len(lines):
                i += 1
                text.append(lines[i])
                if lines[i].strip() == delimiter:
                    break
            else:
                raise GuideError(f"line {first_line + start}: here-document {delimiter} never ends")
        commands.append(Command(first_line + start, "\n".join(text)))
        i += 1
    return commands


def read_blocks(path: Path) -> list[Block]:
    """Every ```sh block of a guide, in order, with its annotations. Other fences (yaml, toml, a
    block of output) are not commands and are skipped; an annotation before anything but an sh
    block, or one this runner does not know, is a GuideError."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    heading = ""
    pending: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("<!--") and ("run" in line or "background" in line):
            match = ANNOTATION.match(line)
            if not match or not match.group(2):
                raise GuideError(f"{path}:{i + 1}: an annotation this runner does not know (or without its "
                                 f"text): {line!r}; see docs/guides/README.md")
            key = {"run on": "run_on", "in the background": "background", "not run in the lab": "not_run"}
            pending[key[match.group(1)]] = match.group(2)
        elif fence:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence.group(1)), None)
            if end is None:
                raise GuideError(f"{path}:{i + 1}: a fenced block never closes")
            if fence.group(2) == "sh":
                blocks.append(Block(path, i + 1, heading, split_commands(lines[i + 1:end], i + 2), **pending))
            elif pending:
                raise GuideError(f"{path}:{i + 1}: {sorted(pending)} annotates a {fence.group(2) or 'plain'} "
                                 "block; only sh blocks run")
            pending = {}
            i = end
        elif line.strip() and pending:
            raise GuideError(f"{path}:{i + 1}: an annotation must be just before its sh block")
        i += 1
    return blocks


def guides() -> list[Path]:
    return sorted(p for p in GUIDES.rglob("*.md") if p.name != "README.md")


# Which test file runs each guide's blocks (test_guide_blocks.py checks that every guide with a
# block to run is here, and that the file named runs it and calls assert_all_ran).
RUN_BY = {
    "one-host.md": "test_guide_one_host.py",
    "providers/local.md": "test_guide_one_host.py",
    "providers/roset.md": "test_guide_one_host.py",
    "across-hosts.md": "test_guide_across_hosts.py",
    "operating.md": "test_guide_across_hosts.py",
}


class Executor(Protocol):
    """Where commands run: this machine (LocalExecutor) or a host of the network-namespace lab."""

    name: str

    def run(self, script: str, timeout: float) -> Result: ...

    def start(self, script: str) -> subprocess.Popen: ...


@dataclass
class LocalExecutor:
    """bash on this machine with an environment of the test's (ROSETCTL_CONFIG, PATH...)."""

    env: dict[str, str]
    cwd: Path
    name: str = "this host"
    started: list[subprocess.Popen] = field(default_factory=list)

    def run(self, script: str, timeout: float) -> Result:
        done = subprocess.run(["bash", "-c", script], env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
        return Result(done.returncode, done.stdout, done.stderr)

    def start(self, script: str) -> subprocess.Popen:
        proc = subprocess.Popen(["bash", "-c", f"exec {script}"], env=self.env, cwd=self.cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.started.append(proc)
        return proc


@dataclass
class HostExecutor:
    """bash on one host of the lab (host_lab.Host), with env added to the host's own."""

    host: object  # host_lab.Host
    env: dict[str, str] = field(default_factory=dict)
    config: Path | None = None  # ROSETCTL_CONFIG once it exists (the host's /etc/rosetctl/config.toml)

    @property
    def name(self) -> str:
        return self.host.name

    def _env(self) -> dict[str, str]:
        env = dict(self.env)
        if self.config is not None and self.config.exists():
            env["ROSETCTL_CONFIG"] = str(self.config)
        return env

    def run(self, script: str, timeout: float) -> Result:
        return self.host.run(["bash", "-c", script], env=self._env(), timeout=timeout)

    def start(self, script: str) -> subprocess.Popen:
        return self.host.start(["bash", "-c", f"exec {script}"], env=self._env())


@dataclass
class Runner:
    """Runs one guide's blocks. `hosts` maps a block's `run on:` text to the executors it runs on
    (None: unmarked blocks); `values(block, executor)` gives the placeholder values and path
    replacements for a block run there, as (old, new) pairs applied in order."""

    path: Path
    hosts: dict[str | None, list[Executor]]
    values: Callable[[Block, Executor], list[tuple[str, str]]]
    ready: Callable[[Executor, str, subprocess.Popen], None] | None = None  # waits for a background one
    timeout: float = 120
    blocks: list[Block] = field(init=False)
    ran: list[Block] = field(default_factory=list)
    background: list[subprocess.Popen] = field(default_factory=list)

    def __post_init__(self):
        self.blocks = read_blocks(self.path)

    def section(self, heading: str) -> list[Block]:
        """The blocks under a heading (the nearest one above each block)."""
        found = [b for b in self.blocks if b.heading == heading]
        if not found:
            raise GuideError(f"{shown(self.path)} has no sh block under a heading {heading!r} "
                             f"(headings with blocks: {sorted({b.heading for b in self.blocks})})")
        return found

    def run_section(self, heading: str) -> None:
        for block in self.section(heading):
            self.run_block(block)

    def run_all(self) -> None:
        for block in self.blocks:
            if block not in self.ran:
                self.run_block(block)

    def run_block(self, block: Block) -> None:
        if block.not_run is not None:
            self.ran.append(block)  # accounted for: it says why it is not run
            return
        executors = self.hosts.get(block.run_on)
        if not executors:
            raise GuideError(f"{block.where}: no lab host for `run on: {block.run_on}` "
                             f"(the test knows {sorted(map(str, self.hosts))})")
        for executor in executors:
            exported: list[str] = []  # a block's `export` lines hold for the rest of it, as in one shell
            for command in block.commands:
                self._run(block, command, executor, exported)
                if command.text.startswith("export "):
                    exported.append(command.text)
        self.ran.append(block)

    def _run(self, block: Block, command: Command, executor: Executor, exported: Sequence[str] = ()) -> None:
        script = "\n".join([*exported, command.text])
        for old, new in self.values(block, executor):
            script = script.replace(old, new)
        left = [word for word in PLACEHOLDERS if re.search(rf"\b{word}\b", script)]
        if left:
            raise GuideError(f"{shown(block.path)}:{command.line}: no lab value for {left} in "
                             f"`{command.text}`")
        where = f"{shown(block.path)}:{command.line}"
        if block.background is not None:
            if len(block.commands) != 1:
                raise GuideError(f"{where}: a background block holds one command")
            proc = executor.start(script)
            self.background.append(proc)
            try:
                if self.ready is not None:
                    self.ready(executor, script, proc)
            except AssertionError as e:
                raise CommandFailed(f"{where}: `{command.text}` on {executor.name} did not come up "
                                    f"(as run: `{script}`): {e}") from None
            return
        started = time.monotonic()
        result = executor.run(script, self.timeout)
        if result.rc != 0:
            raise CommandFailed(
                f"{where}: `{command.text}` failed on {executor.name} with exit {result.rc} after "
                f"{time.monotonic() - started:.1f} s\n  as run: `{script}`\n  stderr: {result.stderr.strip()}\n"
                f"  stdout: {result.stdout.strip()[-2000:]}")

    def assert_all_ran(self) -> None:
        """Every block of the guide ran, or says why it is not run in the lab."""
        left = [f"{b.where} (under {b.heading!r})" for b in self.blocks if b not in self.ran]
        assert not left, f"blocks of {shown(self.path)} neither run by the test nor marked " \
                         f"`<!-- not run in the lab: WHY -->`: {left}"
