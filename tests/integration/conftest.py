"""pytest picks up the shared fixtures (rosetctl_fixtures.py) through this file."""
from rosetctl_fixtures import *  # noqa: F401,F403  (fixtures are found by name)
