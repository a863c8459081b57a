"""`rosetctl tls init|issue|show`: certificates an operator makes in one command, checked with the
`openssl` command line (an independent implementation of the checks serve's TLS will make)."""
from __future__ import annotations

import hashlib
import os
import re
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from rosetctl_cli import EXIT_CONFLICT, EXIT_USAGE


def openssl(*args: str) -> str:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"openssl {' '.join(args)} failed: {done.stdout} {done.stderr}"
    return done.stdout + done.stderr


def verifies(ca: Path, certificate: Path) -> bool:
    done = subprocess.run(["openssl", "verify", "-CAfile", str(ca), str(certificate)],
                          capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and done.stdout.strip() == f"{certificate}: OK"


def text_of(certificate: Path) -> str:
    return openssl("x509", "-noout", "-text", "-in", str(certificate))


def digest_of(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def key_lines(directory: Path) -> list[str]:
    """The base64 lines of every private key in `directory`: none may ever be printed."""
    lines = []
    for key in directory.glob("*.key"):
        lines += [line for line in key.read_text().splitlines() if line and not line.startswith("-----")]
    assert lines, f"expected keys in {directory}"
    return lines


class Tls:
    """rosetctl tls against one certificate directory, remembering everything it printed."""

    def __init__(self, cli, directory: Path):
        self.cli, self.dir, self.printed = cli, directory, []

    def run(self, *args):
        result = self.cli.run("tls", *args, with_state_dir=False)
        self.printed += [result.stdout, result.stderr]
        return result

    def ok(self, *args):
        result = self.run(*args)
        assert result.rc == 0, f"expected `rosetctl tls {' '.join(args)}` to succeed: {result.describe()}"
        return result

    def init(self, *extra):
        return self.ok("init", "--dir", str(self.dir), *extra)

    def issue(self, name, *extra):
        return self.ok("issue", name, "--dir", str(self.dir), *extra)

    def assert_no_key_material_printed(self):
        output = "\n".join(self.printed)
        assert "PRIVATE KEY" not in output
        for line in key_lines(self.dir):
            assert line not in output, "a private key's content was printed"


@pytest.fixture
def tls(cli, workdir) -> Tls:
    return Tls(cli, workdir / "etc" / "tls")


def test_init_and_issue_make_certificates_openssl_verifies(tls):
    init = tls.init()
    assert "Made a CA and the controller's certificate" in init.stdout
    node = tls.issue("node-a", "--ip", "10.9.8.7", "--ip", "fd00::7", "--dns", "node-a.example")
    assert "node-a.crt" in node.stdout
    tls.ok("issue", "alice", "--admin", "--dir", str(tls.dir), "-o", "json")

    d = tls.dir
    assert sorted(os.listdir(d)) == ["alice.crt", "alice.key", "ca.crt", "ca.key", "controller.crt",
                                     "controller.key", "node-a.crt", "node-a.key"]
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for name in ("ca", "controller", "node-a", "alice"):
        assert stat.S_IMODE((d / f"{name}.key").stat().st_mode) == 0o600, f"{name}.key"
        assert stat.S_IMODE((d / f"{name}.crt").stat().st_mode) == 0o644, f"{name}.crt"
        assert (d / f"{name}.key").read_text().startswith("-----BEGIN PRIVATE KEY-----\n")  # PKCS#8
        # The key is the certificate's, and EC P-256.
        assert openssl("pkey", "-in", str(d / f"{name}.key"), "-pubout") == \
            openssl("x509", "-in", str(d / f"{name}.crt"), "-noout", "-pubkey")
        assert "NIST CURVE: P-256" in text_of(d / f"{name}.crt")
    for name in ("controller", "node-a", "alice"):
        assert verifies(d / "ca.crt", d / f"{name}.crt"), name
        text = text_of(d / f"{name}.crt")
        assert "Signature Algorithm: ecdsa-with-SHA256" in text
        assert "TLS Web Server Authentication, TLS Web Client Authentication" in text
        assert re.search(r"Basic Constraints: critical\s+CA:FALSE", text)
        assert re.search(r"Key Usage: critical\s+Digital Signature\n", text)
        assert "Subject Key Identifier" in text and "Authority Key Identifier" in text

    ca = text_of(d / "ca.crt")
    assert re.search(r"Subject: O = rosetctl, OU = ca, CN = rosetctl CA [0-9a-f]{16}\n", ca)
    assert re.search(r"Basic Constraints: critical\s+CA:TRUE, pathlen:0", ca)
    assert re.search(r"Key Usage: critical\s+Certificate Sign, CRL Sign", ca)

    node_text = text_of(d / "node-a.crt")
    assert "Subject: O = rosetctl, OU = node, CN = node-a\n" in node_text
    assert "DNS:node-a, DNS:node-a.example, IP Address:10.9.8.7, IP Address:FD00:0:0:0:0:0:0:7" in node_text
    assert "Subject: O = rosetctl, OU = admin, CN = alice\n" in text_of(d / "alice.crt")

    controller = text_of(d / "controller.crt")
    host = socket.gethostname()
    assert f"Subject: O = rosetctl, OU = controller, CN = {host}\n" in controller
    for name in (f"DNS:{host}", "DNS:localhost", "IP Address:127.0.0.1", "IP Address:0:0:0:0:0:0:0:1"):
        assert name in controller

    tls.assert_no_key_material_printed()


def test_json_output_and_show(tls):
    made = tls.ok("init", "--dir", str(tls.dir), "--name", "ctl-1", "--dns", "ctl.example",
                  "--ip", "192.0.2.10", "-o", "json").json()
    assert made["changed"] is True
    assert made["ca"]["role"] == "ca" and made["ca"]["path"] == str(tls.dir / "ca.crt")
    certificate = made["certificate"]
    assert certificate["path"] == str(tls.dir / "controller.crt")
    assert certificate["key"] == str(tls.dir / "controller.key")
    assert certificate["subject"] == "O=rosetctl, OU=controller, CN=ctl-1"
    assert certificate["role"] == "controller"
    assert certificate["sans"][:2] == ["DNS:ctl-1", f"DNS:{socket.gethostname()}"]
    assert {"DNS:localhost", "DNS:ctl.example", "IP:127.0.0.1", "IP:::1", "IP:192.0.2.10"} <= set(certificate["sans"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", certificate["not_after"])

    issued = tls.ok("issue", "node-a", "--dir", str(tls.dir), "--days", "30", "-o", "json").json()
    assert issued["certificate"]["role"] == "node" and issued["certificate"]["sans"] == ["DNS:node-a"]
    assert issued["ca"] == made["ca"]

    shown = tls.ok("show", str(tls.dir / "node-a.crt"), "-o", "json").json()
    assert shown["subject"] == "O=rosetctl, OU=node, CN=node-a"
    assert shown["role"] == "node" and shown["common_name"] == "node-a"
    assert shown["issuer"] == made["ca"]["subject"]
    assert shown["sans"] == ["DNS:node-a"]
    assert shown["ca"] is False
    assert shown["extended_key_usage"] == ["serverAuth", "clientAuth"]
    assert shown["not_after"] == issued["certificate"]["not_after"]
    assert re.fullmatch(r"[0-9a-f]+", shown["serial"])
    table = tls.ok("show", str(tls.dir / "ca.crt")).stdout
    assert re.search(r"^Role: +ca$", table, re.M) and re.search(r"^CA: +true$", table, re.M)

    # A key given to `show` is refused without a word of its content.
    refused = tls.run("show", str(tls.dir / "node-a.key"))
    assert refused.rc == EXIT_USAGE and "holds no PEM certificate" in refused.stderr
    tls.assert_no_key_material_printed()


def test_init_again_changes_nothing_force_reissues_and_new_ca_replaces(tls):
    tls.init()
    tls.issue("node-a")
    before = digest_of(tls.dir)

    again = tls.init()
    assert "nothing changed" in again.stdout
    assert tls.ok("init", "--dir", str(tls.dir), "-o", "json").json()["changed"] is False
    assert digest_of(tls.dir) == before

    # --force: a new controller certificate from the same CA; the CA is never replaced by it.
    tls.init("--force", "--ip", "198.51.100.4")
    after_force = digest_of(tls.dir)
    assert after_force["ca.crt"] == before["ca.crt"] and after_force["ca.key"] == before["ca.key"]
    assert after_force["controller.crt"] != before["controller.crt"]
    assert after_force["controller.key"] != before["controller.key"]
    assert "IP Address:198.51.100.4" in text_of(tls.dir / "controller.crt")
    assert verifies(tls.dir / "ca.crt", tls.dir / "node-a.crt")

    # --new-ca: a new CA; the old one is kept aside and what it issued no longer verifies.
    replaced = tls.init("--new-ca")
    assert "no longer trusted" in replaced.stdout
    kept = [name for name in os.listdir(tls.dir) if name.startswith("ca-replaced-")]
    assert len(kept) == 2, kept
    old_ca = tls.dir / next(name for name in kept if name.endswith(".crt"))
    assert hashlib.sha256(old_ca.read_bytes()).hexdigest() == before["ca.crt"]
    assert stat.S_IMODE((tls.dir / old_ca.name.replace(".crt", ".key")).stat().st_mode) == 0o600
    assert digest_of(tls.dir)["ca.crt"] != before["ca.crt"]
    assert verifies(tls.dir / "ca.crt", tls.dir / "controller.crt")
    assert not verifies(tls.dir / "ca.crt", tls.dir / "node-a.crt")
    assert verifies(old_ca, tls.dir / "node-a.crt")
    tls.issue("node-a", "--force")
    assert verifies(tls.dir / "ca.crt", tls.dir / "node-a.crt")
    tls.assert_no_key_material_printed()


def test_issue_refuses_to_overwrite_unless_forced(tls):
    tls.init()
    tls.issue("node-a")
    before = digest_of(tls.dir)
    refused = tls.run("issue", "node-a", "--dir", str(tls.dir))
    assert refused.rc == EXIT_CONFLICT, refused.describe()
    assert "node-a.crt" in refused.stderr and "--force" in refused.stderr
    assert digest_of(tls.dir) == before

    tls.issue("node-a", "--force")
    after = digest_of(tls.dir)
    assert after["node-a.crt"] != before["node-a.crt"] and after["node-a.key"] != before["node-a.key"]
    assert after["ca.key"] == before["ca.key"]
    assert verifies(tls.dir / "ca.crt", tls.dir / "node-a.crt")
    assert stat.S_IMODE((tls.dir / "node-a.key").stat().st_mode) == 0o600


@pytest.mark.parametrize("name", ["../x", "", "a" * 65, "a" * 200, "a/b", "ca", "controller", "-x", "x y"],
                         ids=["dot-dot-slash", "empty", "65-bytes", "200-bytes", "slash", "ca", "controller",
                              "dash", "space"])
def test_bad_names_are_refused_with_exit_2(tls, name):
    tls.init()
    before = digest_of(tls.dir)
    result = tls.run("issue", name, "--dir", str(tls.dir))
    assert result.rc == EXIT_USAGE, result.describe()
    assert result.stderr.startswith("rosetctl: ") and result.stdout == ""
    assert digest_of(tls.dir) == before
    assert sorted(os.listdir(tls.dir.parent)) == ["tls"]


def test_bad_addresses_and_names_change_nothing(tls):
    for args, mention in ((["--ip", "10.0.0"], '"10.0.0"'), (["--ip", "fe80::1%eth0"], '"fe80::1%eth0"'),
                          (["--dns", "a,DNS:evil"], '"a,DNS:evil"'), (["--dns", "-a"], '"-a"'),
                          (["--name", "../x"], '"../x"'), (["--days", "0"], "--days")):
        result = tls.run("init", "--dir", str(tls.dir), *args)
        assert result.rc == EXIT_USAGE, f"{args}: {result.describe()}"
        assert mention in result.stderr, f"{args}: {result.describe()}"
        assert not tls.dir.exists(), f"{args} created the directory"
    tls.init()  # the same command without the bad argument works
    assert (tls.dir / "controller.crt").exists()


def test_issue_needs_a_ca(tls):
    missing = tls.run("issue", "node-a", "--dir", str(tls.dir))
    assert missing.rc == 3 and "tls init" in missing.stderr, missing.describe()
    tls.dir.mkdir(parents=True, mode=0o700)
    empty = tls.run("issue", "node-a", "--dir", str(tls.dir))
    assert empty.rc == 5 and "no CA" in empty.stderr, empty.describe()
    assert os.listdir(tls.dir) == []


def test_help_explains_files_roles_and_rotation(cli):
    text = cli.run("tls", "--help", with_state_dir=False).stdout
    for needle in ("ca.crt", "ca.key", "controller.crt", "NAME.crt", "NAME.key", "0600", "unencrypted",
                   "OU=ca|controller|node|admin", "Rotation", "within 10 s, no restart", "at once on SIGHUP", "--force",
                   "--new-ca"):
        assert needle in text, f"expected `rosetctl tls --help` to mention {needle!r}"
    issue = cli.run("tls", "issue", "--help", with_state_dir=False).stdout
    assert "--admin" in issue and "--dns" in issue and "--ip" in issue
