# The test suite's stdout callback: the whole run as one JSON document, for the tests to read.
#
# Debian 12's ansible-core has no JSON callback (it moved to the ansible.posix collection, which
# only the 259 MB `ansible` package brings), so the tests bring this small one. Shape:
# {"plays": [{"play": {"name"}, "tasks": [{"task": {"name"}, "hosts": {host: result}}]}],
#  "stats": {host: {"ok", "changed", "failures", "unreachable", "skipped", "rescued", "ignored"}}}
# where a result is the module's result with "failed" / "skipped" / "unreachable" set when so.
from __future__ import annotations

import json

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: json_results
    type: stdout
    short_description: the run as one JSON document (rosetctl's test suite)
    description: Prints every play, task and per-host result, then the stats, as one JSON document.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "json_results"

    def __init__(self):
        super().__init__()
        self.plays: list[dict] = []

    def v2_playbook_on_play_start(self, play):
        self.plays.append({"play": {"name": play.get_name()}, "tasks": []})

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.plays[-1]["tasks"].append({"task": {"name": task.get_name()}, "hosts": {}})

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def _record(self, result, **flags):
        outcome = dict(result._result)
        outcome.update(flags)
        outcome["action"] = result._task.action
        self.plays[-1]["tasks"][-1]["hosts"][result._host.get_name()] = outcome

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, unreachable=True)

    def v2_playbook_on_stats(self, stats):
        summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._display.display(json.dumps({"plays": self.plays, "stats": summary}, indent=1,
                                         sort_keys=True, default=str))
