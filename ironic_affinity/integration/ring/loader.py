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

"""Putting the configured hash-ring manager into Ironic's processes.

What Ironic builds is :class:`ConfiguredHashRingManager`, which builds
whichever plugin ``[affinity]hash_ring_manager`` names in the
``ironic_affinity.hash_ring_managers`` namespace (``affinity``, or the
``stock`` vote), read when the first manager is built, after Ironic has
parsed its configuration. It reaches Ironic one of two ways:

- an Ironic with the pluggable hash-ring manager (contrib/ironic/) loads
  it itself: it is registered as ``affinity`` in Ironic's
  ``ironic.hash_ring_managers`` namespace, and ``[DEFAULT]
  hash_ring_manager = affinity`` in ironic.conf enables it, with no
  launcher;
- on any other Ironic, :func:`install` replaces
  ``ironic.common.hash_ring.HashRingManager``, which Ironic looks up each
  time it builds a manager, once, before Ironic's own ``main()`` runs: no
  Ironic file is edited.
"""

import functools
from typing import Any

from ironic.common import hash_ring
from ironic.conf import CONF
from oslo_config import cfg
from oslo_log import log
import stevedore
from stevedore import exception as stevedore_exception

from ironic_affinity import conf as affinity_conf
from ironic_affinity import exception
from ironic_affinity._i18n import _
from ironic_affinity.integration import enabling

LOG = log.getLogger(__name__)

NAMESPACE = 'ironic_affinity.hash_ring_managers'

# Ironic's own class, kept before we replace it, for the "stock" plugin.
_ORIGINAL: Any = hash_ring.HashRingManager


@functools.cache
def load(name: str) -> Any:
    """The hash-ring manager class (or factory) registered as ``name``.

    :raises: UnknownHashRingManager naming the namespace and the name.
    """
    try:
        manager: stevedore.DriverManager[Any] = stevedore.DriverManager(
            NAMESPACE, name, invoke_on_load=False
        )
    except stevedore_exception.NoMatches as exc:
        raise exception.UnknownHashRingManager(
            _(
                '[affinity]hash_ring_manager = %(name)s: no such plugin in '
                'namespace %(ns)s'
            )
            % {'name': name, 'ns': NAMESPACE}
        ) from exc
    LOG.info('Hash-ring manager: %(name)s', {'name': name})
    return manager.driver


def stock_manager(use_groups: bool = True, cache: bool = True) -> Any:
    """Ironic's own hash-ring manager, as it was before install(): what
    the affinity manager answers with while the deployment places by
    Ironic's ring (see ironic_affinity.adoption)."""
    return _ORIGINAL(use_groups=use_groups, cache=cache)


stock_manager.reset = lambda: _ORIGINAL.reset()  # type: ignore[attr-defined]


IRONIC_NAME = enabling.IRONIC_NAME
BY_IRONIC_CONF = enabling.BY_IRONIC_CONF


def ironic_has_hook() -> bool:
    """Whether this Ironic has the pluggable hash-ring manager."""
    return enabling.ironic_has_hook(hash_ring)


#: How the plugin reached this process, as :func:`enabled_by` says it.
BY_IRONIC_CONF = 'ironic.conf'
_INSTALLED_BY: str | None = None


def enabled_by() -> str | None:
    """How the plugin reached this process: the command or middleware
    that called :func:`install` first, or ``ironic.conf`` (Ironic's own
    ``[DEFAULT]hash_ring_manager``), or None: not at all."""
    if _INSTALLED_BY is not None:
        return _INSTALLED_BY
    if (
        ironic_has_hook()
        and getattr(CONF, 'hash_ring_manager', None) == IRONIC_NAME
    ):
        return BY_IRONIC_CONF
    return None


def _register_options() -> None:
    try:
        affinity_conf.register_opts(CONF)
    except cfg.DuplicateOptError:
        pass  # already registered, by an earlier call


class ConfiguredHashRingManager:
    """Stands where Ironic looks for its HashRingManager class, or is
    loaded by Ironic as ``affinity``."""

    def __new__(cls, use_groups: bool = True, cache: bool = True) -> Any:
        # Loaded by Ironic itself, this is the plugin's first code to run
        # in the process: options registered after Ironic parsed its
        # configuration are read from it all the same.
        _register_options()
        factory = load(CONF.affinity.hash_ring_manager)
        return factory(use_groups=use_groups, cache=cache)

    @classmethod
    def reset(cls) -> None:
        load(CONF.affinity.hash_ring_manager).reset()


def install(by: str) -> None:
    """Register our options on Ironic's CONF and put our manager in
    Ironic's place, the way this Ironic allows.

    With the hook, by Ironic's own option, set here as an override so
    that a launcher or the middleware enables the plugin whatever
    ironic.conf says, as it does on an Ironic without the hook; and
    Ironic's class stays Ironic's, so that the plugin is never installed
    twice. Idempotent. Call before Ironic parses its configuration.

    :param by: what installs it (a command, the middleware), for
        :func:`enabled_by`: the first caller is the one that counts.
    """
    global _INSTALLED_BY
    _register_options()
    if ironic_has_hook():
        # Read before any override: ironic.conf has it already where the
        # middleware is built (after parsing), never where a launcher
        # runs (before).
        if enabled_by() is None:
            _INSTALLED_BY = by
            CONF.set_override('hash_ring_manager', IRONIC_NAME)
        return
    if _INSTALLED_BY is None:
        _INSTALLED_BY = by
    hash_ring.HashRingManager = ConfiguredHashRingManager
