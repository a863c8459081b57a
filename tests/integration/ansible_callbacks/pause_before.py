# Holds a playbook run before a named task, so a test can look at the hosts mid-playbook (a
# volume connected on every consumer) without changing the playbook. Enabled by the test's
# ansible.cfg (callbacks_enabled = pause_before); the environment names the task and a directory:
# when the task is about to start, the callback writes DIR/reached and waits for DIR/go. DIR/reached
# holds, as JSON, every task that failed or was unreachable before the pause: a host whose task
# failed leaves the play, so without this a test would see only the state that failure left.
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: pause_before
    type: aggregate
    short_description: waits before a named task until the test says go (rosetctl's test suite)
    description: Reads ROSETCTL_TEST_PAUSE_TASK and ROSETCTL_TEST_PAUSE_DIR.
"""

WAIT_LIMIT = 600  # seconds; a test that died never says go


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "pause_before"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.failures: list[dict] = []

    def _failed(self, result, how: str):
        self.failures.append({"host": result._host.get_name(), "task": result._task.get_name(), "how": how,
                              "result": result._result})

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failed(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._failed(result, "unreachable")

    def v2_playbook_on_task_start(self, task, is_conditional):
        wanted = os.environ.get("ROSETCTL_TEST_PAUSE_TASK")
        directory = os.environ.get("ROSETCTL_TEST_PAUSE_DIR")
        if not wanted or not directory or task.get_name() != wanted:
            return
        directory = Path(directory)
        (directory / "reached.part").write_text(json.dumps(self.failures, indent=1, default=str))
        (directory / "reached.part").rename(directory / "reached")
        deadline = time.monotonic() + WAIT_LIMIT
        while not (directory / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        (directory / "go").unlink(missing_ok=True)
