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

"""The hash-ring manager Ironic uses in place of its own, with affinity.

It keeps the contract of Ironic's ``HashRingManager`` (see
doc/source/contributor/ironic.rst): the constructor keywords
``use_groups`` and ``cache``; ``get_ring(driver, group)`` raising
TemporaryFailure when no conductor is active and DriverNotFound when none
runs that hardware type (in that group), retried once after a reset;
``reset()`` making the next lookup read the active conductors again; a
ring without groups spanning every group; no re-reading on SQLite. What
differs is who a node goes to: the engine's choice over the conductors
that are both active in Ironic and in the affinity group; or, while the
deployment places by Ironic's ring or switches between the two
(ironic_affinity.adoption), Ironic's own ring's for the nodes on its
side.

This module is only the binding to Ironic (its exceptions and its
configuration); the state lives in
:mod:`ironic_affinity.integration.process_services`.
"""

import time
from typing import Any

from ironic.common import exception as ironic_exception
from ironic.common import hash_ring
from ironic.conf import CONF

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity.integration import conductor_lifecycle
from ironic_affinity.integration import enabling
from ironic_affinity.integration import process_services
from ironic_affinity.integration.node_tags import change_notices
from ironic_affinity.integration.ring import adoption_ring
from ironic_affinity.integration.ring import loader
from ironic_affinity.integration.ring import placement_state
from ironic_affinity.integration.ring import rings


def _no_valid_host(reason: str) -> Exception:
    return ironic_exception.NoValidHost(reason=reason)  # type: ignore[no-any-return]


# The contract's base class, on an Ironic which has it (contrib/ironic/).
_BASE: Any = getattr(hash_ring, 'BaseHashRingManager', object)


class AffinityHashRingManager(_BASE):  # type: ignore[misc]
    """Ironic's HashRingManager contract, placing by affinity."""

    def __init__(self, use_groups: bool = True, cache: bool = True) -> None:
        loader.register_options()
        self.use_groups = use_groups
        self.cache = cache

    @classmethod
    def reset(cls) -> None:
        loader.reset_stock()
        services = process_services.if_started()
        if services is not None:
            services.states.reset()

    # The conductor's hooks of an Ironic with the pluggable hash-ring
    # manager (contrib/ironic/), called on the manager its conductor
    # builds; the launchers call the same functions on other releases.

    def conductor_started(self, host: str) -> None:
        """Join the group as ``host``: Ironic has registered the conductor
        and is about to register its hardware interfaces."""
        conductor_lifecycle.starting(host)

    def conductor_stopping(self, host: str, deregister: bool) -> None:
        """Leave the group: the conductor stops, while it still serves.
        Ironic then serves on through its wait for the other services'
        rings, which is most or all of the drain. ``deregister`` False:
        Ironic keeps it registered, for a restart, and so does the group,
        until the member timeout."""
        conductor_lifecycle.stopping(
            host,
            staying_registered=not deregister,
            ironic_serves_for=conductor_lifecycle.ironic_serves_for(host),
        )

    def get_ring(self, driver_name: str, conductor_group: str) -> Any:
        _announce_if_api()
        try:
            return self._get_ring(driver_name, conductor_group)
        except (
            ironic_exception.DriverNotFound,
            ironic_exception.TemporaryFailure,
        ):
            # As Ironic does: a conductor may just have come or gone.
            self.reset()
        return self._get_ring(driver_name, conductor_group)

    def _get_ring(self, driver_name: str, conductor_group: str) -> Any:
        services = process_services.started(CONF)
        states = services.states
        state = states.current() if self.cache else states.fresh()
        switches = state.agreement.adoption
        all_on = switches.all_on(time.time())
        if all_on == adoption.STOCK:
            # Every node is on Ironic's ring: Ironic's own answers, from
            # Ironic's own manager, whatever the members.
            return self._stock_ring(driver_name, conductor_group)
        if not state.active:
            raise ironic_exception.TemporaryFailure()
        group = (conductor_group or '') if self.use_groups else ''
        found = state.memo(
            (driver_name, group, self.use_groups),
            lambda: self._build_ring(services, state, driver_name, group),
        )
        if all_on is not None:
            if found is None:
                raise ironic_exception.DriverNotFound(driver_name=driver_name)
            return found
        # A switch runs: each node on its side of the moment.
        try:
            stock = self._stock_ring(driver_name, conductor_group)
        except ironic_exception.DriverNotFound:
            stock = None
        if stock is None and found is None:
            raise ironic_exception.DriverNotFound(driver_name=driver_name)
        return adoption_ring.SwitchingRing(switches, stock, found)

    def _stock_ring(self, driver_name: str, conductor_group: str) -> Any:
        return loader.stock_manager(
            use_groups=self.use_groups, cache=self.cache
        ).get_ring(driver_name, conductor_group)

    def _build_ring(
        self,
        services: process_services.ProcessServices,
        state: placement_state.PlacementState,
        driver_name: str,
        group: str,
    ) -> rings.AffinityRing | rings.UnreachableRing | None:
        hosts = state.hosts(driver_name, group, self.use_groups)
        if not hosts:
            return None  # as Ironic: nobody runs it
        live = state.live(driver_name, group, self.use_groups)
        if not live:
            if not self.use_groups:
                # Callers of rings without groups pick any conductor from
                # ring.nodes (the driver endpoints): give them the error
                # they handle, not an empty list.
                return None
            return rings.UnreachableRing(
                services.orphans.not_in_group(driver_name, group, hosts),
                _no_valid_host,
            )
        placer = state.placements[self.use_groups]
        return rings.AffinityRing(
            placer,
            driver_name,
            group.lower(),
            live,
            services.node_tags.lookup,
            services.orphans.excluded,
            _no_valid_host,
            services.capacity.lookup(placer, self.use_groups),
            created_at=services.node_tags.created_at,
        )


def _announce_if_api() -> None:
    """Announce this process in the API group, as the middleware does,
    where only Ironic's own option enabled the plugin: an API process
    without the middleware, whose first ring lookup is this one (after
    Ironic's workers have forked; with the middleware, the middleware
    announced the process before Ironic's application ran). Not in a
    conductor's process, which is in the conductors' group."""
    if (
        loader.enabled_by() == loader.BY_IRONIC_CONF
        and not conductor_lifecycle.is_conductor()
    ):
        process_services.mark_api_process()
        change_notices.announce(
            CONF, enabling.BY_IRONIC_CONF_WITHOUT_MIDDLEWARE
        )


def conductor_of(node: profile.NodeRequest) -> str | None:
    """The node's conductor as this process's ring answers Ironic; None
    when none may take it (for the placement metrics)."""
    try:
        ring = AffinityHashRingManager().get_ring(
            node.driver or '', node.conductor_group
        )
        return str(ring.get_nodes(node.hash_key).pop())
    except Exception:  # noqa: BLE001 - no conductor, whatever the reason
        return None


process_services.RING_LOOKUP = conductor_of
