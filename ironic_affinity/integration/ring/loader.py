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

Ironic looks up ``ironic.common.hash_ring.HashRingManager`` each time it
builds a manager, so replacing that attribute once, before Ironic's own
``main()`` runs, is enough: no Ironic file is edited. What replaces it
is :class:`ConfiguredHashRingManager`, which builds whichever plugin
``[affinity]hash_ring_manager`` names in the
``ironic_affinity.hash_ring_managers`` namespace, read when the first
manager is built (after Ironic has parsed its configuration).
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


class ConfiguredHashRingManager:
    """Stands where Ironic looks for its HashRingManager class."""

    def __new__(cls, use_groups: bool = True, cache: bool = True) -> Any:
        factory = load(CONF.affinity.hash_ring_manager)
        return factory(use_groups=use_groups, cache=cache)

    @classmethod
    def reset(cls) -> None:
        load(CONF.affinity.hash_ring_manager).reset()


def install() -> None:
    """Register our options on Ironic's CONF and replace its manager.

    Idempotent. Call before Ironic parses its configuration.
    """
    try:
        affinity_conf.register_opts(CONF)
    except cfg.DuplicateOptError:
        pass  # already registered, by an earlier install()
    hash_ring.HashRingManager = ConfiguredHashRingManager
