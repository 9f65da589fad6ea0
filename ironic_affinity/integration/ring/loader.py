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

"""Putting the affinity hash-ring manager into Ironic's processes.

What Ironic builds is
:class:`~ironic_affinity.integration.ring.ring_manager.AffinityHashRingManager`,
for either value of ``[affinity]hash_ring_manager`` (``stock`` is a
conductor's vote for Ironic's ring, which that manager honours). It
reaches Ironic one of two ways:

- an Ironic with the pluggable hash-ring manager (contrib/ironic/) loads
  it itself: it is registered as ``affinity`` in Ironic's
  ``ironic.hash_ring_managers`` namespace, and ``[DEFAULT]
  hash_ring_manager = affinity`` in ironic.conf enables it, with no
  launcher;
- on any other Ironic, :func:`install` loads it by that same entry
  point and replaces ``ironic.common.hash_ring.HashRingManager``, which
  Ironic looks up each time it builds a manager, once, before Ironic's
  own ``main()`` runs: no Ironic file is edited.
"""

from typing import Any

from ironic.common import hash_ring
from ironic.conf import CONF
from oslo_config import cfg
import stevedore
from stevedore import exception as stevedore_exception

from ironic_affinity import conf as affinity_conf
from ironic_affinity import exception
from ironic_affinity._i18n import _
from ironic_affinity.integration import enabling

# Ironic's own class, kept before we replace it: what the affinity
# manager answers with while the deployment places by Ironic's ring.
_ORIGINAL: Any = hash_ring.HashRingManager

IRONIC_NAME = enabling.IRONIC_NAME
# Ironic's namespace of hash-ring managers, where ours is IRONIC_NAME.
NAMESPACE = 'ironic.hash_ring_managers'
BY_IRONIC_CONF = enabling.BY_IRONIC_CONF

# How the plugin reached this process, as enabled_by() says it.
_INSTALLED_BY: str | None = None


def stock_manager(use_groups: bool = True, cache: bool = True) -> Any:
    """Ironic's own hash-ring manager, as it was before :func:`install`."""
    return _ORIGINAL(use_groups=use_groups, cache=cache)


def reset_stock() -> None:
    """Ironic's own manager's ``reset()``."""
    _ORIGINAL.reset()


def ironic_has_hook() -> bool:
    """Whether this Ironic has the pluggable hash-ring manager, with its
    conductor hooks."""
    return enabling.ironic_has_hook(hash_ring)


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


def register_options() -> None:
    """Our options on Ironic's CONF; again is harmless. Loaded by Ironic
    itself, the manager runs this first: options registered after Ironic
    parsed its configuration are read from it all the same."""
    if affinity_conf.GROUP.name in CONF:
        return  # the common case: Ironic builds a manager per request
    try:
        affinity_conf.register_opts(CONF)
    except cfg.DuplicateOptError:
        pass  # registered by another thread meanwhile


def install(by: str) -> None:
    """Register our options on Ironic's CONF and put our manager in
    Ironic's place, the way this Ironic allows.

    Where Ironic loads its manager by name, by Ironic's own option, set
    here as an override so that a launcher or the middleware enables the
    plugin whatever ironic.conf says, as it does on an Ironic without the
    option; and Ironic's class stays Ironic's, so that the plugin is never
    installed twice. Idempotent. Call before Ironic parses its
    configuration.

    :param by: what installs it (a command, the middleware), for
        :func:`enabled_by`: the first caller is the one that counts.
    """
    global _INSTALLED_BY
    register_options()
    if enabling.ironic_loads_by_name(hash_ring):
        # Read before any override: ironic.conf has it already where the
        # middleware is built (after parsing), never where a launcher
        # runs (before).
        if enabled_by() is None:
            _INSTALLED_BY = by
            CONF.set_override('hash_ring_manager', IRONIC_NAME)
        return
    if _INSTALLED_BY is None:
        _INSTALLED_BY = by
    hash_ring.HashRingManager = affinity_manager()


def affinity_manager() -> Any:
    """Our manager class, by the entry point an Ironic with the hook
    loads: one name for both ways in.

    :raises: UnknownHashRingManager when the entry point is not installed.
    """
    try:
        return stevedore.DriverManager(
            NAMESPACE, IRONIC_NAME, invoke_on_load=False
        ).driver
    except stevedore_exception.NoMatches as exc:
        raise exception.UnknownHashRingManager(
            _(
                'No hash-ring manager %(name)s in namespace %(ns)s: '
                'reinstall ironic-affinity'
            )
            % {'name': IRONIC_NAME, 'ns': NAMESPACE}
        ) from exc
