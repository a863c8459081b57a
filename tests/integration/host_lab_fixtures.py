"""The `host_lab` fixture: "hosts" in network namespaces on one switch (host_lab.py), per test."""
from __future__ import annotations

import pytest

from host_lab import HostLab, sweep_stale, unavailable_reason
from rosetctl_fixtures import skip_or_fail

__all__ = ["host_lab"]


@pytest.fixture
def host_lab(workdir):
    """An open HostLab; `host_lab.add("controller")` makes 192.0.2.1, the next add 192.0.2.2, ...

    Hosts' directories live under the test's workdir. Teardown (after the test, pass or fail, and
    before the workdir's own cleanup) ends every process in the lab and deletes its namespaces.
    Skips when the machine cannot build a lab (not root, no iproute2), or fails under
    ROSETCTL_REQUIRE_ROOT_TESTS=1.
    """
    reason = unavailable_reason()
    if reason is not None:
        skip_or_fail(reason)
    sweep_stale()  # what a crashed earlier run left
    with HostLab(workdir) as lab:
        yield lab
