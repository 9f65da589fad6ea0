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

"""The ring objects Ironic's callers receive from our ring manager.

Ironic uses a ring in three ways (see doc/source/contributor/ironic.rst):
``get_nodes(uuid).pop()`` to route a node's request, ``host in
get_nodes(uuid)`` in conductors' periodic tasks, and ``ring.nodes`` to
pick any conductor for a hardware type. A node with no valid conductor
must fail the first cleanly (NoValidHost, a 4xx at the API) and read as
"not mine" in the second: :class:`NoValidConductor` is an empty set whose
pop() raises NoValidHost with the reason.
"""

from collections.abc import Callable
from collections.abc import Iterable
import math
import time

from ironic_affinity import engine
from ironic_affinity import exception
from ironic_affinity import placement
from ironic_affinity import profile
from ironic_affinity import rendezvous
from ironic_affinity.integration.node_tags import fresh_nodes
from ironic_affinity.integration.ring import capacity_state

#: A node's tags by uuid: None for a node not in the database; raises
#: NodeTagsUnreadable (see node_tags.NodeTagCache.lookup).
NodeLookup = Callable[[str], frozenset[str] | None]
#: When a node was created, by uuid, as held after a NodeLookup of it
#: (see node_tags.NodeTagCache.created_at); None when unknown.
CreatedLookup = Callable[[str], float | None]


def uuid_of(data: bytes | str) -> str:
    """The node's uuid from what Ironic passes to ``get_nodes``."""
    return data.decode('utf-8') if isinstance(data, bytes) else data


class NoValidConductor(set[str]):
    """No conductor may take the node: empty, and pop() says why."""

    def __init__(self, reason: str, error: Callable[[str], Exception]):
        super().__init__()
        self.reason = reason
        self._error = error

    def pop(self) -> str:
        raise self._error(self.reason)


class AffinityRing:
    """The conductors of one hardware type and conductor group."""

    def __init__(
        self,
        placer: placement.Placement,
        driver: str,
        group: str,
        members: Iterable[str],
        node_tags: NodeLookup,
        on_orphan: Callable[[str, engine.Evaluation], str],
        error: Callable[[str], Exception],
        under_capacity: capacity_state.SettledLookup | None = None,
        clock: Callable[[], float] = time.time,
        created_at: CreatedLookup | None = None,
    ) -> None:
        """:param placer: where nodes go (ironic_affinity.placement).
        :param under_capacity: given when a conductor has a
            ``max_nodes``: then a node's conductor depends on the other
            nodes, and this gives the node set to answer from.
        :param clock: seconds since the epoch, as conductors publish
            their changes: read while a change rolls out.
        :param created_at: when a node was created: one created after a
            change began follows it at once."""
        self.placer = placer
        self.driver = driver
        self.group = group
        #: Conductor names, as Ironic's rings have them.
        self.nodes = frozenset(members)
        self._node_tags = node_tags
        self._on_orphan = on_orphan
        self._error = error
        self._under_capacity = under_capacity
        self._clock = clock
        self._created_at = created_at

    def created(self, uuid: str, node_tags: frozenset[str]) -> float | None:
        """When the node was created, as far as this process knows: now
        for the node this thread is creating."""
        if isinstance(node_tags, fresh_nodes.BeingCreated):
            return float(math.ceil(self._clock()))
        if self._created_at is None:
            return None
        return self._created_at(uuid)

    def created_of(self, uuid: str) -> float | None:
        """When the node was created, looking it up as :meth:`get_nodes`
        does; None when unknown or unreadable."""
        try:
            node_tags = self._node_tags(uuid)
        except exception.NodeTagsUnreadable:
            return None
        return None if node_tags is None else self.created(uuid, node_tags)

    def request(
        self, uuid: str, node_tags: frozenset[str]
    ) -> profile.NodeRequest:
        return profile.NodeRequest(
            name=uuid,
            tags=node_tags,
            uuid=uuid,
            driver=self.driver,
            conductor_group=self.group,
            # Only a timed placement (a change being rolled out) reads it.
            created_at=(
                self.created(uuid, node_tags) if self.placer.timed else None
            ),
        )

    def get_nodes(
        self,
        data: bytes | str,
        ignore_nodes: Iterable[str] | None = None,
        replicas: int = 1,
    ) -> set[str]:
        """The conductor(s) for the node whose uuid is ``data``.

        With replicas > 1 or ignore_nodes, the first conductors of the
        node's fallback order (:meth:`placement.Placement.fallback_order`)
        that are not ignored.
        """
        uuid = uuid_of(data)
        ignored = set(ignore_nodes or ())
        try:
            node_tags = self._node_tags(uuid)
        except exception.NodeTagsUnreadable as exc:
            # Placed by no tags would break its hard tags: nobody works
            # it until its row can be read (the database is away, and
            # Ironic with it).
            return NoValidConductor(str(exc), self._error)
        if node_tags is None:
            # No such node in the database: Ironic routes a creation
            # before the row exists, and when no API process of ours saw
            # what it creates (fresh_nodes.creating), all that happens
            # there is the row's insert. Any live conductor is a valid
            # destination, in rendezvous order over all of them so that
            # replicas and ignore_nodes mean what they mean for a known
            # node; the node is placed by its tags from its row on.
            return self._hashed(uuid, ignored, replicas)
        node = self.request(uuid, node_tags)
        settled, held = None, None
        if self._under_capacity is not None:
            settled, held = self._under_capacity(uuid)
        now = self._clock() if self.placer.timed else None
        if replicas == 1 and not ignored:
            conductor = self.placer.conductor(node, now, settled, held)
            if conductor is not None:
                return {conductor}
        else:
            order = [
                c
                for c in self.placer.fallback_order(node, now, settled, held)
                if c not in ignored
            ]
            if order:
                return set(order[:replicas])
        if isinstance(node_tags, fresh_nodes.BeingCreated):
            # Created with tags no live conductor accepts: the creation
            # (the row's insert) still goes through, and the node is an
            # orphan from its first lookup on, with the reason.
            return self._hashed(uuid, ignored, replicas)
        reason = self._on_orphan(node.name, self.placer.evaluate(node))
        return NoValidConductor(reason, self._error)

    def excludes(self, uuid: str, conductor: str) -> bool:
        """Whether affinity placement forbids ``conductor`` the node now:
        it is not a live member, or the node's hard tags (or its group or
        hardware type) rule it out. Unreadable tags forbid it: hard tags
        may be among them."""
        if conductor not in self.nodes:
            return True
        try:
            node_tags = self._node_tags(uuid)
        except exception.NodeTagsUnreadable:
            return True
        if node_tags is None:
            return False  # no row yet: no tags to break
        for verdict in self.placer.evaluate(
            self.request(uuid, node_tags)
        ).verdicts:
            if verdict.conductor == conductor:
                return verdict.excluded is not None
        return True

    def _hashed(self, uuid: str, ignored: set[str], replicas: int) -> set[str]:
        """Conductors by hashing alone, as for a node without a row."""
        order = [
            c
            for c in rendezvous.ranking(
                uuid.encode('utf-8'), sorted(self.nodes)
            )
            if c not in ignored
        ]
        if order:
            return set(order[:replicas])
        return NoValidConductor(
            'every conductor of the ring is ignored', self._error
        )


class UnreachableRing:
    """Conductors of this hardware type and group are active in Ironic,
    but none is in the affinity group: nothing can be placed, and every
    lookup says why (instead of Ironic's "no conductor supports this
    driver", which would send the operator looking at drivers)."""

    #: No conductor to pick: callers that choose from ``nodes`` get
    #: DriverNotFound from the ring manager instead of this ring.
    nodes: frozenset[str] = frozenset()

    def __init__(self, reason: str, error: Callable[[str], Exception]):
        self.reason = reason
        self._error = error

    def get_nodes(
        self,
        data: bytes | str,
        ignore_nodes: Iterable[str] | None = None,
        replicas: int = 1,
    ) -> set[str]:
        return NoValidConductor(self.reason, self._error)
