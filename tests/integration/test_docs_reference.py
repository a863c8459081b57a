"""docs/reference/ against the binary and the code, so the reference cannot drift (issue 34):

- commands.md is exactly what `scripts/gen-manpage.py --markdown` makes of the binary's --help
  (the source rosetctl(1) is made from);
- flags.md's tables list exactly the global flags `rosetctl --help` shows, each with the same
  environment variable and default;
- configuration.md's top-level keys and [serve]'s keys are exactly the ones the binary accepts
  (its own "known:" list, from an unknown key);
- exit-codes.md's table maps each CSI status code to the exit code src/cli/exit_codes.h maps it
  to, and lists the codes `rosetctl --help` names;
- completions/ is exactly what `rosetctl completion SHELL` prints."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


from rosetctl_cli import isolated_environment

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])
REFERENCE = SOURCE / "docs" / "reference"
SPAN = re.compile(r"`([^`]*)`")


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table: (header cells, rows of cells); `\\|` inside a cell stays in it."""
    out, header, rows = [], None, []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [cell.strip().replace("\\|", "|")
                     for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if header is None:
                header, rows = cells, []
            elif not set(line) <= set("|-: "):
                rows.append(cells)
        elif header is not None:
            out.append((header, rows))
            header = None
    return out


def run(binary: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60,
                          env=env or isolated_environment())


def help_flags(text: str) -> dict[str, tuple[str | None, str | None]]:
    """`rosetctl --help`'s options: {long flag: (env var, default)}, without --help/--version.
    An option's environment variable is its `(Env:NAME)`, or for --config the `env NAME` its
    description names (CLI11 reads that one itself, before any other flag)."""
    flags, last = {}, None
    for line in text.splitlines():
        match = re.match(r"^  (?:-\w,)?(--[\w-]+)(\S*)(.*)$", line)
        if match:
            last = None
            if match.group(1) in ("--help", "--version"):
                continue
            spec = match.group(2) + match.group(3)
            env = re.search(r"\(Env:(\w+)\)", spec) or re.search(r"\(env (\w+)", spec)
            default = re.search(r"=(\S+)", spec)
            last = match.group(1)
            flags[last] = (env.group(1) if env else None, default.group(1) if default else None)
        elif last and line.startswith("      ") and flags[last][0] is None:
            env = re.search(r"\(env (\w+)", line)
            if env:
                flags[last] = (env.group(1), None)
    return flags


def test_commands_page_is_what_the_binary_says(rosetctl_binary, tmp_path):
    generated = tmp_path / "commands.md"
    subprocess.run([sys.executable, str(SOURCE / "scripts" / "gen-manpage.py"), "--markdown",
                    rosetctl_binary, str(generated)], check=True, timeout=120)
    committed = (REFERENCE / "commands.md").read_text()
    assert committed == generated.read_text(), (
        "docs/reference/commands.md is not what the binary's --help says: regenerate it with "
        "scripts/gen-manpage.py --markdown build/release/src/rosetctl docs/reference/commands.md")


def test_shipped_completions_are_what_the_binary_prints(rosetctl_binary):
    # completions/ goes into the package as it is: a verb added without regenerating them
    # (volume move was) would not complete.
    for shell in ("bash", "zsh", "fish"):
        printed = subprocess.run([rosetctl_binary, "completion", shell], capture_output=True, text=True,
                                 env=isolated_environment(), timeout=60, check=True).stdout
        assert (SOURCE / "completions" / f"rosetctl.{shell}").read_text() == printed, (
            f"completions/rosetctl.{shell} is not what `rosetctl completion {shell}` prints: regenerate "
            f"it with build/release/src/rosetctl completion {shell} > completions/rosetctl.{shell}")


def test_flags_page_lists_every_global_flag_as_the_binary_has_it(rosetctl_binary):
    binary = help_flags(run(rosetctl_binary, "--help").stdout)
    assert "--controller" in binary and "--iscsi-portal" in binary, f"cannot read --help: {binary}"
    documented = {}
    for header, rows in tables((REFERENCE / "flags.md").read_text()):
        if header[:3] != ["flag", "env", "default"]:
            continue
        for flag_cell, env_cell, default_cell, _ in rows:
            env = SPAN.findall(env_cell)
            default = SPAN.findall(default_cell)
            for flag in re.findall(r"--[\w-]+", flag_cell):
                documented[flag] = (env[0] if env else None, default[0] if default else None)
    assert set(documented) == set(binary), (
        f"docs/reference/flags.md lists {sorted(set(documented) - set(binary))} that --help does not "
        f"show, and --help shows {sorted(set(binary) - set(documented))} that it does not list")
    for flag, (env, default) in binary.items():
        doc_env, doc_default = documented[flag]
        assert doc_env == env, f"{flag}: flags.md says env {doc_env}, --help says {env}"
        if default is not None and flag != "--config":  # the test's ROSETCTL_CONFIG shows there
            assert doc_default == default, f"{flag}: flags.md says default {doc_default}, --help says {default}"


def known_keys(binary: str, tmp_path: Path, toml: str) -> list[str]:
    config = tmp_path / "config.toml"
    config.write_text(toml)
    done = run(binary, "--config", str(config), "--state-dir", str(tmp_path / "state"), "volume", "list")
    assert done.returncode == 2, done
    match = re.search(r"\(known: ([^)]*)\)", done.stderr)
    assert match, f"expected the binary to name the keys it knows: {done.stderr}"
    return [key.strip() for key in match.group(1).split(",")]


def test_configuration_page_lists_the_keys_the_binary_accepts(rosetctl_binary, tmp_path):
    text = (REFERENCE / "configuration.md").read_text()
    keys = [SPAN.findall(row[0])[0] for header, rows in tables(text) if header == ["key", "flag"]
            for row in rows]
    assert sorted(keys) == sorted(known_keys(rosetctl_binary, tmp_path, "no-such-key = 1\n")), (
        "configuration.md's top-level keys differ from the ones the binary accepts")
    serve = known_keys(rosetctl_binary, tmp_path, "[serve]\nno-such-key = 1\n")
    listed = re.split(r"\.\s", text[text.index("`[serve]` takes"):])[0]
    assert sorted(SPAN.findall(listed)[1:]) == sorted(serve), (
        f"configuration.md's [serve] keys differ from the binary's: {serve}")


CODE_NAME = re.compile(r"Code::k(\w+)")


def code_map() -> dict[str, int]:
    """src/cli/exit_codes.h's switch: {CSI status code name: exit code}."""
    header = (SOURCE / "src" / "cli" / "exit_codes.h").read_text()
    values = {name: int(value) for name, value in re.findall(r"(kExit\w+) = (\d+)", header)}
    out, pending = {}, []
    for line in header[header.index("switch"):].splitlines():
        case = CODE_NAME.search(line)
        if case:
            pending.append(re.sub(r"(?<!^)([A-Z])", r"_\1", case.group(1)).upper())
        returned = re.search(r"return (kExit\w+);", line)
        if returned:
            for name in pending:
                out[name] = values[returned.group(1)]
            pending = []
    return out


def test_exit_codes_page_matches_the_code_and_help(rosetctl_binary):
    (header, rows), = [t for t in tables((REFERENCE / "exit-codes.md").read_text()) if t[0][0] == "code"]
    documented = {}
    for code, _, statuses in rows:
        for status in re.findall(r"\b[A-Z][A-Z_]*[A-Z]\b", statuses):
            documented[status] = int(code)
    mapped = code_map()
    assert mapped.get("NOT_FOUND") == 3 and mapped.get("OK") == 0, f"cannot read exit_codes.h: {mapped}"
    for status, code in mapped.items():
        assert documented.get(status) == code, (
            f"{status}: exit_codes.h gives exit {code}, exit-codes.md says {documented.get(status)}")
    for status, code in documented.items():
        assert mapped.get(status, 1) == code, (
            f"{status}: exit-codes.md says exit {code}, exit_codes.h gives {mapped.get(status, 1)} "
            "(unlisted codes fall to 1)")
    footer = run(rosetctl_binary, "--help").stdout.split("Exit codes:", 1)[1]
    said = {int(number) for number in re.findall(r"(\d+) [a-z]", footer.split("\n\n")[0])}
    assert said == {int(row[0]) for row in rows}, f"--help names exit codes {sorted(said)}"
