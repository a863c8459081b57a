"""PlaybookRun: what one ansible-playbook run did, read from the JSON our json_results callback
(ansible_callbacks/) prints: each task's result on each host, and a description of what failed
for an assertion's message. Shared by test_ansible.py (one local host) and
test_ansible_across_hosts.py (a controller and two guests)."""
from __future__ import annotations

import json
import subprocess


class PlaybookRun:
    def __init__(self, done: subprocess.CompletedProcess):
        self.rc = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr
        try:
            self.output = json.loads(done.stdout)
        except json.JSONDecodeError as e:
            raise AssertionError(f"expected JSON from ansible-playbook, got rc={self.rc} "
                                 f"stdout={done.stdout[-3000:]!r} stderr={done.stderr[-3000:]!r}") from e

    def tasks(self, host: str = "localhost") -> list[tuple[str, dict]]:
        """(task name, result) of every task that ran on `host`, in order."""
        return [(task["task"]["name"], task["hosts"][host])
                for play in self.output["plays"] for task in play["tasks"] if host in task["hosts"]]

    def task(self, name: str, host: str = "localhost") -> dict:
        matches = [r for n, r in self.tasks(host) if n == name]
        assert len(matches) == 1, (f"expected one task named {name!r} on {host}, got {len(matches)}: "
                                   f"{[n for n, _ in self.tasks(host)]}")
        return matches[0]

    def changed_tasks(self, host: str = "localhost") -> list[str]:
        return [name for name, r in self.tasks(host) if r.get("changed")]

    def describe(self) -> str:
        failed = [(host, task["task"]["name"], r.get("msg"), r.get("stderr"))
                  for play in self.output["plays"] for task in play["tasks"]
                  for host, r in task["hosts"].items() if r.get("failed") or r.get("unreachable")]
        return f"rc={self.rc} failed={failed} stats={self.output.get('stats')} stderr={self.stderr[-2000:]!r}"

    def assert_ok(self) -> None:
        stats = self.output["stats"]
        assert self.rc == 0 and all(s["failures"] == 0 and s["unreachable"] == 0 for s in stats.values()), (
            f"expected the playbook to succeed: {self.describe()}")
