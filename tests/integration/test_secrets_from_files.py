"""CSI secrets as Kubernetes delivers Secrets made with `kubectl create secret --from-file`: the
file's bytes, with the newline an editor (or `echo`) ends it with. serve drops one trailing
newline from every secret value (daemon/csi_secrets.h) before a provider sees it (issue 33
finding 8): a CHAP password read from such a file is the password, not refused for its newline.
(The roset provider trims its api-key secret itself, test_roset.py.)"""
from __future__ import annotations

import json
import os
import secrets

import pytest

from tgtd_lab import INITIATOR_A, IQN_PREFIX, Lun, read_lun

MiB = 1024 * 1024


@pytest.mark.parametrize("ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_chap_password_from_a_file_ending_in_a_newline_is_the_password(cli, tgtd, workdir, ending):
    flags = ["--provider", "iscsi", "--iscsi-portal", tgtd.portal, "--iscsi-tgt-control-port", str(tgtd.control_port)]
    password = "s3cret-" + secrets.token_hex(8)
    secrets_file = workdir / "chap.json"
    secrets_file.write_text(json.dumps({"chap-user": "consumer-a", "chap-password": password + ending}))
    os.chmod(secrets_file, 0o600)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    vid = cli.ok_json(*flags, "volume", "create", "from-file", "--size", "32Mi")["id"]
    mapped = cli.run_json(*flags, "--secrets-file", str(secrets_file), "volume", "map", "from-file", "--node", "node-a")
    assert mapped.rc == 0, mapped.describe()
    assert password not in mapped.stdout + mapped.stderr
    account = mapped.json()["publish_context"]["chap-user"]
    # The target holds the password without the newline: it lets the initiator in with it.
    assert read_lun(tgtd.portal, f"{IQN_PREFIX}:{vid}", INITIATOR_A, chap=(account, password)) == Lun(vid, 32 * MiB)


def test_only_one_line_ending_is_dropped(cli, tgtd, workdir):
    """Two newlines are not a file's ending: the second is the caller's, refused as before."""
    flags = ["--provider", "iscsi", "--iscsi-portal", tgtd.portal, "--iscsi-tgt-control-port", str(tgtd.control_port)]
    secrets_file = workdir / "chap.json"
    secrets_file.write_text(json.dumps({"chap-user": "consumer-a", "chap-password": "s3cret-0123456789\n\n"}))
    os.chmod(secrets_file, 0o600)
    cli.ok(*flags, "--node-id", "node-a", "node", "register", "--iscsi-initiator", INITIATOR_A)
    cli.ok_json(*flags, "volume", "create", "twice", "--size", "32Mi")
    refused = cli.run(*flags, "--secrets-file", str(secrets_file), "volume", "map", "twice", "--node", "node-a")
    assert refused.rc == 2 and "chap-password" in refused.stderr, refused.describe()
    assert "s3cret-0123456789" not in refused.stderr
