# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Drop-in launchers for Ironic's services, with affinity placement.

``ironic-affinity-conductor``, ``ironic-affinity-api`` and
``ironic-affinity-singleprocess`` take exactly the arguments of
``ironic-conductor``, ``ironic-api`` and ``ironic``: each installs
the configured hash-ring manager, and a conductor's membership, then runs
Ironic's own entry point unchanged.

Importing this module imports nothing of Ironic's, nor anything that
imports threading: each launcher first
imports Ironic's command module, which sets the process up as Ironic
wants it before anything else is imported (Ironic 29 monkey-patches
eventlet there, later releases pick oslo.service's threading backend),
and never Ironic's conductor manager, whose main() asserts it is imported
first by itself.
"""

import importlib
import sys
from types import ModuleType
from typing import Any


def ironic_command(name: str) -> ModuleType:
    """Ironic's module of the command ``name`` (``api``, ``conductor``...).

    ``ironic.command`` since Ironic 30 (2025.2); ``ironic.cmd`` before.
    """
    try:
        return importlib.import_module('ironic.command.' + name)
    except ModuleNotFoundError as exc:
        if exc.name != 'ironic.command':
            raise
    return importlib.import_module('ironic.cmd.' + name)


def _install_membership() -> None:
    """Join the group once a conductor has started, leave on stop.

    Wraps the conductor service's start and stop: start returns after
    Ironic's init_host, i.e. once the conductor can take work and is
    registered under its final name (host:port with json-rpc on another
    port than 8089).
    """
    from ironic.conductor import rpc_service
    from ironic.conf import CONF

    from ironic_affinity.membership import service

    if getattr(rpc_service.RPCService, '_affinity_wrapped', False):
        return
    original_start = rpc_service.RPCService.start
    original_stop = rpc_service.RPCService.stop

    def start(self: Any) -> None:
        original_start(self)
        if CONF.affinity.hash_ring_manager != 'affinity':
            return
        membership = service.ConductorMembership(
            CONF,
            self.manager.host,
            frozenset(CONF.enabled_hardware_types),
            CONF.conductor.conductor_group or '',
        )
        membership.start()
        self._affinity_membership = membership

    def stop(self: Any) -> None:
        # Leave first: the others re-place our nodes now rather than
        # after the member timeout.
        membership = getattr(self, '_affinity_membership', None)
        if membership is not None:
            membership.stop()
        original_stop(self)

    rpc_service.RPCService.start = start
    rpc_service.RPCService.stop = stop
    rpc_service.RPCService._affinity_wrapped = True
    _note_reloads()


def _note_reloads() -> None:
    """Tell membership when the worker restarts for a SIGHUP.

    Ironic 39 runs the conductor under cotyledon, whose workers handle
    SIGHUP by reloading options and then terminating, to be started again
    at once (oslo.service's wrapper does not implement reload). Even a
    SIGHUP that changes no option does this, so the options' mutate hook
    is not enough to tell that stop from a shutdown.
    """
    try:
        import cotyledon
    except ImportError:  # another oslo.service backend: no restart
        return
    from ironic_affinity.membership import service

    original = cotyledon.Service.reload
    if getattr(original, '_affinity_wrapped', False):
        return

    def reload(self: Any) -> None:
        service.reload_requested()
        original(self)

    reload._affinity_wrapped = True  # type: ignore[attr-defined]
    cotyledon.Service.reload = reload


def conductor() -> Any:
    """ironic-affinity-conductor: ironic-conductor with affinity."""
    command = ironic_command('conductor')
    from ironic_affinity.integration import loader

    loader.install()
    _install_membership()
    return command.main()


def api() -> Any:
    """ironic-affinity-api: ironic-api with affinity.

    Also puts the affinity API middleware in front of Ironic's application
    (see :mod:`ironic_affinity.integration.api_app`), so that bad node
    tags are refused at the door whichever way the API is started.
    """
    command = ironic_command('api')
    from ironic_affinity.integration import api_app

    api_app.install()
    return command.main()


def singleprocess() -> Any:
    """ironic-affinity-singleprocess: ironic (all in one) with affinity."""
    command = ironic_command('singleprocess')
    from ironic_affinity.integration import api_app

    api_app.install()
    _install_membership()
    return command.main()


if __name__ == '__main__':
    sys.exit(conductor())
