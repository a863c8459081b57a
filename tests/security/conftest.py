"""The security suite (tests/security/, run by ctest like integration/): attacks on rosetctl's
isolation between hosts, with the integration suite's fixtures and labs (tests/integration)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from rosetctl_fixtures import *  # noqa: E402,F401,F403  (fixtures are found by name)
from roset_fixtures import *  # noqa: E402,F401,F403
from host_lab_fixtures import *  # noqa: E402,F401,F403
from iscsi_fixtures import *  # noqa: E402,F401,F403
