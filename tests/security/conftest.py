"""The security suite runs the integration suite's machinery (tests/integration): the real binary as
root, the host lab, the three-host site. Its modules are imported from there, as that suite's own
conftest.py does, so the fixtures, the hooks (ROSETCTL_TEST_DEADLINE) and the cleanup are the same.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from rosetctl_fixtures import *  # noqa: E402,F401,F403  (fixtures and hooks are found by name)
from roset_fixtures import *  # noqa: E402,F401,F403
from host_lab_fixtures import *  # noqa: E402,F401,F403
from iscsi_fixtures import *  # noqa: E402,F401,F403
from hostile_node_fixtures import *  # noqa: E402,F401,F403
