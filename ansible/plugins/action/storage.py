# -*- coding: utf-8 -*-
# Action plugin for the `storage` module: fills in what only the controller knows, then runs the
# module on the managed host unchanged.
#
# - `name` (volumes) and `volume` (snapshot commits) default to the inventory hostname, so a
#   playbook written for the cinderlib storage role gets "one volume per consumer host" without
#   naming it. Characters rosetctl does not allow in names become "-".
# - `binary` and `config` default to what the `storage` role found or wrote on this host (the
#   fact `storage_rosetctl`), so tasks after the role use the same rosetctl and configuration.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.plugins.action import ActionBase

NAME_LIMIT = 128


def volume_name_for_host(hostname):
    """An inventory hostname as a rosetctl volume name: [A-Za-z0-9._-], starting alphanumeric."""
    name = re.sub(r'[^A-Za-z0-9._-]', '-', hostname or '')
    name = re.sub(r'^[^A-Za-z0-9]+', '', name)[:NAME_LIMIT]
    return name or None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True  # the module decides what check mode means
        self._supports_async = False
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        if result.get('skipped'):
            return result

        args = dict(self._task.args)
        resource = args.get('resource') or 'volume'
        state = args.get('state') or 'present'
        host_volume = volume_name_for_host(task_vars.get('inventory_hostname'))
        if resource == 'volume' and not args.get('name') and host_volume:
            args['name'] = host_volume
        if resource == 'snapshot' and state == 'present' and not args.get('volume') and host_volume:
            args['volume'] = host_volume

        found = task_vars.get('storage_rosetctl')
        if isinstance(found, dict):
            found = self._templar.template(found)
            for key in ('binary', 'config'):
                if args.get(key) is None and found.get(key):
                    args[key] = found[key]

        try:
            result.update(self._execute_module(module_args=args, task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
