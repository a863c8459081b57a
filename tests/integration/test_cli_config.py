"""Where settings come from (flag > environment > config file > default), read-only verbs that
leave no trace, and the generated shell completions."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from rosetctl_cli import binary_path, isolated_environment

SOURCE = Path(os.environ.get("ROSETCTL_SOURCE_DIR") or Path(__file__).resolve().parents[2])


def run(*args, env_extra=None, cwd=None):
    env = isolated_environment()
    env.update(env_extra or {})
    done = subprocess.run([binary_path(), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=60)
    return done.returncode, done.stdout, done.stderr


def test_flag_beats_environment_beats_config_file(workdir):
    config = workdir / "config.toml"
    config.write_text(f'state-dir = "{workdir}/from-file"\n')
    env = {"ROSETCTL_CONFIG": str(config)}
    assert run("volume", "create", "a", env_extra=env)[0] == 0
    assert (workdir / "from-file" / "state.db").exists(), "expected the config file's state dir"
    env["ROSETCTL_STATE_DIR"] = str(workdir / "from-env")
    assert run("volume", "create", "b", env_extra=env)[0] == 0
    assert (workdir / "from-env" / "state.db").exists(), "expected the environment to beat the file"
    assert run("--state-dir", str(workdir / "from-flag"), "volume", "create", "c", env_extra=env)[0] == 0
    assert (workdir / "from-flag" / "state.db").exists(), "expected the flag to beat the environment"


def test_unknown_config_key_is_a_usage_error_naming_it(workdir):
    config = workdir / "config.toml"
    config.write_text('state_dirr = "/tmp/x"\n')
    rc, _, err = run("volume", "list", env_extra={"ROSETCTL_CONFIG": str(config)})
    assert rc == 2 and "state_dirr" in err, f"expected exit 2 naming the key, got {rc}: {err}"


BROKEN_CONFIGS = [
    # (file text, line, column, what the message must say)
    ('state-dir = "/srv/x\n', 1, None, "while parsing string"),  # no closing quote
    ("state-dir = /a b\n", 1, 13, "while parsing value"),
    ('# comment\nstate_dirr = "/tmp/x"\n', 2, 1, 'unknown key "state_dirr"'),
    ('[volumes]\nsize = "1Gi"\n', 1, 2, "unknown section [volumes]"),
    ('[serve]\nlisten-on = "x"\n', 2, 1, 'unknown key "listen-on" in [serve]'),
    ('output = "yaml"\n', 1, 10, "yaml not in"),
    ('capacity-overcommit = "yes"\n', 1, 23, "takes true or false"),
    ('state-dir = ["/a", "/b"]\n', 1, 13, "takes one value, not a list"),
    # Characters toml++ 3.3 must not test for whitespace (cli/config_text.h): refused before it.
    ("\n\u02caK\n", 2, 1, "a non-ASCII character outside a string or comment"),
    ('# caf\u00e9\noutput = "json" \u00e9\n', 2, 17, "a non-ASCII character outside a string"),
    ('state-dir = """\\\n\u00a7"""\n', 2, 1, "first after a backslash in a multi-line string"),
    ('state-dir = """\\ \u00e1\n"""\n', 1, 18, "first after a backslash in a multi-line string"),
    ('output = 0"\u00e9"\n', 1, 12, "a non-ASCII character outside a string"),  # a bare value's scan
    ('output = 2""\u00a7"\n', 1, 13, "a non-ASCII character outside a string"),
    ('output = 2="\u00a7"\n', 1, 13, "a non-ASCII character outside a string"),
]


def test_broken_config_files_are_usage_errors_naming_file_line_and_problem(workdir):
    """A real TOML parser reads the file: a broken value is never taken as a path."""
    config = workdir / "config.toml"
    for text, line, column, what in BROKEN_CONFIGS:
        config.write_text(text)
        rc, _, err = run("--state-dir", str(workdir / "state"), "volume", "list",
                         env_extra={"ROSETCTL_CONFIG": str(config)})
        where = f'config file "{config}", line {line}, column {column if column else ""}'
        assert rc == 2 and where in err and what in err, (
            f"{text!r}: expected exit 2 with {where!r} and {what!r}, got {rc}: {err}")
        assert "INI" not in err and "++" not in err, err


def test_non_ascii_in_strings_and_comments_is_read(workdir):
    config = workdir / "config.toml"
    state = workdir / "caf\u00e9 \u02ca"
    config.write_text(f'# r\u00e9pertoire\nstate-dir = """\\\n  {state}"""\n')
    rc, _, err = run("volume", "create", "a", env_extra={"ROSETCTL_CONFIG": str(config)})
    assert rc == 0 and (state / "state.db").exists(), f"expected the state dir {state}, got {rc}: {err}"


def test_config_sections_set_verb_flags_and_flags_still_win(workdir):
    config = workdir / "config.toml"
    config.write_text('state-dir = "{}"\n\n[volume.create]\nsize = "64Mi"\n'.format(workdir / "s"))
    env = {"ROSETCTL_CONFIG": str(config)}
    rc, out, err = run("volume", "create", "a", "-o", "json", env_extra=env)
    assert rc == 0 and '"size": "64Mi"' in out, err
    rc, out, err = run("volume", "create", "b", "--size", "128Mi", "-o", "json", env_extra=env)
    assert rc == 0 and '"size": "128Mi"' in out, err


def test_read_only_verbs_do_not_create_the_state_directory(workdir):
    state = workdir / "never"
    rc, out, _ = run("--state-dir", str(state), "volume", "list", "-o", "json")
    assert rc == 0 and out.strip() == "[]"
    rc, _, err = run("--state-dir", str(state), "volume", "show", "ghost")
    assert rc == 3 and "ghost" in err
    rc, _, _ = run("--state-dir", str(state), "volume", "stats", "ghost")
    assert rc == 3
    rc, out, _ = run("--state-dir", str(state), "snapshot", "list", "-o", "json")
    assert rc == 0 and out.strip() == "[]"
    for args in (["snapshot", "show", "s1"], ["snapshot", "diff", "s1", "s2"],
                 ["snapshot", "verify", "s1"], ["snapshot", "list", "--volume", "ghost"]):
        rc, _, err = run("--state-dir", str(state), *args)
        assert rc == 3 and "no state" in err, f"{args}: {rc} {err}"
    rc, out, _ = run("--state-dir", str(state), "snapshot", "verify", "-o", "json")
    assert rc == 0 and '"snapshots": 0' in out
    rc, out, err = run("--state-dir", str(state), "probe")
    assert rc == 0 and out.strip() == "ready", f"expected the providers checked all the same: {rc} {err}"
    assert f'no state in "{state}"' in err, f"expected probe to note the missing state: {err}"
    assert not state.exists(), f"expected {state} not to be created by read-only verbs"


def test_checked_in_completions_match_the_binary():
    for shell in ("bash", "zsh", "fish"):
        rc, generated, err = run("completion", shell)
        assert rc == 0, err
        checked_in = (SOURCE / "completions" / f"rosetctl.{shell}").read_text()
        assert generated == checked_in, (
            f"completions/rosetctl.{shell} is stale: regenerate with "
            f"`rosetctl completion {shell} > completions/rosetctl.{shell}`")


def test_bash_completion_completes_verbs_and_flags():
    script = SOURCE / "completions" / "rosetctl.bash"
    probe = f"""
source {script}
COMP_WORDS=(rosetctl volume con); COMP_CWORD=2; _rosetctl; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(rosetctl volume connect demo --ta); COMP_CWORD=4; _rosetctl; echo "${{COMPREPLY[*]}}"
"""
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    lines = done.stdout.splitlines()
    assert lines == ["connect", "--target"], f"unexpected completions {lines} ({done.stderr})"
