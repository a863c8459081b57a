"""pytest picks up the shared fixtures (rosetctl_fixtures.py, roset_fixtures.py, host_lab_fixtures.py,
iscsi_fixtures.py) through this file."""
from rosetctl_fixtures import *  # noqa: F401,F403  (fixtures are found by name)
from roset_fixtures import *  # noqa: F401,F403
from host_lab_fixtures import *  # noqa: F401,F403
from iscsi_fixtures import *  # noqa: F401,F403
