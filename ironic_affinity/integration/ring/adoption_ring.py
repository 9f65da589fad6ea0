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

"""The ring a process gives Ironic while nodes switch sides.

While a switch between Ironic's ring and affinity placement runs
(:mod:`ironic_affinity.adoption`), each node is on one side or the other
at each moment, the same in every process: this ring asks the side's own
ring, Ironic's unchanged one or :class:`rings.AffinityRing`. Moves that
cannot wait do not: once a switch to affinity has begun, a node on
Ironic's side whose conductor there is not a live member of the group,
or is ruled out by the node's hard tags, goes to its affinity conductor
at once, in every process alike.
"""

from collections.abc import Callable
from collections.abc import Iterable
import time
from typing import Any

from ironic_affinity import adoption
from ironic_affinity.integration.ring import rings


class SwitchingRing:
    """One hardware type and group's ring during a switch."""

    def __init__(
        self,
        switches: adoption.Adoption,
        stock: Any | None,
        affinity: rings.AffinityRing | rings.UnreachableRing | None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """:param stock: Ironic's own ring for the same hardware type and
            group; None when Ironic has none (no conductor runs it).
        :param affinity: the affinity ring; None when no conductor of the
            group runs the hardware type."""
        self.switches = switches
        self.stock = stock
        self.affinity = affinity
        self._clock = clock or time.time
        #: Conductor names, as Ironic's rings have them: whoever either
        #: side may give a node to.
        self.nodes = frozenset(
            getattr(stock, 'nodes', frozenset())
        ) | frozenset(getattr(affinity, 'nodes', frozenset()))

    def get_nodes(
        self,
        data: bytes | str,
        ignore_nodes: Iterable[str] | None = None,
        replicas: int = 1,
    ) -> set[str]:
        uuid = rings.uuid_of(data)
        now = self._clock()
        side = self.switches.side(
            uuid.encode('utf-8'), now, self._created_at(uuid, now)
        )
        if self.stock is not None and (
            side == adoption.STOCK or self.affinity is None
        ):
            found: set[str] = self.stock.get_nodes(
                data, ignore_nodes=ignore_nodes, replicas=replicas
            )
            if self.affinity is None or not self._forced_away(
                uuid, found, now
            ):
                return found
        if self.affinity is None:
            raise ValueError('a switching ring needs at least one side')
        return self.affinity.get_nodes(
            data, ignore_nodes=ignore_nodes, replicas=replicas
        )

    def _created_at(self, uuid: str, now: float) -> float | None:
        """When the node was created, while a switch runs: one created
        after it began is on its side from the start."""
        if not self.switches.active(now) or not isinstance(
            self.affinity, rings.AffinityRing
        ):
            return None
        return self.affinity.created_of(uuid)

    def _forced_away(self, uuid: str, found: set[str], now: float) -> bool:
        newest = self.switches.switches[-1]
        if newest.to != adoption.AFFINITY or now < newest.at:
            # Only once a switch to affinity has begun: it is recorded a
            # member timeout ahead, so that every process knows of it by
            # then; and a switch back to Ironic's ring takes nodes out of
            # affinity placement, hard tags with it.
            return False
        if not isinstance(self.affinity, rings.AffinityRing):
            # No live member runs this hardware type in this group: there
            # is nowhere to force the node to.
            return False
        return any(self.affinity.excludes(uuid, c) for c in found)
