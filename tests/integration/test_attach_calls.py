"""The controller calls a consumer's `volume connect` and `volume disconnect` make (issue 35): each
is a round trip over mutual TLS, and on a slow consumer (the iSCSI bench's TCG guest) a run's
time goes to its calls, so the count is kept where it is: a connect resolves the name once, asks
for the volume, publishes it; a disconnect resolves the name and unpublishes. What only a JSON
report shows (the volume's parameters) is asked for only when the JSON report is.

Read from the controller's call log (one line per call, naming the peer), in the lab of
test_across_hosts.py: a roset volume, connected by consumer-b's own CLI (--controller).
"""
from __future__ import annotations

import re

import pytest

from controller_site import Site, build_site
from test_across_hosts import use_roset

# Every consumer CLI run tells the controller it is alive (the registry's last_seen).
HEARTBEAT = ["TouchNode"]


@pytest.fixture
def site(host_lab, rosetctl_binary) -> Site:
    built = build_site(host_lab)
    yield built
    built.assert_no_secrets_printed()


class CallLog:
    """The controller's calls by one peer, from a point of serve's log on."""

    def __init__(self, site: Site, peer: str):
        self.site, self.peer = site, peer
        self.mark = len(site.serve_log())

    def since(self) -> list[str]:
        log = self.site.serve_log()
        text, self.mark = log[self.mark:], len(log)
        pattern = re.compile(r" info (\w+) .*peer=" + re.escape(self.peer) + r" ")
        return [m.group(1) for m in map(pattern.search, text.splitlines()) if m]


def test_connect_and_disconnect_make_only_the_controller_calls_they_need(site):
    use_roset(site, site.b)
    volume_id = site.a.create("calls", "-p", "provider=roset")["id"]
    target = site.consumer_b.dir / "calls"
    site.b.ok("volume", "show", "calls")  # consumer-b's first run registers it (RegisterNode)
    calls = CallLog(site, "node:consumer-b")

    # By name, the path printed: the name is resolved once, no parameters are fetched.
    assert site.b.ok("volume", "connect", "calls", "--target", target).stdout.strip() == str(target)
    assert calls.since() == HEARTBEAT + ["FindVolume", "ControllerGetVolume", "ControllerPublishVolume"]
    # Found by its name, the volume needs no ControllerGetVolume to be disconnected.
    done = site.b.ok("volume", "disconnect", "calls")
    assert done.stdout.strip() == f'disconnected volume "calls" from {target}', done.describe()
    assert calls.since() == HEARTBEAT + ["FindVolume", "ControllerUnpublishVolume"]

    # The JSON report shows the volume with its parameters: asked before anything changes.
    shown = site.b.ok_json("volume", "connect", "calls", "--target", target)
    assert shown["path"] == str(target) and shown["name"] == "calls" and "mutable_parameters" in shown, shown
    assert shown["published_nodes"] == ["consumer-b"], shown
    assert [c["target"] for c in shown["connections"]] == [str(target)], shown
    assert calls.since() == HEARTBEAT + ["FindVolume", "ControllerGetVolume", "GetVolumeDetails",
                                         "ControllerPublishVolume"]
    # By id, the name the messages use comes from the volume itself.
    done = site.b.ok("volume", "disconnect", volume_id)
    assert done.stdout.strip() == f'disconnected volume "calls" from {target}', done.describe()
    assert calls.since() == HEARTBEAT + ["FindVolume", "ControllerGetVolume", "ControllerUnpublishVolume"]
    assert site.ctl.volume(volume_id)["published_nodes"] == []
    site.a.ok("volume", "delete", volume_id)
