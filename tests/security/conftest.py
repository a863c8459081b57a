"""The security suite: each file plays attacks of the project's security issue against the real
binary, with the integration suite's fixtures (real binary, a tgtd of the test's own, cleanup by
PID), found by putting ../integration on the path."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from rosetctl_fixtures import *  # noqa: E402,F401,F403  (fixtures are found by name)
from iscsi_fixtures import *  # noqa: E402,F401,F403
