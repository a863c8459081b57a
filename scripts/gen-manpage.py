#!/usr/bin/python3
"""Writes rosetctl(1) from the binary's own command tree: `rosetctl --help`, then `--help` of every
subcommand its "Subcommands:" lists, recursively. So the man page says what the binary says,
and is regenerated with it at build time (src/CMakeLists.txt).

Usage: gen-manpage.py ROSETCTL OUTPUT
"""
from __future__ import annotations

import os
import re
import subprocess
import sys


# A fixed environment: no config file or ROSETCTL_* variable may change the defaults shown, and
# an asan build's binary exits 0 (leak reports at exit are not the man page's business).
ENV = {"ROSETCTL_CONFIG": "/dev/null", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin",
       "ASAN_OPTIONS": "detect_leaks=0"}


def help_text(binary: str, path: list[str]) -> str:
    done = subprocess.run([binary, *path, "--help"], capture_output=True, text=True, env=ENV, check=True)
    # The configuration file's default, not the empty one used here.
    return done.stdout.replace("--config=/dev/null", "--config FILE     ")


def subcommands(text: str) -> list[tuple[str, str]]:
    match = re.search(r"^Subcommands:\n((?:  \S.*\n)+)", text, re.M)
    if not match:
        return []
    return [(line.split()[0], line.strip()[len(line.split()[0]):].strip()) for line in match.group(1).splitlines()]


def roff(text: str) -> str:
    """Text as roff that shows it verbatim (no requests, no escapes, hyphens as minus signs)."""
    out = []
    for line in text.splitlines():
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def describe(binary: str, path: list[str], out: list[str]) -> None:
    text = help_text(binary, path)
    title = " ".join(["rosetctl", *path])
    # The footer (exit codes, "Start with") is the same under every command: said once, at the top.
    body = text.split("\nExit codes:")[0].rstrip() + "\n"
    out += [f".SS {roff(title)}", ".nf", roff(body), ".fi"]
    for name, _ in subcommands(text):
        describe(binary, [*path, name], out)


def main() -> int:
    binary, output = sys.argv[1], sys.argv[2]
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, env=ENV,
                             check=True).stdout.split()[1]
    top = help_text(binary, [])
    summary = top.splitlines()[0].strip().removeprefix("rosetctl: ")
    exit_text = "Exit codes: " + top.split("Exit codes: ", 1)[1].split("\n\n")[0] if "Exit codes: " in top else ""
    env_vars = sorted(set(re.findall(r"\(Env:([A-Z_]+)\)", "".join(
        help_text(binary, p) for p in ([], ["serve"])))))
    out = [
        f'.TH ROSETCTL 1 "" "rosetctl {version}" "User Commands"',
        ".SH NAME",
        "rosetctl \\- " + roff(summary),
        ".SH SYNOPSIS",
        ".B rosetctl",
        "[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        "rosetctl provisions storage volumes, attaches them to hosts and serves them to Kubernetes as a",
        "CSI v1.10 plugin (\\fBrosetctl serve\\fR). The CLI, the Ansible collection and \\fBserve\\fR go",
        "through the same CSI services. This page is generated from the command tree itself; every",
        "command also answers \\fB\\-\\-help\\fR.",
        ".SH COMMANDS",
    ]
    describe(binary, [], out)
    out += [".SH ENVIRONMENT", "Each variable sets the flag that names it in its help; a flag given on the command line wins,",
            "then the variable, then the configuration file.", ".TP", ".B ROSETCTL_CONFIG",
            "The configuration file (TOML) of defaults for the global flags."]
    for var in env_vars:
        out += [".TP", f".B {var}"]
    out += [".TP", ".B ROSET_API_KEY", "The Roset API key (there is no flag for it on purpose: command lines are public)."]
    out += [".SH FILES", ".TP", ".I /etc/rosetctl/config.toml", "Defaults for the global flags.",
            ".TP", ".I /var/lib/rosetctl", "The host's state database and local volumes.",
            ".SH EXIT STATUS", ".nf", roff(exit_text.strip()), ".fi",
            ".SH SEE ALSO", "The README of the rosetctl sources; \\fBsystemctl\\fR(1) for the rosetctl\\-controller",
            "and rosetctl\\-node services."]
    with open(output + ".tmp", "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(output + ".tmp", output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
