"""The conformance suite shares the integration suite's fixtures (real binary, cleanup)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from rosetctl_fixtures import *  # noqa: E402,F401,F403  (fixtures are found by name)
