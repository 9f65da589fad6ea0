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
    """Join the group before Ironic lists the conductor; leave on stop.

    For an Ironic without the pluggable hash-ring manager: Ironic's
    conductor service is wrapped to call conductor_lifecycle where an
    Ironic with it calls the ring manager's hooks (contrib/ironic/): just
    before the conductor registers its hardware interfaces, and first
    thing as it stops, while it still serves. Should the start fail after
    the join, the conductor leaves again.
    """
    from ironic.conductor import rpc_service

    from ironic_affinity.integration import conductor_lifecycle

    if getattr(rpc_service.RPCService, '_affinity_wrapped', False):
        return
    original_start = rpc_service.RPCService.start
    original_stop = rpc_service.RPCService.stop

    def join_before_registering(manager: Any) -> None:
        # On this instance only: importing the manager's module here
        # would import Ironic's conductor before its command has set the
        # process up.
        original = getattr(
            manager, '_register_and_validate_hardware_interfaces', None
        )
        if original is None:
            return

        def register(hardware_types: Any) -> Any:
            conductor_lifecycle.starting(manager.host)
            return original(hardware_types)

        manager._register_and_validate_hardware_interfaces = register

    def start(self: Any) -> None:
        join_before_registering(self.manager)
        try:
            original_start(self)
        except BaseException:
            conductor_lifecycle.stopping(self.manager.host)
            raise
        # Should a release register without the method wrapped above,
        # join now rather than never.
        conductor_lifecycle.starting(self.manager.host)

    def stop(self: Any) -> None:
        # Leave first: the others re-place our nodes now rather than
        # after the member timeout; unless Ironic keeps the conductor
        # registered (SIGUSR1, for a restart), when the entry stays until
        # the member timeout, and the nodes with it.
        conductor_lifecycle.stopping(self.manager.host, not _deregisters(self))
        original_stop(self)

    rpc_service.RPCService.start = start
    rpc_service.RPCService.stop = stop
    rpc_service.RPCService._affinity_wrapped = True
    conductor_lifecycle.note_reloads()


def _deregisters(rpc_service: Any) -> bool:
    """Whether Ironic deregisters the conductor as this service stops:
    ``deregister_on_shutdown`` since Ironic 2026.1, ``deregister``
    before; both false after SIGUSR1."""
    if hasattr(type(rpc_service), 'deregister_on_shutdown'):
        return bool(rpc_service.deregister_on_shutdown)
    return bool(getattr(rpc_service, 'deregister', True))


def _warm_api() -> None:
    """Warm up each API worker as it starts serving (it is forked from
    the parent that built the application, where no thread may start)."""
    from ironic.common import wsgi_service

    original = wsgi_service.WSGIService.start
    if getattr(original, '_affinity_wrapped', False):
        return

    def start(self: Any) -> None:
        from ironic_affinity.integration import conductor_lifecycle

        conductor_lifecycle.warm_up()
        original(self)

    start._affinity_wrapped = True  # type: ignore[attr-defined]
    wsgi_service.WSGIService.start = start


def conductor() -> Any:
    """ironic-affinity-conductor: ironic-conductor with affinity."""
    command = ironic_command('conductor')
    from ironic_affinity.integration.ring import loader

    loader.install('ironic-affinity-conductor')
    if not loader.ironic_has_hook():
        _install_membership()  # Ironic calls the ring manager's hooks
    return command.main()


def api() -> Any:
    """ironic-affinity-api: ironic-api with affinity.

    Also puts the affinity API middleware in front of Ironic's application
    (see :mod:`ironic_affinity.integration.api.api_app`), so that bad node
    tags are refused at the door whichever way the API is started.
    """
    command = ironic_command('api')
    from ironic_affinity.integration.api import api_app

    api_app.install('ironic-affinity-api')
    _warm_api()
    return command.main()


def singleprocess() -> Any:
    """ironic-affinity-singleprocess: ironic (all in one) with affinity."""
    command = ironic_command('singleprocess')
    from ironic_affinity.integration.api import api_app

    api_app.install('ironic-affinity-singleprocess')
    _warm_api()
    from ironic_affinity.integration.ring import loader

    if not loader.ironic_has_hook():
        _install_membership()  # Ironic calls the ring manager's hooks
    return command.main()


if __name__ == '__main__':
    sys.exit(conductor())
