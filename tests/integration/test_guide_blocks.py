"""The guides' shell blocks are all accounted for, and the runner that executes them can fail
(issue 34 item 3). Every sh block of docs/guides/ either runs in a test (guide_blocks.RUN_BY
names the file, which calls assert_all_ran) or says why not; every placeholder a block uses is
one docs/guides/README.md lists; and a command that fails stops the run naming the guide, the
line, the command, its exit code and its stderr."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import guide_blocks
from guide_blocks import GUIDES, PLACEHOLDERS, RUN_BY, CommandFailed, GuideError, LocalExecutor, Runner
from rosetctl_cli import isolated_environment

HERE = Path(__file__).resolve().parent


def test_every_block_runs_in_a_test_or_says_why_not():
    for guide in guide_blocks.guides():
        name = str(guide.relative_to(GUIDES))
        to_run = [b for b in guide_blocks.read_blocks(guide) if b.not_run is None]
        if not to_run:
            continue
        assert name in RUN_BY, (f"docs/guides/{name} has blocks to run ({[b.where for b in to_run]}) but no "
                                "test runs them: add it to guide_blocks.RUN_BY, or mark each block "
                                "`<!-- not run in the lab: WHY -->`")
        test = (HERE / RUN_BY[name]).read_text()
        assert f'"{name}"' in test and "assert_all_ran" in test, (
            f"{RUN_BY[name]} is to run docs/guides/{name} and check that every block ran")
    for name in RUN_BY:
        assert (GUIDES / name).is_file(), f"guide_blocks.RUN_BY names docs/guides/{name}, which is gone"


def test_the_readme_blocks_run_in_a_test_or_say_why_not():
    """README.md's own blocks follow the guides' conventions: test_guide_one_host.py runs them."""
    to_run = [b for b in guide_blocks.read_blocks(guide_blocks.SOURCE / "README.md") if b.not_run is None]
    assert to_run, "README.md has no block to run: its tour is gone?"
    test = (HERE / "test_guide_one_host.py").read_text()
    assert '"README.md"' in test and "assert_all_ran" in test, (
        "test_guide_one_host.py is to run README.md's blocks and check that every block ran")


def test_placeholders_are_the_ones_the_conventions_list():
    conventions = (GUIDES / "README.md").read_text()
    rows = [line.split("|")[1] for line in conventions.splitlines() if line.strip().startswith("|")]
    listed = {word for cell in rows for word in re.findall(r"`([A-Z][A-Z_]+)`", cell)}
    assert listed == set(PLACEHOLDERS), f"docs/guides/README.md lists {sorted(listed)}, the runner {PLACEHOLDERS}"
    for guide in guide_blocks.guides():
        for block in guide_blocks.read_blocks(guide):
            for command in block.commands:
                words = set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", command.text))
                words -= {"ROSET_API_KEY", "ROSET_API_KEY_FILE", "ROSETCTL_SERVE_ARGS", "EOF"}
                unknown = sorted(w for w in words if w not in PLACEHOLDERS and not w.startswith("ROSET"))
                assert not unknown, f"{guide}:{command.line}: {unknown} look like placeholders the README lacks"


def test_commands_are_split_as_a_shell_reads_them():
    lines = ["# a comment", "a one", "b \\", "   continued", "", "cat > f <<'EOF'", "x = 1", "EOF", "c # note"]
    commands = guide_blocks.split_commands(lines, 10)
    assert [(c.line, c.text) for c in commands] == [
        (11, "a one"), (12, "b \\\n   continued"), (15, "cat > f <<'EOF'\nx = 1\nEOF"), (18, "c # note")]


def test_an_annotation_the_runner_does_not_know_is_refused(tmp_path):
    guide = tmp_path / "g.md"
    guide.write_text("<!-- run in the lab: maybe -->\n```sh\ntrue\n```\n")
    with pytest.raises(GuideError, match="does not know"):
        guide_blocks.read_blocks(guide)
    guide.write_text("<!-- not run in the lab: why -->\n\nprose\n```sh\ntrue\n```\n")
    with pytest.raises(GuideError, match="just before"):
        guide_blocks.read_blocks(guide)


def test_a_failing_command_stops_the_run_naming_the_guide_line_and_command(tmp_path):
    """The runner can fail: a guide with a mistyped verb (as a guide left behind by a renamed
    command would be) fails at that command, and nothing after it runs."""
    binary = os.environ.get("ROSETCTL_BIN") or str(HERE.parents[1] / "build" / "release" / "src" / "rosetctl")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rosetctl").symlink_to(binary)
    guide = tmp_path / "broken.md"
    guide.write_text("# Broken\n\n```sh\nrosetctl --version\nrosetctl volume frobnicate demo   # no such verb\n"
                     "touch AFTER\n```\n")
    env = isolated_environment() | {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    runner = Runner(guide, {None: [LocalExecutor(env, tmp_path)]}, lambda block, executor: [])
    with pytest.raises(CommandFailed) as failed:
        runner.run_all()
    message = str(failed.value)
    assert f"{guide}:5:" in message and "rosetctl volume frobnicate demo" in message, message
    assert "exit 2" in message and "frobnicate" in message.split("stderr:", 1)[1], message
    assert not (tmp_path / "AFTER").exists(), "expected the run to stop at the failed command"
    with pytest.raises(AssertionError, match="neither run"):
        runner.assert_all_ran()


def test_a_placeholder_without_a_value_is_an_error_not_a_command(tmp_path):
    guide = tmp_path / "g.md"
    guide.write_text("```sh\necho CONTROLLER_ADDRESS > out\n```\n")
    runner = Runner(guide, {None: [LocalExecutor(isolated_environment(), tmp_path)]}, lambda b, e: [])
    with pytest.raises(GuideError, match="CONTROLLER_ADDRESS"):
        runner.run_all()
    assert not (tmp_path / "out").exists()
